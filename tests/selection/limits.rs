//! `--time-limit` and `--node-limit` on an instance the integer program
//! cannot finish within them: the solve returns its best solution with
//! status `feasible` and a real gap (best bound against the returned
//! solution). Only statuses and gaps are asserted, never a wall time.

use std::sync::Arc;
use std::time::Duration;

use jointplan::selection::instances::{self, Params};
use jointplan::selection::{solve, MaxPreferred, SelectionProblem, SolveOptions, Status};

/// Random long-range sharing, 300 nodes, four profiles, 70% preferred: with
/// `max-preferred`, variable elimination and reduced costs off
/// its large component needs many seconds of integer programming.
fn hard() -> SelectionProblem {
    instances::long_range(
        300,
        0.5,
        &Params {
            profiles: 4,
            ..Params::default()
        },
        3,
    )
}

fn assert_feasible_with_gap(p: &SelectionProblem, opts: &SolveOptions) {
    let s = solve(p, opts).expect("a limit still returns the best solution found");
    assert_eq!(s.status, Status::Feasible);
    let stopped: Vec<_> = s
        .components
        .iter()
        .filter(|c| c.status == Status::Feasible)
        .collect();
    assert!(!stopped.is_empty());
    for c in stopped {
        let gap = c.gap.unwrap_or_else(|| {
            panic!(
                "component {} stopped without a gap: {}",
                c.first_node, c.certificate
            )
        });
        assert!(gap.is_finite() && gap >= 0.0, "gap {gap}");
        assert!(
            c.certificate.starts_with("none: a limit stopped"),
            "{}",
            c.certificate
        );
    }
    // Every optimal component reports no gap.
    assert!(s
        .components
        .iter()
        .filter(|c| c.status == Status::Optimal)
        .all(|c| c.gap.is_none()));
}

#[test]
fn a_tiny_time_limit_returns_a_feasible_solution_with_a_gap() {
    let p = hard();
    for limit in [Duration::ZERO, Duration::from_millis(20)] {
        let opts = SolveOptions {
            objective: Arc::new(MaxPreferred),
            time_limit: Some(limit),
            timings: false,
            elimination_budget: 0,
            reduced_costs: false,
            ..SolveOptions::default()
        };
        assert_feasible_with_gap(&p, &opts);
    }
}

#[test]
fn a_node_limit_returns_a_feasible_solution_with_a_gap() {
    let opts = SolveOptions {
        objective: Arc::new(MaxPreferred),
        node_limit: Some(1),
        timings: false,
        elimination_budget: 0,
        reduced_costs: false,
        ..SolveOptions::default()
    };
    assert_feasible_with_gap(&hard(), &opts);
}
