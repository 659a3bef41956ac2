//! The keys every selection objective is made of, read back from a plan: which nodes met
//! their preference (in node order), how many selected resources use each storage profile
//! (the penalty, by rank when the policy order is known), and the chosen provider ids in node
//! order (the final tie-break). The resources counted are the ones the selection profiles:
//! every non-weight binding's resources and every workspace resource of every node.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::plan::ExecutionPlan;
use crate::request::{BufferUsage, NodeId, ProviderId, ResourceId, RuntimePolicy};

/// The objective keys of one plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ObjectiveKeys {
    /// The objective the plan was built with (`seed-lex` unless the plan records another).
    pub objective: String,
    /// Nodes with a preferred provider.
    pub preferences: usize,
    /// Nodes whose preferred provider was chosen.
    pub preferred_met: usize,
    /// Nodes whose preferred provider was not chosen, in node order.
    pub preferred_missed: Vec<NodeId>,
    /// Selected resources per storage profile (by name).
    pub resources_by_profile: BTreeMap<String, u64>,
    /// Selected resources per profile rank of the policy order (index = rank), when the
    /// policy is known; empty otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub penalty_by_rank: Vec<u64>,
    /// The chosen provider of every node, in node order (the tie-break key).
    #[serde(skip)]
    pub providers: Vec<(NodeId, ProviderId)>,
    /// Per node in node order: whether its preference is met (false without one).
    #[serde(skip)]
    pub preferred_flags: Vec<bool>,
}

/// The resources the selection gives a profile: non-weight binding resources and
/// workspaces, over every node.
pub fn selected_resources(plan: &ExecutionPlan) -> BTreeSet<&ResourceId> {
    let mut resources = BTreeSet::new();
    for node in &plan.payload.nodes {
        for binding in node
            .values
            .iter()
            .filter(|b| b.usage != BufferUsage::Weights)
        {
            resources.extend(binding.storage.components.iter().map(|c| &c.resource_id));
        }
        resources.extend(node.scratch_resource.iter());
        resources.extend(node.binding_resource.iter());
        resources.extend(node.persistent_resource.iter());
    }
    resources
}

/// Every resource of the plan with its storage profile (static and dynamic rows).
pub fn resource_profiles(plan: &ExecutionPlan) -> BTreeMap<&ResourceId, String> {
    let memory = &plan.payload.memory;
    memory
        .static_allocations
        .iter()
        .map(|a| (&a.resource_id, a.storage.profile.to_string()))
        .chain(
            memory
                .dynamic_descriptors
                .iter()
                .map(|d| (&d.base_resource_id, d.storage.profile.to_string())),
        )
        .collect()
}

/// The objective keys of `plan`; with `policy`, the penalty also by rank.
pub fn objective_keys(plan: &ExecutionPlan, policy: Option<&RuntimePolicy>) -> ObjectiveKeys {
    let profiles = resource_profiles(plan);
    let mut resources_by_profile: BTreeMap<String, u64> = BTreeMap::new();
    for resource in selected_resources(plan) {
        if let Some(profile) = profiles.get(resource) {
            *resources_by_profile.entry(profile.clone()).or_default() += 1;
        }
    }
    let penalty_by_rank = policy.map_or_else(Vec::new, |policy| {
        policy
            .dynamic_storage_profile_order
            .iter()
            .map(|p| {
                resources_by_profile
                    .get(&p.to_string())
                    .copied()
                    .unwrap_or(0)
            })
            .collect()
    });
    let nodes = &plan.payload.nodes;
    let preferred_flags: Vec<bool> = nodes
        .iter()
        .map(|n| n.selection.requested_provider.as_ref() == Some(&n.selection.selected_provider))
        .collect();
    ObjectiveKeys {
        objective: plan.payload.selection_settings.objective_name().to_owned(),
        preferences: nodes
            .iter()
            .filter(|n| n.selection.requested_provider.is_some())
            .count(),
        preferred_met: preferred_flags.iter().filter(|&&met| met).count(),
        preferred_missed: nodes
            .iter()
            .zip(&preferred_flags)
            .filter(|(n, met)| n.selection.requested_provider.is_some() && !**met)
            .map(|(n, _)| n.id.clone())
            .collect(),
        resources_by_profile,
        penalty_by_rank,
        providers: nodes
            .iter()
            .map(|n| (n.id.clone(), n.selection.selected_provider.clone()))
            .collect(),
        preferred_flags,
    }
}
