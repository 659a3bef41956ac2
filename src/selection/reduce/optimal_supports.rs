//! Candidates in no optimum of the leading levels, found by variable
//! elimination and set aside before the whole objective is solved.
//!
//! **What it computes.** Given a part, its levels and `k` such that the
//! first `k` levels are additive (no provider ids among them), the set of
//! candidates of every node that some choice optimal on those `k` levels
//! uses: the node's *optimal support*. The part restricted to its supports
//! then goes back to presolve, which fixes the nodes left with one
//! candidate and splits what remains.
//!
//! **Why the restriction is exact.** The objective compares level by level,
//! so a choice optimal on every level is optimal on the first `k`: each of
//! its candidates is in its node's support, and the restricted part keeps
//! every optimum of the part. Its feasible choices are a subset of the
//! part's, so it has no better one: the two have the same optima.
//!
//! **How the supports are read.** The forward pass of bucket elimination
//! (`elimination.rs`) records, for every eliminated node `v` and every cell
//! `s` of its message's scope `S(v)`, the set `best(v, s)` of candidates of
//! `v` that minimise its bucket at `s`, and which steps' messages the bucket
//! received (its children: a message goes to the bucket of the first node
//! of its scope to be eliminated, so the buckets form a forest and a
//! child's scope lies inside its parent's scope plus the parent's node).
//! The bucket of `v` holds every term of the nodes eliminated before `v` in
//! its subtree, joined to the rest only through `S(v)`: for a choice `x`
//! the terms of `v`'s subtree sum to at least `m_v(x|S(v))`, with equality
//! exactly when `x` minimises the subtree given `x|S(v)`. A choice is thus
//! optimal iff at every step, read from the roots down, `x_v ∈ best(v,
//! x|S(v))` (if one step failed, replacing that subtree's part of `x` by a
//! minimiser would lower the total; conversely such a choice reaches every
//! root's minimum, which sum to the optimum). Call a cell of `S(v)`
//! *reachable* when some optimal choice takes it. Roots have one (empty)
//! cell, reachable. For a reachable cell `s` of `S(v)` and `c ∈ best(v,
//! s)`, the assignment `(v = c, s)` is taken by an optimal choice: take one
//! that reaches `s` and replace its part in `v`'s subtree by a minimiser
//! with `v = c`, which costs the same `m_v(s)` (the subtree meets the rest
//! only through `S(v)`). Its projections on the children's scopes are
//! therefore reachable, and every reachable cell of a child arises so (the
//! optimal choice that takes it takes some reachable cell of the parent).
//! So one pass from the roots down marks exactly the reachable cells, and
//! `c` is in `v`'s support iff `c ∈ best(v, s)` for a reachable `s`.
//!
//! **Why it pays.** The elimination asked for the first levels only sees
//! the terms that vary on them (`elimination.rs` drops a node from a term
//! that does not depend on it): for `max-preferred` the preferred count
//! alone is a sum over nodes plus the infeasible combinations, a far
//! narrower graph than the one every rank level adds. On long-range
//! sharing with every node preferred, the supports of the preferred count
//! fix most nodes, and the levels after it are then solved on what is left
//! (docs/solver.md, "Optimal supports").

use crate::selection::exact::elimination::{eliminate, forward, Eliminated, Forward, Reach};
use crate::selection::exact::ilp::{solve_ilp_proved, IlpOutcome};
use crate::selection::exact::part_method::PartMethod;
use crate::selection::exact::preference::{narrow, widen};
use crate::selection::exact::provider_ids::{smallest_optimal, Search, Target};
use crate::selection::exact::strategy::{PartResult, PartSolver};
use crate::selection::model::objective::{Level, Weights};
use crate::selection::reduce::components::{advance, Comp};
use crate::selection::reduce::dual_bound::reduced_cost_fixing;
use crate::selection::reduce::prefix_dominance::{drop_prefix_dominated, lift_supports};

/// The optimal support of every node of a forward pass that is feasible:
/// bit `c` of entry `v` is set when some optimal choice takes candidate
/// `c` at node `v`.
pub(crate) fn optimal_supports(fw: &Forward) -> Vec<u64> {
    let domain = &fw.domain;
    let mut support = vec![0u64; domain.len()];
    let cells = |scope: &[usize]| scope.iter().map(|&i| domain[i]).product::<usize>();
    let mut reach: Vec<Vec<bool>> = fw
        .steps
        .iter()
        .map(|s| {
            let mut r = vec![false; cells(&s.scope)];
            // A root (nothing left to send a message to) is reachable.
            r[0] |= s.scope.is_empty();
            r
        })
        .collect();
    // Parents are eliminated after their children: walk the steps back.
    for at in (0..fw.steps.len()).rev() {
        let step = &fw.steps[at];
        // Each child's strides for the scope's nodes and for `step.node`.
        let strides: Vec<(usize, Vec<usize>, usize)> = step
            .children
            .iter()
            .map(|&c| {
                let child = &fw.steps[c].scope;
                let mut own = vec![0usize; child.len()];
                let mut s = 1usize;
                for j in (0..child.len()).rev() {
                    own[j] = s;
                    s *= domain[child[j]];
                }
                let of = |i: usize| child.iter().position(|&x| x == i).map_or(0, |j| own[j]);
                (
                    c,
                    step.scope.iter().map(|&i| of(i)).collect(),
                    of(step.node),
                )
            })
            .collect();
        let mut digits = vec![0usize; step.scope.len()];
        let reachable = std::mem::take(&mut reach[at]);
        for (cell, &r) in reachable.iter().enumerate() {
            if r {
                let best = step.best[cell];
                support[step.node] |= best;
                for (c, by_scope, by_node) in &strides {
                    let base: usize = digits.iter().zip(by_scope).map(|(d, s)| d * s).sum();
                    for x in (0..domain[step.node]).filter(|&x| best >> x & 1 == 1) {
                        reach[*c][base + x * by_node] = true;
                    }
                }
            }
            advance(&mut digits, &step.scope, domain);
        }
    }
    support
}

/// The supports of the whole run `levels` (every one additive) on `comp`,
/// narrowed level by level: the supports of the first level, then of the
/// first two on the part restricted to those, and so on, as far as each
/// elimination fits `budget` (each restriction keeps every optimum of the
/// whole run, so stopping early leaves a superset). Candidate masks of
/// `comp`'s local indices; `None` when not even the first level fits or
/// no choice is feasible.
pub(crate) fn staged_supports(
    comp: &Comp,
    levels: &[Level],
    weights: Option<&Weights>,
    reach: &Reach,
) -> Option<Vec<u64>> {
    let mut keep: Option<Vec<u64>> = None;
    let mut part = comp.clone();
    for k in 1..=levels.len() {
        let Some(fw) = forward(&part, &levels[..k], weights, reach) else {
            break;
        };
        if fw.infeasible() {
            return None;
        }
        let support = optimal_supports(&fw);
        let old = keep.unwrap_or_else(|| comp.nodes.iter().map(|n| all(n.cands.len())).collect());
        keep = Some(
            old.iter()
                .zip(&support)
                .map(|(&o, &s)| select(o, s))
                .collect(),
        );
        restrict(&mut part, &support);
    }
    keep
}

/// Every candidate of a node with `n` candidates.
fn all(n: usize) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// The bits of `mask` whose rank among its set bits is set in `by_rank`.
fn select(mask: u64, by_rank: u64) -> u64 {
    (0..64)
        .filter(|&b| mask >> b & 1 == 1)
        .enumerate()
        .filter(|&(rank, _)| by_rank >> rank & 1 == 1)
        .fold(0, |out, (_, bit)| out | 1 << bit)
}

/// Keeps, at every node, the candidates whose bit is set in `keep`.
pub(in crate::selection) fn restrict(comp: &mut Comp, keep: &[u64]) {
    for (nd, s) in comp.nodes.iter_mut().zip(keep) {
        let mut c = 0;
        nd.cands.retain(|_| {
            c += 1;
            s >> (c - 1) & 1 == 1
        });
    }
}

/// The share of the provider-id search's steps spent on the whole part
/// before it is narrowed to the optima of the earlier levels.
const FIRST_SEARCH_SHARE: u64 = 10;

impl PartSolver<'_> {
    /// `comp` solved to `levels` after the candidates in no optimum of a
    /// leading run of additive levels are set aside: the shortest such run
    /// whose elimination fits the budget and sets something aside (the
    /// whole additive run only when the provider ids follow it: otherwise
    /// the caller has just tried the whole elimination). `None` when no
    /// run does, or a limit stopped it.
    pub(in crate::selection) fn by_optimal_supports(
        &self,
        comp: &Comp,
        levels: &[Level],
    ) -> Result<Option<PartResult>, String> {
        if self.elimination_budget == 0 || !self.optimal_supports {
            return Ok(None);
        }
        if self.prefix_dominance && levels.last() == Some(&Level::ProviderLex) {
            // The levels before the provider ids go to the part without its
            // prefix-dominated candidates, whose sub-parts come back here
            // with those levels alone, and the provider ids are chosen
            // among their optima ([`Self::provider_ids_among_optima`]):
            // an elimination of the whole part here would be the widest.
            return Ok(None);
        }
        let additive = levels
            .iter()
            .take_while(|l| **l != Level::ProviderLex)
            .count();
        let longest = if additive == levels.len() {
            additive.saturating_sub(1)
        } else {
            additive
        };
        for k in 1..=longest {
            // A longer run only adds terms: past the budget here, past it
            // there too.
            let Some(fw) = forward(comp, &levels[..k], self.weights, &self.reach()) else {
                return Ok(None);
            };
            if fw.infeasible() {
                return Ok(Some(PartResult {
                    outcome: IlpOutcome::Infeasible,
                    method: PartMethod {
                        eliminated_parts: 1,
                        ..PartMethod::default()
                    },
                }));
            }
            let support = optimal_supports(&fw);
            let dropped: usize = comp
                .nodes
                .iter()
                .zip(&support)
                .map(|(nd, s)| nd.cands.len() - s.count_ones() as usize)
                .sum();
            if dropped == 0 {
                continue;
            }
            let mut reduced = comp.clone();
            restrict(&mut reduced, &support);
            // The first-minimiser choice is optimal on the run, so every
            // candidate it takes is supported.
            let witness: Vec<usize> = fw
                .choice()
                .iter()
                .zip(&support)
                .map(|(&c, s)| (s & ((1u64 << c) - 1)).count_ones() as usize)
                .collect();
            let mut res = self.solve_split(&reduced, levels, Some(&witness))?;
            if let IlpOutcome::Solved { choice, .. } = &mut res.outcome {
                *choice = widen(comp, &reduced, choice)
                    .ok_or("internal: a part restricted to its optimal supports chose an unknown candidate")?;
            }
            res.method.unsupported += dropped;
            return Ok(Some(res));
        }
        Ok(None)
    }

    /// The provider ids of `comp`, given `choice`, optimal on the levels
    /// before them (`levels` ends with the provider ids): the smallest
    /// provider sequence among the solutions equal to `choice` on every
    /// earlier level, by depth-first search. When the search runs out of
    /// steps, the part is restricted to the candidates that some optimum of
    /// the earlier levels can take ([`staged_supports`] on the part without
    /// its prefix-dominated candidates, lifted back by [`lift_supports`]),
    /// which keeps every solution the search looks for while a node left
    /// with one candidate no longer widens the search or a probe's region;
    /// the search runs again there, then probing (or the integer program
    /// without prefix dominance) decides.
    pub(in crate::selection) fn provider_ids_among_optima(
        &self,
        comp: &Comp,
        levels: &[Level],
        choice: Vec<usize>,
        solves: usize,
        method: PartMethod,
    ) -> Result<PartResult, String> {
        let prefix = &levels[..levels.len() - 1];
        let can_narrow = !prefix.is_empty() && self.elimination_budget > 0 && self.optimal_supports;
        // When the part can be narrowed, the search on the whole part gets
        // a share of its steps: it finds the answer at once where the
        // earlier levels leave little freedom, and past that the narrowed
        // part is the cheaper place to look.
        let first_steps = if can_narrow {
            self.provider_search_steps / FIRST_SEARCH_SHARE
        } else {
            self.provider_search_steps
        };
        if let Some(res) =
            self.search_provider_ids(comp, levels, &choice, solves, &method, first_steps)?
        {
            return Ok(res);
        }
        let mut cost_fixed = 0;
        let keep = if !can_narrow {
            None
        } else {
            self.staged_keep(comp, prefix).or_else(|| {
                // Too wide for the supports: on the part without its
                // prefix-dominated candidates (where the bound is tighter),
                // the reduced costs of the first earlier level's dual bound,
                // against the proved optimum moved there, set aside
                // candidates in none of its optima; the supports may fit
                // what is left; lifted back as the supports are.
                let red = drop_prefix_dominated(comp, Some(&choice));
                let (base, start) = match &red {
                    Some(r) => (&r.reduced, r.witness.clone()?),
                    None => (comp, choice.clone()),
                };
                let fixing = reduced_cost_fixing(
                    base,
                    prefix[0],
                    self.weights,
                    &start,
                    self.limits.deadline,
                )
                .filter(|f| self.reduced_costs && f.dropped > 0)?;
                let mut fixed = base.clone();
                restrict(&mut fixed, &fixing.keep);
                let keep: Vec<u64> =
                    match staged_supports(&fixed, prefix, self.weights, &self.reach()) {
                        Some(inner) => fixing
                            .keep
                            .iter()
                            .zip(&inner)
                            .map(|(&outer, &inner)| select(outer, inner))
                            .collect(),
                        None => fixing.keep,
                    };
                let keep = match &red {
                    Some(r) => lift_supports(comp, &r.reduced, &keep),
                    None => keep,
                };
                cost_fixed = fixing.dropped;
                Some(keep)
            })
        };
        let narrowed = keep.and_then(|keep| {
            let mut part = comp.clone();
            restrict(&mut part, &keep);
            let local = narrow(comp, &part, &choice)?;
            Some((part, local))
        });
        let Some((part, local)) = narrowed else {
            return self.provider_ids_past_search(comp, levels, choice, method);
        };
        // The narrowed part is often narrow enough to take every level,
        // the provider ids included, in one elimination (its answer is the
        // unique optimum); else the search again, then the probes.
        let eliminated = match eliminate(&part, levels, self.weights, &self.reach()) {
            Some(Eliminated::Optimal(best)) => Some(PartResult {
                outcome: IlpOutcome::Solved {
                    choice: best,
                    solves,
                    stopped: None,
                    gap: None,
                },
                method: PartMethod {
                    searched_parts: method.searched_parts - 1,
                    eliminated_parts: method.eliminated_parts + 1,
                    ..method.clone()
                },
            }),
            Some(Eliminated::Infeasible) => return Err(
                "internal: the part restricted to the optima of the earlier levels is infeasible"
                    .into(),
            ),
            None => None,
        };
        let mut res = match eliminated {
            Some(res) => res,
            None => match self.search_provider_ids(
                &part,
                levels,
                &local,
                solves,
                &method,
                self.provider_search_steps,
            )? {
                Some(res) => res,
                None => self.provider_ids_past_search(&part, levels, local, method)?,
            },
        };
        if let IlpOutcome::Solved { choice, .. } = &mut res.outcome {
            *choice = widen(comp, &part, choice).ok_or(
                "internal: the part restricted to the optima of the earlier levels chose an unknown candidate",
            )?;
        }
        let count = |c: &Comp| c.nodes.iter().map(|n| n.cands.len()).sum::<usize>();
        // Lifting may keep a candidate the reduced costs set aside on the
        // part without the dominated ones (a kept candidate dominates it).
        let aside = count(comp) - count(&part);
        let cost_fixed = cost_fixed.min(aside);
        res.method.unsupported += aside - cost_fixed;
        res.method.cost_fixed += cost_fixed;
        Ok(res)
    }

    /// The candidates of `comp` that some optimum of `prefix` can take
    /// ([`staged_supports`] on the part without its prefix-dominated
    /// candidates, lifted back by [`lift_supports`]): `None` when an
    /// elimination does not fit.
    fn staged_keep(&self, comp: &Comp, prefix: &[Level]) -> Option<Vec<u64>> {
        let red = drop_prefix_dominated(comp, None);
        let base = red.as_ref().map_or(comp, |r| &r.reduced);
        let s = staged_supports(base, prefix, self.weights, &self.reach())?;
        Some(match &red {
            Some(r) => lift_supports(comp, &r.reduced, &s),
            None => s,
        })
    }

    /// The depth-first search of [`Self::provider_ids_among_optima`] on
    /// `comp` as it is: `None` when it ran out of steps.
    fn search_provider_ids(
        &self,
        comp: &Comp,
        levels: &[Level],
        choice: &[usize],
        solves: usize,
        method: &PartMethod,
        steps: u64,
    ) -> Result<Option<PartResult>, String> {
        let limits = &self.limits;
        let opt = comp
            .evaluate_local(choice)
            .ok_or("internal: the solution of the earlier levels fails its re-check")?;
        let target = Target {
            levels: &levels[..levels.len() - 1],
            weights: self.weights,
            opt: &opt,
        };
        if let Some(p) = &limits.progress {
            p.provider_search();
        }
        let solved = |choice: Vec<usize>, stopped: Option<String>| PartResult {
            outcome: IlpOutcome::Solved {
                choice,
                solves,
                stopped,
                gap: None,
            },
            method: method.clone(),
        };
        match smallest_optimal(comp, &target, steps, limits.deadline) {
            Search::Found(best) => Ok(Some(solved(best, None))),
            // The deadline: the earlier levels are optimal, the provider ids
            // are not proved (no numeric bound exists for a sequence level).
            Search::OutOfTime => Ok(Some(solved(
                choice.to_vec(),
                Some("the provider-id search".into()),
            ))),
            Search::OutOfSteps => Ok(None),
            Search::Exhausted => Err(
                "internal: no solution reaches the proved optimum in the provider-id search".into(),
            ),
        }
    }

    /// Past an exhausted search: the earlier levels are proved at
    /// `choice`, and probing decides the provider ids (with prefix
    /// dominance), else the integer program from those proved levels.
    fn provider_ids_past_search(
        &self,
        comp: &Comp,
        levels: &[Level],
        choice: Vec<usize>,
        method: PartMethod,
    ) -> Result<PartResult, String> {
        let prefix = &levels[..levels.len() - 1];
        let method = PartMethod {
            searched_parts: method.searched_parts - 1,
            ..method
        };
        if self.prefix_dominance {
            let opt = comp
                .evaluate_local(&choice)
                .ok_or("internal: the solution of the earlier levels fails its re-check")?;
            return self.probe_provider_ids(comp, prefix, choice, &opt, method);
        }
        let out = solve_ilp_proved(
            comp,
            levels,
            self.weights,
            &self.limits,
            Some(&choice),
            prefix.len(),
        )?;
        let mut res = PartResult::from_ilp(out);
        res.method.add(&method);
        Ok(res)
    }
}

#[cfg(all(test, feature = "testing"))]
mod tests {
    use std::cmp::Ordering;

    use super::*;
    use crate::selection::exact::elimination::tests::{best_by_enumeration, small_parts};
    use crate::selection::model::objective::compare_scores;

    /// Bit `c` of entry `v`: some optimal choice of `comp` takes `c` at `v`
    /// (every choice enumerated).
    fn supports_by_enumeration(
        comp: &Comp,
        levels: &[Level],
        weights: Option<&Weights>,
    ) -> Option<Vec<u64>> {
        let best = best_by_enumeration(comp, levels, weights)?;
        let domain: Vec<usize> = comp.nodes.iter().map(|n| n.cands.len()).collect();
        let scope: Vec<usize> = (0..domain.len()).collect();
        let mut digits = vec![0usize; domain.len()];
        let mut out = vec![0u64; domain.len()];
        for _ in 0..domain.iter().product::<usize>() {
            let optimal = comp
                .evaluate_local(&digits)
                .is_some_and(|s| compare_scores(levels, weights, &s, &best) == Ordering::Equal);
            if optimal {
                for (o, &c) in out.iter_mut().zip(&digits) {
                    *o |= 1 << c;
                }
            }
            advance(&mut digits, &scope, &domain);
        }
        Some(out)
    }

    fn level_lists() -> Vec<(Vec<Level>, Option<Weights>)> {
        vec![
            (vec![Level::PreferredCount], None),
            (
                vec![
                    Level::PreferredCount,
                    Level::RankCount(2),
                    Level::RankCount(1),
                ],
                None,
            ),
            (vec![Level::RankCount(2), Level::PreferredLex], None),
            (
                vec![Level::Weighted, Level::PreferredLex],
                Some(Weights {
                    preferred: 3,
                    ranks: vec![0, 2, 4, 6],
                    time: None,
                }),
            ),
        ]
    }

    #[test]
    fn supports_are_exactly_the_candidates_of_the_optima() {
        let mut checked = 0;
        for comp in small_parts() {
            for (levels, weights) in level_lists() {
                let mut weights = weights;
                if let Some(w) = &mut weights {
                    w.ranks.truncate(comp.profiles);
                }
                let expected = supports_by_enumeration(&comp, &levels, weights.as_ref());
                let fw = forward(&comp, &levels, weights.as_ref(), &Reach::budget(1 << 20))
                    .expect("a small part fits the budget");
                assert_eq!(fw.infeasible(), expected.is_none());
                let Some(expected) = expected else { continue };
                assert_eq!(optimal_supports(&fw), expected, "levels {levels:?}");
                // Level by level, the last stage has the whole run's optima.
                let staged =
                    staged_supports(&comp, &levels, weights.as_ref(), &Reach::budget(1 << 20));
                assert_eq!(staged, Some(expected.clone()), "levels {levels:?}");
                // Lifted from the part without its prefix-dominated
                // candidates: every candidate of an optimum is kept.
                if let Some(red) = drop_prefix_dominated(&comp, None) {
                    let s = staged_supports(
                        &red.reduced,
                        &levels,
                        weights.as_ref(),
                        &Reach::budget(1 << 20),
                    )
                    .expect("the reduced part has the same optimum");
                    let lifted = lift_supports(&comp, &red.reduced, &s);
                    for (l, e) in lifted.iter().zip(&expected) {
                        assert_eq!(e & !l, 0, "lifted {lifted:?}, optima use {expected:?}");
                    }
                }
                checked += 1;
            }
        }
        assert!(checked > 40, "only {checked} feasible cases");
    }

    #[test]
    fn a_corrupted_minimiser_set_changes_the_supports() {
        // The test above can fail: dropping a minimiser from a root step
        // removes that candidate from the supports.
        for comp in small_parts() {
            let levels = [Level::PreferredCount, Level::RankCount(1)];
            let Some(mut fw) = forward(&comp, &levels, None, &Reach::budget(1 << 20)) else {
                continue;
            };
            if fw.infeasible() {
                continue;
            }
            let before = optimal_supports(&fw);
            let Some(root) = fw.steps.iter_mut().rev().find(|s| s.scope.is_empty()) else {
                continue;
            };
            root.best[0] &= root.best[0] - 1;
            assert_ne!(optimal_supports(&fw), before);
            return;
        }
        panic!("no small part with a root step");
    }
}
