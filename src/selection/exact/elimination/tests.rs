//! Elimination against enumeration of every choice, and the shapes of
//! small parts the other modules' tests share.

use std::cmp::Ordering;

use super::*;
use crate::selection::instances::{long_range, residual_stream, Params};
use crate::selection::model::objective::compare_scores;
use crate::selection::model::problem::Instance;
use crate::selection::reduce::components::{advance, Score};

/// Every choice of `comp` in turn (mixed radix), evaluated exactly.
pub(crate) fn best_by_enumeration(
    comp: &Comp,
    levels: &[Level],
    weights: Option<&Weights>,
) -> Option<Score> {
    let domain: Vec<usize> = comp.nodes.iter().map(|n| n.cands.len()).collect();
    let scope: Vec<usize> = (0..comp.nodes.len()).collect();
    let total: usize = domain.iter().product();
    let mut digits = vec![0usize; domain.len()];
    let mut best: Option<Score> = None;
    for _ in 0..total {
        if let Some(s) = comp.evaluate_local(&digits) {
            let better = best
                .as_ref()
                .is_none_or(|b| compare_scores(levels, weights, &s, b) == Ordering::Less);
            if better {
                best = Some(s);
            }
        }
        advance(&mut digits, &scope, &domain);
    }
    best
}

pub(crate) fn small_parts() -> Vec<Comp> {
    let mut out = Vec::new();
    for seed in 0..12u64 {
        let params = Params {
            profiles: 3 + (seed as usize % 2),
            min_candidates: 1,
            max_candidates: 3,
            preferred_prob: [0.0, 0.5, 1.0][seed as usize % 3],
            workspace_prob: 0.3,
            empty_prob: 0.1,
            accept_prob: 0.5,
            fallback: seed % 4 != 0,
        };
        let problems = [
            long_range(7, 0.6, &params, seed),
            residual_stream(6, &params, seed),
        ];
        // Instances left with a node without usable candidates are
        // refused before any solver runs: skipped.
        for inst in problems.iter().filter_map(|p| Instance::new(p).ok()) {
            let nodes: Vec<u32> = (0..inst.nodes.len() as u32).collect();
            out.push(Comp::from_instance(&inst, &nodes));
        }
    }
    out
}

#[test]
fn elimination_matches_enumeration_on_every_additive_objective() {
    let level_lists: Vec<(Vec<Level>, Option<Weights>)> = vec![
        (
            vec![
                Level::PreferredCount,
                Level::RankCount(2),
                Level::RankCount(1),
            ],
            None,
        ),
        (
            vec![
                Level::RankCount(2),
                Level::RankCount(1),
                Level::PreferredLex,
            ],
            None,
        ),
        (vec![Level::PreferredLex, Level::RankCount(2)], None),
        (
            vec![
                Level::PreferredCount,
                Level::RankCount(1),
                Level::ProviderLex,
            ],
            None,
        ),
        (vec![Level::ProviderLex], None),
        (
            vec![Level::Weighted, Level::PreferredLex, Level::RankCount(1)],
            Some(Weights {
                preferred: 3,
                ranks: vec![0, 2, 4, 6],
                time: None,
            }),
        ),
    ];
    let mut solved = 0;
    for comp in small_parts() {
        for (levels, weights) in &level_lists {
            let mut weights = weights.clone();
            if let Some(w) = &mut weights {
                w.ranks.truncate(comp.profiles);
            }
            let expected = best_by_enumeration(&comp, levels, weights.as_ref());
            let got = eliminate(&comp, levels, weights.as_ref(), &Reach::budget(1 << 20))
                .expect("a small part fits the budget");
            match (got, expected) {
                (Eliminated::Infeasible, None) => {}
                (Eliminated::Optimal(choice), Some(best)) => {
                    let score = comp.evaluate_local(&choice).expect("a feasible choice");
                    assert_eq!(
                        compare_scores(levels, weights.as_ref(), &score, &best),
                        Ordering::Equal,
                        "levels {levels:?}: elimination {choice:?} is not optimal"
                    );
                    solved += 1;
                }
                (got, expected) => panic!("{got:?} against enumeration {expected:?}"),
            }
        }
    }
    assert!(solved > 40, "only {solved} feasible cases");
}

#[test]
fn an_exceeded_budget_leaves_the_part_alone() {
    let comp = small_parts().remove(1);
    let levels = [Level::RankCount(1), Level::ProviderLex];
    assert_eq!(eliminate(&comp, &levels, None, &Reach::budget(1)), None);
    assert_eq!(
        eliminate(&comp, &levels[..1], None, &Reach::budget(1)),
        None
    );
}

/// With the provider ids last, the answer is the unique optimum: the
/// smallest candidate sequence among the choices optimal on the other
/// levels, found here by enumerating them in that order.
#[test]
fn with_the_provider_ids_the_answer_is_the_smallest_optimum() {
    let mut checked = 0;
    for comp in small_parts() {
        for (levels, weights) in [
            (
                vec![Level::PreferredLex, Level::RankCount(1), Level::ProviderLex],
                None,
            ),
            (
                vec![Level::Weighted, Level::PreferredLex, Level::ProviderLex],
                Some(Weights {
                    preferred: 2,
                    ranks: vec![0, 1, 3, 5][..comp.profiles.min(4)].to_vec(),
                    time: None,
                }),
            ),
        ] {
            let prefix = &levels[..levels.len() - 1];
            let Some(best) = best_by_enumeration(&comp, prefix, weights.as_ref()) else {
                continue;
            };
            let mut digits = vec![0usize; comp.nodes.len()];
            let order: Vec<usize> = (0..comp.nodes.len()).collect();
            let domain: Vec<usize> = comp.nodes.iter().map(|n| n.cands.len()).collect();
            let cells: usize = domain.iter().product();
            let mut smallest = None;
            for _ in 0..cells {
                if let Some(score) = comp.evaluate_local(&digits) {
                    let same = compare_scores(prefix, weights.as_ref(), &score, &best);
                    if same == Ordering::Equal {
                        smallest = Some(digits.clone());
                        break;
                    }
                }
                advance(&mut digits, &order, &domain);
            }
            let got = eliminate(&comp, &levels, weights.as_ref(), &Reach::budget(1 << 20));
            assert_eq!(got, smallest.map(Eliminated::Optimal), "levels {levels:?}");
            checked += 1;
        }
    }
    assert!(checked > 10, "only {checked} feasible cases");
}

/// The provider-id fields order choices exactly as their candidate
/// sequences, also when the fields run over several words (a part of
/// 120 nodes with up to 9 candidates: over three words).
#[test]
fn provider_id_fields_order_choices_as_their_sequences() {
    let params = Params {
        profiles: 2,
        min_candidates: 1,
        max_candidates: 9,
        preferred_prob: 0.5,
        workspace_prob: 0.0,
        empty_prob: 0.0,
        accept_prob: 1.0,
        fallback: false,
    };
    let inst = Instance::new(&long_range(120, 0.0, &params, 5)).expect("a valid instance");
    let nodes: Vec<u32> = (0..inst.nodes.len() as u32).collect();
    let comp = Comp::from_instance(&inst, &nodes);
    let layout = Layout::new(&comp, &[Level::ProviderLex], None).expect("a layout");
    assert!(layout.width >= 4, "the fields span {} words", layout.width);
    let cost = |choice: &[usize]| {
        let mut sum = vec![0i64; layout.width];
        for (i, &c) in choice.iter().enumerate() {
            let pref = comp.nodes[i].cands[c].preferred;
            layout.node_term(i, c, (pref, 0), &mut sum);
        }
        sum
    };
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |k: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % k as u64) as usize
    };
    let mut disagreements = 0;
    for round in 0..500 {
        let a: Vec<usize> = comp.nodes.iter().map(|n| next(n.cands.len())).collect();
        let mut b = a.clone();
        // Change one node (sometimes a late one, sometimes an early one)
        // and maybe a few after it.
        let at = next(b.len());
        for i in at..(at + 1 + round % 4).min(b.len()) {
            b[i] = next(comp.nodes[i].cands.len());
        }
        if cost(&a).cmp(&cost(&b)) != a.cmp(&b) {
            disagreements += 1;
        }
    }
    assert_eq!(disagreements, 0);
}

#[test]
fn without_levels_any_feasible_choice_is_returned() {
    for comp in small_parts() {
        match eliminate(&comp, &[], None, &Reach::budget(1 << 20)) {
            Some(Eliminated::Optimal(choice)) => {
                assert!(comp.evaluate_local(&choice).is_some(), "{choice:?}")
            }
            Some(Eliminated::Infeasible) => {
                assert!(best_by_enumeration(&comp, &[], None).is_none())
            }
            None => panic!("a small part fits the budget"),
        }
    }
}
