//! Node resolutions: each node's bindings, its preferred provider, and for every compatible
//! provider its resource estimate (with the estimator input and estimate fingerprints the
//! planner recomputes) or the storage conflict that rules it out.
//!
//! This mirrors the reference `PlanNodeResolution::resolve`: compatibility first (version,
//! capabilities, weight and quantization formats, determinism); incompatible providers are
//! left to the planner's compatibility evidence; a compatible provider whose binding slots or
//! workspaces have no storage profile that the policy allows, the device offers and the
//! provider accepts gets a resolution-local `storage_incompatible` rejection; every other
//! compatible provider becomes a candidate.

use std::collections::{BTreeMap, BTreeSet};

use crate::request::fingerprints::{
    self, estimate_fingerprint, estimator_input_fingerprint, node_weight_requirements,
    EstimatorInput,
};
use crate::request::{
    BufferUsage, CapabilityCatalog, CapabilityId, NodeResolution, ProgramNode, ProviderDescriptor,
    ProviderId, ProviderResourcePlan, QuantizationFormatId, ResolutionRejection, ResourceId,
    RuntimePolicy, Sha256Hex, StorageProfile, StorageRequirement, StorageView, ValueBinding,
    ValueRole, WeightFormatId, WorkspaceKind,
};

use super::catalog::{dtype_capability, provider_id};
use super::device::DeviceDescription;
use super::estimate::{estimate, EstimateContext};
use super::operation::{Kernel, Operation};
use super::program::ProgramParts;
use super::weights::{GPTQ_QUANTIZATION, Q4K_QUANTIZATION, Q6K_QUANTIZATION, Q8_0_QUANTIZATION};
use super::{SynthError, WeightFormat};

/// The profiles a requirement can actually get: the policy order filtered to what the device
/// offers and the requirement accepts.
fn available(
    policy: &RuntimePolicy,
    device: &DeviceDescription,
    requirement: &StorageRequirement,
) -> Vec<StorageProfile> {
    policy
        .dynamic_storage_profile_order
        .iter()
        .filter(|p| device.storage_profiles.contains(p) && requirement.accepts(p))
        .copied()
        .collect()
}

struct NodeWeights {
    formats: BTreeSet<WeightFormatId>,
    quantization: BTreeSet<QuantizationFormatId>,
}

fn compatible(
    provider: &ProviderDescriptor,
    node: &ProgramNode,
    required_capabilities: &BTreeSet<CapabilityId>,
    weights: &NodeWeights,
    policy: &RuntimePolicy,
) -> bool {
    provider.version.satisfies(node.required_version)
        && required_capabilities.is_subset(&provider.capabilities)
        && weights.formats.is_subset(&provider.accepted_weight_formats)
        && weights
            .quantization
            .is_subset(&provider.accepted_quantization_formats)
        && policy
            .execution_determinism
            .accepts(&provider.execution_semantics)
}

/// The kernel the user would pick for a node: the quantized kernel matching the node's
/// quantized weights; for attention, the kernel whose KV storage the policy ranks first
/// (a policy that ranks the contiguous view first wants the contiguous-cache kernel, whose
/// per-sequence reservation is then weighed against the paged one's blocks); else the
/// first (fast) variant.
fn preferred_kernel(
    op: Operation,
    weights: &NodeWeights,
    policy: &RuntimePolicy,
    format: WeightFormat,
) -> Kernel {
    let has = |q: &str| weights.quantization.iter().any(|f| f.as_str() == q);
    let variants = op.variants_for(format);
    let format_kernel = crate::synth::operation::format_kernel(format)
        .map(|(_, k)| k)
        .filter(|_| !format.is_legacy() && !weights.quantization.is_empty());
    let contiguous_first = policy
        .dynamic_storage_profile_order
        .first()
        .is_some_and(|p| p.view == StorageView::Contiguous);
    let wants = if contiguous_first && variants.iter().any(|(_, k)| *k == Kernel::Contiguous) {
        Kernel::Contiguous
    } else if let Some(kernel) = format_kernel {
        kernel
    } else if has(GPTQ_QUANTIZATION) {
        Kernel::Gptq
    } else if has(Q4K_QUANTIZATION) || has(Q6K_QUANTIZATION) || has(Q8_0_QUANTIZATION) {
        Kernel::Gguf
    } else {
        variants[0].1
    };
    if variants.iter().any(|(_, k)| *k == wants) {
        wants
    } else {
        variants[0].1
    }
}

/// Resolutions of every node of `parts`, in execution order.
pub fn resolve_nodes(
    parts: &ProgramParts,
    family_fingerprint: &Sha256Hex,
    catalog: &CapabilityCatalog,
    policy: &RuntimePolicy,
    device: &DeviceDescription,
    format: WeightFormat,
) -> Result<Vec<NodeResolution>, SynthError> {
    let act = parts.schema_activation_type();
    let mut operation_fingerprints = BTreeMap::new();
    for (id, op) in &catalog.operations {
        operation_fingerprints.insert(id.clone(), fingerprints::operation_fingerprint(op)?);
    }
    let mut resolutions = Vec::with_capacity(parts.operations.len());
    for (index, (node, &op)) in parts.program.nodes().zip(&parts.operations).enumerate() {
        let descriptor = catalog.operations.get(&node.operation_id).ok_or_else(|| {
            SynthError::Internal(format!("operation {} missing", node.operation_id))
        })?;
        let op_fingerprint = &operation_fingerprints[&node.operation_id];
        let inputs = node.inputs.len();
        let mut values = Vec::with_capacity(inputs + node.outputs.len());
        for (k, value_id) in node.inputs.iter().chain(&node.outputs).enumerate() {
            let (role, ordinal) = if k < inputs {
                (ValueRole::Input, k)
            } else {
                (ValueRole::Output, k - inputs)
            };
            let slot = descriptor.slot(role, ordinal as u32).ok_or_else(|| {
                SynthError::Internal(format!(
                    "node {} has more bindings than {} has slots",
                    node.id, node.operation_id
                ))
            })?;
            let info = parts.values.get(value_id).ok_or_else(|| {
                SynthError::Internal(format!("value {value_id} of node {} is undefined", node.id))
            })?;
            values.push(ValueBinding {
                value_id: value_id.clone(),
                role,
                ordinal: ordinal as u32,
                tensor: info.tensor.clone(),
                access: slot.access,
                alias: slot.alias,
                usage: info.usage,
                weight: info.weight.clone(),
                storage: info.storage.clone(),
            });
        }
        let resolution_capabilities: BTreeSet<CapabilityId> = [dtype_capability(act)].into();
        let mut required_capabilities = descriptor.provider.required_capabilities.clone();
        required_capabilities.extend(resolution_capabilities.iter().cloned());
        let (formats, quantization) = node_weight_requirements(&values);
        let weights = NodeWeights {
            formats,
            quantization,
        };
        let preferred_kernel = preferred_kernel(op, &weights, policy, format);
        let preferred = op
            .variants_for(format)
            .iter()
            .find(|(_, k)| *k == preferred_kernel)
            .map(|(variant, _)| provider_id(device.backend, op, variant));
        let kernels: BTreeMap<ProviderId, Kernel> = op
            .variants_for(format)
            .iter()
            .map(|(variant, kernel)| (provider_id(device.backend, op, variant), *kernel))
            .collect();
        let ctx = EstimateContext {
            attributes: &node.attributes,
            element_bytes: act.byte_size(),
            page_bytes: device.page_bytes(),
            kv_bytes_per_token: parts.kv_bytes_per_token.get(&index).copied().unwrap_or(0),
            node: node.id.as_str(),
        };
        let mut candidates = Vec::new();
        let mut rejections = BTreeMap::new();
        let row = catalog
            .providers
            .get(&node.operation_id)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        for provider in row {
            if !compatible(provider, node, &required_capabilities, &weights, policy) {
                continue;
            }
            let mut conflicts = BTreeSet::new();
            for binding in values.iter().filter(|b| b.usage != BufferUsage::Weights) {
                let usable = provider
                    .storage_for(binding.role, binding.ordinal)
                    .is_some_and(|req| !available(policy, device, req).is_empty());
                if !usable {
                    conflicts.extend(
                        binding
                            .storage
                            .components
                            .iter()
                            .map(|c| c.resource_id.clone()),
                    );
                }
            }
            if !conflicts.is_empty() {
                rejections.insert(
                    provider.provider_id.clone(),
                    ResolutionRejection::StorageIncompatible {
                        resource_ids: conflicts.into_iter().collect(),
                    },
                );
                continue;
            }
            let kernel = kernels.get(&provider.provider_id).copied().ok_or_else(|| {
                SynthError::Internal(format!("provider {} has no kernel", provider.provider_id))
            })?;
            let est = estimate(op, kernel, &ctx)?;
            let input_fingerprint = estimator_input_fingerprint(&EstimatorInput {
                prepared_family_fingerprint: family_fingerprint,
                operation_fingerprint: op_fingerprint,
                node_id: &node.id,
                operation_id: &node.operation_id,
                operation_version: node.required_version,
                attributes: &node.attributes,
                provider_id: &provider.provider_id,
                values: &values,
                required_capabilities: &required_capabilities,
                required_weight_formats: &weights.formats,
                required_quantization_formats: &weights.quantization,
            })?;
            let mut plan = ProviderResourcePlan {
                provider_id: provider.provider_id.clone(),
                estimator_id: provider.resource_estimator_id.clone(),
                estimator_version: provider.resource_estimator_version,
                estimator_implementation_fingerprint: provider
                    .resource_estimator_implementation_fingerprint
                    .clone(),
                estimator_input_fingerprint: input_fingerprint,
                estimate_fingerprint: portable_sha(),
                value_alignment_bytes: est.value_alignment_bytes,
                scratch: est.scratch,
                binding: est.binding,
                persistent: est.persistent,
            };
            plan.estimate_fingerprint = estimate_fingerprint(&plan)?;
            let workspace_conflicts: Vec<ResourceId> = WorkspaceKind::ALL
                .iter()
                .filter_map(|&kind| {
                    let ws = plan.workspace(kind)?;
                    available(policy, device, &ws.storage).is_empty().then(|| {
                        fingerprints::workspace_base_id(kind, &node.id, &plan.estimate_fingerprint)
                    })
                })
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            if !workspace_conflicts.is_empty() {
                rejections.insert(
                    provider.provider_id.clone(),
                    ResolutionRejection::StorageIncompatible {
                        resource_ids: workspace_conflicts,
                    },
                );
                continue;
            }
            candidates.push(plan);
        }
        if candidates.is_empty() {
            return Err(SynthError::NoProvider {
                node: node.id.to_string(),
                operation: node.operation_id.to_string(),
                reason: if rejections.is_empty() {
                    format!(
                        "no provider is compatible (needs capabilities {:?}, weight formats {:?}, quantization {:?}, determinism {:?})",
                        required_capabilities.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
                        weights.formats.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
                        weights.quantization.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
                        policy.execution_determinism
                    )
                } else {
                    format!(
                        "every compatible provider has a storage conflict: {}",
                        rejections
                            .keys()
                            .map(|p| p.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                },
            });
        }
        candidates.sort_by(|a, b| a.provider_id.cmp(&b.provider_id));
        resolutions.push(NodeResolution {
            node_id: node.id.clone(),
            values,
            required_capabilities: resolution_capabilities,
            preferred_provider: preferred,
            provider_resource_candidates: candidates,
            provider_resolution_rejections: rejections,
        });
    }
    Ok(resolutions)
}

fn portable_sha() -> Sha256Hex {
    crate::canonical::sha256_hex(b"")
}

impl ProgramParts {
    /// The activation element type of the program (that of the embedding output).
    pub fn schema_activation_type(&self) -> crate::request::ElementType {
        self.program
            .nodes()
            .next()
            .and_then(|n| n.outputs.first())
            .and_then(|v| self.values.get(v))
            .map_or(crate::request::ElementType::F16, |v| v.tensor.element_type)
    }
}
