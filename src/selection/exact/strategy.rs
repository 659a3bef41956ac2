//! How one presolved part is solved exactly.
//!
//! 1. When the objective opens with "preferred, in node order" (`seed-lex`),
//!    that level is decided first by propagation and witnesses
//!    ([`decide_preferences`]). The part restricted to the decisions has
//!    exactly the solutions whose preferred flags are optimal, so the rest
//!    of the objective is optimised on it alone.
//! 2. The restricted part is presolved again: the decisions fix nodes and
//!    settle resources, so it splits into smaller sub-parts, which are
//!    independent (the objective's levels are sums or node-order sequences
//!    over them; see docs/solver.md) and identical ones are solved once.
//! 3. Each sub-part goes to the exact closure frontier when its state bound
//!    is small, and to the hierarchical integer program otherwise.
//!
//! When a preference cannot be settled by propagation, the whole objective
//! goes to the integer program on the part restricted to the decisions taken
//! so far, with the current witness as its incumbent.

use std::collections::BTreeMap;

use crate::selection::exact::elimination::{eliminate, Eliminated, Reach, RefusedGraphs};
use crate::selection::exact::frontier::{closure_state_bound, frontier, DpOutcome, Mode};
use crate::selection::exact::ilp::{solve_ilp, IlpLimits, IlpOutcome};
use crate::selection::exact::part_method::PartMethod;
use crate::selection::exact::preference::{decide_preferences, narrow, widen, Decided};
use crate::selection::exact::propagation::Domains;
use crate::selection::model::objective::{Level, Weights};
use crate::selection::model::problem::Instance;
use crate::selection::reduce::components::Comp;
use crate::selection::reduce::count_levels::{grouped_counts, live_levels};
use crate::selection::reduce::prefix_dominance::drop_prefix_dominated;
use crate::selection::reduce::presolve::{presolve, Presolved};
use crate::selection::reduce::settled_levels::settle_leading_counts;

/// By default a sub-part goes to the frontier when its closure state bound
/// is at most this many states (the frontier then costs well under a
/// millisecond per thousand states, far below one integer-program solve).
pub(crate) const SUBPART_FRONTIER_STATES: u64 = 20_000;

/// What every part of one solve shares: the instance, the objective and the
/// limits.
pub(crate) struct PartSolver<'a> {
    /// The instance (for presolve's explanations).
    pub inst: &'a Instance,
    /// The objective's levels.
    pub levels: &'a [Level],
    /// Its weights, for `weighted`.
    pub weights: Option<&'a Weights>,
    /// Ranks that cost nothing under the objective.
    pub free_rank: &'a [bool],
    /// Limits and backend of the integer program.
    pub limits: IlpLimits,
    /// Sub-parts whose closure state bound is at most this go to the
    /// frontier; the others to the integer program (0: every sub-part).
    pub subpart_dp_states: u64,
    /// Whether leading count levels may be settled by witnesses.
    pub settle_counts: bool,
    /// Whether the levels before the provider ids may be solved without
    /// their prefix-dominated candidates.
    pub prefix_dominance: bool,
    /// Candidate trials of the provider-id search before probing (or the
    /// integer program) takes over.
    pub provider_search_steps: u64,
    /// Combinations variable elimination may visit on one part before the
    /// part is left to the frontier try and the integer program (0: never).
    pub elimination_budget: u64,
    /// Whether candidates in no optimum of a leading run of levels may be
    /// set aside (`optimal_supports.rs`).
    pub optimal_supports: bool,
    /// Term graphs this part's eliminations found over the budget.
    pub refused: RefusedGraphs,
    /// Whether candidates that the reduced costs of the first level's dual
    /// bound rule out may be set aside (`dual_bound.rs`).
    pub reduced_costs: bool,
}

/// Sub-parts whose closure state bound is at most this many times the
/// frontier threshold get a frontier try before the integer program.
const FRONTIER_TRY_REACH: u64 = 10_000;

/// The state budget of that try, in multiples of the threshold.
const FRONTIER_TRY_BUDGET: u64 = 10;

/// The exact result of one part, or where a limit stopped it.
pub(crate) struct PartResult {
    /// The outcome (local indices of the part).
    pub outcome: IlpOutcome,
    /// How it was reached.
    pub method: PartMethod,
}

impl PartResult {
    /// The result of one hierarchical integer program on the whole part.
    pub(in crate::selection) fn from_ilp(outcome: IlpOutcome) -> PartResult {
        let solves = match &outcome {
            IlpOutcome::Solved { solves, .. } => *solves,
            IlpOutcome::Infeasible => 1,
        };
        PartResult {
            outcome,
            method: PartMethod {
                ilp_parts: 1,
                solves,
                ..PartMethod::default()
            },
        }
    }
}

impl PartSolver<'_> {
    /// Solves `comp` (a presolved part) to `levels`.
    pub(crate) fn solve_part(
        &self,
        comp: &Comp,
        warm: Option<&[usize]>,
    ) -> Result<PartResult, String> {
        self.solve_levels(comp, self.levels, warm)
    }

    /// Solves `comp` to `levels`: leading count levels settled by a witness
    /// become restrictions ([`settle_leading_counts`]), a leading node-order
    /// preference level is decided greedily, and what is left goes to the
    /// frontier or the integer program.
    fn solve_levels(
        &self,
        comp: &Comp,
        levels: &[Level],
        warm: Option<&[usize]>,
    ) -> Result<PartResult, String> {
        let weights = self.weights;
        let live = live_levels(comp, levels, weights);
        let levels = live.as_slice();
        let settled = if self.settle_counts {
            settle_leading_counts(comp, levels, weights, warm)
        } else {
            None
        };
        if let Some(s) = settled {
            let mut res = self.solve_split(&s.reduced, &levels[s.settled..], Some(&s.witness))?;
            res.method.settled_levels += s.settled;
            if let IlpOutcome::Solved { choice, .. } = &mut res.outcome {
                *choice = widen(comp, &s.reduced, choice)
                    .ok_or("internal: a settled sub-part chose an unknown candidate")?;
            }
            return Ok(res);
        }
        if levels.first() != Some(&Level::PreferredLex) {
            return self.frontier_or_ilp(comp, levels, warm);
        }
        match decide_preferences(comp, warm)? {
            Decided::Infeasible => Ok(PartResult {
                outcome: IlpOutcome::Infeasible,
                method: PartMethod::default(),
            }),
            Decided::Partly {
                reduced,
                witness,
                stats,
            } => {
                let warm = witness.as_deref().and_then(|w| narrow(comp, &reduced, w));
                let mut res = match self.levels_then_ids(&reduced, levels, warm.as_deref())? {
                    Some(res) => res,
                    None => PartResult::from_ilp(solve_ilp(
                        &reduced,
                        levels,
                        weights,
                        &self.limits,
                        warm.as_deref(),
                    )?),
                };
                if let IlpOutcome::Solved { choice, .. } = &mut res.outcome {
                    *choice = widen(comp, &reduced, choice)
                        .ok_or("internal: the integer program chose an unknown candidate")?;
                }
                res.method.preferences = Some((stats.met, stats.refuted));
                Ok(res)
            }
            Decided::All {
                reduced,
                witness,
                stats,
            } => {
                let rest = &levels[1..];
                let local_witness = narrow(comp, &reduced, &witness)
                    .ok_or("internal: the preference witness left the restricted part")?;
                let mut res = self.solve_split(&reduced, rest, Some(&local_witness))?;
                res.method.preferences = Some((stats.met, stats.refuted));
                if let IlpOutcome::Solved { choice, .. } = &mut res.outcome {
                    *choice = widen(comp, &reduced, choice)
                        .ok_or("internal: a sub-part chose an unknown candidate")?;
                }
                Ok(res)
            }
        }
    }

    /// Presolves `comp` again and solves its sub-parts; `witness` is a known
    /// solution of `comp` (local indices). Without a witness the part may
    /// be infeasible, and the outcome says so.
    pub(in crate::selection) fn solve_split(
        &self,
        comp: &Comp,
        levels: &[Level],
        witness: Option<&[usize]>,
    ) -> Result<PartResult, String> {
        self.solve_split_memo(comp, levels, witness, &mut BTreeMap::new())
    }

    /// [`Self::solve_split`] with the optimal local choices of the sub-parts
    /// solved so far (by signature), to reuse across calls with the same
    /// `levels`.
    pub(in crate::selection) fn solve_split_memo(
        &self,
        comp: &Comp,
        levels: &[Level],
        witness: Option<&[usize]>,
        solved: &mut BTreeMap<Vec<u64>, Vec<usize>>,
    ) -> Result<PartResult, String> {
        let infeasible = PartResult {
            outcome: IlpOutcome::Infeasible,
            method: PartMethod::default(),
        };
        let (fixed, parts) = match presolve(self.inst, comp, self.free_rank) {
            Presolved::Infeasible(e) => {
                if witness.is_none() {
                    return Ok(infeasible);
                }
                return Err(format!(
                    "internal: presolve refuted a re-checked witness ({e})"
                ));
            }
            Presolved::Reduced { fixed, parts, .. } => (fixed, parts),
        };
        let mut choice = vec![usize::MAX; comp.nodes.len()];
        for (pos, c) in fixed {
            choice[pos] = c;
        }
        let mut method = PartMethod::default();
        let mut stopped: Vec<String> = Vec::new();
        let mut gap = None;
        for part in &parts {
            let local: Vec<usize> = match solved.get(part.signature.as_slice()) {
                Some(local) => {
                    // The same signature: the same optimal local choice.
                    method.reused_parts += 1;
                    local.clone()
                }
                None => {
                    // The witness where presolve kept its candidates; else a
                    // completion by propagation that follows it where it can
                    // (presolve may drop a dominated candidate it used).
                    let hint: Vec<Option<usize>> = part
                        .positions
                        .iter()
                        .zip(&part.comp.nodes)
                        .map(|(&pos, nd)| {
                            let orig = comp.nodes[pos].cands[witness?[pos]].orig;
                            nd.cands.iter().position(|c| c.orig == orig)
                        })
                        .collect();
                    let warm: Option<Vec<usize>> = match hint.iter().copied().collect() {
                        Some(w) => Some(w),
                        None => Domains::new(&part.comp)
                            .ok()
                            .and_then(|mut d| d.complete(|u, v| v.extend(hint[u])))
                            .filter(|w| part.comp.evaluate_local(w).is_some()),
                    };
                    let r = self.solve_levels(&part.comp, levels, warm.as_deref())?;
                    method.add(&r.method);
                    let local = match r.outcome {
                        IlpOutcome::Infeasible => {
                            if witness.is_none() {
                                return Ok(infeasible);
                            }
                            return Err(
                                "internal: a sub-part of a feasible part is infeasible".into()
                            );
                        }
                        IlpOutcome::Solved {
                            choice,
                            stopped: st,
                            gap: g,
                            ..
                        } => {
                            if let Some(st) = st {
                                stopped.push(st);
                                gap = g;
                            }
                            choice
                        }
                    };
                    solved.insert(part.signature.clone(), local.clone());
                    local
                }
            };
            for (j, &pos) in part.positions.iter().enumerate() {
                let orig = part.comp.nodes[j].cands[local[j]].orig;
                choice[pos] = comp.nodes[pos]
                    .cands
                    .iter()
                    .position(|c| c.orig == orig)
                    .ok_or("internal: unknown candidate in a sub-part")?;
            }
        }
        if choice.contains(&usize::MAX) {
            return Err("internal: a node was left unassigned after the re-split".into());
        }
        Ok(PartResult {
            outcome: IlpOutcome::Solved {
                choice,
                solves: method.solves,
                stopped: (!stopped.is_empty()).then(|| stopped.join(", ")),
                gap,
            },
            method,
        })
    }

    /// The frontier where its state bound is small, the integer program
    /// otherwise; `levels` are already the live levels of `comp`.
    fn frontier_or_ilp(
        &self,
        comp: &Comp,
        levels: &[Level],
        warm: Option<&[usize]>,
    ) -> Result<PartResult, String> {
        let (weights, limits) = (self.weights, &self.limits);
        // Within the bound the frontier surely finishes; a little beyond it
        // (the bound counts every intersection mask, reachable or not) it is
        // tried with a budget of a few times the threshold, which bounds
        // what a failed try costs; far beyond it (long-range sharing) it is
        // not tried at all.
        let bound = closure_state_bound(comp);
        let threshold = self.subpart_dp_states;
        if bound > threshold {
            // With prefix dominance, the levels before the provider ids go
            // to the part without its prefix-dominated candidates and the
            // provider ids are chosen among their optima
            // ([`Self::levels_then_ids`]): the whole part's elimination would
            // be the widest of all, and a refusal costs its order.
            let dominated_first =
                self.prefix_dominance && levels.last() == Some(&Level::ProviderLex);
            if let Some(r) = (!dominated_first)
                .then(|| self.by_elimination(comp, levels))
                .flatten()
            {
                return Ok(r);
            }
            if let Some(r) = self.by_optimal_supports(comp, levels)? {
                return Ok(r);
            }
            // A timed first level (picoseconds, rarely tied) of a part far
            // beyond the frontier's reach is bounded on the whole part all
            // the same: its dual bound is tight there on long-range sharing, and one bound of the whole part with every
            // level after it costs less than the bound of the part without
            // the dominated candidates followed by a second one for the
            // provider ids (docs/solver.md, "Timed levels").
            let timed = levels.first() == Some(&Level::Weighted)
                && self.weights.is_some_and(Weights::has_time)
                && bound > threshold.saturating_mul(FRONTIER_TRY_REACH);
            if !dominated_first || timed {
                if let Some(r) = self.by_reduced_costs(comp, levels, warm)? {
                    return Ok(r);
                }
            }
        }
        let budget = if bound <= threshold {
            Some(threshold)
        } else if bound <= threshold.saturating_mul(FRONTIER_TRY_REACH) {
            Some(threshold.saturating_mul(FRONTIER_TRY_BUDGET))
        } else {
            None
        };
        if let Some(budget) = budget {
            let (out, _) = frontier(comp, levels, weights, Mode::Closure, budget);
            match out {
                DpOutcome::Optimal(choice) => {
                    return Ok(PartResult {
                        outcome: IlpOutcome::Solved {
                            choice,
                            solves: 0,
                            stopped: None,
                            gap: None,
                        },
                        method: PartMethod {
                            frontier_parts: 1,
                            ..PartMethod::default()
                        },
                    })
                }
                DpOutcome::Infeasible => {
                    return Ok(PartResult {
                        outcome: IlpOutcome::Infeasible,
                        method: PartMethod {
                            frontier_parts: 1,
                            ..PartMethod::default()
                        },
                    })
                }
                // Over its budget: the integer program (always correct).
                DpOutcome::Skipped(_) => {}
            }
        }
        if let Some(r) = self.levels_then_ids(comp, levels, warm)? {
            return Ok(r);
        }
        Ok(PartResult::from_ilp(solve_ilp(
            comp, levels, weights, limits, warm,
        )?))
    }

    /// How far one elimination of this solve may go.
    pub(in crate::selection) fn reach(&self) -> Reach<'_> {
        Reach {
            budget: self.elimination_budget,
            deadline: self.limits.deadline,
            refused: Some(&self.refused),
        }
    }

    /// `comp` solved to `levels` by variable elimination, when every level
    /// is additive and the elimination fits its budget.
    fn by_elimination(&self, comp: &Comp, levels: &[Level]) -> Option<PartResult> {
        if self.elimination_budget == 0 {
            return None;
        }
        let outcome = match eliminate(comp, levels, self.weights, &self.reach())? {
            Eliminated::Infeasible => IlpOutcome::Infeasible,
            Eliminated::Optimal(choice) => IlpOutcome::Solved {
                choice,
                solves: 0,
                stopped: None,
                gap: None,
            },
        };
        Some(PartResult {
            outcome,
            method: PartMethod {
                eliminated_parts: 1,
                ..PartMethod::default()
            },
        })
    }

    /// For objectives ending with the provider ids: every level before them by
    /// the integer program (a leading run of count levels grouped into one
    /// weighted solve by [`grouped_counts`] where exact), then the provider-id
    /// level by [`smallest_optimal`] among the solutions equal to that optimum
    /// on every earlier level. `None` when the levels do not end with the
    /// provider ids or the search ran out of steps (the caller then runs the
    /// whole hierarchy).
    fn levels_then_ids(
        &self,
        comp: &Comp,
        levels: &[Level],
        warm: Option<&[usize]>,
    ) -> Result<Option<PartResult>, String> {
        let (weights, limits) = (self.weights, &self.limits);
        let Some((Level::ProviderLex, prefix)) = levels.split_last() else {
            return Ok(None);
        };
        let run = prefix
            .iter()
            .take_while(|l| matches!(l, Level::PreferredCount | Level::RankCount(_)))
            .count();
        let grouped = match grouped_counts(comp, &prefix[..run]) {
            Some((mut g, w)) if !prefix[run..].contains(&Level::Weighted) => {
                g.extend_from_slice(&prefix[run..]);
                Some((g, w))
            }
            _ => None,
        };
        // With a start a time limit always leaves a solution to report.
        let start = start_of(comp, warm);
        let mut prefix_method = None;
        let (choice, solves) = if prefix.is_empty() {
            // Only the provider ids: any solution is a target.
            match start {
                Some(c) => (c, 0),
                None => return Ok(None),
            }
        } else if let Some(red) = start
            .as_deref()
            .filter(|_| self.prefix_dominance)
            .and_then(|w| drop_prefix_dominated(comp, Some(w)))
        {
            // The earlier levels on the part without the candidates that
            // cannot change them (presolve then splits it further); the
            // provider ids below are chosen on the whole part.
            let r = self.solve_split(&red.reduced, prefix, red.witness.as_deref())?;
            let IlpOutcome::Solved {
                choice,
                solves,
                stopped,
                gap,
            } = r.outcome
            else {
                return Err("internal: the part without its prefix-dominated candidates is infeasible under a re-checked witness".into());
            };
            let choice = widen(comp, &red.reduced, &choice)
                .ok_or("internal: a prefix-dominance sub-part chose an unknown candidate")?;
            if stopped.is_some() {
                // A limit stopped the earlier levels: that is the answer.
                return Ok(Some(PartResult {
                    outcome: IlpOutcome::Solved {
                        choice,
                        solves,
                        stopped,
                        gap,
                    },
                    method: PartMethod {
                        prefix_dominated: r.method.prefix_dominated + red.dropped,
                        ..r.method
                    },
                }));
            }
            let mut m = r.method;
            m.prefix_dominated += red.dropped;
            prefix_method = Some(m);
            (choice, solves)
        } else if let Some(r) = self.by_elimination(comp, prefix) {
            let IlpOutcome::Solved { choice, .. } = r.outcome else {
                return Ok(Some(r));
            };
            prefix_method = Some(r.method);
            (choice, 0)
        } else {
            let warm = start.as_deref();
            let first = match &grouped {
                Some((g, w)) => solve_ilp(comp, g, Some(w), limits, warm)?,
                None => solve_ilp(comp, prefix, weights, limits, warm)?,
            };
            match first {
                IlpOutcome::Solved {
                    stopped: None,
                    choice,
                    solves,
                    ..
                } => (choice, solves),
                // Infeasible, or a limit stopped it: that is the part's answer.
                other => return Ok(Some(PartResult::from_ilp(other))),
            }
        };
        let method = match prefix_method {
            Some(mut m) => {
                m.searched_parts += 1;
                m
            }
            None => PartMethod {
                ilp_parts: usize::from(solves > 0),
                solves,
                searched_parts: 1,
                ..PartMethod::default()
            },
        };
        self.provider_ids_among_optima(comp, levels, choice, solves, method)
            .map(Some)
    }
}

/// A feasible choice of `comp` to start from: the warm solution, else a
/// completion by propagation in node order; `None` when neither is
/// feasible (which proves nothing).
pub(in crate::selection) fn start_of(comp: &Comp, warm: Option<&[usize]>) -> Option<Vec<usize>> {
    warm.map(<[usize]>::to_vec)
        .or_else(|| {
            Domains::new(comp)
                .ok()
                .and_then(|mut d| d.complete(|_, _| {}))
        })
        .filter(|w| comp.evaluate_local(w).is_some())
}

/// Steps of the provider-id search before probing (or the integer program)
/// takes over, by default.
pub(crate) const PROVIDER_SEARCH_STEPS: u64 = 20_000;
