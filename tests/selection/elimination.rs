//! The levels before the provider ids by variable elimination over a tree
//! decomposition (docs/solver.md, "Variable elimination"): with it on, every
//! answer must be the one of the solve without it (the integer program on
//! the same sub-parts), on every objective and share of preferred nodes,
//! and the certificate must say when it was used. The elimination itself
//! is compared with exhaustive enumeration in its unit tests.

use std::sync::Arc;

use jointplan::selection::instances::{long_range, residual_stream, Params};
use jointplan::selection::{solve, Objective, SelectionProblem, Solution, SolveOptions, Status};

use crate::common::selection_instances::every_objective;

fn instances() -> Vec<(String, SelectionProblem)> {
    let mut out = Vec::new();
    for seed in 0..2u64 {
        for preferred_prob in [0.0, 0.5, 1.0] {
            let params = Params {
                profiles: 4,
                preferred_prob,
                ..Params::default()
            };
            let what = format!("seed {seed} pref {preferred_prob}");
            out.push((
                format!("long-range {what}"),
                long_range(40, 0.5, &params, seed),
            ));
            let without_fallback = Params {
                fallback: false,
                accept_prob: 0.9,
                ..params
            };
            out.push((
                format!("residual without fallback {what}"),
                residual_stream(40, &without_fallback, seed),
            ));
        }
    }
    out
}

fn run(p: &SelectionProblem, obj: &Arc<dyn Objective>, elimination_budget: u64) -> Solution {
    let opts = SolveOptions {
        objective: Arc::clone(obj),
        timings: false,
        // No sub-part to the closure frontier: what elimination does not
        // take goes to the integer program.
        subpart_dp_states: 0,
        elimination_budget,
        ..SolveOptions::default()
    };
    let s = solve(p, &opts).unwrap();
    assert_eq!(s.status, Status::Optimal, "{}", obj.name());
    s
}

#[test]
fn elimination_agrees_with_the_integer_program_on_every_objective() {
    let mut fired = 0usize;
    for (what, p) in instances() {
        for obj in every_objective(4) {
            let eliminated = run(&p, &obj, SolveOptions::default().elimination_budget);
            let by_ilp = run(&p, &obj, 0);
            assert_eq!(eliminated.choices, by_ilp.choices, "{what} {}", obj.name());
            assert!(
                by_ilp
                    .components
                    .iter()
                    .all(|c| !c.certificate.contains("variable elimination")),
                "{what}: used although switched off"
            );
            fired += usize::from(
                eliminated
                    .components
                    .iter()
                    .any(|c| c.certificate.contains("variable elimination")),
            );
        }
    }
    assert!(fired >= 8, "elimination solved {fired} solves only");
}
