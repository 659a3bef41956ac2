//! The text of a performance prediction (`plan --concurrency ...`): the serving point, TTFT,
//! TPOT, tokens/s, the prefill and decode-step split, the roofline table of the node kinds that
//! take the most time, and the rules every figure follows (docs/performance-model.md).

use crate::perf::{Performance, ServingPoint};

/// The line saying how the requests' lengths were drawn, when they vary (`--lengths`).
pub fn lengths_line(s: &ServingPoint) -> Option<String> {
    if s.lengths.is_fixed() {
        return None;
    }
    let (input, output) = s.lengths.mean(s.input_tokens, s.output_tokens);
    let (il, ih) = s.lengths.range(s.input_tokens, false);
    let (ol, oh) = s.lengths.range(s.output_tokens, true);
    let ratio = match &s.lengths {
        crate::perf::Lengths::SglangRandom { range_ratio, seed } => {
            format!(" (range ratio {range_ratio}, seed {seed})")
        }
        crate::perf::Lengths::VllmRandom { range_ratio } => {
            format!(" (range ratio {range_ratio})")
        }
        _ => String::new(),
    };
    Some(format!(
        "{}{ratio}: prompts {il}..{ih} tokens (mean {input:.1}), outputs {ol}..{oh} (mean {output:.1}); one prompt and the decode step below at the mean lengths",
        s.lengths.name()
    ))
}

fn ms(seconds: f64) -> String {
    format!("{:.2} ms", seconds * 1e3)
}

/// The text block of a performance prediction; `raised_from` is the policy's sequence ceiling
/// when `--concurrency` raised it.
pub fn performance_text(p: &Performance, raised_from: Option<u32>) -> String {
    let s = &p.serving_point;
    let mut out = String::new();
    out.push_str(&format!(
        "\nperformance (model: docs/performance-model.md; {} engine profile on {}):\n",
        s.engine, p.device
    ));
    out.push_str(&format!(
        "  serving point           concurrency {}, {} input tokens, {} output tokens, budget {} tokens/step, at most {} sequences\n",
        s.concurrency, s.input_tokens, s.output_tokens, s.scheduled_token_budget, s.maximum_sequences
    ));
    if let Some(lengths) = lengths_line(s) {
        out.push_str(&format!("  request lengths         {lengths}\n"));
    }
    if let Some(old) = raised_from {
        out.push_str(&format!(
            "  policy sequence ceiling raised from {old} to {} to follow --concurrency\n",
            s.concurrency
        ));
    }
    out.push_str(&format!(
        "  TTFT                    {} (mean over {} simulated requests, {} steps)\n",
        ms(p.ttft_seconds),
        s.simulated_requests,
        p.simulated_steps
    ));
    out.push_str(&format!(
        "  TPOT                    {}\n",
        ms(p.tpot_seconds)
    ));
    out.push_str(&format!(
        "  output tokens/s         {:.1} total, {:.1} per device, {:.1} per user (1 / TPOT)\n",
        p.output_tokens_per_second,
        p.output_tokens_per_second_per_device,
        p.output_tokens_per_second_per_user
    ));
    for (name, t) in [
        ("prefill (one prompt)", &p.prefill),
        ("decode step", &p.decode_step),
    ] {
        out.push_str(&format!(
            "  {name:<23} {} (compute {}, memory {}, overhead {})\n",
            ms(t.seconds),
            ms(t.compute_seconds),
            ms(t.memory_seconds),
            ms(t.overhead_seconds)
        ));
    }
    out.push_str("  roofline by node kind (decode step; prefill: the first chunk):\n");
    out.push_str("    kind                               class            nodes   decode   share  bound     prefill  share  bound\n");
    for k in p.by_kind.iter().take(8) {
        out.push_str(&format!(
            "    {:<34} {:<16} {:>5} {:>10} {:>5.1}%  {:<7} {:>10} {:>5.1}%  {}\n",
            k.kind,
            k.class,
            k.nodes,
            ms(k.decode_seconds),
            k.decode_share * 100.0,
            k.decode_bound,
            ms(k.prefill_seconds),
            k.prefill_share * 100.0,
            k.prefill_bound
        ));
    }
    if p.by_kind.len() > 8 {
        out.push_str(&format!(
            "    ... {} more kinds (--json lists every one)\n",
            p.by_kind.len() - 8
        ));
    }
    out.push_str("  rules:\n");
    for rule in &p.rules {
        out.push_str(&format!("    {rule}\n"));
    }
    out
}
