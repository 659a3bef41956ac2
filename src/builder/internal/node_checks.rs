//! Per-node internal checks (rules 6): the provider resource plan,
//! selection evidence, work contract, dependencies, state effects, resource closure and
//! the memory rows of every workspace.
//!
//! [`check_nodes`] runs every one of them (a stored plan, [`super::validate_internal`]),
//! those against the request's program from `program_facts`, which is all of them that the
//! builder's pass runs ([`super::validate_request_facts`]).

use std::collections::{BTreeMap, BTreeSet};

use crate::memory::bind_runtime_limits;
use crate::node::estimate::validate_shape;
use crate::plan::{
    AllocationKind, AllocationLifetime, DynamicResourceDescriptor, MemoryPlan, ResourceAllocation,
};
use crate::request::fingerprints::{workspace_base_id, workspace_layout_fingerprint};
use crate::request::{
    BufferUsage, ElementType, NodeId, PlanRequest, ProviderResourcePlan, ResourceId, TensorAccess,
    WorkspaceKind, WorkspaceRequirement, WorkspaceScope, WorkspaceSizeFormula,
};

use super::program_facts::{
    check_node_fingerprints, check_state_effects, check_work, state_effect_error, work_error,
    Program,
};
use super::InternalError;
use crate::plan::{
    NodeWorkContract, PlanNode, ProviderSelection, RejectionReason, SelectionReason,
};

/// Checks 9-14 for every node, in order.
pub(super) fn check_nodes(
    payload: &super::PayloadContent<'_>,
    request: &PlanRequest,
) -> Result<(), InternalError> {
    let program = Program::of(request);
    let statics: BTreeMap<&ResourceId, &ResourceAllocation> = payload
        .memory
        .static_allocations
        .iter()
        .map(|a| (&a.resource_id, a))
        .collect();
    let dynamics: BTreeMap<&ResourceId, &DynamicResourceDescriptor> = payload
        .memory
        .dynamic_descriptors
        .iter()
        .map(|d| (&d.base_resource_id, d))
        .collect();
    let rows = MemoryRows {
        memory: payload.memory,
        maximum_scheduled_tokens: payload.maximum_scheduled_tokens,
        statics,
        dynamics,
    };
    let mut earlier: BTreeSet<&NodeId> = BTreeSet::new();
    for (index, node) in payload.nodes.iter().enumerate() {
        if earlier.contains(&node.id) {
            return Err(InternalError::DuplicateNode {
                node: node.id.clone(),
            });
        }
        let program_node = program.node_at(index, node)?;
        check_provider_resources(node)?;
        check_selection(node)?;
        check_work(node, program_node)?;
        check_projections(node)?;
        check_node_fingerprints(node)?;
        check_dependencies(node, &earlier)?;
        check_resources(node, &rows)?;
        check_state_effects(node, &program.states)?;
        check_state_rows(node, &rows)?;
        check_workspaces(node, &rows)?;
        earlier.insert(&node.id);
    }
    program.check_count(payload.nodes)
}

struct MemoryRows<'a> {
    memory: &'a MemoryPlan,
    maximum_scheduled_tokens: u64,
    statics: BTreeMap<&'a ResourceId, &'a ResourceAllocation>,
    dynamics: BTreeMap<&'a ResourceId, &'a DynamicResourceDescriptor>,
}

/// Check 9 (first part): `validate_shape` of the selected estimate (the build's own rule,
/// `node::estimate::validate_shape`), and the estimate belongs to the selected provider.
fn check_provider_resources(node: &PlanNode) -> Result<(), InternalError> {
    let plan: &ProviderResourcePlan = &node.provider_resources;
    validate_shape(plan).map_err(|problem| InternalError::InvalidProviderResources {
        node: node.id.clone(),
        provider: plan.provider_id.clone(),
        problem,
    })?;
    if plan.provider_id != node.selection.selected_provider {
        return Err(InternalError::EstimateProviderMismatch {
            node: node.id.clone(),
            estimate_provider: plan.provider_id.clone(),
            selected: node.selection.selected_provider.clone(),
        });
    }
    Ok(())
}

fn reason_name(reason: SelectionReason) -> &'static str {
    match reason {
        SelectionReason::PreferredCompatible => "preferred_compatible",
        SelectionReason::CanonicalCompatible => "canonical_compatible",
        SelectionReason::FallbackFromPreferred => "fallback_from_preferred",
    }
}

/// Check 9: the selection evidence is canonical and the reason follows from it.
fn check_selection(node: &PlanNode) -> Result<(), InternalError> {
    let selection: &ProviderSelection = &node.selection;
    let evidence = |problem: String| InternalError::SelectionEvidence {
        node: node.id.clone(),
        problem,
    };
    if let Some(pair) = selection
        .rejected_providers
        .windows(2)
        .find(|w| w[0].provider_id >= w[1].provider_id)
    {
        return Err(evidence(format!(
            "rejected_providers are not strictly sorted by provider: {} follows {}",
            pair[1].provider_id, pair[0].provider_id
        )));
    }
    for rejected in &selection.rejected_providers {
        if rejected.provider_id == selection.selected_provider {
            return Err(evidence(format!(
                "the selected provider {} is also listed as rejected",
                rejected.provider_id
            )));
        }
        match &rejected.reasons {
            RejectionReason::StorageIncompatible { resource_ids } => {
                if resource_ids.is_empty() {
                    return Err(evidence(format!(
                        "storage rejection of {} names no resource",
                        rejected.provider_id
                    )));
                }
                if let Some(pair) = resource_ids.windows(2).find(|w| w[0] >= w[1]) {
                    return Err(evidence(format!(
                        "storage rejection of {} is not strictly sorted: {} follows {}",
                        rejected.provider_id, pair[1], pair[0]
                    )));
                }
            }
            RejectionReason::Incompatible(reasons) if reasons.is_empty() => {
                return Err(evidence(format!(
                    "incompatibility rejection of {} has no reason",
                    rejected.provider_id
                )));
            }
            _ => {}
        }
    }
    let expected = match &selection.requested_provider {
        None => SelectionReason::CanonicalCompatible,
        Some(requested) if requested == &selection.selected_provider => {
            SelectionReason::PreferredCompatible
        }
        Some(_) => SelectionReason::FallbackFromPreferred,
    };
    if selection.selection_reason != expected {
        return Err(InternalError::SelectionReasonMismatch {
            node: node.id.clone(),
            stored: reason_name(selection.selection_reason).to_owned(),
            expected: reason_name(expected).to_owned(),
            requested: selection
                .requested_provider
                .as_ref()
                .map_or_else(|| "none".to_owned(), ToString::to_string),
            selected: selection.selected_provider.clone(),
        });
    }
    if let (SelectionReason::FallbackFromPreferred, Some(requested)) =
        (expected, &selection.requested_provider)
    {
        if !selection
            .rejected_providers
            .iter()
            .any(|r| &r.provider_id == requested)
        {
            return Err(InternalError::FallbackWithoutEvidence {
                node: node.id.clone(),
                requested: requested.clone(),
                selected: selection.selected_provider.clone(),
            });
        }
    }
    Ok(())
}

/// Check 9 (the plan alone): a token contract's projections are canonical and each matches
/// an exact binding of the node.
fn check_projections(node: &PlanNode) -> Result<(), InternalError> {
    let work = |problem: String| work_error(node, problem);
    match &node.work {
        NodeWorkContract::Fixed => Ok(()),
        NodeWorkContract::Tokens {
            source,
            projections,
        } => {
            if projections.is_empty() {
                return Err(work("has no token projection".to_owned()));
            }
            if let Some(pair) = projections
                .windows(2)
                .find(|w| w[0] >= w[1] || (w[0].role, w[0].ordinal) == (w[1].role, w[1].ordinal))
            {
                return Err(work(format!(
                    "projections are not strictly sorted with unique slots: {} follows {}",
                    pair[1].value_id, pair[0].value_id
                )));
            }
            if !projections.contains(source) {
                return Err(work(format!(
                    "projections do not contain the source projection of {}",
                    source.value_id
                )));
            }
            for projection in projections {
                if projection.canonical_extent != source.canonical_extent {
                    return Err(work(format!(
                        "projection of {} has extent {}, the source {} has {}",
                        projection.value_id,
                        projection.canonical_extent,
                        source.value_id,
                        source.canonical_extent
                    )));
                }
                let binding = node.values.iter().find(|b| {
                    b.role == projection.role
                        && b.ordinal == projection.ordinal
                        && b.value_id == projection.value_id
                });
                let Some(binding) = binding else {
                    return Err(work(format!(
                        "projection of {} ({:?} {}) matches no binding",
                        projection.value_id, projection.role, projection.ordinal
                    )));
                };
                if binding.usage != BufferUsage::Activations {
                    return Err(work(format!(
                        "projected value {} is bound as {:?}, not activations",
                        projection.value_id, binding.usage
                    )));
                }
                let rank = binding.tensor.dimensions.len();
                if projection.rank as usize != rank {
                    return Err(work(format!(
                        "projection of {} has rank {}, the binding has rank {rank}",
                        projection.value_id, projection.rank
                    )));
                }
                match binding.tensor.dimensions.get(projection.axis as usize) {
                    Some(&extent) if extent == projection.canonical_extent => {}
                    Some(&extent) => {
                        return Err(work(format!(
                            "projection of {} has extent {} at axis {}, the binding has {extent}",
                            projection.value_id, projection.canonical_extent, projection.axis
                        )))
                    }
                    None => {
                        return Err(work(format!(
                            "projection of {} names axis {} beyond rank {rank}",
                            projection.value_id, projection.axis
                        )))
                    }
                }
            }
            Ok(())
        }
    }
}

/// Check 9: dependencies sorted, strict, not self, all earlier.
fn check_dependencies(node: &PlanNode, earlier: &BTreeSet<&NodeId>) -> Result<(), InternalError> {
    let problem = |text: String| InternalError::Dependency {
        node: node.id.clone(),
        problem: text,
    };
    if let Some(pair) = node.dependencies.windows(2).find(|w| w[0] >= w[1]) {
        return Err(problem(format!(
            "not strictly ascending: {} follows {}",
            pair[1], pair[0]
        )));
    }
    for dependency in &node.dependencies {
        if dependency == &node.id {
            return Err(problem("the node depends on itself".to_owned()));
        }
        if !earlier.contains(dependency) {
            return Err(problem(format!(
                "{dependency} is not an earlier node of the plan"
            )));
        }
    }
    Ok(())
}

fn workspace_resource(node: &PlanNode, kind: WorkspaceKind) -> Option<&ResourceId> {
    match kind {
        WorkspaceKind::Scratch => node.scratch_resource.as_ref(),
        WorkspaceKind::Binding => node.binding_resource.as_ref(),
        WorkspaceKind::Persistent => node.persistent_resource.as_ref(),
    }
}

/// Checks 9 and 10: resources sorted, unique, planned, and exactly the binding and
/// workspace resources.
fn check_resources(node: &PlanNode, rows: &MemoryRows<'_>) -> Result<(), InternalError> {
    if let Some(pair) = node.resources.windows(2).find(|w| w[0] >= w[1]) {
        return Err(InternalError::ResourcesNotAscending {
            node: node.id.clone(),
            previous: pair[0].clone(),
            next: pair[1].clone(),
        });
    }
    for resource in &node.resources {
        if !rows.statics.contains_key(resource) && !rows.dynamics.contains_key(resource) {
            return Err(InternalError::ResourceNotPlanned {
                node: node.id.clone(),
                resource: resource.clone(),
            });
        }
    }
    let mut expected: BTreeSet<&ResourceId> = node
        .values
        .iter()
        .flat_map(|b| b.storage.components.iter().map(|c| &c.resource_id))
        .collect();
    expected.extend(
        WorkspaceKind::ALL
            .iter()
            .filter_map(|k| workspace_resource(node, *k)),
    );
    if !node.resources.iter().eq(expected.iter().copied()) {
        return Err(InternalError::ResourcesMismatch {
            node: node.id.clone(),
            stored: node.resources.iter().map(ToString::to_string).collect(),
            expected: expected.iter().map(ToString::to_string).collect(),
        });
    }
    Ok(())
}

/// Check 11 (the plan alone): each state effect's access and resources are those of the
/// node's bindings of its value, each resource a dynamic descriptor of the effect's
/// lifetime (request, sequence or step), and the effects strictly ascend by state.
fn check_state_rows(node: &PlanNode, rows: &MemoryRows<'_>) -> Result<(), InternalError> {
    for effect in &node.state_effects {
        let problem = |text: String| state_effect_error(node, &effect.state_id, text);
        if !matches!(
            effect.lifetime,
            AllocationLifetime::Request | AllocationLifetime::Sequence | AllocationLifetime::Step
        ) {
            return Err(problem(format!(
                "lifetime {:?} is not request, sequence or step",
                effect.lifetime
            )));
        }
        let bindings: Vec<_> = node
            .values
            .iter()
            .filter(|b| b.value_id == effect.state_value_id)
            .collect();
        let access = bindings
            .iter()
            .map(|b| b.access)
            .reduce(TensorAccess::union);
        if access != Some(effect.access) {
            return Err(problem(format!(
                "access {:?} is not the union {:?} of the node's bindings",
                effect.access, access
            )));
        }
        let resources: BTreeSet<&ResourceId> = bindings
            .iter()
            .flat_map(|b| b.storage.components.iter().map(|c| &c.resource_id))
            .collect();
        if effect.resource_ids.is_empty() {
            return Err(problem("names no resource".to_owned()));
        }
        if !effect.resource_ids.iter().eq(resources.iter().copied()) {
            return Err(problem(format!(
                "resource_ids {:?} are not the resources {:?} of its bindings",
                effect.resource_ids, resources
            )));
        }
        for resource in &effect.resource_ids {
            match rows.dynamics.get(resource) {
                Some(d) if d.lifetime == effect.lifetime => {}
                Some(d) => {
                    return Err(problem(format!(
                        "resource {resource} has lifetime {:?} in the memory plan, the effect {:?}",
                        d.lifetime, effect.lifetime
                    )))
                }
                None => {
                    return Err(problem(format!(
                        "resource {resource} is not a dynamic descriptor of the memory plan"
                    )))
                }
            }
        }
    }
    if let Some(pair) = node
        .state_effects
        .windows(2)
        .find(|w| w[0].state_id >= w[1].state_id)
    {
        return Err(state_effect_error(
            node,
            &pair[1].state_id,
            format!(
                "state effects are not strictly ascending (follows {})",
                pair[0].state_id
            ),
        ));
    }
    Ok(())
}

fn workspace_kind(kind: WorkspaceKind, node: &NodeId) -> (AllocationKind, BufferUsage) {
    let node_id = node.clone();
    match kind {
        WorkspaceKind::Scratch => (AllocationKind::Scratch { node_id }, BufferUsage::Scratch),
        WorkspaceKind::Binding => (AllocationKind::Binding { node_id }, BufferUsage::Binding),
        WorkspaceKind::Persistent => (
            AllocationKind::Persistent { node_id },
            BufferUsage::Persistent,
        ),
    }
}

fn scope_lifetime(scope: WorkspaceScope) -> AllocationLifetime {
    match scope {
        WorkspaceScope::Plan => AllocationLifetime::Plan,
        WorkspaceScope::Request => AllocationLifetime::Request,
        WorkspaceScope::Sequence => AllocationLifetime::Sequence,
        WorkspaceScope::Step => AllocationLifetime::Step,
        WorkspaceScope::Invocation => AllocationLifetime::Invocation,
    }
}

/// Checks 12-14: workspace presence, ids and memory rows.
fn check_workspaces(node: &PlanNode, rows: &MemoryRows<'_>) -> Result<(), InternalError> {
    for kind in WorkspaceKind::ALL {
        let resource = workspace_resource(node, kind);
        let estimate = node.provider_resources.workspace(kind);
        let (resource, ws) = match (resource, estimate) {
            (None, None) => continue,
            (Some(r), Some(ws)) => (r, ws),
            (r, _) => {
                return Err(InternalError::WorkspacePresence {
                    node: node.id.clone(),
                    kind,
                    resource_state: if r.is_some() { "present" } else { "absent" },
                    estimate_state: if r.is_some() { "has no" } else { "has" },
                })
            }
        };
        let expected = workspace_base_id(
            kind,
            &node.id,
            &node.provider_resources.estimate_fingerprint,
        );
        if resource != &expected {
            return Err(InternalError::WorkspaceIdMismatch {
                node: node.id.clone(),
                kind,
                stored: resource.clone(),
                expected,
            });
        }
        let mismatch = |field: &'static str, problem: String| InternalError::WorkspaceMemory {
            node: node.id.clone(),
            kind,
            resource: resource.clone(),
            field,
            problem,
        };
        let (allocation_kind, usage) = workspace_kind(kind, &node.id);
        let lifetime = scope_lifetime(ws.scope);
        if lifetime == AllocationLifetime::Plan {
            let Some(row) = rows.statics.get(resource) else {
                return Err(mismatch(
                    "static allocation",
                    "is missing for a plan-scoped workspace".to_owned(),
                ));
            };
            let WorkspaceSizeFormula::Fixed { bytes } = ws.size_formula else {
                return Err(mismatch("size_formula", "is not fixed".to_owned()));
            };
            check_eq(
                &mismatch,
                "per_instance_bytes",
                &row.per_instance_bytes,
                &bytes,
            )?;
            check_eq(
                &mismatch,
                "alignment_bytes",
                &row.alignment_bytes,
                &ws.alignment_bytes,
            )?;
            check_eq(&mismatch, "usage", &row.usage, &usage)?;
            check_eq(
                &mismatch,
                "element_type",
                &row.element_type,
                &ElementType::U8,
            )?;
            check_eq(&mismatch, "kind", &row.kind, &allocation_kind)?;
            check_storage(&mismatch, &row.storage, ws)?;
            continue;
        }
        let Some(row) = rows.dynamics.get(resource) else {
            return Err(mismatch(
                "dynamic descriptor",
                format!("is missing for a {:?}-scoped workspace", ws.scope),
            ));
        };
        let demand = bind_runtime_limits(
            &ws.size_formula,
            rows.memory.maximum_active_sequences,
            rows.maximum_scheduled_tokens,
        );
        check_eq(&mismatch, "demand", &row.demand, &demand)?;
        check_eq(
            &mismatch,
            "alignment_bytes",
            &row.alignment_bytes,
            &ws.alignment_bytes,
        )?;
        check_eq(&mismatch, "usage", &row.usage, &usage)?;
        check_eq(
            &mismatch,
            "element_type",
            &row.element_type,
            &ElementType::U8,
        )?;
        check_eq(&mismatch, "lifetime", &row.lifetime, &lifetime)?;
        check_eq(&mismatch, "kind", &row.kind, &allocation_kind)?;
        check_eq(
            &mismatch,
            "theoretical_maximum_instances",
            &row.theoretical_maximum_instances,
            &rows.memory.maximum_active_sequences,
        )?;
        check_storage(&mismatch, &row.storage, ws)?;
    }
    Ok(())
}

fn check_eq<T: PartialEq + std::fmt::Debug>(
    mismatch: &impl Fn(&'static str, String) -> InternalError,
    field: &'static str,
    stored: &T,
    expected: &T,
) -> Result<(), InternalError> {
    if stored == expected {
        Ok(())
    } else {
        Err(mismatch(
            field,
            format!("is {stored:?}, expected {expected:?}"),
        ))
    }
}

fn check_storage(
    mismatch: &impl Fn(&'static str, String) -> InternalError,
    storage: &crate::request::StorageContract,
    ws: &WorkspaceRequirement,
) -> Result<(), InternalError> {
    if !ws.storage.accepts(&storage.profile) {
        return Err(mismatch(
            "storage.profile",
            format!(
                "{} is not accepted by the workspace requirement",
                storage.profile
            ),
        ));
    }
    check_eq(
        mismatch,
        "storage.logical_layout_fingerprint",
        &storage.logical_layout_fingerprint,
        &workspace_layout_fingerprint(),
    )
}
