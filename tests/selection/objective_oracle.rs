//! An oracle for the selection's objectives that shares no code with the solver.
//!
//! The solver's own brute force (`jointplan::selection::brute_force`) scores choices with
//! the same component evaluation the integer program uses, so a wrong score there would be
//! wrong on both sides of every differential test. This oracle starts again from the
//! problem's definition (`docs/selection-problem.md`), on the public JSON types only:
//!
//! - a candidate that accepts no profile for one of its resources is unusable;
//! - a choice picks one usable candidate per node; every resource a chosen candidate
//!   touches gets the lowest-rank profile that every chosen candidate touching it accepts,
//!   and the choice is infeasible if there is none;
//! - the objectives compare choices level by level (`seed-lex`: preferences met in node
//!   order, then resources per rank from the worst rank down to rank 1, then provider ids in
//!   node order; `max-preferred`: the number met first; `min-penalty`: the rank counts
//!   first; `weighted`: `Σ ranks[k]·count_k − preferred·met` first, then `seed-lex`).
//!
//! Every choice of every small generated problem is enumerated, and the solver's answer must
//! be the oracle's best choice (the provider-id level makes the optimum unique).

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::common::selection_instances::*;
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

/// One feasible choice and what the objectives look at.
#[derive(Clone, Debug)]
struct Scored {
    providers: Vec<String>,
    profiles: BTreeMap<String, String>,
    /// Per node: the preference is met.
    met: Vec<bool>,
    /// Resources at each rank.
    counts: Vec<u64>,
}

impl Scored {
    fn met_count(&self) -> u64 {
        self.met.iter().filter(|m| **m).count() as u64
    }

    /// More preferences met in node order is better: the first node where the two differ
    /// decides for the one that meets it.
    fn preferred_lex(&self, other: &Scored) -> Ordering {
        for (a, b) in self.met.iter().zip(&other.met) {
            if a != b {
                return if *a {
                    Ordering::Less
                } else {
                    Ordering::Greater
                };
            }
        }
        Ordering::Equal
    }

    /// Fewer resources at the worst rank first, down to rank 1.
    fn ranks_worst_first(&self, other: &Scored) -> Ordering {
        for k in (1..self.counts.len()).rev() {
            match self.counts[k].cmp(&other.counts[k]) {
                Ordering::Equal => {}
                decided => return decided,
            }
        }
        Ordering::Equal
    }

    fn provider_lex(&self, other: &Scored) -> Ordering {
        self.providers.cmp(&other.providers)
    }

    fn weighted(&self, w: &Weights) -> i128 {
        let cost: i128 = self
            .counts
            .iter()
            .zip(&w.ranks)
            .map(|(c, r)| i128::from(*c) * i128::from(*r))
            .sum();
        cost - i128::from(w.preferred) * i128::from(self.met_count())
    }

    /// `Less` when `self` is the better choice under `goal`.
    fn compare(&self, other: &Scored, goal: &Goal) -> Ordering {
        let seed_lex = || {
            self.preferred_lex(other)
                .then_with(|| self.ranks_worst_first(other))
                .then_with(|| self.provider_lex(other))
        };
        match goal {
            Goal::SeedLex => seed_lex(),
            Goal::MaxPreferred => other
                .met_count()
                .cmp(&self.met_count())
                .then_with(|| self.ranks_worst_first(other))
                .then_with(|| self.provider_lex(other)),
            Goal::MinPenalty => self
                .ranks_worst_first(other)
                .then_with(|| self.preferred_lex(other))
                .then_with(|| self.provider_lex(other)),
            Goal::Weighted(w) => self.weighted(w).cmp(&other.weighted(w)).then_with(seed_lex),
        }
    }
}

/// Scores one choice (a candidate index per node, into the problem's own candidate lists),
/// or `None` if a resource has no profile every chosen candidate accepts.
fn score(problem: &SelectionProblem, choice: &[usize]) -> Option<Scored> {
    let mut accepted: BTreeMap<&str, Vec<bool>> = BTreeMap::new();
    for (node, &c) in problem.nodes.iter().zip(choice) {
        for (resource, profiles) in &node.candidates[c].accepts {
            let entry = accepted
                .entry(resource)
                .or_insert_with(|| vec![true; problem.profiles.len()]);
            for (rank, name) in problem.profiles.iter().enumerate() {
                if !profiles.contains(name) {
                    entry[rank] = false;
                }
            }
        }
    }
    let mut counts = vec![0u64; problem.profiles.len()];
    let mut profiles = BTreeMap::new();
    for (resource, ok) in accepted {
        let rank = ok.iter().position(|x| *x)?;
        counts[rank] += 1;
        profiles.insert(resource.to_owned(), problem.profiles[rank].clone());
    }
    let providers: Vec<String> = problem
        .nodes
        .iter()
        .zip(choice)
        .map(|(n, &c)| n.candidates[c].provider.clone())
        .collect();
    let met = problem
        .nodes
        .iter()
        .zip(&providers)
        .map(|(n, p)| n.preferred.as_deref() == Some(p.as_str()))
        .collect();
    Some(Scored {
        providers,
        profiles,
        met,
        counts,
    })
}

/// The best choice under `goal` by enumerating every choice of usable candidates.
fn oracle(problem: &SelectionProblem, goal: &Goal) -> Option<Scored> {
    let usable: Vec<Vec<usize>> = problem
        .nodes
        .iter()
        .map(|n| {
            (0..n.candidates.len())
                .filter(|&c| n.candidates[c].accepts.values().all(|v| !v.is_empty()))
                .collect()
        })
        .collect();
    if usable.iter().any(Vec::is_empty) {
        return None;
    }
    let mut best: Option<Scored> = None;
    let mut digits = vec![0usize; usable.len()];
    loop {
        let choice: Vec<usize> = digits.iter().zip(&usable).map(|(d, u)| u[*d]).collect();
        if let Some(s) = score(problem, &choice) {
            if best
                .as_ref()
                .is_none_or(|b| s.compare(b, goal) == Ordering::Less)
            {
                best = Some(s);
            }
        }
        // Next choice (mixed-radix counter).
        let mut i = 0;
        loop {
            if i == digits.len() {
                return best;
            }
            digits[i] += 1;
            if digits[i] < usable[i].len() {
                break;
            }
            digits[i] = 0;
            i += 1;
        }
    }
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
    match (result, expected) {
        (Ok(solution), Some(best)) => {
            let chosen: Vec<&str> = problem
                .nodes
                .iter()
                .map(|n| solution.choices[&n.id].as_str())
                .collect();
            let best_providers: Vec<&str> = best.providers.iter().map(String::as_str).collect();
            prop_assert_eq!(chosen, best_providers, "{:?}: providers differ", goal);
            prop_assert_eq!(
                &solution.profiles,
                &best.profiles,
                "{:?}: profiles differ",
                goal
            );
        }
        (Err(SelectionError::Infeasible { .. }), None) => {}
        (Ok(_), None) => {
            return Err(TestCaseError::fail(format!(
                "{goal:?}: the solver found a choice where the oracle finds none"
            )))
        }
        (Err(error), best) => {
            return Err(TestCaseError::fail(format!(
                "{goal:?}: solver error {error}; oracle best {best:?}"
            )))
        }
    }
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
