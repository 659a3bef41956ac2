//! Every identity fingerprint of the request and the plan, in one place (rules 1.4,
//! 1.6, 1.8 and section 5), so that validation, plan building, sealing and verification
//! compute them the same way.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::canonical::{
    canonical_fingerprint, declaration_fingerprint, sha256_hex, CanonicalError,
};

use super::{
    AttributeId, BlockPadding, CapabilityCatalog, CapabilityId, ContractVersion,
    ExecutionWeightPlan, MaterializerId, ModelFamily, ModelProgram, NodeId, OperationDescriptor,
    OperationId, ProviderId, ProviderResourcePlan, QuantizationFormatId, ResourceId, RuntimePolicy,
    SemanticValue, Sha256Hex, TensorLayout, ValueBinding, WeightFormatId,
    WeightMaterializerDescriptor, WeightSchema, WorkspaceKind, WorkspaceRequirement,
    IDENTITY_MATERIALIZER_CONTRACT, IDENTITY_MATERIALIZER_ID,
};
use super::{BucketCapacity, ReusableExecutionClassId, REUSABLE_BUCKET_DOMAIN};

/// Declaration-order fingerprint of the family (the prepared family fingerprint).
pub fn family_fingerprint(family: &ModelFamily) -> Result<Sha256Hex, CanonicalError> {
    declaration_fingerprint("model family", family)
}

/// Declaration-order fingerprint of the program.
pub fn program_fingerprint(program: &ModelProgram) -> Result<Sha256Hex, CanonicalError> {
    declaration_fingerprint("program", program)
}

/// Declaration-order fingerprint of the catalog.
pub fn catalog_fingerprint(catalog: &CapabilityCatalog) -> Result<Sha256Hex, CanonicalError> {
    declaration_fingerprint("capability catalog", catalog)
}

/// Declaration-order fingerprint of one operation (what providers must quote).
pub fn operation_fingerprint(operation: &OperationDescriptor) -> Result<Sha256Hex, CanonicalError> {
    declaration_fingerprint("operation", operation)
}

/// Canonical fingerprint of the runtime policy.
pub fn policy_fingerprint(policy: &RuntimePolicy) -> Result<Sha256Hex, CanonicalError> {
    canonical_fingerprint("runtime policy", policy)
}

/// Canonical fingerprint of a weight schema (the execution plan's source schema fingerprint).
pub fn weight_schema_fingerprint(schema: &WeightSchema) -> Result<Sha256Hex, CanonicalError> {
    canonical_fingerprint("weight schema", schema)
}

#[derive(Serialize)]
struct EstimateMaterial<'a> {
    provider_id: &'a ProviderId,
    estimator_id: &'a super::EstimatorId,
    estimator_version: ContractVersion,
    estimator_implementation_fingerprint: &'a Sha256Hex,
    estimator_input_fingerprint: &'a Sha256Hex,
    value_alignment_bytes: u64,
    scratch: &'a Option<WorkspaceRequirement>,
    binding: &'a Option<WorkspaceRequirement>,
    persistent: &'a Option<WorkspaceRequirement>,
}

/// The estimate fingerprint a provider resource plan must carry: canonical sha256 of every
/// field but the estimate fingerprint itself.
pub fn estimate_fingerprint(plan: &ProviderResourcePlan) -> Result<Sha256Hex, CanonicalError> {
    canonical_fingerprint(
        "provider resource estimate",
        &EstimateMaterial {
            provider_id: &plan.provider_id,
            estimator_id: &plan.estimator_id,
            estimator_version: plan.estimator_version,
            estimator_implementation_fingerprint: &plan.estimator_implementation_fingerprint,
            estimator_input_fingerprint: &plan.estimator_input_fingerprint,
            value_alignment_bytes: plan.value_alignment_bytes,
            scratch: &plan.scratch,
            binding: &plan.binding,
            persistent: &plan.persistent,
        },
    )
}

/// What a provider's resource estimator is computed from; its canonical fingerprint binds
/// an estimate to exactly one node, provider and set of bindings.
#[derive(Serialize)]
pub struct EstimatorInput<'a> {
    /// The family fingerprint.
    pub prepared_family_fingerprint: &'a Sha256Hex,
    /// The operation fingerprint.
    pub operation_fingerprint: &'a Sha256Hex,
    /// The node.
    pub node_id: &'a NodeId,
    /// The operation.
    pub operation_id: &'a OperationId,
    /// The version the node requires.
    pub operation_version: ContractVersion,
    /// Node attributes.
    pub attributes: &'a BTreeMap<AttributeId, SemanticValue>,
    /// The provider.
    pub provider_id: &'a ProviderId,
    /// The node's bindings.
    pub values: &'a [ValueBinding],
    /// Operation-required ∪ resolution-required capabilities.
    pub required_capabilities: &'a BTreeSet<CapabilityId>,
    /// Weight formats the node's weights require.
    pub required_weight_formats: &'a BTreeSet<WeightFormatId>,
    /// Quantization formats the node's weights require.
    pub required_quantization_formats: &'a BTreeSet<QuantizationFormatId>,
}

/// The weight and quantization formats a node's weight bindings require (rules 1.6, the
/// binding-driven variant): every quantization format of every weights-usage binding, and a
/// binding's weight format only if that binding has at least one quantized component (dense
/// weights beside quantized ones in a mixed checkpoint do not require the format).
pub fn node_weight_requirements(
    values: &[ValueBinding],
) -> (BTreeSet<WeightFormatId>, BTreeSet<QuantizationFormatId>) {
    let mut formats = BTreeSet::new();
    let mut quantization = BTreeSet::new();
    for weight in values
        .iter()
        .filter(|v| v.usage == super::BufferUsage::Weights)
        .filter_map(|v| v.weight.as_ref())
    {
        let binding_formats = weight.quantization_formats();
        if !binding_formats.is_empty() {
            formats.insert(weight.format_id.clone());
        }
        quantization.extend(binding_formats);
    }
    (formats, quantization)
}

/// The estimator input fingerprint of `provider` for one node of the request: the family
/// fingerprint, the operation and its fingerprint (`operation_fingerprint(operation)`,
/// passed in so that it is computed once per operation, not once per node), the node, its attributes and bindings,
/// operation ∪ resolution capabilities and the node's weight requirements.
pub fn node_estimator_input_fingerprint(
    family_fingerprint: &Sha256Hex,
    operation: &OperationDescriptor,
    operation_fingerprint: &Sha256Hex,
    node: &super::ProgramNode,
    resolution: &super::NodeResolution,
    provider: &ProviderId,
) -> Result<Sha256Hex, CanonicalError> {
    let mut required_capabilities = operation.provider.required_capabilities.clone();
    required_capabilities.extend(resolution.required_capabilities.iter().cloned());
    let (required_weight_formats, required_quantization_formats) =
        node_weight_requirements(&resolution.values);
    estimator_input_fingerprint(&EstimatorInput {
        prepared_family_fingerprint: family_fingerprint,
        operation_fingerprint,
        node_id: &node.id,
        operation_id: &node.operation_id,
        operation_version: node.required_version,
        attributes: &node.attributes,
        provider_id: provider,
        values: &resolution.values,
        required_capabilities: &required_capabilities,
        required_weight_formats: &required_weight_formats,
        required_quantization_formats: &required_quantization_formats,
    })
}

/// Canonical fingerprint of an estimator input.
pub fn estimator_input_fingerprint(
    input: &EstimatorInput<'_>,
) -> Result<Sha256Hex, CanonicalError> {
    canonical_fingerprint("estimator input", input)
}

/// The resource id of a node's workspace: `resource/{kind}/sha256/{hex}` with hex the
/// SHA-256 of `kind`, NUL, node id, NUL, estimate fingerprint. Different estimates (so
/// different providers) own different workspace resources.
pub fn workspace_base_id(kind: WorkspaceKind, node: &NodeId, estimate: &Sha256Hex) -> ResourceId {
    let mut text = Vec::with_capacity(8 + node.as_str().len() + 66);
    text.extend_from_slice(kind.name().as_bytes());
    text.push(0);
    text.extend_from_slice(node.as_str().as_bytes());
    text.push(0);
    text.extend_from_slice(estimate.as_str().as_bytes());
    let hex = sha256_hex(&text);
    // `resource/scratch/sha256/` + 64 hex digits is at most 89 bytes of allowed characters.
    ResourceId::new(format!("resource/{}/sha256/{hex}", kind.name()))
        .unwrap_or_else(|_| unreachable!("workspace ids are portable by construction"))
}

#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum LayoutClass<'a> {
    Strided {
        byte_strides: &'a [u64],
    },
    Blocked {
        axis_order: &'a [u32],
        block: &'a [u64],
        padding: &'static str,
    },
}

/// Canonical fingerprint of a tensor's layout class (its layout with shapes removed).
pub fn layout_class_fingerprint(layout: &TensorLayout) -> Result<Sha256Hex, CanonicalError> {
    match layout {
        TensorLayout::Contiguous => canonical_fingerprint("layout class", "contiguous"),
        TensorLayout::Strided { byte_strides } => {
            canonical_fingerprint("layout class", &LayoutClass::Strided { byte_strides })
        }
        TensorLayout::Blocked {
            block,
            axis_order,
            padding,
        } => canonical_fingerprint(
            "layout class",
            &LayoutClass::Blocked {
                axis_order,
                block,
                padding: match padding {
                    BlockPadding::Exact => "exact",
                    BlockPadding::ZeroFill { .. } => "zero_fill",
                },
            },
        ),
    }
}

/// The layout fingerprint of every workspace: canonical sha256 of `"opaque_bytes_v1"`.
pub fn workspace_layout_fingerprint() -> Sha256Hex {
    sha256_hex(b"\"opaque_bytes_v1\"")
}

/// The layout fingerprint of a value resource: canonical sha256 of the sorted set of the
/// layout-class fingerprints of every binding that touches it.
pub fn value_resource_layout_fingerprint(
    classes: &BTreeSet<Sha256Hex>,
) -> Result<Sha256Hex, CanonicalError> {
    canonical_fingerprint("value resource layout", classes)
}

/// Canonical fingerprint of any serializable key, with a prefix: the pool id
/// (`dynamic-pool/sha256/`) and similar derived ids.
pub fn prefixed_canonical_id<T: Serialize>(
    prefix: &str,
    what: &'static str,
    key: &T,
) -> Result<String, CanonicalError> {
    Ok(format!("{prefix}{}", canonical_fingerprint(what, key)?))
}

#[derive(Serialize)]
struct BucketMaterial<'a> {
    domain: &'static str,
    class_id: &'a ReusableExecutionClassId,
    capacity: &'a BucketCapacity,
}

/// The id of a reusable-execution bucket.
pub fn reusable_bucket_id(
    class_id: &ReusableExecutionClassId,
    capacity: &BucketCapacity,
) -> Result<String, CanonicalError> {
    prefixed_canonical_id(
        "reusable-bucket/sha256/",
        "reusable bucket",
        &BucketMaterial {
            domain: REUSABLE_BUCKET_DOMAIN,
            class_id,
            capacity,
        },
    )
}

#[derive(Serialize)]
struct MaterializerMaterial<'a> {
    id: &'a MaterializerId,
    version: ContractVersion,
    contract: &'static str,
}

/// The identity materializer's descriptor: id `weight-materializer.identity`, version 1.0,
/// fingerprint the canonical sha256 of `{id, version, contract}`.
pub fn identity_materializer() -> Result<WeightMaterializerDescriptor, CanonicalError> {
    let id = MaterializerId::new(IDENTITY_MATERIALIZER_ID)
        .unwrap_or_else(|_| unreachable!("the identity materializer id is portable"));
    let version = ContractVersion::new(1, 0);
    let implementation_fingerprint = canonical_fingerprint(
        "identity materializer",
        &MaterializerMaterial {
            id: &id,
            version,
            contract: IDENTITY_MATERIALIZER_CONTRACT,
        },
    )?;
    Ok(WeightMaterializerDescriptor {
        id,
        version,
        implementation_fingerprint,
    })
}

/// The execution weight plan of the identity materializer: every component is its own
/// source and the execution schema is the source schema.
pub fn identity_execution_weights(
    schema: &WeightSchema,
) -> Result<ExecutionWeightPlan, CanonicalError> {
    let materializer = identity_materializer()?;
    Ok(ExecutionWeightPlan {
        source_schema_fingerprint: weight_schema_fingerprint(schema)?,
        materializer_id: materializer.id,
        materializer_version: materializer.version,
        materializer_implementation_fingerprint: materializer.implementation_fingerprint,
        component_sources: schema
            .components
            .iter()
            .map(|c| (c.id.clone(), vec![c.id.clone()]))
            .collect(),
        schema: schema.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_constants_match_the_reference() {
        assert_eq!(
            layout_class_fingerprint(&TensorLayout::Contiguous)
                .unwrap()
                .as_str(),
            "2ee77f83e72ffcea31cc6ac29a81070a45403f9fe3e3d76aa284ffc351ead457"
        );
        assert_eq!(
            workspace_layout_fingerprint().as_str(),
            "309780bb231c537e8511cd06c6de0030f971c09499f8c0504e3bdee811fad897"
        );
        let set: BTreeSet<_> =
            [layout_class_fingerprint(&TensorLayout::Contiguous).unwrap()].into();
        assert_eq!(
            value_resource_layout_fingerprint(&set).unwrap().as_str(),
            "5ecd2941f2c44570bcee3178feaccaeb79f4eb49c6d9a01a0cf61df170fee566"
        );
    }

    #[test]
    fn workspace_ids_differ_by_kind_and_estimate() {
        let node = NodeId::new("node.main").unwrap();
        let a = Sha256Hex::new("1".repeat(64)).unwrap();
        let b = Sha256Hex::new("2".repeat(64)).unwrap();
        let scratch = workspace_base_id(WorkspaceKind::Scratch, &node, &a);
        assert!(scratch.as_str().starts_with("resource/scratch/sha256/"));
        assert_ne!(
            scratch,
            workspace_base_id(WorkspaceKind::Binding, &node, &a)
        );
        assert_ne!(
            scratch,
            workspace_base_id(WorkspaceKind::Scratch, &node, &b)
        );
    }
}
