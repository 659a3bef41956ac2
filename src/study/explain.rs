//! Why each provider of a node was chosen or rejected (`jointplan explain`, and
//! `jointplan.explain` in Python: both call this query and print its answer).
//!
//! For every node explained: the plan's selection record (requested, selected, reason, every
//! rejected provider with its typed evidence), the storage profile the plan chose for every
//! resource the node and its evidence name, what each resource is to the node, and, with the
//! request, what a provider rejected for storage accepts for the slots bound to the evidence
//! resources and the compatible providers the plan passed over ([`super::alternatives`]).
//! With the request, the answer also carries the contiguous-versus-paged KV trade-off
//! ([`super::kv_tradeoff`]) when a node explained chose the contiguous provider.
//!
//! A node is named by its id or by an id pattern as summaries print groups
//! (`node.layer.[0-31].attention`, [`crate::request::id_pattern`]); a name that selects no
//! node is answered with the closest ids.

use std::collections::BTreeMap;

use serde::Serialize;

use super::alternatives::{alternatives, Alternative};
use super::kv_tradeoff::{kv_tradeoff, KvTradeoff};
use super::ResearchError;
use crate::plan::{ExecutionPlan, PlanNode, ProviderSelection, RejectionReason};
use crate::request::id_pattern::IdPattern;
use crate::request::{
    ContractVersion, NodeId, OperationId, PlanRequest, ProviderId, ResourceId, StorageProfile,
    ValueRole, WorkspaceKind,
};

/// The answer of `explain`.
#[derive(Clone, Debug, Serialize)]
pub struct Explanation {
    /// The plan explained.
    pub plan_id: String,
    /// The contiguous-versus-paged KV trade-off, when the request was given and a node
    /// explained chose the contiguous provider of it.
    pub kv_tradeoff: Option<KvTradeoff>,
    /// The nodes explained, in plan order.
    pub nodes: Vec<NodeExplanation>,
}

/// Why one node's provider was chosen.
#[derive(Clone, Debug, Serialize)]
pub struct NodeExplanation {
    /// The node.
    pub node: NodeId,
    /// Its operation.
    pub operation: OperationId,
    /// The operation version the node requires.
    pub operation_version: ContractVersion,
    /// The plan's selection record: requested, selected, reason, rejected with evidence.
    pub selection: ProviderSelection,
    /// The profile the plan chose for every resource the node and its rejections' evidence
    /// name (a resource the plan does not plan is absent).
    pub profiles: BTreeMap<ResourceId, StorageProfile>,
    /// The resources of the selected provider, each with what it is to the node.
    pub resources: Vec<NodeResource>,
    /// With the request: for each provider rejected for storage, what it accepts for the
    /// slots bound to the evidence resources (empty without the request).
    pub accepts: Vec<StorageAcceptance>,
    /// With the request: the providers the request offers that the plan neither chose nor
    /// rejected with evidence; `None` without the request.
    pub alternatives: Option<Vec<Alternative>>,
}

/// One resource of the selected provider.
#[derive(Clone, Debug, Serialize)]
pub struct NodeResource {
    /// The resource.
    pub resource: ResourceId,
    /// The profile the plan chose for it (`None`: the plan does not plan it).
    pub profile: Option<StorageProfile>,
    /// What it is to the node: its workspace kind, or the bindings on it
    /// (`value as Input input 0`).
    pub role: String,
}

/// What a provider rejected for storage accepts, from the request's catalog.
#[derive(Clone, Debug, Serialize)]
pub struct StorageAcceptance {
    /// The rejected provider.
    pub provider: ProviderId,
    /// Whether the request's catalog has it for the node's operation (the slots are empty
    /// when it does not).
    pub in_catalog: bool,
    /// Each slot bound to an evidence resource, with the profiles the provider accepts
    /// there, by slot text (`value (input 0 on resource)`).
    pub slots: Vec<SlotAcceptance>,
}

/// The profiles one slot accepts.
#[derive(Clone, Debug, Serialize)]
pub struct SlotAcceptance {
    /// The slot: `value (role ordinal on resource)`.
    pub slot: String,
    /// The profiles the provider accepts there (empty: none).
    pub profiles: Vec<StorageProfile>,
}

/// The storage profile the plan gives every resource (static allocations and dynamic
/// descriptors).
pub fn resource_profiles(plan: &ExecutionPlan) -> BTreeMap<&ResourceId, StorageProfile> {
    let memory = &plan.payload.memory;
    memory
        .static_allocations
        .iter()
        .map(|a| (&a.resource_id, a.storage.profile))
        .chain(
            memory
                .dynamic_descriptors
                .iter()
                .map(|d| (&d.base_resource_id, d.storage.profile)),
        )
        .collect()
}

/// Explains the nodes of `plan` that `node` names (an id or an id pattern; every node when
/// `None`); with the plan's `request`, also what rejected providers accept, the providers
/// passed over and the KV trade-off.
pub fn explain(
    plan: &ExecutionPlan,
    request: Option<&PlanRequest>,
    node: Option<&str>,
) -> Result<Explanation, ResearchError> {
    let nodes: Vec<&PlanNode> = match node {
        None => plan.payload.nodes.iter().collect(),
        Some(name) => {
            let ids: Vec<&NodeId> = plan.payload.nodes.iter().map(|n| &n.id).collect();
            let chosen = select_nodes("--node", &ids, name)?;
            chosen.into_iter().map(|i| &plan.payload.nodes[i]).collect()
        }
    };
    let passed_over = match request {
        Some(request) => Some(alternatives(request, plan)?),
        None => None,
    };
    let tradeoff = match request {
        Some(request) => kv_tradeoff(request, plan)?.filter(|t| {
            nodes
                .iter()
                .any(|n| n.selection.selected_provider == t.contiguous_provider)
        }),
        None => None,
    };
    let profiles = resource_profiles(plan);
    let lookup = |r: &ResourceId| profiles.get(r).copied();
    Ok(Explanation {
        plan_id: plan.payload.plan_id.clone(),
        kv_tradeoff: tradeoff,
        nodes: nodes
            .into_iter()
            .map(|n| {
                let listed = passed_over
                    .as_ref()
                    .map(|map| map.get(&n.id).cloned().unwrap_or_default());
                explain_node(n, &lookup, request, listed)
            })
            .collect(),
    })
}

/// Explains one node of a stored plan read alone (`crate::verify::read_node_view`): what
/// [`explain`] answers for it without the request.
pub fn explain_stored_node(
    view: &crate::verify::PlanNodeView,
    id: &str,
) -> Result<Explanation, ResearchError> {
    let Some(node) = &view.node else {
        let ids: Vec<&NodeId> = view.node_ids.iter().collect();
        return Err(no_such_node("--node", &ids, id));
    };
    let lookup = |r: &ResourceId| view.profiles.get(r).copied();
    Ok(Explanation {
        plan_id: view.plan_id.clone(),
        kv_tradeoff: None,
        nodes: vec![explain_node(node, &lookup, None, None)],
    })
}

/// The positions of the ids `name` selects: the id itself, or every id an id pattern
/// matches; an error names the closest ids when there is none.
pub fn select_nodes(
    flag: &'static str,
    ids: &[&NodeId],
    name: &str,
) -> Result<Vec<usize>, ResearchError> {
    let chosen: Vec<usize> = if IdPattern::is_pattern(name) {
        let pattern =
            IdPattern::parse(name).map_err(|error| ResearchError::BadPattern { flag, error })?;
        (0..ids.len())
            .filter(|&i| pattern.matches(ids[i].as_str()))
            .collect()
    } else {
        ids.iter()
            .position(|id| id.as_str() == name)
            .into_iter()
            .collect()
    };
    if chosen.is_empty() {
        return Err(no_such_node(flag, ids, name));
    }
    Ok(chosen)
}

/// The error of a name that selects no node, with the closest ids: those sharing the
/// longest prefix with it (at most eight).
fn no_such_node(flag: &'static str, ids: &[&NodeId], name: &str) -> ResearchError {
    const SHOWN: usize = 8;
    let common = |other: &str| {
        name.bytes()
            .zip(other.bytes())
            .take_while(|(a, b)| a == b)
            .count()
    };
    let best = ids
        .iter()
        .map(|other| common(other.as_str()))
        .max()
        .unwrap_or(0);
    let closest = ids
        .iter()
        .filter(|other| common(other.as_str()) == best)
        .take(SHOWN)
        .map(|id| id.to_string())
        .collect();
    ResearchError::NoSuchNode {
        flag,
        node: name.to_owned(),
        nodes: ids.len(),
        closest,
    }
}

fn explain_node(
    node: &PlanNode,
    lookup: &dyn Fn(&ResourceId) -> Option<StorageProfile>,
    request: Option<&PlanRequest>,
    alternatives: Option<Vec<Alternative>>,
) -> NodeExplanation {
    let evidence = node
        .selection
        .rejected_providers
        .iter()
        .filter_map(|r| match &r.reasons {
            RejectionReason::StorageIncompatible { resource_ids } => Some(resource_ids.iter()),
            _ => None,
        })
        .flatten();
    let profiles = node
        .resources
        .iter()
        .chain(evidence)
        .filter_map(|r| Some((r.clone(), lookup(r)?)))
        .collect();
    let accepts = match request {
        Some(request) => node
            .selection
            .rejected_providers
            .iter()
            .filter_map(|rejected| match &rejected.reasons {
                RejectionReason::StorageIncompatible { resource_ids } => Some(acceptance(
                    request,
                    node,
                    &rejected.provider_id,
                    resource_ids,
                )),
                _ => None,
            })
            .collect(),
        None => Vec::new(),
    };
    NodeExplanation {
        node: node.id.clone(),
        operation: node.operation_id.clone(),
        operation_version: node.operation_version,
        selection: node.selection.clone(),
        profiles,
        resources: node
            .resources
            .iter()
            .map(|r| NodeResource {
                resource: r.clone(),
                profile: lookup(r),
                role: resource_role(node, r),
            })
            .collect(),
        accepts,
        alternatives,
    }
}

/// What a resource is to the node: the bindings on it, or the workspace it is.
fn resource_role(node: &PlanNode, resource: &ResourceId) -> String {
    for kind in WorkspaceKind::ALL {
        let id = match kind {
            WorkspaceKind::Scratch => &node.scratch_resource,
            WorkspaceKind::Binding => &node.binding_resource,
            WorkspaceKind::Persistent => &node.persistent_resource,
        };
        if id.as_ref() == Some(resource) {
            return format!("{} workspace", kind.name());
        }
    }
    let uses: Vec<String> = node
        .values
        .iter()
        .filter(|b| {
            b.storage
                .components
                .iter()
                .any(|c| &c.resource_id == resource)
        })
        .map(|b| {
            format!(
                "{} as {:?} {} {}",
                b.value_id,
                b.usage,
                role_name(b.role),
                b.ordinal
            )
        })
        .collect();
    uses.join("; ")
}

fn role_name(role: ValueRole) -> &'static str {
    match role {
        ValueRole::Input => "input",
        ValueRole::Output => "output",
    }
}

/// For a storage rejection: what the rejected provider accepts for each slot bound to an
/// evidence resource, from the request's catalog.
fn acceptance(
    request: &PlanRequest,
    node: &PlanNode,
    provider: &ProviderId,
    resources: &[ResourceId],
) -> StorageAcceptance {
    let Some(descriptor) = request.catalog.provider(&node.operation_id, provider) else {
        return StorageAcceptance {
            provider: provider.clone(),
            in_catalog: false,
            slots: Vec::new(),
        };
    };
    let mut accepted: BTreeMap<String, Vec<StorageProfile>> = BTreeMap::new();
    for binding in &node.values {
        for component in &binding.storage.components {
            if resources.contains(&component.resource_id) {
                let slot = format!(
                    "{} ({} {} on {})",
                    binding.value_id,
                    role_name(binding.role),
                    binding.ordinal,
                    component.resource_id
                );
                let profiles = descriptor
                    .storage_for(binding.role, binding.ordinal)
                    .map(|r| r.accepted_profiles.clone())
                    .unwrap_or_default();
                accepted.insert(slot, profiles);
            }
        }
    }
    StorageAcceptance {
        provider: provider.clone(),
        in_catalog: true,
        slots: accepted
            .into_iter()
            .map(|(slot, profiles)| SlotAcceptance { slot, profiles })
            .collect(),
    }
}
