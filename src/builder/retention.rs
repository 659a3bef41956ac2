//! Completion retention and terminal outputs (rules 1.9, 2.1 steps 14-15): which
//! resources must keep their bytes until the request completes.

use std::collections::{BTreeMap, BTreeSet};

use crate::request::{
    BufferUsage, CompletionRetention, ModelProgram, NodeId, ProgramValueId, ResourceId,
    ValueBinding, ValueRole,
};

use super::error::PlanError;
use crate::plan::{PlanNode, RetainedCompletionValue};

/// One write of a binding to a byte range of a resource.
struct Write<'a> {
    start: u64,
    end: u64,
    node_index: usize,
    node: &'a NodeId,
    binding: &'a ValueBinding,
}

/// Resolves the retained values (value-id order): each must be the output of exactly one
/// node, an activation with one storage component, and no binding of the producer or a
/// later node (other than the producing binding) may write an overlapping byte range of
/// `[offset, offset + tensor minimum bytes)`.
///
/// Writes are indexed per resource and sorted by start offset once, so each retained value
/// inspects only the writes of its own resource that start before its end.
pub fn resolve_retained_values(
    retention: &CompletionRetention,
    nodes: &[PlanNode],
) -> Result<Vec<RetainedCompletionValue>, PlanError> {
    if retention.values.is_empty() {
        return Ok(Vec::new());
    }
    let mut producers: BTreeMap<&ProgramValueId, Vec<(usize, &PlanNode, &ValueBinding)>> =
        BTreeMap::new();
    let mut writes: BTreeMap<&ResourceId, Vec<Write<'_>>> = BTreeMap::new();
    for (index, node) in nodes.iter().enumerate() {
        for binding in &node.values {
            if binding.role == ValueRole::Output {
                producers
                    .entry(&binding.value_id)
                    .or_default()
                    .push((index, node, binding));
            }
            if binding.access.writes() {
                for component in &binding.storage.components {
                    let end = component.end_bytes().ok_or_else(|| PlanError::Overflow {
                        what: format!("value {} of node {}", binding.value_id, node.id),
                    })?;
                    writes
                        .entry(&component.resource_id)
                        .or_default()
                        .push(Write {
                            start: component.offset_bytes,
                            end,
                            node_index: index,
                            node: &node.id,
                            binding,
                        });
                }
            }
        }
    }
    for list in writes.values_mut() {
        list.sort_by_key(|w| w.start);
    }
    let mut retained = Vec::with_capacity(retention.values.len());
    for value in &retention.values {
        let Some(produced) = producers.get(value) else {
            return Err(PlanError::RetainedNotProduced {
                value: value.clone(),
            });
        };
        let [(index, node, binding)] = produced.as_slice() else {
            return Err(PlanError::RetainedShape {
                value: value.clone(),
                node: produced[0].1.id.clone(),
                detail: format!("it is the output of {} nodes", produced.len()),
            });
        };
        let shape_error = |detail: String| PlanError::RetainedShape {
            value: value.clone(),
            node: node.id.clone(),
            detail,
        };
        if binding.usage != BufferUsage::Activations {
            return Err(shape_error(format!(
                "it is bound as {:?}, not activations",
                binding.usage
            )));
        }
        let [component] = binding.storage.components.as_slice() else {
            return Err(shape_error(format!(
                "it has {} storage components, not one",
                binding.storage.components.len()
            )));
        };
        let bytes = binding
            .tensor
            .minimum_storage_bytes()
            .ok_or_else(|| shape_error("its tensor size overflows u64".to_owned()))?;
        let start = component.offset_bytes;
        let end = start
            .checked_add(bytes)
            .ok_or_else(|| shape_error("offset + size overflows u64".to_owned()))?;
        if let Some(list) = writes.get(&component.resource_id) {
            let before_end = list.partition_point(|w| w.start < end);
            if let Some(writer) = list[..before_end].iter().find(|w| {
                w.end > start
                    && w.node_index >= *index
                    && !(w.node_index == *index && std::ptr::eq(w.binding, *binding))
            }) {
                return Err(PlanError::RetainedOverwritten {
                    value: value.clone(),
                    resource: component.resource_id.clone(),
                    writer: writer.node.clone(),
                    writer_value: writer.binding.value_id.clone(),
                });
            }
        }
        retained.push(RetainedCompletionValue {
            value_id: value.clone(),
            producer_node_id: node.id.clone(),
            output_ordinal: binding.ordinal,
            resource_id: component.resource_id.clone(),
            logical_offset_bytes: start,
            tensor: binding.tensor.clone(),
        });
    }
    Ok(retained)
}

/// The resources of every binding (any node, any role) of a program output: sorted, unique,
/// non-empty.
pub fn terminal_output_resources(
    program: &ModelProgram,
    nodes: &[PlanNode],
) -> Result<Vec<ResourceId>, PlanError> {
    let outputs: BTreeSet<&ProgramValueId> = program.outputs.iter().collect();
    let resources: BTreeSet<ResourceId> = nodes
        .iter()
        .flat_map(|n| &n.values)
        .filter(|b| outputs.contains(&b.value_id))
        .flat_map(|b| b.storage.components.iter().map(|c| c.resource_id.clone()))
        .collect();
    if resources.is_empty() {
        return Err(PlanError::NoTerminalOutputResources);
    }
    Ok(resources.into_iter().collect())
}
