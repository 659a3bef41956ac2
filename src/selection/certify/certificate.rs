//! Independent re-checks: feasibility and objective recomputation of every
//! returned solution, the comparison with the frontier search, and small
//! conflict sets for infeasible components.

use std::cmp::Ordering;

use crate::selection::exact::frontier::{frontier, DpOutcome, Mode};
use crate::selection::model::objective::{compare_scores, Level, Weights};
use crate::selection::model::problem::{touched_resources, Instance, Mask};
use crate::selection::reduce::components::{Comp, Score};

/// Renders a component choice in the input's terms (node=provider, ...), and
/// its exact objective values.
pub(crate) fn describe(inst: &Instance, comp: &Comp, choice: &[usize]) -> String {
    let picks: Vec<String> = comp
        .nodes
        .iter()
        .zip(choice)
        .map(|(n, &c)| {
            let node = &inst.nodes[n.global as usize];
            let prov = n
                .cands
                .get(c)
                .map(|cc| node.cands[cc.orig as usize].provider.as_str())
                .unwrap_or("?");
            format!("{}={}", node.id, prov)
        })
        .collect();
    let eval = match comp.evaluate_local(choice) {
        Some(s) => format!(
            "preferred_met={} penalty_by_rank={:?}",
            s.pref.iter().filter(|&&p| p).count(),
            s.counts
        ),
        None => "INFEASIBLE".to_string(),
    };
    format!("{{{}}} ({eval})", picks.join(", "))
}

/// Re-checks `choice` on `comp` from scratch: `Err` names the problem.
pub(crate) fn recheck(comp: &Comp, choice: &[usize]) -> Result<Score, String> {
    comp.evaluate_local(choice)
        .ok_or_else(|| "the solution fails the independent feasibility re-check".to_string())
}

/// Compares a solution with the frontier's optimum; `Err` describes a
/// disagreement with both answers.
pub(crate) fn compare_with_dp(
    inst: &Instance,
    comp: &Comp,
    levels: &[Level],
    weights: Option<&Weights>,
    ours: &[usize],
    dp: &[usize],
) -> Result<(), String> {
    if ours == dp {
        return Ok(());
    }
    let verdict = match (comp.evaluate_local(ours), comp.evaluate_local(dp)) {
        (Some(a), Some(b)) => match compare_scores(levels, weights, &a, &b) {
            Ordering::Less => "the solver's answer is better than the frontier's",
            Ordering::Greater => "the frontier's answer is better than the solver's",
            Ordering::Equal => "the answers tie, which the objective rules out",
        },
        (None, _) => "the solver's answer is infeasible",
        (_, None) => "the frontier's answer is infeasible",
    };
    Err(format!(
        "the solver and the exact frontier disagree ({verdict}); solver: {}; frontier: {}",
        describe(inst, comp, ours),
        describe(inst, comp, dp)
    ))
}

fn mask_names(inst: &Instance, m: Mask) -> String {
    let names: Vec<&str> = (0..inst.profiles.len())
        .filter(|&k| m >> k & 1 == 1)
        .map(|k| inst.profiles[k].as_str())
        .collect();
    format!("[{}]", names.join(", "))
}

/// A small conflicting set of nodes of an infeasible component, found by a
/// deletion filter over the frontier search (only for components of at most
/// `max_nodes` nodes; otherwise a summary).
pub(crate) fn conflict_set(inst: &Instance, comp: &Comp, max_nodes: usize) -> String {
    let summary = format!(
        "no choice of candidates for its {} nodes gives every shared resource a common profile",
        comp.nodes.len()
    );
    if comp.nodes.len() > max_nodes {
        return summary;
    }
    let mut set: Vec<u32> = comp.nodes.iter().map(|n| n.global).collect();
    let infeasible = |nodes: &[u32]| -> bool {
        if nodes.is_empty() {
            return false;
        }
        let c = Comp::from_instance(inst, nodes);
        matches!(
            frontier(&c, &[], None, Mode::Closure, 200_000).0,
            DpOutcome::Infeasible
        )
    };
    if !infeasible(&set) {
        return summary;
    }
    let mut i = 0;
    while i < set.len() {
        let mut trial = set.clone();
        trial.remove(i);
        if infeasible(&trial) {
            set = trial;
        } else {
            i += 1;
        }
    }
    // Resources shared inside the conflict set.
    let mut count: std::collections::BTreeMap<u32, usize> = Default::default();
    for &g in &set {
        let cands = &inst.nodes[g as usize].cands;
        for r in touched_resources(cands.iter().map(|c| c.res.as_slice())) {
            *count.entry(r).or_insert(0) += 1;
        }
    }
    let parts: Vec<String> = set
        .iter()
        .map(|&g| {
            let node = &inst.nodes[g as usize];
            let cands: Vec<String> = node
                .cands
                .iter()
                .map(|c| {
                    let acc: Vec<String> = c
                        .res
                        .iter()
                        .filter(|(r, _)| count.get(r).copied().unwrap_or(0) > 1)
                        .map(|&(r, m)| {
                            format!(
                                "`{}` in {}",
                                inst.resources[r as usize],
                                mask_names(inst, m)
                            )
                        })
                        .collect();
                    format!("`{}` needs {}", c.provider, acc.join(", "))
                })
                .collect();
            format!("node `{}`: {}", node.id, cands.join("; "))
        })
        .collect();
    format!(
        "these {} nodes cannot be satisfied together: {}",
        set.len(),
        parts.join(" | ")
    )
}
