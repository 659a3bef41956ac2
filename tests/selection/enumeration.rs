//! The brute-force side of the objective oracles (`objective_oracle`, `time_oracle`): every
//! choice of a small selection problem enumerated and scored from the problem's definition
//! (`docs/selection-problem.md`), on the public JSON types only, sharing no code with the
//! solver.
//!
//! - a candidate that accepts no profile for one of its resources is unusable;
//! - a choice picks one usable candidate per node; every resource a chosen candidate
//!   touches gets the lowest-rank profile that every chosen candidate touching it accepts,
//!   and the choice is infeasible if there is none;
//! - a choice's time of metric `m` is the sum of the chosen candidates' `time_ps.m` plus,
//!   for every used resource, its `profile_time_ps` entry of `m` at the profile it gets.
//!
//! How choices compare is each oracle's own (its objectives); this module only enumerates,
//! scores and checks the solver's answer against the best choice.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use jointplan::selection::{SelectionError, SelectionProblem, Solution};
use proptest::prelude::*;

/// The time metrics, in the order of [`Scored::time`].
pub const METRICS: [&str; 3] = ["tpot", "ttft", "throughput"];

/// One feasible choice and what the objectives look at.
#[derive(Clone, Debug)]
pub struct Scored {
    /// The chosen provider per node, in node order.
    pub providers: Vec<String>,
    /// The profile each used resource gets.
    pub profiles: BTreeMap<String, String>,
    /// Per node: the preference is met.
    pub met: Vec<bool>,
    /// Resources at each rank.
    pub counts: Vec<u64>,
    /// Time per metric (`METRICS` order); zero without time costs.
    pub time: [u128; 3],
}

impl Scored {
    /// How many preferences the choice meets.
    pub fn met_count(&self) -> u64 {
        self.met.iter().filter(|m| **m).count() as u64
    }

    /// More preferences met in node order is better: the first node where the two differ
    /// decides for the one that meets it.
    pub fn preferred_lex(&self, other: &Scored) -> Ordering {
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
    pub fn ranks_worst_first(&self, other: &Scored) -> Ordering {
        for k in (1..self.counts.len()).rev() {
            match self.counts[k].cmp(&other.counts[k]) {
                Ordering::Equal => {}
                decided => return decided,
            }
        }
        Ordering::Equal
    }

    /// Provider ids in node order.
    pub fn provider_lex(&self, other: &Scored) -> Ordering {
        self.providers.cmp(&other.providers)
    }

    /// The `seed-lex` order: preferences in node order, ranks worst first, provider ids.
    pub fn seed_lex(&self, other: &Scored) -> Ordering {
        self.preferred_lex(other)
            .then_with(|| self.ranks_worst_first(other))
            .then_with(|| self.provider_lex(other))
    }
}

/// Scores one choice (a candidate index per node, into the problem's own candidate lists),
/// or `None` if a resource has no profile every chosen candidate accepts.
pub fn score(problem: &SelectionProblem, choice: &[usize]) -> Option<Scored> {
    let mut accepted: BTreeMap<&str, Vec<bool>> = BTreeMap::new();
    let mut time = [0u128; 3];
    for (node, &c) in problem.nodes.iter().zip(choice) {
        let cand = &node.candidates[c];
        if let Some(t) = &cand.time_ps {
            for (m, v) in [t.tpot, t.ttft, t.throughput].into_iter().enumerate() {
                time[m] += u128::from(v.unwrap_or(0));
            }
        }
        for (resource, profiles) in &cand.accepts {
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
        if let Some(pt) = problem.profile_time_ps.get(resource) {
            for (m, list) in [&pt.tpot, &pt.ttft, &pt.throughput].into_iter().enumerate() {
                if let Some(list) = list {
                    time[m] += u128::from(list[rank]);
                }
            }
        }
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
        time,
    })
}

/// The best feasible choice by enumerating every choice of usable candidates; `better(a, b)`
/// orders two choices (`Less`: `a` is the better one). `None` when no choice is feasible.
pub fn best_choice(
    problem: &SelectionProblem,
    better: impl Fn(&Scored, &Scored) -> Ordering,
) -> Option<Scored> {
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
                .is_none_or(|b| better(&s, b) == Ordering::Less)
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

/// The solver's answer against the oracle's best choice: the same providers and profiles
/// when both find one, infeasible when the oracle finds none. `what` names the case.
pub fn agrees(
    problem: &SelectionProblem,
    result: Result<Solution, SelectionError>,
    expected: &Option<Scored>,
    what: &str,
) -> Result<Option<Solution>, TestCaseError> {
    match (result, expected) {
        (Ok(solution), Some(best)) => {
            let chosen: Vec<&str> = problem
                .nodes
                .iter()
                .map(|n| solution.choices[&n.id].as_str())
                .collect();
            let want: Vec<&str> = best.providers.iter().map(String::as_str).collect();
            prop_assert_eq!(chosen, want, "{}: providers differ", what);
            prop_assert_eq!(
                &solution.profiles,
                &best.profiles,
                "{}: profiles differ",
                what
            );
            Ok(Some(solution))
        }
        (Err(SelectionError::Infeasible { .. }), None) => Ok(None),
        (other, best) => Err(TestCaseError::fail(format!(
            "{what}: solver {other:?}; oracle best {best:?}"
        ))),
    }
}
