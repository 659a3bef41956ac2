//! A small, complete and valid plan request for the request tests, built in code so that
//! every derived fingerprint is computed by the library itself, plus [`reseal`] to recompute
//! them after a test edits a field that feeds one.
//!
//! The request: family `family.test` with one block of two nodes. `node.main` runs
//! `operation.main` over the token ids, a dense f16 weight and a token-scaled KV state
//! (read-write); `node.residual` adds the hidden activation to itself in place
//! (`operation.residual_add`, output may alias input 0). Two providers serve
//! `operation.main`, one `operation.residual_add`.
#![allow(dead_code, clippy::too_many_arguments)]

use std::collections::{BTreeMap, BTreeSet};

use jointplan::request::fingerprints::{
    estimate_fingerprint, family_fingerprint, identity_execution_weights,
    node_estimator_input_fingerprint, operation_fingerprint, reusable_bucket_id,
    weight_schema_fingerprint,
};
use jointplan::request::*;

/// Parses an id or fails the test.
pub fn id<T: TryFrom<String, Error = String>>(text: &str) -> T {
    T::try_from(text.to_owned()).unwrap()
}

/// A fingerprint of one repeated hex digit.
pub fn hex(digit: char) -> Sha256Hex {
    Sha256Hex::new(digit.to_string().repeat(64)).unwrap()
}

/// Linear arena, contiguous view.
pub fn linear() -> StorageProfile {
    StorageProfile::STATIC_CONTIGUOUS
}

/// Fixed 4096-byte blocks, paged view.
pub fn paged() -> StorageProfile {
    StorageProfile {
        allocator: StorageAllocator::FixedBlockArena { block_bytes: 4096 },
        view: StorageView::PagedRegions { block_bytes: 4096 },
    }
}

/// A contiguous tensor.
pub fn tensor(dimensions: &[u64], element_type: ElementType) -> TensorSpec {
    TensorSpec {
        dimensions: dimensions.to_vec(),
        element_type,
        layout: TensorLayout::Contiguous,
    }
}

fn contract(
    dimensions: Vec<DimensionConstraint>,
    element_type: ElementType,
    access: TensorAccess,
    alias: AliasPolicy,
) -> TensorContract {
    TensorContract {
        dimensions,
        element_types: [element_type].into(),
        layouts: vec![LayoutConstraint::Contiguous],
        access,
        alias,
    }
}

fn symbol(name: &str) -> DimensionConstraint {
    DimensionConstraint::Symbol(name.to_owned())
}

fn weight_schema() -> WeightSchema {
    WeightSchema {
        format_id: id("weight-format.dense"),
        layout_id: id("weight-layout.dense"),
        version: ContractVersion::new(1, 0),
        components: vec![WeightComponentSpec {
            id: id("weight.matrix"),
            role: WeightComponentRole::Values,
            external_names: vec!["model.layers.0.matrix.weight".to_owned()],
            dimensions: vec![8, 8],
            encoding: WeightEncoding::Dense {
                element_type: ElementType::F16,
            },
            required: true,
        }],
        tensors: vec![WeightTensorSpec {
            id: id("weight.matrix"),
            dimensions: vec![8, 8],
            logical_element_type: ElementType::F16,
            components: vec![id("weight.matrix")],
            required: true,
        }],
    }
}

fn program() -> ModelProgram {
    let mut attributes = BTreeMap::new();
    attributes.insert(
        id("epsilon"),
        SemanticValue::Rational(Rational {
            numerator: 1,
            denominator: 1_000_000,
        }),
    );
    ModelProgram {
        family_id: id("family.test"),
        inputs: vec![id("value.input")],
        blocks: vec![ProgramBlock {
            id: "block.decoder".to_owned(),
            nodes: vec![
                ProgramNode {
                    id: id("node.main"),
                    operation_id: id("operation.main"),
                    required_version: ContractVersion::new(1, 0),
                    work: WorkSpec::Tokens {
                        value_id: id("value.input"),
                        axis: 0,
                    },
                    inputs: vec![id("value.input"), id("value.weight"), id("value.state")],
                    outputs: vec![id("value.hidden")],
                    attributes,
                },
                ProgramNode {
                    id: id("node.residual"),
                    operation_id: id("operation.residual_add"),
                    required_version: ContractVersion::new(1, 0),
                    work: WorkSpec::Tokens {
                        value_id: id("value.hidden"),
                        axis: 0,
                    },
                    inputs: vec![id("value.hidden")],
                    outputs: vec![id("value.output")],
                    attributes: BTreeMap::new(),
                },
            ],
        }],
        states: vec![StateSpec {
            id: id("state.cache"),
            value_id: id("value.state"),
            tensor: tensor(&[2, 2, 8], ElementType::F16),
            lifetime: StateLifetime::Sequence,
            capacity_demand: StateCapacityDemand::TokenScaled {
                bytes_per_token: 64,
                maximum_tokens: 256,
            },
            initialization: StateInitialization::None,
        }],
        weights: vec![WeightReference {
            weight_id: id("weight.matrix"),
            value_id: id("value.weight"),
            tensor: tensor(&[8, 8], ElementType::F16),
        }],
        outputs: vec![id("value.output")],
    }
}

fn operations() -> BTreeMap<OperationId, OperationDescriptor> {
    let mut epsilon = BTreeMap::new();
    epsilon.insert(
        id("epsilon"),
        AttributeSpec {
            value_kind: ValueKind::Rational,
            required: true,
            constraint: AttributeConstraint::None,
        },
    );
    let main = OperationDescriptor {
        id: id("operation.main"),
        version: ContractVersion::new(1, 0),
        inputs: vec![
            contract(
                vec![symbol("tokens")],
                ElementType::U32,
                TensorAccess::Read,
                AliasPolicy::NoAlias,
            ),
            contract(
                vec![symbol("hidden_size"), symbol("hidden_size")],
                ElementType::F16,
                TensorAccess::Read,
                AliasPolicy::NoAlias,
            ),
            contract(
                vec![
                    DimensionConstraint::Exact(2),
                    DimensionConstraint::Range {
                        minimum: 1,
                        maximum: 64,
                    },
                    symbol("hidden_size"),
                ],
                ElementType::F16,
                TensorAccess::ReadWrite,
                AliasPolicy::NoAlias,
            ),
        ],
        outputs: vec![contract(
            vec![symbol("tokens"), symbol("hidden_size")],
            ElementType::F16,
            TensorAccess::Write,
            AliasPolicy::NoAlias,
        )],
        attributes: epsilon,
        resources: ResourceRequirements {
            minimum_value_alignment_bytes: 16,
            scratch: Presence::Optional,
            binding: Presence::Forbidden,
            persistent: Presence::Forbidden,
        },
        oracle: OracleSpec::RelativeTolerance(Rational {
            numerator: 1,
            denominator: 1000,
        }),
        provider: ProviderRequirement {
            minimum_version: ContractVersion::new(1, 0),
            required_capabilities: [id("capability.compute")].into(),
        },
    };
    let residual = OperationDescriptor {
        id: id("operation.residual_add"),
        version: ContractVersion::new(1, 0),
        inputs: vec![contract(
            vec![symbol("tokens"), symbol("hidden_size")],
            ElementType::F16,
            TensorAccess::Read,
            AliasPolicy::NoAlias,
        )],
        outputs: vec![contract(
            vec![symbol("tokens"), symbol("hidden_size")],
            ElementType::F16,
            TensorAccess::Write,
            AliasPolicy::MayAlias { tensor_index: 0 },
        )],
        attributes: BTreeMap::new(),
        resources: ResourceRequirements {
            minimum_value_alignment_bytes: 16,
            scratch: Presence::Forbidden,
            binding: Presence::Forbidden,
            persistent: Presence::Forbidden,
        },
        oracle: OracleSpec::Exact,
        provider: ProviderRequirement {
            minimum_version: ContractVersion::new(1, 0),
            required_capabilities: BTreeSet::new(),
        },
    };
    [(main.id.clone(), main), (residual.id.clone(), residual)].into()
}

fn provider(
    operation: &str,
    provider: &str,
    slots: &[(ValueRole, u32, Vec<StorageProfile>)],
) -> ProviderDescriptor {
    ProviderDescriptor {
        provider_id: id(provider),
        operation_id: id(operation),
        operation_fingerprint: hex('0'),
        provider_implementation_fingerprint: hex('2'),
        execution_semantics: ExecutionSemantics::new(ReplayEquivalence::BitwiseEagerEquivalent),
        version: ContractVersion::new(1, 0),
        device_id: id("device.reference.0"),
        capabilities: [id("capability.compute")].into(),
        accepted_weight_formats: [id("weight-format.dense")].into(),
        accepted_quantization_formats: BTreeSet::new(),
        dynamic_storage_bindings: slots
            .iter()
            .map(|(role, ordinal, profiles)| StorageBindingRequirement {
                role: *role,
                ordinal: *ordinal,
                storage: StorageRequirement {
                    accepted_profiles: profiles.clone(),
                },
            })
            .collect(),
        resource_estimator_id: id("resource-estimator.reference"),
        resource_estimator_version: ContractVersion::new(1, 0),
        resource_estimator_implementation_fingerprint: hex('3'),
    }
}

fn catalog() -> CapabilityCatalog {
    let main_slots = [
        (ValueRole::Input, 0, vec![linear()]),
        (ValueRole::Input, 2, vec![linear(), paged()]),
        (ValueRole::Output, 0, vec![linear()]),
    ];
    let residual_slots = [
        (ValueRole::Input, 0, vec![linear()]),
        (ValueRole::Output, 0, vec![linear()]),
    ];
    let mut providers = BTreeMap::new();
    providers.insert(
        id("operation.main"),
        vec![
            provider(
                "operation.main",
                "provider.operation.reference",
                &main_slots,
            ),
            provider(
                "operation.main",
                "provider.operation.secondary",
                &main_slots,
            ),
        ],
    );
    providers.insert(
        id("operation.residual_add"),
        vec![provider(
            "operation.residual_add",
            "provider.operation.reference",
            &residual_slots,
        )],
    );
    let engine = EngineProviderDescriptor {
        provider_id: id("provider.engine.reference"),
        contract_version: ContractVersion::new(1, 0),
        implementation_fingerprint: hex('4'),
        device_id: id("device.reference.0"),
        capabilities: [id("capability.compute")].into(),
    };
    CapabilityCatalog {
        device: Device {
            id: id("device.reference.0"),
            class: DeviceClass::Reference,
            ordinal: 0,
            total_memory_bytes: 1 << 20,
            runtime_implementation_fingerprint: hex('1'),
            capabilities: [
                id("capability.compute"),
                id("capability.device.reusable_execution.v1"),
            ]
            .into(),
            dynamic_storage_profiles: [linear(), paged()].into(),
        },
        operations: operations(),
        providers,
        engine_providers: [(engine.provider_id.clone(), engine)].into(),
        weight_materializers: BTreeMap::new(),
    }
}

fn bucket(class: &str, sequences: u32, tokens: u64, pages: u64) -> ReusableExecutionBucket {
    ReusableExecutionBucket {
        bucket_id: String::new(),
        class_id: id(class),
        capacity: BucketCapacity {
            maximum_sequences: sequences,
            maximum_tokens: tokens,
            maximum_pages: pages,
        },
    }
}

fn policy() -> RuntimePolicy {
    RuntimePolicy {
        policy_id: id("runtime-policy.test"),
        version: ContractVersion::new(1, 0),
        memory_capacity_bytes: 1 << 20,
        memory_reserve_bytes: 128,
        maximum_active_sequences: 3,
        maximum_scheduled_tokens: 4096,
        execution_determinism: DeterminismRequirement::BitwiseSameRuntime,
        dynamic_storage_profile_order: vec![linear(), paged()],
        reusable_execution: Some(ReusableExecutionPolicy {
            maximum_reusable_lanes: 2,
            buckets: vec![
                bucket("packed-prefill", 1, 64, 1),
                bucket("uniform-query", 1, 1, 1),
                bucket("uniform-query", 2, 2, 1),
            ],
        }),
        wire_limits: None,
    }
}

/// One plain storage component.
pub fn component(
    resource: &str,
    offset: u64,
    length: u64,
    element_type: ElementType,
) -> StorageComponent {
    StorageComponent {
        component_id: None,
        resource_id: id(resource),
        offset_bytes: offset,
        length_bytes: length,
        element_type,
    }
}

fn binding(
    value: &str,
    role: ValueRole,
    ordinal: u32,
    tensor: TensorSpec,
    access: TensorAccess,
    alias: AliasPolicy,
    usage: BufferUsage,
    storage: StorageComponent,
) -> ValueBinding {
    ValueBinding {
        value_id: id(value),
        role,
        ordinal,
        tensor,
        access,
        alias,
        usage,
        weight: None,
        storage: ValueStorage {
            components: vec![storage],
        },
    }
}

fn candidate(provider: &str, scratch: Option<WorkspaceRequirement>) -> ProviderResourcePlan {
    ProviderResourcePlan {
        provider_id: id(provider),
        estimator_id: id("resource-estimator.reference"),
        estimator_version: ContractVersion::new(1, 0),
        estimator_implementation_fingerprint: hex('3'),
        estimator_input_fingerprint: hex('0'),
        estimate_fingerprint: hex('0'),
        value_alignment_bytes: 16,
        scratch,
        binding: None,
        persistent: None,
    }
}

fn resolutions(schema: &WeightSchema) -> Vec<NodeResolution> {
    use ElementType::{F16, U32};
    use TensorAccess::{Read, ReadWrite, Write};
    use ValueRole::{Input, Output};
    let mut weight = binding(
        "value.weight",
        Input,
        1,
        tensor(&[8, 8], F16),
        Read,
        AliasPolicy::NoAlias,
        BufferUsage::Weights,
        StorageComponent {
            component_id: Some(id("weight.matrix")),
            ..component("resource/weight-matrix", 0, 128, F16)
        },
    );
    weight.weight = schema.resolved_binding(&id("weight.matrix"));
    let hidden = binding(
        "value.hidden",
        Output,
        0,
        tensor(&[4, 8], F16),
        Write,
        AliasPolicy::NoAlias,
        BufferUsage::Activations,
        component("resource/activation-a", 0, 64, F16),
    );
    let main = NodeResolution {
        node_id: id("node.main"),
        values: vec![
            binding(
                "value.input",
                Input,
                0,
                tensor(&[4], U32),
                Read,
                AliasPolicy::NoAlias,
                BufferUsage::Activations,
                component("resource/activation-input", 0, 16, U32),
            ),
            weight,
            binding(
                "value.state",
                Input,
                2,
                tensor(&[2, 2, 8], F16),
                ReadWrite,
                AliasPolicy::NoAlias,
                BufferUsage::State,
                component("resource/shared-state", 0, 64, F16),
            ),
            hidden.clone(),
        ],
        required_capabilities: BTreeSet::new(),
        preferred_provider: Some(id("provider.operation.reference")),
        provider_resource_candidates: vec![
            candidate(
                "provider.operation.reference",
                Some(WorkspaceRequirement {
                    size_formula: WorkspaceSizeFormula::Affine {
                        fixed_bytes: 64,
                        bytes_per_sequence: 0,
                        bytes_per_token: 16,
                    },
                    alignment_bytes: 16,
                    scope: WorkspaceScope::Invocation,
                    storage: StorageRequirement {
                        accepted_profiles: vec![linear()],
                    },
                }),
            ),
            candidate("provider.operation.secondary", None),
        ],
        provider_resolution_rejections: BTreeMap::new(),
    };
    let residual = NodeResolution {
        node_id: id("node.residual"),
        values: vec![
            ValueBinding {
                role: Input,
                ordinal: 0,
                access: Read,
                ..hidden.clone()
            },
            ValueBinding {
                value_id: id("value.output"),
                alias: AliasPolicy::MayAlias { tensor_index: 0 },
                ..hidden
            },
        ],
        required_capabilities: BTreeSet::new(),
        preferred_provider: None,
        provider_resource_candidates: vec![candidate("provider.operation.reference", None)],
        provider_resolution_rejections: BTreeMap::new(),
    };
    vec![main, residual]
}

/// The valid request, sealed.
pub fn valid_request() -> PlanRequest {
    let schema = weight_schema();
    let mut request = PlanRequest {
        family: ModelFamily {
            family_id: id("family.test"),
            canonical_config: serde_json::json!({"hidden_size": 8, "num_hidden_layers": 1}),
            weight_schema: schema.clone(),
            program: program(),
        },
        catalog: catalog(),
        policy: policy(),
        node_resolutions: resolutions(&schema),
        completion_retention: CompletionRetention {
            values: [id("value.hidden")].into(),
        },
        execution_weights: Some(identity_execution_weights(&schema).unwrap()),
    };
    reseal(&mut request);
    request
}

/// Recomputes every derived fingerprint of `request` (what `jointplan seal` does): operation
/// fingerprints quoted by providers, execution contract fingerprints, the execution weights'
/// source schema fingerprint, reusable bucket ids, estimator input and estimate fingerprints.
pub fn reseal(request: &mut PlanRequest) {
    let catalog = &mut request.catalog;
    for (op_id, row) in catalog.providers.iter_mut() {
        let fingerprint = catalog
            .operations
            .get(op_id)
            .map(|op| operation_fingerprint(op).unwrap());
        for provider in row {
            if let Some(fingerprint) = &fingerprint {
                provider.operation_fingerprint = fingerprint.clone();
            }
            provider.execution_semantics.contract_fingerprint =
                provider.execution_semantics.expected_fingerprint();
        }
    }
    if let Some(plan) = &mut request.execution_weights {
        plan.source_schema_fingerprint =
            weight_schema_fingerprint(&request.family.weight_schema).unwrap();
    }
    if let Some(reusable) = &mut request.policy.reusable_execution {
        for bucket in &mut reusable.buckets {
            bucket.bucket_id = reusable_bucket_id(&bucket.class_id, &bucket.capacity).unwrap();
        }
    }
    let family = family_fingerprint(&request.family).unwrap();
    let nodes: BTreeMap<_, _> = request
        .family
        .program
        .nodes()
        .map(|n| (n.id.clone(), n.clone()))
        .collect();
    for resolution in &mut request.node_resolutions {
        let node = nodes.get(&resolution.node_id);
        let operation = node.and_then(|n| request.catalog.operations.get(&n.operation_id));
        let fingerprints: Vec<Sha256Hex> = resolution
            .provider_resource_candidates
            .iter()
            .map(|c| match (node, operation) {
                (Some(node), Some(operation)) => node_estimator_input_fingerprint(
                    &family,
                    operation,
                    &operation_fingerprint(operation).unwrap(),
                    node,
                    resolution,
                    &c.provider_id,
                )
                .unwrap(),
                _ => c.estimator_input_fingerprint.clone(),
            })
            .collect();
        for (candidate, input) in resolution
            .provider_resource_candidates
            .iter_mut()
            .zip(fingerprints)
        {
            candidate.estimator_input_fingerprint = input;
            candidate.estimate_fingerprint = estimate_fingerprint(candidate).unwrap();
        }
    }
}

/// Reseals only the estimate fingerprints (keeps a deliberately broken field elsewhere).
pub fn reseal_estimates(request: &mut PlanRequest) {
    for resolution in &mut request.node_resolutions {
        for candidate in &mut resolution.provider_resource_candidates {
            candidate.estimate_fingerprint = estimate_fingerprint(candidate).unwrap();
        }
    }
}

/// The smallest realistic request, used as the example of `docs/format.md`: one final RMS
/// norm over the hidden states with a dense f16 norm weight, one provider, one engine.
pub fn tiny_request() -> PlanRequest {
    use ElementType::F16;
    let schema = WeightSchema {
        format_id: id("weight-format.safetensors.dense"),
        layout_id: id("weight-layout.dense"),
        version: ContractVersion::new(1, 0),
        components: vec![WeightComponentSpec {
            id: id("weight.final_norm"),
            role: WeightComponentRole::Values,
            external_names: vec!["model.norm.weight".to_owned()],
            dimensions: vec![64],
            encoding: WeightEncoding::Dense { element_type: F16 },
            required: true,
        }],
        tensors: vec![WeightTensorSpec {
            id: id("weight.final_norm"),
            dimensions: vec![64],
            logical_element_type: F16,
            components: vec![id("weight.final_norm")],
            required: true,
        }],
    };
    let program = ModelProgram {
        family_id: id("family.tiny"),
        inputs: vec![id("value.input.hidden")],
        blocks: vec![ProgramBlock {
            id: "block.head".to_owned(),
            nodes: vec![ProgramNode {
                id: id("node.final_norm"),
                operation_id: id("operation.rms_norm"),
                required_version: ContractVersion::new(1, 0),
                work: WorkSpec::Tokens {
                    value_id: id("value.input.hidden"),
                    axis: 0,
                },
                inputs: vec![id("value.input.hidden"), id("value.weight.final_norm")],
                outputs: vec![id("value.output.hidden")],
                attributes: [(
                    id("epsilon"),
                    SemanticValue::Rational(Rational {
                        numerator: 1,
                        denominator: 1_000_000,
                    }),
                )]
                .into(),
            }],
        }],
        states: vec![],
        weights: vec![WeightReference {
            weight_id: id("weight.final_norm"),
            value_id: id("value.weight.final_norm"),
            tensor: tensor(&[64], F16),
        }],
        outputs: vec![id("value.output.hidden")],
    };
    let activation = |dims: &[u64]| {
        contract(
            dims.iter()
                .map(|d| symbol(if *d == 0 { "tokens" } else { "hidden_size" }))
                .collect(),
            F16,
            TensorAccess::Read,
            AliasPolicy::NoAlias,
        )
    };
    let operation = OperationDescriptor {
        id: id("operation.rms_norm"),
        version: ContractVersion::new(1, 0),
        inputs: vec![activation(&[0, 1]), activation(&[1])],
        outputs: vec![TensorContract {
            access: TensorAccess::Write,
            ..activation(&[0, 1])
        }],
        attributes: [(
            id("epsilon"),
            AttributeSpec {
                value_kind: ValueKind::Rational,
                required: true,
                constraint: AttributeConstraint::None,
            },
        )]
        .into(),
        resources: ResourceRequirements {
            minimum_value_alignment_bytes: 16,
            scratch: Presence::Forbidden,
            binding: Presence::Forbidden,
            persistent: Presence::Forbidden,
        },
        oracle: OracleSpec::RelativeTolerance(Rational {
            numerator: 1,
            denominator: 1000,
        }),
        provider: ProviderRequirement {
            minimum_version: ContractVersion::new(1, 0),
            required_capabilities: [id("capability.operation.rms_norm.f16")].into(),
        },
    };
    let mut provider = provider(
        "operation.rms_norm",
        "provider.reference.rms_norm.f16",
        &[
            (ValueRole::Input, 0, vec![linear()]),
            (ValueRole::Output, 0, vec![linear()]),
        ],
    );
    provider.capabilities = [id("capability.operation.rms_norm.f16")].into();
    provider.accepted_weight_formats = [id("weight-format.safetensors.dense")].into();
    provider.resource_estimator_id = id("resource-estimator.reference.rms_norm.f16");
    let engine = EngineProviderDescriptor {
        provider_id: id("provider.engine.reference"),
        contract_version: ContractVersion::new(1, 0),
        implementation_fingerprint: hex('4'),
        device_id: id("device.reference.0"),
        capabilities: BTreeSet::new(),
    };
    let catalog = CapabilityCatalog {
        device: Device {
            id: id("device.reference.0"),
            class: DeviceClass::Reference,
            ordinal: 0,
            total_memory_bytes: 1 << 20,
            runtime_implementation_fingerprint: hex('1'),
            capabilities: [id("capability.operation.rms_norm.f16")].into(),
            dynamic_storage_profiles: [linear()].into(),
        },
        operations: [(operation.id.clone(), operation)].into(),
        providers: [(id("operation.rms_norm"), vec![provider])].into(),
        engine_providers: [(engine.provider_id.clone(), engine)].into(),
        weight_materializers: BTreeMap::new(),
    };
    let mut weight = binding(
        "value.weight.final_norm",
        ValueRole::Input,
        1,
        tensor(&[64], F16),
        TensorAccess::Read,
        AliasPolicy::NoAlias,
        BufferUsage::Weights,
        StorageComponent {
            component_id: Some(id("weight.final_norm")),
            ..component("resource/weights", 0, 128, F16)
        },
    );
    weight.weight = schema.resolved_binding(&id("weight.final_norm"));
    let resolution = NodeResolution {
        node_id: id("node.final_norm"),
        values: vec![
            binding(
                "value.input.hidden",
                ValueRole::Input,
                0,
                tensor(&[4, 64], F16),
                TensorAccess::Read,
                AliasPolicy::NoAlias,
                BufferUsage::Activations,
                component("resource/hidden-in", 0, 512, F16),
            ),
            weight,
            binding(
                "value.output.hidden",
                ValueRole::Output,
                0,
                tensor(&[4, 64], F16),
                TensorAccess::Write,
                AliasPolicy::NoAlias,
                BufferUsage::Activations,
                component("resource/hidden-out", 0, 512, F16),
            ),
        ],
        required_capabilities: BTreeSet::new(),
        preferred_provider: None,
        provider_resource_candidates: vec![ProviderResourcePlan {
            estimator_id: id("resource-estimator.reference.rms_norm.f16"),
            ..candidate("provider.reference.rms_norm.f16", None)
        }],
        provider_resolution_rejections: BTreeMap::new(),
    };
    let mut request = PlanRequest {
        family: ModelFamily {
            family_id: id("family.tiny"),
            canonical_config: serde_json::json!({"hidden_size": 64, "rms_norm_eps": 1e-6}),
            weight_schema: schema,
            program,
        },
        catalog,
        policy: RuntimePolicy {
            reusable_execution: None,
            wire_limits: None,
            dynamic_storage_profile_order: vec![linear()],
            ..policy()
        },
        node_resolutions: vec![resolution],
        completion_retention: CompletionRetention::default(),
        execution_weights: None,
    };
    reseal(&mut request);
    request
}
