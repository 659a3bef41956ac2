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

fn weighted(ranks: Vec<u32>) -> Arc<dyn Objective> {
    Arc::new(Weighted(Weights {
        preferred: 3,
        ranks,
    }))
}

/// Without preferences and with free rank 0, the `weighted` level is at its
/// best possible value (zero) when every resource can be at rank 0; with a
/// fallback candidate at every node it can, and the part is restricted.
#[test]
fn weighted_settles_at_zero_without_preferences() {
    for seed in 0..3u64 {
        let params = Params {
            profiles: 4,
            preferred_prob: 0.0,
            ..Params::default()
        };
        let p = long_range(150, 0.5, &params, seed);
        let obj = weighted(vec![0, 2, 4, 6]);
        let fast = run(&p, obj.clone(), true);
        let slow = run(&p, obj, false);
        assert!(settled(&fast), "seed {seed}: no level was settled");
        assert_eq!(fast.choices, slow.choices, "seed {seed}");
    }
}

/// With a fallback candidate at every node, every resource can be at rank 0,
/// so `min-penalty`'s penalty levels are settled at zero and the rest is
/// decided like `seed-lex`; the answer equals the level-by-level solve.
#[test]
fn min_penalty_settles_a_zero_penalty_and_agrees_with_the_level_by_level_solve() {
    for seed in 0..4u64 {
        let params = Params {
            profiles: 4,
            preferred_prob: 0.5 + 0.5 * (seed % 2) as f64,
            ..Params::default()
        };
        let p = long_range(120, 0.5, &params, seed);
        let fast = run(&p, Arc::new(MinPenalty), true);
        let slow = run(&p, Arc::new(MinPenalty), false);
        assert!(settled(&fast), "seed {seed}: no level was settled");
        assert!(
            !settled(&slow),
            "seed {seed}: settled although switched off"
        );
        assert_eq!(fast.choices, slow.choices, "seed {seed}");
        assert!(fast.summary.penalty_by_rank[1..].iter().all(|&c| c == 0));
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
        let fast = run(&p, Arc::new(MaxPreferred), true);
        let slow = run(&p, Arc::new(MaxPreferred), false);
        assert!(settled(&fast), "seed {seed}: no level was settled");
        assert_eq!(fast.choices, slow.choices, "seed {seed}");
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
