//! Binding-vs-operation rules (rules 2.3): every resolved binding of a node against the
//! tensor contracts of its operation, with node-wide dimension and stride symbols, and the
//! storage overlap rules between inputs and outputs.

use std::collections::BTreeMap;

use super::NodeError;
use crate::request::{
    AliasPolicy, DimensionConstraint, LayoutConstraint, NodeId, OperationDescriptor,
    ProgramValueId, StrideConstraint, TensorAccess, TensorLayout, TensorSpec, ValueBinding,
    ValueRole,
};

/// An alias policy in words, for messages.
pub fn alias_text(alias: &AliasPolicy) -> String {
    match alias {
        AliasPolicy::NoAlias => "no_alias".to_owned(),
        AliasPolicy::MayAlias { tensor_index } => format!("may_alias(input {tensor_index})"),
        AliasPolicy::MustAlias { tensor_index } => format!("must_alias(input {tensor_index})"),
    }
}

/// The slot position binding `index` must have: input `index` below the operation's input
/// count, else output `index - inputs`.
fn expected_position(operation: &OperationDescriptor, index: usize) -> (ValueRole, u32) {
    let inputs = operation.inputs.len();
    if index < inputs {
        (ValueRole::Input, index as u32)
    } else {
        (ValueRole::Output, (index - inputs) as u32)
    }
}

/// Node-wide bindings of dimension and stride symbols: the first binding that meets a
/// symbol fixes it for the node.
#[derive(Default)]
struct SymbolTable<'a> {
    dimensions: BTreeMap<&'a str, (&'a ProgramValueId, u64)>,
    strides: BTreeMap<&'a str, (&'a ProgramValueId, u64)>,
}

/// Checks every binding of a node against its operation (rules 2.3).
pub fn validate_bindings(
    node: &NodeId,
    operation: &OperationDescriptor,
    values: &[ValueBinding],
) -> Result<(), NodeError> {
    let expected = operation.inputs.len() + operation.outputs.len();
    if values.len() != expected {
        return Err(NodeError::BindingCount {
            node: node.clone(),
            operation: operation.id.clone(),
            expected,
            found: values.len(),
        });
    }
    let mut positions = BTreeMap::new();
    for binding in values {
        if positions
            .insert((binding.role, binding.ordinal), ())
            .is_some()
        {
            return Err(NodeError::DuplicateBindingPosition {
                node: node.clone(),
                role: binding.role,
                ordinal: binding.ordinal,
            });
        }
    }
    for (index, binding) in values.iter().enumerate() {
        let (role, ordinal) = expected_position(operation, index);
        if (binding.role, binding.ordinal) != (role, ordinal) {
            return Err(NodeError::BindingPosition {
                node: node.clone(),
                index,
                value: binding.value_id.clone(),
                expected_role: role,
                expected_ordinal: ordinal,
                found_role: binding.role,
                found_ordinal: binding.ordinal,
            });
        }
    }
    check_repeated_values(node, values)?;
    let mut symbols = SymbolTable::default();
    for binding in values {
        // Positions were checked above, so the slot exists.
        let Some(contract) = operation.slot(binding.role, binding.ordinal) else {
            continue;
        };
        let slot_error = |found: String, expected: String| NodeError::BindingAlias {
            node: node.clone(),
            operation: operation.id.clone(),
            value: binding.value_id.clone(),
            role: binding.role,
            ordinal: binding.ordinal,
            expected,
            found,
        };
        if binding.access != contract.access {
            return Err(NodeError::BindingAccess {
                node: node.clone(),
                operation: operation.id.clone(),
                value: binding.value_id.clone(),
                role: binding.role,
                ordinal: binding.ordinal,
                expected: contract.access,
                found: binding.access,
            });
        }
        if binding.alias != contract.alias {
            return Err(slot_error(
                alias_text(&binding.alias),
                alias_text(&contract.alias),
            ));
        }
        check_tensor(node, operation, binding, contract, &mut symbols)?;
    }
    check_overlaps(node, values)
}

fn check_repeated_values(node: &NodeId, values: &[ValueBinding]) -> Result<(), NodeError> {
    let mut first: BTreeMap<&ProgramValueId, &ValueBinding> = BTreeMap::new();
    for binding in values {
        match first.get(&binding.value_id) {
            None => {
                first.insert(&binding.value_id, binding);
            }
            Some(earlier) => {
                let allowed = earlier.role == ValueRole::Input
                    && binding.role == ValueRole::Input
                    && earlier.access == TensorAccess::Read
                    && binding.access == TensorAccess::Read
                    && earlier.tensor == binding.tensor
                    && earlier.storage == binding.storage
                    && earlier.usage == binding.usage;
                if !allowed {
                    return Err(NodeError::RepeatedValue {
                        node: node.clone(),
                        value: binding.value_id.clone(),
                        first_role: earlier.role,
                        first_ordinal: earlier.ordinal,
                        second_role: binding.role,
                        second_ordinal: binding.ordinal,
                    });
                }
            }
        }
    }
    Ok(())
}

fn constraint_text(constraint: &DimensionConstraint) -> String {
    match constraint {
        DimensionConstraint::Exact(extent) => format!("exactly {extent}"),
        DimensionConstraint::Symbol(symbol) => format!("symbol {symbol}"),
        DimensionConstraint::Range { minimum, maximum } => {
            format!("an extent in [{minimum}, {maximum}]")
        }
    }
}

fn check_tensor<'a>(
    node: &NodeId,
    operation: &OperationDescriptor,
    binding: &'a ValueBinding,
    contract: &'a crate::request::TensorContract,
    symbols: &mut SymbolTable<'a>,
) -> Result<(), NodeError> {
    let tensor = &binding.tensor;
    if tensor.dimensions.len() != contract.dimensions.len() {
        return Err(NodeError::BindingRank {
            node: node.clone(),
            operation: operation.id.clone(),
            value: binding.value_id.clone(),
            role: binding.role,
            ordinal: binding.ordinal,
            expected: contract.dimensions.len(),
            found: tensor.dimensions.len(),
        });
    }
    if !contract.element_types.contains(&tensor.element_type) {
        return Err(NodeError::BindingElementType {
            node: node.clone(),
            operation: operation.id.clone(),
            value: binding.value_id.clone(),
            role: binding.role,
            ordinal: binding.ordinal,
            found: tensor.element_type,
            accepted: contract.element_types.iter().copied().collect(),
        });
    }
    for (axis, (constraint, &extent)) in contract
        .dimensions
        .iter()
        .zip(&tensor.dimensions)
        .enumerate()
    {
        let dimension_error = || NodeError::BindingDimension {
            node: node.clone(),
            operation: operation.id.clone(),
            value: binding.value_id.clone(),
            role: binding.role,
            ordinal: binding.ordinal,
            axis,
            extent,
            constraint: constraint_text(constraint),
        };
        match constraint {
            DimensionConstraint::Exact(required) => {
                if extent != *required {
                    return Err(dimension_error());
                }
            }
            DimensionConstraint::Range { minimum, maximum } => {
                if extent < *minimum || extent > *maximum {
                    return Err(dimension_error());
                }
            }
            DimensionConstraint::Symbol(symbol) => match symbols.dimensions.get(symbol.as_str()) {
                None => {
                    symbols
                        .dimensions
                        .insert(symbol.as_str(), (&binding.value_id, extent));
                }
                Some(&(first_value, first_extent)) => {
                    if first_extent != extent {
                        return Err(NodeError::DimensionSymbolConflict {
                            node: node.clone(),
                            symbol: symbol.clone(),
                            first_value: first_value.clone(),
                            first_extent,
                            value: binding.value_id.clone(),
                            axis,
                            extent,
                        });
                    }
                }
            },
        }
    }
    check_layout(node, operation, binding, contract, symbols)
}

fn check_layout<'a>(
    node: &NodeId,
    operation: &OperationDescriptor,
    binding: &'a ValueBinding,
    contract: &'a crate::request::TensorContract,
    symbols: &mut SymbolTable<'a>,
) -> Result<(), NodeError> {
    let mut detail = String::new();
    for layout in &contract.layouts {
        match (layout, &binding.tensor.layout) {
            (LayoutConstraint::Contiguous, TensorLayout::Contiguous) => return Ok(()),
            (
                LayoutConstraint::Blocked { block, axis_order },
                TensorLayout::Blocked {
                    block: found_block,
                    axis_order: found_order,
                    ..
                },
            ) => {
                if block == found_block && axis_order == found_order {
                    return Ok(());
                }
                detail = format!(
                    "blocked {found_block:?} order {found_order:?} is not the contract's {block:?} order {axis_order:?}"
                );
            }
            (LayoutConstraint::Strided { strides }, TensorLayout::Strided { byte_strides }) => {
                match match_strides(&binding.value_id, strides, byte_strides, symbols) {
                    Ok(()) => return Ok(()),
                    Err(why) => detail = why,
                }
            }
            _ => {}
        }
    }
    if detail.is_empty() {
        detail = format!(
            "{} is none of {:?}",
            layout_name(&binding.tensor),
            contract.layouts
        );
    }
    Err(NodeError::BindingLayout {
        node: node.clone(),
        operation: operation.id.clone(),
        value: binding.value_id.clone(),
        role: binding.role,
        ordinal: binding.ordinal,
        detail,
    })
}

fn layout_name(tensor: &TensorSpec) -> &'static str {
    match tensor.layout {
        TensorLayout::Contiguous => "contiguous",
        TensorLayout::Strided { .. } => "strided",
        TensorLayout::Blocked { .. } => "blocked",
    }
}

/// Matches byte strides against one strided constraint; commits new stride symbols only when
/// the whole constraint matches.
fn match_strides<'a>(
    value: &'a ProgramValueId,
    strides: &'a [StrideConstraint],
    byte_strides: &[u64],
    symbols: &mut SymbolTable<'a>,
) -> Result<(), String> {
    if strides.len() != byte_strides.len() {
        return Err(format!(
            "{} strides for a contract of {}",
            byte_strides.len(),
            strides.len()
        ));
    }
    let mut fresh: BTreeMap<&'a str, u64> = BTreeMap::new();
    for (axis, (constraint, &stride)) in strides.iter().zip(byte_strides).enumerate() {
        match constraint {
            StrideConstraint::ExactBytes(bytes) => {
                if *bytes != stride {
                    return Err(format!(
                        "stride {stride} of axis {axis} is not the required {bytes} bytes"
                    ));
                }
            }
            StrideConstraint::Symbol(symbol) => {
                let bound = symbols
                    .strides
                    .get(symbol.as_str())
                    .map(|&(_, s)| s)
                    .or_else(|| fresh.get(symbol.as_str()).copied());
                match bound {
                    Some(existing) if existing != stride => {
                        return Err(format!(
                            "stride {stride} of axis {axis} conflicts with stride symbol {symbol} = {existing}"
                        ))
                    }
                    Some(_) => {}
                    None => {
                        fresh.insert(symbol.as_str(), stride);
                    }
                }
            }
        }
    }
    for (symbol, stride) in fresh {
        symbols.strides.insert(symbol, (value, stride));
    }
    Ok(())
}

fn check_overlaps(node: &NodeId, values: &[ValueBinding]) -> Result<(), NodeError> {
    let inputs: Vec<&ValueBinding> = values
        .iter()
        .filter(|b| b.role == ValueRole::Input)
        .collect();
    let outputs: Vec<&ValueBinding> = values
        .iter()
        .filter(|b| b.role == ValueRole::Output)
        .collect();
    for (i, a) in inputs.iter().enumerate() {
        for b in &inputs[i + 1..] {
            if a.storage.overlaps(&b.storage) {
                let same_read = a.value_id == b.value_id
                    && a.access == TensorAccess::Read
                    && b.access == TensorAccess::Read;
                if !same_read {
                    return Err(NodeError::InputOverlap {
                        node: node.clone(),
                        first: a.value_id.clone(),
                        second: b.value_id.clone(),
                    });
                }
            }
        }
    }
    for output in &outputs {
        let aliased = match output.alias {
            AliasPolicy::NoAlias => None,
            AliasPolicy::MayAlias { tensor_index } | AliasPolicy::MustAlias { tensor_index } => {
                Some(tensor_index)
            }
        };
        for input in &inputs {
            let overlaps = output.storage.overlaps(&input.storage);
            let error = |detail: &str| NodeError::OutputInputOverlap {
                node: node.clone(),
                output: output.value_id.clone(),
                output_ordinal: output.ordinal,
                input: input.value_id.clone(),
                input_ordinal: input.ordinal,
                policy: alias_text(&output.alias),
                detail: detail.to_owned(),
            };
            match aliased {
                None if overlaps => return Err(error("though it may not alias any input")),
                Some(index) if input.ordinal == index => {
                    if overlaps && output.storage != input.storage {
                        return Err(error(
                            "only partially: an alias must be the identical storage",
                        ));
                    }
                    if !overlaps && matches!(output.alias, AliasPolicy::MustAlias { .. }) {
                        return Err(NodeError::LostMandatoryAlias {
                            node: node.clone(),
                            output: output.value_id.clone(),
                            output_ordinal: output.ordinal,
                            input_ordinal: index,
                        });
                    }
                }
                Some(_) if overlaps => return Err(error("which is not the input it may alias")),
                _ => {}
            }
        }
    }
    for (i, a) in outputs.iter().enumerate() {
        for b in &outputs[i + 1..] {
            if a.storage.overlaps(&b.storage) {
                return Err(NodeError::OutputsOverlap {
                    node: node.clone(),
                    first: a.value_id.clone(),
                    second: b.value_id.clone(),
                });
            }
        }
    }
    Ok(())
}
