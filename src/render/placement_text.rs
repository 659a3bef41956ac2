//! The text of a placement across devices (`plan MODEL --devices SET.json`): the placement
//! id, the decisions (stages, tensor parallelism, expert split, host offload), how the optimum
//! was certified, the checker's verdict, and each device's memory by item (docs/placement.md).

use std::fmt::Write;
use std::path::Path;

use crate::placement::Placed;
use crate::render::summary::{human_bytes, human_signed_bytes};

/// The text of a placement; `output` is the file it was written to, if any.
pub fn placement_text(placed: &Placed, output: Option<&Path>) -> String {
    let p = &placed.plan.payload;
    let mut out = String::new();
    let _ = writeln!(out, "placement {}", placed.plan.placement_id);
    let _ = writeln!(
        out,
        "  model {} ({}), policy {}: KV cache for {} sequence(s) x {} tokens of context (the requirement: docs/placement.md)",
        p.model, p.weight_format, p.policy, p.sequences, p.context_tokens
    );
    let _ = writeln!(
        out,
        "  device set {}: {} device(s) used, tensor parallel {}, pipeline {}, routed experts split by {}",
        p.device_set,
        p.devices_used,
        p.tensor_parallel,
        p.pipeline_parallel,
        p.expert_split.name()
    );
    let certificate = &placed.certificate;
    let proof = if certificate.method == "exhaustive" {
        format!(
            "the exhaustive enumeration of {} placements agrees",
            certificate.placements
        )
    } else {
        format!(
            "optimal by the dynamic program's proof (docs/solver.md, \"Placement across devices\"); {} placements exceed the enumeration budget of {}",
            certificate.placements, certificate.budget
        )
    };
    let _ = writeln!(out, "  objective {}: {proof}", p.objective.name());
    let _ = writeln!(
        out,
        "  checker: {}",
        if placed.violations.is_empty() {
            "no violations (9 rules, docs/placement.md)".to_owned()
        } else {
            format!("{} violation(s)", placed.violations.len())
        }
    );
    let _ = match output {
        Some(file) => writeln!(out, "  written to {}", file.display()),
        None => writeln!(out, "  not written (give -o PLACEMENT.json to write it)"),
    };
    for note in &placed.notes {
        let _ = writeln!(out, "  note: {note}");
    }
    let _ = writeln!(out, "\nstages:");
    for (s, stage) in p.stages.iter().enumerate() {
        let mut host = format!(
            "{} expert group(s) per device on the host",
            stage.offloaded_units
        );
        if stage.offloaded_layers > 0 {
            let _ = write!(
                host,
                ", the weights of layers {}-{} streamed from the host",
                stage.first_layer,
                stage.first_layer + stage.offloaded_layers - 1
            );
        }
        if stage.kv_offloaded_layers > 0 {
            let _ = write!(
                host,
                ", the KV cache of layers {}-{} on the host",
                stage.first_layer,
                stage.first_layer + stage.kv_offloaded_layers - 1
            );
        }
        if stage.kv_offloaded_sequences > 0 {
            let _ = write!(
                host,
                ", the KV cache of {} sequence(s) of layer {} on the host",
                stage.kv_offloaded_sequences,
                stage.first_layer + stage.kv_offloaded_layers
            );
        }
        let _ = writeln!(
            out,
            "  stage {s}  layers {}-{} ({})  {}  {host}",
            stage.first_layer,
            stage.end_layer - 1,
            stage.end_layer - stage.first_layer,
            stage.devices.join(", "),
        );
    }
    let budget = p
        .budget
        .as_ref()
        .map_or(String::new(), |rule| format!("; usable bytes: {rule}"));
    let _ = writeln!(
        out,
        "\ndevices (rules: docs/placement.md, \"Per-device memory\"{budget}):"
    );
    for d in &p.devices {
        let staging = if d.items.staging > 0 {
            format!(
                "\n    staging {} (the largest streamed layer's weights and host KV layer's cache)",
                human_bytes(d.items.staging)
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  {}  {}  stage {} rank {}  {} shards\n    weights {}\n    KV cache {}\n    activations {}\n    workspaces {}\n    communication {}{staging}\n    total {} of usable {}, room left {}",
            d.id,
            d.name,
            d.stage,
            d.rank,
            d.shards.len(),
            human_bytes(d.items.weights),
            human_bytes(d.items.kv_cache),
            human_bytes(d.items.activations),
            human_bytes(d.items.workspaces),
            human_bytes(d.items.communication),
            human_bytes(d.total_bytes),
            human_bytes(d.usable_bytes),
            human_signed_bytes(d.headroom_bytes)
        );
    }
    let _ = writeln!(
        out,
        "\nhost: {} offloaded ({} shards, {} of KV cache){}",
        human_bytes(p.host.offloaded_bytes),
        p.host.shards.len(),
        human_bytes(p.host.kv_bytes),
        p.host
            .memory_bytes
            .map_or(", offload off".to_owned(), |m| format!(
                " of {}",
                human_bytes(m)
            ))
    );
    let _ = writeln!(
        out,
        "KV tokens that fit: {} (the fullest device's room over its KV bytes per token)",
        p.kv_tokens_that_fit
            .map_or("unbounded".to_owned(), |t| t.to_string())
    );
    if let Some(report) = &placed.engine {
        let _ = writeln!(
            out,
            "\non each of the {} tensor-parallel ranks (the engine's own accounting at its degree; docs/placement.md, \"Serving engines across devices\"):",
            p.tensor_parallel
        );
        out.push_str(&super::engine_text::engine_text(report));
    }
    if let Some(perf) = &placed.performance {
        out.push_str(&placement_performance_text(perf));
    }
    if let Some(c) = &placed.why_not {
        out.push_str(&why_not_text(c));
    }
    if !placed.rejected.is_empty() {
        let _ = writeln!(out, "\noptions the model cannot take:");
        for r in &placed.rejected {
            let _ = writeln!(
                out,
                "  tensor parallel {} ({}-split experts): {}",
                r.degree,
                r.split.name(),
                r.reason
            );
        }
    }
    out
}

fn ms(seconds: f64) -> String {
    format!("{:.3} ms", seconds * 1e3)
}

/// The predicted times of a placement: the serving simulation's figures, the simulated
/// run's time by part, then the objective's linear estimate part by part, each with the
/// rules it follows.
pub fn placement_performance_text(perf: &crate::placement::prediction::Prediction) -> String {
    use std::fmt::Write;
    let s = &perf.serving_point;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nperformance ({} engine profile; concurrency {}, {} input tokens, {} output tokens, budget {} tokens/step, at most {} sequences):",
        s.engine, s.concurrency, s.input_tokens, s.output_tokens, s.scheduled_token_budget, s.maximum_sequences
    );
    if let Some(lengths) = super::performance_text::lengths_line(s) {
        let _ = writeln!(out, "  request lengths: {lengths}");
    }
    let _ = writeln!(
        out,
        "  simulated ({} steps, {} requests): TTFT {}, TPOT {}, output tokens/s {:.1} total, {:.1} per device, {:.1} per user",
        perf.simulated_steps,
        s.simulated_requests,
        ms(perf.ttft_seconds),
        ms(perf.tpot_seconds),
        perf.output_tokens_per_second,
        perf.output_tokens_per_second_per_device,
        perf.output_tokens_per_second_per_user
    );
    let run = &perf.simulated_time;
    let d = &run.device;
    let total = d.seconds() + run.engine_seconds;
    let pct = |x: f64| {
        if total > 0.0 {
            format!("{:.1}%", 100.0 * x / total)
        } else {
            "-".to_owned()
        }
    };
    let _ = writeln!(
        out,
        "  simulated run's busy time {:.3} s: compute-bound {}, memory-bound {}, launches {}, all-reduce {}, sends {}, host transfers {}, engine {}",
        total,
        pct(d.compute_seconds),
        pct(d.memory_seconds),
        pct(d.launch_seconds),
        pct(d.all_reduce_seconds),
        pct(d.send_seconds),
        pct(d.host_transfer_seconds),
        pct(run.engine_seconds)
    );
    for rule in &perf.rules {
        let _ = writeln!(out, "  rule: {rule}");
    }
    for link in &perf.links {
        let _ = writeln!(out, "  link: {link}");
    }
    let linear = &perf.linear_estimate;
    let _ = writeln!(
        out,
        "  objective's linear estimate (what the placement objective ranks; not simulated):"
    );
    for (name, b) in [
        ("TPOT (decode step)", &linear.tpot),
        ("TTFT (one prompt)", &linear.ttft),
    ] {
        let _ = writeln!(
            out,
            "    {name:<19} {}: compute-bound {}, memory-bound {}, launches {}, all-reduce {}, sends {}, host transfers {}, engine {}; of which other requests' prompts {}, bubble (mean device wait) {}",
            ms(b.seconds),
            ms(b.parts.compute_seconds),
            ms(b.parts.memory_seconds),
            ms(b.parts.launch_seconds),
            ms(b.parts.all_reduce_seconds),
            ms(b.parts.send_seconds),
            ms(b.parts.host_transfer_seconds),
            ms(b.engine_seconds),
            ms(b.prompts_seconds),
            ms(b.bubble_seconds)
        );
    }
    let _ = writeln!(
        out,
        "    output tokens/s     {:.1} total, {:.1} per device",
        linear.output_tokens_per_second, linear.output_tokens_per_second_per_device
    );
    for rule in &linear.rules {
        let _ = writeln!(out, "    rule: {rule}");
    }
    out
}

fn figures_text(f: &crate::placement::alternative::Figures) -> String {
    let time = |ns: Option<u64>| ns.map_or("-".to_owned(), |t| ms(t as f64 * 1e-9));
    format!(
        "tensor parallel {}, pipeline {}, {} device(s), {} offloaded, KV tokens {}, linear TPOT {}, linear TTFT {}",
        f.tensor_parallel,
        f.pipeline_parallel,
        f.devices,
        human_bytes(f.offloaded_bytes),
        f.kv_tokens.map_or("unbounded".to_owned(), |t| t.to_string()),
        time(f.tpot_ns),
        time(f.ttft_ns)
    )
}

/// The answer to `--why-not`: the alternative's best placement against the chosen one.
pub fn why_not_text(c: &crate::placement::alternative::Comparison) -> String {
    let mut out = format!(
        "\nwhy not {} (the same objective, solved exactly):\n  chosen       {}\n",
        c.alternative,
        figures_text(&c.chosen)
    );
    match (&c.alternative_best, &c.reason) {
        (Some(best), _) => {
            out.push_str(&format!("  alternative  {}\n", figures_text(best)));
            let delta = |a: Option<u64>, b: Option<u64>| match (a, b) {
                (Some(a), Some(b)) => format!("{:+.3} ms", (b as f64 - a as f64) * 1e-6),
                _ => "-".to_owned(),
            };
            out.push_str(&format!(
                "  it costs     {:+} device(s), {} offloaded bytes, {} KV tokens, linear TPOT {}, linear TTFT {}\n",
                best.devices as i128 - c.chosen.devices as i128,
                best.offloaded_bytes as i128 - c.chosen.offloaded_bytes as i128,
                match (best.kv_tokens, c.chosen.kv_tokens) {
                    (Some(b), Some(a)) => format!("{:+}", b as i128 - a as i128),
                    _ => "-".to_owned(),
                },
                delta(c.chosen.tpot_ns, best.tpot_ns),
                delta(c.chosen.ttft_ns, best.ttft_ns)
            ));
        }
        (None, reason) => out.push_str(&format!(
            "  alternative  infeasible: {}\n",
            reason.as_deref().unwrap_or("no placement fits")
        )),
    }
    out
}
