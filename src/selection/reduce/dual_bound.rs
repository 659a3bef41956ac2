//! A lower bound of the first level by dual ascent on the local polytope,
//! and the candidates its reduced costs rule out of every optimum.
//!
//! **What it computes.** For a part and its first level `L` (the preferred
//! count, a rank count or the `weighted` score: each a sum of node terms
//! `θ_i(x_i)` and resource terms `θ_r(x_S(r))`, as in `elimination.rs`), and
//! a feasible choice of value `U` on `L`: the set of candidates `(i, c)` that
//! no choice optimal on `L` takes.
//!
//! **The bound.** For any numbers `δ_{r,i}(c)` (one per resource term, node
//! of its scope and candidate of that node), the reparametrised terms
//!
//! ```text
//! θ'_i(c)   = θ_i(c) + Σ_{r ∋ i} δ_{r,i}(c)
//! θ'_r(x_S) = θ_r(x_S) − Σ_{i ∈ S} δ_{r,i}(x_i)
//! ```
//!
//! sum to the same objective for every choice `x`, since each `δ_{r,i}(x_i)`
//! is added once and subtracted once. Hence for every choice `x` with
//! `x_i = c`:
//!
//! ```text
//! L(x) = Σ_j θ'_j(x_j) + Σ_r θ'_r(x_S(r)) ≥ B − min θ'_i + θ'_i(c) =: B_i(c),
//! B   = Σ_j min θ'_j + Σ_r min θ'_r,
//! ```
//!
//! each term bounded by its minimum, node `i`'s by its value at `c`.
//! **Claim.** If `B_i(c) > U`, no choice optimal on `L` takes `c` at `i`:
//! every choice taking it has `L(x) ≥ B_i(c) > U ≥ min L`. ∎
//!
//! Infeasible combinations cost a large finite `M` here instead of infinity:
//! feasible choices keep their value, so the inequalities above hold for
//! every feasible choice, which is all the claim uses. Resource terms with
//! more states than [`MAX_TERM_STATES`] are left out: their costs are never
//! negative, so leaving one out only lowers the bound.
//!
//! **Exact arithmetic.** The `δ` are found by block-coordinate ascent in
//! floating point (the node-star update of min-sum diffusion: at node `i`
//! every incident term's min-marginal and the node's own term are made
//! equal, which never lowers `B`), on costs scaled by [`SCALE`]. They are
//! then rounded to integers and `B` and every `B_i(c)` recomputed in
//! integers: the identity holds for any `δ`, so rounding costs tightness,
//! never validity.
//!
//! **Timed levels.** The `weighted` level with a time term (the first level
//! of `min-tpot`, `min-ttft`, `max-throughput`) adds each candidate's time
//! to its node term and each resource's time at a rank to its resource
//! term. Nothing above depends on the size of the costs: the ascent only
//! chooses the `δ`, and the bound, the `B_i(c)` and every value compared with
//! them are integers in `i128` (picoseconds times [`SCALE`], at most 2^68
//! per term), so the fixing is exact where the integer program, exact only
//! up to a total coefficient of 2^24, refuses the level.
//!
//! **Use.** Restricting the part to the candidates left keeps every
//! optimum of `L`, hence every optimum of the whole objective (whose optima
//! are among `L`'s), and the choice of value `U` is among them (its value is
//! at least every `B_i(x_i)`), so the restricted part is feasible. On
//! long-range sharing with every node preferred the `weighted` level is
//! one wide part no elimination fits; the bound is tight enough there to
//! fix most nodes, and what is left falls apart into parts that do.

use std::time::Instant;

use crate::selection::exact::ilp::IlpOutcome;
use crate::selection::exact::preference::{narrow, widen};
use crate::selection::exact::propagation::Domains;
use crate::selection::exact::strategy::{start_of, PartResult, PartSolver};
use crate::selection::model::objective::{Level, Weights};
use crate::selection::model::problem::{best_rank, Mask};
use crate::selection::reduce::components::{CCand, Comp};
use crate::selection::reduce::optimal_supports::restrict;

mod term;
use term::Term;

/// Costs are multiplied by this before the ascent; messages are rounded to
/// integers at this scale.
const SCALE: i128 = 256;

/// Resource terms with more states in total (over the positions of their
/// chain, `term.rs`) are left out of the bound.
pub(crate) const MAX_TERM_STATES: usize = 1 << 16;

/// Sweeps of the ascent at most (one sweep updates every node twice, in
/// node order and back). The count, not a clock, ends it, so the result is
/// the same on every machine.
const MAX_SWEEPS: usize = 400;

/// The ascent stops earlier when a sweep raises the bound by less than
/// this fraction of one unit of the level.
const MIN_GAIN: f64 = 1e-3;

/// The first level's costs, unscaled.
struct LevelCosts<'a> {
    level: Level,
    weights: Option<&'a Weights>,
}

impl LevelCosts<'_> {
    /// `None` for a level that is not one integer sum of local terms.
    fn new(level: Level, weights: Option<&Weights>) -> Option<LevelCosts<'_>> {
        match level {
            Level::PreferredCount | Level::RankCount(_) => {}
            // With or without a time term: the messages are found in floating
            // point, but the bound is recomputed from them in 128-bit integers.
            Level::Weighted => {}
            Level::PreferredLex | Level::ProviderLex => return None,
        }
        Some(LevelCosts { level, weights })
    }

    /// Whether the level carries the objective's time term.
    fn timed(&self) -> bool {
        self.level == Level::Weighted && self.weights.is_some_and(Weights::has_time)
    }

    /// The node term of candidate `cand` (its preference reward, and its time
    /// cost when the level has a time term).
    fn node(&self, cand: &CCand) -> i128 {
        let p = i128::from(cand.preferred);
        let time = if self.timed() {
            i128::from(cand.time)
        } else {
            0
        };
        match (self.level, self.weights) {
            (Level::PreferredCount, _) => -p,
            (Level::Weighted, Some(w)) => -i128::from(w.preferred) * p + time,
            _ => 0,
        }
    }

    /// The reward of a met preference, as a magnitude.
    fn reward(&self) -> i128 {
        match (self.level, self.weights) {
            (Level::PreferredCount, _) => 1,
            (Level::Weighted, Some(w)) => i128::from(w.preferred),
            _ => 0,
        }
    }

    /// The cost of local resource `r` of `comp` used at rank `k` (its rank
    /// weight, and its time cost there when the level has a time term).
    fn rank(&self, comp: &Comp, r: u32, k: usize) -> i128 {
        match (self.level, self.weights) {
            (Level::RankCount(j), _) => i128::from(j == k),
            (Level::Weighted, Some(w)) => {
                let time = if self.timed() {
                    i128::from(comp.res_cost(r, k))
                } else {
                    0
                };
                i128::from(w.ranks.get(k).copied().unwrap_or(0)) + time
            }
            _ => 0,
        }
    }

    /// The level's value of a feasible choice.
    fn value(&self, comp: &Comp, choice: &[usize]) -> Option<i128> {
        let score = comp.evaluate_local(choice)?;
        let nodes: i128 = comp
            .nodes
            .iter()
            .zip(choice)
            .map(|(nd, &c)| self.node(&nd.cands[c]))
            .sum();
        let resources: i128 = score
            .ranks
            .iter()
            .enumerate()
            .filter_map(|(r, k)| k.map(|k| self.rank(comp, r as u32, k)))
            .sum();
        Some(nodes + resources)
    }
}

/// What the reduced costs of the dual bound rule out.
pub(crate) struct Fixing {
    /// Per node, the candidates kept (bit `c` for local candidate `c`).
    pub keep: Vec<u64>,
    /// Candidates ruled out.
    pub dropped: usize,
    /// The best feasible choice found (its value is the `U` used).
    pub incumbent: Vec<usize>,
    /// The incumbent's value on the level.
    pub value: i128,
    /// The least value any choice can take on the level: the exact bound,
    /// rounded up to the level's integer units.
    pub lower: i128,
    /// Per node and candidate, the reparametrised node term (scaled).
    node_terms: Vec<Vec<i128>>,
    /// Per node, the least of its reparametrised terms (scaled).
    least: Vec<i128>,
    /// The exact bound (scaled).
    bound: i128,
}

/// The candidates of `comp` that no choice optimal on `level` takes, by the
/// reduced costs of a dual bound against the better of `start` and the
/// choices read from the bound; `None` when the level is not a sum of
/// local terms, a node has more than 64 candidates, no feasible choice is
/// known, or the deadline passed.
pub(crate) fn reduced_cost_fixing(
    comp: &Comp,
    level: Level,
    weights: Option<&Weights>,
    start: &[usize],
    deadline: Option<Instant>,
) -> Option<Fixing> {
    let costs = LevelCosts::new(level, weights)?;
    let n = comp.nodes.len();
    let domain: Vec<usize> = comp.nodes.iter().map(|nd| nd.cands.len()).collect();
    if domain.iter().any(|&d| d > 64 || d == 0) {
        return None;
    }
    // The cost of an infeasible combination: more than any feasible
    // choice's whole spread of values, so a better bound is not given away.
    let largest_rank = (0..comp.nres() as u32)
        .flat_map(|r| (0..comp.profiles).map(move |k| (r, k)))
        .map(|(r, k)| costs.rank(comp, r, k))
        .max()
        .unwrap_or(0);
    // The preference reward counts whether or not a candidate of the part is
    // preferred (as it always has); a timed level adds its largest node term.
    let largest_node = comp
        .nodes
        .iter()
        .flat_map(|nd| &nd.cands)
        .map(|c| costs.node(c).abs())
        .fold(costs.reward(), i128::max);
    let spread =
        (largest_rank.max(0) + 1) * (comp.nres() as i128 + 1) + largest_node * (n as i128 + 1);
    // Far below overflow for every sum below (a few terms per node, and
    // the bound's checked sum); weights too large for that leave the part
    // to the other methods. Times are at most 2^60 in total
    // (`MAX_TIME_EXTENT`), so a timed level stays far below the larger limit.
    let limit: i128 = if costs.timed() { 1 << 100 } else { 1 << 40 };
    let big = spread.checked_mul(SCALE).filter(|&b| b < limit)?;

    let unary: Vec<Vec<i128>> = comp
        .nodes
        .iter()
        .map(|nd| nd.cands.iter().map(|c| costs.node(c) * SCALE).collect())
        .collect();
    let touchers = comp.touchers();
    let mut constant = 0i128;
    let mut terms: Vec<Term> = Vec::new();
    for (r, scope) in touchers.iter().enumerate() {
        let r32 = r as u32;
        let (scope, base_used, base_mask) = comp.deciding_touchers(r32, scope);
        let price = |(used, mask): (bool, Mask)| match (used, mask) {
            (false, _) => 0,
            (true, 0) => big,
            (true, m) => costs.rank(comp, r32, best_rank(m)) * SCALE,
        };
        let Some(term) = Term::new(
            comp,
            r32,
            scope,
            (base_used, base_mask),
            &domain,
            MAX_TERM_STATES,
            price,
        ) else {
            continue;
        };
        if term.scope.is_empty() {
            constant += term.cost[0];
        } else if term.costs_anything() {
            terms.push(term);
        }
    }
    let mut incident: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    for (t, term) in terms.iter().enumerate() {
        for (p, &i) in term.scope.iter().enumerate() {
            incident[i].push((t, p));
        }
    }

    let mut best = (costs.value(comp, start)?, start.to_vec());
    // The choice each node's reparametrised term prefers, improved by
    // single-node moves, may beat the incumbent.
    let decode = |terms: &[Term], best: &mut (i128, Vec<usize>)| {
        let guess = Domains::new(comp).ok().and_then(|mut d| {
            d.complete(|u, tries| {
                let r = reparametrised(&unary[u], &incident[u], terms, domain[u]);
                tries.extend(0..domain[u]);
                tries.sort_by(|&a, &b| r[a].total_cmp(&r[b]));
            })
        });
        let sequential = sequential_decode(&unary, &incident, terms, &domain);
        for guess in guess.into_iter().chain([sequential, best.1.clone()]) {
            let guess = improve(comp, &costs, &touchers, guess, big);
            if let Some(v) = costs.value(comp, &guess) {
                if v < best.0 {
                    *best = (v, guess);
                }
            }
        }
    };
    let mut last_bound = f64::NEG_INFINITY;
    let order: Vec<usize> = (0..n).chain((0..n).rev()).collect();
    for sweep in 0..MAX_SWEEPS {
        if deadline.is_some_and(|t| Instant::now() >= t) {
            return None;
        }
        for &i in &order {
            star_update(i, &unary[i], &incident[i], &mut terms, &domain);
        }
        let bound = float_bound(&unary, &mut terms, &incident, &domain) + constant as f64;
        if sweep % 20 == 19 {
            decode(&terms, &mut best);
        }
        // The least gain worth another sweep: a thousandth of a unit, and on
        // a timed level (picoseconds) at least a ten-billionth of the bound.
        let min_gain = if costs.timed() {
            (MIN_GAIN * SCALE as f64).max(bound.abs() * 1e-10)
        } else {
            MIN_GAIN * SCALE as f64
        };
        if (bound - last_bound) < min_gain || bound >= (best.0 * SCALE) as f64 - 0.5 {
            break;
        }
        last_bound = bound;
    }
    decode(&terms, &mut best);

    // The exact bound with the messages rounded to integers.
    let rounded: Vec<Vec<Vec<i128>>> = terms
        .iter()
        .map(|t| {
            (0..t.scope.len())
                .map(|p| t.delta(p).iter().map(|x| x.round() as i128).collect())
                .collect()
        })
        .collect();
    let mut bound = constant;
    for (term, rounded) in terms.iter().zip(&rounded) {
        bound = bound.checked_add(term.least_exact(rounded)?)?;
    }
    let node_terms: Vec<Vec<i128>> = (0..n)
        .map(|i| {
            (0..domain[i])
                .map(|c| {
                    unary[i][c]
                        + incident[i]
                            .iter()
                            .map(|&(t, p)| rounded[t][p][c])
                            .sum::<i128>()
                })
                .collect()
        })
        .collect();
    for nt in &node_terms {
        bound = bound.checked_add(*nt.iter().min()?)?;
    }
    // Every node has a candidate (checked above), so every minimum exists.
    let least: Vec<i128> = node_terms
        .iter()
        .map(|nt| nt.iter().copied().min().unwrap_or(0))
        .collect();
    let lower = -(bound.checked_neg()?.div_euclid(SCALE));
    let mut fixing = Fixing {
        keep: Vec::new(),
        dropped: 0,
        incumbent: best.1,
        value: best.0,
        lower,
        node_terms,
        least,
        bound,
    };
    (fixing.keep, fixing.dropped) = fixing.within(best.0)?;
    Some(fixing)
}

impl Fixing {
    /// Per node the candidates that some choice of value at most `upper`
    /// on the level may take (every candidate whose `B_i(c)` is at most
    /// `upper`), and how many are set aside; `None` on overflow.
    pub fn within(&self, upper: i128) -> Option<(Vec<u64>, usize)> {
        let upper = upper.checked_mul(SCALE)?;
        let mut keep = vec![0u64; self.node_terms.len()];
        let mut dropped = 0;
        for (i, nt) in self.node_terms.iter().enumerate() {
            for (c, &v) in nt.iter().enumerate() {
                if self.bound - self.least[i] + v > upper {
                    dropped += 1;
                } else {
                    keep[i] |= 1 << c;
                }
            }
        }
        Some((keep, dropped))
    }
}

/// The node-star update at `i`: every incident term's min-marginal at `i`
/// and `i`'s reparametrised term become their average.
fn star_update(
    i: usize,
    unary: &[i128],
    incident: &[(usize, usize)],
    terms: &mut [Term],
    domain: &[usize],
) {
    if incident.is_empty() {
        return;
    }
    let d = domain[i];
    // μ_t(c): the term's min-marginal at i without its own message to i.
    let mut mu: Vec<Vec<f64>> = Vec::with_capacity(incident.len());
    let mut total: Vec<f64> = unary.iter().map(|&x| x as f64).collect();
    for &(t, p) in incident {
        let mut m = vec![0.0; d];
        terms[t].star_marginal(p, &mut m);
        for (tc, mc) in total.iter_mut().zip(&m) {
            *tc += mc;
        }
        mu.push(m);
    }
    let share = (incident.len() + 1) as f64;
    for (&(t, p), m) in incident.iter().zip(&mut mu) {
        for (mc, tc) in m.iter_mut().zip(&total) {
            *mc -= tc / share;
        }
        terms[t].set_delta(p, m);
    }
}

/// A choice read from the reparametrised terms in node order: each node
/// takes the candidate that minimises its own term plus, for every
/// incident resource term, the least cell agreeing with the nodes already
/// chosen (the decoding of sequential tree-reweighted message passing).
/// Where the bound is tight this follows the optimum's minimal cells, which
/// a choice by each node's own term alone misses when several candidates
/// tie there.
fn sequential_decode(
    unary: &[Vec<i128>],
    incident: &[Vec<(usize, usize)>],
    terms: &[Term],
    domain: &[usize],
) -> Vec<usize> {
    let mut choice = vec![usize::MAX; unary.len()];
    for u in 0..unary.len() {
        let mut score = reparametrised(&unary[u], &incident[u], terms, domain[u]);
        for &(t, p) in &incident[u] {
            let term = &terms[t];
            let m = term.marginal(p, |q, c| {
                let j = term.scope[q];
                choice[j] == usize::MAX || choice[j] == c
            });
            for (s, x) in score.iter_mut().zip(&m) {
                *s += x;
            }
        }
        // The first of the least (a total order on floats; ties to the
        // smaller index).
        let mut pick = 0;
        for c in 1..domain[u] {
            if score[c] < score[pick] {
                pick = c;
            }
        }
        choice[u] = pick;
    }
    choice
}

/// `i`'s reparametrised term in floating point.
fn reparametrised(
    unary: &[i128],
    incident: &[(usize, usize)],
    terms: &[Term],
    d: usize,
) -> Vec<f64> {
    (0..d)
        .map(|c| {
            unary[c] as f64
                + incident
                    .iter()
                    .map(|&(t, p)| terms[t].delta(p)[c])
                    .sum::<f64>()
        })
        .collect()
}

/// The bound in floating point (to follow the ascent).
fn float_bound(
    unary: &[Vec<i128>],
    terms: &mut [Term],
    incident: &[Vec<(usize, usize)>],
    domain: &[usize],
) -> f64 {
    let mut sum = 0.0;
    for term in terms.iter_mut() {
        sum += term.least();
    }
    for (i, u) in unary.iter().enumerate() {
        let r = reparametrised(u, &incident[i], terms, domain[i]);
        sum += r.iter().copied().fold(f64::INFINITY, f64::min);
    }
    sum
}

/// `choice` improved by single-node moves (each node in turn takes the
/// candidate that lowers the level most, infeasible combinations costing
/// `big`) until no move helps, at most a few sweeps.
fn improve(
    comp: &Comp,
    costs: &LevelCosts,
    touchers: &[Vec<usize>],
    mut choice: Vec<usize>,
    big: i128,
) -> Vec<usize> {
    let full: Mask = comp.all_profiles();
    let resources: Vec<Vec<u32>> = comp.nodes.iter().map(|nd| nd.resources()).collect();
    let resource_cost = |r: u32, choice: &[usize]| -> i128 {
        let (mut used, mut mask) = (false, full);
        for &j in &touchers[r as usize] {
            if let Some(m) = comp.nodes[j].cands[choice[j]].use_of(r) {
                used = true;
                mask &= m;
            }
        }
        match (used, mask) {
            (false, _) => 0,
            (true, 0) => big,
            (true, m) => costs.rank(comp, r, best_rank(m)) * SCALE,
        }
    };
    for _ in 0..8 {
        let mut moved = false;
        for i in 0..comp.nodes.len() {
            // Saturating: several infeasible resources at `big` each.
            let local = |choice: &[usize]| -> i128 {
                resources[i].iter().fold(
                    costs.node(&comp.nodes[i].cands[choice[i]]) * SCALE,
                    |sum, &r| sum.saturating_add(resource_cost(r, choice)),
                )
            };
            let now = choice[i];
            let (mut best_c, mut best_v) = (now, local(&choice));
            for c in 0..comp.nodes[i].cands.len() {
                if c != now {
                    choice[i] = c;
                    let v = local(&choice);
                    if v < best_v {
                        (best_c, best_v) = (c, v);
                    }
                }
            }
            choice[i] = best_c;
            moved |= best_c != now;
        }
        if !moved {
            break;
        }
    }
    choice
}

impl PartSolver<'_> {
    /// `comp` solved to `levels` after the candidates that the reduced
    /// costs of the first level's dual bound rule out are set aside (the
    /// part is then presolved again and split). `None` when the first level
    /// is not a sum of local terms, no feasible start is known, nothing is
    /// ruled out, or the deadline passed.
    pub(in crate::selection) fn by_reduced_costs(
        &self,
        comp: &Comp,
        levels: &[Level],
        warm: Option<&[usize]>,
    ) -> Result<Option<PartResult>, String> {
        if !self.reduced_costs {
            return Ok(None);
        }
        let Some(&first) = levels.first() else {
            return Ok(None);
        };
        let Some(start) = start_of(comp, warm) else {
            return Ok(None);
        };
        let Some(fixing) =
            reduced_cost_fixing(comp, first, self.weights, &start, self.limits.deadline)
        else {
            return Ok(None);
        };
        if let Some(res) = self.at_the_bound(comp, levels, &fixing)? {
            return Ok(Some(res));
        }
        if fixing.dropped == 0 {
            return Ok(None);
        }
        let mut reduced = comp.clone();
        restrict(&mut reduced, &fixing.keep);
        let witness = narrow(comp, &reduced, &fixing.incumbent)
            .ok_or("internal: the incumbent of the dual bound takes a candidate it ruled out")?;
        let mut res = self.solve_split(&reduced, levels, Some(&witness))?;
        if let IlpOutcome::Solved { choice, .. } = &mut res.outcome {
            *choice = widen(comp, &reduced, choice)
                .ok_or("internal: a part restricted by reduced costs chose an unknown candidate")?;
        }
        res.method.cost_fixed += fixing.dropped;
        Ok(Some(res))
    }

    /// `comp` solved to `levels` on the guess that the first level's
    /// optimum is its dual bound: the part restricted to the candidates a
    /// choice of value at most [`Fixing::lower`] may take is solved, and
    /// when its optimum reaches that value it is the whole part's optimum
    /// (docs/solver.md, "Reduced costs of a dual bound", Claim 5). `None`
    /// when the incumbent is already at the bound, nothing would be set
    /// aside, the guess is refuted (the restricted part is infeasible or
    /// its optimum is above the bound), or a limit stopped its solve.
    fn at_the_bound(
        &self,
        comp: &Comp,
        levels: &[Level],
        fixing: &Fixing,
    ) -> Result<Option<PartResult>, String> {
        if fixing.lower >= fixing.value {
            return Ok(None);
        }
        let Some((keep, dropped)) = fixing.within(fixing.lower) else {
            return Ok(None);
        };
        if dropped == 0 || keep.contains(&0) {
            return Ok(None);
        }
        let mut reduced = comp.clone();
        restrict(&mut reduced, &keep);
        let mut res = self.solve_split(&reduced, levels, None)?;
        let IlpOutcome::Solved {
            choice,
            stopped: None,
            ..
        } = &mut res.outcome
        else {
            return Ok(None);
        };
        *choice = widen(comp, &reduced, choice)
            .ok_or("internal: a part restricted at its dual bound chose an unknown candidate")?;
        let costs = LevelCosts::new(levels[0], self.weights)
            .ok_or("internal: the dual bound's level has no local terms")?;
        if costs.value(comp, choice).is_none_or(|v| v > fixing.lower) {
            return Ok(None);
        }
        res.method.bound_fixed += dropped;
        Ok(Some(res))
    }
}

#[cfg(all(test, feature = "testing"))]
mod tests;
