//! Program construction rules (rules 1.2) and the completion retention.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use crate::request::{
    CompletionRetention, ModelFamily, ProgramValueId, StateInitialization, StateLifetime, WorkSpec,
};

use super::{key, RequestError};

const PROGRAM: &str = "family.program";

/// Where a program value comes from.
#[derive(Clone, Copy)]
enum Origin {
    Input(usize),
    State(usize),
    Weight(usize),
    /// Output of the node at (block, node).
    Output(usize, usize),
}

impl Origin {
    fn describe(self) -> String {
        match self {
            Self::Input(i) => format!("the program input {PROGRAM}.inputs[{i}]"),
            Self::State(i) => format!("the value of state {PROGRAM}.states[{i}]"),
            Self::Weight(i) => format!("the value of weight {PROGRAM}.weights[{i}]"),
            Self::Output(b, n) => format!("an output of {PROGRAM}.blocks[{b}].nodes[{n}]"),
        }
    }
}

/// What later checks need from a valid program.
pub(super) struct ProgramIndex<'a> {
    node_outputs: HashSet<&'a ProgramValueId>,
}

/// Checks the program of `family` (rules 1.2 construction rules).
pub(super) fn validate_program(family: &ModelFamily) -> Result<ProgramIndex<'_>, RequestError> {
    let program = &family.program;
    if program.family_id != family.family_id {
        return Err(RequestError::ProgramFamilyMismatch {
            path: format!("{PROGRAM}.family_id"),
            detail: format!(
                "program family {:?} differs from family {:?}",
                program.family_id.as_str(),
                family.family_id.as_str()
            ),
        });
    }
    let node_count: usize = program.blocks.iter().map(|b| b.nodes.len()).sum();
    crate::json_input::InputLimits::current()
        .check(
            crate::json_input::Limit::Nodes,
            &format!("{PROGRAM}.blocks"),
            node_count as u64,
        )
        .map_err(|e| RequestError::InputLimit {
            path: e.json_path,
            detail: format!("the program has {}", e.message),
        })?;
    if program.blocks.is_empty() {
        return Err(empty(
            format!("{PROGRAM}.blocks"),
            "the program has no blocks",
        ));
    }
    if program.inputs.is_empty() {
        return Err(empty(
            format!("{PROGRAM}.inputs"),
            "the program has no inputs",
        ));
    }
    let mut values: HashMap<&ProgramValueId, Origin> = HashMap::new();
    for (i, input) in program.inputs.iter().enumerate() {
        define(&mut values, input, Origin::Input(i), || {
            format!("{PROGRAM}.inputs[{i}]")
        })?;
    }
    for (i, pair) in program.states.windows(2).enumerate() {
        sorted_pair(
            pair[0].id.as_str(),
            pair[1].id.as_str(),
            format!("{PROGRAM}.states[{}].id", i + 1),
            "state",
        )?;
    }
    for (i, state) in program.states.iter().enumerate() {
        let path = format!("{PROGRAM}.states[{i}]");
        if let Some(problem) = state.tensor.problem() {
            return Err(RequestError::InvalidProgramTensor {
                path: format!("{path}.tensor"),
                detail: format!("state {:?}: {problem}", state.id.as_str()),
            });
        }
        let bytes = state.tensor.byte_len().unwrap_or(u64::MAX);
        if let Some(problem) = state.capacity_demand.problem(bytes) {
            return Err(RequestError::InvalidStateCapacity {
                path: format!("{path}.capacity_demand"),
                detail: format!("state {:?}: {problem}", state.id.as_str()),
            });
        }
        if state.initialization == StateInitialization::Zero
            && state.lifetime != StateLifetime::Sequence
        {
            return Err(RequestError::InvalidStateInitialization {
                path: format!("{path}.initialization"),
                detail: format!(
                    "state {:?} is zero-initialized but lives for a {}",
                    state.id.as_str(),
                    lifetime_name(state.lifetime)
                ),
            });
        }
        define(&mut values, &state.value_id, Origin::State(i), || {
            format!("{path}.value_id")
        })?;
    }
    for (i, pair) in program.weights.windows(2).enumerate() {
        sorted_pair(
            pair[0].weight_id.as_str(),
            pair[1].weight_id.as_str(),
            format!("{PROGRAM}.weights[{}].weight_id", i + 1),
            "weight",
        )?;
    }
    for (i, weight) in program.weights.iter().enumerate() {
        let path = format!("{PROGRAM}.weights[{i}]");
        if let Some(problem) = weight.tensor.problem() {
            return Err(RequestError::InvalidProgramTensor {
                path: format!("{path}.tensor"),
                detail: format!("weight {:?}: {problem}", weight.weight_id.as_str()),
            });
        }
        define(&mut values, &weight.value_id, Origin::Weight(i), || {
            format!("{path}.value_id")
        })?;
    }

    let mut block_ids: HashMap<&str, usize> = HashMap::new();
    let mut node_ids: HashMap<&str, (usize, usize)> = HashMap::new();
    let mut node_outputs = HashSet::new();
    for (b, block) in program.blocks.iter().enumerate() {
        let block_path = format!("{PROGRAM}.blocks[{b}]");
        if let Some(problem) = crate::json_input::name_problem(&block.id) {
            return Err(RequestError::InvalidBlockId {
                path: format!("{block_path}.id"),
                detail: format!("block {b}'s id {problem}"),
            });
        }
        if let Some(first) = block_ids.insert(block.id.as_str(), b) {
            return Err(RequestError::DuplicateProgramId {
                path: format!("{block_path}.id"),
                detail: format!(
                    "block id {:?} is also the id of {PROGRAM}.blocks[{first}]",
                    block.id
                ),
            });
        }
        if block.nodes.is_empty() {
            return Err(empty(
                format!("{block_path}.nodes"),
                &format!("block {:?} has no nodes", block.id),
            ));
        }
        for (n, node) in block.nodes.iter().enumerate() {
            let node_path = format!("{block_path}.nodes[{n}]");
            let name = node.id.as_str();
            if let Some((fb, fnode)) = node_ids.insert(name, (b, n)) {
                return Err(RequestError::DuplicateProgramId {
                    path: format!("{node_path}.id"),
                    detail: format!(
                        "node id {name:?} is also the id of {PROGRAM}.blocks[{fb}].nodes[{fnode}]"
                    ),
                });
            }
            if !node.required_version.is_stable() {
                return Err(RequestError::UnstableNodeVersion {
                    path: format!("{node_path}.required_version.major"),
                    detail: format!(
                        "node {name:?} requires operation {:?} version {}",
                        node.operation_id.as_str(),
                        node.required_version
                    ),
                });
            }
            if node.outputs.is_empty() {
                return Err(empty(
                    format!("{node_path}.outputs"),
                    &format!("node {name:?} has no outputs"),
                ));
            }
            for (attribute, value) in &node.attributes {
                if let Some(problem) = value.problem() {
                    return Err(RequestError::InvalidAttributeValue {
                        path: format!("{node_path}.attributes{}", key(attribute.as_str())),
                        detail: format!(
                            "node {name:?} attribute {:?}: {problem}",
                            attribute.as_str()
                        ),
                    });
                }
            }
            for (k, input) in node.inputs.iter().enumerate() {
                if !values.contains_key(input) {
                    return Err(RequestError::UnknownNodeInput {
                        path: format!("{node_path}.inputs[{k}]"),
                        detail: format!(
                            "node {name:?} reads value {:?}, which is no program input, state or \
                             weight and no output of an earlier node",
                            input.as_str()
                        ),
                    });
                }
            }
            for (k, output) in node.outputs.iter().enumerate() {
                match values.entry(output) {
                    Entry::Vacant(slot) => {
                        slot.insert(Origin::Output(b, n));
                    }
                    Entry::Occupied(slot) => {
                        return Err(RequestError::ValueRedefined {
                            path: format!("{node_path}.outputs[{k}]"),
                            detail: format!(
                                "node {name:?} writes value {:?}, which is already {}",
                                output.as_str(),
                                slot.get().describe()
                            ),
                        });
                    }
                }
                node_outputs.insert(output);
            }
            if let WorkSpec::Tokens { value_id, .. } = &node.work {
                let count = node
                    .inputs
                    .iter()
                    .chain(&node.outputs)
                    .filter(|v| *v == value_id)
                    .count();
                let work_path = format!("{node_path}.work.tokens.value_id");
                if count != 1 {
                    return Err(RequestError::InvalidTokenWork {
                        path: work_path,
                        detail: format!(
                            "node {name:?} scales with value {:?}, which appears {count} times \
                             among its inputs and outputs (exactly once required)",
                            value_id.as_str()
                        ),
                    });
                }
                if let Some(origin @ (Origin::State(_) | Origin::Weight(_))) =
                    values.get(value_id).copied()
                {
                    return Err(RequestError::InvalidTokenWork {
                        path: work_path,
                        detail: format!(
                            "node {name:?} scales with value {:?}, which is {}",
                            value_id.as_str(),
                            origin.describe()
                        ),
                    });
                }
            }
        }
    }

    if program.outputs.is_empty() {
        return Err(empty(
            format!("{PROGRAM}.outputs"),
            "the program has no outputs",
        ));
    }
    let mut outputs: HashMap<&ProgramValueId, usize> = HashMap::new();
    for (i, output) in program.outputs.iter().enumerate() {
        if !values.contains_key(output) {
            return Err(RequestError::UnknownProgramOutput {
                path: format!("{PROGRAM}.outputs[{i}]"),
                detail: format!(
                    "program output {:?} is no value of the program",
                    output.as_str()
                ),
            });
        }
        if let Some(first) = outputs.insert(output, i) {
            return Err(RequestError::DuplicateProgramId {
                path: format!("{PROGRAM}.outputs[{i}]"),
                detail: format!(
                    "program output {:?} is also {PROGRAM}.outputs[{first}]",
                    output.as_str()
                ),
            });
        }
    }
    Ok(ProgramIndex { node_outputs })
}

/// Every retained value must be some node's output.
pub(super) fn validate_retention(
    retention: &CompletionRetention,
    index: &ProgramIndex<'_>,
) -> Result<(), RequestError> {
    for (i, value) in retention.values.iter().enumerate() {
        if !index.node_outputs.contains(value) {
            return Err(RequestError::RetainedValueNotProduced {
                path: format!("completion_retention.values[{i}]"),
                detail: format!(
                    "retained value {:?} is not the output of any program node",
                    value.as_str()
                ),
            });
        }
    }
    Ok(())
}

fn define<'a>(
    values: &mut HashMap<&'a ProgramValueId, Origin>,
    value: &'a ProgramValueId,
    origin: Origin,
    path: impl FnOnce() -> String,
) -> Result<(), RequestError> {
    match values.entry(value) {
        Entry::Vacant(slot) => {
            slot.insert(origin);
            Ok(())
        }
        Entry::Occupied(slot) => Err(RequestError::DuplicateProgramId {
            path: path(),
            detail: format!(
                "value {:?} is also {}",
                value.as_str(),
                slot.get().describe()
            ),
        }),
    }
}

fn sorted_pair(previous: &str, next: &str, path: String, what: &str) -> Result<(), RequestError> {
    match previous.cmp(next) {
        std::cmp::Ordering::Less => Ok(()),
        std::cmp::Ordering::Equal => Err(RequestError::DuplicateProgramId {
            path,
            detail: format!("{what} {next:?} is listed twice"),
        }),
        std::cmp::Ordering::Greater => Err(RequestError::UnsortedProgramList {
            path,
            detail: format!("{what} {next:?} comes after {what} {previous:?} (sort by id)"),
        }),
    }
}

fn empty(path: String, detail: &str) -> RequestError {
    RequestError::EmptyProgramPart {
        path,
        detail: detail.to_owned(),
    }
}

fn lifetime_name(lifetime: StateLifetime) -> &'static str {
    match lifetime {
        StateLifetime::Request => "request",
        StateLifetime::Sequence => "sequence",
        StateLifetime::Step => "step",
    }
}
