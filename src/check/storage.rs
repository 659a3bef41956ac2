//! Rules 13 and 14: one placement per value, and no byte shared by two values unless they
//! are exact aliases of each other.

use std::collections::{BTreeMap, BTreeSet};

use crate::plan::ExecutionPlanPayload;
use crate::request::{ProgramValueId, ResourceId, TensorSpec, ValueStorage};

use super::Findings;

pub(super) fn check(payload: &ExecutionPlanPayload, found: &mut Findings) {
    // 13. The first binding of each value, in node order, is its placement; every other
    // binding of it must agree.
    let mut placement: BTreeMap<&ProgramValueId, (&TensorSpec, &ValueStorage)> = BTreeMap::new();
    for (i, node) in payload.nodes.iter().enumerate() {
        for (k, binding) in node.values.iter().enumerate() {
            let here = (&binding.tensor, &binding.storage);
            match placement.get(&binding.value_id) {
                None => {
                    placement.insert(&binding.value_id, here);
                }
                Some(first) if *first == here => {}
                Some(_) => found.add(
                    13,
                    format!("payload.nodes[{i}].values[{k}]"),
                    format!(
                        "{} has another tensor or storage in an earlier node",
                        binding.value_id
                    ),
                ),
            }
        }
    }
    // 14. Alias classes: values joined by any exact alias, by repeated merging until nothing
    // changes (the simplest correct closure).
    let mut class: BTreeMap<&ProgramValueId, BTreeSet<&ProgramValueId>> = placement
        .keys()
        .map(|v| (*v, BTreeSet::from([*v])))
        .collect();
    for node in &payload.nodes {
        for alias in &node.exact_aliases {
            let a = class
                .get(&alias.output_value_id)
                .cloned()
                .unwrap_or_default();
            let b = class
                .get(&alias.input_value_id)
                .cloned()
                .unwrap_or_default();
            let merged: BTreeSet<&ProgramValueId> = a.union(&b).copied().collect();
            for member in &merged {
                class.insert(member, merged.clone());
            }
        }
    }
    // Every pair of components of different values on the same resource.
    let mut on_resource: BTreeMap<&ResourceId, Vec<(&ProgramValueId, u64, u64)>> = BTreeMap::new();
    for (value, (_, storage)) in &placement {
        for component in &storage.components {
            match component.offset_bytes.checked_add(component.length_bytes) {
                Some(end) => on_resource
                    .entry(&component.resource_id)
                    .or_default()
                    .push((value, component.offset_bytes, end)),
                None => found.add(
                    14,
                    "payload.nodes",
                    format!(
                        "{value}: offset + length on {} overflows",
                        component.resource_id
                    ),
                ),
            }
        }
    }
    // Ranges sorted by start: a range can only overlap the ranges after it that start before
    // it ends, so each pair that overlaps is visited once (a weights arena with thousands of
    // disjoint components costs a sort, not a square).
    for (resource, mut ranges) in on_resource {
        ranges.sort_by_key(|r| (r.1, r.2));
        for (x, a) in ranges.iter().enumerate() {
            for b in ranges[x + 1..].iter().take_while(|b| b.1 < a.2) {
                let overlap = a.1 < b.2 && b.1 < a.2;
                if !overlap || a.0 == b.0 {
                    continue;
                }
                let same_class = class.get(a.0).is_some_and(|c| c.contains(b.0));
                let same_storage =
                    placement.get(a.0).map(|p| p.1) == placement.get(b.0).map(|p| p.1);
                if !(same_class && same_storage) {
                    found.add(
                        14,
                        "payload.nodes",
                        format!(
                            "{} and {} share bytes of {resource} without being exact aliases \
                             with identical storage",
                            a.0, b.0
                        ),
                    );
                }
            }
        }
    }
}
