//! Weight schemas, program weight references and the execution weight plan (rules 1.2).

use std::collections::{BTreeSet, HashMap};

use crate::request::fingerprints::{identity_materializer, weight_schema_fingerprint};
use crate::request::{
    CapabilityCatalog, ElementType, ExecutionWeightPlan, ModelProgram, WeightEncoding, WeightId,
    WeightSchema,
};

use super::{key, RequestError};

/// Checks one weight schema found at `path` (the family's or the execution plan's).
pub(super) fn validate_weight_schema(
    path: &str,
    schema: &WeightSchema,
) -> Result<(), RequestError> {
    if !schema.version.is_stable() {
        return Err(RequestError::UnstableWeightSchemaVersion {
            path: format!("{path}.version.major"),
            detail: format!(
                "weight schema {:?} has version {}",
                schema.format_id.as_str(),
                schema.version
            ),
        });
    }
    for (i, pair) in schema.components.windows(2).enumerate() {
        strictly_after(
            &pair[0].id,
            &pair[1].id,
            || format!("{path}.components[{}].id", i + 1),
            "component",
        )?;
    }
    for (i, pair) in schema.tensors.windows(2).enumerate() {
        strictly_after(
            &pair[0].id,
            &pair[1].id,
            || format!("{path}.tensors[{}].id", i + 1),
            "tensor",
        )?;
    }
    for (i, component) in schema.components.iter().enumerate() {
        let component_path = format!("{path}.components[{i}]");
        let name = component.id.as_str();
        if let Some(axis) = component.dimensions.iter().position(|&d| d == 0) {
            return Err(RequestError::InvalidWeightComponent {
                path: format!("{component_path}.dimensions[{axis}]"),
                detail: format!("component {name:?} has a zero extent on axis {axis}"),
            });
        }
        validate_encoding(&component_path, name, &component.encoding)?;
        if component.physical_bytes().is_none() {
            return Err(RequestError::InvalidWeightComponent {
                path: format!("{component_path}.dimensions"),
                detail: format!("component {name:?}: its byte size overflows u64"),
            });
        }
    }
    for (i, tensor) in schema.tensors.iter().enumerate() {
        let tensor_path = format!("{path}.tensors[{i}]");
        let name = tensor.id.as_str();
        if let Some(axis) = tensor.dimensions.iter().position(|&d| d == 0) {
            return Err(RequestError::InvalidWeightTensor {
                path: format!("{tensor_path}.dimensions[{axis}]"),
                detail: format!("weight tensor {name:?} has a zero extent on axis {axis}"),
            });
        }
        if tensor.components.is_empty() {
            return Err(RequestError::InvalidWeightTensor {
                path: format!("{tensor_path}.components"),
                detail: format!("weight tensor {name:?} is stored in no component"),
            });
        }
        for (k, component) in tensor.components.iter().enumerate() {
            if k > 0 && tensor.components[k - 1] >= *component {
                return Err(RequestError::InvalidWeightTensor {
                    path: format!("{tensor_path}.components[{k}]"),
                    detail: format!(
                        "weight tensor {name:?}: component {:?} is not after {:?} (sorted, unique)",
                        component.as_str(),
                        tensor.components[k - 1].as_str()
                    ),
                });
            }
            if schema.component(component).is_none() {
                return Err(RequestError::InvalidWeightTensor {
                    path: format!("{tensor_path}.components[{k}]"),
                    detail: format!(
                        "weight tensor {name:?} names component {:?}, which the schema does not have",
                        component.as_str()
                    ),
                });
            }
        }
    }
    Ok(())
}

fn validate_encoding(
    path: &str,
    name: &str,
    encoding: &WeightEncoding,
) -> Result<(), RequestError> {
    let bad = |field: &str, detail: String| RequestError::InvalidQuantization {
        path: format!("{path}.encoding.{field}"),
        detail: format!("component {name:?}: {detail}"),
    };
    match encoding {
        WeightEncoding::Dense { .. } | WeightEncoding::DenseAffine { .. } => Ok(()),
        WeightEncoding::Quantized(spec) => {
            if !(1..=8).contains(&spec.bits_per_weight) {
                return Err(bad(
                    "quantized.bits_per_weight",
                    format!("{} bits per weight (1..=8 allowed)", spec.bits_per_weight),
                ));
            }
            if !spec.group_size.is_power_of_two() {
                return Err(bad(
                    "quantized.group_size",
                    format!("group size {} is not a power of two", spec.group_size),
                ));
            }
            if !matches!(
                spec.scale_type,
                ElementType::F16 | ElementType::Bf16 | ElementType::F32
            ) {
                return Err(bad(
                    "quantized.scale_type",
                    format!("scale type {:?} is not f16, bf16 or f32", spec.scale_type),
                ));
            }
            match spec.zero_point_type {
                None
                | Some(ElementType::U8 | ElementType::U32 | ElementType::I8 | ElementType::I32) => {
                    Ok(())
                }
                Some(other) => Err(bad(
                    "quantized.zero_point_type",
                    format!("zero point type {other:?} is not u8, u32, i8 or i32"),
                )),
            }
        }
        WeightEncoding::BlockQuantized(spec) => {
            if spec.logical_values_per_block == 0 {
                return Err(bad(
                    "block_quantized.logical_values_per_block",
                    "a block holds zero logical values".to_owned(),
                ));
            }
            if spec.bytes_per_block == 0 {
                return Err(bad(
                    "block_quantized.bytes_per_block",
                    "a block is stored in zero bytes".to_owned(),
                ));
            }
            Ok(())
        }
    }
}

/// Each program weight names a schema tensor with the same dimensions and logical dtype.
pub(super) fn validate_program_weights(
    program: &ModelProgram,
    schema: &WeightSchema,
) -> Result<(), RequestError> {
    for (i, weight) in program.weights.iter().enumerate() {
        let path = format!("family.program.weights[{i}]");
        let name = weight.weight_id.as_str();
        let Some(tensor) = schema.tensor(&weight.weight_id) else {
            return Err(RequestError::WeightReferenceMismatch {
                path: format!("{path}.weight_id"),
                detail: format!("program weight {name:?} is no tensor of the weight schema"),
            });
        };
        if tensor.dimensions != weight.tensor.dimensions {
            return Err(RequestError::WeightReferenceMismatch {
                path: format!("{path}.tensor.dimensions"),
                detail: format!(
                    "program weight {name:?} has dimensions {:?}, the schema tensor {:?}",
                    weight.tensor.dimensions, tensor.dimensions
                ),
            });
        }
        if tensor.logical_element_type != weight.tensor.element_type {
            return Err(RequestError::WeightReferenceMismatch {
                path: format!("{path}.tensor.element_type"),
                detail: format!(
                    "program weight {name:?} has element type {:?}, the schema tensor {:?}",
                    weight.tensor.element_type, tensor.logical_element_type
                ),
            });
        }
    }
    Ok(())
}

/// The execution weight plan is structurally valid for the family and its materializer is
/// trusted by the catalog (rules 1.2).
pub(super) fn validate_execution_weights(
    plan: &ExecutionWeightPlan,
    source: &WeightSchema,
    catalog: &CapabilityCatalog,
) -> Result<(), RequestError> {
    const PATH: &str = "execution_weights";
    let expected = weight_schema_fingerprint(source)
        .map_err(|e| RequestError::fingerprint("family.weight_schema", e))?;
    if plan.source_schema_fingerprint != expected {
        return Err(RequestError::ExecutionWeightsSourceMismatch {
            path: format!("{PATH}.source_schema_fingerprint"),
            detail: format!(
                "the plan quotes source schema {}, the family's weight schema is {expected} \
                 (run `jointplan seal` after editing the schema)",
                plan.source_schema_fingerprint
            ),
        });
    }
    validate_materializer(plan, catalog)?;
    validate_weight_schema(&format!("{PATH}.schema"), &plan.schema)?;

    let source_components: HashMap<&WeightId, &crate::request::WeightComponentSpec> =
        source.components.iter().map(|c| (&c.id, c)).collect();
    let mut referenced: BTreeSet<&WeightId> = BTreeSet::new();
    for (i, component) in plan.schema.components.iter().enumerate() {
        let name = component.id.as_str();
        let Some(sources) = plan.component_sources.get(&component.id) else {
            return Err(RequestError::InvalidComponentSources {
                path: format!("{PATH}.component_sources"),
                detail: format!(
                    "execution component {name:?} ({PATH}.schema.components[{i}]) has no source list"
                ),
            });
        };
        let sources_path = format!("{PATH}.component_sources{}", key(name));
        if sources.is_empty() {
            return Err(RequestError::InvalidComponentSources {
                path: sources_path,
                detail: format!("execution component {name:?} is made from no source component"),
            });
        }
        let mut seen = BTreeSet::new();
        for (k, source_id) in sources.iter().enumerate() {
            if !seen.insert(source_id) {
                return Err(RequestError::InvalidComponentSources {
                    path: format!("{sources_path}[{k}]"),
                    detail: format!(
                        "execution component {name:?} lists source {:?} twice",
                        source_id.as_str()
                    ),
                });
            }
            if !source_components.contains_key(source_id) {
                return Err(RequestError::InvalidComponentSources {
                    path: format!("{sources_path}[{k}]"),
                    detail: format!(
                        "execution component {name:?} is made from {:?}, which is no component \
                         of the family's weight schema",
                        source_id.as_str()
                    ),
                });
            }
            referenced.insert(source_id);
        }
    }
    if let Some(extra) = plan
        .component_sources
        .keys()
        .find(|id| plan.schema.component(id).is_none())
    {
        return Err(RequestError::InvalidComponentSources {
            path: format!("{PATH}.component_sources{}", key(extra.as_str())),
            detail: format!(
                "source list for {:?}, which is no component of the execution schema",
                extra.as_str()
            ),
        });
    }
    for (i, component) in source.components.iter().enumerate() {
        if component.required && !referenced.contains(&component.id) {
            return Err(RequestError::UnreferencedSourceComponent {
                path: format!("family.weight_schema.components[{i}]"),
                detail: format!(
                    "required source component {:?} feeds no execution component of {PATH}",
                    component.id.as_str()
                ),
            });
        }
    }

    let tensors_path = format!("{PATH}.schema.tensors");
    for (i, (exec, src)) in plan.schema.tensors.iter().zip(&source.tensors).enumerate() {
        let path = format!("{tensors_path}[{i}]");
        let mismatch = if exec.id != src.id {
            Some((
                "id",
                format!(
                    "tensor {:?} stands where the source has {:?}",
                    exec.id.as_str(),
                    src.id.as_str()
                ),
            ))
        } else if exec.dimensions != src.dimensions {
            Some((
                "dimensions",
                format!(
                    "tensor {:?} has dimensions {:?}, the source {:?}",
                    exec.id.as_str(),
                    exec.dimensions,
                    src.dimensions
                ),
            ))
        } else if exec.logical_element_type != src.logical_element_type {
            Some((
                "logical_element_type",
                format!(
                    "tensor {:?} has element type {:?}, the source {:?}",
                    exec.id.as_str(),
                    exec.logical_element_type,
                    src.logical_element_type
                ),
            ))
        } else if exec.required != src.required {
            Some((
                "required",
                format!(
                    "tensor {:?} has required = {}, the source {}",
                    exec.id.as_str(),
                    exec.required,
                    src.required
                ),
            ))
        } else {
            None
        };
        if let Some((field, detail)) = mismatch {
            return Err(RequestError::ExecutionTensorMismatch {
                path: format!("{path}.{field}"),
                detail,
            });
        }
    }
    if plan.schema.tensors.len() != source.tensors.len() {
        let (count, missing) = (plan.schema.tensors.len(), source.tensors.len());
        let detail = match source.tensors.get(count) {
            Some(tensor) => format!(
                "the execution schema has {count} tensors, the source {missing}: {:?} is missing",
                tensor.id.as_str()
            ),
            None => format!("the execution schema has {count} tensors, the source only {missing}"),
        };
        return Err(RequestError::ExecutionTensorMismatch {
            path: tensors_path,
            detail,
        });
    }
    Ok(())
}

fn validate_materializer(
    plan: &ExecutionWeightPlan,
    catalog: &CapabilityCatalog,
) -> Result<(), RequestError> {
    let identity =
        identity_materializer().map_err(|e| RequestError::fingerprint("execution_weights", e))?;
    let quoted = (
        &plan.materializer_id,
        plan.materializer_version,
        &plan.materializer_implementation_fingerprint,
    );
    if quoted
        == (
            &identity.id,
            identity.version,
            &identity.implementation_fingerprint,
        )
    {
        return Ok(());
    }
    match catalog.weight_materializers.get(&plan.materializer_id) {
        Some(trusted)
            if quoted
                == (
                    &trusted.id,
                    trusted.version,
                    &trusted.implementation_fingerprint,
                ) =>
        {
            Ok(())
        }
        Some(trusted) => Err(RequestError::UntrustedMaterializer {
            path: "execution_weights.materializer_implementation_fingerprint".to_owned(),
            detail: format!(
                "materializer {:?} {} ({}) differs from the catalog's {} ({})",
                plan.materializer_id.as_str(),
                plan.materializer_version,
                plan.materializer_implementation_fingerprint,
                trusted.version,
                trusted.implementation_fingerprint
            ),
        }),
        None => Err(RequestError::UntrustedMaterializer {
            path: "execution_weights.materializer_id".to_owned(),
            detail: format!(
                "materializer {:?} {} is not the identity materializer and not listed in \
                 catalog.weight_materializers",
                plan.materializer_id.as_str(),
                plan.materializer_version
            ),
        }),
    }
}

fn strictly_after(
    previous: &WeightId,
    next: &WeightId,
    path: impl FnOnce() -> String,
    what: &str,
) -> Result<(), RequestError> {
    if previous < next {
        return Ok(());
    }
    let detail = if previous == next {
        format!("{what} {:?} is listed twice", next.as_str())
    } else {
        format!(
            "{what} {:?} comes after {what} {:?} (sort by id)",
            next.as_str(),
            previous.as_str()
        )
    };
    Err(RequestError::UnsortedWeightSchema {
        path: path(),
        detail,
    })
}
