//! An oracle for the selection's objectives that shares no code with the solver.
//!
//! The solver's own brute force (`jointplan::selection::brute_force`) scores choices with
//! the same component evaluation the integer program uses, so a wrong score there would be
//! wrong on both sides of every differential test. This oracle starts again from the
//! problem's definition (`docs/selection-problem.md`), on the public JSON types only: the
//! enumeration and scoring of `enumeration.rs`, and
//!
//! - the objectives compare choices level by level (`seed-lex`: preferences met in node
//!   order, then resources per rank from the worst rank down to rank 1, then provider ids in
//!   node order; `max-preferred`: the number met first; `min-penalty`: the rank counts
//!   first; `weighted`: `Σ ranks[k]·count_k − preferred·met` first, then `seed-lex`).
//!
//! Every choice of every small generated problem is enumerated, and the solver's answer must
//! be the oracle's best choice (the provider-id level makes the optimum unique).

use std::cmp::Ordering;
use std::sync::Arc;

use crate::common::selection_instances::*;
use crate::enumeration::{agrees, best_choice, Scored};
use jointplan::selection::{
    solve, MaxPreferred, MinPenalty, Objective, SeedLex, SelectionError, SelectionProblem,
    SolveOptions, Weighted, Weights,
};
use proptest::prelude::*;

/// The objective under test, as the oracle reads it.
#[derive(Clone, Debug)]
enum Goal {
    SeedLex,
    MaxPreferred,
    MinPenalty,
    Weighted(Weights),
}

/// `Less` when `a` is the better choice under `goal`.
fn compare(a: &Scored, b: &Scored, goal: &Goal) -> Ordering {
    match goal {
        Goal::SeedLex => a.seed_lex(b),
        Goal::MaxPreferred => b
            .met_count()
            .cmp(&a.met_count())
            .then_with(|| a.ranks_worst_first(b))
            .then_with(|| a.provider_lex(b)),
        Goal::MinPenalty => a
            .ranks_worst_first(b)
            .then_with(|| a.preferred_lex(b))
            .then_with(|| a.provider_lex(b)),
        Goal::Weighted(w) => weighted(a, w)
            .cmp(&weighted(b, w))
            .then_with(|| a.seed_lex(b)),
    }
}

/// `Σ ranks[k]·count_k − preferred·met`.
fn weighted(s: &Scored, w: &Weights) -> i128 {
    let cost: i128 = s
        .counts
        .iter()
        .zip(&w.ranks)
        .map(|(c, r)| i128::from(*c) * i128::from(*r))
        .sum();
    cost - i128::from(w.preferred) * i128::from(s.met_count())
}

/// The best choice under `goal` by enumerating every choice of usable candidates.
fn oracle(problem: &SelectionProblem, goal: &Goal) -> Option<Scored> {
    best_choice(problem, |a, b| compare(a, b, goal))
}

fn objective(goal: &Goal) -> Arc<dyn Objective> {
    match goal {
        Goal::SeedLex => Arc::new(SeedLex),
        Goal::MaxPreferred => Arc::new(MaxPreferred),
        Goal::MinPenalty => Arc::new(MinPenalty),
        Goal::Weighted(w) => Arc::new(Weighted(w.clone())),
    }
}

fn check(problem: &SelectionProblem, goal: &Goal) -> Result<(), TestCaseError> {
    let options = SolveOptions {
        objective: objective(goal),
        timings: false,
        ..SolveOptions::default()
    };
    let result = solve(problem, &options);
    if !valid(problem) {
        // A node left with no usable candidate is bad input, not an infeasible problem.
        prop_assert!(
            matches!(result, Err(SelectionError::BadInput(_))),
            "{:?}: a node without usable candidates gave {:?}",
            goal,
            result
        );
        return Ok(());
    }
    let expected = oracle(problem, goal);
    agrees(problem, result, &expected, &format!("{goal:?}"))?;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(300)))]

    /// Every objective, on every generated shape, against the independent oracle.
    #[test]
    fn every_objective_matches_the_independent_oracle(
        shape in shape(),
        n in 1usize..7,
        params in params(),
        seed in any::<u64>(),
        wp in 0u32..6,
        steps in proptest::collection::vec(0u32..4, 4),
    ) {
        let problem = build(&shape, n, &params, seed);
        let w = weights(wp, &steps, params.profiles);
        for goal in [Goal::SeedLex, Goal::MaxPreferred, Goal::MinPenalty, Goal::Weighted(w)] {
            check(&problem, &goal)?;
        }
    }
}

/// The oracle itself on a problem small enough to check by hand: two nodes share `kv`; `a`
/// prefers `flash` (contiguous only), `b` has only `paged`. Meeting `a`'s preference makes
/// `kv` infeasible, so every objective picks `paged` for both.
#[test]
fn the_oracle_on_a_hand_checked_problem() {
    let problem: SelectionProblem = serde_json::from_str(
        r#"{"profiles": ["contiguous", "paged-16"], "nodes": [
          {"id": "a", "preferred": "flash", "candidates": [
            {"provider": "flash", "accepts": {"kv": ["contiguous"]}},
            {"provider": "paged", "accepts": {"kv": ["paged-16"]}}]},
          {"id": "b", "candidates": [
            {"provider": "paged", "accepts": {"kv": ["paged-16"]}}]}]}"#,
    )
    .unwrap();
    let best = oracle(&problem, &Goal::SeedLex).unwrap();
    assert_eq!(best.providers, ["paged", "paged"]);
    assert_eq!(best.profiles["kv"], "paged-16");
    assert_eq!(best.counts, [0, 1]);
    assert!(!best.met[0]);
}
