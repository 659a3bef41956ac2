//! Leading count levels settled at their best possible value by witnesses
//! (docs/solver.md, "Settled count levels"): the restricted part must give
//! the same optimum as the solve that does not settle them, and the
//! certificate must say when the rule decided.

use std::sync::Arc;

use jointplan::selection::instances::{long_range, Params};
use jointplan::selection::{
    brute_force, solve, FrontierResult, MaxPreferred, MinPenalty, Objective, SolveOptions, Status,
    Weighted, Weights,
};

fn run(
    p: &jointplan::selection::SelectionProblem,
    obj: Arc<dyn Objective>,
    settle: bool,
) -> jointplan::selection::Solution {
    let opts = SolveOptions {
        objective: obj,
        timings: false,
        settle_counts: settle,
        ..SolveOptions::default()
    };
    let s = solve(p, &opts).unwrap();
    assert_eq!(s.status, Status::Optimal);
    s
}

fn settled(s: &jointplan::selection::Solution) -> bool {
    s.components
        .iter()
        .any(|c| c.certificate.contains("count levels settled"))
}

/// Solves with and without settling: the first must have settled a level,
/// the second none, and both must choose the same; returns the first.
fn settled_and_agrees(
    p: &jointplan::selection::SelectionProblem,
    obj: Arc<dyn Objective>,
    seed: u64,
) -> jointplan::selection::Solution {
    let fast = run(p, obj.clone(), true);
    let slow = run(p, obj, false);
    assert!(settled(&fast), "seed {seed}: no level was settled");
    assert!(
        !settled(&slow),
        "seed {seed}: settled although switched off"
    );
    assert_eq!(fast.choices, slow.choices, "seed {seed}");
    fast
}

fn weighted(ranks: Vec<u32>) -> Arc<dyn Objective> {
    Arc::new(Weighted(Weights {
        preferred: 3,
        ranks,
        time: None,
    }))
}

/// With a fallback candidate at every node, every resource can be at rank 0,
/// so `min-penalty`'s penalty levels are settled at zero and the rest is
/// decided like `seed-lex`; without preferences the `weighted` level (free
/// rank 0) is likewise at its best possible value, zero. Both answers equal
/// the level-by-level solve.
#[test]
fn a_reachable_zero_penalty_is_settled_and_agrees_with_the_level_by_level_solve() {
    for seed in 0..6u64 {
        let preferred_prob = [0.0, 0.5, 1.0][(seed % 3) as usize];
        let params = Params {
            profiles: 4,
            preferred_prob,
            ..Params::default()
        };
        let p = long_range(120, 0.5, &params, seed);
        let fast = settled_and_agrees(&p, Arc::new(MinPenalty), seed);
        assert!(fast.summary.penalty_by_rank[1..].iter().all(|&c| c == 0));
        if preferred_prob == 0.0 {
            settled_and_agrees(&p, weighted(vec![0, 2, 4, 6]), seed);
        }
    }
}

/// When every preference can be met at once (every preferred candidate
/// accepts every profile), `max-preferred`'s count level is settled by keeping the
/// preferred candidates; the answer equals the level-by-level solve.
#[test]
fn max_preferred_settles_when_every_preference_can_be_met() {
    for seed in 0..4u64 {
        let params = Params {
            profiles: 3,
            preferred_prob: 0.8,
            ..Params::default()
        };
        let mut p = long_range(100, 0.5, &params, seed);
        let all: Vec<String> = p.profiles.clone();
        for n in &mut p.nodes {
            if let Some(pr) = n.preferred.clone() {
                for c in n.candidates.iter_mut().filter(|c| c.provider == pr) {
                    for accepted in c.accepts.values_mut() {
                        *accepted = all.clone();
                    }
                }
            }
        }
        let fast = settled_and_agrees(&p, Arc::new(MaxPreferred), seed);
        let possible = p
            .nodes
            .iter()
            .filter(|n| {
                n.preferred
                    .as_ref()
                    .is_some_and(|pr| n.candidates.iter().any(|c| &c.provider == pr))
            })
            .count();
        assert_eq!(fast.summary.preferred_met, possible, "seed {seed}");
    }
}

/// Where a witness cannot settle a level (no fallback, random masks), the
/// rule must not change the optimum: tiny instances against brute force.
#[test]
fn settling_never_changes_the_optimum_on_tiny_instances() {
    let mut compared = 0;
    for seed in 0..60u64 {
        let params = Params {
            profiles: 2 + (seed % 3) as usize,
            preferred_prob: [0.0, 0.5, 1.0][(seed % 3) as usize],
            fallback: seed % 2 == 0,
            ..Params::default()
        };
        let p = long_range(7 + (seed % 4) as usize, 0.6, &params, seed);
        let profiles = p.profiles.len() as u32;
        for obj in [
            Arc::new(MinPenalty) as Arc<dyn Objective>,
            Arc::new(MaxPreferred),
            weighted((0..profiles).map(|k| 2 * k).collect()),
            // A first rank that costs: never settled, still exact.
            weighted((0..profiles).map(|k| 1 + k).collect()),
        ] {
            let brute = brute_force(&p, obj.as_ref(), 500_000).unwrap();
            let FrontierResult::Optimal(want) = brute else {
                continue;
            };
            let opts = SolveOptions {
                objective: obj.clone(),
                timings: false,
                dp_state_budget: 0,
                subpart_dp_states: 0,
                ..SolveOptions::default()
            };
            let got = solve(&p, &opts).unwrap();
            assert_eq!(got.choices, want, "seed {seed} {}", obj.name());
            compared += 1;
        }
    }
    assert!(compared > 60, "only {compared} comparisons ran");
}
