//! The node checks against the request's program (rules 6, checks 9 and 11 in part): the
//! nodes are the program's in execution order, each work contract is of its program node's
//! work, each node's state effects are of exactly the program states it binds, and the
//! node fingerprints are canonical. The independent checker reads the plan alone and cannot
//! prove these; they are the node part of the internal pass `jointplan plan` runs
//! ([`super::validate_request_facts`]), and [`super::node_checks::check_nodes`] runs them
//! among every other node check on a stored plan.

use std::collections::BTreeSet;

use crate::node::state::state_allocation_lifetime;
use crate::plan::{NodeWorkContract, PlanNode};
use crate::request::{
    IdMap, PlanRequest, ProgramNode, ProgramValueId, Sha256Hex, StateId, StateSpec, WorkSpec,
};

use super::InternalError;

/// The request's program as the node checks read it: its nodes in execution order and its
/// states by state value.
pub(super) struct Program<'a> {
    pub(super) nodes: Vec<&'a ProgramNode>,
    pub(super) states: IdMap<&'a ProgramValueId, &'a StateSpec>,
}

impl<'a> Program<'a> {
    pub(super) fn of(request: &'a PlanRequest) -> Self {
        Program {
            nodes: request.family.program.nodes().collect(),
            states: request
                .family
                .program
                .states
                .iter()
                .map(|s| (&s.value_id, s))
                .collect(),
        }
    }

    /// The program's node at the plan node's index, which must be that node.
    pub(super) fn node_at(
        &self,
        index: usize,
        node: &PlanNode,
    ) -> Result<&'a ProgramNode, InternalError> {
        match self.nodes.get(index) {
            Some(p) if p.id == node.id => Ok(*p),
            other => Err(InternalError::NodeOrderMismatch {
                index,
                found: node.id.to_string(),
                expected: other.map_or_else(|| "<none>".to_owned(), |p| p.id.to_string()),
            }),
        }
    }

    /// The plan has no fewer nodes than the program.
    pub(super) fn check_count(&self, nodes: &[PlanNode]) -> Result<(), InternalError> {
        match self.nodes.get(nodes.len()) {
            Some(missing) => Err(InternalError::NodeOrderMismatch {
                index: nodes.len(),
                found: "<none>".to_owned(),
                expected: missing.id.to_string(),
            }),
            None => Ok(()),
        }
    }
}

/// The node checks that compare the nodes with the request's program (and the node
/// fingerprints' form), for every node in order: the nodes are the program's in execution
/// order, each work contract is of its program node's work, each node's state effects are
/// of exactly the program states it binds, with their declared lifetimes. The rest of
/// [`super::node_checks::check_nodes`] is proven of a built plan by the independent checker or was run by the
/// build on the very values the nodes hold (docs/checker.md, "The internal validation
/// beside the checker").
pub(super) fn check_program_facts(
    nodes: &[PlanNode],
    request: &PlanRequest,
) -> Result<(), InternalError> {
    let program = Program::of(request);
    for (index, node) in nodes.iter().enumerate() {
        let program_node = program.node_at(index, node)?;
        check_work(node, program_node)?;
        check_node_fingerprints(node)?;
        check_state_effects(node, &program.states)?;
    }
    program.check_count(nodes)
}

/// A node's fingerprint fields are canonical sha256 fingerprints.
pub(super) fn check_node_fingerprints(node: &PlanNode) -> Result<(), InternalError> {
    let fields: [(&str, &Sha256Hex); 2] = [
        (
            "provider_implementation_fingerprint",
            &node.provider_implementation_fingerprint,
        ),
        ("operation_fingerprint", &node.operation_fingerprint),
    ];
    for (field, value) in fields {
        if Sha256Hex::new(value.as_str()).is_err() {
            return Err(InternalError::NonCanonicalFingerprint {
                field: format!("node {}: {field}", node.id),
                value: value.as_str().to_owned(),
            });
        }
    }
    Ok(())
}

pub(super) fn work_error(node: &PlanNode, problem: String) -> InternalError {
    InternalError::WorkContract {
        node: node.id.clone(),
        problem,
    }
}

/// Check 9 (against the program): the work contract is the program node's kind of work,
/// and a token contract's source is the program's token source.
pub(super) fn check_work(node: &PlanNode, program: &ProgramNode) -> Result<(), InternalError> {
    let work = |problem: String| work_error(node, problem);
    match (&node.work, &program.work) {
        (NodeWorkContract::Fixed, WorkSpec::Fixed) => Ok(()),
        (NodeWorkContract::Fixed, WorkSpec::Tokens { .. }) => Err(work(
            "is fixed, but the program node's work scales with tokens".to_owned(),
        )),
        (NodeWorkContract::Tokens { .. }, WorkSpec::Fixed) => Err(work(
            "scales with tokens, but the program node's work is fixed".to_owned(),
        )),
        (NodeWorkContract::Tokens { source, .. }, WorkSpec::Tokens { value_id, axis }) => {
            if &source.value_id != value_id || source.axis != *axis {
                return Err(work(format!(
                    "source projects {} axis {}, but the program names {value_id} axis {axis}",
                    source.value_id, source.axis
                )));
            }
            Ok(())
        }
    }
}

pub(super) fn state_effect_error(
    node: &PlanNode,
    state: &StateId,
    problem: String,
) -> InternalError {
    InternalError::StateEffect {
        node: node.id.clone(),
        state: state.clone(),
        problem,
    }
}

/// Check 11 (against the program): the state effects list exactly the program states the
/// node binds, each naming its state's value, with the state's declared lifetime.
pub(super) fn check_state_effects(
    node: &PlanNode,
    states: &IdMap<&ProgramValueId, &StateSpec>,
) -> Result<(), InternalError> {
    let bound: BTreeSet<&StateId> = node
        .values
        .iter()
        .filter_map(|b| states.get(&b.value_id).map(|s| &s.id))
        .collect();
    let listed: Vec<&StateId> = node.state_effects.iter().map(|e| &e.state_id).collect();
    if !listed.iter().copied().eq(bound.iter().copied()) {
        return Err(InternalError::StateEffectsMismatch {
            node: node.id.clone(),
            stored: listed.iter().map(ToString::to_string).collect(),
            expected: bound.iter().map(ToString::to_string).collect(),
        });
    }
    for effect in &node.state_effects {
        let problem = |text: String| state_effect_error(node, &effect.state_id, text);
        let Some(spec) = states.get(&effect.state_value_id) else {
            return Err(problem(format!(
                "state_value_id {} is not the value of a program state",
                effect.state_value_id
            )));
        };
        if spec.id != effect.state_id {
            return Err(problem(format!(
                "state_value_id {} is the value of state {}",
                effect.state_value_id, spec.id
            )));
        }
        if effect.lifetime != state_allocation_lifetime(spec.lifetime) {
            return Err(problem(format!(
                "lifetime {:?} is not the state's {:?}",
                effect.lifetime, spec.lifetime
            )));
        }
    }
    Ok(())
}
