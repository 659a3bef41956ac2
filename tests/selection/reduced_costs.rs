//! Reduced costs of a dual bound (docs/solver.md, "Reduced costs of a dual
//! bound"): candidates whose bound exceeds an incumbent's value on the first
//! level are set aside. With them on, every answer must be the one of the
//! solve without them, on every objective and share of preferred nodes, at
//! elimination budgets small enough that the parts stay wide; on tiny
//! instances the answer must be brute force's. The fixing itself is
//! compared with enumeration of the optima in its unit tests.

use std::sync::Arc;

use jointplan::selection::instances::{long_range, Params};
use jointplan::selection::{
    brute_force, solve, FrontierResult, Objective, SelectionProblem, Solution, SolveOptions,
    Status, Weighted, Weights,
};

use crate::common::selection_instances::{every_objective, tiny_long_range};

fn run(
    p: &SelectionProblem,
    obj: &Arc<dyn Objective>,
    reduced_costs: bool,
    elimination_budget: u64,
) -> Solution {
    let opts = SolveOptions {
        objective: Arc::clone(obj),
        timings: false,
        subpart_dp_states: 0,
        provider_search_steps: 50,
        reduced_costs,
        elimination_budget,
        ..SolveOptions::default()
    };
    let s = solve(p, &opts).unwrap();
    assert_eq!(s.status, Status::Optimal, "{}", obj.name());
    s
}

fn fixed_by_costs(s: &Solution) -> bool {
    s.components
        .iter()
        .any(|c| c.certificate.contains("dual bound"))
}

/// Whether some part was solved on the guess that its first level's
/// optimum is the dual bound (and the guess held).
fn solved_at_the_bound(s: &Solution) -> bool {
    s.components.iter().any(|c| {
        c.certificate
            .contains("which the optimum of the part left reaches")
    })
}

/// Every objective, and `weighted` also with steep rank weights (a
/// preference worth less than the worst rank: the bound is tight there but
/// the incumbent is not, so the guess at the bound decides).
fn objectives() -> Vec<Arc<dyn Objective>> {
    let mut all = every_objective(4);
    all.push(Arc::new(Weighted(Weights {
        preferred: 5,
        ranks: vec![0, 1, 3, 9],
        time: None,
    })));
    all
}

#[test]
fn reduced_costs_agree_with_the_solve_without_them_on_every_objective() {
    let mut fired = 0usize;
    for seed in 0..2u64 {
        for preferred_prob in [0.0, 0.5, 1.0] {
            let params = Params {
                profiles: 4,
                min_candidates: 2,
                max_candidates: 4,
                preferred_prob,
                fallback: false,
                accept_prob: 0.8,
                ..Params::default()
            };
            let p = long_range(50, 1.0, &params, seed);
            for obj in objectives() {
                let without = run(&p, &obj, false, 1 << 10);
                assert!(!fixed_by_costs(&without), "used although switched off");
                for budget in [1 << 6, SolveOptions::default().elimination_budget] {
                    let with = run(&p, &obj, true, budget);
                    assert_eq!(
                        with.choices,
                        without.choices,
                        "seed {seed} pref {preferred_prob} {} budget {budget}",
                        obj.name()
                    );
                    fired += usize::from(fixed_by_costs(&with));
                }
            }
        }
    }
    assert!(
        fired >= 10,
        "reduced costs set candidates aside in {fired} solves only"
    );
}

/// With steep rank weights on 3,000 nodes of long-range sharing, every node
/// preferred, the incumbent of the dual bound stays above the bound while
/// the bound is the optimum: the guess at the bound decides the wide part
/// (its exactness against enumeration is a unit test of `dual_bound.rs`).
/// The answer must not depend on the elimination budget.
#[test]
fn steep_weights_are_decided_at_the_dual_bound() {
    let params = Params {
        profiles: 4,
        preferred_prob: 1.0,
        ..Params::default()
    };
    let p = long_range(3000, 0.5, &params, 1);
    let obj: Arc<dyn Objective> = Arc::new(Weighted(Weights {
        preferred: 5,
        ranks: vec![0, 1, 3, 9],
        time: None,
    }));
    let a = run(&p, &obj, true, SolveOptions::default().elimination_budget);
    assert!(solved_at_the_bound(&a), "{:?}", a.components[0].certificate);
    let b = run(&p, &obj, true, 1 << 12);
    assert_eq!(a.choices, b.choices);
}

#[test]
fn tiny_instances_with_reduced_costs_match_brute_force() {
    let mut compared = 0usize;
    for seed in 0..12u64 {
        let p = tiny_long_range(8, seed);
        for obj in objectives() {
            let FrontierResult::Optimal(brute) = brute_force(&p, obj.as_ref(), 500_000).unwrap()
            else {
                continue;
            };
            for budget in [1 << 2, 1 << 4, 1 << 20] {
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
