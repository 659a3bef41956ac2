//! Check 4 of the internal validation (rules 6): the payload's execution weight plan is
//! structurally valid for the family, equal to the request's trusted plan (the identity
//! materializer's if the request has none), and the payload quotes its schema's weight and
//! quantization formats. A fact of the request: the independent checker cannot prove it.

use std::collections::{BTreeMap, BTreeSet};

use crate::request::fingerprints::identity_execution_weights;
use crate::request::{
    ElementType, ExecutionWeightPlan, IdSet, PlanRequest, WeightId, WeightSchema,
};

use super::{InternalError, PayloadContent};

fn invalid_weights(payload: &PayloadContent<'_>, problem: String) -> InternalError {
    InternalError::InvalidExecutionWeights {
        family_id: payload.family_id.to_string(),
        problem,
    }
}

/// Check 4: the execution weight plan is structurally valid for the family, equal to the
/// trusted plan, and the payload quotes its schema's formats.
pub(super) fn check_execution_weights(
    payload: &PayloadContent<'_>,
    request: &PlanRequest,
) -> Result<(), InternalError> {
    let weights = payload.execution_weights;
    let source = &request.family.weight_schema;
    let exec = &weights.schema;
    if weights.materializer_version.major == 0 {
        return Err(invalid_weights(
            payload,
            "materializer version has major 0".to_owned(),
        ));
    }
    if exec.components.windows(2).any(|w| w[0].id >= w[1].id) {
        return Err(invalid_weights(
            payload,
            "execution schema components are not sorted and unique".to_owned(),
        ));
    }
    if exec.tensors.windows(2).any(|w| w[0].id >= w[1].id) {
        return Err(invalid_weights(
            payload,
            "execution schema tensors are not sorted and unique".to_owned(),
        ));
    }
    for tensor in &exec.tensors {
        if let Some(missing) = tensor
            .components
            .iter()
            .find(|c| exec.component(c).is_none())
        {
            return Err(invalid_weights(
                payload,
                format!("tensor {} uses unknown component {missing}", tensor.id),
            ));
        }
    }
    // Both sides are sorted and unique (the components were checked above; the sources
    // are a map), so equal sets are equal sequences.
    if !exec
        .components
        .iter()
        .map(|c| &c.id)
        .eq(weights.component_sources.keys())
    {
        return Err(invalid_weights(
            payload,
            "component_sources does not list exactly the execution components".to_owned(),
        ));
    }
    let mut referenced = IdSet::default();
    for (component, sources) in &weights.component_sources {
        if sources.is_empty() {
            return Err(invalid_weights(
                payload,
                format!("execution component {component} has no source component"),
            ));
        }
        let unique: BTreeSet<&WeightId> = sources.iter().collect();
        if unique.len() != sources.len() {
            return Err(invalid_weights(
                payload,
                format!("execution component {component} lists a source component twice"),
            ));
        }
        for source_id in sources {
            if source.component(source_id).is_none() {
                return Err(invalid_weights(
                    payload,
                    format!(
                        "execution component {component} is made from {source_id}, which the family's weight schema does not declare"
                    ),
                ));
            }
            referenced.insert(source_id);
        }
    }
    if let Some(unused) = source
        .components
        .iter()
        .find(|c| c.required && !referenced.contains(&c.id))
    {
        return Err(invalid_weights(
            payload,
            format!(
                "required source component {} is not used by any execution component",
                unused.id
            ),
        ));
    }
    if logical_tensors(exec) != logical_tensors(source) {
        return Err(invalid_weights(
            payload,
            "the execution schema's logical tensors (ids, dimensions, element types, required flags) differ from the family's"
                .to_owned(),
        ));
    }
    let identity;
    let trusted = match &request.execution_weights {
        Some(trusted) => trusted,
        None => {
            identity = identity_execution_weights(source)?;
            &identity
        }
    };
    if let Some(field) = first_weight_plan_difference(weights, trusted) {
        return Err(InternalError::ExecutionWeightsMismatch { field });
    }
    if *payload.weight_format != exec.format_id {
        return Err(InternalError::WeightFormatMismatch {
            stored: payload.weight_format.to_string(),
            expected: exec.format_id.to_string(),
        });
    }
    let formats = exec.quantization_formats();
    if *payload.quantization_formats != formats {
        return Err(InternalError::QuantizationFormatsMismatch {
            stored: payload
                .quantization_formats
                .iter()
                .map(ToString::to_string)
                .collect(),
            expected: formats.iter().map(ToString::to_string).collect(),
        });
    }
    Ok(())
}

/// A weight schema's logical tensors (id, dimensions, element type, required flag), borrowed
/// and ordered by id.
type LogicalTensors<'a> = BTreeMap<&'a WeightId, (&'a [u64], ElementType, bool)>;

fn logical_tensors(schema: &WeightSchema) -> LogicalTensors<'_> {
    schema
        .tensors
        .iter()
        .map(|t| {
            (
                &t.id,
                (t.dimensions.as_slice(), t.logical_element_type, t.required),
            )
        })
        .collect()
}

fn first_weight_plan_difference(
    stored: &ExecutionWeightPlan,
    trusted: &ExecutionWeightPlan,
) -> Option<&'static str> {
    if stored.source_schema_fingerprint != trusted.source_schema_fingerprint {
        Some("source_schema_fingerprint")
    } else if stored.materializer_id != trusted.materializer_id {
        Some("materializer_id")
    } else if stored.materializer_version != trusted.materializer_version {
        Some("materializer_version")
    } else if stored.materializer_implementation_fingerprint
        != trusted.materializer_implementation_fingerprint
    {
        Some("materializer_implementation_fingerprint")
    } else if stored.component_sources != trusted.component_sources {
        Some("component_sources")
    } else if stored.schema != trusted.schema {
        Some("schema")
    } else {
        None
    }
}
