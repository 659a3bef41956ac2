//! Every objective against brute force on tiny instances of every generator
//! family with 0%, 50% and 100% preferred nodes. Without preferences the
//! greedy preference step of `seed-lex` decides nothing, so these cases
//! exercise the paths that must stay exact when nothing is decided greedily:
//! the one-solve penalty and provider-id search, the hierarchical integer
//! program (every sub-part sent to it), and the sub-part frontiers.

use std::sync::Arc;

use jointplan::selection::instances::Params;
use jointplan::selection::{
    brute_force, solve, FrontierResult, MaxPreferred, MinPenalty, Objective, SeedLex,
    SelectionError, SolveOptions, Status, Weighted, Weights,
};

use crate::common::selection_instances::{build, valid, Shape};

fn objectives(profiles: usize) -> Vec<Arc<dyn Objective>> {
    // Non-decreasing rank costs with a preference reward that can trade
    // against one rank step.
    let ranks: Vec<u32> = (0..profiles as u32).map(|k| 2 * k).collect();
    vec![
        Arc::new(SeedLex),
        Arc::new(MaxPreferred),
        Arc::new(MinPenalty),
        Arc::new(Weighted(Weights {
            preferred: 3,
            ranks,
        })),
    ]
}

#[test]
fn every_objective_matches_brute_force_with_0_50_and_100_percent_preferred() {
    let shapes = [
        Shape::Chain,
        Shape::Residual,
        Shape::LongRange,
        Shape::Layers,
    ];
    let mut compared = 0usize;
    let mut without_preferences = 0usize;
    for shape in &shapes {
        for preferred_prob in [0.0, 0.5, 1.0] {
            for profiles in [2usize, 4] {
                for seed in 1..5u64 {
                    let params = Params {
                        profiles,
                        min_candidates: 1,
                        max_candidates: 3,
                        preferred_prob,
                        ..Params::default()
                    };
                    let n = 4 + (seed as usize % 4);
                    let p = build(shape, n, &params, seed);
                    if !valid(&p) {
                        continue;
                    }
                    if p.nodes.iter().all(|n| n.preferred.is_none()) {
                        without_preferences += 1;
                    }
                    for obj in objectives(profiles) {
                        let brute = brute_force(&p, obj.as_ref(), 200_000).unwrap();
                        if matches!(brute, FrontierResult::Skipped(_)) {
                            continue;
                        }
                        // Sub-parts to the frontier (default) and every
                        // sub-part to the integer program; the check off so
                        // that only the solve's own proof stands.
                        // Also without settling count levels by witnesses
                        // and without prefix dominance, so that the paths
                        // they bypass stay checked.
                        let default_states = SolveOptions::default().subpart_dp_states;
                        // The provider-id search with no steps sends every
                        // part to its fallback: probing with prefix
                        // dominance, the integer program without.
                        let steps = SolveOptions::default().provider_search_steps;
                        for (subpart_dp_states, settle_counts, prefix_dominance, search) in [
                            (default_states, true, true, steps),
                            (0, true, true, steps),
                            (0, false, true, steps),
                            (0, false, false, steps),
                            (0, true, true, 0),
                            (0, false, false, 0),
                        ] {
                            let opts = SolveOptions {
                                objective: obj.clone(),
                                dp_state_budget: 0,
                                timings: false,
                                subpart_dp_states,
                                settle_counts,
                                prefix_dominance,
                                provider_search_steps: search,
                                ..SolveOptions::default()
                            };
                            let got = match solve(&p, &opts) {
                                Ok(s) => {
                                    assert_eq!(s.status, Status::Optimal);
                                    FrontierResult::Optimal(s.choices)
                                }
                                Err(SelectionError::Infeasible { .. }) => {
                                    FrontierResult::Infeasible
                                }
                                Err(e) => panic!(
                                    "{shape:?} n={n} seed={seed} pref={preferred_prob} {}: {e}",
                                    obj.name()
                                ),
                            };
                            assert_eq!(
                                got,
                                brute,
                                "{shape:?} n={n} seed={seed} pref={preferred_prob} profiles={profiles} {} subpart_dp_states={subpart_dp_states} settle_counts={settle_counts} prefix_dominance={prefix_dominance} search={search}",
                                obj.name()
                            );
                            compared += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(compared > 300, "only {compared} comparisons ran");
    assert!(
        without_preferences > 10,
        "only {without_preferences} instances without preferences"
    );
}

/// Without preferences, `max-preferred` and `min-penalty` order solutions
/// exactly like `seed-lex` (their preference levels are constant and
/// dropped), so on a long-range instance the integer program cannot finish
/// level by level they reach the same optimum through the penalty solve and
/// the provider-id search.
#[test]
fn without_preferences_every_lexicographic_objective_takes_the_search_path() {
    let params = Params {
        profiles: 4,
        preferred_prob: 0.0,
        ..Params::default()
    };
    let p = jointplan::selection::instances::long_range(300, 0.5, &params, 3);
    assert!(p.nodes.iter().all(|n| n.preferred.is_none()));
    let run = |obj: Arc<dyn Objective>| {
        // Settling count levels by witnesses would bypass the search this
        // test is about.
        let opts = SolveOptions {
            objective: obj,
            timings: false,
            settle_counts: false,
            ..SolveOptions::default()
        };
        let s = solve(&p, &opts).unwrap();
        assert_eq!(s.status, Status::Optimal);
        s
    };
    let seed = run(Arc::new(SeedLex));
    assert!(
        seed.components
            .iter()
            .any(|c| c.certificate.contains("depth-first search")),
        "no component went through the provider-id search"
    );
    for obj in [
        Arc::new(MaxPreferred) as Arc<dyn Objective>,
        Arc::new(MinPenalty),
    ] {
        let s = run(obj.clone());
        assert_eq!(s.choices, seed.choices, "{}", obj.name());
        assert_eq!(s.summary.penalty_by_rank, seed.summary.penalty_by_rank);
        assert!(s
            .components
            .iter()
            .any(|c| c.certificate.contains("depth-first search")));
    }
}
