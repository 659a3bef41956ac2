//! Rules 13 and 14: one placement per value, and no byte shared by two values unless they
//! are exact aliases of each other.

use std::collections::BTreeMap;

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
    // 14. Alias classes: the connected components of the graph whose edges are the exact
    // aliases, labelled by a breadth-first walk from each value not yet labelled.
    let mut neighbours: BTreeMap<&ProgramValueId, Vec<&ProgramValueId>> = BTreeMap::new();
    for node in &payload.nodes {
        for alias in &node.exact_aliases {
            neighbours
                .entry(&alias.output_value_id)
                .or_default()
                .push(&alias.input_value_id);
            neighbours
                .entry(&alias.input_value_id)
                .or_default()
                .push(&alias.output_value_id);
        }
    }
    let mut class: BTreeMap<&ProgramValueId, usize> = BTreeMap::new();
    for (label, start) in placement.keys().enumerate() {
        if class.contains_key(start) {
            continue;
        }
        let mut queue = std::collections::VecDeque::from([*start]);
        class.insert(start, label);
        while let Some(value) = queue.pop_front() {
            for next in neighbours.get(value).into_iter().flatten() {
                if !class.contains_key(next) {
                    class.insert(next, label);
                    queue.push_back(next);
                }
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
        ranges.sort_by_key(|r| (r.1, r.2, class.get(r.0)));
        // Ranges of one alias class with the same bytes and the same storage are one range
        // for this rule (an in-place chain such as a residual stream is one placement), so
        // only one of them is compared with the others.
        ranges.dedup_by(|b, a| {
            a.1 == b.1
                && a.2 == b.2
                && class.get(a.0) == class.get(b.0)
                && placement.get(a.0).map(|p| p.1) == placement.get(b.0).map(|p| p.1)
        });
        for (x, a) in ranges.iter().enumerate() {
            for b in ranges[x + 1..].iter().take_while(|b| b.1 < a.2) {
                let overlap = a.1 < b.2 && b.1 < a.2;
                if !overlap || a.0 == b.0 {
                    continue;
                }
                let same_class = class.contains_key(a.0) && class.get(a.0) == class.get(b.0);
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
