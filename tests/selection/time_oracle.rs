//! The time objectives (`min-tpot`, `min-ttft`, `max-throughput`, and `weighted` with time
//! weights) against a brute-force oracle that shares no code with the solver.
//!
//! The oracle reads the problem's public JSON types only and follows
//! `docs/selection-problem.md` (the enumeration and scoring of `enumeration.rs`, which sums
//! a choice's time per metric); a time objective compares that time first (smaller wins), then
//! the `seed-lex` keys; `weighted` adds `Σ_m time[m] · T_m` to its score. Every choice of
//! every small generated problem is enumerated, and the solver's answer must be the
//! oracle's best choice. Time costs are drawn either tiny (many ties, so the tie-breaks
//! decide) or up to 10^12 ps (sums far beyond `f64`'s exact small-integer range of the
//! integer program), and the solver runs with its paths switched on and off.

use std::sync::Arc;

use crate::common::selection_instances::*;
use crate::enumeration::{agrees, best_choice, Scored, METRICS};
use jointplan::selection::{
    objective_by_name, solve, SelectionError, SelectionProblem, SolveOptions, Weighted, Weights,
};
use proptest::prelude::*;

/// A small deterministic generator of the test's own (splitmix64).
struct Mix(u64);
impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// `problem` with random time costs on (most) candidates and on some resources, through
/// its JSON form (the format a user writes). `large`: costs up to 10^12 ps, else 0..4.
fn with_times(problem: &SelectionProblem, seed: u64, large: bool) -> SelectionProblem {
    let mut rng = Mix(seed);
    let cost = |rng: &mut Mix| {
        if large {
            rng.below(1_000_000_000_000)
        } else {
            rng.below(4)
        }
    };
    let mut json = serde_json::to_value(problem).unwrap();
    let mut resources = std::collections::BTreeSet::new();
    for node in json["nodes"].as_array_mut().unwrap() {
        for cand in node["candidates"].as_array_mut().unwrap() {
            for r in cand["accepts"].as_object().unwrap().keys() {
                resources.insert(r.clone());
            }
            if rng.below(5) == 0 {
                continue; // no time costs: all metrics 0
            }
            let mut t = serde_json::Map::new();
            for m in METRICS {
                if rng.below(4) != 0 {
                    t.insert(m.into(), cost(&mut rng).into());
                }
            }
            cand["time_ps"] = t.into();
        }
    }
    // Resources a usable candidate touches may carry profile times (non-decreasing).
    let usable: std::collections::BTreeSet<String> = problem
        .nodes
        .iter()
        .flat_map(|n| n.candidates.iter())
        .filter(|c| c.accepts.values().all(|v| !v.is_empty()))
        .flat_map(|c| c.accepts.keys().cloned())
        .collect();
    let mut table = serde_json::Map::new();
    for r in resources.iter().filter(|r| usable.contains(*r)) {
        if rng.below(2) == 0 {
            continue;
        }
        let mut per = serde_json::Map::new();
        for m in METRICS {
            if rng.below(2) == 0 {
                continue;
            }
            let mut acc = 0u64;
            let list: Vec<u64> = (0..problem.profiles.len())
                .map(|_| {
                    acc += cost(&mut rng);
                    acc
                })
                .collect();
            per.insert(m.into(), list.into());
        }
        table.insert(r.clone(), per.into());
    }
    json["profile_time_ps"] = table.into();
    serde_json::from_value(json).unwrap()
}

/// The objective under test.
#[derive(Clone, Debug)]
enum Goal {
    /// One metric's time (index into `METRICS`), then `seed-lex`.
    Min(usize),
    /// Weighted with time weights per metric.
    Weighted {
        preferred: u32,
        ranks: Vec<u32>,
        time: [u32; 3],
    },
}

fn key(s: &Scored, goal: &Goal) -> i128 {
    match goal {
        Goal::Min(m) => s.time[*m] as i128,
        Goal::Weighted {
            preferred,
            ranks,
            time,
        } => {
            let r: i128 = s
                .counts
                .iter()
                .zip(ranks)
                .map(|(c, w)| *c as i128 * *w as i128)
                .sum();
            let met = s.met.iter().filter(|m| **m).count() as i128;
            let t: i128 = (0..3).map(|m| time[m] as i128 * s.time[m] as i128).sum();
            r - *preferred as i128 * met + t
        }
    }
}

/// The best choice under `goal`: its key first, then the `seed-lex` keys.
fn oracle(problem: &SelectionProblem, goal: &Goal) -> Option<Scored> {
    best_choice(problem, |a, b| {
        key(a, goal).cmp(&key(b, goal)).then_with(|| a.seed_lex(b))
    })
}

/// The solver's option sets: the defaults, and with its shortcuts off (every sub-part to
/// the integer program or elimination, no settled levels, no prefix dominance, no provider
/// search) where the times are small enough for the integer program's exact range.
fn option_sets(large: bool) -> Vec<SolveOptions> {
    let base = SolveOptions {
        timings: false,
        ..SolveOptions::default()
    };
    let mut out = vec![base.clone()];
    out.push(SolveOptions {
        subpart_dp_states: 0,
        ..base.clone()
    });
    out.push(SolveOptions {
        settle_counts: false,
        prefix_dominance: false,
        optimal_supports: false,
        ..base.clone()
    });
    if !large {
        out.push(SolveOptions {
            subpart_dp_states: 0,
            elimination_budget: 0,
            provider_search_steps: 0,
            presolve: false,
            ..base.clone()
        });
        out.push(SolveOptions {
            subpart_dp_states: 0,
            elimination_budget: 0,
            prefix_dominance: false,
            ..base
        });
    }
    out
}

fn check(problem: &SelectionProblem, goal: &Goal, large: bool) -> Result<(), TestCaseError> {
    let objective: Arc<dyn jointplan::selection::Objective> = match goal {
        Goal::Min(m) => Arc::from(
            objective_by_name(["min-tpot", "min-ttft", "max-throughput"][*m], None).unwrap(),
        ),
        Goal::Weighted {
            preferred,
            ranks,
            time,
        } => Arc::new(Weighted(Weights {
            preferred: *preferred,
            ranks: ranks.clone(),
            time: Some(jointplan::selection::TimeWeights {
                tpot: time[0],
                ttft: time[1],
                throughput: time[2],
            }),
        })),
    };
    let expected = if valid(problem) {
        oracle(problem, goal)
    } else {
        None
    };
    for options in option_sets(large) {
        let options = SolveOptions {
            objective: objective.clone(),
            ..options
        };
        let result = solve(problem, &options);
        if !valid(problem) {
            prop_assert!(matches!(result, Err(SelectionError::BadInput(_))));
            continue;
        }
        if let Some(solution) = agrees(
            problem,
            result,
            &expected,
            &format!("{goal:?} with {options:?}"),
        )? {
            let best = expected
                .as_ref()
                .expect("agrees returns a solution only with a best choice");
            let sums = solution.summary.time_ps.clone().unwrap_or_default();
            prop_assert_eq!([sums.tpot, sums.ttft, sums.throughput], best.time);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(200)))]

    /// Every time objective, on every generated shape, against the independent oracle.
    #[test]
    fn time_objectives_match_the_independent_oracle(
        shape in shape(),
        n in 1usize..7,
        params in params(),
        seed in any::<u64>(),
        large in any::<bool>(),
        wp in 0u32..4,
        steps in proptest::collection::vec(0u32..3, 4),
        tw in proptest::collection::vec(0u32..3, 3),
    ) {
        let problem = with_times(&build(&shape, n, &params, seed), seed ^ 0x5eed, large);
        let ranks = weights(wp, &steps, params.profiles).ranks;
        let goals = [
            Goal::Min(0),
            Goal::Min(1),
            Goal::Min(2),
            Goal::Weighted { preferred: wp, ranks, time: [tw[0], tw[1], tw[2]] },
        ];
        for goal in &goals {
            check(&problem, goal, large)?;
        }
    }
}

/// Hand-checked: `fast` costs less decode time but needs the worse profile, whose time cost
/// for `kv` makes it dearer in total, so `min-tpot` picks `slow`; no candidate has a prefill
/// cost, so under `min-ttft` the `seed-lex` keys decide and take the preferred `fast`.
#[test]
fn a_hand_checked_time_problem() {
    let problem: SelectionProblem = serde_json::from_str(
        r#"{"profiles": ["contiguous", "paged-16"],
            "profile_time_ps": {"kv": {"tpot": [0, 500]}},
            "nodes": [
          {"id": "a", "preferred": "fast", "candidates": [
            {"provider": "fast", "accepts": {"kv": ["paged-16"]}, "time_ps": {"tpot": 1000}},
            {"provider": "slow", "accepts": {"kv": ["contiguous"]}, "time_ps": {"tpot": 1400}}]}]}"#,
    )
    .unwrap();
    let run = |name: &str| {
        let options = SolveOptions {
            objective: Arc::from(objective_by_name(name, None).unwrap()),
            timings: false,
            ..SolveOptions::default()
        };
        solve(&problem, &options).unwrap().choices["a"].clone()
    };
    // fast: 1000 + 500 (kv at paged-16) = 1500 > slow: 1400 + 0.
    assert_eq!(run("min-tpot"), "slow");
    assert_eq!(run("min-ttft"), "fast");
    assert_eq!(run("seed-lex"), "fast");
}

/// Bad time costs are refused with the JSON path.
#[test]
fn bad_time_costs_name_their_path() {
    let bad = |text: &str| match SelectionProblem::from_json_str(text)
        .and_then(|p| solve(&p, &SolveOptions::default()))
    {
        Err(SelectionError::BadInput(m)) => m,
        other => panic!("expected bad input, got {other:?}"),
    };
    let decreasing = bad(
        r#"{"profiles": ["a", "b"], "profile_time_ps": {"kv": {"tpot": [5, 1]}},
            "nodes": [{"id": "n", "candidates": [{"provider": "p", "accepts": {"kv": ["a"]}}]}]}"#,
    );
    assert!(
        decreasing.contains("profile_time_ps.kv.tpot[1]"),
        "{decreasing}"
    );
    let short = bad(
        r#"{"profiles": ["a", "b"], "profile_time_ps": {"kv": {"ttft": [5]}},
            "nodes": [{"id": "n", "candidates": [{"provider": "p", "accepts": {"kv": ["a"]}}]}]}"#,
    );
    assert!(short.contains("profile_time_ps.kv.ttft"), "{short}");
    let unknown = bad(
        r#"{"profiles": ["a"], "profile_time_ps": {"nope": {"ttft": [5]}},
            "nodes": [{"id": "n", "candidates": [{"provider": "p", "accepts": {"kv": ["a"]}}]}]}"#,
    );
    assert!(unknown.contains("nope"), "{unknown}");
    let huge = bad(r#"{"profiles": ["a"], "nodes": [{"id": "n", "candidates": [
            {"provider": "p", "accepts": {}, "time_ps": {"tpot": 2000000000000000}}]}]}"#);
    assert!(
        huge.contains("nodes[0].candidates[0].time_ps.tpot"),
        "{huge}"
    );
    let typo = bad(r#"{"profiles": ["a"], "nodes": [{"id": "n", "candidates": [
            {"provider": "p", "accepts": {}, "time_ps": {"tpott": 1}}]}]}"#);
    assert!(typo.contains("tpott"), "{typo}");
}

/// Timed levels by the reduced costs of their dual bound (docs/solver.md, "Reduced costs
/// of a dual bound", timed levels): long-range parts with time costs up to 10^12 ps, the
/// frontier and variable elimination held to tiny budgets so that the parts reach the
/// bound, whose exact recomputation in 128-bit integers sets candidates aside (the
/// integer program cannot take such a level: its magnitude is beyond 2^24). Every answer
/// must be the independent oracle's (none may be refused), and the bound must have set
/// candidates aside in most of the solves.
#[test]
fn timed_levels_by_the_dual_bound_match_the_independent_oracle() {
    let (mut compared, mut fired) = (0usize, 0usize);
    for seed in 0..24u64 {
        let problem = with_times(&tiny_long_range(8, seed), seed ^ 0x71e, true);
        if !valid(&problem) {
            continue;
        }
        for (m, name) in ["min-tpot", "min-ttft", "max-throughput"]
            .iter()
            .enumerate()
        {
            let expected = oracle(&problem, &Goal::Min(m));
            for budget in [1 << 2, 1 << 4] {
                let options = SolveOptions {
                    objective: Arc::from(objective_by_name(name, None).unwrap()),
                    timings: false,
                    subpart_dp_states: 0,
                    elimination_budget: budget,
                    ..SolveOptions::default()
                };
                let what = format!("seed {seed} {name} budget {budget}");
                let solution = agrees(&problem, solve(&problem, &options), &expected, &what)
                    .unwrap_or_else(|e| panic!("{e}"));
                fired += usize::from(solution.is_some_and(|s| {
                    s.components
                        .iter()
                        .any(|c| c.certificate.contains("dual bound"))
                }));
                compared += 1;
            }
        }
    }
    assert!(compared >= 100, "only {compared} comparisons");
    assert!(
        fired >= 100,
        "the dual bound set candidates aside in {fired} solves only"
    );
}

/// The benchmark's time costs (`instances::with_time_costs`) on long-range parts of 30 to
/// 50 nodes, too many to enumerate: every time objective's answer, by default and with the
/// dual bound's path forced (no frontier sub-parts, a tiny elimination budget; there a
/// refusal of the integer program is allowed, never another answer), equals the exact
/// closure frontier's (`Method::Dp`, a different exact method), and the dual bound fires.
#[test]
fn timed_long_range_parts_match_the_frontier() {
    use jointplan::selection::{instances, Method, Status};
    let (mut compared, mut fired) = (0usize, 0usize);
    for (n, seed) in [(30, 1u64), (40, 2), (50, 3)] {
        let params = instances::Params::default();
        let problem =
            instances::with_time_costs(&instances::long_range(n, 0.5, &params, seed), 7, n);
        for name in ["min-tpot", "min-ttft", "max-throughput"] {
            let objective: Arc<dyn jointplan::selection::Objective> =
                Arc::from(objective_by_name(name, None).unwrap());
            let frontier = solve(
                &problem,
                &SolveOptions {
                    objective: objective.clone(),
                    method: Method::Dp,
                    dp_state_budget: 4_000_000,
                    timings: false,
                    ..SolveOptions::default()
                },
            );
            let Ok(frontier) = frontier else {
                continue; // over the frontier's budget: nothing to compare with
            };
            let by_default = solve(
                &problem,
                &SolveOptions {
                    objective: objective.clone(),
                    timings: false,
                    ..SolveOptions::default()
                },
            )
            .unwrap_or_else(|e| panic!("n {n} {name}: {e}"));
            assert_eq!(by_default.status, Status::Optimal, "n {n} {name}");
            assert_eq!(frontier.status, Status::Optimal, "n {n} {name}");
            assert_eq!(by_default.choices, frontier.choices, "n {n} {name}");
            assert_eq!(by_default.profiles, frontier.profiles, "n {n} {name}");
            compared += 1;
            // Forced to the dual bound: the same answer, or the integer program's refusal
            // of a level beyond its exact range where the bound leaves a gap.
            let bounded = solve(
                &problem,
                &SolveOptions {
                    objective,
                    timings: false,
                    subpart_dp_states: 0,
                    elimination_budget: 1 << 4,
                    ..SolveOptions::default()
                },
            );
            match bounded {
                Ok(bounded) => {
                    assert_eq!(bounded.status, Status::Optimal, "n {n} {name}");
                    assert_eq!(bounded.choices, frontier.choices, "n {n} {name}");
                    assert_eq!(bounded.profiles, frontier.profiles, "n {n} {name}");
                    fired += usize::from(
                        bounded
                            .components
                            .iter()
                            .any(|c| c.certificate.contains("dual bound")),
                    );
                }
                Err(e) => assert!(
                    e.to_string().contains("above the exact limit"),
                    "n {n} {name}: {e}"
                ),
            }
        }
    }
    assert!(compared >= 9, "only {compared} comparisons");
    assert!(
        fired >= 6,
        "the dual bound set candidates aside in {fired} solves only"
    );
}
