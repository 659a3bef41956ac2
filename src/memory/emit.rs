//! Emitting static allocations and dynamic descriptors (rules 4.3), and the rules every
//! emitted row obeys (1.9), shared by derivation and validation.

use std::collections::BTreeMap;

use crate::plan::PlanNode;
use crate::request::{
    align_up, BufferUsage, ElementType, IdMap, ResourceId, StorageContract, StorageProfile,
    StorageView,
};

use super::demand::{demand_problem, quantized_bytes, theoretical_maximum_shape, Shape};
use super::error::{overflow, MemoryError};
use super::values::{LayoutInterner, ValueDemand, ValueResource};
use super::{
    AllocationKind, AllocationLifetime, DynamicResourceDemand, DynamicResourceDescriptor,
    ResourceAllocation, ResourceInitialization,
};

/// The static and dynamic rows being emitted, keyed (and so sorted) by resource id.
#[derive(Default)]
pub(crate) struct Rows {
    /// Static allocations.
    pub statics: BTreeMap<ResourceId, ResourceAllocation>,
    /// Dynamic descriptors.
    pub dynamics: BTreeMap<ResourceId, DynamicResourceDescriptor>,
    /// What each row is, for the message of a duplicate (looked up only).
    origins: IdMap<ResourceId, String>,
}

impl Rows {
    fn claim(&mut self, resource: &ResourceId, origin: String) -> Result<(), MemoryError> {
        if let Some(first) = self.origins.get(resource) {
            return Err(MemoryError::DuplicateResource {
                resource: resource.clone(),
                first: first.clone(),
                second: origin,
            });
        }
        self.origins.insert(resource.clone(), origin);
        Ok(())
    }

    /// Adds a static allocation; its id must be new.
    pub fn add_static(
        &mut self,
        allocation: ResourceAllocation,
        origin: String,
    ) -> Result<(), MemoryError> {
        self.claim(&allocation.resource_id, origin)?;
        check_static(&allocation)?;
        self.statics
            .insert(allocation.resource_id.clone(), allocation);
        Ok(())
    }

    /// Adds a dynamic descriptor; its id must be new.
    pub fn add_dynamic(
        &mut self,
        descriptor: DynamicResourceDescriptor,
        origin: String,
    ) -> Result<(), MemoryError> {
        self.claim(&descriptor.base_resource_id, origin)?;
        self.dynamics
            .insert(descriptor.base_resource_id.clone(), descriptor);
        Ok(())
    }
}

/// Emits every value resource, in resource-id order (4.3).
pub(crate) fn emit_values(
    values: &BTreeMap<ResourceId, ValueResource>,
    nodes: &[PlanNode],
    selected_profiles: &BTreeMap<ResourceId, StorageProfile>,
    maximum_active_sequences: u32,
    layouts: &mut LayoutInterner,
    rows: &mut Rows,
) -> Result<(), MemoryError> {
    for (resource, value) in values {
        let storage_fingerprint = layouts.resource_fingerprint(&value.layouts)?;
        let first_node = &nodes[value.first_node].id;
        let origin = format!("a value resource first used by node {first_node}");
        let (demand, lifetime) = match value.demand {
            ValueDemand::PlanStatic => {
                let profile = StorageProfile::STATIC_CONTIGUOUS;
                let stride = profile
                    .quantize(value.end, value.alignment)
                    .ok_or_else(|| {
                        overflow(format!(
                            "static resource {resource}: {} bytes aligned to {}",
                            value.end, value.alignment
                        ))
                    })?;
                rows.add_static(
                    ResourceAllocation {
                        resource_id: resource.clone(),
                        per_instance_bytes: value.end,
                        instance_stride_bytes: stride,
                        instance_count: 1,
                        size_bytes: stride,
                        alignment_bytes: value.alignment,
                        usage: value.usage,
                        element_type: value.element_type,
                        lifetime: AllocationLifetime::Plan,
                        kind: AllocationKind::Value,
                        storage: StorageContract {
                            profile,
                            logical_layout_fingerprint: storage_fingerprint,
                        },
                    },
                    origin,
                )?;
                continue;
            }
            ValueDemand::Fixed { lifetime } => {
                (DynamicResourceDemand::Fixed { bytes: value.end }, lifetime)
            }
            ValueDemand::ParticipantFixed {
                lifetime,
                maximum_participants,
            } => (
                DynamicResourceDemand::ActualSequences {
                    bytes_per_sequence: align_up(value.end, value.alignment).ok_or_else(|| {
                        overflow(format!(
                            "resource {resource}: {} bytes aligned to {}",
                            value.end, value.alignment
                        ))
                    })?,
                    maximum_sequences: maximum_participants,
                },
                lifetime,
            ),
            ValueDemand::TokenScaled {
                lifetime,
                bytes_per_token,
                maximum_tokens,
            } => (
                token_scaled_demand(
                    value.usage,
                    &selected_profile(selected_profiles, resource, first_node)?,
                    bytes_per_token,
                    maximum_tokens,
                )
                .ok_or_else(|| {
                    overflow(format!(
                        "resource {resource}: {bytes_per_token} bytes per token x {maximum_tokens} tokens"
                    ))
                })?,
                lifetime,
            ),
        };
        let profile = selected_profile(selected_profiles, resource, first_node)?;
        rows.add_dynamic(
            DynamicResourceDescriptor {
                base_resource_id: resource.clone(),
                demand,
                alignment_bytes: value.alignment,
                usage: value.usage,
                element_type: value.element_type,
                lifetime,
                kind: AllocationKind::Value,
                storage: StorageContract {
                    profile,
                    logical_layout_fingerprint: storage_fingerprint,
                },
                pool_id: String::new(),
                initialization: value.initialization,
                theoretical_maximum_instances: maximum_active_sequences,
            },
            origin,
        )?;
    }
    Ok(())
}

fn selected_profile(
    selected_profiles: &BTreeMap<ResourceId, StorageProfile>,
    resource: &ResourceId,
    first_node: &crate::request::NodeId,
) -> Result<StorageProfile, MemoryError> {
    selected_profiles
        .get(resource)
        .copied()
        .ok_or_else(|| MemoryError::MissingSelectedProfile {
            resource: resource.clone(),
            node: first_node.clone(),
        })
}

/// The per-instance demand of a token-scaled value on its selected profile. A state (a KV
/// cache) kept in one contiguous range cannot grow in place, so each instance (sequence)
/// reserves its maximum tokens up front, as engines with a contiguous KV cache do; a paged
/// state grows by blocks, and step activations by the tokens scheduled. `None` on overflow.
fn token_scaled_demand(
    usage: BufferUsage,
    profile: &StorageProfile,
    bytes_per_token: u64,
    maximum_tokens: u64,
) -> Option<DynamicResourceDemand> {
    if usage == BufferUsage::State && profile.view == StorageView::Contiguous {
        return Some(DynamicResourceDemand::Fixed {
            bytes: bytes_per_token.checked_mul(maximum_tokens)?,
        });
    }
    Some(DynamicResourceDemand::Tokens {
        bytes_per_token,
        maximum_tokens,
    })
}

fn check_profile(resource: &ResourceId, profile: &StorageProfile) -> Result<(), MemoryError> {
    match profile.problem() {
        None => Ok(()),
        Some(reason) => Err(MemoryError::IllegalProfile {
            resource: resource.clone(),
            profile: profile.to_string(),
            reason,
        }),
    }
}

/// The rules of one static allocation (1.9, 4.8): positive bytes, stride the quantized
/// bytes, one instance, size = stride, power-of-two alignment, plan lifetime; value rows on
/// linear+contiguous; persistent rows persistent/u8/opaque layout; no scratch or binding.
pub(crate) fn check_static(allocation: &ResourceAllocation) -> Result<(), MemoryError> {
    let resource = &allocation.resource_id;
    let bad = |reason: String| MemoryError::InvalidStaticAllocation {
        resource: resource.clone(),
        reason,
    };
    if !allocation.alignment_bytes.is_power_of_two() {
        return Err(MemoryError::InvalidResourceAlignment {
            resource: resource.clone(),
            alignment: allocation.alignment_bytes,
        });
    }
    check_profile(resource, &allocation.storage.profile)?;
    if allocation.per_instance_bytes == 0 {
        return Err(bad("per-instance bytes are zero".to_owned()));
    }
    let stride = allocation
        .storage
        .profile
        .quantize(allocation.per_instance_bytes, allocation.alignment_bytes)
        .ok_or_else(|| overflow(format!("static resource {resource}: quantized bytes")))?;
    if allocation.instance_stride_bytes != stride {
        return Err(bad(format!(
            "instance stride {} is not the quantized size {stride}",
            allocation.instance_stride_bytes
        )));
    }
    if allocation.instance_count != 1 {
        return Err(bad(format!(
            "instance count {} is not 1",
            allocation.instance_count
        )));
    }
    if allocation.size_bytes != allocation.instance_stride_bytes {
        return Err(bad(format!(
            "size {} differs from the stride {}",
            allocation.size_bytes, allocation.instance_stride_bytes
        )));
    }
    if allocation.lifetime != AllocationLifetime::Plan {
        return Err(bad(format!(
            "lifetime {:?} is not plan",
            allocation.lifetime
        )));
    }
    match &allocation.kind {
        AllocationKind::Value => {
            if allocation.storage.profile != StorageProfile::STATIC_CONTIGUOUS {
                return Err(bad(format!(
                    "a static value must use linear+contiguous, not {}",
                    allocation.storage.profile
                )));
            }
            if matches!(
                allocation.usage,
                BufferUsage::Persistent | BufferUsage::Scratch | BufferUsage::Binding
            ) {
                return Err(bad(format!(
                    "a static value cannot have {:?} usage",
                    allocation.usage
                )));
            }
        }
        AllocationKind::Persistent { node_id } => {
            if allocation.usage != BufferUsage::Persistent
                || allocation.element_type != ElementType::U8
                || allocation.storage.logical_layout_fingerprint
                    != crate::request::fingerprints::workspace_layout_fingerprint()
            {
                return Err(bad(format!(
                    "the persistent workspace of node {node_id} must be persistent u8 opaque bytes"
                )));
            }
        }
        AllocationKind::Scratch { node_id } | AllocationKind::Binding { node_id } => {
            return Err(bad(format!(
                "the invocation workspace of node {node_id} cannot be static"
            )));
        }
    }
    Ok(())
}

/// The rules of one dynamic descriptor (1.9): lifetime not plan, power-of-two alignment,
/// legal profile, valid demand, kind/usage/lifetime/element type agreement, zero
/// initialization only for sequence states, non-zero instances. Returns its quantized
/// minimum and theoretical maximum request bytes.
pub(crate) fn check_descriptor(
    descriptor: &DynamicResourceDescriptor,
) -> Result<DescriptorBytes, MemoryError> {
    let resource = &descriptor.base_resource_id;
    let bad = |reason: String| MemoryError::InconsistentDescriptor {
        resource: resource.clone(),
        reason,
    };
    if descriptor.lifetime == AllocationLifetime::Plan {
        return Err(bad(
            "a dynamic resource cannot have plan lifetime".to_owned()
        ));
    }
    if !descriptor.alignment_bytes.is_power_of_two() {
        return Err(MemoryError::InvalidResourceAlignment {
            resource: resource.clone(),
            alignment: descriptor.alignment_bytes,
        });
    }
    check_profile(resource, &descriptor.storage.profile)?;
    if let Some(reason) = demand_problem(&descriptor.demand) {
        return Err(MemoryError::InvalidDemand {
            resource: resource.clone(),
            reason,
        });
    }
    if descriptor.theoretical_maximum_instances == 0 {
        return Err(bad("theoretical maximum instances is zero".to_owned()));
    }
    let (usage, lifetime, element) = (
        descriptor.usage,
        descriptor.lifetime,
        descriptor.element_type,
    );
    let u8_workspace = element == ElementType::U8;
    match &descriptor.kind {
        AllocationKind::Scratch { node_id } => {
            if lifetime != AllocationLifetime::Invocation
                || usage != BufferUsage::Scratch
                || !u8_workspace
            {
                return Err(bad(format!(
                    "the scratch workspace of node {node_id} must be invocation scratch u8"
                )));
            }
        }
        AllocationKind::Binding { node_id } => {
            if lifetime != AllocationLifetime::Invocation
                || usage != BufferUsage::Binding
                || !u8_workspace
            {
                return Err(bad(format!(
                    "the binding workspace of node {node_id} must be invocation binding u8"
                )));
            }
        }
        AllocationKind::Persistent { node_id } => {
            if !matches!(
                lifetime,
                AllocationLifetime::Request
                    | AllocationLifetime::Sequence
                    | AllocationLifetime::Step
            ) || usage != BufferUsage::Persistent
                || !u8_workspace
            {
                return Err(bad(format!(
                    "the persistent workspace of node {node_id} must be request, sequence or \
                     step persistent u8"
                )));
            }
        }
        AllocationKind::Value => {
            if matches!(
                usage,
                BufferUsage::Weights
                    | BufferUsage::Scratch
                    | BufferUsage::Binding
                    | BufferUsage::Persistent
            ) {
                return Err(bad(format!("a dynamic value cannot have {usage:?} usage")));
            }
            if lifetime == AllocationLifetime::Invocation {
                return Err(bad("a value cannot have invocation lifetime".to_owned()));
            }
        }
    }
    if descriptor.initialization == ResourceInitialization::Zero
        && !(descriptor.kind == AllocationKind::Value
            && usage == BufferUsage::State
            && lifetime == AllocationLifetime::Sequence)
    {
        return Err(bad(
            "zero initialization is only for sequence-lifetime state values".to_owned(),
        ));
    }
    descriptor_bytes(descriptor)
}

/// Quantized bytes of one descriptor at the minimum and the theoretical maximum shape.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DescriptorBytes {
    /// At (1, 1, 1).
    pub minimum: u64,
    /// At the theoretical maximum shape.
    pub theoretical: u64,
}

/// The quantized minimum and theoretical bytes of a descriptor with a valid demand.
pub(crate) fn descriptor_bytes(
    descriptor: &DynamicResourceDescriptor,
) -> Result<DescriptorBytes, MemoryError> {
    let at = |shape: Shape| {
        quantized_bytes(
            &descriptor.demand,
            shape,
            &descriptor.storage.profile,
            descriptor.alignment_bytes,
        )
        .map_err(|reason| MemoryError::DemandEvaluation {
            resource: descriptor.base_resource_id.clone(),
            shape: shape.to_string(),
            reason,
        })
    };
    let maximum = theoretical_maximum_shape(&descriptor.demand).ok_or_else(|| {
        MemoryError::InvalidDemand {
            resource: descriptor.base_resource_id.clone(),
            reason: "no theoretical maximum shape".to_owned(),
        }
    })?;
    Ok(DescriptorBytes {
        minimum: at(Shape::MINIMUM)?,
        theoretical: at(maximum)?,
    })
}
