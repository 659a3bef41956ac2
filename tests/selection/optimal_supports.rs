//! Optimal supports (docs/solver.md, "Optimal supports"): candidates in no
//! optimum of a leading run of levels are set aside before the whole
//! objective is solved, and before the provider ids. With them on, every
//! answer must be the one of the solve without them, on every objective and
//! share of preferred nodes, at elimination budgets small enough that the
//! whole objective does not fit but a leading run does; on tiny instances
//! the answer must be brute force's. The supports themselves are compared
//! with enumeration of the optima in their unit tests.

use std::sync::Arc;

use jointplan::selection::instances::{long_range, residual_stream, Params};
use jointplan::selection::{
    brute_force, solve, FrontierResult, Objective, SelectionProblem, Solution, SolveOptions, Status,
};

use crate::common::selection_instances::{every_objective, tiny_long_range};

fn run(
    p: &SelectionProblem,
    obj: &Arc<dyn Objective>,
    supports: bool,
    elimination_budget: u64,
) -> Solution {
    let opts = SolveOptions {
        objective: Arc::clone(obj),
        timings: false,
        // No sub-part to the closure frontier, a short provider-id search:
        // what the supports do not settle goes to elimination, the
        // integer program and probing.
        subpart_dp_states: 0,
        provider_search_steps: 50,
        optimal_supports: supports,
        elimination_budget,
        ..SolveOptions::default()
    };
    let s = solve(p, &opts).unwrap();
    assert_eq!(s.status, Status::Optimal, "{}", obj.name());
    s
}

fn set_aside(s: &Solution) -> bool {
    s.components.iter().any(|c| {
        c.certificate
            .contains("in no optimum of the leading levels")
    })
}

#[test]
fn supports_agree_with_the_solve_without_them_on_every_objective() {
    let mut fired = 0usize;
    for seed in 0..2u64 {
        for preferred_prob in [0.0, 0.5, 1.0] {
            let params = Params {
                profiles: 4,
                preferred_prob,
                ..Params::default()
            };
            let without_fallback = Params {
                fallback: false,
                accept_prob: 0.9,
                ..params
            };
            let what = format!("seed {seed} pref {preferred_prob}");
            let problems = [
                (
                    format!("long-range {what}"),
                    long_range(60, 0.5, &params, seed),
                ),
                (
                    format!("residual without fallback {what}"),
                    residual_stream(40, &without_fallback, seed),
                ),
            ];
            for (what, p) in &problems {
                for obj in every_objective(4) {
                    let without = run(p, &obj, false, 1 << 8);
                    assert!(!set_aside(&without), "{what}: used although switched off");
                    for budget in [1 << 8, 1 << 12, SolveOptions::default().elimination_budget] {
                        let with = run(p, &obj, true, budget);
                        assert_eq!(
                            with.choices,
                            without.choices,
                            "{what} {} budget {budget}",
                            obj.name()
                        );
                        fired += usize::from(set_aside(&with));
                    }
                }
            }
        }
    }
    assert!(
        fired >= 10,
        "supports set candidates aside in {fired} solves only"
    );
}

#[test]
fn tiny_instances_with_supports_match_brute_force() {
    let mut compared = 0usize;
    for seed in 0..12u64 {
        let p = tiny_long_range(8, seed);
        for obj in every_objective(4) {
            let FrontierResult::Optimal(brute) = brute_force(&p, obj.as_ref(), 500_000).unwrap()
            else {
                continue;
            };
            for budget in [1 << 3, 1 << 5, 1 << 20] {
                assert_eq!(
                    run(&p, &obj, true, budget).choices,
                    brute,
                    "seed {seed} {} budget {budget}",
                    obj.name()
                );
            }
            compared += 1;
        }
    }
    assert!(compared >= 30, "only {compared} comparisons ran");
}
