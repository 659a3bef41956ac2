//! The provider-id level by exact probing, each probe on the region of the
//! part it can change.
//!
//! **What it computes.** Given a part, its levels before the provider ids
//! (the *prefix levels*, all additive: see docs/solver.md) and a solution
//! `start` optimal on them with value `opt`, the smallest provider-id
//! sequence, in node order, among the solutions equal to `opt` on every
//! prefix level.
//!
//! **Method.** Nodes are decided in order. Node `i` takes the first
//! candidate `c` (provider order) such that some solution with the nodes
//! before `i` as decided and `i` at `c` equals `opt`. The current solution
//! `cur` (initially `start`) always equals `opt` and agrees with every
//! decision, so its own candidate ends the tries. A smaller `c` qualifies
//! when swapping it into `cur` keeps `opt`, or when a *probe* finds a
//! solution with `i` at `c` that equals `opt`; `cur` then becomes it. By
//! induction the decisions are the prefix of the smallest optimal provider
//! sequence, and each `c` is the next element of that sequence.
//!
//! **The region of a probe.** Let `D` be the part with the decided nodes
//! fixed and `D'` the same with `i` fixed at `c`. On the prefix levels a
//! node whose candidates, after prefix dominance, come down to one is
//! fixed: the kept candidate is no worse than any other on every prefix
//! level, so fixing it keeps the optimal value. The *free* nodes are the
//! undecided ones with at least two kept candidates. The region is the
//! closure, from the resources `i`'s candidates touch, of "a free node
//! touching a region resource brings in all the resources its candidates
//! touch"; its nodes are every node touching a region resource. Every
//! prefix level is a sum of node terms and resource terms (docs/solver.md,
//! "Variable elimination"), and a resource term depends only on the nodes
//! touching it. A region resource's touchers are region nodes, and a free
//! node touching one has every resource in the region, so outside the
//! region no term depends on a free region node, and inside it no term
//! depends on a free node outside; the fixed nodes are constants on both
//! sides. So the optimum of `D'` is `C + R'` where `C` is the optimum of
//! the terms outside the region (the same in `D` and `D'`) and `R'` the
//! optimum of the region's terms, alone, with `i` at `c`; likewise for `D`
//! with `R`. `cur` is optimal for `D`, so its region terms equal `R`
//! (otherwise its outside terms would beat `C`, or its total would exceed
//! the optimum: the order of the level values is preserved by addition).
//! Hence `D'` reaches `opt` iff `R' = R`, where `R` is read from `cur` and
//! `R'` is an exact solve of the region alone (its nodes, their candidates
//! restricted to the region's resources; prefix dominance, presolve and
//! split apply to it as to any part, and sub-parts are memoised by
//! signature across probes). The solution found, joined with `cur`
//! outside the region, is then a solution of `D'` equal to `opt`, and it
//! is re-checked on the whole part before it becomes `cur`.
//!
//! A probe thus costs the size of its region, not of the part: on
//! long-range sharing with half the nodes preferred, a few nodes against a
//! few thousand.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::time::Instant;

use crate::selection::exact::ilp::IlpOutcome;
use crate::selection::exact::part_method::PartMethod;
use crate::selection::exact::preference::widen;
use crate::selection::exact::strategy::{PartResult, PartSolver};
use crate::selection::model::objective::{compare_scores, Level};
use crate::selection::reduce::components::{CCand, CNode, Comp, Score};
use crate::selection::reduce::prefix_dominance::{drop_prefix_dominated, undominated};

/// What the probes of one part share: who touches what, and which nodes
/// are free before any decision.
struct Incidence {
    /// Nodes touching each local resource (with any candidate), ascending.
    touchers: Vec<Vec<usize>>,
    /// Resources each node's candidates touch, ascending.
    node_res: Vec<Vec<u32>>,
    /// Each node's candidate when prefix dominance keeps only one (the
    /// node is then fixed on the prefix levels), else `None`.
    only_kept: Vec<Option<usize>>,
}

impl Incidence {
    fn new(comp: &Comp) -> Incidence {
        let only_kept = comp
            .nodes
            .iter()
            .map(|node| {
                let kept: Vec<usize> = undominated(&node.cands)
                    .iter()
                    .enumerate()
                    .filter_map(|(c, &k)| k.then_some(c))
                    .collect();
                (kept.len() == 1).then(|| kept[0])
            })
            .collect();
        Incidence {
            touchers: comp.touchers(),
            node_res: comp.nodes.iter().map(CNode::resources).collect(),
            only_kept,
        }
    }

    /// The region of node `i` (module docs): its nodes ascending and its
    /// resources ascending, given which nodes are decided.
    fn region(&self, i: usize, decided: &[bool]) -> (Vec<usize>, Vec<u32>) {
        let mut in_res = vec![false; self.touchers.len()];
        let mut in_node = vec![false; self.node_res.len()];
        let mut queue: Vec<u32> = Vec::new();
        let mut nodes = vec![i];
        in_node[i] = true;
        for &r in &self.node_res[i] {
            in_res[r as usize] = true;
            queue.push(r);
        }
        let mut at = 0;
        while at < queue.len() {
            let r = queue[at] as usize;
            at += 1;
            for &j in &self.touchers[r] {
                if in_node[j] {
                    continue;
                }
                in_node[j] = true;
                nodes.push(j);
                if !decided[j] && self.only_kept[j].is_none() {
                    for &s in &self.node_res[j] {
                        if !in_res[s as usize] {
                            in_res[s as usize] = true;
                            queue.push(s);
                        }
                    }
                }
            }
        }
        nodes.sort_unstable();
        queue.sort_unstable();
        (nodes, queue)
    }
}

/// The region alone: its nodes in order, each candidate touching only
/// region resources (renumbered); `fixed(j)` is the one candidate of a
/// node that is fixed (decided, or one kept candidate), the others keep
/// every candidate. Also the position of node `i`.
fn region_part(
    comp: &Comp,
    nodes: &[usize],
    res: &[u32],
    fixed: &dyn Fn(usize) -> Option<usize>,
    i: usize,
) -> (Comp, usize) {
    let restrict = |c: &CCand| CCand {
        orig: c.orig,
        preferred: c.preferred,
        time: c.time,
        res: c
            .res
            .iter()
            .filter_map(|&(r, m)| res.binary_search(&r).ok().map(|l| (l as u32, m)))
            .collect(),
    };
    let part = Comp {
        nodes: nodes
            .iter()
            .map(|&j| CNode {
                global: comp.nodes[j].global,
                cands: match fixed(j) {
                    Some(c) if j != i => vec![restrict(&comp.nodes[j].cands[c])],
                    _ => comp.nodes[j].cands.iter().map(restrict).collect(),
                },
            })
            .collect(),
        res_global: res.iter().map(|&r| comp.res_global[r as usize]).collect(),
        profiles: comp.profiles,
        res_time: comp.res_time.clone(),
    };
    let at = nodes.iter().position(|&j| j == i).unwrap_or(0);
    (part, at)
}

/// The region of the node being decided, alone, with the current solution
/// on it.
struct Region {
    /// The region as a part ([`region_part`]).
    part: Comp,
    /// The position of the node being decided in it.
    at: usize,
    /// Its nodes (indices of the whole part), ascending.
    nodes: Vec<usize>,
    /// The current solution on it (local indices).
    local: Vec<usize>,
    /// The value of the current solution on its terms.
    value: Score,
}

impl PartSolver<'_> {
    /// The provider-id level by probing (module docs): `start` equals
    /// `opt` on the `prefix` levels.
    pub(in crate::selection) fn probe_provider_ids(
        &self,
        comp: &Comp,
        prefix: &[Level],
        start: Vec<usize>,
        opt: &Score,
        mut method: PartMethod,
    ) -> Result<PartResult, String> {
        let weights = self.weights;
        let equal = |choice: &[usize]| -> Option<Ordering> {
            comp.evaluate_local(choice)
                .map(|s| compare_scores(prefix, weights, &s, opt))
        };
        let stop = |cur: Vec<usize>, method: PartMethod| PartResult {
            outcome: IlpOutcome::Solved {
                choice: cur,
                solves: method.solves,
                stopped: Some("the provider-id level".into()),
                gap: None,
            },
            method,
        };
        let incidence = Incidence::new(comp);
        let mut cur = start;
        let mut decided = vec![false; comp.nodes.len()];
        let mut memo = BTreeMap::new();
        for i in 0..comp.nodes.len() {
            // The region of `i` and the value of `cur` on it, built at the
            // first probe of `i`.
            let mut region: Option<Region> = None;
            for c in 0..comp.nodes[i].cands.len() {
                if c == cur[i] {
                    break;
                }
                if self.limits.deadline.is_some_and(|t| Instant::now() >= t) {
                    return Ok(stop(cur, method));
                }
                if region.is_none() {
                    let (nodes, res) = incidence.region(i, &decided);
                    let fixed = |j: usize| {
                        if decided[j] {
                            Some(cur[j])
                        } else {
                            incidence.only_kept[j]
                        }
                    };
                    let (part, at) = region_part(comp, &nodes, &res, &fixed, i);
                    let local: Vec<usize> = nodes
                        .iter()
                        .map(|&j| match fixed(j) {
                            Some(_) if j != i => 0,
                            _ => cur[j],
                        })
                        .collect();
                    let value = part
                        .evaluate_local(&local)
                        .ok_or("internal: the current solution fails on its probe region")?;
                    region = Some(Region {
                        part,
                        at,
                        nodes,
                        local,
                        value,
                    });
                }
                let Some(Region {
                    part,
                    at,
                    nodes,
                    local,
                    value,
                }) = &region
                else {
                    continue;
                };
                // `cur` with `i` at `c`: only `i`'s terms change, and they
                // are all in the region.
                let mut swapped = local.clone();
                swapped[*at] = c;
                let swap_keeps = part
                    .evaluate_local(&swapped)
                    .is_some_and(|s| compare_scores(prefix, weights, &s, value) == Ordering::Equal);
                let (fixed, found) = if swap_keeps {
                    (part.clone(), swapped)
                } else {
                    let mut fixed = part.clone();
                    fixed.nodes[*at].cands = vec![part.nodes[*at].cands[c].clone()];
                    let probe =
                        drop_prefix_dominated(&fixed, None).map_or(fixed.clone(), |r| r.reduced);
                    let r = self.solve_split_memo(&probe, prefix, None, &mut memo)?;
                    method.probes += 1;
                    method.solves += r.method.solves;
                    let choice = match r.outcome {
                        IlpOutcome::Infeasible => continue,
                        IlpOutcome::Solved {
                            stopped: Some(_), ..
                        } => return Ok(stop(cur, method)),
                        IlpOutcome::Solved { choice, .. } => choice,
                    };
                    let found = widen(&fixed, &probe, &choice)
                        .ok_or("internal: a provider-id probe chose an unknown candidate")?;
                    let score = fixed
                        .evaluate_local(&found)
                        .ok_or("internal: a provider-id probe failed its re-check")?;
                    match compare_scores(prefix, weights, &score, value) {
                        Ordering::Greater => continue,
                        Ordering::Less => return Err(
                            "internal: a provider-id probe beat the proved optimum on its region"
                                .into(),
                        ),
                        Ordering::Equal => {}
                    }
                    (fixed, found)
                };
                let mut next = cur.clone();
                for (l, &j) in nodes.iter().enumerate() {
                    if !decided[j] {
                        let orig = fixed.nodes[l].cands[found[l]].orig;
                        next[j] = comp.nodes[j]
                            .cands
                            .iter()
                            .position(|x| x.orig == orig)
                            .ok_or("internal: a probe region chose an unknown candidate")?;
                    }
                }
                if equal(&next) != Some(Ordering::Equal) {
                    return Err(
                        "internal: a provider-id probe's solution does not keep the optimum".into(),
                    );
                }
                cur = next;
                break;
            }
            decided[i] = true;
        }
        Ok(PartResult {
            outcome: IlpOutcome::Solved {
                choice: cur,
                solves: method.solves,
                stopped: None,
                gap: None,
            },
            method,
        })
    }
}
