//! The reduced-cost fixing and the guess at the bound against enumeration
//! of every choice of small parts.

use std::cmp::Ordering;

use super::*;
use crate::selection::exact::elimination::tests::{best_by_enumeration, small_parts};
use crate::selection::model::objective::compare_scores;
use crate::selection::reduce::components::Score;

/// Every candidate some optimum of `level` takes is kept, and the
/// incumbent is feasible and no worse than the start, on every small
/// part and every level the bound supports (each optimum enumerated).
#[test]
fn every_optimum_keeps_its_candidates() {
    let weights = Weights {
        preferred: 3,
        ranks: vec![0, 2, 4, 6],
        time: None,
    };
    let mut checked = 0;
    let mut dropped = 0;
    for (comp, start, w) in parts_with_starts(&weights) {
        for level in [Level::Weighted, Level::PreferredCount, Level::RankCount(1)] {
            let levels = [level];
            let best = best_by_enumeration(&comp, &levels, Some(&w)).expect("feasible");
            let fixing = reduced_cost_fixing(&comp, level, Some(&w), &start, None)
                .expect("a supported level");
            let inc = comp
                .evaluate_local(&fixing.incumbent)
                .expect("feasible incumbent");
            let st = comp.evaluate_local(&start).expect("feasible start");
            assert_ne!(
                compare_scores(&levels, Some(&w), &inc, &st),
                Ordering::Greater
            );
            every_choice(&comp, |choice| {
                if let Some(s) = comp.evaluate_local(choice) {
                    if compare_scores(&levels, Some(&w), &s, &best) == Ordering::Equal {
                        for (i, &c) in choice.iter().enumerate() {
                            assert!(
                                fixing.keep[i] >> c & 1 == 1,
                                "{level:?}: optimum {choice:?} takes a candidate set aside"
                            );
                        }
                    }
                }
            });
            dropped += fixing.dropped;
            checked += 1;
        }
    }
    assert!(checked > 30, "only {checked} parts");
    assert!(dropped > 0, "nothing was ever set aside");
}

/// The guess at the bound (Claim 5): for every threshold `t` from just
/// below the bound up to the incumbent's value, every choice of value at most `t`
/// keeps its candidates under [`Fixing::within`], and whenever the
/// part restricted there has a choice of value at most `t`, its optimum
/// under the whole objective is the part's, and below the optimum the
/// guess is refuted (each enumerated), with
/// steep weights where the bound is tight and the incumbent is not.
#[test]
fn a_guess_at_the_bound_that_holds_gives_the_optimum() {
    let mut held = 0;
    let mut refuted = 0;
    for weights in [
        Weights {
            preferred: 3,
            ranks: vec![0, 2, 4, 6],
            time: None,
        },
        Weights {
            preferred: 5,
            ranks: vec![0, 1, 3, 9],
            time: None,
        },
    ] {
        for (comp, start, w) in parts_with_starts(&weights) {
            let levels = [Level::Weighted, Level::ProviderLex];
            let best = best_by_enumeration(&comp, &levels, Some(&w)).expect("feasible");
            let costs = LevelCosts::new(Level::Weighted, Some(&w)).expect("additive");
            let fixing = reduced_cost_fixing(&comp, Level::Weighted, Some(&w), &start, None)
                .expect("a supported level");
            let optimum = costs
                .value(&comp, &best_choice(&comp, &best))
                .expect("feasible");
            assert!(fixing.lower <= optimum, "the bound exceeds the optimum");
            for t in fixing.lower - 2..=fixing.value {
                let (keep, _) = fixing.within(t).expect("no overflow");
                every_choice(&comp, |choice| {
                    if costs.value(&comp, choice).is_some_and(|v| v <= t) {
                        for (i, &c) in choice.iter().enumerate() {
                            assert!(keep[i] >> c & 1 == 1, "a choice at most {t} set aside");
                        }
                    }
                });
                if keep.contains(&0) {
                    refuted += 1;
                    continue;
                }
                let mut reduced = comp.clone();
                restrict(&mut reduced, &keep);
                match best_by_enumeration(&reduced, &levels, Some(&w)) {
                    Some(b)
                        if costs
                            .value(&reduced, &best_choice(&reduced, &b))
                            .is_some_and(|v| v <= t) =>
                    {
                        assert_eq!(
                            compare_scores(&levels, Some(&w), &b, &best),
                            Ordering::Equal
                        );
                        held += 1;
                    }
                    _ => refuted += 1,
                }
            }
        }
    }
    assert!(held > 30 && refuted > 0, "held {held}, refuted {refuted}");
}

/// The small parts that have a completion by propagation, each with it
/// and with `weights` cut to the part's profiles.
fn parts_with_starts(weights: &Weights) -> Vec<(Comp, Vec<usize>, Weights)> {
    small_parts()
        .into_iter()
        .filter_map(|comp| {
            let start = Domains::new(&comp)
                .ok()
                .and_then(|mut d| d.complete(|_, _| {}))?;
            let mut w = weights.clone();
            w.ranks.truncate(comp.profiles);
            Some((comp, start, w))
        })
        .collect()
}

/// Calls `f` with every choice of `comp` (feasible or not).
fn every_choice(comp: &Comp, mut f: impl FnMut(&[usize])) {
    let domain: Vec<usize> = comp.nodes.iter().map(|n| n.cands.len()).collect();
    let scope: Vec<usize> = (0..domain.len()).collect();
    let mut digits = vec![0usize; domain.len()];
    for _ in 0..domain.iter().product::<usize>() {
        f(&digits);
        advance(&mut digits, &scope, &domain);
    }
}

/// A choice of `comp` whose score is `score`.
fn best_choice(comp: &Comp, score: &Score) -> Vec<usize> {
    let mut found = None;
    every_choice(comp, |choice| {
        if found.is_none() && comp.evaluate_local(choice).as_ref() == Some(score) {
            found = Some(choice.to_vec());
        }
    });
    found.expect("a choice with the enumerated score")
}
