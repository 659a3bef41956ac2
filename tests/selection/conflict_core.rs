//! The deletion filter of why-infeasible (`study::infeasible::minimal_conflict`) against an
//! oracle that shares no code with the solver: a brute-force enumeration of every provider
//! assignment, feasible when every resource keeps a profile all its chosen candidates accept.
//! On random instances with random pins and forbids, the core is checked to be infeasible on
//! its own, and feasible without any one of its facts.

use std::collections::{BTreeMap, BTreeSet};

use jointplan::selection::SelectionProblem;
use jointplan::study::infeasible::{facts_feasible, minimal_conflict, SelectionFact};
use proptest::prelude::*;

use crate::common::selection_instances::{build, cases, params, shape};

/// Brute force: is there an assignment of the nodes of `kept` to candidates allowed by the
/// pins and forbids of `kept` under which every resource has a common accepted profile?
fn oracle(problem: &SelectionProblem, kept: &BTreeSet<SelectionFact>) -> bool {
    let mut choices: Vec<Vec<&jointplan::selection::Candidate>> = Vec::new();
    for fact in kept {
        let SelectionFact::Node(i) = fact else {
            continue;
        };
        let allowed: Vec<_> = problem.nodes[*i]
            .candidates
            .iter()
            .filter(|c| {
                kept.iter().all(|f| match f {
                    SelectionFact::Pin(j, p) => j != i || *p == c.provider,
                    SelectionFact::Forbid(j, p) => j != i || *p != c.provider,
                    SelectionFact::Node(_) => true,
                })
            })
            .collect();
        choices.push(allowed);
    }
    let mut index = vec![0usize; choices.len()];
    if choices.iter().any(Vec::is_empty) {
        return false;
    }
    loop {
        let mut common: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        let mut ok = true;
        'assign: for (k, list) in choices.iter().enumerate() {
            for (resource, profiles) in &list[index[k]].accepts {
                let set: BTreeSet<&str> = profiles.iter().map(String::as_str).collect();
                let entry = common
                    .entry(resource.as_str())
                    .or_insert_with(|| set.clone());
                *entry = entry.intersection(&set).copied().collect();
                if entry.is_empty() {
                    ok = false;
                    break 'assign;
                }
            }
        }
        if ok {
            return true;
        }
        // Next assignment (odometer).
        let mut k = 0;
        loop {
            if k == index.len() {
                return false;
            }
            index[k] += 1;
            if index[k] < choices[k].len() {
                break;
            }
            index[k] = 0;
            k += 1;
        }
    }
}

fn all_facts(
    problem: &SelectionProblem,
    pins: &[(usize, usize)],
    forbids: &[(usize, usize)],
) -> BTreeSet<SelectionFact> {
    let mut facts: BTreeSet<SelectionFact> =
        (0..problem.nodes.len()).map(SelectionFact::Node).collect();
    let provider = |i: usize, c: usize| {
        let list = &problem.nodes[i].candidates;
        list[c % list.len()].provider.clone()
    };
    for &(i, c) in pins {
        let i = i % problem.nodes.len();
        if !problem.nodes[i].candidates.is_empty() {
            facts.insert(SelectionFact::Pin(i, provider(i, c)));
        }
    }
    for &(i, c) in forbids {
        let i = i % problem.nodes.len();
        if !problem.nodes[i].candidates.is_empty() {
            facts.insert(SelectionFact::Forbid(i, provider(i, c)));
        }
    }
    facts
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(96)))]

    #[test]
    fn the_core_is_infeasible_and_every_fact_of_it_is_needed(
        shape in shape(),
        n in 2usize..7,
        params in params(),
        seed in any::<u64>(),
        pins in proptest::collection::vec((0usize..7, 0usize..3), 0..3),
        forbids in proptest::collection::vec((0usize..7, 0usize..3), 0..4),
    ) {
        let mut problem = build(&shape, n, &params, seed);
        // Candidates with an empty accepted list are unusable; the request side drops them
        // before selection, so the facts speak of usable candidates only.
        for node in &mut problem.nodes {
            node.candidates.retain(|c| c.accepts.values().all(|v| !v.is_empty()));
        }
        let facts = all_facts(&problem, &pins, &forbids);
        let feasible = oracle(&problem, &facts);
        prop_assert_eq!(facts_feasible(&problem, &facts).unwrap(), feasible);
        let core = minimal_conflict(&problem, &facts).unwrap();
        match core {
            None => prop_assert!(feasible, "no core for an infeasible instance"),
            Some(core) => {
                prop_assert!(!feasible, "a core for a feasible instance");
                prop_assert!(core.is_subset(&facts));
                prop_assert!(!oracle(&problem, &core), "the core alone must be infeasible: {:?}", core);
                for fact in &core {
                    let mut without = core.clone();
                    without.remove(fact);
                    prop_assert!(oracle(&problem, &without), "without {:?} the core must be feasible: {:?}", fact, core);
                }
            }
        }
    }
}

/// The property above is not vacuous: over fixed seeds of instances without fallback
/// candidates and with sparse accepted sets, many are infeasible, and every core is checked.
#[test]
fn many_fixed_instances_are_infeasible_and_their_cores_check() {
    use jointplan::selection::instances::{chain, long_range, Params};
    let params = Params {
        profiles: 3,
        min_candidates: 1,
        max_candidates: 3,
        preferred_prob: 0.5,
        workspace_prob: 0.2,
        empty_prob: 0.0,
        accept_prob: 0.4,
        fallback: false,
    };
    let mut cores = 0;
    let mut sizes = BTreeSet::new();
    for seed in 0..60u64 {
        for problem in [chain(6, &params, seed), long_range(6, 0.5, &params, seed)] {
            let facts = all_facts(&problem, &[(seed as usize, 0)], &[(seed as usize + 3, 1)]);
            let Some(core) = minimal_conflict(&problem, &facts).unwrap() else {
                assert!(
                    oracle(&problem, &facts),
                    "seed {seed}: no core for an infeasible instance"
                );
                continue;
            };
            assert!(
                !oracle(&problem, &core),
                "seed {seed}: the core alone must be infeasible"
            );
            for fact in &core {
                let mut without = core.clone();
                without.remove(fact);
                assert!(
                    oracle(&problem, &without),
                    "seed {seed}: {fact:?} is not needed"
                );
            }
            cores += 1;
            sizes.insert(core.len());
        }
    }
    assert!(cores >= 20, "only {cores} infeasible instances of 120");
    assert!(sizes.len() >= 2, "cores of one size only: {sizes:?}");
}
