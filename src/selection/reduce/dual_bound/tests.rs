//! The reduced-cost fixing and the guess at the bound against enumeration
//! of every choice of small parts.

use std::cmp::Ordering;

use super::*;
use crate::selection::exact::elimination::tests::{best_by_enumeration, small_parts};
use crate::selection::model::objective::compare_scores;
use crate::selection::reduce::components::advance;
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

/// `comp` with time costs drawn by a splitmix generator seeded with `seed`: each
/// candidate `base + [0, spread)` picoseconds, each resource a non-decreasing row of
/// profile costs of up to `spread` per rank (the objective's combined time, as indexing
/// leaves it in [`CCand::time`] and [`Comp::res_time`]).
fn timed(comp: &Comp, seed: u64, base: u64, spread: u64) -> Comp {
    let mut state = seed;
    let mut next = move |n: u64| {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n.max(1)
    };
    let mut out = comp.clone();
    for node in &mut out.nodes {
        for cand in &mut node.cands {
            cand.time = base + next(spread);
        }
    }
    let rows = comp
        .res_global
        .iter()
        .map(|&g| g as usize)
        .max()
        .map_or(0, |m| m + 1);
    let mut res_time = vec![Vec::new(); rows];
    for &g in &comp.res_global {
        if next(3) != 0 {
            let mut acc = 0;
            res_time[g as usize] = (0..comp.profiles)
                .map(|_| {
                    acc += next(spread);
                    acc
                })
                .collect();
        }
    }
    out.res_time = std::sync::Arc::new(res_time);
    out
}

/// A timed weighted level (a time objective's first level, and `weighted` with time
/// weights): with costs of up to 10^12 picoseconds, and with costs near 10^15 that differ
/// by a few picoseconds (below the resolution of the floating-point ascent at that
/// magnitude, so only the 128-bit recomputation separates them), every optimum keeps its
/// candidates, the incumbent is no worse than the start, the bound is at most the optimum,
/// and every threshold between them keeps the choices at most that value (enumerated).
#[test]
fn timed_levels_keep_every_optimum() {
    use crate::selection::model::objective::TimeMetric;
    let mut checked = 0;
    let mut dropped = 0;
    for (base, spread) in [(0, 1_000_000_000_000), (1_000_000_000_000_000, 8)] {
        for (k, (plain, start, _)) in parts_with_starts(&Weights::time_only(TimeMetric::Tpot, 4))
            .into_iter()
            .enumerate()
        {
            let comp = timed(&plain, k as u64 ^ base, base, spread);
            let mut with_ranks = Weights::time_only(TimeMetric::Tpot, comp.profiles);
            with_ranks.preferred = 3;
            with_ranks.ranks = (0..comp.profiles as u32).map(|r| 2 * r).collect();
            for w in [
                Weights::time_only(TimeMetric::Tpot, comp.profiles),
                with_ranks,
            ] {
                let levels = [Level::Weighted, Level::ProviderLex];
                let costs = LevelCosts::new(Level::Weighted, Some(&w)).expect("additive");
                let best = best_by_enumeration(&comp, &levels, Some(&w)).expect("feasible");
                let optimum = costs
                    .value(&comp, &best_choice(&comp, &best))
                    .expect("feasible");
                let fixing = reduced_cost_fixing(&comp, Level::Weighted, Some(&w), &start, None)
                    .expect("a supported level");
                assert!(fixing.value <= costs.value(&comp, &start).expect("feasible start"));
                assert!(fixing.lower <= optimum, "the bound exceeds the optimum");
                let mut thresholds = vec![fixing.lower - 1, fixing.lower, optimum - 1, optimum];
                thresholds.extend([(optimum + fixing.value) / 2, fixing.value]);
                for t in thresholds {
                    let (keep, gone) = fixing.within(t).expect("no overflow");
                    every_choice(&comp, |choice| {
                        if costs.value(&comp, choice).is_some_and(|v| v <= t) {
                            for (i, &c) in choice.iter().enumerate() {
                                assert!(keep[i] >> c & 1 == 1, "a choice at most {t} set aside");
                            }
                        }
                    });
                    if t == fixing.value {
                        dropped += gone;
                    }
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 60, "only {checked} parts");
    assert!(dropped > 0, "nothing was ever set aside");
}
