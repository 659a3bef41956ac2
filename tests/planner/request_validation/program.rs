//! The program (rules 1.2): its family, blocks, inputs, states, weights, nodes and values.

use super::*;

// ---------------------------------------------------------------- program (1.2)

rejects!(
    program_of_another_family,
    |r| {
        r.family.program.family_id = id("family.other");
    },
    ProgramFamilyMismatch,
    "family.program.family_id",
    "family.other"
);
rejects!(
    program_without_blocks,
    |r| {
        r.family.program.blocks.clear();
    },
    EmptyProgramPart,
    "family.program.blocks",
    "no blocks"
);
rejects!(
    program_without_inputs,
    |r| {
        r.family.program.inputs.clear();
    },
    EmptyProgramPart,
    "family.program.inputs",
    "no inputs"
);
rejects!(
    repeated_program_input,
    |r| {
        r.family.program.inputs.push(id("value.input"));
    },
    DuplicateProgramId,
    "family.program.inputs[1]",
    "value.input"
);
rejects!(
    unsorted_states,
    |r| {
        let mut state = r.family.program.states[0].clone();
        state.id = id("state.a");
        state.value_id = id("value.state.a");
        r.family.program.states.push(state);
    },
    UnsortedProgramList,
    "family.program.states[1].id",
    "state.a"
);
rejects!(
    repeated_state,
    |r| {
        let mut state = r.family.program.states[0].clone();
        state.value_id = id("value.state.b");
        r.family.program.states.push(state);
    },
    DuplicateProgramId,
    "family.program.states[1].id",
    "state.cache"
);
rejects!(
    malformed_state_tensor,
    |r| {
        r.family.program.states[0].tensor.dimensions[1] = 0;
    },
    InvalidProgramTensor,
    "family.program.states[0].tensor",
    "state.cache"
);
rejects!(
    state_capacity_below_tensor,
    |r| {
        r.family.program.states[0].capacity_demand = StateCapacityDemand::TokenScaled {
            bytes_per_token: 32,
            maximum_tokens: 256,
        };
    },
    InvalidStateCapacity,
    "family.program.states[0].capacity_demand",
    "state.cache"
);
rejects!(
    state_capacity_overflow,
    |r| {
        r.family.program.states[0].capacity_demand = StateCapacityDemand::TokenScaled {
            bytes_per_token: u64::MAX / 2,
            maximum_tokens: 3,
        };
    },
    InvalidStateCapacity,
    "family.program.states[0].capacity_demand",
    "overflows"
);
rejects!(
    state_capacity_without_tokens,
    |r| {
        r.family.program.states[0].capacity_demand = StateCapacityDemand::TokenScaled {
            bytes_per_token: 64,
            maximum_tokens: 0,
        };
    },
    InvalidStateCapacity,
    "family.program.states[0].capacity_demand",
    "maximum_tokens"
);
rejects!(
    zero_initialized_request_state,
    |r| {
        let state = &mut r.family.program.states[0];
        state.lifetime = StateLifetime::Request;
        state.initialization = StateInitialization::Zero;
    },
    InvalidStateInitialization,
    "family.program.states[0].initialization",
    "request"
);
rejects!(
    unsorted_weights,
    |r| {
        r.family.program.weights.push(WeightReference {
            weight_id: id("weight.a"),
            value_id: id("value.weight.a"),
            tensor: tensor(&[8], ElementType::F16),
        });
    },
    UnsortedProgramList,
    "family.program.weights[1].weight_id",
    "weight.a"
);
rejects!(
    malformed_weight_tensor,
    |r| {
        r.family.program.weights[0].tensor.layout = TensorLayout::Strided {
            byte_strides: vec![16],
        };
    },
    InvalidProgramTensor,
    "family.program.weights[0].tensor",
    "weight.matrix"
);
rejects!(
    state_value_is_a_program_input,
    |r| {
        r.family.program.states[0].value_id = id("value.input");
    },
    DuplicateProgramId,
    "family.program.states[0].value_id",
    "value.input"
);
rejects!(
    weight_value_is_a_state_value,
    |r| {
        r.family.program.weights[0].value_id = id("value.state");
    },
    DuplicateProgramId,
    "family.program.weights[0].value_id",
    "state"
);
rejects!(
    empty_block_id,
    |r| {
        r.family.program.blocks[0].id.clear();
    },
    InvalidBlockId,
    "family.program.blocks[0].id",
    "empty"
);
rejects!(
    repeated_block_id,
    |r| {
        let block = r.family.program.blocks[0].clone();
        r.family.program.blocks.push(block);
    },
    DuplicateProgramId,
    "family.program.blocks[1].id",
    "block.decoder"
);
rejects!(
    block_without_nodes,
    |r| {
        r.family.program.blocks.push(ProgramBlock {
            id: "block.empty".to_owned(),
            nodes: vec![],
        });
    },
    EmptyProgramPart,
    "family.program.blocks[1].nodes",
    "block.empty"
);
rejects!(
    node_with_unstable_version,
    |r| {
        node(&mut r, 0).required_version = ContractVersion::new(0, 3);
    },
    UnstableNodeVersion,
    "family.program.blocks[0].nodes[0].required_version.major",
    "node.main"
);
rejects!(
    node_without_outputs,
    |r| {
        node(&mut r, 1).outputs.clear();
    },
    EmptyProgramPart,
    "family.program.blocks[0].nodes[1].outputs",
    "node.residual"
);
rejects!(
    unreduced_attribute,
    |r| {
        node(&mut r, 0).attributes.insert(
            id("epsilon"),
            SemanticValue::Rational(Rational {
                numerator: 2,
                denominator: 4,
            }),
        );
    },
    InvalidAttributeValue,
    "family.program.blocks[0].nodes[0].attributes[\"epsilon\"]",
    "epsilon"
);
rejects!(
    empty_text_attribute,
    |r| {
        node(&mut r, 1)
            .attributes
            .insert(id("mode"), SemanticValue::Text(String::new()));
    },
    InvalidAttributeValue,
    "family.program.blocks[0].nodes[1].attributes[\"mode\"]",
    "node.residual"
);
rejects!(
    repeated_node_id,
    |r| {
        node(&mut r, 1).id = id("node.main");
    },
    DuplicateProgramId,
    "family.program.blocks[0].nodes[1].id",
    "node.main"
);
rejects!(
    node_reads_a_later_output,
    |r| {
        node(&mut r, 0).inputs[0] = id("value.output");
    },
    UnknownNodeInput,
    "family.program.blocks[0].nodes[0].inputs[0]",
    "value.output"
);
rejects!(
    value_with_two_producers,
    |r| {
        node(&mut r, 1).outputs[0] = id("value.hidden");
    },
    ValueRedefined,
    "family.program.blocks[0].nodes[1].outputs[0]",
    "value.hidden"
);
rejects!(
    state_written_as_output,
    |r| {
        node(&mut r, 0).outputs.push(id("value.state"));
    },
    ValueRedefined,
    "family.program.blocks[0].nodes[0].outputs[1]",
    "state"
);
rejects!(
    weight_written_as_output,
    |r| {
        node(&mut r, 0).outputs.push(id("value.weight"));
    },
    ValueRedefined,
    "family.program.blocks[0].nodes[0].outputs[1]",
    "weight"
);
rejects!(
    token_work_value_missing,
    |r| {
        node(&mut r, 0).work = WorkSpec::Tokens {
            value_id: id("value.output"),
            axis: 0,
        };
    },
    InvalidTokenWork,
    "family.program.blocks[0].nodes[0].work.tokens.value_id",
    "0 times"
);
rejects!(
    token_work_value_repeated,
    |r| {
        node(&mut r, 1).inputs.push(id("value.hidden"));
    },
    InvalidTokenWork,
    "family.program.blocks[0].nodes[1].work.tokens.value_id",
    "2 times"
);
rejects!(
    token_work_on_state,
    |r| {
        node(&mut r, 0).work = WorkSpec::Tokens {
            value_id: id("value.state"),
            axis: 0,
        };
    },
    InvalidTokenWork,
    "family.program.blocks[0].nodes[0].work.tokens.value_id",
    "value.state"
);
rejects!(
    token_work_on_weight,
    |r| {
        node(&mut r, 0).work = WorkSpec::Tokens {
            value_id: id("value.weight"),
            axis: 1,
        };
    },
    InvalidTokenWork,
    "family.program.blocks[0].nodes[0].work.tokens.value_id",
    "weight"
);
rejects!(
    program_without_outputs,
    |r| {
        r.family.program.outputs.clear();
    },
    EmptyProgramPart,
    "family.program.outputs",
    "no outputs"
);
rejects!(
    unknown_program_output,
    |r| {
        r.family.program.outputs.push(id("value.nowhere"));
    },
    UnknownProgramOutput,
    "family.program.outputs[1]",
    "value.nowhere"
);
rejects!(
    repeated_program_output,
    |r| {
        r.family.program.outputs.push(id("value.output"));
    },
    DuplicateProgramId,
    "family.program.outputs[1]",
    "value.output"
);
rejects!(
    retained_value_is_no_node_output,
    |r| {
        r.completion_retention.values.insert(id("value.input"));
    },
    RetainedValueNotProduced,
    "completion_retention.values[1]",
    "value.input"
);
