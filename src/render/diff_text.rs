//! The comparison of two plans for people (`jointplan diff` without `--json`), and the
//! objective-key and profile-change lines that why-not answers share.

use crate::plan::ExecutionPlan;
use crate::request::NodeId;
use crate::study::diff::{ChangePattern, PlanDiff, ProfileChange};
use crate::study::objective_keys::ObjectiveKeys;
use crate::study::timing::{NodeTime, PricingRule, TimeDiff};

use super::id_pattern::{group_by_pattern, short};
use super::summary_text::{group_line, Detail};

/// The comparison for people: with [`Detail::Grouped`], the nodes and resources that change
/// alike are grouped by id pattern as plan summaries group them (`node.layer.[0-31].attention
/// x32`); with [`Detail::Full`], one line each.
pub fn diff_text(diff: &PlanDiff, a: &ExecutionPlan, b: &ExecutionPlan, detail: Detail) -> String {
    let mut out = format!("A {}\nB {}\n", a.payload.plan_id, b.payload.plan_id);
    if !diff.programs_equal {
        out.push_str("programs: same nodes, different program fingerprints (shapes differ)\n");
    }
    if diff.is_empty() {
        out.push_str("no difference in providers, profiles or memory\n");
    }
    out.push_str(&format!(
        "\nproviders: {} of {} nodes changed\n",
        diff.nodes_changed.len(),
        a.payload.nodes.len()
    ));
    for pattern in &diff.patterns {
        out.push_str(&format!(
            "  {} -> {}: {}\n",
            pattern.a, pattern.b, pattern.count
        ));
        out.push_str(&change_time_line(pattern, "    ", ["A", "B"]));
        out.push_str(&node_lines(&pattern.nodes, &pattern.node_times, detail));
    }
    out.push_str(&format!(
        "\nstorage profiles: {} resources changed\n",
        diff.profiles_changed.len()
    ));
    out.push_str(&profile_change_lines(&diff.profiles_changed, detail));
    out.push_str("\nobjective keys (A | B):\n");
    out.push_str(&objective_lines(
        &diff.objective.a,
        &diff.objective.b,
        ["A", "B"],
    ));
    out.push_str("\nmemory (A | B | B - A, bytes; pools summed per kind, and every pool's maximum is bounded by the same dynamic capacity, which they share):\n");
    for (name, m) in &diff.memory {
        out.push_str(&format!("  {name}  {} | {} | {:+}\n", m.a, m.b, m.delta));
    }
    if let Some(time) = &diff.time {
        out.push('\n');
        out.push_str(&time_lines(time, ["A", "B"]));
    }
    out
}

fn ms(seconds: f64) -> String {
    format!("{:.3} ms", seconds * 1e3)
}

fn signed_ms(seconds: f64) -> String {
    format!("{:+.3} ms", seconds * 1e3)
}

/// The time one provider change adds, when priced (`time (B - A, these nodes only):
/// prefill +1.2 ms, decode step +0.3 ms (efficiency class dense -> reference)`; `labels`
/// name the two sides).
pub fn change_time_line(pattern: &ChangePattern, indent: &str, labels: [&str; 2]) -> String {
    let [x, y] = labels;
    match &pattern.time {
        Some(t) => format!(
            "{indent}time ({y} - {x}, these nodes only): prefill {}, decode step {} (efficiency class {} -> {})\n",
            signed_ms(t.prefill_seconds),
            signed_ms(t.decode_step_seconds),
            t.class_a,
            t.class_b
        ),
        None => String::new(),
    }
}

fn rule_text(rule: &PricingRule) -> String {
    format!(
        "{} engine profile on {}, {}",
        rule.engine, rule.device, rule.model
    )
}

/// Two plans' time side by side (`labels` name the sides): TTFT, TPOT, throughput, the
/// prefill and decode step, and whether the provider changes add up to the step deltas.
pub fn time_lines(t: &TimeDiff, labels: [&str; 2]) -> String {
    let [x, y] = labels;
    let point = |p: &crate::perf::ServingPoint| {
        format!(
            "concurrency {}, {} input tokens, {} output tokens, budget {} tokens/step, at most {} sequences",
            p.concurrency,
            p.input_tokens,
            p.output_tokens,
            p.scheduled_token_budget,
            p.maximum_sequences
        )
    };
    let mut out = format!(
        "time ({x} | {y} | {y} - {x}; model: docs/performance-model.md; from {}):\n",
        t.source
    );
    if t.point_a == t.point_b && t.rule_a == t.rule_b {
        out.push_str(&format!(
            "  serving point  {}; {}\n",
            point(&t.point_a),
            rule_text(&t.rule_a)
        ));
    } else {
        out.push_str(&format!(
            "  serving point {x}  {}; {}\n",
            point(&t.point_a),
            rule_text(&t.rule_a)
        ));
        out.push_str(&format!(
            "  serving point {y}  {}; {}\n",
            point(&t.point_b),
            rule_text(&t.rule_b)
        ));
    }
    for (name, f) in [
        ("TTFT", &t.ttft_seconds),
        ("TPOT", &t.tpot_seconds),
        ("prefill (one prompt)", &t.prefill_seconds),
        ("decode step", &t.decode_step_seconds),
    ] {
        out.push_str(&format!(
            "  {name:<21} {} | {} | {}\n",
            ms(f.a),
            ms(f.b),
            signed_ms(f.delta)
        ));
    }
    let f = &t.output_tokens_per_second;
    out.push_str(&format!(
        "  {:<21} {:.1} | {:.1} | {:+.1}\n",
        "output tokens/s", f.a, f.b, f.delta
    ));
    out.push_str(&format!(
        "  provider changes (sum of their times, priced on {x}): prefill {}, decode step {}\n",
        signed_ms(t.changes_prefill_seconds),
        signed_ms(t.changes_decode_step_seconds)
    ));
    match &t.not_additive {
        None => out.push_str(
            "  a step is a sum over nodes, so the changes add up to the prefill and decode-step deltas; storage profiles cost no time in the model; TTFT and TPOT come from the serving simulation (queueing, chunked prefill) and are not sums\n",
        ),
        Some(why) => out.push_str(&format!(
            "  the changes need not add up to the deltas: {why}\n"
        )),
    }
    out
}

/// The nodes of one provider change: grouped by id pattern, or one line each; with each
/// node's time (`times`, in node order, when priced), the group's sum after it.
fn node_lines(nodes: &[NodeId], times: &[NodeTime], detail: Detail) -> String {
    let priced = times.len() == nodes.len();
    let rows: Vec<(&NodeId, Option<&NodeTime>)> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n, times.get(i).filter(|_| priced)))
        .collect();
    let time = |members: &[&(&NodeId, Option<&NodeTime>)]| {
        if !priced {
            return String::new();
        }
        let (prefill, decode) = members
            .iter()
            .filter_map(|(_, t)| *t)
            .fold((0.0, 0.0), |(p, d), t| {
                (p + t.prefill_seconds, d + t.decode_step_seconds)
            });
        format!(
            "  prefill {}, decode step {}",
            signed_ms(prefill),
            signed_ms(decode)
        )
    };
    let mut out = String::new();
    match detail {
        Detail::Full => {
            for row in &rows {
                out.push_str(&format!("    {}{}\n", row.0, time(&[row])));
            }
        }
        Detail::Grouped => {
            for group in group_by_pattern(&rows, |row| row.0.as_str()) {
                for (shown, members) in group.parts(|_| ()) {
                    let count = members.len();
                    let times = time(&members);
                    if count > 1 {
                        out.push_str(&format!("    {shown}  x{count}{times}\n"));
                    } else {
                        out.push_str(&format!("    {shown}{times}\n"));
                    }
                }
            }
        }
    }
    out
}

/// The resources whose profile changed (`(absent)` on a side without it): grouped by id
/// pattern and change, or one line each.
pub fn profile_change_lines(changes: &[ProfileChange], detail: Detail) -> String {
    let show = |p: &Option<String>| p.clone().unwrap_or_else(|| "(absent)".to_owned());
    let change = |c: &ProfileChange| format!("{} -> {}", show(&c.a), show(&c.b));
    match detail {
        Detail::Full => changes
            .iter()
            .map(|c| format!("  {}  {}\n", c.resource, change(c)))
            .collect(),
        Detail::Grouped => {
            let mut out = String::new();
            for group in group_by_pattern(changes, |c| c.resource.as_str()) {
                for (index, (shown, members)) in group.parts(change).iter().enumerate() {
                    let indent = if index == 0 { "  " } else { "    except " };
                    group_line(
                        &mut out,
                        indent,
                        short(shown),
                        members.len(),
                        &change(members[0]),
                    );
                }
            }
            out
        }
    }
}

/// Nodes whose preference a plan missed, grouped by id pattern as the summary groups nodes
/// (`node.layer.[0-15].q_proj x16`), groups in node order of their first member.
fn missed_text(missed: &[NodeId]) -> String {
    if missed.is_empty() {
        return "none".to_owned();
    }
    let ids: Vec<String> = missed.iter().map(ToString::to_string).collect();
    group_by_pattern(&ids, |id| id.as_str())
        .iter()
        .flat_map(|group| group.parts(|_| ()))
        .map(|(shown, members)| match members.len() {
            1 => shown,
            n => format!("{shown} x{n}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The objective keys of two plans side by side (`labels` name the two sides).
pub fn objective_lines(a: &ObjectiveKeys, b: &ObjectiveKeys, labels: [&str; 2]) -> String {
    let mut out = format!("  objective  {} | {}\n", a.objective, b.objective);
    out.push_str(&format!(
        "  preferences met (node order decides seed-lex)  {}/{} | {}/{}\n",
        a.preferred_met, a.preferences, b.preferred_met, b.preferences
    ));
    let missed = |k: &ObjectiveKeys| missed_text(&k.preferred_missed);
    if a.preferred_missed != b.preferred_missed {
        out.push_str(&format!("    missed in {}: {}\n", labels[0], missed(a)));
        out.push_str(&format!("    missed in {}: {}\n", labels[1], missed(b)));
    }
    let profiles: std::collections::BTreeSet<&String> = a
        .resources_by_profile
        .keys()
        .chain(b.resources_by_profile.keys())
        .collect();
    for profile in profiles {
        out.push_str(&format!(
            "  resources at {profile}  {} | {}\n",
            a.resources_by_profile.get(profile).unwrap_or(&0),
            b.resources_by_profile.get(profile).unwrap_or(&0)
        ));
    }
    if !a.penalty_by_rank.is_empty() {
        out.push_str(&format!(
            "  penalty by rank (resources at rank 0, 1, ...)  {:?} | {:?}\n",
            a.penalty_by_rank, b.penalty_by_rank
        ));
    }
    match a
        .providers
        .iter()
        .zip(&b.providers)
        .find(|(x, y)| x.1 != y.1)
    {
        Some((x, y)) => out.push_str(&format!(
            "  provider-id tie-break: first difference at {}: {} | {}\n",
            x.0, x.1, y.1
        )),
        None => out.push_str("  provider-id tie-break: equal\n"),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missed_preferences_are_grouped_by_id_pattern() {
        let mut ids: Vec<NodeId> = Vec::new();
        for layer in 0..16 {
            for name in ["q_proj", "k_proj"] {
                ids.push(NodeId::new(format!("node.layer.{layer}.{name}")).unwrap());
            }
        }
        ids.push(NodeId::new("node.logits").unwrap());
        assert_eq!(
            missed_text(&ids),
            "node.layer.[0-15].q_proj x16, node.layer.[0-15].k_proj x16, node.logits"
        );
        assert_eq!(missed_text(&ids[..1]), "node.layer.0.q_proj");
        assert_eq!(missed_text(&[]), "none");
    }
}
