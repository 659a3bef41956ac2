//! Semantic bindings (rules 2.2, 2.1 step 12): each binding against what the program says
//! its value is (weight, state, activation), the execution weight schema, the same value bound
//! by other nodes, and finally the coverage of every program input, weight, state and output.

use std::collections::BTreeSet;

use super::NodeError;
use crate::request::{
    BufferUsage, IdMap, ModelProgram, NodeId, ProgramValueId, StateSpec, TensorAccess, TensorSpec,
    ValueBinding, WeightReference, WeightSchema,
};

/// The program's value classes, indexed by value id.
pub struct ValueClasses<'a> {
    /// Program outputs.
    pub outputs: BTreeSet<&'a ProgramValueId>,
    /// States by value id.
    pub states: IdMap<&'a ProgramValueId, &'a StateSpec>,
    /// Weights by value id.
    pub weights: IdMap<&'a ProgramValueId, &'a WeightReference>,
}

impl<'a> ValueClasses<'a> {
    /// Indexes a program.
    pub fn new(program: &'a ModelProgram) -> Self {
        Self {
            outputs: program.outputs.iter().collect(),
            states: program.states.iter().map(|s| (&s.value_id, s)).collect(),
            weights: program.weights.iter().map(|w| (&w.value_id, w)).collect(),
        }
    }

    /// The state values.
    pub fn state_values(&self) -> BTreeSet<&'a ProgramValueId> {
        self.states.keys().copied().collect()
    }
}

fn tensor_text(tensor: &TensorSpec) -> String {
    serde_json::to_string(tensor).unwrap_or_else(|_| format!("{tensor:?}"))
}

/// Checks one binding against its program value (rules 2.2): weights are read-only
/// weights-usage bindings of the program tensor whose resolved weight and storage components
/// equal the execution schema's; states are state-usage bindings of the state tensor; every
/// other value is an activation.
pub fn check_semantic_binding(
    classes: &ValueClasses<'_>,
    execution_schema: &WeightSchema,
    node: &NodeId,
    binding: &ValueBinding,
) -> Result<(), NodeError> {
    let usage_error = |class: &'static str, expected: BufferUsage| NodeError::SemanticUsage {
        node: node.clone(),
        value: binding.value_id.clone(),
        class,
        expected,
        found: binding.usage,
    };
    let tensor_error = |expected: &TensorSpec| NodeError::SemanticTensor {
        node: node.clone(),
        value: binding.value_id.clone(),
        expected: tensor_text(expected),
        found: tensor_text(&binding.tensor),
    };
    if let Some(weight) = classes.weights.get(&binding.value_id) {
        if binding.usage != BufferUsage::Weights {
            return Err(usage_error("weight", BufferUsage::Weights));
        }
        if binding.access != TensorAccess::Read {
            return Err(NodeError::WeightAccess {
                node: node.clone(),
                value: binding.value_id.clone(),
                found: binding.access,
            });
        }
        if binding.tensor != weight.tensor {
            return Err(tensor_error(&weight.tensor));
        }
        check_weight(execution_schema, node, binding, weight)
    } else if let Some(state) = classes.states.get(&binding.value_id) {
        if binding.usage != BufferUsage::State {
            return Err(usage_error("state", BufferUsage::State));
        }
        if binding.tensor != state.tensor {
            return Err(tensor_error(&state.tensor));
        }
        Ok(())
    } else if binding.usage != BufferUsage::Activations {
        Err(usage_error("activation", BufferUsage::Activations))
    } else {
        Ok(())
    }
}

fn check_weight(
    schema: &WeightSchema,
    node: &NodeId,
    binding: &ValueBinding,
    weight: &WeightReference,
) -> Result<(), NodeError> {
    let error = |detail: String| NodeError::SemanticWeight {
        node: node.clone(),
        value: binding.value_id.clone(),
        weight: Some(weight.weight_id.clone()),
        detail,
    };
    let Some(resolved) = &binding.weight else {
        return Err(error(format!(
            "the binding carries no resolved weight (the program reads weight {})",
            weight.weight_id
        )));
    };
    if resolved.weight_id != weight.weight_id {
        return Err(error(format!(
            "the binding carries weight {}, but the program reads weight {}",
            resolved.weight_id, weight.weight_id
        )));
    }
    let Some(expected) = schema.resolved_binding(&weight.weight_id) else {
        return Err(error(format!(
            "weight {} is not in the execution weight schema",
            weight.weight_id
        )));
    };
    if resolved != &expected {
        return Err(error(format!(
            "the resolved weight differs from the execution schema's {} (format {}, layout {})",
            weight.weight_id, expected.format_id, expected.layout_id
        )));
    }
    let components = &binding.storage.components;
    if components.len() != expected.components.len() {
        return Err(error(format!(
            "{} storage components for the {} physical components of the execution schema",
            components.len(),
            expected.components.len()
        )));
    }
    for (component, physical) in components.iter().zip(&expected.components) {
        if component.component_id.as_ref() != Some(&physical.component_id) {
            return Err(error(format!(
                "storage component {:?} stands where the schema has component {}",
                component.component_id.as_ref().map(|c| c.as_str()),
                physical.component_id
            )));
        }
        let spec = schema.component(&physical.component_id);
        let bytes = spec.and_then(|s| s.physical_bytes());
        if bytes != Some(component.length_bytes) {
            return Err(error(format!(
                "component {} stores {} bytes, the schema's component has {}",
                physical.component_id,
                component.length_bytes,
                bytes.map_or_else(|| "an overflowing size".to_owned(), |b| b.to_string())
            )));
        }
        let element_type = physical.encoding.physical_element_type();
        if component.element_type != element_type {
            return Err(error(format!(
                "component {} is stored as {:?}, the schema's encoding stores {:?}",
                physical.component_id, component.element_type, element_type
            )));
        }
    }
    Ok(())
}

/// Every value bound so far, with the node that bound it first, for cross-node consistency
/// and semantic coverage. It borrows the bindings it records (from the request while
/// building, from the plan's nodes when validating one) rather than copying them.
#[derive(Default)]
pub struct BoundValues<'a> {
    first: IdMap<&'a ProgramValueId, (&'a NodeId, &'a ValueBinding)>,
}

impl<'a> BoundValues<'a> {
    /// Records a binding; the same value must have identical tensor, usage and storage
    /// wherever it is bound.
    pub fn record(&mut self, node: &'a NodeId, binding: &'a ValueBinding) -> Result<(), NodeError> {
        match self.first.get(&binding.value_id) {
            None => {
                self.first.insert(&binding.value_id, (node, binding));
                Ok(())
            }
            Some((first_node, first)) => {
                let what = if first.tensor != binding.tensor {
                    Some(format!(
                        "tensor {} (first: {})",
                        tensor_text(&binding.tensor),
                        tensor_text(&first.tensor)
                    ))
                } else if first.usage != binding.usage {
                    Some(format!(
                        "usage {:?} (first: {:?})",
                        binding.usage, first.usage
                    ))
                } else if first.storage != binding.storage {
                    Some(format!(
                        "storage {} (first: {})",
                        serde_json::to_string(&binding.storage).unwrap_or_default(),
                        serde_json::to_string(&first.storage).unwrap_or_default()
                    ))
                } else {
                    None
                };
                match what {
                    None => Ok(()),
                    Some(what) => Err(NodeError::CrossNodeInconsistency {
                        value: binding.value_id.clone(),
                        first_node: (*first_node).clone(),
                        node: node.clone(),
                        what,
                    }),
                }
            }
        }
    }

    /// Whether a value is bound by some node.
    pub fn contains(&self, value: &ProgramValueId) -> bool {
        self.first.contains_key(value)
    }
}

/// Semantic coverage (rules 2.1 step 12): every program input, weight value, state value
/// and program output is bound by some node.
pub fn check_coverage(program: &ModelProgram, bound: &BoundValues<'_>) -> Result<(), NodeError> {
    let classes: [(&'static str, Vec<&ProgramValueId>); 4] = [
        ("program input", program.inputs.iter().collect()),
        (
            "weight value",
            program.weights.iter().map(|w| &w.value_id).collect(),
        ),
        (
            "state value",
            program.states.iter().map(|s| &s.value_id).collect(),
        ),
        ("program output", program.outputs.iter().collect()),
    ];
    for (class, values) in classes {
        if let Some(value) = values.into_iter().find(|v| !bound.contains(v)) {
            return Err(NodeError::UncoveredValue {
                class,
                value: value.clone(),
            });
        }
    }
    Ok(())
}
