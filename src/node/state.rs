//! State effects and hazard dependencies (rules 2.6).
//!
//! A node's state effect records how it touches each program state (the union of its
//! bindings' accesses). The hazard tracker turns effects in execution order into ordering
//! dependencies: read-after-write (a reader waits for the last writer), write-after-read (a
//! writer waits for every reader since the last write) and write-after-write (a writer waits
//! for the last writer).

use std::collections::{BTreeMap, BTreeSet};

use super::NodeError;
use crate::plan::AllocationLifetime;
use crate::plan::StateEffect;
use crate::request::{NodeId, ResourceId, StateId, StateLifetime, StateSpec, ValueBinding};

/// The allocation lifetime of a state lifetime.
pub fn state_allocation_lifetime(lifetime: StateLifetime) -> AllocationLifetime {
    match lifetime {
        StateLifetime::Request => AllocationLifetime::Request,
        StateLifetime::Sequence => AllocationLifetime::Sequence,
        StateLifetime::Step => AllocationLifetime::Step,
    }
}

/// The state effects of one node, ascending by state id (program states are sorted by id).
pub fn derive_state_effects(
    node: &NodeId,
    states: &[StateSpec],
    values: &[ValueBinding],
) -> Result<Vec<StateEffect>, NodeError> {
    let mut by_state: BTreeMap<&StateId, StateEffect> = BTreeMap::new();
    for state in states {
        let mut access = None;
        let mut resources: BTreeSet<&ResourceId> = BTreeSet::new();
        for binding in values.iter().filter(|b| b.value_id == state.value_id) {
            access = Some(
                access.map_or(binding.access, |a: crate::request::TensorAccess| {
                    a.union(binding.access)
                }),
            );
            resources.extend(binding.storage.resource_ids());
        }
        let Some(access) = access else { continue };
        if resources.is_empty() {
            return Err(NodeError::StateWithoutResources {
                node: node.clone(),
                state: state.id.clone(),
            });
        }
        by_state.insert(
            &state.id,
            StateEffect {
                state_id: state.id.clone(),
                state_value_id: state.value_id.clone(),
                lifetime: state_allocation_lifetime(state.lifetime),
                access,
                resource_ids: resources.into_iter().cloned().collect(),
            },
        );
    }
    Ok(by_state.into_values().collect())
}

#[derive(Default)]
struct StateHistory {
    last_writer: Option<NodeId>,
    readers_since_write: BTreeSet<NodeId>,
}

/// Tracks read/write hazards on program states across nodes in execution order.
#[derive(Default)]
pub struct StateHazardTracker {
    states: BTreeMap<StateId, StateHistory>,
}

impl StateHazardTracker {
    /// Records a node's effects and returns the nodes it must wait for (never itself).
    pub fn record(&mut self, node: &NodeId, effects: &[StateEffect]) -> BTreeSet<NodeId> {
        let mut dependencies = BTreeSet::new();
        for effect in effects {
            let history = self.states.entry(effect.state_id.clone()).or_default();
            if let Some(writer) = &history.last_writer {
                dependencies.insert(writer.clone());
            }
            if effect.access.writes() {
                dependencies.extend(history.readers_since_write.iter().cloned());
                history.readers_since_write.clear();
                history.last_writer = Some(node.clone());
            } else {
                history.readers_since_write.insert(node.clone());
            }
        }
        dependencies.remove(node);
        dependencies
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{ProgramValueId, TensorAccess};

    fn effect(access: TensorAccess) -> StateEffect {
        StateEffect {
            state_id: StateId::new("state.cache").unwrap(),
            state_value_id: ProgramValueId::new("value.state").unwrap(),
            lifetime: AllocationLifetime::Sequence,
            access,
            resource_ids: vec![ResourceId::new("resource/shared-state").unwrap()],
        }
    }

    fn ids(names: &[&str]) -> BTreeSet<NodeId> {
        names.iter().map(|n| NodeId::new(*n).unwrap()).collect()
    }

    #[test]
    fn raw_war_waw() {
        let mut tracker = StateHazardTracker::default();
        let n = |s: &str| NodeId::new(s).unwrap();
        assert_eq!(
            tracker.record(&n("a"), &[effect(TensorAccess::ReadWrite)]),
            ids(&[])
        );
        // read after write
        assert_eq!(
            tracker.record(&n("b"), &[effect(TensorAccess::Read)]),
            ids(&["a"])
        );
        assert_eq!(
            tracker.record(&n("c"), &[effect(TensorAccess::Read)]),
            ids(&["a"])
        );
        // write after read (and after write)
        assert_eq!(
            tracker.record(&n("d"), &[effect(TensorAccess::Write)]),
            ids(&["a", "b", "c"])
        );
        // write after write
        assert_eq!(
            tracker.record(&n("e"), &[effect(TensorAccess::Write)]),
            ids(&["d"])
        );
    }
}
