//! Internal validation of a built or stored plan (rules 6).
//!
//! [`validate_internal`] re-derives every fact of a plan that can be re-derived from the
//! plan itself (and the request's trusted execution weights), so that a tampered or
//! inconsistent plan is rejected with a typed error naming the node, resource or field.
//! It runs on every built plan and on every stored plan `verify` reads. It does not
//! re-derive the provider choice, the storage profiles or the estimator inputs: only the
//! rebuild-and-compare of [`crate::plan::verify`] catches those.
//!
//! The checks are split by scope: this file holds the plan-level checks (schema, hash,
//! fingerprints, execution weights, retained values, terminal outputs, memory) and the
//! error type; `node_checks` the per-node checks. The cross-node check (value
//! consistency and global storage aliasing) re-runs the build's own rules
//! (`node::semantic::BoundValues` and `node::alias::check_global_aliasing`) over the stored
//! nodes, so each rule lives in one place.

mod content;
mod execution_weights;
mod node_checks;
mod program_facts;

pub(crate) use content::{payload_content, PayloadContent};

use std::collections::BTreeSet;

use crate::canonical::CanonicalError;
use crate::node::alias::check_global_aliasing;
use crate::node::semantic::BoundValues;
use crate::request::{
    BufferUsage, ContractVersion, NodeId, PlanRequest, ProgramValueId, ProviderId, ResourceId,
    Sha256Hex, StateId, ValueRole, WorkspaceKind,
};

use crate::plan::hash::{plan_hash, plan_id};
use crate::plan::{ExecutionPlan, RetainedCompletionValue, PLAN_SCHEMA};

/// A fact of a plan that does not hold.
#[derive(Debug, thiserror::Error)]
pub enum InternalError {
    /// The plan was written for another plan schema.
    #[error("plan schema {found} is not supported (jointplan writes and reads {expected})")]
    UnsupportedPlanSchema {
        /// The plan's schema.
        found: ContractVersion,
        /// The supported schema.
        expected: ContractVersion,
    },
    /// The stored plan hash is not the hash of the payload.
    #[error("plan_hash {stored} is not the hash of the payload (recomputed {recomputed})")]
    PlanHashMismatch {
        /// The stored hash.
        stored: Sha256Hex,
        /// The recomputed hash.
        recomputed: Sha256Hex,
    },
    /// The plan id is not `plan/sha256/<plan_hash>`.
    #[error("payload.plan_id {stored:?} is not {expected:?}")]
    PlanIdMismatch {
        /// The stored id.
        stored: String,
        /// The id the hash gives.
        expected: String,
    },
    /// A fingerprint could not be computed.
    #[error("cannot recompute a fingerprint: {0}")]
    Canonical(CanonicalError),
    /// The plan has no node.
    #[error("payload.nodes is empty: a plan has at least one node")]
    NoNodes,
    /// A fingerprint field is not 64 lowercase hex digits.
    #[error("{field} {value:?} is not a canonical sha256 fingerprint")]
    NonCanonicalFingerprint {
        /// JSON path of the field.
        field: String,
        /// Its text.
        value: String,
    },
    /// The token ceiling is zero.
    #[error("payload.maximum_scheduled_tokens is 0")]
    ZeroMaximumScheduledTokens,
    /// The execution weight plan is structurally invalid for the family.
    #[error("payload.execution_weights is invalid for family {family_id}: {problem}")]
    InvalidExecutionWeights {
        /// The family.
        family_id: String,
        /// What is wrong.
        problem: String,
    },
    /// The execution weight plan differs from the trusted one of the request.
    #[error(
        "payload.execution_weights.{field} differs from the request's trusted execution weight plan"
    )]
    ExecutionWeightsMismatch {
        /// The first differing field.
        field: &'static str,
    },
    /// The weight format is not the execution schema's.
    #[error("payload.weight_format {stored} is not the execution schema's format {expected}")]
    WeightFormatMismatch {
        /// Stored.
        stored: String,
        /// The execution schema's.
        expected: String,
    },
    /// The quantization formats are not the execution schema's.
    #[error("payload.quantization_formats {stored:?} are not the execution schema's {expected:?}")]
    QuantizationFormatsMismatch {
        /// Stored.
        stored: Vec<String>,
        /// The execution schema's.
        expected: Vec<String>,
    },
    /// A retained completion value cannot be re-resolved from the nodes.
    #[error("retained completion value {value_id}: {problem}")]
    RetainedValueUnresolvable {
        /// The value.
        value_id: ProgramValueId,
        /// What is wrong.
        problem: String,
    },
    /// A retained completion value differs from its re-resolution.
    #[error(
        "payload.retained_completion_values[{index}] (value {value_id}): stored {field} differs from the one re-resolved from the nodes"
    )]
    RetainedValueMismatch {
        /// Index in the list.
        index: usize,
        /// The value.
        value_id: ProgramValueId,
        /// The differing field.
        field: &'static str,
    },
    /// The retained values are not the request's retention, in value-id order.
    #[error(
        "payload.retained_completion_values lists {stored:?}, but the request retains {expected:?} (value-id order)"
    )]
    RetainedValuesMismatch {
        /// Stored value ids.
        stored: Vec<String>,
        /// Requested value ids.
        expected: Vec<String>,
    },
    /// No terminal output resource.
    #[error("payload.terminal_output_resources is empty")]
    NoTerminalOutputs,
    /// Terminal output resources not strictly ascending.
    #[error(
        "payload.terminal_output_resources is not strictly ascending: {next} follows {previous}"
    )]
    TerminalOutputsNotAscending {
        /// The earlier entry.
        previous: ResourceId,
        /// The entry out of order.
        next: ResourceId,
    },
    /// The memory plan does not re-derive (rules 4.8).
    #[error("payload.memory: {0}")]
    Memory(crate::memory::MemoryError),
    /// The plan's nodes are not the program's nodes in execution order.
    #[error(
        "payload.nodes[{index}] is node {found}, but the program's node {index} is {expected}"
    )]
    NodeOrderMismatch {
        /// Index.
        index: usize,
        /// The plan's node (or `<none>`).
        found: String,
        /// The program's node (or `<none>`).
        expected: String,
    },
    /// A node id appears twice.
    #[error("node {node} appears twice in payload.nodes")]
    DuplicateNode {
        /// The node.
        node: NodeId,
    },
    /// A node's provider resource plan fails `validate_shape` (field rules, workspace
    /// rules, estimate fingerprint).
    #[error("node {node}: provider_resources of {provider}: {problem}")]
    InvalidProviderResources {
        /// The node.
        node: NodeId,
        /// The estimate's provider.
        provider: ProviderId,
        /// What is wrong.
        problem: String,
    },
    /// The estimate belongs to another provider than the selected one.
    #[error(
        "node {node}: provider_resources belong to provider {estimate_provider}, but the selected provider is {selected}"
    )]
    EstimateProviderMismatch {
        /// The node.
        node: NodeId,
        /// The estimate's provider.
        estimate_provider: ProviderId,
        /// The selected provider.
        selected: ProviderId,
    },
    /// The selection evidence of a node is not canonical.
    #[error("node {node}: selection: {problem}")]
    SelectionEvidence {
        /// The node.
        node: NodeId,
        /// What is wrong.
        problem: String,
    },
    /// The selection reason does not follow from the requested and selected providers.
    #[error(
        "node {node}: selection.selection_reason is {stored}, but requested {requested} and selected {selected} make it {expected}"
    )]
    SelectionReasonMismatch {
        /// The node.
        node: NodeId,
        /// Stored reason.
        stored: String,
        /// The reason that follows.
        expected: String,
        /// Requested provider (or `none`).
        requested: String,
        /// Selected provider.
        selected: ProviderId,
    },
    /// A fallback without typed evidence for the requested provider.
    #[error(
        "node {node}: falls back from {requested} to {selected} without typed rejection evidence for {requested}"
    )]
    FallbackWithoutEvidence {
        /// The node.
        node: NodeId,
        /// Requested provider.
        requested: ProviderId,
        /// Selected provider.
        selected: ProviderId,
    },
    /// The work contract is not canonical or does not match the bindings.
    #[error("node {node}: work: {problem}")]
    WorkContract {
        /// The node.
        node: NodeId,
        /// What is wrong.
        problem: String,
    },
    /// A dependency is malformed.
    #[error("node {node}: dependencies: {problem}")]
    Dependency {
        /// The node.
        node: NodeId,
        /// What is wrong.
        problem: String,
    },
    /// A state effect is malformed or does not match the bindings.
    #[error("node {node}: state effect of {state}: {problem}")]
    StateEffect {
        /// The node.
        node: NodeId,
        /// The state.
        state: StateId,
        /// What is wrong.
        problem: String,
    },
    /// The state effects do not cover exactly the states the node binds.
    #[error(
        "node {node}: state_effects list states {stored:?}, but the node binds states {expected:?}"
    )]
    StateEffectsMismatch {
        /// The node.
        node: NodeId,
        /// Listed states.
        stored: Vec<String>,
        /// Bound states.
        expected: Vec<String>,
    },
    /// The node's resource list is not sorted and unique.
    #[error("node {node}: resources is not strictly ascending: {next} follows {previous}")]
    ResourcesNotAscending {
        /// The node.
        node: NodeId,
        /// Earlier entry.
        previous: ResourceId,
        /// Entry out of order.
        next: ResourceId,
    },
    /// A resource of a node has neither a static allocation nor a dynamic descriptor.
    #[error(
        "node {node}: resource {resource} has neither a static allocation nor a dynamic descriptor in payload.memory"
    )]
    ResourceNotPlanned {
        /// The node.
        node: NodeId,
        /// The resource.
        resource: ResourceId,
    },
    /// The node's resources are not its bindings' and workspaces' resources.
    #[error(
        "node {node}: resources {stored:?} are not the binding and workspace resources {expected:?}"
    )]
    ResourcesMismatch {
        /// The node.
        node: NodeId,
        /// Stored.
        stored: Vec<String>,
        /// Derived.
        expected: Vec<String>,
    },
    /// A workspace resource is present without an estimate, or the reverse.
    #[error(
        "node {node}: {kind:?} workspace resource is {resource_state} but the estimate {estimate_state} one"
    )]
    WorkspacePresence {
        /// The node.
        node: NodeId,
        /// The workspace kind.
        kind: WorkspaceKind,
        /// `present` or `absent`.
        resource_state: &'static str,
        /// `has` or `has no`.
        estimate_state: &'static str,
    },
    /// A workspace resource id is not derived from the node and estimate.
    #[error(
        "node {node}: {kind:?} workspace resource {stored} is not the workspace base id {expected}"
    )]
    WorkspaceIdMismatch {
        /// The node.
        node: NodeId,
        /// The kind.
        kind: WorkspaceKind,
        /// Stored.
        stored: ResourceId,
        /// Derived.
        expected: ResourceId,
    },
    /// A workspace's memory row does not match its requirement.
    #[error("node {node}: {kind:?} workspace {resource}: {field} {problem}")]
    WorkspaceMemory {
        /// The node.
        node: NodeId,
        /// The kind.
        kind: WorkspaceKind,
        /// The resource.
        resource: ResourceId,
        /// The memory row field.
        field: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// A build rule (cross-node value consistency, exact aliases, global storage aliasing)
    /// fails on the stored nodes.
    #[error("{0}")]
    NodeRule(Box<crate::node::NodeError>),
}

/// Checks every fact of rules 6 on `plan`, with the request's trusted execution
/// weights (the identity materializer's if the request has none).
///
/// The memory plan is checked by `memory::validate_memory_plan(memory, nodes, retained)`,
/// where `retained` is the retained values' resources ∪ the terminal output resources.
pub fn validate_internal(plan: &ExecutionPlan, request: &PlanRequest) -> Result<(), InternalError> {
    validate_identity(plan)?;
    canonical_sha256("payload.plan_hash", &plan.plan_hash)?;
    validate_content(&payload_content!(plan.payload), request)
}

/// Rules 6.1-6.2: the schema, and the plan hash and id recomputed from the payload.
fn validate_identity(plan: &ExecutionPlan) -> Result<(), InternalError> {
    let payload = &plan.payload;
    // 1. Schema.
    if payload.schema != PLAN_SCHEMA {
        return Err(InternalError::UnsupportedPlanSchema {
            found: payload.schema,
            expected: PLAN_SCHEMA,
        });
    }
    // 2. Hash and id.
    let recomputed = plan_hash(payload)?;
    if recomputed != plan.plan_hash {
        return Err(InternalError::PlanHashMismatch {
            stored: plan.plan_hash.clone(),
            recomputed,
        });
    }
    let expected_id = plan_id(&plan.plan_hash);
    if payload.plan_id != expected_id {
        return Err(InternalError::PlanIdMismatch {
            stored: payload.plan_id.clone(),
            expected: expected_id,
        });
    }
    Ok(())
}

/// The internal rules the independent checker cannot prove, because they compare the
/// plan with its request (and the fingerprints' form): the payload's fingerprints are
/// canonical, its execution weights are the request's trusted plan (check 4), its retained
/// values are the request's retention re-resolved from the nodes (check 5), and its nodes
/// are the program's, each with its program node's work and exactly its program states
/// (`program_facts::check_program_facts`).
///
/// This is the internal validation `jointplan plan` runs on the payload it has just built,
/// beside the plan hash. Every other internal rule is, for a built plan, either proven by
/// the independent checker that runs beside it ([`crate::check::check_sealed_plan`]) or
/// was run by the build itself on the very values the payload holds (the estimate shapes,
/// the cross-node value consistency, the global aliasing and the memory plan's
/// validation); docs/checker.md tabulates each rule and where it runs. A stored plan gets
/// every rule ([`validate_internal`]).
pub(crate) fn validate_request_facts(
    payload: &PayloadContent<'_>,
    request: &PlanRequest,
) -> Result<(), InternalError> {
    check_payload_fingerprints(payload)?;
    execution_weights::check_execution_weights(payload, request)?;
    check_retained_values(payload, request)?;
    program_facts::check_program_facts(payload.nodes, request)
}

/// Check 3 (fingerprints): each payload fingerprint is canonical.
fn check_payload_fingerprints(payload: &PayloadContent<'_>) -> Result<(), InternalError> {
    for (field, value) in [
        (
            "payload.prepared_family_fingerprint",
            payload.prepared_family_fingerprint,
        ),
        ("payload.program_fingerprint", payload.program_fingerprint),
        (
            "payload.capability_catalog_fingerprint",
            payload.capability_catalog_fingerprint,
        ),
        (
            "payload.device_runtime_implementation_fingerprint",
            payload.device_runtime_implementation_fingerprint,
        ),
        ("payload.policy_fingerprint", payload.policy_fingerprint),
    ] {
        canonical_sha256(field, value)?;
    }
    Ok(())
}

/// Rules 6.3 onwards: everything but the identity (the schema, the plan hash and id, and
/// the plan hash's form, which the identity check settles), on a stored plan.
fn validate_content(
    payload: &PayloadContent<'_>,
    request: &PlanRequest,
) -> Result<(), InternalError> {
    // 3. Nodes, fingerprints, token ceiling.
    if payload.nodes.is_empty() {
        return Err(InternalError::NoNodes);
    }
    check_payload_fingerprints(payload)?;
    if payload.maximum_scheduled_tokens == 0 {
        return Err(InternalError::ZeroMaximumScheduledTokens);
    }
    // 4. Execution weights.
    execution_weights::check_execution_weights(payload, request)?;
    // 5. Retained completion values.
    check_retained_values(payload, request)?;
    // 6. Terminal outputs.
    let outputs = payload.terminal_output_resources;
    if outputs.is_empty() {
        return Err(InternalError::NoTerminalOutputs);
    }
    if let Some(pair) = outputs.windows(2).find(|w| w[0] >= w[1]) {
        return Err(InternalError::TerminalOutputsNotAscending {
            previous: pair[0].clone(),
            next: pair[1].clone(),
        });
    }
    // 9-14. Per node.
    node_checks::check_nodes(payload, request)?;
    // 15. Cross-node value consistency and global aliasing, re-run over the stored nodes.
    let mut bound = BoundValues::default();
    for node in payload.nodes {
        for binding in &node.values {
            bound.record(&node.id, binding).map_err(node_rule)?;
        }
    }
    drop(bound);
    check_global_aliasing(payload.nodes).map_err(node_rule)?;
    // 7-8. The memory plan, re-derived structurally from its descriptors and the nodes.
    let retained: BTreeSet<ResourceId> = payload
        .retained_completion_values
        .iter()
        .map(|v| v.resource_id.clone())
        .chain(outputs.iter().cloned())
        .collect();
    crate::memory::validate_memory_plan_within(
        payload.memory,
        payload.nodes,
        &retained,
        request.policy.effective_wire_limits(),
    )?;
    Ok(())
}

fn node_rule(error: crate::node::NodeError) -> InternalError {
    InternalError::NodeRule(Box::new(error))
}

/// Re-checks that a fingerprint field is 64 lowercase hex digits (the type guarantees it for
/// parsed plans; a plan assembled in memory is checked the same way).
pub(crate) fn canonical_sha256(field: &str, value: &Sha256Hex) -> Result<(), InternalError> {
    match Sha256Hex::new(value.as_str()) {
        Ok(_) => Ok(()),
        Err(_) => Err(InternalError::NonCanonicalFingerprint {
            field: field.to_owned(),
            value: value.as_str().to_owned(),
        }),
    }
}

/// Resolves retained completion values from the plan's nodes (rules 1.9): each value
/// must be the output of exactly one node, use activations and have exactly one storage
/// component, and no later-or-same node other than the producing binding may write an
/// overlapping byte range of its resource.
pub fn resolve_retained_values<'a>(
    nodes: &[super::PlanNode],
    values: impl IntoIterator<Item = &'a ProgramValueId>,
) -> Result<Vec<RetainedCompletionValue>, InternalError> {
    let mut resolved = Vec::new();
    for value in values {
        let unresolvable = |problem: String| InternalError::RetainedValueUnresolvable {
            value_id: value.clone(),
            problem,
        };
        let producers: Vec<(usize, &crate::request::ValueBinding)> = nodes
            .iter()
            .enumerate()
            .flat_map(|(i, n)| n.values.iter().map(move |b| (i, b)))
            .filter(|(_, b)| b.role == ValueRole::Output && &b.value_id == value)
            .collect();
        let (index, binding) = match producers.as_slice() {
            [one] => *one,
            [] => return Err(unresolvable("is not the output of any node".to_owned())),
            _ => {
                return Err(unresolvable(format!(
                    "is the output of {} bindings, not exactly one",
                    producers.len()
                )))
            }
        };
        let producer = &nodes[index];
        if binding.usage != BufferUsage::Activations {
            return Err(unresolvable(format!(
                "node {} produces it as {:?}, not activations",
                producer.id, binding.usage
            )));
        }
        let component = match binding.storage.components.as_slice() {
            [one] => one,
            other => {
                return Err(unresolvable(format!(
                    "has {} storage components, not exactly one",
                    other.len()
                )))
            }
        };
        let length = binding
            .tensor
            .minimum_storage_bytes()
            .ok_or_else(|| unresolvable("tensor byte size overflows u64".to_owned()))?;
        let start = component.offset_bytes;
        let end = start
            .checked_add(length)
            .ok_or_else(|| unresolvable("byte range overflows u64".to_owned()))?;
        for later in &nodes[index..] {
            for other in &later.values {
                if std::ptr::eq(other, binding) || !other.access.writes() {
                    continue;
                }
                let overlaps = other.storage.components.iter().any(|c| {
                    c.resource_id == component.resource_id
                        && c.offset_bytes < end
                        && start < c.offset_bytes.saturating_add(c.length_bytes)
                });
                if overlaps {
                    return Err(unresolvable(format!(
                        "node {} writes value {} over its bytes [{start}, {end}) of resource {} before completion",
                        later.id, other.value_id, component.resource_id
                    )));
                }
            }
        }
        resolved.push(RetainedCompletionValue {
            value_id: value.clone(),
            producer_node_id: producer.id.clone(),
            output_ordinal: binding.ordinal,
            resource_id: component.resource_id.clone(),
            logical_offset_bytes: component.offset_bytes,
            tensor: binding.tensor.clone(),
        });
    }
    Ok(resolved)
}

/// Check 5: the retained values re-resolve from their own value ids to the stored list,
/// which is the request's retention in value-id order.
fn check_retained_values(
    payload: &PayloadContent<'_>,
    request: &PlanRequest,
) -> Result<(), InternalError> {
    let stored = payload.retained_completion_values;
    let stored_ids: Vec<&ProgramValueId> = stored.iter().map(|v| &v.value_id).collect();
    let expected_ids: Vec<&ProgramValueId> = request.completion_retention.values.iter().collect();
    if stored_ids != expected_ids {
        return Err(InternalError::RetainedValuesMismatch {
            stored: stored_ids.iter().map(ToString::to_string).collect(),
            expected: expected_ids.iter().map(ToString::to_string).collect(),
        });
    }
    let resolved = resolve_retained_values(payload.nodes, stored_ids)?;
    for (index, (stored, resolved)) in stored.iter().zip(&resolved).enumerate() {
        let field = if stored.producer_node_id != resolved.producer_node_id {
            Some("producer_node_id")
        } else if stored.output_ordinal != resolved.output_ordinal {
            Some("output_ordinal")
        } else if stored.resource_id != resolved.resource_id {
            Some("resource_id")
        } else if stored.logical_offset_bytes != resolved.logical_offset_bytes {
            Some("logical_offset_bytes")
        } else if stored.tensor != resolved.tensor {
            Some("tensor")
        } else {
            None
        };
        if let Some(field) = field {
            return Err(InternalError::RetainedValueMismatch {
                index,
                value_id: stored.value_id.clone(),
                field,
            });
        }
    }
    Ok(())
}

// Wrappers displayed with context are not also returned as `source()` (a reporter that
// walks the chain would print the inner error twice), hence these hand-written `From`s.

impl From<CanonicalError> for InternalError {
    fn from(error: CanonicalError) -> Self {
        InternalError::Canonical(error)
    }
}

impl From<crate::memory::MemoryError> for InternalError {
    fn from(error: crate::memory::MemoryError) -> Self {
        InternalError::Memory(error)
    }
}
