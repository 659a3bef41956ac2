//! Leading count levels that reach their best possible value become
//! restrictions of the part.
//!
//! A count level solved by the integer program leaves a *global* row behind
//! ("at least this many preferences met", "at most this many resources at
//! rank k"): every node stays linked to every other, so the part can no
//! longer split and the later levels are solved on the whole of it. When the
//! level's optimum is its best conceivable value, the row says something
//! *local* instead, and the part can be rewritten without it:
//!
//! * **Rank counts at zero.** Let the leading levels be rank counts, worst
//!   rank first, and `k` the next one. With every worse rank already at zero,
//!   "no used resource at rank `k` or worse" holds iff every used resource's
//!   intersection `I(r)` meets `{0 … k-1}`, iff the intersection of the
//!   chosen masks *restricted to* `{0 … k-1}` is non-empty. So narrowing
//!   every accepted mask to the ranks below `k` (and dropping the candidates
//!   left with an empty mask) gives a part whose solutions are exactly the
//!   solutions with those counts at zero; and since `min I(r) < k`, the
//!   lowest rank of the narrowed intersection is `min I(r)` itself: every
//!   later level takes the same value on both. A solution of the narrowed
//!   part (a *witness*, found by propagation and re-checked exactly) proves
//!   the count's optimum is zero, its best possible value.
//! * **The weighted score at its best.** With rank weights starting at
//!   zero, the score is at its best possible value iff every used resource
//!   is at a free rank (narrowing as above, to the free ranks) and every
//!   live preference is met (keeping the preferred candidates, below).
//! * **Every preference met.** A leading preferred-count level is at its
//!   best possible value when every node whose preferred candidate is live
//!   meets it. Keeping only the preferred candidate at those nodes gives a
//!   part whose solutions are exactly those meeting every such preference;
//!   a witness proves the optimum reaches that bound, so every optimum lies
//!   in the restricted part.
//!
//! The restrictions are applied level by level while witnesses are found;
//! the first level without one is left to the solver as it was (no witness
//! proves nothing, so nothing is assumed). The restricted part is then
//! presolved again and splits, which is what makes `min-penalty` (whose
//! optimal penalty is often zero) as fast as `seed-lex`: what is left opens
//! with the node-order preference level, decided greedily.

use crate::selection::exact::preference::narrow;
use crate::selection::exact::propagation::Domains;
use crate::selection::model::objective::{Level, Weights};
use crate::selection::reduce::components::Comp;

/// A part restricted to the solutions that are optimal on its first
/// `settled` levels, with one of them.
pub(crate) struct Settled {
    /// The restricted part (same nodes, candidates keep their `orig`).
    pub reduced: Comp,
    /// How many leading levels the restriction settles.
    pub settled: usize,
    /// A solution of `reduced` (local indices), re-checked.
    pub witness: Vec<usize>,
}

/// `comp` with every mask narrowed to `keep` and the candidates left with an
/// empty mask dropped; `None` when a node loses every candidate.
fn narrow_masks(comp: &Comp, keep: u64) -> Option<Comp> {
    let mut out = comp.clone();
    for node in &mut out.nodes {
        node.cands.retain_mut(|c| {
            c.res.iter_mut().all(|(_, m)| {
                *m &= keep;
                *m != 0
            })
        });
        if node.cands.is_empty() {
            return None;
        }
    }
    Some(out)
}

/// `comp` where every node whose preferred candidate survives propagation
/// keeps only it (the others cannot meet their preference in any solution,
/// so the number of those nodes bounds the preferred count from above).
fn only_preferred(comp: &Comp) -> Option<Comp> {
    let d = Domains::new(comp).ok()?;
    let mut out = comp.clone();
    for (u, node) in out.nodes.iter_mut().enumerate() {
        if let Some(p) = node.cands.iter().position(|c| c.preferred) {
            if d.is_live(u, p) {
                node.cands.retain(|c| c.preferred);
            }
        }
    }
    Some(out)
}

/// The part restricted to the solutions at the weighted level's best
/// possible value, when the rank weights start at zero: with `Z = {k :
/// ranks[k] = 0}` (a prefix, as weights do not decrease), every used
/// resource costs nothing iff its rank is in `Z`, iff the masks narrowed to
/// `Z` intersect (the rank is kept, as for rank counts at zero); and every
/// live preference met earns the whole reward. `None` when the first rank
/// costs something (the best value then depends on how many resources are
/// used, which no restriction states).
fn weighted_best(comp: &Comp, weights: &Weights) -> Option<Comp> {
    // With time costs the best value depends on which candidates are chosen, which no
    // restriction states.
    if weights.ranks.first() != Some(&0) || (weights.has_time() && comp.has_time()) {
        return None;
    }
    let free = weights.ranks.iter().take_while(|&&w| w == 0).count();
    let keep = if free >= 64 {
        u64::MAX
    } else {
        (1u64 << free) - 1
    };
    // Preferences first, on the part as given: the reward counts every
    // preference live there, and a preferred candidate with no free rank
    // leaves its node empty below, so the best value is not reachable.
    let kept = if weights.preferred == 0 {
        comp.clone()
    } else {
        only_preferred(comp)?
    };
    narrow_masks(&kept, keep)
}

/// Whether no candidate of `comp` accepts a rank above `k`.
fn nothing_above(comp: &Comp, k: usize) -> bool {
    let below_or_at = if k + 1 >= 64 {
        u64::MAX
    } else {
        (1u64 << (k + 1)) - 1
    };
    comp.nodes
        .iter()
        .flat_map(|n| &n.cands)
        .flat_map(|c| &c.res)
        .all(|&(_, m)| m & !below_or_at == 0)
}

/// A re-checked solution of `comp` by propagation, following `hint` (a
/// solution of an enclosing part, mapped by `orig`) where it can.
fn witness(comp: &Comp, hint: Option<&[usize]>) -> Option<Vec<usize>> {
    let mut d = Domains::new(comp).ok()?;
    let w = d.complete(|u, v| {
        if let Some(c) = hint.and_then(|h| h.get(u)).copied() {
            if c != usize::MAX {
                v.push(c);
            }
        }
        // Preferred first: a witness that meets preferences helps the
        // levels that follow.
        v.extend(comp.nodes[u].cands.iter().position(|c| c.preferred));
    })?;
    comp.evaluate_local(&w).map(|_| w)
}

/// The leading levels of `levels` (already reduced to the live ones) that
/// a witness settles at their best possible value, with the restricted
/// part; `None` when not even the first one is settled. `warm` is a known
/// solution of `comp` (local indices), used as a hint.
pub(crate) fn settle_leading_counts(
    comp: &Comp,
    levels: &[Level],
    weights: Option<&Weights>,
    warm: Option<&[usize]>,
) -> Option<Settled> {
    let mut best: Option<Settled> = None;
    for (i, level) in levels.iter().enumerate() {
        let current = best.as_ref().map_or(comp, |b| &b.reduced);
        let candidate = match *level {
            // A rank count is settled at zero only when every worse rank
            // is already excluded (settled before, or accepted nowhere).
            Level::RankCount(k) if k < 64 && nothing_above(current, k) => {
                narrow_masks(current, (1u64 << k) - 1)
            }
            Level::PreferredCount if i == 0 => only_preferred(current),
            Level::Weighted if i == 0 => weighted_best(current, weights?),
            _ => None,
        };
        let Some(candidate) = candidate else { break };
        let hint = warm.and_then(|w| narrow(comp, &candidate, w)).or_else(|| {
            best.as_ref()
                .and_then(|b| narrow(&b.reduced, &candidate, &b.witness))
        });
        let Some(w) = witness(&candidate, hint.as_deref()) else {
            break;
        };
        best = Some(Settled {
            reduced: candidate,
            settled: i + 1,
            witness: w,
        });
    }
    best
}
