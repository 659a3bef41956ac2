//! Provider workspaces (rules 4.2): invocation scratch and binding workspaces become
//! invocation descriptors; persistent workspaces become a static allocation (plan scope,
//! fixed formula) or a request/sequence/step descriptor.

use std::collections::BTreeMap;

use crate::plan::PlanNode;
use crate::request::fingerprints::workspace_layout_fingerprint;
use crate::request::{
    BufferUsage, ElementType, ResourceId, RuntimePolicy, StorageContract, StorageProfile,
    WorkspaceKind, WorkspaceScope, WorkspaceSizeFormula,
};

use super::demand::bind_runtime_limits;
use super::emit::Rows;
use super::error::{overflow, MemoryError};
use super::{
    AllocationKind, AllocationLifetime, DynamicResourceDescriptor, ResourceAllocation,
    ResourceInitialization,
};

fn resource_of(node: &PlanNode, kind: WorkspaceKind) -> Option<&ResourceId> {
    match kind {
        WorkspaceKind::Scratch => node.scratch_resource.as_ref(),
        WorkspaceKind::Binding => node.binding_resource.as_ref(),
        WorkspaceKind::Persistent => node.persistent_resource.as_ref(),
    }
}

/// Emits the workspaces of every node into `rows`.
pub(crate) fn emit_workspaces(
    policy: &RuntimePolicy,
    nodes: &[PlanNode],
    selected_profiles: &BTreeMap<ResourceId, StorageProfile>,
    rows: &mut Rows,
) -> Result<(), MemoryError> {
    let layout = workspace_layout_fingerprint();
    for node in nodes {
        for kind in WorkspaceKind::ALL {
            let resource = resource_of(node, kind);
            let requirement = node.provider_resources.workspace(kind);
            let (resource, requirement) = match (resource, requirement) {
                (None, None) => continue,
                (Some(resource), Some(requirement)) => (resource, requirement),
                (resource, _) => {
                    return Err(MemoryError::WorkspacePresenceMismatch {
                        node: node.id.clone(),
                        kind,
                        resource_state: if resource.is_some() {
                            "present"
                        } else {
                            "absent"
                        },
                        estimate_state: if resource.is_some() { "has no" } else { "has" },
                    })
                }
            };
            let alignment = requirement.alignment_bytes;
            if !alignment.is_power_of_two() {
                return Err(MemoryError::InvalidWorkspaceAlignment {
                    node: node.id.clone(),
                    kind,
                    alignment,
                });
            }
            let profile = selected_profiles.get(resource).copied().ok_or_else(|| {
                MemoryError::MissingSelectedProfile {
                    resource: resource.clone(),
                    node: node.id.clone(),
                }
            })?;
            let storage = StorageContract {
                profile,
                logical_layout_fingerprint: layout.clone(),
            };
            let (usage, allocation_kind, lifetime) = match kind {
                WorkspaceKind::Scratch | WorkspaceKind::Binding => {
                    if requirement.scope != WorkspaceScope::Invocation {
                        return Err(MemoryError::InvocationWorkspaceScope {
                            node: node.id.clone(),
                            kind,
                            scope: requirement.scope,
                        });
                    }
                    if kind == WorkspaceKind::Scratch {
                        (
                            BufferUsage::Scratch,
                            AllocationKind::Scratch {
                                node_id: node.id.clone(),
                            },
                            AllocationLifetime::Invocation,
                        )
                    } else {
                        (
                            BufferUsage::Binding,
                            AllocationKind::Binding {
                                node_id: node.id.clone(),
                            },
                            AllocationLifetime::Invocation,
                        )
                    }
                }
                WorkspaceKind::Persistent => {
                    let allocation_kind = AllocationKind::Persistent {
                        node_id: node.id.clone(),
                    };
                    let lifetime = match requirement.scope {
                        WorkspaceScope::Plan => {
                            let WorkspaceSizeFormula::Fixed { bytes } = requirement.size_formula
                            else {
                                return Err(MemoryError::PlanScopeNeedsFixedFormula {
                                    node: node.id.clone(),
                                });
                            };
                            let stride = profile.quantize(bytes, alignment).ok_or_else(|| {
                                overflow(format!(
                                    "persistent workspace {resource} of node {}: {bytes} bytes \
                                     quantized under {profile}",
                                    node.id
                                ))
                            })?;
                            rows.add_static(
                                ResourceAllocation {
                                    resource_id: resource.clone(),
                                    per_instance_bytes: bytes,
                                    instance_stride_bytes: stride,
                                    instance_count: 1,
                                    size_bytes: stride,
                                    alignment_bytes: alignment,
                                    usage: BufferUsage::Persistent,
                                    element_type: ElementType::U8,
                                    lifetime: AllocationLifetime::Plan,
                                    kind: allocation_kind,
                                    storage,
                                },
                                format!("the persistent workspace of node {}", node.id),
                            )?;
                            continue;
                        }
                        WorkspaceScope::Request => AllocationLifetime::Request,
                        WorkspaceScope::Sequence => AllocationLifetime::Sequence,
                        WorkspaceScope::Step => AllocationLifetime::Step,
                        WorkspaceScope::Invocation => {
                            return Err(MemoryError::PersistentInvocationScope {
                                node: node.id.clone(),
                            })
                        }
                    };
                    (BufferUsage::Persistent, allocation_kind, lifetime)
                }
            };
            rows.add_dynamic(
                DynamicResourceDescriptor {
                    base_resource_id: resource.clone(),
                    demand: bind_runtime_limits(
                        &requirement.size_formula,
                        policy.maximum_active_sequences,
                        policy.maximum_scheduled_tokens,
                    ),
                    alignment_bytes: alignment,
                    usage,
                    element_type: ElementType::U8,
                    lifetime,
                    kind: allocation_kind,
                    storage,
                    pool_id: String::new(),
                    initialization: ResourceInitialization::None,
                    theoretical_maximum_instances: policy.maximum_active_sequences,
                },
                format!("the {} workspace of node {}", kind.name(), node.id),
            )?;
        }
    }
    Ok(())
}
