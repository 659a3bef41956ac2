//! Why a request has no plan (`plan` on an infeasible request, `explain --why-not` with a pin
//! that leaves none).
//!
//! - **Selection** (no provider/profile choice): a minimal set of facts of the request that
//!   together leave no choice, found by a deletion filter: starting from the facts of the
//!   conflicting component (each node's duty to take one of its usable providers, and each pin
//!   and forbid), every fact is dropped in turn and kept out if the rest still has no choice.
//!   The solver decides every step. Dropping a fact only removes a constraint, so the result is
//!   irreducible: the core alone has no choice, and without any one of its facts it has one.
//! - **Capacity** (the plan does not fit): the usable capacity against the bytes required, the
//!   largest allocations, and for every numeric policy field that can fix it alone the nearest
//!   value that builds, found by search with the planner itself as the oracle (a value is
//!   feasible when its plan builds). The search assumes that relaxing a field never makes a
//!   feasible request infeasible; its answer is checked at the value and the value next to it.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::ResearchError;
use crate::builder::error::PlanError;
use crate::builder::BuildOptions;
use crate::candidates::{derive_node_candidates, selection_problem, CandidateError};
use crate::memory::MemoryError;
use crate::plan::ExecutionPlan;
use crate::request::{NodeId, PlanRequest, ProviderId};
use crate::selection::{self, SelectionError, SelectionNode, SelectionProblem, SolveOptions};

/// One fact of a selection problem: a node's duty to take one of its candidates, a pin or a
/// forbid (indices into the problem's nodes).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SelectionFact {
    /// Node `i` must take one of its candidates.
    Node(usize),
    /// Node `i` is pinned to the provider.
    Pin(usize, String),
    /// The provider is forbidden at node `i`.
    Forbid(usize, String),
}

impl SelectionFact {
    fn node(&self) -> usize {
        match self {
            SelectionFact::Node(i) | SelectionFact::Pin(i, _) | SelectionFact::Forbid(i, _) => *i,
        }
    }
}

/// Whether the facts `kept` of `problem` admit a provider/profile choice.
pub fn facts_feasible(
    problem: &SelectionProblem,
    kept: &BTreeSet<SelectionFact>,
) -> Result<bool, ResearchError> {
    let mut nodes = Vec::new();
    for fact in kept {
        let SelectionFact::Node(i) = fact else {
            continue;
        };
        let mut node: SelectionNode = problem.nodes[*i].clone();
        node.candidates.retain(|c| {
            kept.iter().all(|f| match f {
                SelectionFact::Pin(j, p) => j != i || *p == c.provider,
                SelectionFact::Forbid(j, p) => j != i || *p != c.provider,
                SelectionFact::Node(_) => true,
            })
        });
        if node.candidates.is_empty() {
            return Ok(false);
        }
        nodes.push((*i, node));
    }
    nodes.sort_by_key(|(i, _)| *i);
    let sub = SelectionProblem {
        profiles: problem.profiles.clone(),
        nodes: nodes.into_iter().map(|(_, n)| n).collect(),
        profile_time_ps: Default::default(),
    };
    if sub.nodes.is_empty() {
        return Ok(true);
    }
    let options = SolveOptions {
        timings: false,
        ..SolveOptions::default()
    };
    match selection::solve(&sub, &options) {
        Ok(_) => Ok(true),
        Err(SelectionError::Infeasible { .. }) => Ok(false),
        Err(other) => Err(ResearchError::Build(Box::new(PlanError::Candidates(
            CandidateError::Selection {
                infeasible: false,
                detail: other.to_string(),
            },
        )))),
    }
}

/// The deletion filter: a minimal subset of `start` (itself without a choice) that has no
/// choice, each of its facts necessary. `None` if `start` has a choice.
pub fn minimal_conflict(
    problem: &SelectionProblem,
    start: &BTreeSet<SelectionFact>,
) -> Result<Option<BTreeSet<SelectionFact>>, ResearchError> {
    if facts_feasible(problem, start)? {
        return Ok(None);
    }
    let mut core = start.clone();
    for fact in start {
        core.remove(fact);
        // A pin or forbid of a node that is no longer in the core constrains nothing.
        let orphan = !matches!(fact, SelectionFact::Node(_))
            && !core.contains(&SelectionFact::Node(fact.node()));
        if orphan || !facts_feasible(problem, &core)? {
            continue;
        }
        core.insert(fact.clone());
    }
    Ok(Some(core))
}

/// A fact of the request that takes part in its infeasibility.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "fact", rename_all = "snake_case")]
pub enum Fact {
    /// A node must take one of its usable providers.
    Node {
        /// The node.
        node: NodeId,
        /// Its usable providers, each with the profiles it accepts on the resources it shares
        /// with other nodes of the core.
        providers: Vec<ProviderProfiles>,
        /// Providers dropped before selection, with the reason.
        dropped: Vec<String>,
    },
    /// `--pin NODE=PROVIDER`.
    Pin {
        /// The node.
        node: NodeId,
        /// The provider.
        provider: ProviderId,
    },
    /// `--forbid NODE=PROVIDER`.
    Forbid {
        /// The node.
        node: NodeId,
        /// The provider.
        provider: ProviderId,
    },
    /// The usable capacity against what the plan needs.
    Capacity {
        /// Usable capacity (policy capacity − reserve).
        usable_bytes: u64,
        /// What the plan needs (static + minimum runnable dynamic, or static alone).
        required_bytes: u128,
        /// What the failing check measured.
        check: String,
    },
    /// One of the largest allocations.
    Allocation {
        /// The resource.
        resource: String,
        /// Static or dynamic, and what it holds.
        what: String,
        /// Its bytes.
        bytes: u64,
    },
    /// A policy field that sizes the allocations.
    PolicyField {
        /// The field of `policy`.
        field: String,
        /// Its value in the request.
        value: u64,
    },
    /// Another limit the plan breaks (wire limits), as the planner reports it.
    Limit {
        /// The planner's message.
        message: String,
    },
}

/// A provider with the profiles it accepts on the core's shared resources.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProviderProfiles {
    /// The provider.
    pub provider: String,
    /// Shared resource → accepted profiles.
    pub accepts: BTreeMap<String, Vec<String>>,
}

/// How far one numeric policy field must move, alone, for the request to build.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Relaxation {
    /// The field (`policy.maximum_active_sequences`, …), or the setting to drop.
    pub field: String,
    /// Its value in the request.
    pub from: u64,
    /// The nearest value that builds (for a setting: 0, dropped).
    pub to: u64,
    /// The change in the input's terms.
    pub text: String,
}

/// Why a request has no plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Infeasibility {
    /// Always `infeasible`.
    pub status: &'static str,
    /// `selection` or `capacity` (or `limit`).
    pub kind: &'static str,
    /// The planner's own error.
    pub error: String,
    /// The facts that together make the request infeasible.
    pub core: Vec<Fact>,
    /// How far each field involved must move to make it feasible.
    pub relaxations: Vec<Relaxation>,
    /// Fields whose relaxation was not searched because the search's time budget was spent
    /// (each probe of a capacity search is a whole build); empty when every field was.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unsearched: Vec<String>,
    /// What was answered without a search, and why (a static overflow).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// For a capacity failure whose capacity search built a plan: what the allocations
    /// hold at the policy's ceilings, for the levers that shrink each.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holdings: Option<Holdings>,
    /// For a capacity failure of a model folder's request: the smallest larger device of its
    /// device's directory on which the model builds and its worst case fits
    /// ([`explain_source_failure`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_device: Option<super::fit::DeviceFit>,
}

/// What a request's allocations hold at the policy's ceilings, read from the plan the
/// capacity search built at a larger capacity (the sizes do not depend on the capacity):
/// the serving report's items (`super::report`), the sequence state split into its states,
/// and the paged alternative of a contiguous KV cache (`super::kv_tradeoff`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Holdings {
    /// The capacity the plan was built at.
    pub at_capacity_bytes: u64,
    /// Static bytes holding weights.
    pub weights_bytes: u64,
    /// The policy's maximum active sequences.
    pub sequences: u32,
    /// The maximum context (tokens).
    pub context_tokens: u64,
    /// One sequence's KV cache and other sequence state at the maximum context, as the
    /// plan provisions it.
    pub sequence_state_bytes: u64,
    /// KV-cache bytes one token of context adds to one sequence.
    pub kv_bytes_per_token: u64,
    /// How many sequence-lifetime states (a KV cache per layer, recurrent state) one
    /// sequence holds.
    pub states: usize,
    /// The bytes of each, when every state takes the same.
    pub state_bytes_each: Option<u64>,
    /// Activation bytes at the ceilings.
    pub activation_bytes: u64,
    /// Workspace bytes at the ceilings.
    pub workspace_bytes: u64,
    /// A contiguous KV cache's paged alternative, when the request offers one.
    pub kv_tradeoff: Option<super::kv_tradeoff::KvTradeoff>,
}

impl Holdings {
    /// What the plan of `request` (built at `capacity`) holds; `None` when the report
    /// cannot be computed.
    pub fn of(request: &PlanRequest, plan: &ExecutionPlan, capacity: u64) -> Option<Holdings> {
        let (report, limits) = super::report::ServingReport::with_limits(request, plan).ok()?;
        let states: Vec<_> = plan
            .payload
            .memory
            .dynamic_descriptors
            .iter()
            .filter(|d| {
                d.lifetime == crate::plan::AllocationLifetime::Sequence
                    && d.usage == crate::request::BufferUsage::State
            })
            .collect();
        let alike = states.windows(2).all(|pair| {
            pair[0].demand == pair[1].demand
                && pair[0].storage.profile == pair[1].storage.profile
                && pair[0].alignment_bytes == pair[1].alignment_bytes
        });
        let count = u64::try_from(states.len()).ok()?;
        let state_bytes_each = (alike && count > 0 && report.kv_bytes_per_sequence % count == 0)
            .then(|| report.kv_bytes_per_sequence / count);
        Some(Holdings {
            at_capacity_bytes: capacity,
            weights_bytes: report.weights_bytes,
            sequences: limits.maximum_active_sequences,
            context_tokens: limits.context_tokens,
            sequence_state_bytes: report.kv_bytes_per_sequence,
            kv_bytes_per_token: report.kv_bytes_per_token,
            states: states.len(),
            state_bytes_each,
            activation_bytes: report.activation_bytes,
            workspace_bytes: report.workspace_bytes,
            kv_tradeoff: super::kv_tradeoff::kv_tradeoff(request, plan)
                .ok()
                .flatten(),
        })
    }
}

/// [`explain_failure`] for the request of a model folder (`source` under its policy with
/// `fields` set, synthesized for `device_file`): a capacity failure also gets the next device
/// of the device's directory ([`super::fit::next_device`]), the smallest larger one on which
/// the model builds and its worst case fits. That search cannot fail the answer: when it
/// cannot run, a note says why.
pub fn explain_source_failure(
    source: &crate::synth::ModelSource,
    fields: &super::sweep::PolicyFields,
    device_file: &std::path::Path,
    request: &PlanRequest,
    options: &BuildOptions,
    error: &PlanError,
) -> Result<Option<Infeasibility>, ResearchError> {
    let Some(mut answer) = explain_failure(request, options, error)? else {
        return Ok(None);
    };
    if answer.kind == "capacity" {
        let needed = answer
            .relaxations
            .iter()
            .find(|r| r.field == "policy.memory_capacity_bytes")
            .map(|r| r.to);
        match super::fit::next_device(source, fields, device_file, needed, options) {
            Ok(next) => answer.next_device = next,
            Err(e) => answer.notes.push(format!(
                "the larger devices of {} could not be tried: {e}",
                device_file.parent().unwrap_or(device_file).display()
            )),
        }
    }
    Ok(Some(answer))
}

/// Builds `request` under `options`; if it has no plan, says why. `Ok(None)`: it builds.
/// A failure that is not infeasibility (bad input, a rejected plan) is returned as an error.
pub fn analyze(
    request: &PlanRequest,
    options: &BuildOptions,
) -> Result<Option<Infeasibility>, ResearchError> {
    match ExecutionPlan::build(request, options) {
        Ok(_) => Ok(None),
        Err(e) if e.kind() == crate::error_kind::ErrorKind::Infeasible => {
            match explain_failure(request, options, &e)? {
                Some(reason) => Ok(Some(reason)),
                None => Err(e.into()),
            }
        }
        Err(e) => Err(e.into()),
    }
}

/// Says why `request` has no plan, given the infeasibility `error` its build under `options`
/// returned (what [`analyze`] does after building). `None` for an error that is not
/// infeasibility (a plan that could not be proved optimal, bad input).
pub fn explain_failure(
    request: &PlanRequest,
    options: &BuildOptions,
    error: &PlanError,
) -> Result<Option<Infeasibility>, ResearchError> {
    if error.kind() != crate::error_kind::ErrorKind::Infeasible {
        return Ok(None);
    }
    match error {
        PlanError::Candidates(
            CandidateError::NoStorageCandidate { .. }
            | CandidateError::Selection { .. }
            | CandidateError::SettingLeavesNoCandidate { .. },
        ) => selection_infeasibility(request, options, error),
        PlanError::Memory(
            MemoryError::CapacityExceeded { .. }
            | MemoryError::StaticExceedsUsable { .. }
            | MemoryError::PoolExceedsDynamicCapacity { .. },
        ) => super::capacity::capacity_infeasibility(request, options, error),
        PlanError::Candidates(CandidateError::Uncertified { .. }) => Ok(None),
        _ => Ok(Some(Infeasibility {
            unsearched: Vec::new(),
            notes: Vec::new(),
            holdings: None,
            next_device: None,
            status: "infeasible",
            kind: "limit",
            error: error.to_string(),
            core: vec![Fact::Limit {
                message: error.to_string(),
            }],
            relaxations: Vec::new(),
        })),
    }
}

/// The selection problem of the whole request (a node whose every candidate was dropped has
/// none), with each node's dropped candidates explained.
fn request_problem(
    request: &PlanRequest,
) -> Result<(SelectionProblem, Vec<Vec<String>>), ResearchError> {
    let resolutions: BTreeMap<&NodeId, _> = request
        .node_resolutions
        .iter()
        .map(|r| (&r.node_id, r))
        .collect();
    let mut nodes = Vec::new();
    let mut dropped = Vec::new();
    let located = request
        .family
        .program
        .blocks
        .iter()
        .enumerate()
        .flat_map(|(b, block)| {
            block
                .nodes
                .iter()
                .enumerate()
                .map(move |(n, node)| (b, n, node))
        });
    for (b, n, node) in located {
        let Some(resolution) = resolutions.get(&node.id) else {
            return Err(PlanError::MissingResolution {
                node: node.id.clone(),
                path: format!("family.program.blocks[{b}].nodes[{n}].id"),
            }
            .into());
        };
        match derive_node_candidates(&request.catalog, &request.policy, node, resolution) {
            Ok(derived) => {
                dropped.push(
                    derived
                        .dropped
                        .iter()
                        .map(|d| d.explain(&node.id))
                        .collect(),
                );
                let problem = selection_problem(&request.policy, std::slice::from_ref(&derived));
                nodes.extend(problem.nodes);
            }
            Err(CandidateError::NoStorageCandidate { explanations, .. }) => {
                dropped.push(explanations);
                nodes.push(SelectionNode {
                    id: node.id.to_string(),
                    preferred: resolution
                        .preferred_provider
                        .as_ref()
                        .map(ToString::to_string),
                    candidates: Vec::new(),
                });
            }
            Err(other) => return Err(PlanError::from(other).into()),
        }
    }
    let profiles = request
        .policy
        .dynamic_storage_profile_order
        .iter()
        .map(ToString::to_string)
        .collect();
    Ok((
        SelectionProblem {
            profiles,
            nodes,
            profile_time_ps: Default::default(),
        },
        dropped,
    ))
}

/// The nodes connected to node `start` through resources their candidates share.
fn component_of(problem: &SelectionProblem, start: usize) -> BTreeSet<usize> {
    let mut by_resource: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, node) in problem.nodes.iter().enumerate() {
        let touched: BTreeSet<&str> = node
            .candidates
            .iter()
            .flat_map(|c| c.accepts.keys().map(String::as_str))
            .collect();
        for r in touched {
            by_resource.entry(r).or_default().push(i);
        }
    }
    let mut seen = BTreeSet::from([start]);
    let mut queue = vec![start];
    while let Some(i) = queue.pop() {
        for c in &problem.nodes[i].candidates {
            for r in c.accepts.keys() {
                for &j in by_resource.get(r.as_str()).into_iter().flatten() {
                    if seen.insert(j) {
                        queue.push(j);
                    }
                }
            }
        }
    }
    seen
}

fn selection_infeasibility(
    request: &PlanRequest,
    options: &BuildOptions,
    error: &PlanError,
) -> Result<Option<Infeasibility>, ResearchError> {
    let (problem, dropped) = request_problem(request)?;
    let index: BTreeMap<&str, usize> = problem
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.id.as_str(), i))
        .collect();
    let mut all = BTreeSet::new();
    for i in 0..problem.nodes.len() {
        all.insert(SelectionFact::Node(i));
    }
    for (node, provider) in &options.pins {
        if let Some(&i) = index.get(node.as_str()) {
            all.insert(SelectionFact::Pin(i, provider.to_string()));
        }
    }
    for (node, providers) in &options.forbids {
        if let Some(&i) = index.get(node.as_str()) {
            for p in providers {
                all.insert(SelectionFact::Forbid(i, p.to_string()));
            }
        }
    }
    // Start from the smallest obviously conflicting part: a node left without candidates,
    // else the component the solver names, else everything.
    let lonely = (0..problem.nodes.len()).find(|&i| {
        let single: BTreeSet<SelectionFact> =
            all.iter().filter(|f| f.node() == i).cloned().collect();
        !facts_feasible(&problem, &single).unwrap_or(true)
    });
    let start: BTreeSet<SelectionFact> = match lonely {
        Some(i) => all.iter().filter(|f| f.node() == i).cloned().collect(),
        None => {
            let component = first_infeasible_component(&problem, &all)?;
            match component {
                Some(nodes) => all
                    .iter()
                    .filter(|f| nodes.contains(&f.node()))
                    .cloned()
                    .collect(),
                None => all.clone(),
            }
        }
    };
    let Some(core) = minimal_conflict(&problem, &start)? else {
        return Err(ResearchError::PlanNotOfRequest {
            detail: format!("the build says it has no choice ({error}), but the solver finds one for its selection problem"),
        });
    };
    let core_nodes: BTreeSet<usize> = core.iter().map(SelectionFact::node).collect();
    // Resources touched by at least two core nodes: where the conflict lies.
    let mut touched: BTreeMap<&str, BTreeSet<usize>> = BTreeMap::new();
    for &i in &core_nodes {
        for c in &problem.nodes[i].candidates {
            for r in c.accepts.keys() {
                touched.entry(r.as_str()).or_default().insert(i);
            }
        }
    }
    let shared: BTreeSet<&str> = touched
        .into_iter()
        .filter(|(_, nodes)| nodes.len() > 1)
        .map(|(r, _)| r)
        .collect();
    let mut facts = Vec::new();
    let mut relaxations = Vec::new();
    for fact in &core {
        let i = fact.node();
        let node_id = node_id(&problem, i)?;
        match fact {
            SelectionFact::Node(_) => facts.push(Fact::Node {
                node: node_id,
                providers: problem.nodes[i]
                    .candidates
                    .iter()
                    .map(|c| ProviderProfiles {
                        provider: c.provider.clone(),
                        accepts: c
                            .accepts
                            .iter()
                            .filter(|(r, _)| shared.contains(r.as_str()))
                            .map(|(r, p)| (r.clone(), p.clone()))
                            .collect(),
                    })
                    .collect(),
                dropped: dropped[i].clone(),
            }),
            SelectionFact::Pin(_, p) | SelectionFact::Forbid(_, p) => {
                let provider = ProviderId::new(p.as_str())
                    .map_err(|detail| ResearchError::PlanNotOfRequest { detail })?;
                let flag = if matches!(fact, SelectionFact::Pin(..)) {
                    "pin"
                } else {
                    "forbid"
                };
                relaxations.push(Relaxation {
                    field: format!("--{flag} {node_id}={provider}"),
                    from: 1,
                    to: 0,
                    text: format!("drop --{flag} {node_id}={provider}"),
                });
                facts.push(if flag == "pin" {
                    Fact::Pin {
                        node: node_id,
                        provider,
                    }
                } else {
                    Fact::Forbid {
                        node: node_id,
                        provider,
                    }
                });
            }
        }
    }
    Ok(Some(Infeasibility {
        unsearched: Vec::new(),
        notes: Vec::new(),
        holdings: None,
        next_device: None,
        status: "infeasible",
        kind: "selection",
        error: error.to_string(),
        core: facts,
        relaxations,
    }))
}

fn node_id(problem: &SelectionProblem, i: usize) -> Result<NodeId, ResearchError> {
    NodeId::new(problem.nodes[i].id.as_str())
        .map_err(|detail| ResearchError::PlanNotOfRequest { detail })
}

/// The nodes of the first component (by shared resources) whose facts have no choice.
fn first_infeasible_component(
    problem: &SelectionProblem,
    all: &BTreeSet<SelectionFact>,
) -> Result<Option<BTreeSet<usize>>, ResearchError> {
    let mut done: BTreeSet<usize> = BTreeSet::new();
    for i in 0..problem.nodes.len() {
        if done.contains(&i) {
            continue;
        }
        let component = component_of(problem, i);
        done.extend(component.iter().copied());
        let facts: BTreeSet<SelectionFact> = all
            .iter()
            .filter(|f| component.contains(&f.node()))
            .cloned()
            .collect();
        if !facts_feasible(problem, &facts)? {
            return Ok(Some(component));
        }
    }
    Ok(None)
}
