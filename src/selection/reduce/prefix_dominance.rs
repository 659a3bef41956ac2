//! Candidates that cannot change any level before the provider ids.
//!
//! Every objective ends with the provider-id level, and the levels before
//! it (preferences, rank counts worst first, a weighted penalty with
//! non-negative weights that do not decrease by rank) never look at a
//! provider id. For those *prefix levels* a candidate `d` of a node
//! dominates another candidate `c` of the same node when
//!
//! * `d` is preferred or `c` is not,
//! * `d` costs no more time than `c` (time objectives), and
//! * `d` touches a subset of `c`'s resources and, for each of them, accepts
//!   a superset of the profiles `c` accepts.
//!
//! This is presolve's dominance rule without its provider-id condition.
//! Swapping `c` for `d` in a solution keeps it feasible (every touched
//! resource keeps its profile, which `d` accepts), never loses a preference,
//! adds no candidate time, and can only leave a resource untouched; a resource
//! left untouched leaves every count, and its weight and time cost (both
//! non-negative) leave the weighted sum, so no prefix
//! level gets worse. Hence the prefix levels have the same optimal values on
//! the part without its dominated candidates ([`drop_prefix_dominated`]).
//!
//! That is all the removal is used for: the values are computed on the
//! smaller part (where, typically, a catch-all candidate that accepts every
//! profile absorbs every other candidate of a node without a preference,
//! and presolve then splits the part into small pieces), and the provider
//! ids are then chosen on the *whole* part among the solutions with those
//! values. The candidates dropped here are back for that last level, so the
//! answer is the same as if the whole objective had been solved on the whole
//! part.

use crate::selection::reduce::components::{CCand, Comp};

/// A part without its prefix-dominated candidates.
pub(crate) struct PrefixReduced {
    /// The part with only the undominated candidates (same nodes, same
    /// resources; candidates keep their `orig`).
    pub reduced: Comp,
    /// The witness given to [`drop_prefix_dominated`], if any, moved onto
    /// the reduced part: a dropped candidate is replaced by a kept candidate
    /// that dominates it (still a solution, no worse on any prefix level).
    pub witness: Option<Vec<usize>>,
    /// Candidates dropped.
    pub dropped: usize,
}

/// Whether `d` dominates `c` on the prefix levels (see the module docs).
fn dominates(d: &CCand, c: &CCand) -> bool {
    (d.preferred || !c.preferred)
        && d.time <= c.time
        && d.res.iter().all(|&(r, md)| {
            c.res
                .binary_search_by_key(&r, |&(rc, _)| rc)
                .is_ok_and(|i| c.res[i].1 & !md == 0)
        })
}

/// `comp` without the candidates that another candidate of the same node
/// dominates on the prefix levels; of candidates that dominate each other
/// (the same resources, the same profiles, the same preference) the first
/// is kept. `witness`, if given, is a solution of `comp` (local indices).
/// `None` when no candidate is dominated, or the witness does not fit
/// `comp`.
pub(crate) fn drop_prefix_dominated(
    comp: &Comp,
    witness: Option<&[usize]>,
) -> Option<PrefixReduced> {
    if witness.is_some_and(|w| w.len() != comp.nodes.len()) {
        return None;
    }
    let mut reduced = comp.clone();
    let mut moved = Vec::with_capacity(comp.nodes.len());
    let mut dropped = 0;
    for (u, node) in reduced.nodes.iter_mut().enumerate() {
        let cands = &node.cands;
        let keep = undominated(cands);
        let kept: Vec<usize> = (0..cands.len()).filter(|&c| keep[c]).collect();
        if let Some(w) = witness.map(|w| w[u]) {
            let chosen = cands.get(w)?;
            let local = if keep[w] {
                kept.iter().position(|&c| c == w)?
            } else {
                kept.iter().position(|&d| dominates(&cands[d], chosen))?
            };
            moved.push(local);
        }
        dropped += cands.len() - kept.len();
        node.cands = kept.iter().map(|&c| cands[c].clone()).collect();
    }
    (dropped > 0).then_some(PrefixReduced {
        reduced,
        witness: witness.map(|_| moved),
        dropped,
    })
}

/// Which of `cands` are kept: a candidate is dropped when another
/// dominates it strictly, or both ways and comes first. Dominance is a
/// preorder, so the kept candidates are its maximal elements and every
/// dropped candidate has a kept dominator (follow dominators up; the order
/// is finite).
pub(crate) fn undominated(cands: &[CCand]) -> Vec<bool> {
    (0..cands.len())
        .map(|c| {
            !(0..cands.len()).any(|d| {
                d != c
                    && dominates(&cands[d], &cands[c])
                    && (d < c || !dominates(&cands[c], &cands[d]))
            })
        })
        .collect()
}

/// Supports found on the part without its prefix-dominated candidates
/// (`reduced`, masks of its local indices), lifted back to `comp`: a kept
/// candidate keeps its bit, and a dropped one is kept when some kept
/// candidate that dominates it is supported. Every optimum of the prefix
/// levels on `comp` uses only lifted candidates: replacing each dropped
/// candidate of an optimum by a kept dominator gives a choice of `reduced`
/// no worse on any prefix level, hence optimal there, whose candidates are
/// supported, and the replaced candidate is dominated by one of them.
pub(crate) fn lift_supports(comp: &Comp, reduced: &Comp, support: &[u64]) -> Vec<u64> {
    comp.nodes
        .iter()
        .zip(&reduced.nodes)
        .zip(support)
        .map(|((node, red), &s)| {
            let supported: Vec<&CCand> = red
                .cands
                .iter()
                .enumerate()
                .filter(|&(j, _)| s >> j & 1 == 1)
                .map(|(_, c)| c)
                .collect();
            node.cands
                .iter()
                .enumerate()
                .filter(|&(_, c)| {
                    supported
                        .iter()
                        .any(|d| d.orig == c.orig || dominates(d, c))
                })
                .fold(0u64, |m, (i, _)| m | 1 << i)
        })
        .collect()
}
