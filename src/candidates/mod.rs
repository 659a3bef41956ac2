//! Candidate derivation (rules 3.1): which providers can serve each node under the
//! policy's storage profiles; the conversion to the solver's [`SelectionProblem`]; the
//! mapping of its [`Solution`] back to plan terms; and the storage rejection evidence of 3.5.

mod error;
mod evidence;
mod settings;

use std::collections::{BTreeMap, BTreeSet};

use rayon::prelude::*;

use crate::node::NodeError;
use crate::plan::RejectedProvider;
use crate::request::fingerprints::workspace_base_id;
use crate::request::{
    BufferUsage, CapabilityCatalog, IdMap, IdSet, NodeId, NodeResolution, ProgramNode,
    ProgramValueId, ProviderId, ProviderResourcePlan, ResourceId, RuntimePolicy, StorageProfile,
    StorageRequirement, ValueRole, WorkspaceKind,
};
use crate::selection::{
    self, Candidate, ComponentReport, SelectionNode, SelectionProblem, SolveOptions, Status,
};
pub use error::{CandidateError, SettingFlag};

pub use evidence::storage_rejection_evidence;
pub use settings::apply_settings;

/// The binding slot or workspace whose storage requirement constrains a resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StorageSlot {
    /// A value binding.
    Binding {
        /// The value.
        value: ProgramValueId,
        /// Its role.
        role: ValueRole,
        /// Its ordinal.
        ordinal: u32,
    },
    /// A provider workspace.
    Workspace(WorkspaceKind),
}

impl std::fmt::Display for StorageSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StorageSlot::Binding {
                value,
                role,
                ordinal,
            } => {
                let role = match role {
                    ValueRole::Input => "input",
                    ValueRole::Output => "output",
                };
                write!(f, "{role} {ordinal} (value {value})")
            }
            StorageSlot::Workspace(kind) => write!(f, "its {} workspace", kind.name()),
        }
    }
}

/// Why a provider candidate was dropped before selection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// The provider declares no storage for a binding slot.
    NoStorageRequirement {
        /// The slot.
        slot: StorageSlot,
    },
    /// The slot's requirement shares no profile with the policy order and the device.
    NoAvailableProfile {
        /// The slot.
        slot: StorageSlot,
        /// The resource.
        resource: ResourceId,
        /// What the provider accepts there.
        accepted: Vec<StorageProfile>,
        /// What the policy order offers on this device.
        offered: Vec<StorageProfile>,
    },
    /// Two slots of the provider on one resource accept disjoint profiles.
    EmptyIntersection {
        /// The slot.
        slot: StorageSlot,
        /// The resource.
        resource: ResourceId,
        /// What this slot allows.
        available: BTreeSet<StorageProfile>,
        /// What the provider's earlier slots on the resource allow.
        earlier: BTreeSet<StorageProfile>,
    },
}

/// A dropped candidate with its reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DroppedCandidate {
    /// The provider.
    pub provider: ProviderId,
    /// Why it was dropped.
    pub reason: DropReason,
}

fn profile_list<'p>(profiles: impl IntoIterator<Item = &'p StorageProfile>) -> String {
    let names: Vec<String> = profiles.into_iter().map(ToString::to_string).collect();
    if names.is_empty() {
        "nothing".to_owned()
    } else {
        names.join(", ")
    }
}

impl DroppedCandidate {
    /// The reason in the request's terms, pubgrub style.
    pub fn explain(&self, node: &NodeId) -> String {
        let provider = &self.provider;
        match &self.reason {
            DropReason::NoStorageRequirement { slot } => format!(
                "provider {provider} declares no storage for {slot} of node {node}, so it cannot bind that slot"
            ),
            DropReason::NoAvailableProfile {
                slot,
                resource,
                accepted,
                offered,
            } => format!(
                "provider {provider} needs {} storage for {slot} of node {node}, resource {resource}, but the policy order offers only {} on this device",
                profile_list(accepted),
                profile_list(offered)
            ),
            DropReason::EmptyIntersection {
                slot,
                resource,
                available,
                earlier,
            } => format!(
                "provider {provider} allows {} for {slot} of node {node} on resource {resource}, but its other slots on that resource allow only {}",
                profile_list(available),
                profile_list(earlier)
            ),
        }
    }
}

/// A surviving candidate: the provider's estimate and the profiles it allows per resource.
#[derive(Clone, Debug)]
pub struct ProviderCandidate<'a> {
    /// The provider's resource plan.
    pub plan: &'a ProviderResourcePlan,
    /// Resource → allowed profiles (never empty).
    pub allowed: BTreeMap<ResourceId, BTreeSet<StorageProfile>>,
    /// Whether this is the node's preferred provider.
    pub is_preferred: bool,
}

/// Every candidate of one node.
#[derive(Clone, Debug)]
pub struct NodeCandidates<'a> {
    /// The node.
    pub node: &'a NodeId,
    /// Its resolution.
    pub resolution: &'a NodeResolution,
    /// Survivors: preferred first, then provider id.
    pub candidates: Vec<ProviderCandidate<'a>>,
    /// Dropped candidates, in provider id order.
    pub dropped: Vec<DroppedCandidate>,
}

/// The available profiles of a requirement: the policy order filtered to profiles the device
/// offers and the requirement accepts, as a set.
fn available_profiles(
    policy: &RuntimePolicy,
    catalog: &CapabilityCatalog,
    requirement: &StorageRequirement,
) -> BTreeSet<StorageProfile> {
    policy
        .dynamic_storage_profile_order
        .iter()
        .filter(|p| catalog.device.dynamic_storage_profiles.contains(p) && requirement.accepts(p))
        .copied()
        .collect()
}

fn offered_profiles(policy: &RuntimePolicy, catalog: &CapabilityCatalog) -> Vec<StorageProfile> {
    policy
        .dynamic_storage_profile_order
        .iter()
        .filter(|p| catalog.device.dynamic_storage_profiles.contains(p))
        .copied()
        .collect()
}

/// Merges one slot's available profiles into a candidate's constraint map.
fn merge(
    allowed: &mut BTreeMap<ResourceId, BTreeSet<StorageProfile>>,
    slot: &StorageSlot,
    resource: &ResourceId,
    available: &BTreeSet<StorageProfile>,
    requirement: &StorageRequirement,
    offered: &[StorageProfile],
) -> Result<(), DropReason> {
    if available.is_empty() {
        return Err(DropReason::NoAvailableProfile {
            slot: slot.clone(),
            resource: resource.clone(),
            accepted: requirement.accepted_profiles.clone(),
            offered: offered.to_vec(),
        });
    }
    match allowed.get_mut(resource) {
        None => {
            allowed.insert(resource.clone(), available.clone());
        }
        Some(earlier) => {
            let both: BTreeSet<StorageProfile> = earlier.intersection(available).copied().collect();
            if both.is_empty() {
                return Err(DropReason::EmptyIntersection {
                    slot: slot.clone(),
                    resource: resource.clone(),
                    available: available.clone(),
                    earlier: earlier.clone(),
                });
            }
            *earlier = both;
        }
    }
    Ok(())
}

/// Derives the candidates of one node (rules 3.1), each candidate's shape checked in full
/// (`validate_shape`, its estimate fingerprint recomputed).
pub fn derive_node_candidates<'a>(
    catalog: &CapabilityCatalog,
    policy: &RuntimePolicy,
    node: &'a ProgramNode,
    resolution: &'a NodeResolution,
) -> Result<NodeCandidates<'a>, CandidateError> {
    derive_checked(
        catalog,
        policy,
        node,
        resolution,
        crate::node::estimate::validate_shape,
    )
}

/// Derives the candidates of one node, each candidate's shape checked by `shape`.
fn derive_checked<'a>(
    catalog: &CapabilityCatalog,
    policy: &RuntimePolicy,
    node: &'a ProgramNode,
    resolution: &'a NodeResolution,
    shape: fn(&ProviderResourcePlan) -> Result<(), String>,
) -> Result<NodeCandidates<'a>, CandidateError> {
    if !catalog.operations.contains_key(&node.operation_id) {
        return Err(NodeError::UnknownOperation {
            node: node.id.clone(),
            operation: node.operation_id.clone(),
        }
        .into());
    }
    let offered = offered_profiles(policy, catalog);
    let mut candidates = Vec::new();
    let mut dropped = Vec::new();
    for plan in &resolution.provider_resource_candidates {
        let Some(provider) = catalog.provider(&node.operation_id, &plan.provider_id) else {
            return Err(CandidateError::CandidateProviderNotInCatalog {
                node: node.id.clone(),
                provider: plan.provider_id.clone(),
                operation: node.operation_id.clone(),
            });
        };
        shape(plan).map_err(|detail| NodeError::EstimateShape {
            node: node.id.clone(),
            provider: plan.provider_id.clone(),
            detail,
        })?;
        let mut allowed = BTreeMap::new();
        let mut outcome = Ok(());
        for binding in resolution
            .values
            .iter()
            .filter(|b| b.usage != BufferUsage::Weights)
        {
            let slot = StorageSlot::Binding {
                value: binding.value_id.clone(),
                role: binding.role,
                ordinal: binding.ordinal,
            };
            let Some(requirement) = provider.storage_for(binding.role, binding.ordinal) else {
                outcome = Err(DropReason::NoStorageRequirement { slot });
                break;
            };
            let available = available_profiles(policy, catalog, requirement);
            outcome = binding.storage.components.iter().try_for_each(|c| {
                merge(
                    &mut allowed,
                    &slot,
                    &c.resource_id,
                    &available,
                    requirement,
                    &offered,
                )
            });
            if outcome.is_err() {
                break;
            }
        }
        if outcome.is_ok() {
            for kind in WorkspaceKind::ALL {
                let Some(workspace) = plan.workspace(kind) else {
                    continue;
                };
                let resource = workspace_base_id(kind, &node.id, &plan.estimate_fingerprint);
                let available = available_profiles(policy, catalog, &workspace.storage);
                outcome = merge(
                    &mut allowed,
                    &StorageSlot::Workspace(kind),
                    &resource,
                    &available,
                    &workspace.storage,
                    &offered,
                );
                if outcome.is_err() {
                    break;
                }
            }
        }
        match outcome {
            Ok(()) => candidates.push(ProviderCandidate {
                plan,
                allowed,
                is_preferred: resolution.preferred_provider.as_ref() == Some(&plan.provider_id),
            }),
            Err(reason) => dropped.push(DroppedCandidate {
                provider: plan.provider_id.clone(),
                reason,
            }),
        }
    }
    candidates.sort_by(|a, b| {
        b.is_preferred
            .cmp(&a.is_preferred)
            .then_with(|| a.plan.provider_id.cmp(&b.plan.provider_id))
    });
    if candidates.is_empty() {
        return Err(CandidateError::NoStorageCandidate {
            node: node.id.clone(),
            explanations: dropped.iter().map(|d| d.explain(&node.id)).collect(),
        });
    }
    Ok(NodeCandidates {
        node: &node.id,
        resolution,
        candidates,
        dropped,
    })
}

/// Derives the candidates of every node of a request that passed `validate_request`, in
/// execution order (parallel; the output order is the input order, and the first failing
/// node in that order is reported). The request validation recomputed every candidate's
/// estimate fingerprint, so each candidate's shape is checked here without it
/// (`validate_fields`: one canonical hash per candidate less).
pub fn derive_candidates<'a>(
    catalog: &CapabilityCatalog,
    policy: &RuntimePolicy,
    nodes: &[(&'a ProgramNode, &'a NodeResolution)],
) -> Result<Vec<NodeCandidates<'a>>, CandidateError> {
    let results: Vec<Result<NodeCandidates<'a>, CandidateError>> = nodes
        .par_iter()
        .map(|(node, resolution)| {
            derive_checked(
                catalog,
                policy,
                node,
                resolution,
                crate::node::estimate::validate_fields,
            )
        })
        .collect();
    results.into_iter().collect()
}

/// The solver's problem: profiles named by `Display` in policy rank order, nodes in
/// execution order, resources by id.
pub fn selection_problem(policy: &RuntimePolicy, nodes: &[NodeCandidates<'_>]) -> SelectionProblem {
    SelectionProblem {
        profiles: policy
            .dynamic_storage_profile_order
            .iter()
            .map(ToString::to_string)
            .collect(),
        nodes: nodes
            .iter()
            .map(|n| SelectionNode {
                id: n.node.to_string(),
                preferred: n
                    .resolution
                    .preferred_provider
                    .as_ref()
                    .map(ToString::to_string),
                candidates: n
                    .candidates
                    .iter()
                    .map(|c| Candidate {
                        provider: c.plan.provider_id.to_string(),
                        accepts: c
                            .allowed
                            .iter()
                            .map(|(r, set)| {
                                (r.to_string(), set.iter().map(ToString::to_string).collect())
                            })
                            .collect(),
                        time_ps: None,
                    })
                    .collect(),
            })
            .collect(),
        profile_time_ps: Default::default(),
    }
}

/// The outcome of joint selection in plan terms.
#[derive(Clone, Debug)]
pub struct JointSelection<'a> {
    /// Per node (execution order): the chosen candidate.
    pub chosen: Vec<&'a ProviderCandidate<'a>>,
    /// Resource → selected profile, for every resource of a chosen candidate.
    pub profiles: BTreeMap<ResourceId, StorageProfile>,
    /// Storage rejection evidence per node (3.5).
    pub storage_rejections: BTreeMap<NodeId, RejectedProvider>,
    /// The solver's per-component reports.
    pub components: Vec<ComponentReport>,
    /// The first node of every component not proved optimal, sorted.
    pub uncertified_components: Vec<NodeId>,
}

/// Maps the solver's choices and profiles back to candidates and storage profiles, checking
/// that every node is assigned exactly once to one of its own candidates and that every
/// resource of the chosen candidates has exactly one profile they all allow.
pub fn map_solution<'a>(
    policy: &RuntimePolicy,
    nodes: &'a [NodeCandidates<'a>],
    choices: &BTreeMap<String, String>,
    profiles: &BTreeMap<String, String>,
) -> Result<
    (
        Vec<&'a ProviderCandidate<'a>>,
        BTreeMap<ResourceId, StorageProfile>,
    ),
    CandidateError,
> {
    let by_name: BTreeMap<String, StorageProfile> = policy
        .dynamic_storage_profile_order
        .iter()
        .map(|p| (p.to_string(), *p))
        .collect();
    let known: IdSet<&str> = nodes.iter().map(|n| n.node.as_str()).collect();
    if let Some(extra) = choices.keys().find(|k| !known.contains(k.as_str())) {
        return Err(CandidateError::SolverBadAssignment {
            node: extra.clone(),
            detail: "the node is not in the program".to_owned(),
        });
    }
    let mut chosen = Vec::with_capacity(nodes.len());
    let mut selected: BTreeMap<ResourceId, StorageProfile> = BTreeMap::new();
    let mut needed: IdMap<&str, &ResourceId> = IdMap::default();
    for node in nodes {
        let Some(provider) = choices.get(node.node.as_str()) else {
            return Err(CandidateError::SolverOmittedNode {
                node: node.node.clone(),
            });
        };
        let Some(candidate) = node
            .candidates
            .iter()
            .find(|c| c.plan.provider_id.as_str() == provider)
        else {
            return Err(CandidateError::SolverBadAssignment {
                node: node.node.to_string(),
                detail: format!("provider {provider} is not one of its candidates"),
            });
        };
        needed.extend(candidate.allowed.keys().map(|r| (r.as_str(), r)));
        chosen.push(candidate);
    }
    for (resource, name) in profiles {
        let Some(id) = needed.get(resource.as_str()).copied() else {
            return Err(CandidateError::SolverBadProfile {
                resource: resource.clone(),
                detail: "no chosen candidate touches it".to_owned(),
            });
        };
        let Some(profile) = by_name.get(name) else {
            return Err(CandidateError::SolverBadProfile {
                resource: resource.clone(),
                detail: format!("profile {name} is not in the policy order"),
            });
        };
        if selected.insert(id.clone(), *profile).is_some() {
            return Err(CandidateError::SolverBadProfile {
                resource: resource.clone(),
                detail: "profiled twice".to_owned(),
            });
        }
    }
    for (candidate, node) in chosen.iter().zip(nodes) {
        for (resource, allowed) in &candidate.allowed {
            match selected.get(resource) {
                None => {
                    return Err(CandidateError::SolverBadProfile {
                        resource: resource.to_string(),
                        detail: "no profile was selected".to_owned(),
                    })
                }
                Some(p) if !allowed.contains(p) => {
                    return Err(CandidateError::SolverBadProfile {
                        resource: resource.to_string(),
                        detail: format!(
                            "profile {p} is not allowed by provider {} of node {}",
                            candidate.plan.provider_id, node.node
                        ),
                    })
                }
                Some(_) => {}
            }
        }
    }
    Ok((chosen, selected))
}

/// Time costs of each node's candidate providers (node → provider → costs), for the
/// selection's time objectives.
pub type TimeTable = BTreeMap<NodeId, BTreeMap<ProviderId, crate::selection::TimeCosts>>;

/// Runs joint selection over derived candidates: builds the problem, solves it, maps the
/// solution back and derives the storage rejection evidence.
///
/// With `allow_uncertified` false, a solution the solver could not prove optimal is an error.
/// The pins and forbids of `settings` restrict the candidates ([`apply_settings`]; `replay`
/// fixes every node it names); its objective only decides the evidence of a preferred
/// provider that lost (the solver's objective is `options.objective`).
pub fn select_jointly<'a>(
    policy: &RuntimePolicy,
    nodes: &'a [NodeCandidates<'a>],
    options: &SolveOptions,
    allow_uncertified: bool,
    settings: &crate::plan::SelectionSettings,
    replay: Option<&BTreeMap<NodeId, ProviderId>>,
    times: Option<&TimeTable>,
) -> Result<JointSelection<'a>, CandidateError> {
    let mut problem = selection_problem(policy, nodes);
    if let Some(times) = times {
        let by_name: BTreeMap<&str, BTreeMap<&str, &crate::selection::TimeCosts>> = times
            .iter()
            .map(|(id, row)| {
                (
                    id.as_str(),
                    row.iter().map(|(p, t)| (p.as_str(), t)).collect(),
                )
            })
            .collect();
        for node in &mut problem.nodes {
            let row = by_name.get(node.id.as_str());
            for cand in &mut node.candidates {
                cand.time_ps = row
                    .and_then(|row| row.get(cand.provider.as_str()))
                    .map(|t| (*t).clone());
            }
        }
    }
    apply_settings(&mut problem, nodes, settings, replay)?;
    let solution = selection::solve(&problem, options).map_err(|e| CandidateError::Selection {
        infeasible: matches!(e, selection::SelectionError::Infeasible { .. }),
        detail: e.to_string(),
    })?;
    if solution.status != Status::Optimal && !allow_uncertified {
        let pending: Vec<String> = solution
            .components
            .iter()
            .filter(|c| c.status != Status::Optimal)
            .map(|c| {
                let gap = c
                    .gap
                    .map_or_else(|| "gap unknown".to_owned(), |g| format!("gap {g}"));
                format!(
                    "the component of node {} ({:?}, {gap}: {})",
                    c.first_node, c.status, c.certificate
                )
            })
            .collect();
        return Err(CandidateError::Uncertified {
            components: pending,
        });
    }
    let (chosen, profiles) = map_solution(policy, nodes, &solution.choices, &solution.profiles)?;
    let mut storage_rejections = BTreeMap::new();
    for (node, candidate) in nodes.iter().zip(&chosen) {
        if let Some(evidence) = storage_rejection_evidence(node, candidate, &profiles, settings)? {
            storage_rejections.insert(node.node.clone(), evidence);
        }
    }
    let by_name: BTreeMap<&str, &NodeId> =
        nodes.iter().map(|n| (n.node.as_str(), n.node)).collect();
    let mut uncertified_components: Vec<NodeId> = solution
        .components
        .iter()
        .filter(|c| c.status != Status::Optimal)
        .filter_map(|c| by_name.get(c.first_node.as_str()).map(|id| (*id).clone()))
        .collect();
    uncertified_components.sort();
    Ok(JointSelection {
        chosen,
        profiles,
        storage_rejections,
        components: solution.components,
        uncertified_components,
    })
}
