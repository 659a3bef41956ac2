//! Load-time validation (rules 1.1-1.8): a valid request passes, and every rule rejects a
//! request that breaks exactly that rule with its own error variant, at the JSON path of the
//! culprit, naming it.

use crate::common::request_fixture;

use jointplan::request::fingerprints::identity_materializer;
use jointplan::request::validate::{validate_request, RequestError};
use jointplan::request::*;
use request_fixture::*;

/// Resolves a validation path (`a.b[0]["k"]`) in the serialized request.
fn resolve<'a>(document: &'a serde_json::Value, path: &str) -> Option<&'a serde_json::Value> {
    let mut current = document;
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("[\"") {
            let end = after.find("\"]")?;
            current = current.get(&after[..end])?;
            rest = &after[end + 2..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']')?;
            current = current.get(after[..end].parse::<usize>().ok()?)?;
            rest = &after[end + 1..];
        } else {
            let after = rest.strip_prefix('.').unwrap_or(rest);
            let end = after.find(['.', '[']).unwrap_or(after.len());
            current = current.get(&after[..end])?;
            rest = &after[end..];
        }
    }
    Some(current)
}

fn check(
    request: &PlanRequest,
    is_variant: fn(&RequestError) -> bool,
    variant: &str,
    path: &str,
    needle: &str,
) {
    let error = match validate_request(request) {
        Ok(()) => panic!("expected {variant} at {path}, the request passed"),
        Err(error) => error,
    };
    assert!(is_variant(&error), "expected {variant}, got {error:?}");
    assert_eq!(error.path(), path, "wrong path for {error}");
    let message = error.to_string();
    assert!(message.starts_with(path), "{message}");
    assert!(
        message.contains(needle),
        "{message:?} does not name {needle:?}"
    );
    let document = serde_json::to_value(request).unwrap();
    assert!(
        resolve(&document, path).is_some(),
        "path {path} does not exist in the request document"
    );
}

macro_rules! rejects {
    ($name:ident, |$r:ident| $edit:block, $variant:ident, $path:expr, $needle:expr) => {
        #[test]
        fn $name() {
            #[allow(unused_mut)]
            let mut $r = valid_request();
            $edit
            check(
                &$r,
                |e| matches!(e, RequestError::$variant { .. }),
                stringify!($variant),
                $path,
                $needle,
            );
        }
    };
}

fn node(r: &mut PlanRequest, n: usize) -> &mut ProgramNode {
    &mut r.family.program.blocks[0].nodes[n]
}

fn op<'a>(r: &'a mut PlanRequest, name: &str) -> &'a mut OperationDescriptor {
    r.catalog.operations.get_mut(name).unwrap()
}

fn row<'a>(r: &'a mut PlanRequest, name: &str) -> &'a mut Vec<ProviderDescriptor> {
    r.catalog.providers.get_mut(name).unwrap()
}

fn values(r: &mut PlanRequest) -> &mut Vec<ValueBinding> {
    &mut r.node_resolutions[0].values
}

fn candidates(r: &mut PlanRequest) -> &mut Vec<ProviderResourcePlan> {
    &mut r.node_resolutions[0].provider_resource_candidates
}

fn scratch(r: &mut PlanRequest) -> &mut WorkspaceRequirement {
    candidates(r)[0].scratch.as_mut().unwrap()
}

fn buckets(r: &mut PlanRequest) -> &mut Vec<ReusableExecutionBucket> {
    &mut r.policy.reusable_execution.as_mut().unwrap().buckets
}

fn quantized(
    bits: u8,
    group: u32,
    scale: ElementType,
    zero: Option<ElementType>,
) -> WeightEncoding {
    WeightEncoding::Quantized(QuantizationSpec {
        format_id: id("quantization.synthetic.int4"),
        bits_per_weight: bits,
        group_size: group,
        packing: QuantizationPacking::Linear,
        scale_type: scale,
        zero_point_type: zero,
    })
}

fn weight_component(name: &str, resource: &str, offset: u64, length: u64) -> StorageComponent {
    StorageComponent {
        component_id: Some(id(name)),
        ..component(resource, offset, length, ElementType::F16)
    }
}

// ---------------------------------------------------------------- valid requests

#[test]
fn the_fixture_is_valid() {
    validate_request(&valid_request()).unwrap();
    valid_request().validate().unwrap();
}

#[test]
fn the_fixture_survives_a_json_round_trip() {
    let text = serde_json::to_string_pretty(&valid_request()).unwrap();
    let parsed: PlanRequest = parse_json(std::path::Path::new("fixture.json"), &text).unwrap();
    assert_eq!(parsed, valid_request());
    validate_request(&parsed).unwrap();
}

#[test]
fn absent_execution_weights_are_valid() {
    let mut r = valid_request();
    r.execution_weights = None;
    validate_request(&r).unwrap();
}

#[test]
fn a_materializer_the_catalog_trusts_is_valid() {
    let mut r = valid_request();
    let custom = WeightMaterializerDescriptor {
        id: id("weight-materializer.repack"),
        version: ContractVersion::new(2, 1),
        implementation_fingerprint: hex('7'),
    };
    r.catalog
        .weight_materializers
        .insert(custom.id.clone(), custom.clone());
    let plan = r.execution_weights.as_mut().unwrap();
    plan.materializer_id = custom.id;
    plan.materializer_version = custom.version;
    plan.materializer_implementation_fingerprint = custom.implementation_fingerprint;
    reseal(&mut r);
    validate_request(&r).unwrap();
}

#[test]
fn sequence_scoped_workspaces_may_use_single_sequence_buckets() {
    let mut r = valid_request();
    candidates(&mut r)[1].persistent = Some(WorkspaceRequirement {
        size_formula: WorkspaceSizeFormula::BoundedShapeBuckets {
            buckets: vec![
                ShapeBucket {
                    maximum_sequences: 1,
                    maximum_tokens: 1,
                    maximum_pages: 1,
                    bytes: 64,
                },
                ShapeBucket {
                    maximum_sequences: 1,
                    maximum_tokens: 64,
                    maximum_pages: 1,
                    bytes: 128,
                },
            ],
        },
        alignment_bytes: 64,
        scope: WorkspaceScope::Sequence,
        storage: StorageRequirement {
            accepted_profiles: vec![linear(), paged()],
        },
    });
    reseal(&mut r);
    validate_request(&r).unwrap();
}

#[test]
fn multi_component_weights_are_valid() {
    let mut r = valid_request();
    add_scales_component(&mut r);
    validate_request(&r).unwrap();
}

/// Splits the weight into values + scales components (schema, program stays the same).
fn add_scales_component(r: &mut PlanRequest) {
    let schema = &mut r.family.weight_schema;
    schema.components.push(WeightComponentSpec {
        id: id("weight.matrix.scales"),
        role: WeightComponentRole::Scales,
        external_names: vec![],
        dimensions: vec![8],
        encoding: WeightEncoding::Dense {
            element_type: ElementType::F16,
        },
        required: true,
    });
    schema.tensors[0]
        .components
        .push(id("weight.matrix.scales"));
    let schema = schema.clone();
    r.execution_weights =
        Some(jointplan::request::fingerprints::identity_execution_weights(&schema).unwrap());
    let binding = &mut values(r)[1];
    binding.weight = schema.resolved_binding(&id("weight.matrix"));
    binding.storage.components.push(weight_component(
        "weight.matrix.scales",
        "resource/weight-matrix",
        128,
        16,
    ));
    reseal(r);
}

// ---------------------------------------------------------------- program (1.2)

rejects!(
    program_of_another_family,
    |r| {
        r.family.program.family_id = id("family.other");
    },
    ProgramFamilyMismatch,
    "family.program.family_id",
    "family.other"
);
rejects!(
    program_without_blocks,
    |r| {
        r.family.program.blocks.clear();
    },
    EmptyProgramPart,
    "family.program.blocks",
    "no blocks"
);
rejects!(
    program_without_inputs,
    |r| {
        r.family.program.inputs.clear();
    },
    EmptyProgramPart,
    "family.program.inputs",
    "no inputs"
);
rejects!(
    repeated_program_input,
    |r| {
        r.family.program.inputs.push(id("value.input"));
    },
    DuplicateProgramId,
    "family.program.inputs[1]",
    "value.input"
);
rejects!(
    unsorted_states,
    |r| {
        let mut state = r.family.program.states[0].clone();
        state.id = id("state.a");
        state.value_id = id("value.state.a");
        r.family.program.states.push(state);
    },
    UnsortedProgramList,
    "family.program.states[1].id",
    "state.a"
);
rejects!(
    repeated_state,
    |r| {
        let mut state = r.family.program.states[0].clone();
        state.value_id = id("value.state.b");
        r.family.program.states.push(state);
    },
    DuplicateProgramId,
    "family.program.states[1].id",
    "state.cache"
);
rejects!(
    malformed_state_tensor,
    |r| {
        r.family.program.states[0].tensor.dimensions[1] = 0;
    },
    InvalidProgramTensor,
    "family.program.states[0].tensor",
    "state.cache"
);
rejects!(
    state_capacity_below_tensor,
    |r| {
        r.family.program.states[0].capacity_demand = StateCapacityDemand::TokenScaled {
            bytes_per_token: 32,
            maximum_tokens: 256,
        };
    },
    InvalidStateCapacity,
    "family.program.states[0].capacity_demand",
    "state.cache"
);
rejects!(
    state_capacity_overflow,
    |r| {
        r.family.program.states[0].capacity_demand = StateCapacityDemand::TokenScaled {
            bytes_per_token: u64::MAX / 2,
            maximum_tokens: 3,
        };
    },
    InvalidStateCapacity,
    "family.program.states[0].capacity_demand",
    "overflows"
);
rejects!(
    state_capacity_without_tokens,
    |r| {
        r.family.program.states[0].capacity_demand = StateCapacityDemand::TokenScaled {
            bytes_per_token: 64,
            maximum_tokens: 0,
        };
    },
    InvalidStateCapacity,
    "family.program.states[0].capacity_demand",
    "maximum_tokens"
);
rejects!(
    zero_initialized_request_state,
    |r| {
        let state = &mut r.family.program.states[0];
        state.lifetime = StateLifetime::Request;
        state.initialization = StateInitialization::Zero;
    },
    InvalidStateInitialization,
    "family.program.states[0].initialization",
    "request"
);
rejects!(
    unsorted_weights,
    |r| {
        r.family.program.weights.push(WeightReference {
            weight_id: id("weight.a"),
            value_id: id("value.weight.a"),
            tensor: tensor(&[8], ElementType::F16),
        });
    },
    UnsortedProgramList,
    "family.program.weights[1].weight_id",
    "weight.a"
);
rejects!(
    malformed_weight_tensor,
    |r| {
        r.family.program.weights[0].tensor.layout = TensorLayout::Strided {
            byte_strides: vec![16],
        };
    },
    InvalidProgramTensor,
    "family.program.weights[0].tensor",
    "weight.matrix"
);
rejects!(
    state_value_is_a_program_input,
    |r| {
        r.family.program.states[0].value_id = id("value.input");
    },
    DuplicateProgramId,
    "family.program.states[0].value_id",
    "value.input"
);
rejects!(
    weight_value_is_a_state_value,
    |r| {
        r.family.program.weights[0].value_id = id("value.state");
    },
    DuplicateProgramId,
    "family.program.weights[0].value_id",
    "state"
);
rejects!(
    empty_block_id,
    |r| {
        r.family.program.blocks[0].id.clear();
    },
    InvalidBlockId,
    "family.program.blocks[0].id",
    "empty"
);
rejects!(
    repeated_block_id,
    |r| {
        let block = r.family.program.blocks[0].clone();
        r.family.program.blocks.push(block);
    },
    DuplicateProgramId,
    "family.program.blocks[1].id",
    "block.decoder"
);
rejects!(
    block_without_nodes,
    |r| {
        r.family.program.blocks.push(ProgramBlock {
            id: "block.empty".to_owned(),
            nodes: vec![],
        });
    },
    EmptyProgramPart,
    "family.program.blocks[1].nodes",
    "block.empty"
);
rejects!(
    node_with_unstable_version,
    |r| {
        node(&mut r, 0).required_version = ContractVersion::new(0, 3);
    },
    UnstableNodeVersion,
    "family.program.blocks[0].nodes[0].required_version.major",
    "node.main"
);
rejects!(
    node_without_outputs,
    |r| {
        node(&mut r, 1).outputs.clear();
    },
    EmptyProgramPart,
    "family.program.blocks[0].nodes[1].outputs",
    "node.residual"
);
rejects!(
    unreduced_attribute,
    |r| {
        node(&mut r, 0).attributes.insert(
            id("epsilon"),
            SemanticValue::Rational(Rational {
                numerator: 2,
                denominator: 4,
            }),
        );
    },
    InvalidAttributeValue,
    "family.program.blocks[0].nodes[0].attributes[\"epsilon\"]",
    "epsilon"
);
rejects!(
    empty_text_attribute,
    |r| {
        node(&mut r, 1)
            .attributes
            .insert(id("mode"), SemanticValue::Text(String::new()));
    },
    InvalidAttributeValue,
    "family.program.blocks[0].nodes[1].attributes[\"mode\"]",
    "node.residual"
);
rejects!(
    repeated_node_id,
    |r| {
        node(&mut r, 1).id = id("node.main");
    },
    DuplicateProgramId,
    "family.program.blocks[0].nodes[1].id",
    "node.main"
);
rejects!(
    node_reads_a_later_output,
    |r| {
        node(&mut r, 0).inputs[0] = id("value.output");
    },
    UnknownNodeInput,
    "family.program.blocks[0].nodes[0].inputs[0]",
    "value.output"
);
rejects!(
    value_with_two_producers,
    |r| {
        node(&mut r, 1).outputs[0] = id("value.hidden");
    },
    ValueRedefined,
    "family.program.blocks[0].nodes[1].outputs[0]",
    "value.hidden"
);
rejects!(
    state_written_as_output,
    |r| {
        node(&mut r, 0).outputs.push(id("value.state"));
    },
    ValueRedefined,
    "family.program.blocks[0].nodes[0].outputs[1]",
    "state"
);
rejects!(
    weight_written_as_output,
    |r| {
        node(&mut r, 0).outputs.push(id("value.weight"));
    },
    ValueRedefined,
    "family.program.blocks[0].nodes[0].outputs[1]",
    "weight"
);
rejects!(
    token_work_value_missing,
    |r| {
        node(&mut r, 0).work = WorkSpec::Tokens {
            value_id: id("value.output"),
            axis: 0,
        };
    },
    InvalidTokenWork,
    "family.program.blocks[0].nodes[0].work.tokens.value_id",
    "0 times"
);
rejects!(
    token_work_value_repeated,
    |r| {
        node(&mut r, 1).inputs.push(id("value.hidden"));
    },
    InvalidTokenWork,
    "family.program.blocks[0].nodes[1].work.tokens.value_id",
    "2 times"
);
rejects!(
    token_work_on_state,
    |r| {
        node(&mut r, 0).work = WorkSpec::Tokens {
            value_id: id("value.state"),
            axis: 0,
        };
    },
    InvalidTokenWork,
    "family.program.blocks[0].nodes[0].work.tokens.value_id",
    "value.state"
);
rejects!(
    token_work_on_weight,
    |r| {
        node(&mut r, 0).work = WorkSpec::Tokens {
            value_id: id("value.weight"),
            axis: 1,
        };
    },
    InvalidTokenWork,
    "family.program.blocks[0].nodes[0].work.tokens.value_id",
    "weight"
);
rejects!(
    program_without_outputs,
    |r| {
        r.family.program.outputs.clear();
    },
    EmptyProgramPart,
    "family.program.outputs",
    "no outputs"
);
rejects!(
    unknown_program_output,
    |r| {
        r.family.program.outputs.push(id("value.nowhere"));
    },
    UnknownProgramOutput,
    "family.program.outputs[1]",
    "value.nowhere"
);
rejects!(
    repeated_program_output,
    |r| {
        r.family.program.outputs.push(id("value.output"));
    },
    DuplicateProgramId,
    "family.program.outputs[1]",
    "value.output"
);
rejects!(
    retained_value_is_no_node_output,
    |r| {
        r.completion_retention.values.insert(id("value.input"));
    },
    RetainedValueNotProduced,
    "completion_retention.values[1]",
    "value.input"
);

// ---------------------------------------------------------------- weight schema (1.2)

rejects!(
    unstable_weight_schema,
    |r| {
        r.family.weight_schema.version = ContractVersion::new(0, 1);
    },
    UnstableWeightSchemaVersion,
    "family.weight_schema.version.major",
    "weight-format.dense"
);
rejects!(
    unsorted_weight_components,
    |r| {
        let mut extra = r.family.weight_schema.components[0].clone();
        extra.id = id("weight.a");
        r.family.weight_schema.components.push(extra);
    },
    UnsortedWeightSchema,
    "family.weight_schema.components[1].id",
    "weight.a"
);
rejects!(
    repeated_weight_tensor,
    |r| {
        let extra = r.family.weight_schema.tensors[0].clone();
        r.family.weight_schema.tensors.push(extra);
    },
    UnsortedWeightSchema,
    "family.weight_schema.tensors[1].id",
    "twice"
);
rejects!(
    weight_component_with_zero_extent,
    |r| {
        r.family.weight_schema.components[0].dimensions[1] = 0;
    },
    InvalidWeightComponent,
    "family.weight_schema.components[0].dimensions[1]",
    "weight.matrix"
);
rejects!(
    weight_component_overflow,
    |r| {
        r.family.weight_schema.components[0].dimensions = vec![u64::MAX, 2];
    },
    InvalidWeightComponent,
    "family.weight_schema.components[0].dimensions",
    "overflows"
);
rejects!(
    quantization_with_nine_bits,
    |r| {
        r.family.weight_schema.components[0].encoding = quantized(9, 128, ElementType::F16, None);
    },
    InvalidQuantization,
    "family.weight_schema.components[0].encoding.quantized.bits_per_weight",
    "9 bits"
);
rejects!(
    quantization_with_zero_bits,
    |r| {
        r.family.weight_schema.components[0].encoding = quantized(0, 128, ElementType::F16, None);
    },
    InvalidQuantization,
    "family.weight_schema.components[0].encoding.quantized.bits_per_weight",
    "weight.matrix"
);
rejects!(
    quantization_group_not_power_of_two,
    |r| {
        r.family.weight_schema.components[0].encoding = quantized(4, 96, ElementType::F16, None);
    },
    InvalidQuantization,
    "family.weight_schema.components[0].encoding.quantized.group_size",
    "96"
);
rejects!(
    quantization_integer_scales,
    |r| {
        r.family.weight_schema.components[0].encoding = quantized(4, 128, ElementType::U8, None);
    },
    InvalidQuantization,
    "family.weight_schema.components[0].encoding.quantized.scale_type",
    "U8"
);
rejects!(
    quantization_float_zero_points,
    |r| {
        r.family.weight_schema.components[0].encoding =
            quantized(4, 128, ElementType::Bf16, Some(ElementType::F16));
    },
    InvalidQuantization,
    "family.weight_schema.components[0].encoding.quantized.zero_point_type",
    "F16"
);
rejects!(
    block_quantization_without_bytes,
    |r| {
        r.family.weight_schema.components[0].encoding =
            WeightEncoding::BlockQuantized(BlockQuantizationSpec {
                format_id: id("quantization.gguf.q4-k"),
                logical_values_per_block: 256,
                bytes_per_block: 0,
            });
    },
    InvalidQuantization,
    "family.weight_schema.components[0].encoding.block_quantized.bytes_per_block",
    "zero bytes"
);
rejects!(
    block_quantization_without_values,
    |r| {
        r.family.weight_schema.components[0].encoding =
            WeightEncoding::BlockQuantized(BlockQuantizationSpec {
                format_id: id("quantization.gguf.q4-k"),
                logical_values_per_block: 0,
                bytes_per_block: 144,
            });
    },
    InvalidQuantization,
    "family.weight_schema.components[0].encoding.block_quantized.logical_values_per_block",
    "weight.matrix"
);
rejects!(
    weight_tensor_without_components,
    |r| {
        r.family.weight_schema.tensors[0].components.clear();
    },
    InvalidWeightTensor,
    "family.weight_schema.tensors[0].components",
    "weight.matrix"
);
rejects!(
    weight_tensor_with_unknown_component,
    |r| {
        r.family.weight_schema.tensors[0].components = vec![id("weight.missing")];
    },
    InvalidWeightTensor,
    "family.weight_schema.tensors[0].components[0]",
    "weight.missing"
);
rejects!(
    weight_tensor_with_repeated_component,
    |r| {
        r.family.weight_schema.tensors[0]
            .components
            .push(id("weight.matrix"));
    },
    InvalidWeightTensor,
    "family.weight_schema.tensors[0].components[1]",
    "weight.matrix"
);
rejects!(
    weight_tensor_with_zero_extent,
    |r| {
        r.family.weight_schema.tensors[0].dimensions[0] = 0;
    },
    InvalidWeightTensor,
    "family.weight_schema.tensors[0].dimensions[0]",
    "weight.matrix"
);
rejects!(
    program_weight_not_in_schema,
    |r| {
        r.family.program.weights[0].weight_id = id("weight.other");
    },
    WeightReferenceMismatch,
    "family.program.weights[0].weight_id",
    "weight.other"
);
rejects!(
    program_weight_with_other_dimensions,
    |r| {
        r.family.program.weights[0].tensor.dimensions = vec![8, 4];
    },
    WeightReferenceMismatch,
    "family.program.weights[0].tensor.dimensions",
    "weight.matrix"
);
rejects!(
    program_weight_with_other_element_type,
    |r| {
        r.family.program.weights[0].tensor.element_type = ElementType::F32;
    },
    WeightReferenceMismatch,
    "family.program.weights[0].tensor.element_type",
    "F32"
);

// ---------------------------------------------------------------- execution weights (1.2)

fn exec(r: &mut PlanRequest) -> &mut ExecutionWeightPlan {
    r.execution_weights.as_mut().unwrap()
}

rejects!(
    execution_weights_of_another_schema,
    |r| {
        exec(&mut r).source_schema_fingerprint = hex('9');
    },
    ExecutionWeightsSourceMismatch,
    "execution_weights.source_schema_fingerprint",
    "jointplan seal"
);
rejects!(
    invalid_execution_schema,
    |r| {
        exec(&mut r).schema.version = ContractVersion::new(0, 0);
    },
    UnstableWeightSchemaVersion,
    "execution_weights.schema.version.major",
    "weight-format.dense"
);
rejects!(
    execution_component_without_source_list,
    |r| {
        exec(&mut r).component_sources.clear();
    },
    InvalidComponentSources,
    "execution_weights.component_sources",
    "weight.matrix"
);
rejects!(
    execution_component_from_nothing,
    |r| {
        exec(&mut r)
            .component_sources
            .insert(id("weight.matrix"), vec![]);
    },
    InvalidComponentSources,
    "execution_weights.component_sources[\"weight.matrix\"]",
    "no source"
);
rejects!(
    execution_component_repeated_source,
    |r| {
        exec(&mut r).component_sources.insert(
            id("weight.matrix"),
            vec![id("weight.matrix"), id("weight.matrix")],
        );
    },
    InvalidComponentSources,
    "execution_weights.component_sources[\"weight.matrix\"][1]",
    "twice"
);
rejects!(
    execution_component_unknown_source,
    |r| {
        exec(&mut r)
            .component_sources
            .insert(id("weight.matrix"), vec![id("weight.ghost")]);
    },
    InvalidComponentSources,
    "execution_weights.component_sources[\"weight.matrix\"][0]",
    "weight.ghost"
);
rejects!(
    source_list_of_no_execution_component,
    |r| {
        exec(&mut r)
            .component_sources
            .insert(id("weight.extra"), vec![id("weight.matrix")]);
    },
    InvalidComponentSources,
    "execution_weights.component_sources[\"weight.extra\"]",
    "weight.extra"
);
rejects!(
    required_source_component_dropped,
    |r| {
        r.family.weight_schema.components.insert(
            0,
            WeightComponentSpec {
                id: id("weight.bias"),
                role: WeightComponentRole::Values,
                external_names: vec![],
                dimensions: vec![8],
                encoding: WeightEncoding::Dense {
                    element_type: ElementType::F16,
                },
                required: true,
            },
        );
        reseal(&mut r);
    },
    UnreferencedSourceComponent,
    "family.weight_schema.components[0]",
    "weight.bias"
);
rejects!(
    execution_tensor_with_other_dimensions,
    |r| {
        exec(&mut r).schema.tensors[0].dimensions = vec![4, 16];
    },
    ExecutionTensorMismatch,
    "execution_weights.schema.tensors[0].dimensions",
    "weight.matrix"
);
rejects!(
    execution_tensor_with_other_required_flag,
    |r| {
        exec(&mut r).schema.tensors[0].required = false;
    },
    ExecutionTensorMismatch,
    "execution_weights.schema.tensors[0].required",
    "weight.matrix"
);
rejects!(
    execution_tensor_with_other_dtype,
    |r| {
        exec(&mut r).schema.tensors[0].logical_element_type = ElementType::Bf16;
    },
    ExecutionTensorMismatch,
    "execution_weights.schema.tensors[0].logical_element_type",
    "Bf16"
);
rejects!(
    execution_tensor_missing,
    |r| {
        exec(&mut r).schema.tensors.clear();
    },
    ExecutionTensorMismatch,
    "execution_weights.schema.tensors",
    "weight.matrix"
);
rejects!(
    unknown_materializer,
    |r| {
        exec(&mut r).materializer_id = id("weight-materializer.repack");
    },
    UntrustedMaterializer,
    "execution_weights.materializer_id",
    "weight-materializer.repack"
);
rejects!(
    identity_materializer_with_other_fingerprint,
    |r| {
        exec(&mut r).materializer_implementation_fingerprint = hex('6');
    },
    UntrustedMaterializer,
    "execution_weights.materializer_id",
    "weight-materializer.identity"
);
rejects!(
    trusted_materializer_with_other_fingerprint,
    |r| {
        let trusted = WeightMaterializerDescriptor {
            id: id("weight-materializer.repack"),
            version: ContractVersion::new(1, 0),
            implementation_fingerprint: hex('7'),
        };
        r.catalog
            .weight_materializers
            .insert(trusted.id.clone(), trusted);
        let plan = exec(&mut r);
        plan.materializer_id = id("weight-materializer.repack");
        plan.materializer_implementation_fingerprint = hex('8');
    },
    UntrustedMaterializer,
    "execution_weights.materializer_implementation_fingerprint",
    "weight-materializer.repack"
);

#[test]
fn identity_materializer_is_the_default() {
    let plan = valid_request().execution_weights.unwrap();
    let identity = identity_materializer().unwrap();
    assert_eq!(plan.materializer_id, identity.id);
    assert_eq!(
        plan.materializer_implementation_fingerprint,
        identity.implementation_fingerprint
    );
}

// ---------------------------------------------------------------- catalog: device, tables

rejects!(
    device_without_memory,
    |r| {
        r.catalog.device.total_memory_bytes = 0;
    },
    InvalidDevice,
    "catalog.device.total_memory_bytes",
    "device.reference.0"
);
rejects!(
    device_without_profiles,
    |r| {
        r.catalog.device.dynamic_storage_profiles.clear();
    },
    InvalidDevice,
    "catalog.device.dynamic_storage_profiles",
    "device.reference.0"
);
rejects!(
    device_with_linear_paged_profile,
    |r| {
        r.catalog
            .device
            .dynamic_storage_profiles
            .insert(StorageProfile {
                allocator: StorageAllocator::LinearArena,
                view: StorageView::PagedRegions { block_bytes: 4096 },
            });
    },
    InvalidDevice,
    "catalog.device.dynamic_storage_profiles[1]",
    "linear+paged(4096)"
);
rejects!(
    catalog_without_operations,
    |r| {
        r.catalog.operations.clear();
        r.catalog.providers.clear();
    },
    EmptyCatalog,
    "catalog.operations",
    "no entries"
);
rejects!(
    catalog_without_engines,
    |r| {
        r.catalog.engine_providers.clear();
    },
    EmptyCatalog,
    "catalog.engine_providers",
    "no entries"
);
rejects!(
    catalog_with_too_many_operations,
    |r| {
        let template = op(&mut r, "operation.residual_add").clone();
        for i in 0..4095 {
            let mut extra = template.clone();
            extra.id = id(&format!("operation.extra.{i:04}"));
            r.catalog.operations.insert(extra.id.clone(), extra);
        }
    },
    CatalogTooLarge,
    "catalog.operations",
    "4097"
);
rejects!(
    catalog_with_too_many_provider_rows,
    |r| {
        let template = row(&mut r, "operation.residual_add")[0].clone();
        let extra: Vec<_> = (0..16384)
            .map(|i| {
                let mut p = template.clone();
                p.provider_id = id(&format!("provider.extra.{i:05}"));
                p
            })
            .collect();
        row(&mut r, "operation.residual_add").extend(extra);
    },
    CatalogTooLarge,
    "catalog.providers",
    "16387"
);
rejects!(
    operation_under_another_key,
    |r| {
        let main = op(&mut r, "operation.main").clone();
        r.catalog.operations.insert(id("operation.alias"), main);
    },
    CatalogKeyMismatch,
    "catalog.operations[\"operation.alias\"].id",
    "operation.main"
);
rejects!(
    operation_without_provider_row,
    |r| {
        r.catalog.providers.remove("operation.residual_add");
    },
    OperationProviderKeysDiffer,
    "catalog.operations[\"operation.residual_add\"]",
    "operation.residual_add"
);
rejects!(
    provider_row_without_operation,
    |r| {
        let extra = row(&mut r, "operation.main").clone();
        r.catalog.providers.insert(id("operation.unknown"), extra);
    },
    OperationProviderKeysDiffer,
    "catalog.providers[\"operation.unknown\"]",
    "operation.unknown"
);

// ---------------------------------------------------------------- catalog: operations (1.3)

const MAIN: &str = "catalog.operations[\"operation.main\"]";
const RESIDUAL: &str = "catalog.operations[\"operation.residual_add\"]";

rejects!(
    unstable_operation,
    |r| {
        op(&mut r, "operation.main").version = ContractVersion::new(0, 9);
        op(&mut r, "operation.main").provider.minimum_version = ContractVersion::new(0, 9);
    },
    InvalidOperation,
    &format!("{MAIN}.version.major"),
    "operation.main"
);
rejects!(
    operation_without_outputs,
    |r| {
        op(&mut r, "operation.main").outputs.clear();
    },
    InvalidOperation,
    &format!("{MAIN}.outputs"),
    "no outputs"
);
rejects!(
    operation_input_that_writes,
    |r| {
        op(&mut r, "operation.main").inputs[0].access = TensorAccess::Write;
    },
    InvalidOperation,
    &format!("{MAIN}.inputs[0].access"),
    "input 0"
);
rejects!(
    operation_input_that_aliases,
    |r| {
        op(&mut r, "operation.main").inputs[1].alias = AliasPolicy::MayAlias { tensor_index: 0 };
    },
    InvalidOperation,
    &format!("{MAIN}.inputs[1].alias"),
    "input 1"
);
rejects!(
    operation_output_that_only_reads,
    |r| {
        op(&mut r, "operation.main").outputs[0].access = TensorAccess::Read;
    },
    InvalidOperation,
    &format!("{MAIN}.outputs[0].access"),
    "output 0"
);
rejects!(
    operation_output_aliasing_a_missing_input,
    |r| {
        op(&mut r, "operation.residual_add").outputs[0].alias =
            AliasPolicy::MustAlias { tensor_index: 1 };
    },
    InvalidOperation,
    &format!("{RESIDUAL}.outputs[0].alias"),
    "input 1"
);
rejects!(
    operation_alignment_not_power_of_two,
    |r| {
        op(&mut r, "operation.main")
            .resources
            .minimum_value_alignment_bytes = 24;
    },
    InvalidOperation,
    &format!("{MAIN}.resources.minimum_value_alignment_bytes"),
    "24"
);
rejects!(
    operation_alignment_zero,
    |r| {
        op(&mut r, "operation.main")
            .resources
            .minimum_value_alignment_bytes = 0;
    },
    InvalidOperation,
    &format!("{MAIN}.resources.minimum_value_alignment_bytes"),
    "operation.main"
);
rejects!(
    operation_provider_minimum_of_other_major,
    |r| {
        op(&mut r, "operation.main").provider.minimum_version = ContractVersion::new(2, 0);
    },
    InvalidOperation,
    &format!("{MAIN}.provider.minimum_version"),
    "2.0"
);
rejects!(
    contract_exact_zero,
    |r| {
        op(&mut r, "operation.main").inputs[0].dimensions[0] = DimensionConstraint::Exact(0);
    },
    InvalidTensorContract,
    &format!("{MAIN}.inputs[0].dimensions[0]"),
    "exact extent 0"
);
rejects!(
    contract_blank_symbol,
    |r| {
        op(&mut r, "operation.main").outputs[0].dimensions[1] =
            DimensionConstraint::Symbol("  ".to_owned());
    },
    InvalidTensorContract,
    &format!("{MAIN}.outputs[0].dimensions[1]"),
    "blank symbol"
);
rejects!(
    contract_empty_range,
    |r| {
        op(&mut r, "operation.main").inputs[2].dimensions[1] = DimensionConstraint::Range {
            minimum: 8,
            maximum: 4,
        };
    },
    InvalidTensorContract,
    &format!("{MAIN}.inputs[2].dimensions[1]"),
    "8..=4"
);
rejects!(
    contract_range_from_zero,
    |r| {
        op(&mut r, "operation.main").inputs[2].dimensions[1] = DimensionConstraint::Range {
            minimum: 0,
            maximum: 4,
        };
    },
    InvalidTensorContract,
    &format!("{MAIN}.inputs[2].dimensions[1]"),
    "input 2"
);
rejects!(
    contract_without_element_types,
    |r| {
        op(&mut r, "operation.main").inputs[0].element_types.clear();
    },
    InvalidTensorContract,
    &format!("{MAIN}.inputs[0].element_types"),
    "no element type"
);
rejects!(
    contract_without_layouts,
    |r| {
        op(&mut r, "operation.main").inputs[0].layouts.clear();
    },
    InvalidTensorContract,
    &format!("{MAIN}.inputs[0].layouts"),
    "no layout"
);
rejects!(
    contract_repeated_layout,
    |r| {
        op(&mut r, "operation.main").inputs[0]
            .layouts
            .push(LayoutConstraint::Contiguous);
    },
    InvalidTensorContract,
    &format!("{MAIN}.inputs[0].layouts[1]"),
    "sorted, unique"
);
rejects!(
    contract_strided_rank_mismatch,
    |r| {
        op(&mut r, "operation.main").inputs[0].layouts = vec![LayoutConstraint::Strided {
            strides: vec![
                StrideConstraint::ExactBytes(4),
                StrideConstraint::ExactBytes(4),
            ],
        }];
    },
    InvalidTensorContract,
    &format!("{MAIN}.inputs[0].layouts[0].strided.strides"),
    "rank 1"
);
rejects!(
    contract_zero_stride,
    |r| {
        op(&mut r, "operation.main").inputs[0].layouts = vec![LayoutConstraint::Strided {
            strides: vec![StrideConstraint::ExactBytes(0)],
        }];
    },
    InvalidTensorContract,
    &format!("{MAIN}.inputs[0].layouts[0].strided.strides[0]"),
    "axis 0"
);
rejects!(
    contract_blocked_zero_block,
    |r| {
        op(&mut r, "operation.main").inputs[1].layouts = vec![LayoutConstraint::Blocked {
            block: vec![4, 0],
            axis_order: vec![0, 1],
        }];
    },
    InvalidTensorContract,
    &format!("{MAIN}.inputs[1].layouts[0].blocked.block"),
    "block"
);
rejects!(
    contract_blocked_axis_order_not_permutation,
    |r| {
        op(&mut r, "operation.main").inputs[1].layouts = vec![LayoutConstraint::Blocked {
            block: vec![4, 4],
            axis_order: vec![1, 1],
        }];
    },
    InvalidTensorContract,
    &format!("{MAIN}.inputs[1].layouts[0].blocked.axis_order"),
    "permutation"
);
rejects!(
    operation_requires_unoffered_capability,
    |r| {
        op(&mut r, "operation.main")
            .provider
            .required_capabilities
            .insert(id("capability.missing"));
    },
    UnofferedCapability,
    &format!("{MAIN}.provider.required_capabilities[1]"),
    "capability.missing"
);
rejects!(
    oracle_reference_dangling,
    |r| {
        op(&mut r, "operation.residual_add").oracle = OracleSpec::ReferenceOperation {
            operation_id: id("operation.missing"),
            version: ContractVersion::new(1, 0),
        };
    },
    InvalidOracle,
    &format!("{RESIDUAL}.oracle.reference_operation.operation_id"),
    "operation.missing"
);
rejects!(
    oracle_reference_other_version,
    |r| {
        let mut reference = op(&mut r, "operation.residual_add").clone();
        reference.id = id("operation.residual_add.reference");
        r.catalog.operations.insert(reference.id.clone(), reference);
        op(&mut r, "operation.residual_add").oracle = OracleSpec::ReferenceOperation {
            operation_id: id("operation.residual_add.reference"),
            version: ContractVersion::new(1, 2),
        };
    },
    InvalidOracle,
    &format!("{RESIDUAL}.oracle.reference_operation.version"),
    "1.2"
);
rejects!(
    oracle_reference_other_signature,
    |r| {
        op(&mut r, "operation.residual_add").oracle = OracleSpec::ReferenceOperation {
            operation_id: id("operation.main"),
            version: ContractVersion::new(1, 0),
        };
    },
    InvalidOracle,
    &format!("{RESIDUAL}.oracle.reference_operation.operation_id"),
    "operation.main"
);
rejects!(
    oracle_reference_cycle,
    |r| {
        let mut other = op(&mut r, "operation.residual_add").clone();
        other.id = id("operation.residual_ref");
        other.oracle = OracleSpec::ReferenceOperation {
            operation_id: id("operation.residual_add"),
            version: ContractVersion::new(1, 0),
        };
        r.catalog.operations.insert(other.id.clone(), other);
        op(&mut r, "operation.residual_add").oracle = OracleSpec::ReferenceOperation {
            operation_id: id("operation.residual_ref"),
            version: ContractVersion::new(1, 0),
        };
    },
    InvalidOracle,
    &format!("{RESIDUAL}.oracle.reference_operation.operation_id"),
    "cycle"
);
rejects!(
    oracle_reference_self,
    |r| {
        op(&mut r, "operation.residual_add").oracle = OracleSpec::ReferenceOperation {
            operation_id: id("operation.residual_add"),
            version: ContractVersion::new(1, 0),
        };
    },
    InvalidOracle,
    &format!("{RESIDUAL}.oracle.reference_operation.operation_id"),
    "cycle"
);
rejects!(
    oracle_reference_too_deep,
    |r| {
        let template = op(&mut r, "operation.residual_add").clone();
        for i in 0..66 {
            let mut link = template.clone();
            link.id = id(&format!("operation.chain.{i:03}"));
            if i < 65 {
                link.oracle = OracleSpec::ReferenceOperation {
                    operation_id: id(&format!("operation.chain.{:03}", i + 1)),
                    version: ContractVersion::new(1, 0),
                };
            }
            r.catalog.operations.insert(link.id.clone(), link);
        }
    },
    InvalidOracle,
    "catalog.operations[\"operation.chain.000\"].oracle.reference_operation.operation_id",
    "deeper than 64"
);
rejects!(
    oracle_negative_tolerance,
    |r| {
        op(&mut r, "operation.main").oracle = OracleSpec::AbsoluteTolerance(Rational {
            numerator: -1,
            denominator: 100,
        });
    },
    InvalidOracle,
    &format!("{MAIN}.oracle.absolute_tolerance"),
    "negative"
);
rejects!(
    oracle_tolerance_on_bool_output,
    |r| {
        op(&mut r, "operation.main").outputs[0]
            .element_types
            .insert(ElementType::Bool);
    },
    InvalidOracle,
    &format!("{MAIN}.oracle.relative_tolerance"),
    "bool"
);

#[test]
fn oracle_chain_of_64_is_allowed() {
    let mut r = valid_request();
    let template = op(&mut r, "operation.residual_add").clone();
    for i in 0..65 {
        let mut link = template.clone();
        link.id = id(&format!("operation.chain.{i:03}"));
        if i < 64 {
            link.oracle = OracleSpec::ReferenceOperation {
                operation_id: id(&format!("operation.chain.{:03}", i + 1)),
                version: ContractVersion::new(1, 0),
            };
        }
        let provider = ProviderDescriptor {
            operation_id: link.id.clone(),
            ..row(&mut r, "operation.residual_add")[0].clone()
        };
        r.catalog.providers.insert(link.id.clone(), vec![provider]);
        r.catalog.operations.insert(link.id.clone(), link);
    }
    reseal(&mut r);
    validate_request(&r).unwrap();
}

// ---------------------------------------------------------------- catalog: providers (1.4)

const MAIN_ROW: &str = "catalog.providers[\"operation.main\"]";

rejects!(
    empty_provider_row,
    |r| {
        row(&mut r, "operation.residual_add").clear();
    },
    EmptyProviderRow,
    "catalog.providers[\"operation.residual_add\"]",
    "operation.residual_add"
);
rejects!(
    unsorted_provider_row,
    |r| {
        row(&mut r, "operation.main").swap(0, 1);
    },
    UnsortedProviderRow,
    &format!("{MAIN_ROW}[1].provider_id"),
    "provider.operation.reference"
);
rejects!(
    repeated_provider,
    |r| {
        let mut again = row(&mut r, "operation.main")[1].clone();
        again.version = ContractVersion::new(1, 1);
        row(&mut r, "operation.main").push(again);
    },
    UnsortedProviderRow,
    &format!("{MAIN_ROW}[2].provider_id"),
    "provider.operation.secondary"
);
rejects!(
    provider_of_another_operation,
    |r| {
        row(&mut r, "operation.main")[0].operation_id = id("operation.residual_add");
    },
    ProviderOperationMismatch,
    &format!("{MAIN_ROW}[0].operation_id"),
    "operation.residual_add"
);
rejects!(
    provider_with_stale_operation_fingerprint,
    |r| {
        row(&mut r, "operation.main")[1].operation_fingerprint = hex('9');
    },
    ProviderOperationMismatch,
    &format!("{MAIN_ROW}[1].operation_fingerprint"),
    "provider.operation.secondary"
);
rejects!(
    provider_on_another_device,
    |r| {
        row(&mut r, "operation.main")[0].device_id = id("device.metal.0");
    },
    DeviceMismatch,
    &format!("{MAIN_ROW}[0].device_id"),
    "device.metal.0"
);
rejects!(
    provider_of_another_major,
    |r| {
        row(&mut r, "operation.main")[0].version = ContractVersion::new(2, 0);
    },
    ProviderVersionMismatch,
    &format!("{MAIN_ROW}[0].version"),
    "provider.operation.reference"
);
rejects!(
    provider_below_minimum_version,
    |r| {
        op(&mut r, "operation.main").provider.minimum_version = ContractVersion::new(1, 2);
        row(&mut r, "operation.main")[0].version = ContractVersion::new(1, 1);
        reseal(&mut r);
    },
    ProviderVersionMismatch,
    &format!("{MAIN_ROW}[0].version"),
    "provider minimum version 1.2"
);
rejects!(
    provider_with_unoffered_capability,
    |r| {
        row(&mut r, "operation.main")[0]
            .capabilities
            .insert(id("capability.missing"));
    },
    UnofferedCapability,
    &format!("{MAIN_ROW}[0].capabilities[1]"),
    "capability.missing"
);
rejects!(
    provider_missing_required_capability,
    |r| {
        row(&mut r, "operation.main")[1].capabilities.clear();
    },
    ProviderMissingCapability,
    &format!("{MAIN_ROW}[1].capabilities"),
    "capability.compute"
);
rejects!(
    provider_with_future_execution_contract,
    |r| {
        row(&mut r, "operation.main")[0]
            .execution_semantics
            .contract_version = ContractVersion::new(1, 1);
    },
    InvalidExecutionSemantics,
    &format!("{MAIN_ROW}[0].execution_semantics.contract_version"),
    "1.1"
);
rejects!(
    provider_with_wrong_contract_fingerprint,
    |r| {
        row(&mut r, "operation.main")[0]
            .execution_semantics
            .replay_equivalence = ReplayEquivalence::Ineligible;
    },
    InvalidExecutionSemantics,
    &format!("{MAIN_ROW}[0].execution_semantics.contract_fingerprint"),
    "provider.operation.reference"
);
rejects!(
    provider_without_storage_bindings,
    |r| {
        row(&mut r, "operation.main")[0]
            .dynamic_storage_bindings
            .clear();
    },
    InvalidStorageBindings,
    &format!("{MAIN_ROW}[0].dynamic_storage_bindings"),
    "no slot"
);
rejects!(
    provider_with_unsorted_storage_bindings,
    |r| {
        row(&mut r, "operation.main")[0]
            .dynamic_storage_bindings
            .swap(1, 2);
    },
    InvalidStorageBindings,
    &format!("{MAIN_ROW}[0].dynamic_storage_bindings[2]"),
    "Input, 2"
);
rejects!(
    provider_slot_without_profiles,
    |r| {
        row(&mut r, "operation.main")[1].dynamic_storage_bindings[0]
            .storage
            .accepted_profiles
            .clear();
    },
    InvalidStorageBindings,
    &format!("{MAIN_ROW}[1].dynamic_storage_bindings[0].storage.accepted_profiles"),
    "accepts no storage profile"
);
rejects!(
    provider_slot_with_unsorted_profiles,
    |r| {
        row(&mut r, "operation.main")[1].dynamic_storage_bindings[1]
            .storage
            .accepted_profiles = vec![paged(), linear()];
    },
    InvalidStorageBindings,
    &format!("{MAIN_ROW}[1].dynamic_storage_bindings[1].storage.accepted_profiles"),
    "sorted"
);
rejects!(
    provider_with_unstable_estimator,
    |r| {
        row(&mut r, "operation.main")[0].resource_estimator_version = ContractVersion::new(0, 1);
    },
    InvalidEstimatorIdentity,
    &format!("{MAIN_ROW}[0].resource_estimator_version.major"),
    "resource-estimator.reference"
);
rejects!(
    engine_under_another_key,
    |r| {
        let engine = r.catalog.engine_providers.values().next().unwrap().clone();
        r.catalog
            .engine_providers
            .insert(id("provider.engine.other"), engine);
    },
    CatalogKeyMismatch,
    "catalog.engine_providers[\"provider.engine.other\"].provider_id",
    "provider.engine.reference"
);
rejects!(
    engine_on_another_device,
    |r| {
        r.catalog
            .engine_providers
            .values_mut()
            .next()
            .unwrap()
            .device_id = id("device.metal.0");
    },
    DeviceMismatch,
    "catalog.engine_providers[\"provider.engine.reference\"].device_id",
    "device.metal.0"
);
rejects!(
    engine_with_unoffered_capability,
    |r| {
        r.catalog
            .engine_providers
            .values_mut()
            .next()
            .unwrap()
            .capabilities
            .insert(id("capability.zzz"));
    },
    UnofferedCapability,
    "catalog.engine_providers[\"provider.engine.reference\"].capabilities[1]",
    "capability.zzz"
);
rejects!(
    materializer_under_another_key,
    |r| {
        r.catalog.weight_materializers.insert(
            id("weight-materializer.a"),
            WeightMaterializerDescriptor {
                id: id("weight-materializer.b"),
                version: ContractVersion::new(1, 0),
                implementation_fingerprint: hex('5'),
            },
        );
    },
    CatalogKeyMismatch,
    "catalog.weight_materializers[\"weight-materializer.a\"].id",
    "weight-materializer.b"
);

// ---------------------------------------------------------------- policy (1.7)

rejects!(
    unstable_policy,
    |r| {
        r.policy.version = ContractVersion::new(0, 2);
    },
    UnstablePolicyVersion,
    "policy.version.major",
    "runtime-policy.test"
);
rejects!(
    policy_without_capacity,
    |r| {
        r.policy.memory_capacity_bytes = 0;
        r.policy.memory_reserve_bytes = 0;
    },
    InvalidMemoryCapacity,
    "policy.memory_capacity_bytes",
    "zero bytes"
);
rejects!(
    policy_above_device_memory,
    |r| {
        r.policy.memory_capacity_bytes = (1 << 20) + 1;
    },
    InvalidMemoryCapacity,
    "policy.memory_capacity_bytes",
    "device.reference.0"
);
rejects!(
    policy_reserve_not_below_capacity,
    |r| {
        r.policy.memory_reserve_bytes = 1 << 20;
    },
    InvalidMemoryCapacity,
    "policy.memory_reserve_bytes",
    "1048576"
);
rejects!(
    policy_without_sequences,
    |r| {
        r.policy.maximum_active_sequences = 0;
    },
    ZeroPolicyCeiling,
    "policy.maximum_active_sequences",
    "no sequence"
);
rejects!(
    policy_without_tokens,
    |r| {
        r.policy.maximum_scheduled_tokens = 0;
    },
    ZeroPolicyCeiling,
    "policy.maximum_scheduled_tokens",
    "no token"
);
rejects!(
    policy_without_profiles,
    |r| {
        r.policy.dynamic_storage_profile_order.clear();
    },
    InvalidProfileOrder,
    "policy.dynamic_storage_profile_order",
    "no storage profile"
);
rejects!(
    policy_with_repeated_profile,
    |r| {
        r.policy.dynamic_storage_profile_order.push(linear());
    },
    InvalidProfileOrder,
    "policy.dynamic_storage_profile_order[2]",
    "linear+contiguous"
);
rejects!(
    policy_with_illegal_profile,
    |r| {
        r.policy.dynamic_storage_profile_order.push(StorageProfile {
            allocator: StorageAllocator::FixedBlockArena { block_bytes: 4096 },
            view: StorageView::PagedRegions { block_bytes: 8192 },
        });
    },
    InvalidProfileOrder,
    "policy.dynamic_storage_profile_order[2]",
    "fixed_block(4096)+paged(8192)"
);
rejects!(
    reusable_without_lanes,
    |r| {
        r.policy
            .reusable_execution
            .as_mut()
            .unwrap()
            .maximum_reusable_lanes = 0;
    },
    InvalidReusableExecution,
    "policy.reusable_execution.maximum_reusable_lanes",
    "zero lanes"
);
rejects!(
    reusable_without_buckets,
    |r| {
        buckets(&mut r).clear();
    },
    InvalidReusableExecution,
    "policy.reusable_execution.buckets",
    "0 buckets"
);
rejects!(
    reusable_with_65_buckets,
    |r| {
        let list = buckets(&mut r);
        list.truncate(1);
        for tokens in 2..=65 {
            let mut next = list[0].clone();
            next.capacity.maximum_tokens = tokens;
            list.push(next);
        }
        reseal(&mut r);
    },
    InvalidReusableExecution,
    "policy.reusable_execution.buckets",
    "65 buckets"
);
rejects!(
    reusable_bucket_without_pages,
    |r| {
        buckets(&mut r)[1].capacity.maximum_pages = 0;
        reseal(&mut r);
    },
    InvalidReusableExecution,
    "policy.reusable_execution.buckets[1].capacity.maximum_pages",
    "uniform-query"
);
rejects!(
    reusable_bucket_above_sequence_ceiling,
    |r| {
        buckets(&mut r)[2].capacity.maximum_sequences = 4;
        reseal(&mut r);
    },
    InvalidReusableExecution,
    "policy.reusable_execution.buckets[2].capacity.maximum_sequences",
    "admits 3"
);
rejects!(
    reusable_bucket_above_token_ceiling,
    |r| {
        buckets(&mut r)[0].capacity.maximum_tokens = 4097;
        reseal(&mut r);
    },
    InvalidReusableExecution,
    "policy.reusable_execution.buckets[0].capacity.maximum_tokens",
    "packed-prefill"
);
rejects!(
    reusable_bucket_with_stale_id,
    |r| {
        buckets(&mut r)[2].capacity.maximum_tokens = 3;
    },
    ReusableBucketIdMismatch,
    "policy.reusable_execution.buckets[2].bucket_id",
    "uniform-query"
);
rejects!(
    reusable_buckets_unsorted,
    |r| {
        buckets(&mut r).swap(0, 1);
    },
    InvalidReusableExecution,
    "policy.reusable_execution.buckets[1]",
    "sorted"
);
rejects!(
    reusable_buckets_repeated,
    |r| {
        let again = buckets(&mut r)[2].clone();
        buckets(&mut r).push(again);
    },
    InvalidReusableExecution,
    "policy.reusable_execution.buckets[3]",
    "unique"
);
rejects!(
    reusable_bucket_that_does_not_extend,
    |r| {
        let list = buckets(&mut r);
        list[1].capacity = BucketCapacity {
            maximum_sequences: 1,
            maximum_tokens: 2,
            maximum_pages: 1,
        };
        list[2].capacity = BucketCapacity {
            maximum_sequences: 2,
            maximum_tokens: 1,
            maximum_pages: 1,
        };
        reseal(&mut r);
    },
    InvalidReusableExecution,
    "policy.reusable_execution.buckets[2].capacity",
    "strictly extend"
);

// ---------------------------------------------------------------- bindings and storage (1.5)

const V: &str = "node_resolutions[0].values";

rejects!(
    resolution_without_values,
    |r| {
        values(&mut r).clear();
        reseal_estimates(&mut r);
    },
    EmptyResolutionValues,
    "node_resolutions[0].values",
    "node.main"
);
rejects!(
    input_binding_that_writes,
    |r| {
        values(&mut r)[0].access = TensorAccess::Write;
    },
    InvalidBindingAccess,
    &format!("{V}[0].access"),
    "value.input"
);
rejects!(
    input_binding_that_aliases,
    |r| {
        values(&mut r)[0].alias = AliasPolicy::MustAlias { tensor_index: 0 };
    },
    InvalidBindingAccess,
    &format!("{V}[0].alias"),
    "value.input"
);
rejects!(
    output_binding_that_reads,
    |r| {
        values(&mut r)[3].access = TensorAccess::Read;
    },
    InvalidBindingAccess,
    &format!("{V}[3].access"),
    "value.hidden"
);
rejects!(
    binding_with_zero_extent,
    |r| {
        values(&mut r)[0].tensor.dimensions[0] = 0;
    },
    InvalidBindingTensor,
    &format!("{V}[0].tensor"),
    "value.input"
);
rejects!(
    binding_with_bad_zero_fill,
    |r| {
        values(&mut r)[3].tensor.layout = TensorLayout::Blocked {
            block: vec![4, 8],
            axis_order: vec![0, 1],
            padding: BlockPadding::ZeroFill {
                physical_dimensions: vec![4, 8],
            },
        };
    },
    InvalidBindingTensor,
    &format!("{V}[3].tensor"),
    "pads no axis"
);
rejects!(
    binding_stored_nowhere,
    |r| {
        values(&mut r)[0].storage.components.clear();
    },
    InvalidValueStorage,
    &format!("{V}[0].storage.components"),
    "value.input"
);
rejects!(
    empty_storage_component,
    |r| {
        values(&mut r)[0].storage.components[0].length_bytes = 0;
    },
    InvalidStorageComponent,
    &format!("{V}[0].storage.components[0].length_bytes"),
    "resource/activation-input"
);
rejects!(
    storage_component_overflow,
    |r| {
        values(&mut r)[0].storage.components[0].offset_bytes = u64::MAX - 3;
    },
    InvalidStorageComponent,
    &format!("{V}[0].storage.components[0].length_bytes"),
    "overflows"
);
rejects!(
    misaligned_storage_offset,
    |r| {
        values(&mut r)[0].storage.components[0].offset_bytes = 2;
    },
    InvalidStorageComponent,
    &format!("{V}[0].storage.components[0].offset_bytes"),
    "4-byte element"
);
rejects!(
    storage_length_not_whole_elements,
    |r| {
        values(&mut r)[0].storage.components[0].length_bytes = 18;
    },
    InvalidStorageComponent,
    &format!("{V}[0].storage.components[0].length_bytes"),
    "18"
);
rejects!(
    several_components_without_ids,
    |r| {
        let extra = component("resource/activation-b", 0, 64, ElementType::F16);
        values(&mut r)[3].storage.components.push(extra);
    },
    InvalidValueStorage,
    &format!("{V}[3].storage.components[0].component_id"),
    "no component id"
);
rejects!(
    unsorted_storage_components,
    |r| {
        add_scales_component(&mut r);
        values(&mut r)[1].storage.components.swap(0, 1);
    },
    InvalidValueStorage,
    &format!("{V}[1].storage.components[1]"),
    "not sorted"
);
rejects!(
    repeated_storage_component_id,
    |r| {
        add_scales_component(&mut r);
        values(&mut r)[1].storage.components[1].component_id = Some(id("weight.matrix"));
        values(&mut r)[1].storage.components[1].resource_id = id("resource/weight-other");
    },
    InvalidValueStorage,
    &format!("{V}[1].storage.components[1].component_id"),
    "stored twice"
);
rejects!(
    overlapping_storage_components,
    |r| {
        add_scales_component(&mut r);
        values(&mut r)[1].storage.components[1].offset_bytes = 120;
    },
    StorageOverlap,
    &format!("{V}[1].storage.components[1]"),
    "resource/weight-matrix"
);
rejects!(
    storage_of_another_element_type,
    |r| {
        values(&mut r)[0].storage.components[0].element_type = ElementType::U8;
    },
    StorageDoesNotFitTensor,
    &format!("{V}[0].storage.components[0].element_type"),
    "U8"
);
rejects!(
    activation_in_two_components,
    |r| {
        values(&mut r)[3].storage.components = vec![
            weight_component("part.a", "resource/activation-a", 0, 32),
            weight_component("part.b", "resource/activation-a", 32, 32),
        ];
    },
    StorageDoesNotFitTensor,
    &format!("{V}[3].storage.components"),
    "2 components"
);
rejects!(
    activation_storage_too_small,
    |r| {
        values(&mut r)[3].storage.components[0].length_bytes = 32;
    },
    StorageDoesNotFitTensor,
    &format!("{V}[3].storage.components[0].length_bytes"),
    "needs 64"
);
rejects!(
    strided_storage_too_small,
    |r| {
        values(&mut r)[3].tensor.layout = TensorLayout::Strided {
            byte_strides: vec![32, 2],
        };
        values(&mut r)[3].storage.components[0].length_bytes = 110;
    },
    StorageDoesNotFitTensor,
    &format!("{V}[3].storage.components[0].length_bytes"),
    "needs 112"
);
rejects!(
    weights_usage_without_weight,
    |r| {
        values(&mut r)[1].weight = None;
    },
    WeightBindingMismatch,
    &format!("{V}[1].weight"),
    "carries no weight"
);
rejects!(
    activation_carrying_a_weight,
    |r| {
        let weight = values(&mut r)[1].weight.clone();
        values(&mut r)[3].weight = weight;
    },
    WeightBindingMismatch,
    &format!("{V}[3].weight"),
    "value.hidden"
);
rejects!(
    weight_component_count_mismatch,
    |r| {
        add_scales_component(&mut r);
        values(&mut r)[1].storage.components.pop();
    },
    WeightBindingMismatch,
    &format!("{V}[1].storage.components"),
    "2 components, the storage 1"
);
rejects!(
    weight_component_stored_under_other_id,
    |r| {
        values(&mut r)[1].storage.components[0].component_id = Some(id("weight.other"));
    },
    WeightBindingMismatch,
    &format!("{V}[1].storage.components[0].component_id"),
    "weight.matrix"
);
rejects!(
    weight_component_of_other_size,
    |r| {
        values(&mut r)[1].storage.components[0].length_bytes = 64;
    },
    WeightBindingMismatch,
    &format!("{V}[1].storage.components[0].length_bytes"),
    "128 bytes"
);
rejects!(
    weight_component_of_other_element_type,
    |r| {
        values(&mut r)[1].storage.components[0].element_type = ElementType::F32;
    },
    WeightBindingMismatch,
    &format!("{V}[1].storage.components[0].element_type"),
    "F32"
);
rejects!(
    weight_components_unsorted,
    |r| {
        add_scales_component(&mut r);
        values(&mut r)[1]
            .weight
            .as_mut()
            .unwrap()
            .components
            .swap(0, 1);
    },
    WeightBindingMismatch,
    &format!("{V}[1].weight.components[1].component_id"),
    "sorted"
);

// ---------------------------------------------------------------- candidates and workspaces (1.6)

const C: &str = "node_resolutions[0].provider_resource_candidates";

rejects!(
    resolution_without_candidates,
    |r| {
        candidates(&mut r).clear();
    },
    InvalidCandidateList,
    C,
    "node.main"
);
rejects!(
    unsorted_candidates,
    |r| {
        candidates(&mut r).swap(0, 1);
    },
    InvalidCandidateList,
    &format!("{C}[1].provider_id"),
    "provider.operation.reference"
);
rejects!(
    repeated_candidate,
    |r| {
        let again = candidates(&mut r)[1].clone();
        candidates(&mut r).push(again);
    },
    InvalidCandidateList,
    &format!("{C}[2].provider_id"),
    "provider.operation.secondary"
);
rejects!(
    estimate_with_unstable_estimator,
    |r| {
        candidates(&mut r)[0].estimator_version = ContractVersion::new(0, 1);
        reseal_estimates(&mut r);
    },
    InvalidEstimate,
    &format!("{C}[0].estimator_version.major"),
    "provider.operation.reference"
);
rejects!(
    estimate_with_zero_alignment,
    |r| {
        candidates(&mut r)[1].value_alignment_bytes = 0;
        reseal_estimates(&mut r);
    },
    InvalidEstimate,
    &format!("{C}[1].value_alignment_bytes"),
    "provider.operation.secondary"
);
rejects!(
    estimate_with_odd_alignment,
    |r| {
        candidates(&mut r)[1].value_alignment_bytes = 48;
        reseal_estimates(&mut r);
    },
    InvalidEstimate,
    &format!("{C}[1].value_alignment_bytes"),
    "48"
);
rejects!(
    scratch_that_outlives_the_invocation,
    |r| {
        scratch(&mut r).scope = WorkspaceScope::Step;
        reseal_estimates(&mut r);
    },
    InvalidEstimate,
    &format!("{C}[0].scratch.scope"),
    "scratch workspace"
);
rejects!(
    binding_workspace_that_outlives_the_invocation,
    |r| {
        let workspace = scratch(&mut r).clone();
        candidates(&mut r)[1].binding = Some(WorkspaceRequirement {
            scope: WorkspaceScope::Request,
            ..workspace
        });
        reseal_estimates(&mut r);
    },
    InvalidEstimate,
    &format!("{C}[1].binding.scope"),
    "binding workspace"
);
rejects!(
    persistent_workspace_per_invocation,
    |r| {
        let workspace = scratch(&mut r).clone();
        candidates(&mut r)[1].persistent = Some(workspace);
        reseal_estimates(&mut r);
    },
    InvalidEstimate,
    &format!("{C}[1].persistent.scope"),
    "persistent"
);

fn with_formula(r: &mut PlanRequest, formula: WorkspaceSizeFormula) {
    scratch(r).size_formula = formula;
    reseal_estimates(r);
}

fn shape(sequences: u32, tokens: u64, pages: u64, bytes: u64) -> ShapeBucket {
    ShapeBucket {
        maximum_sequences: sequences,
        maximum_tokens: tokens,
        maximum_pages: pages,
        bytes,
    }
}

const S: &str = "node_resolutions[0].provider_resource_candidates[0].scratch";

rejects!(
    fixed_formula_of_zero_bytes,
    |r| {
        with_formula(&mut r, WorkspaceSizeFormula::Fixed { bytes: 0 });
    },
    InvalidWorkspace,
    &format!("{S}.size_formula.fixed.bytes"),
    "provider.operation.reference\" scratch workspace"
);
rejects!(
    sequence_formula_of_zero_bytes,
    |r| {
        with_formula(
            &mut r,
            WorkspaceSizeFormula::ActualSequences {
                bytes_per_sequence: 0,
            },
        );
    },
    InvalidWorkspace,
    &format!("{S}.size_formula.actual_sequences.bytes_per_sequence"),
    "zero"
);
rejects!(
    token_formula_of_zero_bytes,
    |r| {
        with_formula(&mut r, WorkspaceSizeFormula::Tokens { bytes_per_token: 0 });
    },
    InvalidWorkspace,
    &format!("{S}.size_formula.tokens.bytes_per_token"),
    "zero"
);
rejects!(
    affine_formula_without_unit_terms,
    |r| {
        with_formula(
            &mut r,
            WorkspaceSizeFormula::Affine {
                fixed_bytes: 64,
                bytes_per_sequence: 0,
                bytes_per_token: 0,
            },
        );
    },
    InvalidWorkspace,
    &format!("{S}.size_formula.affine"),
    "use fixed"
);
rejects!(
    affine_formula_overflow,
    |r| {
        with_formula(
            &mut r,
            WorkspaceSizeFormula::Affine {
                fixed_bytes: u64::MAX,
                bytes_per_sequence: 0,
                bytes_per_token: 1,
            },
        );
    },
    InvalidWorkspace,
    &format!("{S}.size_formula.affine"),
    "overflow"
);
rejects!(
    page_formula_without_pages,
    |r| {
        with_formula(
            &mut r,
            WorkspaceSizeFormula::Pages {
                bytes_per_page: 4096,
                maximum_pages: 0,
            },
        );
    },
    InvalidWorkspace,
    &format!("{S}.size_formula.pages.maximum_pages"),
    "maximum pages"
);
rejects!(
    page_formula_of_zero_bytes,
    |r| {
        with_formula(
            &mut r,
            WorkspaceSizeFormula::Pages {
                bytes_per_page: 0,
                maximum_pages: 8,
            },
        );
    },
    InvalidWorkspace,
    &format!("{S}.size_formula.pages.bytes_per_page"),
    "bytes per page"
);
rejects!(
    page_formula_overflow,
    |r| {
        with_formula(
            &mut r,
            WorkspaceSizeFormula::Pages {
                bytes_per_page: 1 << 40,
                maximum_pages: 1 << 30,
            },
        );
    },
    InvalidWorkspace,
    &format!("{S}.size_formula.pages"),
    "overflows"
);
rejects!(
    bucket_formula_without_buckets,
    |r| {
        with_formula(
            &mut r,
            WorkspaceSizeFormula::BoundedShapeBuckets { buckets: vec![] },
        );
    },
    InvalidWorkspace,
    &format!("{S}.size_formula.bounded_shape_buckets.buckets"),
    "0 buckets"
);
rejects!(
    bucket_formula_with_65_buckets,
    |r| {
        let buckets = (1..=65).map(|t| shape(1, t, 1, 64)).collect();
        with_formula(
            &mut r,
            WorkspaceSizeFormula::BoundedShapeBuckets { buckets },
        );
    },
    InvalidWorkspace,
    &format!("{S}.size_formula.bounded_shape_buckets.buckets"),
    "65 buckets"
);
rejects!(
    bucket_formula_with_zero_bytes,
    |r| {
        with_formula(
            &mut r,
            WorkspaceSizeFormula::BoundedShapeBuckets {
                buckets: vec![shape(1, 1, 1, 0)],
            },
        );
    },
    InvalidWorkspace,
    &format!("{S}.size_formula.bounded_shape_buckets.buckets[0].bytes"),
    "zero bytes"
);
rejects!(
    bucket_formula_that_shrinks,
    |r| {
        with_formula(
            &mut r,
            WorkspaceSizeFormula::BoundedShapeBuckets {
                buckets: vec![shape(1, 4, 1, 64), shape(2, 2, 1, 128)],
            },
        );
    },
    InvalidWorkspace,
    &format!("{S}.size_formula.bounded_shape_buckets.buckets[1]"),
    "strictly extend"
);
rejects!(
    bucket_formula_with_fewer_bytes,
    |r| {
        with_formula(
            &mut r,
            WorkspaceSizeFormula::BoundedShapeBuckets {
                buckets: vec![shape(1, 4, 1, 64), shape(2, 4, 1, 32)],
            },
        );
    },
    InvalidWorkspace,
    &format!("{S}.size_formula.bounded_shape_buckets.buckets[1]"),
    "bucket 1"
);
rejects!(
    bucket_formula_repeated_shape,
    |r| {
        with_formula(
            &mut r,
            WorkspaceSizeFormula::BoundedShapeBuckets {
                buckets: vec![shape(1, 4, 1, 64), shape(1, 4, 1, 64)],
            },
        );
    },
    InvalidWorkspace,
    &format!("{S}.size_formula.bounded_shape_buckets.buckets[1]"),
    "strictly extend"
);
rejects!(
    workspace_alignment_not_power_of_two,
    |r| {
        scratch(&mut r).alignment_bytes = 12;
        reseal_estimates(&mut r);
    },
    InvalidWorkspace,
    &format!("{S}.alignment_bytes"),
    "12"
);
rejects!(
    workspace_rounding_overflow,
    |r| {
        with_formula(
            &mut r,
            WorkspaceSizeFormula::Fixed {
                bytes: u64::MAX - 1,
            },
        );
    },
    InvalidWorkspace,
    &format!("{S}.alignment_bytes"),
    "overflow"
);
rejects!(
    workspace_without_profiles,
    |r| {
        scratch(&mut r).storage.accepted_profiles.clear();
        reseal_estimates(&mut r);
    },
    InvalidWorkspace,
    &format!("{S}.storage.accepted_profiles"),
    "accepts no storage profile"
);
rejects!(
    workspace_with_illegal_profile,
    |r| {
        scratch(&mut r).storage.accepted_profiles = vec![StorageProfile {
            allocator: StorageAllocator::FixedBlockArena { block_bytes: 3000 },
            view: StorageView::Contiguous,
        }];
        reseal_estimates(&mut r);
    },
    InvalidWorkspace,
    &format!("{S}.storage.accepted_profiles"),
    "3000"
);

fn persistent(r: &mut PlanRequest, scope: WorkspaceScope, formula: WorkspaceSizeFormula) {
    let workspace = scratch(r).clone();
    candidates(r)[1].persistent = Some(WorkspaceRequirement {
        scope,
        size_formula: formula,
        ..workspace
    });
    reseal_estimates(r);
}

rejects!(
    plan_scope_with_growing_formula,
    |r| {
        persistent(
            &mut r,
            WorkspaceScope::Plan,
            WorkspaceSizeFormula::Tokens { bytes_per_token: 8 },
        );
    },
    InvalidWorkspace,
    &format!("{C}[1].persistent.scope"),
    "fixed size formula"
);
rejects!(
    sequence_scope_with_sequence_formula,
    |r| {
        persistent(
            &mut r,
            WorkspaceScope::Sequence,
            WorkspaceSizeFormula::ActualSequences {
                bytes_per_sequence: 8,
            },
        );
    },
    InvalidWorkspace,
    &format!("{C}[1].persistent.scope"),
    "sequence count"
);
rejects!(
    sequence_scope_with_affine_sequence_term,
    |r| {
        persistent(
            &mut r,
            WorkspaceScope::Sequence,
            WorkspaceSizeFormula::Affine {
                fixed_bytes: 0,
                bytes_per_sequence: 8,
                bytes_per_token: 8,
            },
        );
    },
    InvalidWorkspace,
    &format!("{C}[1].persistent.scope"),
    "sequence count"
);
rejects!(
    sequence_scope_with_multi_sequence_buckets,
    |r| {
        persistent(
            &mut r,
            WorkspaceScope::Sequence,
            WorkspaceSizeFormula::BoundedShapeBuckets {
                buckets: vec![shape(1, 1, 1, 64), shape(2, 1, 1, 64)],
            },
        );
    },
    InvalidWorkspace,
    &format!("{C}[1].persistent.scope"),
    "provider.operation.secondary\" persistent workspace"
);
rejects!(
    stale_estimate_fingerprint,
    |r| {
        candidates(&mut r)[1].value_alignment_bytes = 32;
    },
    EstimateFingerprintMismatch,
    &format!("{C}[1].estimate_fingerprint"),
    "jointplan seal"
);
rejects!(
    provider_both_candidate_and_rejected,
    |r| {
        r.node_resolutions[0].provider_resolution_rejections.insert(
            id("provider.operation.secondary"),
            ResolutionRejection::StorageIncompatible {
                resource_ids: vec![id("resource/shared-state")],
            },
        );
    },
    CandidateAlsoRejected,
    "node_resolutions[0].provider_resolution_rejections[\"provider.operation.secondary\"]",
    "provider.operation.secondary"
);
rejects!(rejection_without_resources, |r| {
        r.node_resolutions[1].provider_resolution_rejections.insert(id("provider/fallback"),
            ResolutionRejection::StorageIncompatible { resource_ids: vec![] });
    }, InvalidResolutionRejection,
    "node_resolutions[1].provider_resolution_rejections[\"provider/fallback\"].storage_incompatible.resource_ids", "node.residual");
rejects!(rejection_with_unsorted_resources, |r| {
        r.node_resolutions[1].provider_resolution_rejections.insert(id("provider/fallback"),
            ResolutionRejection::StorageIncompatible {
                resource_ids: vec![id("resource/shared-state"), id("resource/activation-a")] });
    }, InvalidResolutionRejection,
    "node_resolutions[1].provider_resolution_rejections[\"provider/fallback\"].storage_incompatible.resource_ids[1]", "resource/activation-a");

#[test]
fn a_valid_rejection_passes() {
    let mut r = valid_request();
    r.node_resolutions[1].provider_resolution_rejections.insert(
        id("provider/fallback"),
        ResolutionRejection::StorageIncompatible {
            resource_ids: vec![id("resource/activation-a"), id("resource/shared-state")],
        },
    );
    validate_request(&r).unwrap();
}

#[test]
fn errors_map_to_exit_code_two() {
    let mut r = valid_request();
    r.policy.maximum_scheduled_tokens = 0;
    let error: jointplan::Error = validate_request(&r).unwrap_err().into();
    assert_eq!(error.kind(), jointplan::ErrorKind::BadInput);
    assert!(
        error
            .to_string()
            .starts_with("policy.maximum_scheduled_tokens: "),
        "{error}"
    );
}

#[test]
fn error_accessors_agree_with_the_message() {
    let mut r = valid_request();
    node(&mut r, 0).inputs[0] = id("value.nowhere");
    let error = validate_request(&r).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("{}: {}: {}", error.path(), error.rule(), error.detail())
    );
    assert!(
        error
            .detail()
            .contains("node \"node.main\" reads value \"value.nowhere\""),
        "{error}"
    );
}

/// A long chain of nodes validates (issue 4 plans 50k-node requests; the checks use index
/// maps, so this stays fast, but no timing is asserted here).
#[test]
fn a_long_program_validates() {
    let mut r = valid_request();
    let template = node(&mut r, 1).clone();
    let resolution = r.node_resolutions[1].clone();
    let mut previous = id::<ProgramValueId>("value.output");
    for i in 0..5000 {
        let output: ProgramValueId = id(&format!("value.chain.{i}"));
        let mut next = template.clone();
        next.id = id(&format!("node.chain.{i}"));
        next.inputs = vec![previous.clone()];
        next.outputs = vec![output.clone()];
        next.work = WorkSpec::Tokens {
            value_id: previous.clone(),
            axis: 0,
        };
        r.family.program.blocks[0].nodes.push(next);
        let mut res = resolution.clone();
        res.node_id = id(&format!("node.chain.{i}"));
        r.node_resolutions.push(res);
        previous = output;
    }
    r.family.program.outputs = vec![previous];
    reseal(&mut r);
    validate_request(&r).unwrap();
}

/// The complete example of `docs/format.md` is the tiny fixture, and it is valid.
#[test]
fn the_format_example_is_valid_and_current() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/format.md")).unwrap();
    let start = doc
        .find("<!-- example:begin -->")
        .expect("example marker in docs/format.md");
    let end = doc
        .find("<!-- example:end -->")
        .expect("example end marker in docs/format.md");
    let block = &doc[start..end];
    let json = &block[block.find("```json").unwrap() + 7..block.rfind("```").unwrap()];
    let expected = serde_json::to_string_pretty(&tiny_request()).unwrap();
    if std::env::var_os("JOINTPLAN_BLESS").is_some_and(|v| v == "1") {
        let fresh = format!(
            "{}<!-- example:begin -->\n```json\n{expected}\n```\n{}",
            &doc[..start],
            &doc[end..]
        );
        std::fs::write(
            concat!(env!("CARGO_MANIFEST_DIR"), "/docs/format.md"),
            fresh,
        )
        .unwrap();
        return;
    }
    let parsed: PlanRequest = parse_json(std::path::Path::new("docs/format.md"), json).unwrap();
    validate_request(&parsed).unwrap();
    assert!(
        json.trim() == expected.trim(),
        "the example of docs/format.md drifted from tests/common/request_fixture.rs::tiny_request; \
         regenerate it with `JOINTPLAN_BLESS=1 cargo test --test planner request_validation`"
    );
}

/// The node resolutions are validated in parallel: of several bad ones, the error is the
/// first in index order whatever the thread count (the oracle: the sequential order).
#[test]
fn of_several_bad_resolutions_the_first_is_reported_whatever_the_threads() {
    let mut request = crate::common::models::decoder_2layer();
    assert!(request.node_resolutions.len() > 7);
    for index in [7, 3, 5] {
        request.node_resolutions[index].values.clear();
    }
    for threads in [1, 2, 3] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        match pool.install(|| validate_request(&request)) {
            Err(RequestError::EmptyResolutionValues { path, .. }) => {
                assert_eq!(path, "node_resolutions[3].values", "{threads} threads")
            }
            other => panic!("{threads} threads: expected EmptyResolutionValues, got {other:?}"),
        }
    }
}
