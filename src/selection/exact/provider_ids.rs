//! The provider-id level after the other levels, by depth-first search.
//!
//! Given a solution proved optimal on every level before the provider ids
//! (by the integer program), the answer is the solution whose provider
//! sequence in node order is smallest among those that equal it on every
//! one of those levels: the same preferred flags where a level compares
//! them in node order, the same value on every count level (preference
//! count, rank counts, weighted score).
//!
//! **Claim.** A depth-first search that fixes the preferred flags, visits
//! the nodes in order, tries each node's live candidates in provider order,
//! propagates after every choice ([`Domains`]) and backtracks on a wipe-out
//! or when an optimistic bound of the count levels is worse than the target,
//! returns that solution first.
//!
//! *Proof.* Without pruning, the search enumerates complete choices in
//! lexicographic order of their provider sequences. Propagation removes only
//! candidates that no solution consistent with the choices so far can use.
//! The bound is optimistic level by level: no completion meets more
//! preferences than the nodes whose preferred candidate is still live; every
//! completion's rank counts are, worst rank first, at least the propagation
//! lower bound (each surely used resource ends at its domain's best rank or
//! worse, other resources only add); and with non-decreasing non-negative
//! rank weights its weighted score is at least the weighted lower bound
//! minus the preference weight times the optimistic count. A branch is cut
//! only when, at the first level where the bound differs from the target,
//! the bound is worse: then every completion is worse than the target at
//! that level or earlier, so it holds no solution equal to the target. The
//! first complete choice reached that equals the target on every level is
//! therefore the smallest one. ∎
//!
//! The search is bounded by a number of steps and a deadline; when the
//! bound is reached the caller falls back to the integer program.

use std::cmp::Ordering;
use std::time::Instant;

use crate::selection::exact::propagation::Domains;
use crate::selection::model::objective::{compare_scores, Level, Weights};
use crate::selection::reduce::components::{Comp, Score};

/// The outcome of [`smallest_optimal`].
pub(crate) enum Search {
    /// The smallest provider sequence equal to the target (local indices).
    Found(Vec<usize>),
    /// The step bound was reached first.
    OutOfSteps,
    /// The deadline passed first.
    OutOfTime,
    /// No solution equals the target (impossible when the target is a
    /// proved optimum; reported as an internal error by the caller).
    Exhausted,
}

/// What the search must match: the values of a proved optimum on `levels`
/// (the objective's levels before the provider ids).
pub(crate) struct Target<'a> {
    /// The levels to match, most significant first.
    pub levels: &'a [Level],
    /// The weights of a weighted level.
    pub weights: Option<&'a Weights>,
    /// The proved optimum's exact evaluation.
    pub opt: &'a Score,
}

impl Target<'_> {
    /// Whether every completion of the state `d` is worse than the target
    /// (see the module's proof).
    fn cut(&self, comp: &Comp, d: &Domains, pref_cand: &[Option<usize>]) -> bool {
        let met_bound = || {
            pref_cand
                .iter()
                .enumerate()
                .filter(|&(u, p)| p.is_some_and(|p| d.is_live(u, p)))
                .count() as u64
        };
        let opt_met = self.opt.pref.iter().filter(|&&p| p).count() as u64;
        let mut penalty_seen = false;
        for level in self.levels {
            let o = match *level {
                // Fixed before the search starts.
                Level::PreferredLex | Level::ProviderLex => Ordering::Equal,
                Level::PreferredCount => opt_met.cmp(&met_bound()),
                Level::RankCount(_) if penalty_seen => Ordering::Equal,
                Level::RankCount(_) => {
                    penalty_seen = true;
                    penalty_order(d.penalty_lower_bound(), &self.opt.counts)
                }
                Level::Weighted => match self.weights {
                    Some(w) => {
                        let met = if w.preferred == 0 { 0 } else { met_bound() };
                        // Time: each node's cheapest live candidate (resource time
                        // costs are non-negative, so leaving them out stays a bound).
                        let time: i128 = if w.has_time() {
                            (0..comp.nodes.len())
                                .map(|u| {
                                    d.live(u)
                                        .map(|c| i128::from(comp.nodes[u].cands[c].time))
                                        .min()
                                        .unwrap_or(0)
                                })
                                .sum()
                        } else {
                            0
                        };
                        w.score_with_time(met, d.penalty_lower_bound(), time)
                            .cmp(&w.score_with_time(opt_met, &self.opt.counts, self.opt.time))
                    }
                    None => Ordering::Equal,
                },
            };
            match o {
                Ordering::Greater => return true,
                Ordering::Less => return false,
                Ordering::Equal => {}
            }
        }
        false
    }
}

/// The penalty comparison (worst rank first; rank 0 is free): `Greater`
/// when `a` is worse than `b`.
fn penalty_order(a: &[u64], b: &[u64]) -> Ordering {
    for k in (1..b.len()).rev() {
        if a[k] != b[k] {
            return a[k].cmp(&b[k]);
        }
    }
    Ordering::Equal
}

struct Frame {
    node: usize,
    live: Vec<usize>,
    next: usize,
    checkpoint: usize,
}

/// Steps between two looks at the clock.
const CLOCK_EVERY: u64 = 256;

/// Depth-first search for the smallest provider sequence equal to `target`,
/// within `max_steps` candidate trials and before `deadline`.
pub(crate) fn smallest_optimal(
    comp: &Comp,
    target: &Target,
    max_steps: u64,
    deadline: Option<Instant>,
) -> Search {
    let Ok(mut d) = Domains::new(comp) else {
        return Search::Exhausted;
    };
    let pref_cand: Vec<Option<usize>> = comp
        .nodes
        .iter()
        .map(|n| n.cands.iter().position(|c| c.preferred))
        .collect();
    if target.levels.contains(&Level::PreferredLex) {
        for (u, p) in pref_cand.iter().enumerate() {
            let Some(p) = *p else { continue };
            let fixed = if target.opt.pref[u] {
                d.fix(u, p)
            } else {
                d.forbid(u, p)
            };
            if fixed.is_err() {
                return Search::Exhausted;
            }
        }
    }
    if target.cut(comp, &d, &pref_cand) {
        return Search::Exhausted;
    }
    let n = comp.nodes.len();
    let next_open =
        |d: &Domains, from: usize| (from..n).find(|&v| d.live_count(v) > 1).unwrap_or(n);
    let mut steps = 0u64;
    let mut stack: Vec<Frame> = Vec::new();
    let mut at = next_open(&d, 0);
    loop {
        if at == n {
            let choice: Vec<usize> = (0..n).map(|v| d.live(v).next().unwrap_or(0)).collect();
            if let Some(score) = comp.evaluate_local(&choice) {
                if compare_scores(target.levels, target.weights, &score, target.opt)
                    == Ordering::Equal
                {
                    return Search::Found(choice);
                }
            }
            // Otherwise a dead end (all nodes decided but not the target).
        } else {
            stack.push(Frame {
                node: at,
                live: d.live(at).collect(),
                next: 0,
                checkpoint: d.checkpoint(),
            });
        }
        // Advance to the next viable branch.
        loop {
            let Some(f) = stack.last_mut() else {
                return Search::Exhausted;
            };
            d.rollback(f.checkpoint);
            if f.next >= f.live.len() {
                stack.pop();
                continue;
            }
            let (u, c) = (f.node, f.live[f.next]);
            f.next += 1;
            steps += 1;
            if steps > max_steps {
                return Search::OutOfSteps;
            }
            if steps % CLOCK_EVERY == 0 && deadline.is_some_and(|t| Instant::now() >= t) {
                return Search::OutOfTime;
            }
            if d.fix(u, c).is_ok() && !target.cut(comp, &d, &pref_cand) {
                at = next_open(&d, u + 1);
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selection::reduce::components::{CCand, CNode};

    fn cand(orig: u16, res: &[(u32, u64)]) -> CCand {
        CCand {
            orig,
            preferred: false,
            res: res.to_vec(),
            time: 0,
        }
    }

    #[test]
    fn finds_the_smallest_sequence_at_the_optimal_penalty() {
        // Two nodes share r0 (profiles p0 < p1). Node 0: a accepts p1,
        // b accepts p0/p1. Node 1: a accepts p0, b accepts p1.
        // Penalty optimum: r0 at p0 (0 resources at rank 1) needs 0=b, 1=a.
        let comp = Comp {
            nodes: vec![
                CNode {
                    global: 0,
                    cands: vec![cand(0, &[(0, 0b10)]), cand(1, &[(0, 0b11)])],
                },
                CNode {
                    global: 1,
                    cands: vec![cand(0, &[(0, 0b01)]), cand(1, &[(0, 0b10)])],
                },
            ],
            res_global: vec![0],
            profiles: 2,
            res_time: Default::default(),
        };
        let levels = [Level::RankCount(1)];
        let at = |counts: Vec<u64>| Score {
            pref: vec![false; 2],
            counts,
            ids: Vec::new(),
            ranks: Vec::new(),
            time: 0,
        };
        let search = |opt: &Score, steps| {
            let target = Target {
                levels: &levels,
                weights: None,
                opt,
            };
            smallest_optimal(&comp, &target, steps, None)
        };
        match search(&at(vec![1, 0]), 100) {
            Search::Found(c) => assert_eq!(c, vec![1, 0]),
            _ => panic!("expected a solution"),
        }
        // With one resource allowed at rank 1, the smallest sequence is (a, b).
        match search(&at(vec![0, 1]), 100) {
            Search::Found(c) => assert_eq!(c, vec![0, 1]),
            _ => panic!("expected a solution"),
        }
        assert!(matches!(search(&at(vec![1, 0]), 0), Search::OutOfSteps));
    }
}
