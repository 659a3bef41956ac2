//! The answers of `jointplan fit` for people: the largest value of a knob that fits, and
//! which devices of a directory fit.

use crate::study::fit::{DeviceFit, FitResult};
use crate::study::report::{sequences as sequences_word, sequences_fit};
use crate::study::timing::{milliseconds_text, LatencyFigures};

use super::summary::{human_bytes, human_signed_bytes};

/// The answer of `fit --maximize KNOB` for people.
pub fn fit_text(answer: &FitResult) -> String {
    let knob = answer.knob.name();
    let latency_met = if answer.latency.is_some() {
        " and the plan served at that concurrency meets the latency target"
    } else {
        ""
    };
    let mut out = match (answer.largest, &answer.plan_id) {
        (Some(value), Some(plan_id)) => format!(
            "largest {knob} that fits: {value} (exact: the plan builds and the policy's \
             requirement fits{latency_met}; {} plans built)\n  plan {plan_id}\n",
            answer.probes
        ),
        _ => format!(
            "no value of {knob} fits, not even {} ({} plans built)\n",
            answer.lowest, answer.probes
        ),
    };
    if let Some(report) = &answer.report {
        out.push_str(&format!(
            "  headroom {}, {} at the maximum context\n",
            human_signed_bytes(report.headroom_bytes),
            report
                .sequences_that_fit
                .map_or_else(|| "any number of sequences fit".to_owned(), sequences_fit)
        ));
    }
    if let Some(latency) = &answer.latency {
        let t = &latency.target;
        let targets: Vec<String> = [("TPOT", t.max_tpot_seconds), ("TTFT", t.max_ttft_seconds)]
            .into_iter()
            .filter_map(|(name, v)| v.map(|s| format!("{name} <= {} ms", milliseconds_text(s))))
            .collect();
        out.push_str(&format!(
            "  latency target {} ({} engine profile on {}, {}; {} input tokens, {} output tokens per request, served at concurrency = {knob}; model: docs/performance-model.md)\n",
            targets.join(", "),
            latency.rule.engine,
            latency.rule.device,
            latency.rule.model,
            latency.input_tokens,
            latency.output_tokens
        ));
        if let Some(figures) = &latency.at_largest {
            out.push_str(&figures_line(knob, figures));
        }
    }
    match &answer.next {
        Some(next) => {
            out.push_str(&format!("  at {knob} {}: {}\n", next.value, next.reason));
            if let Some(short) = next.bytes_short {
                out.push_str(&format!("  short by {}\n", human_bytes(short)));
            }
            if let Some(figures) = &next.latency {
                out.push_str(&figures_line(knob, figures));
            }
            if let Some(binds) = &next.binds {
                out.push_str(&format!("  the bound that binds: {binds}\n"));
            }
        }
        None => out.push_str(&format!(
            "  {knob} is at the largest value its field holds\n"
        )),
    }
    out
}

/// The predicted latency at one value of the knob.
fn figures_line(knob: &str, f: &LatencyFigures) -> String {
    format!(
        "  at {knob} {}: TTFT {:.3} ms, TPOT {:.3} ms, {:.1} output tokens/s ({})\n",
        f.concurrency,
        f.ttft_seconds * 1e3,
        f.tpot_seconds * 1e3,
        f.output_tokens_per_second,
        if f.meets {
            "meets the target"
        } else {
            "misses the target"
        }
    )
}

/// Which devices of a directory fit, for people.
pub fn devices_text(rows: &[DeviceFit]) -> String {
    let mut out =
        String::from("devices (fitting first, smallest first; the policy's requirement):\n");
    for row in rows {
        let verdict = if row.fits { "fits" } else { "does not fit" };
        out.push_str(&format!(
            "  {}  {}  {verdict}",
            row.device_file,
            human_bytes(row.device_memory_bytes)
        ));
        if let Some(headroom) = row.headroom_bytes {
            out.push_str(&format!("  headroom {}", human_signed_bytes(headroom)));
        }
        if let Some(sequences) = row.sequences_that_fit {
            out.push_str(&format!(
                "  {} at maximum context",
                sequences_word(sequences)
            ));
        }
        out.push('\n');
        if let Some(reason) = &row.reason {
            out.push_str(&format!("      {reason}\n"));
        }
    }
    out
}

/// The fewest devices of each file that serve the policy (`fit --devices DIR --max-count N`,
/// ranked `by` total memory or price per hour).
pub fn counts_text(
    rows: &[crate::placement::fit::CountFit],
    max_count: u32,
    by: crate::placement::fit::RankBy,
    engine: Option<&str>,
    latency: Option<&crate::placement::fit::CountLatency>,
) -> String {
    let order = match by {
        crate::placement::fit::RankBy::Count => "least total memory first",
        crate::placement::fit::RankBy::Price => {
            "least price per hour (count x the device file's price_per_hour) first; files without a price after, unranked"
        }
    };
    let engine = engine.map_or(String::new(), |e| {
        format!(", {e} running at tensor parallel = the count in one stage, each device held to its budget")
    });
    let target = latency.map_or(String::new(), |l| {
        let mut parts = Vec::new();
        if let Some(t) = l.target.max_tpot_seconds {
            parts.push(format!("TPOT <= {:.3} ms", t * 1e3));
        }
        if let Some(t) = l.target.max_ttft_seconds {
            parts.push(format!("TTFT <= {:.3} ms", t * 1e3));
        }
        format!(
            ", within {} at concurrency {} ({} + {} tokens, {} time profile; placed under {}, timed by each device file's links)",
            parts.join(" and "),
            l.serving.concurrency,
            l.serving.input_tokens,
            l.serving.output_tokens,
            l.serving.engine,
            l.objective().name()
        )
    });
    let mut out = format!(
        "device counts (the fewest of up to {max_count} identical devices on the device file's peer link that serve the policy's requirement, one request of its context{engine}{target}; {order}; rules: docs/placement.md, \"The fewest devices of each kind\"):\n"
    );
    for row in rows {
        let price = match (row.price_per_hour, row.total_price_per_hour) {
            (Some(each), Some(total)) => {
                format!("  ${:.3}/h (${:.3}/h each)", total.usd(), each.usd())
            }
            _ if by == crate::placement::fit::RankBy::Price => {
                "  no price_per_hour in the device file: not ranked".to_owned()
            }
            _ => String::new(),
        };
        match (row.count, row.total_memory_bytes) {
            (Some(count), Some(total)) => {
                let times = match (row.ttft_seconds, row.tpot_seconds) {
                    (Some(ttft), Some(tpot)) => {
                        format!("  TTFT {:.3} ms, TPOT {:.3} ms", ttft * 1e3, tpot * 1e3)
                    }
                    _ => String::new(),
                };
                out.push_str(&format!(
                    "  {}  {count} x {}  = {}{price}  tensor parallel {}, pipeline {}{times}  {} ({})\n",
                    row.device_file,
                    human_bytes(row.device_memory_bytes),
                    human_bytes(total),
                    row.tensor_parallel.unwrap_or(0),
                    row.pipeline_parallel.unwrap_or(0),
                    row.placement_id.as_deref().unwrap_or(""),
                    row.certificate.as_deref().unwrap_or("")
                ))
            }
            _ => out.push_str(&format!(
                "  {}  {}  {} on {max_count}: {}\n",
                row.device_file,
                human_bytes(row.device_memory_bytes),
                if latency.is_some() {
                    "does not serve it within the target"
                } else {
                    "does not fit"
                },
                row.reason.as_deref().unwrap_or("")
            )),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::fit::Knob;

    #[test]
    fn counts_agree_with_their_nouns() {
        let none = FitResult {
            knob: Knob::Sequences,
            largest: None,
            plan_id: None,
            next: None,
            report: None,
            lowest: 1,
            probes: 1,
            latency: None,
        };
        let text = fit_text(&none);
        assert!(
            text.starts_with("no value of sequences fits, not even 1"),
            "{text}"
        );
        let row = DeviceFit {
            device_file: "small.json".to_owned(),
            device_memory_bytes: 1 << 30,
            fits: false,
            plan_id: None,
            headroom_bytes: Some(5),
            sequences_that_fit: Some(1),
            reason: None,
        };
        let text = devices_text(&[row]);
        assert!(text.contains("  1 sequence at maximum context"), "{text}");
        assert!(!text.contains("1 sequences"), "{text}");
    }
}
