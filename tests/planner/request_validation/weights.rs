//! The weight schema and the execution weights (rules 1.2).

use super::*;

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
