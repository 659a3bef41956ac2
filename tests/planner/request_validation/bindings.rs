//! Value bindings and their storage (rules 1.5).

use super::*;

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
