//! Why-infeasible and why-not answers for people, in the request's terms, read like a
//! derivation: the facts first, then what follows from them.

use crate::study::infeasible::{Fact, Holdings, Infeasibility};
use crate::study::report::sequences;
use crate::study::why_not::WhyNot;

use super::diff_text::{change_time_line, objective_lines, profile_change_lines, time_lines};
use super::id_pattern::group_by_pattern;
use super::summary::human_bytes;
use super::summary_text::Detail;

/// The text of an infeasibility.
pub fn infeasibility_text(reason: &Infeasibility) -> String {
    let mut out = String::new();
    match reason.kind {
        "selection" => {
            out.push_str(&format!(
                "no provider/profile choice exists; these {} facts of the request conflict (without any one of them a choice exists):\n",
                reason.core.len()
            ));
        }
        "capacity" => out.push_str("the plan does not fit the device:\n"),
        _ => out.push_str("the plan breaks a limit:\n"),
    }
    for (i, fact) in core_lines(&reason.core).iter().enumerate() {
        out.push_str(&format!("  {}. {fact}\n", i + 1));
    }
    for note in &reason.notes {
        out.push_str(&format!("  so: {note}\n"));
    }
    if let Some(held) = &reason.holdings {
        holdings_lines(&mut out, held);
    }
    let nodes = reason
        .core
        .iter()
        .filter(|f| matches!(f, Fact::Node { .. }))
        .count();
    if reason.kind == "selection" && nodes > 1 {
        out.push_str(
            "  so: every resource must take one profile that all the providers chosen around it accept, and no choice of the providers above gives each shared resource one.\n",
        );
    }
    if reason.relaxations.is_empty() {
        if reason.kind == "capacity" && reason.unsearched.is_empty() {
            out.push_str("no single policy field makes it fit on its own\n");
        }
    } else {
        out.push_str("it builds if (each alone, the rest unchanged; found by building plans):\n");
        for r in &reason.relaxations {
            out.push_str(&format!("  - {}\n", r.text));
        }
    }
    if !reason.unsearched.is_empty() {
        out.push_str(&format!(
            "not searched (the {}-second budget of the search, one whole build per probe, was spent): {}\n",
            crate::study::capacity::SEARCH_BUDGET.as_secs(),
            reason.unsearched.join(", ")
        ));
    }
    if let Some(next) = &reason.next_device {
        out.push_str(&format!(
            "the next device of its directory that fits: {} ({}): the model builds (plan {}) and its worst case fits{}\n",
            next.device_file,
            human_bytes(next.device_memory_bytes),
            next.plan_id.as_deref().unwrap_or("-"),
            next.sequences_that_fit
                .map(|n| format!(", {} at the maximum context", sequences(n)))
                .unwrap_or_default()
        ));
    }
    out
}

/// The core's facts as lines, allocations that differ only in their ids' numbers and hold
/// the same bytes grouped by id pattern (`resource/state/layer.[0-4].kv x5 ...`).
fn core_lines(core: &[Fact]) -> Vec<String> {
    let mut lines = Vec::new();
    let mut index = 0;
    while index < core.len() {
        if !matches!(core[index], Fact::Allocation { .. }) {
            lines.push(fact_text(&core[index]));
            index += 1;
            continue;
        }
        let end = core[index..]
            .iter()
            .position(|f| !matches!(f, Fact::Allocation { .. }))
            .map_or(core.len(), |offset| index + offset);
        let run = &core[index..end];
        let key = |f: &Fact| match f {
            Fact::Allocation { what, bytes, .. } => (what.clone(), *bytes),
            _ => (String::new(), 0),
        };
        for group in group_by_pattern(run, |f| match f {
            Fact::Allocation { resource, .. } => resource.as_str(),
            _ => "",
        }) {
            for (shown, members) in group.parts(key) {
                let (what, bytes) = key(members[0]);
                let count = members.len() as u64;
                lines.push(if count > 1 {
                    format!(
                        "{shown} x{count} ({what}) take {} each, {} in all",
                        human_bytes(bytes),
                        bytes
                            .checked_mul(count)
                            .map_or_else(|| "more than 2^64 bytes".to_owned(), human_bytes)
                    )
                } else {
                    format!("{shown} ({what}) takes {}", human_bytes(bytes))
                });
            }
        }
        index = end;
    }
    lines
}

/// What the allocations hold at the policy's ceilings, and the levers that shrink each,
/// with their amounts.
fn holdings_lines(out: &mut String, h: &Holdings) {
    out.push_str(&format!(
        "what the plan holds at the policy's ceilings (from the plan built at capacity {}):\n",
        human_bytes(h.at_capacity_bytes)
    ));
    out.push_str(&format!("  weights: {}\n", human_bytes(h.weights_bytes)));
    if h.states > 0 {
        let split = match h.state_bytes_each {
            Some(each) => format!(" ({} states x {})", h.states, human_bytes(each)),
            None => format!(" ({} states)", h.states),
        };
        out.push_str(&format!(
            "  KV cache and sequence state for one {}-token sequence: {}{split}; the policy admits {}\n",
            h.context_tokens,
            human_bytes(h.sequence_state_bytes),
            sequences(u64::from(h.sequences))
        ));
    }
    out.push_str(&format!(
        "  activations: {}, workspaces: {} (at the token and sequence ceilings)\n",
        human_bytes(h.activation_bytes),
        human_bytes(h.workspace_bytes)
    ));
    out.push_str("levers (what each shrinks; the relaxations below say which alone suffice):\n");
    if h.states > 0 {
        out.push_str(&format!(
            "  - fewer sequences: each takes {} at the maximum context\n",
            human_bytes(h.sequence_state_bytes)
        ));
        if h.kv_bytes_per_token > 0 {
            out.push_str(&format!(
                "  - a shorter context: each token of context takes {} bytes per sequence (a model folder's `--context`; `jointplan fit MODEL --maximize context` finds the longest that fits)\n",
                h.kv_bytes_per_token
            ));
        }
    }
    if let Some(t) = &h.kv_tradeoff {
        out.push_str(&format!(
            "  - a paged KV cache: {} holds {} bytes per sequence at admission and {} at the full context, where {} reserves {}\n",
            t.paged_provider,
            t.paged_bytes_at_admission,
            t.paged_bytes_at_context,
            t.contiguous_provider,
            t.contiguous_bytes_per_sequence
        ));
    }
    out.push_str(&format!(
        "  - a smaller weight format: the weights take {} (a model folder's --weight-format)\n",
        human_bytes(h.weights_bytes)
    ));
}

fn fact_text(fact: &Fact) -> String {
    match fact {
        Fact::Node {
            node,
            providers,
            dropped,
        } => {
            let mut text = if providers.is_empty() {
                format!("node {node} has no usable provider")
            } else {
                let list: Vec<String> = providers
                    .iter()
                    .map(|p| {
                        if p.accepts.is_empty() {
                            p.provider.clone()
                        } else {
                            let on: Vec<String> = p
                                .accepts
                                .iter()
                                .map(|(r, profiles)| format!("{r}: {}", profiles.join(" or ")))
                                .collect();
                            format!("{} [{}]", p.provider, on.join("; "))
                        }
                    })
                    .collect();
                format!("node {node} must use one of: {}", list.join(", "))
            };
            for d in dropped {
                text.push_str(&format!("\n     ({d})"));
            }
            text
        }
        Fact::Pin { node, provider } => format!("node {node} is pinned to {provider} (--pin)"),
        Fact::Forbid { node, provider } => {
            format!("node {node} may not use {provider} (--forbid)")
        }
        Fact::Capacity {
            usable_bytes,
            required_bytes,
            check,
        } => format!(
            "{check} fails: needs {} bytes, usable {}",
            required_bytes,
            human_bytes(*usable_bytes)
        ),
        Fact::Allocation {
            resource,
            what,
            bytes,
        } => format!("{resource} ({what}) takes {}", human_bytes(*bytes)),
        Fact::PolicyField { field, value } => format!("{field} is {value}"),
        Fact::Limit { message } => message.clone(),
    }
}

/// The text of a why-not answer.
pub fn why_not_text(node: &str, provider: &str, answer: &WhyNot) -> String {
    match answer {
        WhyNot::AlreadyChosen => format!("node {node} already uses {provider}\n"),
        WhyNot::Infeasible { reason } => format!(
            "with node {node} pinned to {provider} there is no plan:\n{}",
            infeasibility_text(reason)
        ),
        WhyNot::Feasible {
            plan_id,
            chosen,
            pinned,
            first_difference,
            diff,
        } => {
            let mut out = format!(
                "with node {node} pinned to {provider} (re-solved exactly under the plan's settings): {plan_id}\n"
            );
            match first_difference {
                Some(change) => out.push_str(&format!(
                    "  the objective ({}) gets {} first at key {}: {} -> {}\n",
                    chosen.objective,
                    if change.worse { "worse" } else { "better" },
                    change.key,
                    change.chosen,
                    change.pinned
                )),
                None => out.push_str("  the objective is equal on every key\n"),
            }
            out.push_str("objective keys (chosen | pinned):\n");
            out.push_str(&objective_lines(chosen, pinned, ["chosen", "pinned"]));
            out.push_str(&format!(
                "nodes that change ({}):\n",
                diff.nodes_changed.len()
            ));
            for c in &diff.nodes_changed {
                out.push_str(&format!("  {}  {} -> {}\n", c.node, c.a, c.b));
            }
            out.push_str(&format!(
                "resources whose profile changes ({}):\n",
                diff.profiles_changed.len()
            ));
            out.push_str(&profile_change_lines(
                &diff.profiles_changed,
                Detail::Grouped,
            ));
            out.push_str("memory that changes (chosen | pinned | delta, bytes):\n");
            for (name, m) in diff.memory.iter().filter(|(_, m)| m.delta != 0) {
                out.push_str(&format!("  {name}  {} | {} | {:+}\n", m.a, m.b, m.delta));
            }
            if let Some(time) = &diff.time {
                out.push_str("provider changes and their time (pinned - chosen):\n");
                for pattern in &diff.patterns {
                    out.push_str(&format!(
                        "  {} -> {}: {}\n",
                        pattern.a, pattern.b, pattern.count
                    ));
                    out.push_str(&change_time_line(pattern, "    ", ["chosen", "pinned"]));
                }
                out.push_str(&time_lines(time, ["chosen", "pinned"]));
            }
            out
        }
    }
}
