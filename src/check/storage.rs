//! Rules 13 and 14: one placement per value, and no byte shared by two values unless they
//! are exact aliases of each other.

use crate::plan::ExecutionPlanPayload;
use crate::request::{IdMap, ProgramValueId, ResourceId, TensorSpec, ValueStorage};

use super::Findings;

pub(super) fn check(payload: &ExecutionPlanPayload, found: &mut Findings) {
    // 13. The first binding of each value, in node order, is its placement; every other
    // binding of it must agree. Values are handled by position: the placed values in the
    // order of their first binding (0..), then any value only an alias names.
    let mut placed: Vec<(&ProgramValueId, &TensorSpec, &ValueStorage)> = Vec::new();
    let mut handle: IdMap<&ProgramValueId, usize> = IdMap::default();
    for (i, node) in payload.nodes.iter().enumerate() {
        for (k, binding) in node.values.iter().enumerate() {
            match handle.get(&binding.value_id) {
                None => {
                    handle.insert(&binding.value_id, placed.len());
                    placed.push((&binding.value_id, &binding.tensor, &binding.storage));
                }
                Some(&h) if placed[h].1 == &binding.tensor && placed[h].2 == &binding.storage => {}
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
    // aliases, labelled by a breadth-first walk from each value not yet labelled; a class's
    // label is the position of the placed value it was found from.
    let mut neighbours: Vec<Vec<usize>> = vec![Vec::new(); placed.len()];
    for node in &payload.nodes {
        for alias in &node.exact_aliases {
            let mut handle_of = |value| {
                let next = handle.len();
                let h = *handle.entry(value).or_insert(next);
                if h == neighbours.len() {
                    neighbours.push(Vec::new());
                }
                h
            };
            let output = handle_of(&alias.output_value_id);
            let input = handle_of(&alias.input_value_id);
            neighbours[output].push(input);
            neighbours[input].push(output);
        }
    }
    let mut class: Vec<Option<usize>> = vec![None; neighbours.len()];
    for start in 0..placed.len() {
        if class[start].is_some() {
            continue;
        }
        let mut queue = std::collections::VecDeque::from([start]);
        class[start] = Some(start);
        while let Some(value) = queue.pop_front() {
            for &next in &neighbours[value] {
                if class[next].is_none() {
                    class[next] = Some(start);
                    queue.push_back(next);
                }
            }
        }
    }
    // Every pair of components of different values on the same resource.
    let mut on_resource: IdMap<&ResourceId, Vec<(usize, u64, u64)>> = IdMap::default();
    for (h, (value, _, storage)) in placed.iter().enumerate() {
        for component in &storage.components {
            match component.offset_bytes.checked_add(component.length_bytes) {
                Some(end) => on_resource
                    .entry(&component.resource_id)
                    .or_default()
                    .push((h, component.offset_bytes, end)),
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
        // Ties in value-id order: which of a class's equal ranges survive the dedup below
        // (and so which pairs are reported) must not depend on the order of the bindings.
        ranges.sort_by_key(|r| (r.1, r.2, class[r.0], placed[r.0].0));
        // Ranges of one alias class with the same bytes and the same storage are one range
        // for this rule (an in-place chain such as a residual stream is one placement), so
        // only one of them is compared with the others.
        ranges.dedup_by(|b, a| {
            a.1 == b.1 && a.2 == b.2 && class[a.0] == class[b.0] && placed[a.0].2 == placed[b.0].2
        });
        for (x, a) in ranges.iter().enumerate() {
            for b in ranges[x + 1..].iter().take_while(|b| b.1 < a.2) {
                let overlap = a.1 < b.2 && b.1 < a.2;
                if !overlap || a.0 == b.0 {
                    continue;
                }
                let same_class = class[a.0].is_some() && class[a.0] == class[b.0];
                let same_storage = placed[a.0].2 == placed[b.0].2;
                if !(same_class && same_storage) {
                    // Named in id order, whichever was placed first.
                    let (x, y) = (placed[a.0].0, placed[b.0].0);
                    let (x, y) = if x <= y { (x, y) } else { (y, x) };
                    found.add(
                        14,
                        "payload.nodes",
                        format!(
                            "{x} and {y} share bytes of {resource} without being exact aliases \
                             with identical storage"
                        ),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{ExactAlias, ExecutionPlan};
    use crate::request::ElementType;

    /// The rule-14 messages `check` gives for `payload`.
    fn overlaps(payload: &ExecutionPlanPayload) -> Vec<String> {
        let mut found = Findings::default();
        check(payload, &mut found);
        let mut messages: Vec<String> = found
            .0
            .into_iter()
            .filter(|v| v.rule == 14)
            .map(|v| v.message)
            .collect();
        messages.sort();
        messages
    }

    /// Three values of one alias class (`a`-`b`, `c`-`b`) on the same 16 bytes, `b` stored
    /// with another element type than `a` and `c`: the pairs reported are the same whichever
    /// node binds which value first (the values' placements follow first binding, their
    /// ties are broken by id).
    #[test]
    fn overlaps_found_do_not_depend_on_the_order_of_first_binding() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/golden/plans/decoder-2layer.json"
        );
        let text = std::fs::read_to_string(path).unwrap();
        let plan: ExecutionPlan = serde_json::from_str(&text).unwrap();
        let template = plan
            .payload
            .nodes
            .iter()
            .find(|n| !n.exact_aliases.is_empty())
            .unwrap()
            .clone();
        let value = |text: &str| ProgramValueId::new(text).unwrap();
        let resource = ResourceId::new("resource/shared").unwrap();
        let node = |at: usize, id: &str, element_type: ElementType| {
            let mut node = template.clone();
            node.id = crate::request::NodeId::new(format!("node.{at}")).unwrap();
            let mut binding = template.values[0].clone();
            binding.value_id = value(id);
            binding.storage.components.truncate(1);
            let component = &mut binding.storage.components[0];
            component.resource_id = resource.clone();
            component.offset_bytes = 0;
            component.length_bytes = 16;
            component.element_type = element_type;
            node.values = vec![binding];
            node.exact_aliases.clear();
            node
        };
        let alias = |output: &str, input: &str| ExactAlias {
            output_value_id: value(output),
            input_value_id: value(input),
            ..template.exact_aliases[0].clone()
        };
        let types = [
            ("value.a", ElementType::F32),
            ("value.b", ElementType::F16),
            ("value.c", ElementType::F32),
        ];
        let orders = [
            [0, 1, 2],
            [0, 2, 1],
            [1, 0, 2],
            [1, 2, 0],
            [2, 0, 1],
            [2, 1, 0],
        ];
        let mut payload = plan.payload.clone();
        let mut seen = Vec::new();
        for order in orders {
            payload.nodes = order
                .iter()
                .enumerate()
                .map(|(at, &v)| node(at, types[v].0, types[v].1))
                .collect();
            payload.nodes[0].exact_aliases =
                vec![alias("value.a", "value.b"), alias("value.c", "value.b")];
            seen.push(overlaps(&payload));
        }
        assert_eq!(seen[0].len(), 2, "{:?}", seen[0]);
        assert!(
            seen.iter().all(|messages| *messages == seen[0]),
            "{seen:#?}"
        );
    }
}
