//! Builders for realistic plan requests (test support and the `write_models` example).
//!
//! A plan request quotes many fingerprints of itself; nobody can write those by hand. These
//! builders assemble the family, program, weight schema, catalog, resolutions and policy in
//! Rust, keep every binding of a value identical across nodes, and finally seal the request
//! (`jointplan::request::seal::seal`) so that every derived fingerprint is right.
//!
//! The three shipped models (`models/*/request.json`) are written by
//! `cargo run --example write_models`; `random_chain` builds the proptest requests.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use jointplan::canonical::sha256_hex;
use jointplan::request::seal::seal;
use jointplan::request::*;

/// Parses an id of any id type (fixture ids are literals, so a bad one is a bug here).
pub fn id<T: TryFrom<String, Error = String>>(text: &str) -> T {
    match T::try_from(text.to_owned()) {
        Ok(value) => value,
        Err(problem) => panic!("fixture id: {problem}"),
    }
}

/// A fingerprint placeholder that sealing replaces.
pub fn unsealed() -> Sha256Hex {
    sha256_hex(b"unsealed")
}

/// A stable implementation fingerprint derived from a name.
pub fn implementation(name: &str) -> Sha256Hex {
    sha256_hex(format!("implementation:{name}").as_bytes())
}

/// Linear arena + contiguous view.
pub const LINEAR: StorageProfile = StorageProfile::STATIC_CONTIGUOUS;

/// A fixed-block arena with a paged view of the same block.
pub fn paged(block: u64) -> StorageProfile {
    StorageProfile {
        allocator: StorageAllocator::FixedBlockArena { block_bytes: block },
        view: StorageView::PagedRegions { block_bytes: block },
    }
}

/// `fixed_block(65536)+paged(65536)`, the paged-KV profile of the CUDA and Metal runtimes.
pub fn paged_64k() -> StorageProfile {
    paged(65536)
}

/// A contiguous tensor.
pub fn tensor(dimensions: &[u64], element_type: ElementType) -> TensorSpec {
    TensorSpec {
        dimensions: dimensions.to_vec(),
        element_type,
        layout: TensorLayout::Contiguous,
    }
}

/// One axis constraint from a short spec: a number is exact, anything else a symbol.
pub fn dims(spec: &[&str]) -> Vec<DimensionConstraint> {
    spec.iter()
        .map(|d| match d.parse::<u64>() {
            Ok(n) => DimensionConstraint::Exact(n),
            Err(_) => DimensionConstraint::Symbol((*d).to_owned()),
        })
        .collect()
}

/// A contiguous tensor slot contract.
pub fn slot(
    dimensions: &[&str],
    element_type: ElementType,
    access: TensorAccess,
    alias: AliasPolicy,
) -> TensorContract {
    TensorContract {
        dimensions: dims(dimensions),
        element_types: [element_type].into(),
        layouts: vec![LayoutConstraint::Contiguous],
        access,
        alias,
    }
}

/// A read, no-alias input slot.
pub fn input(dimensions: &[&str], element_type: ElementType) -> TensorContract {
    slot(
        dimensions,
        element_type,
        TensorAccess::Read,
        AliasPolicy::NoAlias,
    )
}

/// A write output slot.
pub fn output(
    dimensions: &[&str],
    element_type: ElementType,
    alias: AliasPolicy,
) -> TensorContract {
    slot(dimensions, element_type, TensorAccess::Write, alias)
}

/// An attribute schema entry.
pub fn attribute(kind: ValueKind, constraint: AttributeConstraint) -> AttributeSpec {
    AttributeSpec {
        value_kind: kind,
        required: true,
        constraint,
    }
}

/// A reduced rational.
pub fn rational(numerator: i64, denominator: u64) -> Rational {
    Rational {
        numerator,
        denominator,
    }
}

/// An operation with the standard oracle (relative tolerance 1/1000) and alignment 16.
pub fn operation(
    operation_id: &str,
    version: ContractVersion,
    inputs: Vec<TensorContract>,
    outputs: Vec<TensorContract>,
    attributes: AttributeSchema,
    workspaces: [Presence; 3],
    capability: &str,
) -> OperationDescriptor {
    OperationDescriptor {
        id: id(operation_id),
        version,
        inputs,
        outputs,
        attributes,
        resources: ResourceRequirements {
            minimum_value_alignment_bytes: 16,
            scratch: workspaces[0],
            binding: workspaces[1],
            persistent: workspaces[2],
        },
        oracle: OracleSpec::RelativeTolerance(rational(1, 1000)),
        provider: ProviderRequirement {
            minimum_version: version,
            required_capabilities: [id(capability)].into(),
        },
    }
}

/// A provider of `operation` on `device` accepting `profiles[(role, ordinal)]` per slot
/// (slots not listed accept linear+contiguous).
pub fn provider(
    operation: &OperationDescriptor,
    provider_id: &str,
    device: &DeviceId,
    estimator: &str,
    special: &[(ValueRole, u32, Vec<StorageProfile>)],
) -> ProviderDescriptor {
    let mut bindings = Vec::new();
    for (role, count) in [
        (ValueRole::Input, operation.inputs.len()),
        (ValueRole::Output, operation.outputs.len()),
    ] {
        for ordinal in 0..count as u32 {
            let accepted = special
                .iter()
                .find(|(r, o, _)| *r == role && *o == ordinal)
                .map(|(_, _, p)| p.clone())
                .unwrap_or_else(|| vec![LINEAR]);
            bindings.push(StorageBindingRequirement {
                role,
                ordinal,
                storage: StorageRequirement {
                    accepted_profiles: accepted,
                },
            });
        }
    }
    ProviderDescriptor {
        provider_id: id(provider_id),
        operation_id: operation.id.clone(),
        operation_fingerprint: unsealed(),
        provider_implementation_fingerprint: implementation(provider_id),
        execution_semantics: ExecutionSemantics::new(ReplayEquivalence::BitwiseEagerEquivalent),
        version: operation.version,
        device_id: device.clone(),
        capabilities: operation.provider.required_capabilities.clone(),
        accepted_weight_formats: BTreeSet::new(),
        accepted_quantization_formats: BTreeSet::new(),
        dynamic_storage_bindings: bindings,
        resource_estimator_id: id(estimator),
        resource_estimator_version: ContractVersion::new(1, 0),
        resource_estimator_implementation_fingerprint: implementation(estimator),
    }
}

/// A workspace requirement in one scope accepting linear+contiguous.
pub fn workspace(
    size_formula: WorkspaceSizeFormula,
    scope: WorkspaceScope,
) -> WorkspaceRequirement {
    WorkspaceRequirement {
        size_formula,
        alignment_bytes: 256,
        scope,
        storage: StorageRequirement {
            accepted_profiles: vec![LINEAR],
        },
    }
}

/// The resource estimate of `provider` (fingerprints sealed later), value alignment 256.
pub fn estimate(
    provider: &ProviderDescriptor,
    scratch: Option<WorkspaceRequirement>,
    binding: Option<WorkspaceRequirement>,
    persistent: Option<WorkspaceRequirement>,
) -> ProviderResourcePlan {
    ProviderResourcePlan {
        provider_id: provider.provider_id.clone(),
        estimator_id: provider.resource_estimator_id.clone(),
        estimator_version: provider.resource_estimator_version,
        estimator_implementation_fingerprint: provider
            .resource_estimator_implementation_fingerprint
            .clone(),
        estimator_input_fingerprint: unsealed(),
        estimate_fingerprint: unsealed(),
        value_alignment_bytes: 256,
        scratch,
        binding,
        persistent,
    }
}

#[derive(Clone)]
struct BoundValue {
    tensor: TensorSpec,
    usage: BufferUsage,
    weight: Option<ResolvedWeightBinding>,
    storage: ValueStorage,
}

/// How an output value is stored.
pub enum Placement {
    /// On its own resource `resource/activation/<value without the value. prefix>`.
    Own,
    /// In place of this input value (an exact alias).
    InPlaceOf(&'static str),
}

/// Assembles a family, its program and the node resolutions, value by value.
pub struct RequestBuilder {
    family_id: ModelFamilyId,
    config: serde_json::Value,
    weight_format: WeightFormatId,
    weight_layout: WeightLayoutId,
    components: Vec<WeightComponentSpec>,
    tensors: Vec<WeightTensorSpec>,
    inputs: Vec<ProgramValueId>,
    outputs: Vec<ProgramValueId>,
    states: Vec<StateSpec>,
    weights: Vec<WeightReference>,
    blocks: Vec<ProgramBlock>,
    values: BTreeMap<String, BoundValue>,
    resolutions: Vec<NodeResolution>,
    /// The catalog (operations and providers are added by the caller).
    pub catalog: CapabilityCatalog,
    /// The policy.
    pub policy: RuntimePolicy,
    /// Retained values.
    pub retention: BTreeSet<ProgramValueId>,
}

fn resource_for(prefix: &str, value: &str) -> ResourceId {
    let short = value
        .strip_prefix(&format!("value.{prefix}."))
        .or_else(|| value.strip_prefix("value."))
        .unwrap_or(value);
    id(&format!("resource/{prefix}/{short}"))
}

fn single(
    resource: ResourceId,
    offset: u64,
    length: u64,
    element_type: ElementType,
) -> ValueStorage {
    ValueStorage {
        components: vec![StorageComponent {
            component_id: None,
            resource_id: resource,
            offset_bytes: offset,
            length_bytes: length,
            element_type,
        }],
    }
}

impl RequestBuilder {
    /// A builder for one family on one device.
    pub fn new(
        family_id: &str,
        config: serde_json::Value,
        weight_format: &str,
        weight_layout: &str,
        device: Device,
        policy: RuntimePolicy,
    ) -> Self {
        let engine_id: ProviderId = id(if device.id.as_str().contains("cuda") {
            "provider.engine.cuda.vnext"
        } else {
            "provider.engine.reference"
        });
        let engine = EngineProviderDescriptor {
            provider_id: engine_id.clone(),
            contract_version: ContractVersion::new(1, 0),
            implementation_fingerprint: implementation(engine_id.as_str()),
            device_id: device.id.clone(),
            capabilities: BTreeSet::new(),
        };
        Self {
            family_id: id(family_id),
            config,
            weight_format: id(weight_format),
            weight_layout: id(weight_layout),
            components: Vec::new(),
            tensors: Vec::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            states: Vec::new(),
            weights: Vec::new(),
            blocks: Vec::new(),
            values: BTreeMap::new(),
            resolutions: Vec::new(),
            catalog: CapabilityCatalog {
                device,
                operations: BTreeMap::new(),
                providers: BTreeMap::new(),
                engine_providers: [(engine_id, engine)].into(),
                weight_materializers: BTreeMap::new(),
            },
            policy,
            retention: BTreeSet::new(),
        }
    }

    /// Adds an operation and its providers (sorted by provider id here).
    pub fn add_operation(
        &mut self,
        operation: OperationDescriptor,
        mut providers: Vec<ProviderDescriptor>,
    ) {
        providers.sort_by(|a, b| a.provider_id.cmp(&b.provider_id));
        self.catalog
            .providers
            .insert(operation.id.clone(), providers);
        self.catalog
            .operations
            .insert(operation.id.clone(), operation);
    }

    /// Declares a program input activation.
    pub fn program_input(&mut self, value: &str, tensor: TensorSpec) {
        let bytes = tensor.byte_len().unwrap_or(0);
        let element = tensor.element_type;
        self.inputs.push(id(value));
        self.values.insert(
            value.to_owned(),
            BoundValue {
                tensor,
                usage: BufferUsage::Activations,
                weight: None,
                storage: single(resource_for("activation", value), 0, bytes, element),
            },
        );
    }

    /// Declares a program output (it must be produced by some node).
    pub fn program_output(&mut self, value: &str) {
        self.outputs.push(id(value));
    }

    /// Declares a dense weight with one `values` component on its own resource.
    pub fn dense_weight(
        &mut self,
        weight: &str,
        value: &str,
        dimensions: &[u64],
        element_type: ElementType,
        external_name: &str,
    ) {
        let weight_id: WeightId = id(weight);
        let component_id: WeightId = id(&format!("{weight}.values"));
        let spec = tensor(dimensions, element_type);
        let component = WeightComponentSpec {
            id: component_id.clone(),
            role: WeightComponentRole::Values,
            external_names: vec![external_name.to_owned()],
            dimensions: dimensions.to_vec(),
            encoding: WeightEncoding::Dense { element_type },
            required: true,
        };
        let bytes = component.physical_bytes().unwrap_or(0);
        self.components.push(component);
        self.tensors.push(WeightTensorSpec {
            id: weight_id.clone(),
            dimensions: dimensions.to_vec(),
            logical_element_type: element_type,
            components: vec![component_id.clone()],
            required: true,
        });
        self.weights.push(WeightReference {
            weight_id,
            value_id: id(value),
            tensor: spec.clone(),
        });
        self.values.insert(
            value.to_owned(),
            BoundValue {
                tensor: spec,
                usage: BufferUsage::Weights,
                weight: None, // resolved at finish, from the sorted schema
                storage: ValueStorage {
                    components: vec![StorageComponent {
                        component_id: Some(component_id),
                        resource_id: resource_for("weight", value),
                        offset_bytes: 0,
                        length_bytes: bytes,
                        element_type,
                    }],
                },
            },
        );
    }

    /// Declares a state stored at `offset` of `resource`.
    #[allow(clippy::too_many_arguments)]
    pub fn state(
        &mut self,
        state: &str,
        value: &str,
        spec: TensorSpec,
        lifetime: StateLifetime,
        capacity_demand: StateCapacityDemand,
        initialization: StateInitialization,
        resource: &str,
        offset: u64,
    ) {
        let bytes = spec.byte_len().unwrap_or(0);
        let element = spec.element_type;
        self.states.push(StateSpec {
            id: id(state),
            value_id: id(value),
            tensor: spec.clone(),
            lifetime,
            capacity_demand,
            initialization,
        });
        self.values.insert(
            value.to_owned(),
            BoundValue {
                tensor: spec,
                usage: BufferUsage::State,
                weight: None,
                storage: single(id(resource), offset, bytes, element),
            },
        );
    }

    /// Adds a node: its program node, its bindings (taken from the values already declared,
    /// outputs declared here) and its resolution.
    #[allow(clippy::too_many_arguments)]
    pub fn node(
        &mut self,
        block: &str,
        node_id: &str,
        operation_id: &str,
        attributes: BTreeMap<AttributeId, SemanticValue>,
        work_value: Option<&str>,
        inputs: &[&str],
        outputs: &[(&str, TensorSpec, Placement)],
        preferred: Option<&str>,
        candidates: Vec<ProviderResourcePlan>,
    ) {
        let operation = match self
            .catalog
            .operations
            .get(&id::<OperationId>(operation_id))
        {
            Some(op) => op.clone(),
            None => panic!("fixture: operation {operation_id} not added"),
        };
        let mut values = Vec::new();
        for (ordinal, value) in inputs.iter().enumerate() {
            let bound = match self.values.get(*value) {
                Some(b) => b.clone(),
                None => panic!("fixture: {node_id} reads undeclared {value}"),
            };
            let contract = &operation.inputs[ordinal];
            values.push(ValueBinding {
                value_id: id(value),
                role: ValueRole::Input,
                ordinal: ordinal as u32,
                tensor: bound.tensor,
                access: contract.access,
                alias: contract.alias,
                usage: bound.usage,
                weight: bound.weight,
                storage: bound.storage,
            });
        }
        for (ordinal, (value, spec, placement)) in outputs.iter().enumerate() {
            let storage = match placement {
                Placement::Own => single(
                    resource_for("activation", value),
                    0,
                    spec.byte_len().unwrap_or(0),
                    spec.element_type,
                ),
                Placement::InPlaceOf(source) => match self.values.get(*source) {
                    Some(b) => b.storage.clone(),
                    None => panic!("fixture: {node_id} aliases undeclared {source}"),
                },
            };
            let contract = &operation.outputs[ordinal];
            self.values.insert(
                (*value).to_owned(),
                BoundValue {
                    tensor: spec.clone(),
                    usage: BufferUsage::Activations,
                    weight: None,
                    storage: storage.clone(),
                },
            );
            values.push(ValueBinding {
                value_id: id(value),
                role: ValueRole::Output,
                ordinal: ordinal as u32,
                tensor: spec.clone(),
                access: contract.access,
                alias: contract.alias,
                usage: BufferUsage::Activations,
                weight: None,
                storage,
            });
        }
        let node = ProgramNode {
            id: id(node_id),
            operation_id: operation.id.clone(),
            required_version: operation.version,
            work: match work_value {
                Some(value) => WorkSpec::Tokens {
                    value_id: id(value),
                    axis: 0,
                },
                None => WorkSpec::Fixed,
            },
            inputs: inputs.iter().map(|v| id(v)).collect(),
            outputs: outputs.iter().map(|(v, _, _)| id(v)).collect(),
            attributes,
        };
        match self.blocks.iter_mut().find(|b| b.id == block) {
            Some(b) => b.nodes.push(node),
            None => self.blocks.push(ProgramBlock {
                id: block.to_owned(),
                nodes: vec![node],
            }),
        }
        let mut candidates = candidates;
        candidates.sort_by(|a, b| a.provider_id.cmp(&b.provider_id));
        self.resolutions.push(NodeResolution {
            node_id: id(node_id),
            values,
            required_capabilities: BTreeSet::new(),
            preferred_provider: preferred.map(id),
            provider_resource_candidates: candidates,
            provider_resolution_rejections: BTreeMap::new(),
        });
    }

    /// Records a resolution-local `storage_incompatible` rejection of `provider` on node
    /// `node_id` (what the reference's `PlanNodeResolution::resolve` records for a provider
    /// whose slot has no profile the policy allows and the device offers).
    pub fn reject_for_storage(&mut self, node_id: &str, provider: &str, resources: &[&str]) {
        let node: NodeId = id(node_id);
        match self.resolutions.iter_mut().find(|r| r.node_id == node) {
            Some(resolution) => {
                resolution.provider_resolution_rejections.insert(
                    id(provider),
                    ResolutionRejection::StorageIncompatible {
                        resource_ids: resources.iter().map(|r| id(r)).collect(),
                    },
                );
            }
            None => panic!("fixture: no resolution of {node_id} to reject {provider} on"),
        }
    }

    /// The sealed request.
    pub fn finish(mut self) -> PlanRequest {
        self.components.sort_by(|a, b| a.id.cmp(&b.id));
        self.tensors.sort_by(|a, b| a.id.cmp(&b.id));
        self.weights.sort_by(|a, b| a.weight_id.cmp(&b.weight_id));
        self.states.sort_by(|a, b| a.id.cmp(&b.id));
        let schema = WeightSchema {
            format_id: self.weight_format.clone(),
            layout_id: self.weight_layout.clone(),
            version: ContractVersion::new(1, 0),
            components: self.components,
            tensors: self.tensors,
        };
        let weight_of: BTreeMap<ProgramValueId, WeightId> = self
            .weights
            .iter()
            .map(|w| (w.value_id.clone(), w.weight_id.clone()))
            .collect();
        for resolution in &mut self.resolutions {
            for binding in &mut resolution.values {
                if let Some(weight) = weight_of.get(&binding.value_id) {
                    binding.weight = schema.resolved_binding(weight);
                }
            }
        }
        // Accepted weight formats: every provider reads the family's format.
        for providers in self.catalog.providers.values_mut() {
            for provider in providers {
                provider
                    .accepted_weight_formats
                    .insert(self.weight_format.clone());
            }
        }
        let mut request = PlanRequest {
            family: ModelFamily {
                family_id: self.family_id.clone(),
                canonical_config: self.config,
                weight_schema: schema,
                program: ModelProgram {
                    family_id: self.family_id,
                    inputs: self.inputs,
                    blocks: self.blocks,
                    states: self.states,
                    weights: self.weights,
                    outputs: self.outputs,
                },
            },
            catalog: self.catalog,
            policy: self.policy,
            node_resolutions: self.resolutions,
            completion_retention: CompletionRetention {
                values: self.retention,
            },
            execution_weights: None,
        };
        if let Err(err) = seal(&mut request) {
            panic!("fixture does not seal: {err}");
        }
        request
    }
}

/// A device with the given memory, capabilities and the CUDA profile set.
pub fn device(device_id: &str, class: DeviceClass, memory: u64, capabilities: &[&str]) -> Device {
    Device {
        id: id(device_id),
        class,
        ordinal: 0,
        total_memory_bytes: memory,
        runtime_implementation_fingerprint: implementation(device_id),
        capabilities: capabilities.iter().map(|c| id(c)).collect(),
        dynamic_storage_profiles: [LINEAR, paged_64k()].into(),
    }
}

/// A policy with the given capacity, reserve and ceilings, profile order [linear, paged 64K].
pub fn policy(
    policy_id: &str,
    capacity: u64,
    reserve: u64,
    sequences: u32,
    tokens: u64,
) -> RuntimePolicy {
    RuntimePolicy {
        policy_id: id(policy_id),
        version: ContractVersion::new(1, 0),
        memory_capacity_bytes: capacity,
        memory_reserve_bytes: reserve,
        maximum_active_sequences: sequences,
        maximum_scheduled_tokens: tokens,
        execution_determinism: DeterminismRequirement::BitwiseSameRuntime,
        dynamic_storage_profile_order: vec![LINEAR, paged_64k()],
        reusable_execution: None,
        wire_limits: None,
    }
}

/// Attribute values from (name, value) pairs.
pub fn attrs(pairs: &[(&str, SemanticValue)]) -> BTreeMap<AttributeId, SemanticValue> {
    pairs.iter().map(|(k, v)| (id(k), v.clone())).collect()
}

/// Attribute schema from (name, kind, constraint) triples.
pub fn schema(entries: &[(&str, ValueKind, AttributeConstraint)]) -> AttributeSchema {
    entries
        .iter()
        .map(|(k, kind, c)| (id(k), attribute(*kind, c.clone())))
        .collect()
}
