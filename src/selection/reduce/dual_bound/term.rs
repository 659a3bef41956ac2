//! A resource term of the dual bound, stored by the states of its
//! intersection instead of by its cells.
//!
//! A resource's cost depends on its touchers' choices only through what the
//! chosen candidates make of it: unused, or used with the intersection of
//! the profiles they accept (empty: infeasible). So the term is a chain over
//! its scope whose state after position `p` is that pair for the first `p`
//! nodes; the cost is read at the end. Every minimum the dual bound needs
//! (the term's least cell, its min-marginal at one node, the least cell
//! agreeing with the nodes already chosen) is a forward and a backward pass
//! over that chain: `Σ_p |states_p| · domain_p` steps instead of the
//! `Π_p domain_p` cells of a table, and the pass is exact (it visits every
//! cell's state sequence, only sharing their common prefixes and suffixes).
//! A resource read by many nodes, which a table left out of the bound when
//! it had more than 2^16 cells, has a few states per
//! position (at most twice the number of profile subsets reachable).

use rustc_hash::FxHashMap;

use crate::selection::model::problem::Mask;
use crate::selection::reduce::components::Comp;

/// A resource state: whether a chosen candidate touches it, and the
/// intersection of what the chosen ones accept (every profile while unused).
type State = (bool, Mask);

/// A resource term over its deciding touchers.
pub(super) struct Term {
    /// The nodes of the term (the resource's deciding touchers), ascending.
    pub scope: Vec<usize>,
    /// `next[p][s · d_p + c]`: the state index after position `p` when the
    /// state before it is `s` and its node takes candidate `c`.
    next: Vec<Vec<u32>>,
    /// The number of states before each position (and at the end).
    states: Vec<usize>,
    /// The cost of each final state, scaled.
    pub cost: Vec<i128>,
    /// The same in floating point.
    costf: Vec<f64>,
    /// The messages to the scope's nodes, `delta[p][c]` (set by
    /// [`Term::set_delta`], which keeps the passes below in step).
    delta: Vec<Vec<f64>>,
    /// `fwd[p][s]`: the least of `−Σ_{q<p} δ_q` over the choices of the
    /// first `p` positions reaching state `s` (infinite: none); valid for
    /// `p ≤ fwd_ok`.
    fwd: Vec<Vec<f64>>,
    fwd_ok: usize,
    /// `bwd[p][s]`: the least of `cost − Σ_{q≥p} δ_q` over the choices of
    /// positions `p..` from state `s`; valid for `p ≥ bwd_ok`.
    bwd: Vec<Vec<f64>>,
    bwd_ok: usize,
}

impl Term {
    /// The term of local resource `r` over `scope`, starting from `base` (what
    /// the non-deciding touchers make of it), each final state priced by
    /// `price`; `None` when its states exceed `max_states` in total.
    pub fn new(
        comp: &Comp,
        r: u32,
        scope: Vec<usize>,
        base: State,
        domain: &[usize],
        max_states: usize,
        price: impl Fn(State) -> i128,
    ) -> Option<Term> {
        let mut layer: Vec<State> = vec![base];
        let mut next = Vec::with_capacity(scope.len());
        let mut states = vec![1usize];
        let mut total = 1usize;
        for &i in &scope {
            let mut index: FxHashMap<State, u32> = FxHashMap::default();
            let mut after: Vec<State> = Vec::new();
            let cands = &comp.nodes[i].cands;
            let mut table = Vec::with_capacity(layer.len() * domain[i]);
            for &(used, mask) in &layer {
                for cand in cands {
                    let s = match cand.use_of(r) {
                        Some(m) => (true, mask & m),
                        None => (used, mask),
                    };
                    let at = *index.entry(s).or_insert_with(|| {
                        after.push(s);
                        (after.len() - 1) as u32
                    });
                    table.push(at);
                }
            }
            total = total.checked_add(after.len())?;
            if total > max_states {
                return None;
            }
            states.push(after.len());
            next.push(table);
            layer = after;
        }
        let cost: Vec<i128> = layer.iter().map(|&s| price(s)).collect();
        let costf: Vec<f64> = cost.iter().map(|&x| x as f64).collect();
        let delta = scope.iter().map(|&i| vec![0.0; domain[i]]).collect();
        let len = scope.len();
        let fwd = states.iter().map(|&k| vec![f64::INFINITY; k]).collect();
        let mut bwd: Vec<Vec<f64>> = states.iter().map(|&k| vec![f64::INFINITY; k]).collect();
        bwd[len] = costf.clone();
        let mut term = Term {
            scope,
            next,
            states,
            cost,
            costf,
            delta,
            fwd,
            fwd_ok: 0,
            bwd,
            bwd_ok: len,
        };
        term.fwd[0][0] = 0.0;
        Some(term)
    }

    /// The messages to position `p`'s node.
    pub fn delta(&self, p: usize) -> &[f64] {
        &self.delta[p]
    }

    /// Sets the messages to position `p`'s node.
    pub fn set_delta(&mut self, p: usize, values: &[f64]) {
        self.delta[p].copy_from_slice(values);
        self.fwd_ok = self.fwd_ok.min(p);
        self.bwd_ok = self.bwd_ok.max(p + 1);
    }

    /// Brings `fwd[..=p]` and `bwd[q..]` up to date with the messages.
    fn refresh(&mut self, p: usize, q: usize) {
        while self.fwd_ok < p {
            let at = self.fwd_ok;
            let d = self.width(at);
            let (done, rest) = self.fwd.split_at_mut(at + 1);
            let out = &mut rest[0];
            out.fill(f64::INFINITY);
            for (s, &v) in done[at].iter().enumerate() {
                if v == f64::INFINITY {
                    continue;
                }
                let row = &self.next[at][s * d..(s + 1) * d];
                for (c, &t) in row.iter().enumerate() {
                    let w = v - self.delta[at][c];
                    if w < out[t as usize] {
                        out[t as usize] = w;
                    }
                }
            }
            self.fwd_ok += 1;
        }
        while self.bwd_ok > q {
            let at = self.bwd_ok - 1;
            let d = self.width(at);
            let (head, done) = self.bwd.split_at_mut(at + 1);
            let out = &mut head[at];
            for (s, o) in out.iter_mut().enumerate() {
                let row = &self.next[at][s * d..(s + 1) * d];
                let mut least = f64::INFINITY;
                for (c, &t) in row.iter().enumerate() {
                    let w = done[0][t as usize] - self.delta[at][c];
                    if w < least {
                        least = w;
                    }
                }
                *o = least;
            }
            self.bwd_ok -= 1;
        }
    }

    /// The min-marginal at position `p` of the term without its message to
    /// `p` (as [`Term::marginal`] with every candidate allowed), written to
    /// `out`, from the passes kept between calls: visiting a term's positions
    /// in order (or in reverse), as the sweeps of the ascent do, costs one pass
    /// over the chain in all instead of one per position.
    pub fn star_marginal(&mut self, p: usize, out: &mut [f64]) {
        self.refresh(p, p + 1);
        let d = self.width(p);
        out.fill(f64::INFINITY);
        let after = &self.bwd[p + 1];
        for (s, &v) in self.fwd[p].iter().enumerate() {
            if v == f64::INFINITY {
                continue;
            }
            let row = &self.next[p][s * d..(s + 1) * d];
            for (c, &t) in row.iter().enumerate() {
                let w = v + after[t as usize];
                if w < out[c] {
                    out[c] = w;
                }
            }
        }
    }

    /// The domain of position `p`.
    fn width(&self, p: usize) -> usize {
        self.delta[p].len()
    }

    /// Per candidate `c` of position `p`, the least over the cells taking
    /// `c` there and, at every other position `q`, a candidate `allowed(q, c)`
    /// of `cost − Σ_{q ≠ p} δ_q`; `INFINITY` where no cell is allowed.
    pub fn marginal(&self, p: usize, allowed: impl Fn(usize, usize) -> bool) -> Vec<f64> {
        // Forward to position p.
        let mut fwd = vec![f64::INFINITY; 1];
        fwd[0] = 0.0;
        for q in 0..p {
            let d = self.width(q);
            let mut out = vec![f64::INFINITY; self.states[q + 1]];
            for (s, &v) in fwd.iter().enumerate() {
                if v == f64::INFINITY {
                    continue;
                }
                for c in 0..d {
                    if allowed(q, c) {
                        let t = self.next[q][s * d + c] as usize;
                        let w = v - self.delta[q][c];
                        if w < out[t] {
                            out[t] = w;
                        }
                    }
                }
            }
            fwd = out;
        }
        // Backward from the end to position p + 1.
        let mut bwd = self.costf.clone();
        for q in (p + 1..self.scope.len()).rev() {
            let d = self.width(q);
            let mut out = vec![f64::INFINITY; self.states[q]];
            for (s, o) in out.iter_mut().enumerate() {
                for c in 0..d {
                    if allowed(q, c) {
                        let w = bwd[self.next[q][s * d + c] as usize] - self.delta[q][c];
                        if w < *o {
                            *o = w;
                        }
                    }
                }
            }
            bwd = out;
        }
        let d = self.width(p);
        let mut m = vec![f64::INFINITY; d];
        for (s, &v) in fwd.iter().enumerate() {
            if v == f64::INFINITY {
                continue;
            }
            for (c, mc) in m.iter_mut().enumerate() {
                let w = v + bwd[self.next[p][s * d + c] as usize];
                if w < *mc {
                    *mc = w;
                }
            }
        }
        m
    }

    /// The least cell of the reparametrised term, `min (cost − Σ_q δ_q)`, in
    /// floating point.
    pub fn least(&mut self) -> f64 {
        self.refresh(0, 0);
        self.bwd[0][0]
    }

    /// The least cell of the term reparametrised by the integer messages
    /// `rounded[q][c]`, exactly; `None` on overflow.
    pub fn least_exact(&self, rounded: &[Vec<i128>]) -> Option<i128> {
        let mut bwd = self.cost.clone();
        for q in (0..self.scope.len()).rev() {
            let d = self.width(q);
            let mut out = Vec::with_capacity(self.states[q]);
            for s in 0..self.states[q] {
                let mut least: Option<i128> = None;
                for c in 0..d {
                    let w = bwd[self.next[q][s * d + c] as usize].checked_sub(rounded[q][c])?;
                    least = Some(least.map_or(w, |l| l.min(w)));
                }
                out.push(least?);
            }
            bwd = out;
        }
        bwd.first().copied()
    }

    /// Whether some cell costs anything (a term that costs nothing anywhere
    /// adds nothing to the bound).
    pub fn costs_anything(&self) -> bool {
        self.cost.iter().any(|&x| x != 0)
    }
}

#[cfg(all(test, feature = "testing"))]
mod tests {
    use super::*;
    use crate::selection::exact::elimination::tests::small_parts;
    use crate::selection::instances::Rng;
    use crate::selection::model::problem::best_rank;
    use crate::selection::reduce::components::{advance, ResourceState};

    /// The price of a state as the dual bound sets it (rank `k` costs
    /// `10·k + 3`, infeasible 1,000), by the table's state.
    fn price_of(state: ResourceState) -> i128 {
        match state {
            ResourceState::Unused => 0,
            ResourceState::Infeasible => 1_000,
            ResourceState::Rank(k) => 10 * k as i128 + 3,
        }
    }

    /// Every minimum of the chain equals the one over the cells of the
    /// resource's table (`Comp::for_each_resource_state`, which enumerates
    /// every combination), with random messages, and with restrictions.
    #[test]
    fn the_chain_gives_the_minima_of_the_table() {
        let mut rng = Rng::new(35);
        let mut checked = 0;
        for comp in small_parts() {
            let domain: Vec<usize> = comp.nodes.iter().map(|n| n.cands.len()).collect();
            let touchers = comp.touchers();
            for (r, scope) in touchers.iter().enumerate() {
                let r = r as u32;
                let (scope, used, mask) = comp.deciding_touchers(r, scope);
                let price = |(u, m): State| {
                    price_of(match (u, m) {
                        (false, _) => ResourceState::Unused,
                        (true, 0) => ResourceState::Infeasible,
                        (true, m) => ResourceState::Rank(best_rank(m)),
                    })
                };
                let mut term = Term::new(
                    &comp,
                    r,
                    scope.clone(),
                    (used, mask),
                    &domain,
                    1 << 16,
                    price,
                )
                .expect("a small term fits");
                let mut cells = Vec::new();
                comp.for_each_resource_state(r, &scope, (used, mask), &domain, |s| {
                    cells.push(price_of(s))
                });
                assert_eq!(term.costs_anything(), cells.iter().any(|&x| x != 0));
                let rounded: Vec<Vec<i128>> = scope
                    .iter()
                    .map(|&i| (0..domain[i]).map(|_| rng.below(40) as i128 - 20).collect())
                    .collect();
                for (p, row) in rounded.iter().enumerate() {
                    let row: Vec<f64> = row.iter().map(|&x| x as f64).collect();
                    term.set_delta(p, &row);
                }
                // A random restriction: each candidate allowed with
                // probability 2/3 (position 0's candidate 0 always).
                let allowed: Vec<Vec<bool>> = rounded
                    .iter()
                    .map(|row| (0..row.len()).map(|_| rng.below(3) != 0).collect())
                    .collect();
                let mut least = i128::MAX;
                let mut marginal: Vec<Vec<f64>> = rounded
                    .iter()
                    .map(|row| vec![f64::INFINITY; row.len()])
                    .collect();
                let mut restricted = marginal.clone();
                let mut digits = vec![0usize; scope.len()];
                for &cost in &cells {
                    let v = cost
                        - digits
                            .iter()
                            .enumerate()
                            .map(|(q, &c)| rounded[q][c])
                            .sum::<i128>();
                    least = least.min(v);
                    for p in 0..scope.len() {
                        let w = (v + rounded[p][digits[p]]) as f64;
                        let m = &mut marginal[p][digits[p]];
                        *m = m.min(w);
                        let ok = (0..scope.len()).all(|q| q == p || allowed[q][digits[q]]);
                        if ok {
                            let m = &mut restricted[p][digits[p]];
                            *m = m.min(w);
                        }
                    }
                    advance(&mut digits, &scope, &domain);
                }
                assert_eq!(term.least_exact(&rounded), Some(least));
                assert_eq!(term.least(), least as f64);
                for p in 0..scope.len() {
                    assert_eq!(term.marginal(p, |_, _| true), marginal[p]);
                    assert_eq!(term.marginal(p, |q, c| allowed[q][c]), restricted[p]);
                }
                // The kept passes, visiting the positions forward then back,
                // each message changed after its visit as a sweep does.
                let order: Vec<usize> = (0..scope.len()).chain((0..scope.len()).rev()).collect();
                for &p in &order {
                    let mut out = vec![0.0; domain[scope[p]]];
                    term.star_marginal(p, &mut out);
                    assert_eq!(out, term.marginal(p, |_, _| true));
                    let shifted: Vec<f64> = term
                        .delta(p)
                        .iter()
                        .map(|&x| x + rng.below(9) as f64 - 4.0)
                        .collect();
                    term.set_delta(p, &shifted);
                }
                checked += 1;
            }
        }
        assert!(checked > 100, "only {checked} terms checked");
    }

    /// A term over more states than allowed is refused.
    #[test]
    fn a_term_over_its_state_budget_is_refused() {
        let comp = small_parts()
            .into_iter()
            .find(|c| c.nodes.len() > 3)
            .expect("a part of several nodes");
        let domain: Vec<usize> = comp.nodes.iter().map(|n| n.cands.len()).collect();
        let touchers = comp.touchers();
        let (r, scope) = touchers
            .iter()
            .enumerate()
            .max_by_key(|(_, s)| s.len())
            .expect("a resource");
        let all = (false, comp.all_profiles());
        let term = Term::new(
            &comp,
            r as u32,
            scope.clone(),
            all,
            &domain,
            scope.len(),
            |_| 1,
        );
        assert!(term.is_none());
        let term = Term::new(&comp, r as u32, scope.clone(), all, &domain, 1 << 16, |_| 1);
        assert!(term.is_some());
    }
}
