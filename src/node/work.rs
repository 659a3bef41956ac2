//! The node work contract (rules 2.5): which binding slots carry the token axis, and
//! with how many tokens.

use super::NodeError;
use crate::plan::{NodeWorkContract, TokenProjection};
use crate::request::{
    BufferUsage, DimensionConstraint, NodeId, OperationDescriptor, ValueBinding, WorkSpec,
};

/// Derives the work contract of a node from its program work spec and bindings.
///
/// For `tokens{value, axis}` the contract dimension of that value at `axis` must be a
/// symbol S; every binding whose contract carries S (on exactly one axis) projects onto the
/// token axis, must be an activation, and must have the source's token count.
pub fn derive_work_contract(
    node: &NodeId,
    operation: &OperationDescriptor,
    work: &WorkSpec,
    values: &[ValueBinding],
) -> Result<NodeWorkContract, NodeError> {
    let WorkSpec::Tokens { value_id, axis } = work else {
        return Ok(NodeWorkContract::Fixed);
    };
    let Some(source) = values.iter().find(|b| &b.value_id == value_id) else {
        return Err(NodeError::WorkValueNotBound {
            node: node.clone(),
            value: value_id.clone(),
        });
    };
    let contract = operation.slot(source.role, source.ordinal);
    let symbol = match contract.and_then(|c| c.dimensions.get(*axis as usize)) {
        Some(DimensionConstraint::Symbol(symbol)) => symbol,
        _ => {
            return Err(NodeError::WorkAxisNotSymbol {
                node: node.clone(),
                operation: operation.id.clone(),
                value: value_id.clone(),
                axis: *axis,
            })
        }
    };
    let projection_error =
        |binding: &ValueBinding, axis: u32, detail: String| NodeError::WorkProjection {
            node: node.clone(),
            value: binding.value_id.clone(),
            symbol: symbol.clone(),
            axis,
            detail,
        };
    if source.usage != BufferUsage::Activations {
        return Err(projection_error(
            source,
            *axis,
            format!("is bound as {:?}, not activations", source.usage),
        ));
    }
    if *axis as usize >= source.tensor.dimensions.len() {
        return Err(projection_error(
            source,
            *axis,
            format!("its rank is {}", source.tensor.dimensions.len()),
        ));
    }
    let mut projections = Vec::new();
    for binding in values {
        let Some(contract) = operation.slot(binding.role, binding.ordinal) else {
            continue;
        };
        let axes: Vec<usize> = contract
            .dimensions
            .iter()
            .enumerate()
            .filter(|(_, d)| matches!(d, DimensionConstraint::Symbol(s) if s == symbol))
            .map(|(i, _)| i)
            .collect();
        let found_axis = match axes.as_slice() {
            [] => continue,
            [one] => *one,
            _ => {
                return Err(NodeError::WorkSymbolRepeated {
                    node: node.clone(),
                    value: binding.value_id.clone(),
                    symbol: symbol.clone(),
                })
            }
        };
        let axis_u32 = found_axis as u32;
        if binding.usage != BufferUsage::Activations {
            return Err(projection_error(
                binding,
                axis_u32,
                format!("is bound as {:?}, not activations", binding.usage),
            ));
        }
        let Some(&extent) = binding.tensor.dimensions.get(found_axis) else {
            return Err(projection_error(
                binding,
                axis_u32,
                format!("its rank is {}", binding.tensor.dimensions.len()),
            ));
        };
        projections.push(TokenProjection {
            value_id: binding.value_id.clone(),
            role: binding.role,
            ordinal: binding.ordinal,
            axis: axis_u32,
            rank: binding.tensor.dimensions.len() as u32,
            canonical_extent: extent,
        });
    }
    projections.sort();
    for pair in projections.windows(2) {
        if (pair[0].role, pair[0].ordinal) == (pair[1].role, pair[1].ordinal) {
            return Err(NodeError::WorkSymbolRepeated {
                node: node.clone(),
                value: pair[1].value_id.clone(),
                symbol: symbol.clone(),
            });
        }
    }
    let Some(source_projection) = projections
        .iter()
        .find(|p| &p.value_id == value_id && p.axis == *axis)
        .cloned()
    else {
        // The source's contract axis is S, so it always projects; keep the rule explicit.
        return Err(NodeError::WorkValueNotBound {
            node: node.clone(),
            value: value_id.clone(),
        });
    };
    if let Some(other) = projections
        .iter()
        .find(|p| p.canonical_extent != source_projection.canonical_extent)
    {
        return Err(NodeError::TokenExtentMismatch {
            node: node.clone(),
            value: other.value_id.clone(),
            axis: other.axis,
            extent: other.canonical_extent,
            source_value: source_projection.value_id.clone(),
            source_extent: source_projection.canonical_extent,
        });
    }
    Ok(NodeWorkContract::Tokens {
        source: source_projection,
        projections,
    })
}
