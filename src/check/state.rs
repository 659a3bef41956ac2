//! Rules 9 and 10: every node's state effects (ordered by state, of a request, sequence or
//! step lifetime, over exactly the resources and the access of the node's bindings of the
//! state, on dynamic descriptors of that lifetime), and the dependencies that data and
//! state require (a reader after the last writer, a writer after the readers since).

use std::collections::BTreeSet;

use crate::plan::{AllocationLifetime, ExecutionPlanPayload};
use crate::request::{IdMap, NodeId, ProgramValueId, ResourceId, StateId, TensorAccess, ValueRole};

use super::nodes::{node_path, Rows};
use super::Findings;

fn union(a: TensorAccess, b: TensorAccess) -> TensorAccess {
    if a == b {
        a
    } else {
        TensorAccess::ReadWrite
    }
}

/// 9 and 10: state effects, and the dependencies that data and state require.
pub(super) fn check(payload: &ExecutionPlanPayload, rows: &Rows<'_>, found: &mut Findings) {
    // Per state: the last writer and the readers since.
    let mut last_writer: IdMap<&StateId, &NodeId> = IdMap::default();
    let mut readers: IdMap<&StateId, Vec<&NodeId>> = IdMap::default();
    let mut needed: Vec<BTreeSet<&NodeId>> = vec![BTreeSet::new(); payload.nodes.len()];
    for (i, node) in payload.nodes.iter().enumerate() {
        for (k, effect) in node.state_effects.iter().enumerate() {
            let at = format!("{}.state_effects[{k}]", node_path(i));
            if k > 0 && node.state_effects[k - 1].state_id >= effect.state_id {
                found.add(9, &at, "state effects are not strictly ascending by state");
            }
            if !matches!(
                effect.lifetime,
                AllocationLifetime::Request
                    | AllocationLifetime::Sequence
                    | AllocationLifetime::Step
            ) {
                found.add(
                    9,
                    format!("{at}.lifetime"),
                    "a state lives for a request, a sequence or a step",
                );
            }
            let bindings: Vec<_> = node
                .values
                .iter()
                .filter(|b| b.value_id == effect.state_value_id)
                .collect();
            if bindings.is_empty() {
                found.add(
                    9,
                    &at,
                    format!("the node binds no {}", effect.state_value_id),
                );
            } else {
                let resources: BTreeSet<&ResourceId> = bindings
                    .iter()
                    .flat_map(|b| b.storage.components.iter().map(|c| &c.resource_id))
                    .collect();
                if effect.resource_ids.iter().collect::<Vec<_>>()
                    != resources.into_iter().collect::<Vec<_>>()
                {
                    found.add(
                        9,
                        format!("{at}.resource_ids"),
                        "not the sorted component resources of the state's bindings",
                    );
                }
                let access = bindings.iter().map(|b| b.access).reduce(union);
                if access != Some(effect.access) {
                    found.add(
                        9,
                        format!("{at}.access"),
                        "not the union of the bindings' accesses",
                    );
                }
            }
            for resource in &effect.resource_ids {
                let row = rows.dynamics.get(resource).copied();
                if row.is_none_or(|d| d.lifetime != effect.lifetime) {
                    found.add(
                        9,
                        format!("{at}.resource_ids"),
                        format!(
                            "{resource} is not a dynamic descriptor of lifetime {:?}",
                            effect.lifetime
                        ),
                    );
                }
            }
            // 10 (the state's part): a reader needs the last writer, a writer also every
            // reader since.
            let reads = effect.access != TensorAccess::Write;
            let writes = effect.access != TensorAccess::Read;
            if let Some(writer) = last_writer.get(&effect.state_id) {
                needed[i].insert(writer);
            }
            if writes {
                for reader in readers.get(&effect.state_id).into_iter().flatten() {
                    needed[i].insert(reader);
                }
                readers.insert(&effect.state_id, Vec::new());
                last_writer.insert(&effect.state_id, &node.id);
            } else if reads {
                readers.entry(&effect.state_id).or_default().push(&node.id);
            }
        }
    }
    // 10 (the data's part): the producer of every value a node reads as an input.
    let mut producer: IdMap<&ProgramValueId, &NodeId> = IdMap::default();
    for (i, node) in payload.nodes.iter().enumerate() {
        for binding in node.values.iter().filter(|b| b.role == ValueRole::Input) {
            if let Some(p) = producer.get(&binding.value_id) {
                needed[i].insert(p);
            }
        }
        for binding in node.values.iter().filter(|b| b.role == ValueRole::Output) {
            producer.entry(&binding.value_id).or_insert(&node.id);
        }
    }
    for (i, node) in payload.nodes.iter().enumerate() {
        needed[i].remove(&node.id);
        let stored: BTreeSet<&NodeId> = node.dependencies.iter().collect();
        for missing in needed[i].difference(&stored) {
            found.add(
                10,
                format!("{}.dependencies", node_path(i)),
                format!("{missing} produces an input or a state this node uses, but is not a dependency"),
            );
        }
        for extra in stored.difference(&needed[i]) {
            found.add(
                10,
                format!("{}.dependencies", node_path(i)),
                format!(
                    "{extra} is a dependency, but produces no input and no state this node uses"
                ),
            );
        }
    }
}
