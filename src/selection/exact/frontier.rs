//! The exact frontier search (dynamic programming over constraint states).
//!
//! Nodes are processed in program order. A frontier maps a *constraint
//! state* (for each resource in the state, the intersection of the accepted
//! sets of the chosen candidates that touch it, or "unused") to the best
//! partial selection reaching it. Two modes:
//!
//! * [`Mode::Reference`] is the reference search of rules 3.4: the state
//!   keeps every resource seen so far, partial selections with equal states
//!   are compared by the objective without the penalty (which depends only
//!   on the final state), and the penalty is computed at the end. It is a
//!   test oracle.
//! * [`Mode::Closure`] drops a resource from the state after the last node of
//!   the component that can touch it, adding its rank to the partial
//!   penalty. Equal states have identical futures, and every level is either
//!   a prefix-lexicographic sequence or an additive quantity, so comparing
//!   partials by (preferred prefix, closed penalty, provider prefix) in the
//!   objective's level order is exact (see docs/solver.md).
//!
//! Comparing prefix sequences is O(1): after each step the frontier's
//! preferred prefixes and provider prefixes are replaced by their dense
//! ranks, and a new partial is keyed by (parent rank, new element).
//!
//! Both modes count every state they create against a budget and give up
//! with a reason when it is exceeded.

use std::cmp::Ordering;
use std::collections::HashMap;

use crate::selection::model::objective::{Level, Weights};
use crate::selection::model::problem::{best_rank, Mask};
use crate::selection::reduce::components::Comp;

/// Which state the frontier keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Every resource seen so far (the reference of rules 3.4).
    Reference,
    /// Resources are dropped after their last possible toucher.
    Closure,
}

/// The result of a frontier search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DpOutcome {
    /// The optimum, as one local candidate index per node.
    Optimal(Vec<usize>),
    /// No selection exists.
    Infeasible,
    /// The search exceeded its state budget; the reason says where.
    Skipped(String),
}

/// Statistics of a frontier search.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct DpStats {
    /// States created over the whole search.
    pub states: u64,
    /// The widest frontier.
    pub max_width: usize,
}

#[derive(Clone)]
struct Entry {
    state: Vec<Mask>,
    /// (parent preferred-prefix rank, 0 if this node's preference is met else 1).
    pi: (u32, u8),
    /// (parent provider-prefix rank, candidate index).
    ids: (u32, u16),
    met: u64,
    counts: Vec<u64>,
    w: i128,
    parent: u32,
    cand: u16,
}

fn cmp_entries(levels: &[Level], a: &Entry, b: &Entry) -> Ordering {
    for level in levels {
        let o = match *level {
            Level::PreferredLex => a.pi.cmp(&b.pi),
            Level::PreferredCount => b.met.cmp(&a.met),
            Level::RankCount(k) => a.counts[k].cmp(&b.counts[k]),
            Level::Weighted => a.w.cmp(&b.w),
            Level::ProviderLex => a.ids.cmp(&b.ids),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

/// Dense ranks of `keys` (equal keys share a rank, smaller key smaller rank).
fn dense_ranks<K: Ord + Copy>(keys: &[K]) -> Vec<u32> {
    let mut idx: Vec<usize> = (0..keys.len()).collect();
    idx.sort_by_key(|&i| keys[i]);
    let mut out = vec![0u32; keys.len()];
    let mut rank = 0u32;
    for (j, &i) in idx.iter().enumerate() {
        if j > 0 && keys[idx[j - 1]] != keys[i] {
            rank += 1;
        }
        out[i] = rank;
    }
    out
}

fn over_budget(mode: Mode, budget: u64, at: usize, n: usize, width: usize) -> DpOutcome {
    DpOutcome::Skipped(format!(
        "{} frontier exceeded its budget of {budget} states at node {} of {n} (frontier width at least {width})",
        match mode {
            Mode::Closure => "closure",
            Mode::Reference => "reference",
        },
        at + 1,
    ))
}

/// Runs the frontier search on `comp` under `levels`.
pub(crate) fn frontier(
    comp: &Comp,
    levels: &[Level],
    weights: Option<&Weights>,
    mode: Mode,
    budget: u64,
) -> (DpOutcome, DpStats) {
    let n = comp.nodes.len();
    let nres = comp.nres();
    let p = comp.profiles;
    let mut stats = DpStats::default();
    let wrank = |k: usize| -> i128 { weights.map_or(0, |w| w.ranks[k] as i128) };
    let wpref: i128 = weights.map_or(0, |w| w.preferred as i128);
    // The weighted level's time term: each candidate's and each closed resource's cost.
    let wtime = weights.is_some_and(Weights::has_time);
    let rtime = |r: u32, k: usize| -> i128 {
        if wtime {
            i128::from(comp.res_cost(r, k))
        } else {
            0
        }
    };
    // First and last node (position) that can touch each resource.
    let mut first = vec![usize::MAX; nres];
    let mut last = vec![0usize; nres];
    for (i, node) in comp.nodes.iter().enumerate() {
        for c in &node.cands {
            for &(r, _) in &c.res {
                let r = r as usize;
                if first[r] == usize::MAX {
                    first[r] = i;
                }
                last[r] = i;
            }
        }
    }
    let mut slots: Vec<u32> = Vec::new();
    let mut pos = vec![usize::MAX; nres];
    let mut frontier: Vec<Entry> = vec![Entry {
        state: Vec::new(),
        pi: (0, 0),
        ids: (0, 0),
        met: 0,
        counts: vec![0; p],
        w: 0,
        parent: 0,
        cand: 0,
    }];
    let mut trace: Vec<Vec<(u32, u16)>> = Vec::with_capacity(n);
    for (i, node) in comp.nodes.iter().enumerate() {
        // Slots during this step: the open ones plus those first touched here.
        let mut during = slots.clone();
        for c in &node.cands {
            for &(r, _) in &c.res {
                if first[r as usize] == i && !during.contains(&r) {
                    during.push(r);
                }
            }
        }
        during.sort_unstable();
        for (j, &r) in during.iter().enumerate() {
            pos[r as usize] = j;
        }
        let after: Vec<u32> = match mode {
            Mode::Reference => during.clone(),
            Mode::Closure => during
                .iter()
                .copied()
                .filter(|&r| last[r as usize] != i)
                .collect(),
        };
        let closing: Vec<usize> = match mode {
            Mode::Reference => Vec::new(),
            Mode::Closure => during
                .iter()
                .enumerate()
                .filter(|(_, &r)| last[r as usize] == i)
                .map(|(j, _)| j)
                .collect(),
        };
        let keep: Vec<usize> = after.iter().map(|&r| pos[r as usize]).collect();
        let mut next: Vec<Entry> = Vec::new();
        let mut index: HashMap<Vec<Mask>, usize> = HashMap::new();
        let mut expanded = vec![0 as Mask; during.len()];
        for (fi, e) in frontier.iter().enumerate() {
            // Expand the entry's state to the `during` slots.
            expanded.iter_mut().for_each(|m| *m = 0);
            for (j, &r) in slots.iter().enumerate() {
                expanded[pos[r as usize]] = e.state[j];
            }
            'cand: for (ci, c) in node.cands.iter().enumerate() {
                let mut st = expanded.clone();
                for &(r, m) in &c.res {
                    let j = pos[r as usize];
                    let cur = st[j];
                    let new = if cur == 0 { m } else { cur & m };
                    if new == 0 {
                        continue 'cand;
                    }
                    st[j] = new;
                }
                let mut counts = e.counts.clone();
                let mut w = e.w;
                if wtime {
                    w += i128::from(c.time);
                }
                for &j in &closing {
                    if st[j] != 0 {
                        let k = best_rank(st[j]);
                        counts[k] += 1;
                        w += wrank(k) + rtime(during[j], k);
                    }
                }
                let met = e.met + u64::from(c.preferred);
                if c.preferred {
                    w -= wpref;
                }
                let key: Vec<Mask> = keep.iter().map(|&j| st[j]).collect();
                let cand = Entry {
                    state: key,
                    pi: (e.pi.0, u8::from(!c.preferred)),
                    ids: (e.ids.0, ci as u16),
                    met,
                    counts,
                    w,
                    parent: fi as u32,
                    cand: ci as u16,
                };
                match index.get(&cand.state) {
                    Some(&at) => {
                        if cmp_entries(levels, &cand, &next[at]) == Ordering::Less {
                            next[at] = cand;
                        }
                    }
                    None => {
                        index.insert(cand.state.clone(), next.len());
                        next.push(cand);
                        if stats.states + next.len() as u64 > budget {
                            // Give up inside the step: one step can create
                            // far more states than the budget.
                            stats.states += next.len() as u64;
                            stats.max_width = stats.max_width.max(next.len());
                            return (over_budget(mode, budget, i, n, next.len()), stats);
                        }
                    }
                }
            }
        }
        for &r in &during {
            pos[r as usize] = usize::MAX;
        }
        stats.states += next.len() as u64;
        stats.max_width = stats.max_width.max(next.len());
        if next.is_empty() {
            return (DpOutcome::Infeasible, stats);
        }
        if stats.states > budget {
            return (over_budget(mode, budget, i, n, next.len()), stats);
        }
        // Replace prefix keys by dense ranks.
        let pis: Vec<(u32, u8)> = next.iter().map(|e| e.pi).collect();
        let idss: Vec<(u32, u16)> = next.iter().map(|e| e.ids).collect();
        let pr = dense_ranks(&pis);
        let ir = dense_ranks(&idss);
        trace.push(next.iter().map(|e| (e.parent, e.cand)).collect());
        for (j, e) in next.iter_mut().enumerate() {
            e.pi = (pr[j], 0);
            e.ids = (ir[j], 0);
        }
        frontier = next;
        slots = after;
    }
    if mode == Mode::Reference {
        // The penalty depends only on the final state.
        for e in &mut frontier {
            for (&m, &r) in e.state.iter().zip(&slots) {
                if m != 0 {
                    let k = best_rank(m);
                    e.counts[k] += 1;
                    e.w += wrank(k) + rtime(r, k);
                }
            }
        }
    }
    let mut best = 0usize;
    for j in 1..frontier.len() {
        if cmp_entries(levels, &frontier[j], &frontier[best]) == Ordering::Less {
            best = j;
        }
    }
    let mut choice = vec![0usize; n];
    let mut at = best;
    for i in (0..n).rev() {
        let (parent, cand) = trace[i][at];
        choice[i] = cand as usize;
        at = parent as usize;
    }
    (DpOutcome::Optimal(choice), stats)
}

/// An upper bound on the number of states the closure frontier can create on
/// `comp`, from the cut structure: at each step, the product over the open
/// resources of the number of masks each can take (the distinct non-empty
/// intersections of the accepted sets naming it, plus "unused"), times the
/// step's candidates. Saturates at `u64::MAX`.
pub(crate) fn closure_state_bound(comp: &Comp) -> u64 {
    let nres = comp.nres();
    let mut first = vec![usize::MAX; nres];
    let mut last = vec![0usize; nres];
    let mut masks: Vec<Vec<Mask>> = vec![Vec::new(); nres];
    for (i, node) in comp.nodes.iter().enumerate() {
        for c in &node.cands {
            for &(r, m) in &c.res {
                let r = r as usize;
                if first[r] == usize::MAX {
                    first[r] = i;
                }
                last[r] = i;
                masks[r].push(m);
            }
        }
    }
    // Values per resource: closure of its masks under intersection, capped.
    let values: Vec<u64> = masks
        .iter()
        .map(|ms| {
            let mut set: Vec<Mask> = Vec::new();
            for &m in ms {
                if set.len() > 4096 {
                    // Too many to enumerate: every non-empty mask.
                    return if comp.profiles >= 63 {
                        u64::MAX
                    } else {
                        1u64 << comp.profiles
                    };
                }
                let mut add = vec![m];
                for &s in &set {
                    let x = s & m;
                    if x != 0 {
                        add.push(x);
                    }
                }
                for a in add {
                    if !set.contains(&a) {
                        set.push(a);
                    }
                }
            }
            set.len() as u64 + 1
        })
        .collect();
    let mut opens: Vec<Vec<usize>> = vec![Vec::new(); comp.nodes.len()];
    let mut closes: Vec<Vec<usize>> = vec![Vec::new(); comp.nodes.len()];
    for r in 0..nres {
        if first[r] != usize::MAX && last[r] > first[r] {
            opens[first[r]].push(r);
            closes[last[r]].push(r);
        }
    }
    // Sweep with the logarithm of the width to avoid an O(nodes x resources)
    // product; the bound is rounded up.
    let mut log_width = 0f64;
    let mut total = 0f64;
    for i in 0..comp.nodes.len() {
        for &r in &opens[i] {
            log_width += (values[r] as f64).log2();
        }
        for &r in &closes[i] {
            log_width -= (values[r] as f64).log2();
        }
        total += log_width.max(0.0).exp2();
        if total >= u64::MAX as f64 {
            return u64::MAX;
        }
    }
    (total * (1.0 + 1e-9)).ceil() as u64 + comp.nodes.len() as u64
}
