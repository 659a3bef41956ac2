//! The "preferred, in node order" level decided exactly without an integer
//! program where propagation and witnesses suffice.
//!
//! **Claim.** Let `i₁ < i₂ < …` be the nodes with a preferred candidate and
//! let `D_{k-1}` be the decisions taken at `i₁ … i_{k-1}` (met: the preferred
//! candidate is fixed; unmet: it is forbidden). The lexicographic optimum of
//! the level meets the preference at `i_k` iff some solution satisfies
//! `D_{k-1}` and chooses the preferred candidate at `i_k`.
//!
//! *Proof.* Solutions are compared at the first position where their
//! preferred flags differ, and every optimum agrees with `D_{k-1}` by
//! induction. If a solution satisfying `D_{k-1}` meets the preference at
//! `i_k`, every solution satisfying `D_{k-1}` that does not is beaten by it,
//! so the optimum meets it; otherwise no solution satisfying `D_{k-1}` meets
//! it. ∎
//!
//! Each decision is therefore settled by one of:
//!
//! * the current **witness** (a complete solution satisfying the decisions so
//!   far) already meets it, or still is a solution after switching node
//!   `i_k` to its preferred candidate, or a new witness is completed by
//!   propagation ([`Domains::complete`]): *met*;
//! * **propagation** wipes out after fixing the preferred candidate: *unmet*
//!   (propagation only removes values no solution can use).
//!
//! Every witness is re-checked with [`Comp::evaluate_local`]. When a decision
//! is settled by neither, the level is left to the integer program on the
//! component restricted to the decisions taken so far.

use crate::selection::exact::propagation::Domains;
use crate::selection::reduce::components::{CNode, Comp};

/// Counters of the greedy decisions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PreferenceStats {
    /// Preferences met, proved by a witness.
    pub met: usize,
    /// Preferences proved unreachable by propagation.
    pub refuted: usize,
    /// Witnesses completed by propagation (beyond switching one node).
    pub completions: usize,
}

/// The result of [`decide_preferences`].
pub(crate) enum Decided {
    /// Every preference decided. `reduced` is the component restricted to
    /// the decisions (and to the candidates propagation left live), with the
    /// same node positions; `witness` is a solution of it, as local indices
    /// of the *original* component.
    All {
        reduced: Comp,
        witness: Vec<usize>,
        stats: PreferenceStats,
    },
    /// A decision could not be settled: `reduced` holds the decisions taken
    /// before it, `witness` (original local indices) satisfies them.
    Partly {
        reduced: Comp,
        witness: Option<Vec<usize>>,
        stats: PreferenceStats,
    },
    /// Propagation proved the component infeasible.
    Infeasible,
}

/// Decides the node-order preference level of `comp` (see the module docs).
/// `warm` is an optional known solution (local indices). `Err` is an
/// internal inconsistency (a re-checked witness failed).
pub(crate) fn decide_preferences(comp: &Comp, warm: Option<&[usize]>) -> Result<Decided, String> {
    let Ok(mut d) = Domains::new(comp) else {
        return Ok(Decided::Infeasible);
    };
    let n = comp.nodes.len();
    let pref: Vec<Option<usize>> = comp
        .nodes
        .iter()
        .map(|nd| nd.cands.iter().position(|c| c.preferred))
        .collect();
    let mut stats = PreferenceStats::default();
    // Per resource: (node, candidate, mask) of every candidate touching it.
    let mut touch: Vec<Vec<(usize, usize, u64)>> = vec![Vec::new(); comp.nres()];
    for (u, nd) in comp.nodes.iter().enumerate() {
        for (c, cand) in nd.cands.iter().enumerate() {
            for &(r, m) in &cand.res {
                touch[r as usize].push((u, c, m));
            }
        }
    }
    let check = |w: &[usize]| -> Result<(), String> {
        comp.evaluate_local(w)
            .map(|_| ())
            .ok_or_else(|| "internal: a propagation witness failed its re-check".to_string())
    };
    let mut witness: Option<Vec<usize>> = match warm {
        Some(w) if comp.evaluate_local(w).is_some() && (0..n).all(|u| d.is_live(u, w[u])) => {
            Some(w.to_vec())
        }
        _ => {
            let w = d.complete(|u, v| v.extend(pref[u]));
            if w.is_some() {
                stats.completions += 1;
            }
            w
        }
    };
    if let Some(w) = &witness {
        check(w)?;
    }
    for i in 0..n {
        let Some(pc) = pref[i] else { continue };
        if !d.is_live(i, pc) {
            stats.refuted += 1;
            continue;
        }
        let Some(w) = witness.as_mut() else {
            return Ok(partly(comp, &d, None, stats));
        };
        if w[i] != pc && switch_keeps_solution(comp, &touch, w, i, pc) {
            w[i] = pc;
        }
        if w[i] == pc {
            d.fix(i, pc)
                .map_err(|_| "internal: propagation refuted a witness".to_string())?;
            stats.met += 1;
            continue;
        }
        let cp = d.checkpoint();
        if d.fix(i, pc).is_err() {
            d.rollback(cp);
            d.forbid(i, pc)
                .map_err(|_| "internal: propagation refuted a witness".to_string())?;
            stats.refuted += 1;
            continue;
        }
        // Keep the old witness where possible; else prefer preferences.
        let old = w.clone();
        let mut found = d.complete(|u, v| v.push(old[u]));
        if found.is_none() {
            found = d.complete(|u, v| {
                v.extend(pref[u]);
                v.push(old[u]);
            });
        }
        match found {
            Some(nw) => {
                check(&nw)?;
                stats.completions += 1;
                stats.met += 1;
                *w = nw;
            }
            None => {
                d.rollback(cp);
                let w = witness.clone();
                return Ok(partly(comp, &d, w, stats));
            }
        }
    }
    let Some(w) = witness else {
        // Every position was refuted (or there was none) and no completion
        // was found: the integer program decides feasibility.
        return Ok(partly(comp, &d, None, stats));
    };
    Ok(Decided::All {
        reduced: restrict(comp, &d),
        witness: w,
        stats,
    })
}

fn partly(
    comp: &Comp,
    d: &Domains,
    witness: Option<Vec<usize>>,
    stats: PreferenceStats,
) -> Decided {
    Decided::Partly {
        reduced: restrict(comp, d),
        witness: witness.filter(|w| (0..comp.nodes.len()).all(|u| d.is_live(u, w[u]))),
        stats,
    }
}

/// Whether `w` with node `i` switched to candidate `c` is still a solution:
/// every resource of `c` keeps a common profile with the other chosen
/// candidates touching it (resources of the old candidate only lose a
/// toucher).
fn switch_keeps_solution(
    comp: &Comp,
    touch: &[Vec<(usize, usize, u64)>],
    w: &[usize],
    i: usize,
    c: usize,
) -> bool {
    comp.nodes[i].cands[c].res.iter().all(|&(r, m)| {
        let mut inter = m;
        for &(u, cu, mu) in &touch[r as usize] {
            if u != i && w[u] == cu {
                inter &= mu;
            }
        }
        inter != 0
    })
}

/// `comp` with only the live candidates of `d` (positions and `orig` kept).
fn restrict(comp: &Comp, d: &Domains) -> Comp {
    Comp {
        nodes: comp
            .nodes
            .iter()
            .enumerate()
            .map(|(u, nd)| CNode {
                global: nd.global,
                cands: d.live(u).map(|c| nd.cands[c].clone()).collect(),
            })
            .collect(),
        res_global: comp.res_global.clone(),
        profiles: comp.profiles,
        res_time: comp.res_time.clone(),
    }
}

/// Maps a choice of `reduced` (local indices) to `comp`'s local indices via
/// `orig`; `None` if some candidate is unknown.
pub(crate) fn widen(comp: &Comp, reduced: &Comp, choice: &[usize]) -> Option<Vec<usize>> {
    comp.nodes
        .iter()
        .zip(&reduced.nodes)
        .zip(choice)
        .map(|((full, red), &c)| {
            let orig = red.cands.get(c)?.orig;
            full.cands.iter().position(|x| x.orig == orig)
        })
        .collect()
}

/// Maps a choice of `comp` to `reduced`'s local indices; `None` where a
/// chosen candidate is not in `reduced`.
pub(crate) fn narrow(comp: &Comp, reduced: &Comp, choice: &[usize]) -> Option<Vec<usize>> {
    comp.nodes
        .iter()
        .zip(&reduced.nodes)
        .zip(choice)
        .map(|((full, red), &c)| {
            let orig = full.cands.get(c)?.orig;
            red.cands.iter().position(|x| x.orig == orig)
        })
        .collect()
}
