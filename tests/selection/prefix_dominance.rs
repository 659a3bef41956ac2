//! The levels before the provider ids solved without their prefix-dominated
//! candidates, and the preferred count split into preference groups
//! (docs/solver.md, "Prefix dominance" and "Preference groups"): the answer
//! must be the one of the solve that does neither, and of brute force where
//! it finishes, and the certificate must say when the rule was used.

use std::sync::Arc;

use jointplan::selection::instances::{long_range, Params};
use jointplan::selection::{
    brute_force, solve, FrontierResult, Objective, SelectionProblem, Solution, SolveOptions, Status,
};

use crate::common::selection_instances::{every_objective, tiny_long_range};

fn objectives() -> Vec<Arc<dyn Objective>> {
    every_objective(4)
}

/// Long-range instances of 40 nodes, four profiles, a catch-all candidate
/// at every node, seeds 0-2, for each share of preferred nodes.
fn instances(preferred: &[f64]) -> Vec<(String, SelectionProblem)> {
    let mut out = Vec::new();
    for seed in 0..3u64 {
        for &preferred_prob in preferred {
            let params = Params {
                profiles: 4,
                preferred_prob,
                ..Params::default()
            };
            let what = format!("seed {seed} pref {preferred_prob}");
            out.push((what, long_range(40, 0.5, &params, seed)));
        }
    }
    out
}

fn run(p: &SelectionProblem, obj: &Arc<dyn Objective>, dominance: bool) -> Solution {
    run_with(
        p,
        obj,
        dominance,
        SolveOptions::default().provider_search_steps,
    )
}

fn run_with(
    p: &SelectionProblem,
    obj: &Arc<dyn Objective>,
    dominance: bool,
    provider_search_steps: u64,
) -> Solution {
    let opts = SolveOptions {
        objective: Arc::clone(obj),
        timings: false,
        prefix_dominance: dominance,
        provider_search_steps,
        // Off, so that the rules under test are reached: with them on,
        // optimal supports fix most nodes before the provider ids
        // (tests/selection/optimal_supports.rs compares both ways).
        optimal_supports: false,
        ..SolveOptions::default()
    };
    let s = solve(p, &opts).unwrap();
    assert_eq!(s.status, Status::Optimal, "{}", obj.name());
    s
}

fn used(s: &Solution) -> bool {
    s.components
        .iter()
        .any(|c| c.certificate.contains("prefix-dominated candidates"))
}

/// Every node has a catch-all candidate (`zz-fallback`, every profile for
/// every shared resource), which dominates every candidate of a node
/// without a preference on the levels before the provider ids, but comes
/// last in provider-id order: the rule must fire, and the provider ids must
/// still be the smallest among the optima of the whole part.
#[test]
fn with_a_catch_all_candidate_the_rule_fires_and_agrees_with_the_solve_without_it() {
    let mut fired = 0usize;
    for (what, p) in instances(&[0.0, 0.5, 1.0]) {
        for obj in objectives() {
            let fast = run(&p, &obj, true);
            let slow = run(&p, &obj, false);
            assert!(!used(&slow), "{what}: used although switched off");
            assert_eq!(fast.choices, slow.choices, "{what} {}", obj.name());
            fired += usize::from(used(&fast));
        }
    }
    assert!(fired >= 4, "the rule fired on {fired} solves only");
}

/// Tiny instances, every objective, against brute force (which shares no
/// code with the solver's rules).
#[test]
fn tiny_instances_with_a_catch_all_candidate_match_brute_force() {
    let mut compared = 0usize;
    for seed in 0..12u64 {
        let p = tiny_long_range(7, seed);
        for obj in objectives() {
            let FrontierResult::Optimal(brute) = brute_force(&p, obj.as_ref(), 500_000).unwrap()
            else {
                continue;
            };
            assert_eq!(
                run(&p, &obj, true).choices,
                brute,
                "seed {seed} {}",
                obj.name()
            );
            compared += 1;
        }
    }
    assert!(compared >= 30, "only {compared} comparisons ran");
}

/// With no steps for the provider-id search, the provider ids are decided by
/// probing, each probe on its region (prefix dominance on), or by the
/// integer program from the proved earlier levels (off): both must give the
/// answer of the default solve, and the certificate must name the probes.
#[test]
fn provider_ids_by_probing_and_by_the_integer_program_agree_with_the_search() {
    let mut probed = 0usize;
    for (what, p) in instances(&[0.0, 0.5, 1.0]) {
        for obj in objectives() {
            let searched = run(&p, &obj, true);
            let by_probes = run_with(&p, &obj, true, 0);
            let by_ilp = run_with(&p, &obj, false, 0);
            let what = format!("{what} {}", obj.name());
            assert_eq!(by_probes.choices, searched.choices, "{what}");
            assert_eq!(by_ilp.choices, searched.choices, "{what}");
            probed += usize::from(
                by_probes
                    .components
                    .iter()
                    .any(|c| c.certificate.contains("exact probes")),
            );
        }
    }
    assert!(probed >= 4, "probing decided {probed} solves only");
}
