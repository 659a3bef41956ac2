//! Exact aliases, their liveness, and global storage aliasing (rules 2.2, 2.4).
//!
//! An output stored exactly in place of an input is an *exact alias*. Across the plan, two
//! distinct values may share bytes only if they are connected by exact aliases (the same
//! alias class) and have identical storage; memory reuse is otherwise expressed by pools.

use std::collections::BTreeSet;

use super::NodeError;
use crate::plan::{AliasKind, ExactAlias, PlanNode};
use crate::request::{
    AliasPolicy, BufferUsage, IdMap, NodeId, ProgramValueId, ResourceId, ValueBinding, ValueRole,
    ValueStorage,
};

fn alias_target(alias: &AliasPolicy) -> Option<(u32, AliasKind)> {
    match *alias {
        AliasPolicy::NoAlias => None,
        AliasPolicy::MayAlias { tensor_index } => Some((tensor_index, AliasKind::MayAlias)),
        AliasPolicy::MustAlias { tensor_index } => Some((tensor_index, AliasKind::MustAlias)),
    }
}

fn input_binding(values: &[ValueBinding], ordinal: u32) -> Option<&ValueBinding> {
    values
        .iter()
        .find(|b| b.role == ValueRole::Input && b.ordinal == ordinal)
}

/// The exact aliases of a node: every output whose may/must-alias input has identical
/// storage (ascending by output ordinal). A must-alias output with other storage lost its
/// mandatory alias.
pub fn extract_exact_aliases(
    node: &NodeId,
    values: &[ValueBinding],
) -> Result<Vec<ExactAlias>, NodeError> {
    let mut aliases = Vec::new();
    for output in values.iter().filter(|b| b.role == ValueRole::Output) {
        let Some((input_ordinal, kind)) = alias_target(&output.alias) else {
            continue;
        };
        let Some(input) = input_binding(values, input_ordinal) else {
            return Err(NodeError::AliasInputMissing {
                node: node.clone(),
                output: output.value_id.clone(),
                input_ordinal,
            });
        };
        if input.storage == output.storage {
            aliases.push(ExactAlias {
                output_value_id: output.value_id.clone(),
                output_ordinal: output.ordinal,
                input_value_id: input.value_id.clone(),
                input_ordinal,
                kind,
            });
        } else if kind == AliasKind::MustAlias {
            return Err(NodeError::LostMandatoryAlias {
                node: node.clone(),
                output: output.value_id.clone(),
                output_ordinal: output.ordinal,
                input_ordinal,
            });
        }
    }
    aliases.sort_by_key(|a| a.output_ordinal);
    Ok(aliases)
}

/// What alias liveness needs to know about the program (rules 2.2).
pub struct AliasLiveness<'a> {
    /// State values of the program.
    pub state_values: &'a BTreeSet<&'a ProgramValueId>,
    /// Program outputs.
    pub program_outputs: &'a BTreeSet<&'a ProgramValueId>,
    /// For each value, the greatest node index that lists it as an input.
    pub last_consumers: &'a IdMap<&'a ProgramValueId, usize>,
    /// Node ids by execution index.
    pub node_ids: &'a [&'a NodeId],
}

/// Checks that each exact alias of node `index` may overwrite its input: the input binding
/// exists, is not a state, is an activation, this node is its last consumer, and it is not a
/// program output.
pub fn check_alias_liveness(
    liveness: &AliasLiveness<'_>,
    index: usize,
    node: &NodeId,
    aliases: &[ExactAlias],
    values: &[ValueBinding],
) -> Result<(), NodeError> {
    for alias in aliases {
        let Some(input) = input_binding(values, alias.input_ordinal) else {
            return Err(NodeError::AliasInputMissing {
                node: node.clone(),
                output: alias.output_value_id.clone(),
                input_ordinal: alias.input_ordinal,
            });
        };
        if liveness.state_values.contains(&input.value_id) {
            return Err(NodeError::AliasesState {
                node: node.clone(),
                output: alias.output_value_id.clone(),
                input: input.value_id.clone(),
            });
        }
        if input.usage != BufferUsage::Activations {
            return Err(NodeError::AliasInputNotActivations {
                node: node.clone(),
                output: alias.output_value_id.clone(),
                input: input.value_id.clone(),
                usage: input.usage,
            });
        }
        if let Some(&last) = liveness.last_consumers.get(&input.value_id) {
            if last != index {
                let later = liveness
                    .node_ids
                    .get(last)
                    .map_or_else(|| node.clone(), |id| (*id).clone());
                return Err(NodeError::AliasInputStillLive {
                    node: node.clone(),
                    output: alias.output_value_id.clone(),
                    input: input.value_id.clone(),
                    later_consumer: later,
                });
            }
        }
        if liveness.program_outputs.contains(&input.value_id) {
            return Err(NodeError::AliasesProgramOutput {
                node: node.clone(),
                output: alias.output_value_id.clone(),
                input: input.value_id.clone(),
            });
        }
    }
    Ok(())
}

/// Union-find over value ids; the representative of a class is its smallest value id.
struct AliasClasses<'a> {
    index: IdMap<&'a ProgramValueId, usize>,
    parent: Vec<usize>,
}

impl<'a> AliasClasses<'a> {
    /// Classes of one value each; `values` sorted and unique.
    fn new(values: &[&'a ProgramValueId]) -> Self {
        let index: IdMap<_, _> = values.iter().enumerate().map(|(i, &v)| (v, i)).collect();
        let parent = (0..index.len()).collect();
        Self { index, parent }
    }

    fn find(&mut self, mut x: usize) -> usize {
        while self.parent[x] != x {
            self.parent[x] = self.parent[self.parent[x]];
            x = self.parent[x];
        }
        x
    }

    fn class_of(&mut self, value: &ProgramValueId) -> Option<usize> {
        let i = *self.index.get(value)?;
        Some(self.find(i))
    }

    fn union(&mut self, a: &ProgramValueId, b: &ProgramValueId) {
        if let (Some(x), Some(y)) = (self.class_of(a), self.class_of(b)) {
            // Indices follow value-id order, so the smaller root is the smaller value id.
            let (low, high) = if x < y { (x, y) } else { (y, x) };
            self.parent[high] = low;
        }
    }
}

/// Checks one node's recorded aliases against its bindings: strictly ascending by output
/// ordinal, each matching a real output/input pair whose alias policy names that input with
/// that kind, identical storage, both activations.
fn check_alias_records(node: &PlanNode) -> Result<(), NodeError> {
    let record_error = |alias: &ExactAlias, detail: &str| NodeError::AliasRecord {
        node: node.id.clone(),
        output: alias.output_value_id.clone(),
        detail: detail.to_owned(),
    };
    for pair in node.exact_aliases.windows(2) {
        if pair[0].output_ordinal >= pair[1].output_ordinal {
            return Err(record_error(
                &pair[1],
                "aliases are not strictly ascending by output ordinal",
            ));
        }
    }
    for alias in &node.exact_aliases {
        let output = node.values.iter().find(|b| {
            b.role == ValueRole::Output
                && b.ordinal == alias.output_ordinal
                && b.value_id == alias.output_value_id
        });
        let input = node.values.iter().find(|b| {
            b.role == ValueRole::Input
                && b.ordinal == alias.input_ordinal
                && b.value_id == alias.input_value_id
        });
        let (Some(output), Some(input)) = (output, input) else {
            return Err(record_error(
                alias,
                "names no real output/input binding pair",
            ));
        };
        if alias_target(&output.alias) != Some((alias.input_ordinal, alias.kind)) {
            return Err(record_error(
                alias,
                "its kind or input does not match the output's alias policy",
            ));
        }
        if output.storage != input.storage {
            return Err(record_error(alias, "output and input storage differ"));
        }
        if output.usage != BufferUsage::Activations || input.usage != BufferUsage::Activations {
            return Err(record_error(
                alias,
                "output and input must both be activations",
            ));
        }
    }
    Ok(())
}

/// The global storage aliasing check (rules 2.4) over built nodes.
///
/// Values are visited in value-id order; per resource their byte ranges are swept in
/// (start, end) order, so the check is O(n log n) per resource. Any two overlapping ranges
/// of different values must belong to the same alias class and to identical storage.
pub fn check_global_aliasing(nodes: &[PlanNode]) -> Result<(), NodeError> {
    let mut storage: IdMap<&ProgramValueId, (&ValueStorage, &NodeId)> = IdMap::default();
    for node in nodes {
        check_alias_records(node)?;
        for binding in &node.values {
            storage
                .entry(&binding.value_id)
                .or_insert((&binding.storage, &node.id));
        }
    }
    // Value ids in order: the alias classes' indices, and the order in which an overflow
    // is found.
    let mut placed: Vec<(&ProgramValueId, (&ValueStorage, &NodeId))> =
        storage.iter().map(|(&value, &at)| (value, at)).collect();
    placed.sort_unstable_by_key(|(value, _)| *value);
    let values: Vec<&ProgramValueId> = placed.iter().map(|(value, _)| *value).collect();
    let mut classes = AliasClasses::new(&values);
    for node in nodes {
        for alias in &node.exact_aliases {
            classes.union(&alias.output_value_id, &alias.input_value_id);
        }
    }
    type Range<'r> = (u64, u64, &'r ProgramValueId, &'r NodeId);
    let mut ranges: IdMap<&ResourceId, Vec<Range<'_>>> = IdMap::default();
    for &(value, (value_storage, value_node)) in &placed {
        for component in &value_storage.components {
            let end = component.end_bytes().ok_or_else(|| NodeError::Overflow {
                what: format!(
                    "value {value} on resource {}: offset + length",
                    component.resource_id
                ),
            })?;
            ranges.entry(&component.resource_id).or_default().push((
                component.offset_bytes,
                end,
                value,
                value_node,
            ));
        }
    }
    // By resource id, so that the first overlap reported is the same as in id order.
    let mut ranges: Vec<(&ResourceId, Vec<Range<'_>>)> = ranges.into_iter().collect();
    ranges.sort_unstable_by_key(|(resource, _)| *resource);
    for (resource, mut list) in ranges {
        list.sort_unstable();
        // The range with the greatest end seen so far: every range that overlaps an earlier
        // one overlaps this one, so checking against it finds every violation.
        let mut widest: Option<Range<'_>> = None;
        for range in list {
            if let Some(w) = widest {
                if range.0 < w.1 && range.2 != w.2 {
                    let same_class = classes.class_of(range.2) == classes.class_of(w.2);
                    let same_storage =
                        storage.get(range.2).map(|s| s.0) == storage.get(w.2).map(|s| s.0);
                    if !(same_class && same_storage) {
                        let (first, second) = if w.2 < range.2 {
                            (w, range)
                        } else {
                            (range, w)
                        };
                        return Err(NodeError::StorageOverlap {
                            resource: resource.clone(),
                            first: first.2.clone(),
                            first_node: first.3.clone(),
                            second: second.2.clone(),
                            second_node: second.3.clone(),
                        });
                    }
                }
                if range.1 > w.1 {
                    widest = Some(range);
                }
            } else {
                widest = Some(range);
            }
        }
    }
    Ok(())
}
