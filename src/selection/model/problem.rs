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

/// A joint provider/storage-profile selection problem (the input of
/// `jointplan solve`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelectionProblem {
    /// Storage profiles in policy order: the index is the rank, rank 0 is the
    /// most wanted.
    pub profiles: Vec<String>,
    /// The nodes in program order.
    pub nodes: Vec<SelectionNode>,
}

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
        Ok(Instance {
            profiles: problem.profiles.clone(),
            resources,
            nodes,
            unusable,
        })
    }
}
