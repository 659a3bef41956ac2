//! Why-infeasible and why-not answers for people, in the request's terms, read like a
//! derivation: the facts first, then what follows from them.

use jointplan::study::infeasible::{Fact, Infeasibility};
use jointplan::study::why_not::WhyNot;

use super::diff::{objective_lines, profile_change_lines};
use super::output::human_bytes;

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
    for (i, fact) in reason.core.iter().enumerate() {
        out.push_str(&format!("  {}. {}\n", i + 1, fact_text(fact)));
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
            jointplan::study::capacity::SEARCH_BUDGET.as_secs(),
            reason.unsearched.join(", ")
        ));
    }
    out
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
            out.push_str(&profile_change_lines(&diff.profiles_changed));
            out.push_str("memory that changes (chosen | pinned | delta, bytes):\n");
            for (name, m) in diff.memory.iter().filter(|(_, m)| m.delta != 0) {
                out.push_str(&format!("  {name}  {} | {} | {:+}\n", m.a, m.b, m.delta));
            }
            out
        }
    }
}
