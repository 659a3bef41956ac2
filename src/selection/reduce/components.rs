//! Connected components of the node–resource incidence graph, and the
//! component form ([`Comp`]) that every solver works on.
//!
//! Two nodes are in one component when their candidates name a common
//! resource, directly or through other nodes. Components are listed sorted
//! by their first node index, with their nodes ascending, so the order does
//! not depend on hashing or on thread scheduling.

use petgraph::unionfind::UnionFind;

use crate::selection::model::problem::{best_rank, touched_resources, Instance, Mask};

/// A candidate inside a component: resources are local indices.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct CCand {
    /// Index of the candidate in the instance node's (provider-sorted) list.
    pub orig: u16,
    /// Whether the candidate is the node's preferred provider.
    pub preferred: bool,
    /// Touched local resources with accepted masks, sorted by local index.
    pub res: Vec<(u32, Mask)>,
    /// The objective's combined time cost of choosing it (0 without a time term).
    pub time: u64,
}

impl CCand {
    /// The profiles this candidate accepts for local resource `r`, or
    /// `None` when it does not touch it.
    pub fn use_of(&self, r: u32) -> Option<Mask> {
        self.res
            .binary_search_by_key(&r, |&(x, _)| x)
            .ok()
            .map(|at| self.res[at].1)
    }
}

/// A node inside a component.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct CNode {
    /// Index of the node in the instance.
    pub global: u32,
    /// Candidates, in provider-id order (ascending `orig`).
    pub cands: Vec<CCand>,
}

impl CNode {
    /// The local resources any of its candidates touches, ascending.
    pub fn resources(&self) -> Vec<u32> {
        touched_resources(self.cands.iter().map(|c| c.res.as_slice()))
    }
}

/// One connected component (or a re-split part of one after presolve).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Comp {
    /// Nodes in program order.
    pub nodes: Vec<CNode>,
    /// Local resource index to instance resource index.
    pub res_global: Vec<u32>,
    /// Number of profiles.
    pub profiles: usize,
    /// The objective's combined time cost of each instance resource at each rank, by
    /// instance index (an empty row, or a missing one: free).
    pub res_time: std::sync::Arc<Vec<Vec<u64>>>,
}

/// The exact evaluation of one complete choice on a component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Score {
    /// Preferred flag per node, node order.
    pub pref: Vec<bool>,
    /// Number of used resources at each rank (length = number of profiles).
    pub counts: Vec<u64>,
    /// Chosen candidate per node as its provider-order index (node order).
    pub ids: Vec<u16>,
    /// The profile rank of every used local resource (`None`: unused).
    pub ranks: Vec<Option<usize>>,
    /// The combined time: the chosen candidates' and the used resources' time costs.
    pub time: i128,
}

impl Comp {
    /// Number of local resources.
    pub fn nres(&self) -> usize {
        self.res_global.len()
    }

    /// The combined time cost of local resource `r` used at rank `k`.
    pub fn res_cost(&self, r: u32, k: usize) -> u64 {
        self.res_global
            .get(r as usize)
            .and_then(|&g| self.res_time.get(g as usize))
            .and_then(|row| row.get(k))
            .copied()
            .unwrap_or(0)
    }

    /// Whether any candidate or resource of the component costs time.
    pub fn has_time(&self) -> bool {
        self.nodes
            .iter()
            .any(|n| n.cands.iter().any(|c| c.time != 0))
            || self.res_global.iter().any(|&g| {
                self.res_time
                    .get(g as usize)
                    .is_some_and(|row| !row.is_empty())
            })
    }

    /// The nodes that can touch each local resource (with any candidate),
    /// ascending.
    pub fn touchers(&self) -> Vec<Vec<usize>> {
        let mut out: Vec<Vec<usize>> = vec![Vec::new(); self.nres()];
        for (i, node) in self.nodes.iter().enumerate() {
            for r in node.resources() {
                out[r as usize].push(i);
            }
        }
        out
    }

    /// Every profile of the component, as a mask.
    pub fn all_profiles(&self) -> Mask {
        if self.profiles >= 64 {
            Mask::MAX
        } else {
            (1 << self.profiles) - 1
        }
    }

    /// Of the `touchers` of local resource `r`, those whose candidates
    /// differ in their use of it (touching it or not, the profiles
    /// accepted): only they can change the resource's term. The others use
    /// it alike whatever they choose; returned beside them: whether one of
    /// those touches it, and the intersection of what they accept (every
    /// profile when none does), where a term's intersection starts.
    pub fn deciding_touchers(&self, r: u32, touchers: &[usize]) -> (Vec<usize>, bool, Mask) {
        let (mut used, mut mask) = (false, self.all_profiles());
        let deciding = touchers
            .iter()
            .copied()
            .filter(|&i| {
                let cands = &self.nodes[i].cands;
                let first = cands[0].use_of(r);
                let varies = cands[1..].iter().any(|c| c.use_of(r) != first);
                if let (false, Some(m)) = (varies, first) {
                    used = true;
                    mask &= m;
                }
                varies
            })
            .collect();
        (deciding, used, mask)
    }

    /// Resource `r`'s state in every combination of candidates of `scope`
    /// (its deciding touchers; `base` is the starting `used` and mask that
    /// [`Comp::deciding_touchers`] returns beside them), in mixed radix over
    /// `scope` with the last node fastest: `f` gets one state per cell, in
    /// order. The tables of a resource's term (the elimination's, the dual
    /// bound's) are built from it.
    pub fn for_each_resource_state(
        &self,
        r: u32,
        scope: &[usize],
        base: (bool, Mask),
        domain: &[usize],
        mut f: impl FnMut(ResourceState),
    ) {
        let cells: usize = scope.iter().map(|&i| domain[i]).product();
        let mut digits = vec![0usize; scope.len()];
        for _ in 0..cells {
            let (mut used, mut mask) = base;
            for (&i, &c) in scope.iter().zip(&digits) {
                if let Some(m) = self.nodes[i].cands[c].use_of(r) {
                    used = true;
                    mask &= m;
                }
            }
            f(match (used, mask) {
                (false, _) => ResourceState::Unused,
                (true, 0) => ResourceState::Infeasible,
                (true, m) => ResourceState::Rank(best_rank(m)),
            });
            advance(&mut digits, scope, domain);
        }
    }

    /// Evaluates a choice given as one local candidate index per node:
    /// `None` when it is infeasible (some resource has an empty intersection)
    /// or malformed.
    pub fn evaluate_local(&self, choice: &[usize]) -> Option<Score> {
        if choice.len() != self.nodes.len() {
            return None;
        }
        let mut masks: Vec<Mask> = vec![0; self.nres()];
        let mut used = vec![false; self.nres()];
        let mut pref = Vec::with_capacity(self.nodes.len());
        let mut ids = Vec::with_capacity(self.nodes.len());
        let mut time = 0i128;
        for (node, &c) in self.nodes.iter().zip(choice) {
            let cand = node.cands.get(c)?;
            time += i128::from(cand.time);
            pref.push(cand.preferred);
            ids.push(cand.orig);
            for &(r, m) in &cand.res {
                let r = r as usize;
                if used[r] {
                    masks[r] &= m;
                } else {
                    used[r] = true;
                    masks[r] = m;
                }
                if masks[r] == 0 {
                    return None;
                }
            }
        }
        let mut counts = vec![0u64; self.profiles];
        let mut ranks = vec![None; self.nres()];
        for r in 0..self.nres() {
            if used[r] {
                let k = best_rank(masks[r]);
                counts[k] += 1;
                ranks[r] = Some(k);
                time += i128::from(self.res_cost(r as u32, k));
            }
        }
        Some(Score {
            pref,
            counts,
            ids,
            ranks,
            time,
        })
    }

    /// Builds a component from instance nodes (ascending indices), with all
    /// their candidates.
    pub fn from_instance(inst: &Instance, nodes: &[u32]) -> Comp {
        let mut local: std::collections::BTreeMap<u32, u32> = Default::default();
        for &n in nodes {
            for c in &inst.nodes[n as usize].cands {
                for &(r, _) in &c.res {
                    local.entry(r).or_insert(0);
                }
            }
        }
        let res_global: Vec<u32> = local.keys().copied().collect();
        for (i, v) in local.values_mut().enumerate() {
            *v = i as u32;
        }
        let cnodes = nodes
            .iter()
            .map(|&n| CNode {
                global: n,
                cands: inst.nodes[n as usize]
                    .cands
                    .iter()
                    .enumerate()
                    .map(|(i, c)| CCand {
                        orig: i as u16,
                        preferred: c.preferred,
                        res: c.res.iter().map(|&(r, m)| (local[&r], m)).collect(),
                        time: inst.cand_time[n as usize][i],
                    })
                    .collect(),
            })
            .collect();
        Comp {
            nodes: cnodes,
            res_global,
            profiles: inst.profiles.len(),
            res_time: inst.res_time.clone(),
        }
    }
}

/// Groups `nodes` (each given by its touched resources, over all candidates)
/// into connected components through shared resources. Returns groups of
/// positions into `nodes`, each ascending, sorted by first position.
pub(crate) fn group_by_resources(node_res: &[Vec<u32>], nres: usize) -> Vec<Vec<usize>> {
    let n = node_res.len();
    // Vertices 0..n are nodes, n..n+nres are resources.
    let mut uf: UnionFind<usize> = UnionFind::new(n + nres);
    for (i, rs) in node_res.iter().enumerate() {
        for &r in rs {
            uf.union(i, n + r as usize);
        }
    }
    let mut group_of_root: std::collections::HashMap<usize, usize> = Default::default();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for i in 0..n {
        let root = uf.find_mut(i);
        let g = *group_of_root.entry(root).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[g].push(i);
    }
    groups
}

/// The connected components of an instance, as ascending node-index lists
/// sorted by first node.
pub(crate) fn instance_components(inst: &Instance) -> Vec<Vec<u32>> {
    let node_res: Vec<Vec<u32>> = inst
        .nodes
        .iter()
        .map(|n| touched_resources(n.cands.iter().map(|c| c.res.as_slice())))
        .collect();
    group_by_resources(&node_res, inst.resources.len())
        .into_iter()
        .map(|g| g.into_iter().map(|i| i as u32).collect())
        .collect()
}

/// What a resource is under one combination of its touchers' candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResourceState {
    /// No chosen candidate touches it.
    Unused,
    /// The chosen candidates that touch it accept no common profile.
    Infeasible,
    /// Used, with the lowest rank of the common profiles.
    Rank(usize),
}

/// Steps the mixed-radix `digits` over `scope` (last varies fastest): the
/// cell order of every table over a scope of nodes.
pub(crate) fn advance(digits: &mut [usize], scope: &[usize], domain: &[usize]) {
    for j in (0..digits.len()).rev() {
        digits[j] += 1;
        if digits[j] < domain[scope[j]] {
            return;
        }
        digits[j] = 0;
    }
}
