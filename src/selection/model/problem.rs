//! The selection problem in the exchange format of `docs/selection-problem.md`, its
//! validation, and the indexed internal form the solvers work on.
//!
//! The public types ([`SelectionProblem`], [`SelectionNode`], [`Candidate`])
//! mirror the JSON format one to one. [`Instance::new`] validates a problem
//! and turns it into index form: profiles become bit masks (`u64`, so at most
//! 64 profiles), resources become dense indices in name order, and every
//! node's candidates are sorted by provider id as byte strings, so that the
//! candidate index order *is* the provider-id order of the third objective
//! key.

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};

use crate::selection::error::SelectionError;
use crate::selection::model::objective::TimeWeights;

/// A joint provider/storage-profile selection problem (the input of
/// `jointplan solve`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelectionProblem {
    /// Storage profiles in policy order: the index is the rank, rank 0 is the
    /// most wanted.
    pub profiles: Vec<String>,
    /// The nodes in program order.
    pub nodes: Vec<SelectionNode>,
    /// Time costs of a resource at each profile (picoseconds), by resource: the time a
    /// used resource adds at the profile it gets (a paged layout's block-table reads, for
    /// example). Absent: no resource costs time.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub profile_time_ps: BTreeMap<String, ProfileTimes>,
}

/// The time costs of one candidate, integer picoseconds per metric (absent: 0).
///
/// `tpot`: its share of one decode step at the serving point; `ttft`: of one prompt's
/// prefill; `throughput`: of the device time to serve one batch (see
/// docs/selection-problem.md).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimeCosts {
    /// Picoseconds of one decode step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot: Option<u64>,
    /// Picoseconds of one prompt's prefill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft: Option<u64>,
    /// Picoseconds of the device time per served batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<u64>,
}

/// The time costs of one resource at each profile, one entry per profile in rank order,
/// non-decreasing (a worse-ranked profile never costs less), per metric (absent: 0).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileTimes {
    /// Picoseconds of one decode step, by profile rank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot: Option<Vec<u64>>,
    /// Picoseconds of one prompt's prefill, by profile rank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft: Option<Vec<u64>>,
    /// Picoseconds of the device time per served batch, by profile rank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<Vec<u64>>,
}

/// The largest time cost one candidate or one resource-profile entry may state:
/// 10^15 picoseconds (1,000 seconds).
pub const MAX_TIME_PS: u64 = 1_000_000_000_000_000;

/// One node of the program and the provider candidates it may use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelectionNode {
    /// Unique node id.
    pub id: String,
    /// The preferred provider, if any; it may name a provider without a
    /// candidate (then the preference cannot be met).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred: Option<String>,
    /// One candidate per provider.
    pub candidates: Vec<Candidate>,
}

/// One provider candidate of a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    /// Provider id, unique within the node.
    pub provider: String,
    /// Every resource the candidate touches, mapped to the profiles it accepts
    /// for that resource.
    pub accepts: BTreeMap<String, Vec<String>>,
    /// Its time costs (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_ps: Option<TimeCosts>,
}

/// A candidate dropped before solving because it accepts no profile for one of
/// its resources.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct UnusableCandidate {
    /// The node id.
    pub node: String,
    /// The provider of the dropped candidate.
    pub provider: String,
    /// The first resource (in name order) with an empty accepted list.
    pub resource: String,
}

/// A set of profiles as a bit mask: bit `k` is the profile of rank `k`.
pub(crate) type Mask = u64;

/// The distinct resources of a node's candidates (each a list of touched
/// resources with accepted masks), ascending.
pub(crate) fn touched_resources<'a>(cands: impl Iterator<Item = &'a [(u32, Mask)]>) -> Vec<u32> {
    let mut rs: Vec<u32> = cands.flat_map(|res| res.iter().map(|&(r, _)| r)).collect();
    rs.sort_unstable();
    rs.dedup();
    rs
}

/// The rank of the best (lowest-rank) profile in a non-empty mask.
pub(crate) fn best_rank(mask: Mask) -> usize {
    mask.trailing_zeros() as usize
}

/// A validated candidate in index form.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ICand {
    /// Provider id.
    pub provider: String,
    /// Whether this is the node's preferred provider.
    pub preferred: bool,
    /// Touched resources with their accepted masks, sorted by resource index;
    /// every mask is non-empty.
    pub res: Vec<(u32, Mask)>,
    /// Its raw time costs.
    pub time: TimeCosts,
}

/// A validated node in index form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct INode {
    /// Node id.
    pub id: String,
    /// Usable candidates sorted by provider id (byte order); never empty.
    pub cands: Vec<ICand>,
}

/// A validated problem in index form.
#[derive(Debug, Clone)]
pub(crate) struct Instance {
    /// Profile names by rank.
    pub profiles: Vec<String>,
    /// Resource names by index (name order).
    pub resources: Vec<String>,
    /// Nodes in program order.
    pub nodes: Vec<INode>,
    /// Candidates dropped because of an empty accepted list.
    pub unusable: Vec<UnusableCandidate>,
    /// Raw time costs of each resource (by index) at each profile rank.
    pub res_times: Vec<ProfileTimes>,
    /// The objective's combined time cost of each node's candidates (`[node][cand]`),
    /// all zero unless [`Instance::apply_time`] set them.
    pub cand_time: Vec<Vec<u64>>,
    /// The objective's combined time cost of each resource at each rank (`[resource]`
    /// empty: free at every rank).
    pub res_time: std::sync::Arc<Vec<Vec<u64>>>,
}

impl SelectionProblem {
    /// Parses a problem from JSON text; the error names the JSON path of the
    /// first problem found.
    pub fn from_json_str(text: &str) -> Result<Self, SelectionError> {
        use crate::json_input::{parse_strict_counting, CountedArray, InputLimits, Limit};
        let counted = CountedArray {
            path: &["nodes"],
            limit: Limit::Nodes,
        };
        parse_strict_counting(text, &InputLimits::current(), Some(counted)).map_err(|e| {
            SelectionError::BadInput(format!(
                "invalid problem JSON at `{}`: {}",
                e.json_path, e.message
            ))
        })
    }
}

impl Instance {
    /// Validates `problem` and builds the index form.
    pub fn new(problem: &SelectionProblem) -> Result<Self, SelectionError> {
        let bad = |m: String| Err(SelectionError::BadInput(m));
        if problem.profiles.is_empty() {
            return bad("`profiles` is empty: at least one storage profile is needed".into());
        }
        if problem.profiles.len() > 64 {
            return bad(format!(
                "`profiles` has {} entries; at most 64 are supported",
                problem.profiles.len()
            ));
        }
        let limits = crate::json_input::InputLimits::current();
        let within = |limit, path: &str, found: usize| {
            limits
                .check(limit, path, found as u64)
                .map_err(|e| SelectionError::BadInput(format!("`{}`: {}", e.json_path, e.message)))
        };
        use crate::json_input::Limit;
        within(Limit::Nodes, "nodes", problem.nodes.len())?;
        // Every name follows the identifier rule (1 to 160 bytes, no control or invisible
        // formatting characters); the message names its JSON path.
        // The path is written only for an error (a large instance has hundreds of
        // thousands of names).
        let name = |path: &dyn Fn() -> String, text: &str| {
            match crate::json_input::name_problem(text) {
            None => Ok(()),
            Some(problem) => Err(SelectionError::BadInput(format!(
                "`{}` {problem}: every name is 1 to 160 bytes with no control or invisible formatting characters",
                path()
            ))),
        }
        };
        let mut rank_of: BTreeMap<&str, usize> = BTreeMap::new();
        for (k, p) in problem.profiles.iter().enumerate() {
            name(&|| format!("profiles[{k}]"), p)?;
            if rank_of.insert(p.as_str(), k).is_some() {
                return bad(format!("profile `{p}` is listed twice in `profiles`"));
            }
        }
        // Hash tables for lookups of names (as the request's `IdMap` and `IdSet`).
        let mut seen_nodes = FxHashSet::default();
        let mut res_names = BTreeSet::new();
        for (index, node) in problem.nodes.iter().enumerate() {
            name(&|| format!("nodes[{index}].id"), &node.id)?;
            if let Some(preferred) = &node.preferred {
                name(&|| format!("nodes[{index}].preferred"), preferred)?;
            }
            if !seen_nodes.insert(node.id.as_str()) {
                return bad(format!(
                    "node id `{}` is used by more than one node",
                    node.id
                ));
            }
            within(
                Limit::CandidatesPerNode,
                &format!("nodes[{index}].candidates"),
                node.candidates.len(),
            )?;
            let mut providers = BTreeSet::new();
            for (c, cand) in node.candidates.iter().enumerate() {
                name(
                    &|| format!("nodes[{index}].candidates[{c}].provider"),
                    &cand.provider,
                )?;
                if !providers.insert(cand.provider.as_str()) {
                    return bad(format!(
                        "node `{}`: provider `{}` has more than one candidate",
                        node.id, cand.provider
                    ));
                }
                if let Some(t) = &cand.time_ps {
                    check_time(&|| format!("nodes[{index}].candidates[{c}].time_ps"), t)?;
                }
                for (res, accepted) in &cand.accepts {
                    name(
                        &|| format!("nodes[{index}].candidates[{c}].accepts.{res}"),
                        res,
                    )?;
                    let mut listed = BTreeSet::new();
                    for p in accepted {
                        if !listed.insert(p.as_str()) {
                            return bad(format!(
                                "node `{}`, candidate `{}`, resource `{res}`: profile `{p}` is listed twice",
                                node.id, cand.provider
                            ));
                        }
                        if !rank_of.contains_key(p.as_str()) {
                            return bad(format!(
                                "node `{}`, candidate `{}`, resource `{res}`: unknown profile `{p}` (not in `profiles`)",
                                node.id, cand.provider
                            ));
                        }
                    }
                }
            }
        }
        // Resources are indexed over usable candidates only: a resource that
        // only an unusable candidate names is not part of the problem.
        let usable = |c: &Candidate| c.accepts.values().all(|v| !v.is_empty());
        for node in &problem.nodes {
            for cand in node.candidates.iter().filter(|c| usable(c)) {
                for res in cand.accepts.keys() {
                    res_names.insert(res.as_str());
                }
            }
        }
        within(
            Limit::Resources,
            "nodes[*].candidates[*].accepts",
            res_names.len(),
        )?;
        let resources: Vec<String> = res_names.iter().map(|s| s.to_string()).collect();
        let res_index: FxHashMap<&str, u32> = res_names
            .iter()
            .enumerate()
            .map(|(i, s)| (*s, i as u32))
            .collect();
        let mut nodes = Vec::with_capacity(problem.nodes.len());
        let mut unusable = Vec::new();
        for node in &problem.nodes {
            if node.candidates.is_empty() {
                return bad(format!("node `{}` has no candidates", node.id));
            }
            let mut cands = Vec::new();
            for cand in &node.candidates {
                if let Some((res, _)) = cand.accepts.iter().find(|(_, v)| v.is_empty()) {
                    unusable.push(UnusableCandidate {
                        node: node.id.clone(),
                        provider: cand.provider.clone(),
                        resource: res.clone(),
                    });
                    continue;
                }
                let mut res = Vec::with_capacity(cand.accepts.len());
                for (r, accepted) in &cand.accepts {
                    let mut mask: Mask = 0;
                    for p in accepted {
                        // Presence was checked above.
                        if let Some(&k) = rank_of.get(p.as_str()) {
                            mask |= 1u64 << k;
                        }
                    }
                    if let Some(&ri) = res_index.get(r.as_str()) {
                        res.push((ri, mask));
                    }
                }
                res.sort_unstable();
                cands.push(ICand {
                    provider: cand.provider.clone(),
                    preferred: node.preferred.as_deref() == Some(cand.provider.as_str()),
                    res,
                    time: cand.time_ps.clone().unwrap_or_default(),
                });
            }
            if cands.is_empty() {
                let list: Vec<String> = unusable
                    .iter()
                    .filter(|u| u.node == node.id)
                    .map(|u| format!("`{}` (empty list for `{}`)", u.provider, u.resource))
                    .collect();
                return bad(format!(
                    "node `{}` is left with no usable candidate: {}",
                    node.id,
                    list.join(", ")
                ));
            }
            cands.sort_by(|a, b| a.provider.as_bytes().cmp(b.provider.as_bytes()));
            nodes.push(INode {
                id: node.id.clone(),
                cands,
            });
        }
        unusable.sort();
        let mut res_times = vec![ProfileTimes::default(); resources.len()];
        for (res, times) in &problem.profile_time_ps {
            let path = format!("profile_time_ps.{res}");
            let Some(&ri) = res_index.get(res.as_str()) else {
                return bad(format!(
                    "`{path}`: no usable candidate touches resource `{res}`; remove the entry or fix the name"
                ));
            };
            for (metric, list) in [
                ("tpot", &times.tpot),
                ("ttft", &times.ttft),
                ("throughput", &times.throughput),
            ] {
                let Some(list) = list else { continue };
                if list.len() != problem.profiles.len() {
                    return bad(format!(
                        "`{path}.{metric}` has {} entries; it needs one per profile ({})",
                        list.len(),
                        problem.profiles.len()
                    ));
                }
                if let Some(k) = list.iter().position(|&t| t > MAX_TIME_PS) {
                    return bad(format!(
                        "`{path}.{metric}[{k}]` = {} is above the largest time cost {MAX_TIME_PS} ps (1000 s)",
                        list[k]
                    ));
                }
                if let Some(k) = (1..list.len()).find(|&k| list[k] < list[k - 1]) {
                    return bad(format!(
                        "`{path}.{metric}[{k}]` = {} is smaller than `[{}]` = {}; a worse-ranked profile must not cost less time",
                        list[k],
                        k - 1,
                        list[k - 1]
                    ));
                }
            }
            res_times[ri as usize] = times.clone();
        }
        let cand_time = nodes.iter().map(|n| vec![0; n.cands.len()]).collect();
        Ok(Instance {
            profiles: problem.profiles.clone(),
            resources,
            nodes,
            unusable,
            res_times,
            cand_time,
            res_time: std::sync::Arc::new(Vec::new()),
        })
    }

    /// Sets the combined time costs of `weights` (`Σ_m weight[m] · cost[m]` per candidate
    /// and per resource and rank); errors name the node or resource whose combined cost
    /// exceeds [`super::objective::MAX_TIME_EXTENT`], or whose sums could.
    pub fn apply_time(&mut self, weights: &TimeWeights) -> Result<(), SelectionError> {
        let too_large = |what: String| {
            SelectionError::BadInput(format!(
                "{what}: its time costs times the time weights exceed {} (the exact range of the time sums); use smaller weights or costs",
                super::objective::MAX_TIME_EXTENT
            ))
        };
        let mut extent = 0u64;
        for (n, node) in self.nodes.iter().enumerate() {
            for (c, cand) in node.cands.iter().enumerate() {
                self.cand_time[n][c] = weights.combine(&cand.time).ok_or_else(|| {
                    too_large(format!("node `{}`, candidate `{}`", node.id, cand.provider))
                })?;
            }
            let dearest = self.cand_time[n].iter().copied().max().unwrap_or(0);
            extent = extent
                .checked_add(dearest)
                .filter(|&e| e <= super::objective::MAX_TIME_EXTENT)
                .ok_or_else(|| too_large(format!("the nodes up to `{}`", node.id)))?;
        }
        let mut res_time = Vec::with_capacity(self.res_times.len());
        for (r, times) in self.res_times.iter().enumerate() {
            let mut row = Vec::new();
            if *times != ProfileTimes::default() {
                for k in 0..self.profiles.len() {
                    let at =
                        |list: &Option<Vec<u64>>| list.as_ref().and_then(|l| l.get(k).copied());
                    let costs = TimeCosts {
                        tpot: at(&times.tpot),
                        ttft: at(&times.ttft),
                        throughput: at(&times.throughput),
                    };
                    row.push(
                        weights.combine(&costs).ok_or_else(|| {
                            too_large(format!("resource `{}`", self.resources[r]))
                        })?,
                    );
                }
                if row.iter().all(|&t| t == 0) {
                    row.clear();
                }
                let dearest = row.iter().copied().max().unwrap_or(0);
                extent = extent
                    .checked_add(dearest)
                    .filter(|&e| e <= super::objective::MAX_TIME_EXTENT)
                    .ok_or_else(|| too_large(format!("resource `{}`", self.resources[r])))?;
            }
            res_time.push(row);
        }
        self.res_time = std::sync::Arc::new(res_time);
        Ok(())
    }
}

/// The indexed problem under `objective`, with the weights of its weighted level (sized to
/// the problem) checked and its time costs combined into the instance.
pub(crate) fn prepare(
    problem: &SelectionProblem,
    objective: &dyn super::objective::Objective,
) -> Result<(Instance, Option<super::objective::Weights>), SelectionError> {
    let mut inst = Instance::new(problem)?;
    let weights = objective.weights_for(inst.profiles.len());
    if let Some(w) = &weights {
        w.validate(inst.profiles.len())?;
        if let Some(t) = &w.time {
            inst.apply_time(t)?;
        }
    }
    Ok((inst, weights))
}

/// Checks one candidate's time costs.
fn check_time(path: &dyn Fn() -> String, t: &TimeCosts) -> Result<(), SelectionError> {
    for (metric, v) in [
        ("tpot", t.tpot),
        ("ttft", t.ttft),
        ("throughput", t.throughput),
    ] {
        if let Some(v) = v.filter(|&v| v > MAX_TIME_PS) {
            return Err(SelectionError::BadInput(format!(
                "`{}.{metric}` = {v} is above the largest time cost {MAX_TIME_PS} ps (1000 s)",
                path()
            )));
        }
    }
    Ok(())
}
