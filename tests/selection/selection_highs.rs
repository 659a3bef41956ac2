//! The HiGHS backend (cargo feature `highs`) against microlp and the exact
//! frontier: on random instances of `jointplan::selection::instances`, for
//! every objective, `--backend highs` gives the same solution as microlp and
//! as `frontier_solve`, cold (the frontier check off, with and without
//! presolve, and with every sub-part sent to the integer program) and with
//! the default check.
//!
//! ```sh
//! cargo test --release --features highs --test selection selection_highs
//! ```
#![cfg(feature = "highs")]

use std::sync::Arc;
use std::time::Duration;

use jointplan::selection::instances::{self, Params};
use jointplan::selection::{
    frontier_solve, solve, Backend, FrontierKind, FrontierResult, MaxPreferred, Method, MinPenalty,
    Objective, SeedLex, SelectionError, SelectionProblem, Solution, SolveOptions, Status, Weighted,
    Weights,
};
use proptest::prelude::*;

use crate::common::selection_instances;
use selection_instances::*;

/// The closure frontier's budget as the oracle.
const ORACLE_BUDGET: u64 = 400_000;

fn opts(obj: &Arc<dyn Objective>, backend: Backend, budget: u64, presolve: bool) -> SolveOptions {
    SolveOptions {
        objective: obj.clone(),
        method: Method::Ilp,
        dp_state_budget: budget,
        timings: false,
        presolve,
        backend,
        ..SolveOptions::default()
    }
}

/// A solve reduced to what the frontier also gives; `None` when a limit
/// stopped it (status `feasible`, or a limit before any solution).
fn outcome(r: &Result<Solution, SelectionError>) -> Option<FrontierResult> {
    match r {
        Ok(s) if s.status == Status::Optimal => Some(FrontierResult::Optimal(s.choices.clone())),
        Ok(_) => None,
        Err(SelectionError::Infeasible { .. }) => Some(FrontierResult::Infeasible),
        Err(SelectionError::Solver { message, .. }) if message.contains("limit") => None,
        Err(e) => panic!("unexpected error: {e}"),
    }
}

/// Integer-program solves a solution reports (from its certificates).
fn milp_solves(r: &Result<Solution, SelectionError>) -> usize {
    let Ok(s) = r else { return 0 };
    s.components
        .iter()
        .filter_map(|c| {
            let (_, rest) = c.certificate.split_once("every level proved optimal (")?;
            rest.split_once(" solves)")?.0.parse::<usize>().ok()
        })
        .sum()
}

/// microlp's time limit per part: microlp stalls on some random instances
/// (it is the slow solver being compared), and a stopped microlp solve is
/// not compared.
const MICROLP_SECONDS: u64 = 3;
/// HiGHS's time limit per part: far above what these instances need, so a
/// HiGHS solve that hits it fails the test.
const HIGHS_SECONDS: u64 = 60;

/// Compares HiGHS with microlp and the closure frontier on `p`; returns the
/// number of integer-program solves HiGHS ran, or `None` when the frontier
/// exceeded its budget (no oracle).
fn check(p: &SelectionProblem, obj: &Arc<dyn Objective>) -> Option<usize> {
    let oracle = frontier_solve(p, obj.as_ref(), FrontierKind::Closure, ORACLE_BUDGET).unwrap();
    if matches!(oracle, FrontierResult::Skipped(_)) {
        return None;
    }
    let mut highs_solves = 0;
    let default_subpart = SolveOptions::default().subpart_dp_states;
    for (budget, presolve, subpart, what) in [
        (0, false, default_subpart, "cold, no presolve"),
        (0, true, default_subpart, "cold, presolve"),
        (0, true, 0, "cold, every sub-part by the integer program"),
        (ORACLE_BUDGET, true, default_subpart, "checked (default)"),
    ] {
        let limited = |backend, seconds| SolveOptions {
            time_limit: Some(Duration::from_secs(seconds)),
            subpart_dp_states: subpart,
            ..opts(obj, backend, budget, presolve)
        };
        let highs = solve(p, &limited(Backend::Highs, HIGHS_SECONDS));
        highs_solves += milp_solves(&highs);
        let h = outcome(&highs)
            .unwrap_or_else(|| panic!("{} {what}: HiGHS hit its time limit", obj.name()));
        assert_eq!(
            h,
            oracle,
            "{} {what}: HiGHS vs closure frontier",
            obj.name()
        );
        let micro = solve(p, &limited(Backend::Microlp, MICROLP_SECONDS));
        if let Some(m) = outcome(&micro) {
            assert_eq!(h, m, "{} {what}: HiGHS vs microlp", obj.name());
        }
        if let (Ok(a), Ok(b)) = (&micro, &highs) {
            if a.status == Status::Optimal {
                assert_eq!(a.profiles, b.profiles, "{} {what}: profiles", obj.name());
                assert_eq!(a.summary, b.summary, "{} {what}: summary", obj.name());
            }
        }
    }
    Some(highs_solves)
}

fn objective(which: u8, w: Weights) -> Arc<dyn Objective> {
    match which % 4 {
        0 => Arc::new(SeedLex),
        1 => Arc::new(MaxPreferred),
        2 => Arc::new(MinPenalty),
        _ => Arc::new(Weighted(w)),
    }
}

/// A shape and a node count: long-range sharing most often and larger (so
/// that presolve and the sub-part frontier leave work for the integer
/// program), the other shapes small.
fn shape_and_size() -> impl Strategy<Value = (Shape, usize)> {
    prop_oneof![
        1 => (Just(Shape::Chain), 1usize..24),
        1 => (Just(Shape::Residual), 1usize..24),
        1 => (Just(Shape::Layers), 1usize..24),
        4 => (Just(Shape::LongRange), 16usize..40),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(300)))]

    /// Every objective: HiGHS equals microlp and the closure frontier.
    #[test]
    fn highs_equals_microlp_and_the_frontier(
        (shape, n) in shape_and_size(),
        params in params(),
        seed in any::<u64>(),
        which in any::<u8>(),
        wp in 0u32..6,
        steps in proptest::collection::vec(0u32..4, 4),
    ) {
        // Long-range instances with a real choice (2+ profiles, 2+
        // candidates), where the integer program has work to do.
        let params = match shape {
            Shape::LongRange => Params {
                profiles: params.profiles.max(2),
                max_candidates: params.max_candidates.max(2),
                ..params
            },
            _ => params,
        };
        let p = build(&shape, n, &params, seed);
        prop_assume!(valid(&p));
        let obj = objective(which, weights(wp, &steps, params.profiles));
        check(&p, &obj);
    }
}

/// Long-range instances large enough that presolve and the sub-part frontier
/// leave work for the integer program: HiGHS must really run (and agree)
/// under every objective.
#[test]
fn highs_runs_the_integer_program_and_agrees() {
    let mut solves = 0;
    let mut compared = 0;
    for seed in 0..24u64 {
        let params = Params {
            profiles: 2 + (seed % 3) as usize,
            max_candidates: 2 + (seed % 2) as usize,
            fallback: seed % 4 != 0,
            ..Params::default()
        };
        let p = instances::long_range(20 + (seed % 3) as usize * 8, 0.5, &params, seed);
        if !valid(&p) {
            continue;
        }
        let w = weights(1 + (seed % 3) as u32, &[0, 1, 2, 3], params.profiles);
        let obj = objective(seed as u8, w);
        if let Some(s) = check(&p, &obj) {
            solves += s;
            compared += 1;
        }
    }
    assert!(compared >= 12, "only {compared} instances compared");
    assert!(solves > 0, "HiGHS ran no integer-program solve");
}

/// Under a node limit, HiGHS answers honestly: `optimal` only with the
/// frontier's answer, otherwise `feasible` with a re-checked selection, or a
/// solver error (a limit before any solution), never a wrong optimum.
#[test]
fn highs_under_a_node_limit_is_honest() {
    for seed in 0..8u64 {
        let params = Params {
            profiles: 4,
            ..Params::default()
        };
        let p = instances::long_range(28, 0.5, &params, seed);
        let oracle = frontier_solve(&p, &SeedLex, FrontierKind::Closure, ORACLE_BUDGET).unwrap();
        let o = SolveOptions {
            node_limit: Some(1),
            dp_state_budget: 0,
            presolve: false,
            timings: false,
            backend: Backend::Highs,
            ..SolveOptions::default()
        };
        match solve(&p, &o) {
            Ok(s) if s.status == Status::Optimal => {
                if !matches!(oracle, FrontierResult::Skipped(_)) {
                    assert_eq!(FrontierResult::Optimal(s.choices), oracle, "seed {seed}");
                }
            }
            Ok(s) => {
                assert!(s.components.iter().any(|c| c.status == Status::Feasible));
                if let FrontierResult::Optimal(best) = &oracle {
                    assert_eq!(s.choices.len(), best.len(), "seed {seed}");
                }
            }
            Err(SelectionError::Solver { message, .. }) => {
                assert!(message.contains("limit"), "seed {seed}: {message}");
            }
            Err(e) => panic!("seed {seed}: unexpected error {e}"),
        }
    }
}

/// Components are solved in parallel; HiGHS instances on several rayon
/// threads at once give the same bytes as one thread.
#[test]
fn highs_output_does_not_depend_on_the_thread_count() {
    let params = Params::default();
    let p = instances::long_range(400, 0.5, &params, 7);
    let o = SolveOptions {
        timings: false,
        backend: Backend::Highs,
        ..SolveOptions::default()
    };
    let run = |k: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(k)
            .build()
            .unwrap();
        match pool.install(|| solve(&p, &o)) {
            Ok(s) => serde_json::to_string(&s).unwrap(),
            Err(e) => format!("error {e}"),
        }
    };
    let one = run(1);
    assert_eq!(one, run(2));
    assert_eq!(one, run(4));
}
