//! Exact presolve of one component before the integer program.
//!
//! Steps, repeated to a fixpoint (bounded number of rounds):
//!
//! 1. **Domain propagation.** A node *surely touches* resource `r` when all
//!    its live candidates touch `r`; then `r` is used and its profile lies in
//!    the union of those candidates' accepted sets. `D(r)` is the
//!    intersection of these unions over the nodes that surely touch `r`. A
//!    candidate accepting nothing of `D(r)` for some `r` can never be chosen.
//!    A node left without candidates makes the component infeasible, and the
//!    conflict is reported in the input's terms.
//!    Then every node with one live candidate is *folded* into a node that
//!    shares its resources ([`fold_single_candidates`]), so it links nothing.
//! 2. **Dominated candidates.** `c'` dominates `c` (same node) when `c'`
//!    touches a subset of `c`'s resources, accepts a superset for each, and
//!    `c'` is preferred or (neither is preferred and `c'`'s provider id is
//!    smaller), and `c'` costs no more time. Swapping `c` for `c'` in any
//!    solution keeps it feasible, never raises any resource's rank, may drop
//!    resources, never loses a preference, never adds time (resource time
//!    costs are non-negative and non-decreasing by rank) and strictly improves
//!    the preferred or provider-id key, so `c` is in no optimum of any
//!    objective variant (weights are non-negative and non-decreasing by rank).
//! 3. **Settled resources.** If every live candidate touching `r` accepts
//!    `p*`, the lowest rank any of them accepts, then `r`, if used, has
//!    profile `p*` whatever is chosen. If `r` is surely used, or `p*` costs
//!    nothing under the objective (no level charges the rank and `r` has no
//!    time cost at it), `r` no longer influences feasibility or the
//!    objective's comparisons and is removed from the candidates.
//! 4. **Forced nodes**: a node with one live candidate and no remaining
//!    resources is fixed.
//!
//! The remaining nodes are split into components again (fixing and settling
//! cut links), and each part gets a canonical signature so that identical
//! parts (repeated layers) are solved once.

use crate::selection::model::problem::{best_rank, Instance, Mask};
use crate::selection::reduce::components::{group_by_resources, CCand, CNode, Comp};

/// Presolve counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PresolveStats {
    /// Candidates removed by propagation.
    pub propagated: usize,
    /// Candidates removed by dominance.
    pub dominated: usize,
    /// Resources settled and removed.
    pub settled: usize,
    /// Nodes fixed outright.
    pub fixed: usize,
}

/// A part left to solve.
#[derive(Debug, Clone)]
pub(crate) struct Part {
    /// The reduced component.
    pub comp: Comp,
    /// Positions of its nodes in the original component.
    pub positions: Vec<usize>,
    /// Canonical signature: equal signatures have equal optimal local choices.
    pub signature: Vec<u64>,
}

/// The result of presolve.
#[derive(Debug, Clone)]
pub(crate) enum Presolved {
    /// The reduced problem.
    Reduced {
        /// Nodes fixed by presolve: (position in the component, local
        /// candidate index in the original component).
        fixed: Vec<(usize, usize)>,
        /// Parts to solve.
        parts: Vec<Part>,
        /// Counters.
        stats: PresolveStats,
    },
    /// The component is infeasible; the explanation names the conflict.
    Infeasible(String),
}

const MAX_ROUNDS: usize = 64;

fn mask_names(inst: &Instance, m: Mask) -> String {
    let names: Vec<&str> = (0..inst.profiles.len())
        .filter(|&k| m >> k & 1 == 1)
        .map(|k| inst.profiles[k].as_str())
        .collect();
    format!("[{}]", names.join(", "))
}

/// Presolves `comp` (an original component of `inst`). `free_rank[k]` says
/// whether a used resource at rank `k` costs nothing under the objective.
pub(crate) fn presolve(inst: &Instance, comp: &Comp, free_rank: &[bool]) -> Presolved {
    let n = comp.nodes.len();
    let nres = comp.nres();
    let mut stats = PresolveStats::default();
    let mut live: Vec<Vec<bool>> = comp
        .nodes
        .iter()
        .map(|nd| vec![true; nd.cands.len()])
        .collect();
    let mut res: Vec<Vec<Vec<(u32, Mask)>>> = comp
        .nodes
        .iter()
        .map(|nd| nd.cands.iter().map(|c| c.res.clone()).collect())
        .collect();
    let mut settled = vec![false; nres];
    // Nodes folded away from each resource (step 1b), for explanations.
    let mut folded: Vec<Vec<usize>> = vec![Vec::new(); nres];
    let full: Mask = if comp.profiles >= 64 {
        u64::MAX
    } else {
        (1u64 << comp.profiles) - 1
    };
    for _round in 0..MAX_ROUNDS {
        let mut changed = false;
        // 1. Propagation.
        let mut dom = vec![full; nres];
        // (resource, node) for every node that surely touches the resource.
        let mut sure: Vec<(u32, usize)> = Vec::new();
        let mut surely_used = vec![false; nres];
        let mut cover: Vec<(u32, Mask, usize)> = Vec::new();
        for u in 0..n {
            let nlive = live[u].iter().filter(|&&l| l).count();
            cover.clear();
            for c in (0..live[u].len()).filter(|&c| live[u][c]) {
                for &(r, m) in &res[u][c] {
                    match cover.iter_mut().find(|e| e.0 == r) {
                        Some(e) => {
                            e.1 |= m;
                            e.2 += 1;
                        }
                        None => cover.push((r, m, 1)),
                    }
                }
            }
            for &(r, m, cnt) in &cover {
                if cnt == nlive {
                    dom[r as usize] &= m;
                    sure.push((r, u));
                    surely_used[r as usize] = true;
                }
            }
        }
        for u in 0..n {
            let mut killed: Vec<(usize, u32)> = Vec::new();
            for c in 0..live[u].len() {
                if !live[u][c] {
                    continue;
                }
                if let Some(&(r, _)) = res[u][c].iter().find(|&&(r, m)| m & dom[r as usize] == 0) {
                    killed.push((c, r));
                }
            }
            if killed.is_empty() {
                continue;
            }
            let alive_after = (0..live[u].len())
                .filter(|&c| live[u][c] && !killed.iter().any(|k| k.0 == c))
                .count();
            if alive_after == 0 {
                return Presolved::Infeasible(explain(
                    inst, comp, u, &killed, &live, &sure, &folded,
                ));
            }
            for (c, _) in killed {
                live[u][c] = false;
                stats.propagated += 1;
                changed = true;
            }
        }
        // 1b. Folding nodes with one candidate.
        changed |= fold_single_candidates(&live, &mut res, &dom, &mut folded);
        // 2. Dominance.
        for u in 0..n {
            let cands = &comp.nodes[u].cands;
            for c in 0..cands.len() {
                if !live[u][c] {
                    continue;
                }
                let dominated = (0..cands.len()).any(|d| {
                    d != c
                        && live[u][d]
                        && (cands[d].preferred || (!cands[c].preferred && d < c))
                        && cands[d].time <= cands[c].time
                        && res[u][d].iter().all(|&(r, md)| {
                            res[u][c].iter().any(|&(rc, mc)| rc == r && mc & !md == 0)
                        })
                });
                if dominated {
                    live[u][c] = false;
                    stats.dominated += 1;
                    changed = true;
                }
            }
        }
        // 3. Settled resources.
        let mut union = vec![0 as Mask; nres];
        let mut inter = vec![full; nres];
        let mut touched = vec![false; nres];
        for u in 0..n {
            for c in 0..live[u].len() {
                if !live[u][c] {
                    continue;
                }
                for &(r, m) in &res[u][c] {
                    let r = r as usize;
                    union[r] |= m;
                    inter[r] &= m;
                    touched[r] = true;
                }
            }
        }
        for r in 0..nres {
            // An empty union (masks narrowed to nothing by step 1b) settles
            // nothing: the next round's propagation kills those candidates.
            if !touched[r] || settled[r] || union[r] == 0 {
                continue;
            }
            let k = best_rank(union[r]);
            let free = free_rank[k] && comp.res_cost(r as u32, k) == 0;
            if inter[r] >> k & 1 == 1 && (surely_used[r] || free) {
                settled[r] = true;
                stats.settled += 1;
                changed = true;
            }
        }
        if changed {
            for node_res in res.iter_mut() {
                for cand_res in node_res.iter_mut() {
                    cand_res.retain(|&(r, _)| !settled[r as usize]);
                }
            }
        }
        if !changed {
            break;
        }
    }
    // 4. Forced nodes and the re-split.
    let mut fixed = Vec::new();
    let mut kept: Vec<usize> = Vec::new();
    for u in 0..n {
        let lc: Vec<usize> = (0..live[u].len()).filter(|&c| live[u][c]).collect();
        if lc.len() == 1 && res[u][lc[0]].is_empty() {
            fixed.push((u, lc[0]));
            stats.fixed += 1;
        } else {
            kept.push(u);
        }
    }
    let node_res: Vec<Vec<u32>> = kept
        .iter()
        .map(|&u| {
            let mut rs: Vec<u32> = (0..live[u].len())
                .filter(|&c| live[u][c])
                .flat_map(|c| res[u][c].iter().map(|&(r, _)| r))
                .collect();
            rs.sort_unstable();
            rs.dedup();
            rs
        })
        .collect();
    let groups = group_by_resources(&node_res, nres);
    let parts = groups
        .into_iter()
        .map(|g| {
            let positions: Vec<usize> = g.iter().map(|&j| kept[j]).collect();
            build_part(comp, &positions, &live, &res)
        })
        .collect();
    Presolved::Reduced {
        fixed,
        parts,
        stats,
    }
}

/// Step 1b: folds every node with one live candidate into the nodes that
/// share its resources, so that it no longer links them.
///
/// Let `u` have the single live candidate `c`, touching `r` with mask `m`.
/// `u` surely touches `r`, so `r` is used in every solution and its profile
/// lies in `D(r) ∩ m` (`D(r)` from step 1; below, `D(r)` means that
/// intersection over all such `u`). When another node touches `r`
/// through some live candidate, the first such node with several live
/// candidates (else the first) becomes `r`'s *host*:
///
/// * every live candidate touching `r` has its mask narrowed to `m' ∩ D(r)`
///   (the resource's profile is in `D(r)` anyway, so no solution and no rank
///   changes);
/// * every live candidate of the host that does not touch `r` gets the
///   touch `(r, D(r))`: it restricts nothing beyond `D(r)`, and it keeps `r`
///   used whatever the host chooses, as `u` did;
/// * `r` is removed from `c`.
///
/// For every choice of the other nodes, `r`'s profile is then the lowest rank
/// of `m ∩ D(r) ∩ (masks of the chosen touching candidates)`, exactly as
/// before, and `u`'s own levels (preferred flag, provider id) are constants,
/// so every objective variant compares solutions as before. When no other
/// node touches `r`, only the masks are narrowed, and step 3 settles `r`.
/// Returns whether anything changed.
fn fold_single_candidates(
    live: &[Vec<bool>],
    res: &mut [Vec<Vec<(u32, Mask)>>],
    dom: &[Mask],
    folded: &mut [Vec<usize>],
) -> bool {
    let nres = folded.len();
    let single: Vec<Option<usize>> = live
        .iter()
        .map(|l| {
            let mut it = (0..l.len()).filter(|&c| l[c]);
            match (it.next(), it.next()) {
                (Some(c), None) => Some(c),
                _ => None,
            }
        })
        .collect();
    // Live touchers of every resource, in node order (flat: the touchers of
    // `r` are `list[start[r]..start[r + 1]]`).
    let mut start = vec![0usize; nres + 1];
    let mut last = vec![usize::MAX; nres];
    let mut each_toucher = |visit: &mut dyn FnMut(usize, usize)| {
        last.fill(usize::MAX);
        for (u, node_res) in res.iter().enumerate() {
            for (c, cand_res) in node_res.iter().enumerate() {
                if !live[u][c] {
                    continue;
                }
                for &(r, _) in cand_res {
                    if last[r as usize] != u {
                        last[r as usize] = u;
                        visit(r as usize, u);
                    }
                }
            }
        }
    };
    each_toucher(&mut |r, _| start[r + 1] += 1);
    for r in 0..nres {
        start[r + 1] += start[r];
    }
    let mut list = vec![0usize; start[nres]];
    let mut fill = start.clone();
    each_toucher(&mut |r, u| {
        list[fill[r]] = u;
        fill[r] += 1;
    });
    let mut changed = false;
    for r in 0..nres {
        let t = &list[start[r]..start[r + 1]];
        let fixed_here: Vec<usize> = t.iter().copied().filter(|&u| single[u].is_some()).collect();
        if fixed_here.is_empty() {
            continue;
        }
        // `D(r)` of this round's step 1 predates its kills: a node left with
        // one candidate by them is not in it yet, so add its mask here.
        let mut d = dom[r];
        for &u in &fixed_here {
            if let Some(c) = single[u] {
                for e in res[u][c].iter().filter(|e| e.0 as usize == r) {
                    d &= e.1;
                }
            }
        }
        // A live candidate that accepts nothing of `D(r)` is killed by the
        // next round's propagation, which names its accepted profiles as the
        // input gave them: leave `r` until then.
        let conflict = t.iter().any(|&u| {
            res[u].iter().enumerate().any(|(c, cand_res)| {
                live[u][c] && cand_res.iter().any(|e| e.0 as usize == r && e.1 & d == 0)
            })
        });
        if conflict {
            continue;
        }
        for &u in t {
            for (c, cand_res) in res[u].iter_mut().enumerate() {
                if !live[u][c] {
                    continue;
                }
                for e in cand_res.iter_mut().filter(|e| e.0 as usize == r) {
                    if e.1 & !d != 0 {
                        e.1 &= d;
                        changed = true;
                    }
                }
            }
        }
        let Some(host) = t
            .iter()
            .copied()
            .find(|&u| single[u].is_none())
            .or_else(|| (t.len() > 1).then(|| t[t.len() - 1]))
        else {
            continue;
        };
        for (c, cand_res) in res[host].iter_mut().enumerate() {
            if live[host][c] && !cand_res.iter().any(|e| e.0 as usize == r) {
                let at = cand_res.partition_point(|e| (e.0 as usize) < r);
                cand_res.insert(at, (r as u32, d));
            }
        }
        for &u in &fixed_here {
            if u == host {
                continue;
            }
            let Some(c) = single[u] else { continue };
            res[u][c].retain(|e| e.0 as usize != r);
            folded[r].push(u);
            changed = true;
        }
    }
    changed
}

/// Builds a part with resources renumbered by first occurrence, so that
/// identical structures get identical components and signatures.
fn build_part(
    comp: &Comp,
    positions: &[usize],
    live: &[Vec<bool>],
    res: &[Vec<Vec<(u32, Mask)>>],
) -> Part {
    let mut local: std::collections::HashMap<u32, u32> = Default::default();
    let mut res_global = Vec::new();
    let mut signature = vec![comp.profiles as u64, positions.len() as u64];
    let mut nodes = Vec::with_capacity(positions.len());
    for &u in positions {
        let mut cands = Vec::new();
        for c in 0..live[u].len() {
            if !live[u][c] {
                continue;
            }
            let src = &comp.nodes[u].cands[c];
            let mut rl: Vec<(u32, Mask)> = res[u][c]
                .iter()
                .map(|&(r, m)| {
                    let id = *local.entry(r).or_insert_with(|| {
                        res_global.push(comp.res_global[r as usize]);
                        (res_global.len() - 1) as u32
                    });
                    (id, m)
                })
                .collect();
            rl.sort_unstable();
            signature.push(u64::from(src.preferred) | (rl.len() as u64) << 1);
            signature.push(src.time);
            for &(r, m) in &rl {
                signature.push(r as u64);
                signature.push(m);
            }
            cands.push(CCand {
                orig: src.orig,
                preferred: src.preferred,
                res: rl,
                time: src.time,
            });
        }
        signature.push(u64::MAX);
        nodes.push(CNode {
            global: comp.nodes[u].global,
            cands,
        });
    }
    // The resources' time costs by rank (their local ids are in the signature already).
    for &g in &res_global {
        let row = comp
            .res_time
            .get(g as usize)
            .map_or(&[][..], |r| r.as_slice());
        signature.push(row.len() as u64);
        signature.extend_from_slice(row);
    }
    Part {
        comp: Comp {
            nodes,
            res_global,
            profiles: comp.profiles,
            res_time: comp.res_time.clone(),
        },
        positions: positions.to_vec(),
        signature,
    }
}

/// Explains why node `u` has no candidate left, in the input's terms: the
/// profiles each killed candidate accepts for the resource that killed it,
/// and what the nodes that surely touch that resource (or were folded into
/// it, step 1b) accept for it.
fn explain(
    inst: &Instance,
    comp: &Comp,
    u: usize,
    killed: &[(usize, u32)],
    live: &[Vec<bool>],
    sure: &[(u32, usize)],
    folded: &[Vec<usize>],
) -> String {
    // What node `v`'s live candidates accept for `r`, as the input says.
    let accepted = |v: usize, r: u32| -> Mask {
        comp.nodes[v]
            .cands
            .iter()
            .enumerate()
            .filter(|&(c, _)| live[v][c])
            .flat_map(|(_, cand)| cand.res.iter().filter(|e| e.0 == r).map(|e| e.1))
            .fold(0, |a, m| a | m)
    };
    let node = &inst.nodes[comp.nodes[u].global as usize];
    let mut parts = Vec::new();
    for &(c, r) in killed {
        let cand = &comp.nodes[u].cands[c];
        let rname = &inst.resources[comp.res_global[r as usize] as usize];
        let need = cand.res.iter().find(|e| e.0 == r).map(|e| e.1).unwrap_or(0);
        let mut by: Vec<usize> = sure
            .iter()
            .filter(|e| e.0 == r)
            .map(|&(_, v)| v)
            .chain(folded[r as usize].iter().copied())
            .filter(|&v| v != u)
            .collect();
        by.sort_unstable();
        by.dedup();
        let others: Vec<String> = by
            .iter()
            .take(3)
            .map(|&v| {
                format!(
                    "node `{}` accepts only {} for `{rname}`",
                    inst.nodes[comp.nodes[v].global as usize].id,
                    mask_names(inst, accepted(v, r))
                )
            })
            .collect();
        parts.push(format!(
            "candidate `{}` accepts only {} for `{rname}`, but {}",
            node.cands[cand.orig as usize].provider,
            mask_names(inst, need),
            if others.is_empty() {
                "no profile is left for it".to_string()
            } else {
                others.join(" and ")
            }
        ));
    }
    format!(
        "node `{}` has no candidate left: {}",
        node.id,
        parts.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selection::reduce::components::instance_components;
    use crate::selection::SelectionProblem;

    /// `a — u — b` where `u` has one candidate: folding `u` must cut the
    /// link, and `b`'s candidate that does not touch `r2` must get the touch
    /// `(r2, D(r2))`, so that `r2` stays used whatever `b` chooses.
    #[test]
    fn a_single_candidate_node_is_folded_into_its_neighbours() {
        let problem = SelectionProblem::from_json_str(
            r#"{"profiles": ["p0", "p1", "p2"], "nodes": [
              {"id": "a", "candidates": [
                {"provider": "x", "accepts": {"r1": ["p0"]}},
                {"provider": "y", "accepts": {"r1": ["p1"]}}]},
              {"id": "u", "candidates": [
                {"provider": "only", "accepts": {"r1": ["p0", "p1"], "r2": ["p1", "p2"]}}]},
              {"id": "b", "candidates": [
                {"provider": "x", "accepts": {"r2": ["p2"]}},
                {"provider": "z", "accepts": {"w": ["p0"]}}]}
            ]}"#,
        )
        .unwrap();
        let inst = Instance::new(&problem).unwrap();
        let comps = instance_components(&inst);
        assert_eq!(comps.len(), 1, "one component before presolve");
        let comp = Comp::from_instance(&inst, &comps[0]);
        let Presolved::Reduced { fixed, parts, .. } = presolve(&inst, &comp, &[true, false, false])
        else {
            panic!("feasible");
        };
        assert_eq!(fixed, vec![(1, 0)], "u is fixed");
        assert_eq!(parts.len(), 2, "a and b are no longer linked");
        let b = &parts[1];
        assert_eq!(b.positions, vec![2]);
        let cands = &b.comp.nodes[0].cands;
        assert_eq!(cands[0].res, vec![(0, 0b100)], "x keeps r2 at p2");
        assert_eq!(cands[1].res, vec![(0, 0b110)], "z gets r2 with D(r2)");
    }
}
