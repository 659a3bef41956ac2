//! Per-node checks of plan building (rules 2.2-2.7), one module per concept, and
//! [`build_nodes`], which runs them (each node's own checks in parallel, those across nodes in
//! program order) with the errors of the reference order and emits each [`PlanNode`].
// `NodeError` names its culprits by id, so it is large; errors are the cold path and the
// variants stay directly matchable, so results carry it unboxed.
#![allow(clippy::result_large_err)]

pub(crate) mod alias;
pub(crate) mod attributes;
pub(crate) mod bindings;
pub(crate) mod compatibility;
mod error;
pub(crate) mod estimate;
pub(crate) mod semantic;
pub(crate) mod state;
pub(crate) mod work;

use std::collections::BTreeSet;

use crate::canonical::CanonicalError;
use crate::plan::{PlanNode, RejectedProvider};
use crate::request::fingerprints::{
    node_weight_requirements, operation_fingerprint, workspace_base_id,
};
use crate::request::{
    CapabilityCatalog, IdMap, ModelProgram, NodeId, NodeResolution, OperationId, ProgramNode,
    ProgramValueId, ProviderResourcePlan, ResourceId, RuntimePolicy, Sha256Hex, ValueRole,
    WeightSchema, WorkspaceKind,
};
pub(crate) use error::join;
pub use error::NodeError;

use alias::{check_alias_liveness, extract_exact_aliases, AliasLiveness};
use compatibility::{provider_compatibility, select_provider, CompatibilityRequest};
use estimate::{verify_estimate, EstimateContext};
use semantic::{check_semantic_binding, BoundValues, ValueClasses};
use state::{derive_state_effects, StateHazardTracker};

/// Plan-wide facts every node is checked against.
pub(crate) struct NodePlanContext<'a> {
    /// The capability catalog.
    pub catalog: &'a CapabilityCatalog,
    /// The program.
    pub program: &'a ModelProgram,
    /// The runtime policy.
    pub policy: &'a RuntimePolicy,
    /// The execution weight schema providers consume.
    pub execution_schema: &'a WeightSchema,
    /// The prepared family fingerprint.
    pub family_fingerprint: &'a Sha256Hex,
    /// Program value classes.
    pub classes: ValueClasses<'a>,
    /// The state values.
    pub state_values: BTreeSet<&'a ProgramValueId>,
    /// Value → producing node (outputs of every node).
    pub producers: IdMap<&'a ProgramValueId, &'a NodeId>,
    /// Value → greatest node index that lists it as an input.
    pub last_consumers: IdMap<&'a ProgramValueId, usize>,
    /// Node ids by execution index.
    pub node_ids: Vec<&'a NodeId>,
    /// Each catalog operation's fingerprint, computed once (every node of an operation
    /// records it, and its estimator input hashes it).
    pub operation_fingerprints: IdMap<&'a OperationId, Sha256Hex>,
}

impl<'a> NodePlanContext<'a> {
    /// Indexes the program (rules 2.1 step 9) and fingerprints the catalog's operations.
    pub fn new(
        catalog: &'a CapabilityCatalog,
        program: &'a ModelProgram,
        policy: &'a RuntimePolicy,
        execution_schema: &'a WeightSchema,
        family_fingerprint: &'a Sha256Hex,
    ) -> Result<Self, CanonicalError> {
        let operation_fingerprints = catalog
            .operations
            .iter()
            .map(|(id, operation)| Ok((id, operation_fingerprint(operation)?)))
            .collect::<Result<_, CanonicalError>>()?;
        let mut producers = IdMap::default();
        let mut last_consumers = IdMap::default();
        let mut node_ids = Vec::new();
        for (index, node) in program.nodes().enumerate() {
            node_ids.push(&node.id);
            for output in &node.outputs {
                producers.insert(output, &node.id);
            }
            for input in &node.inputs {
                last_consumers.insert(input, index);
            }
        }
        let classes = ValueClasses::new(program);
        let state_values = classes.state_values();
        Ok(Self {
            catalog,
            program,
            policy,
            execution_schema,
            family_fingerprint,
            classes,
            state_values,
            producers,
            last_consumers,
            node_ids,
            operation_fingerprints,
        })
    }
}

/// What is carried from node to node: bound values (cross-node consistency, coverage) and
/// the state hazard tracker.
#[derive(Default)]
pub(crate) struct NodeBuildState<'a> {
    /// Every value bound so far.
    pub bound: BoundValues<'a>,
    /// State read/write history.
    pub hazards: StateHazardTracker,
}

/// The joint solver's decision for one node.
pub(crate) struct NodeChoice<'a> {
    /// The chosen provider resource plan.
    pub resources: &'a ProviderResourcePlan,
    /// Storage rejection evidence for the preferred provider, if any.
    pub storage_rejection: Option<&'a RejectedProvider>,
}

/// Where a node's own checks stopped, in the order [`build_nodes`] runs them.
enum FailurePoint {
    /// A check before the node's bindings are recorded (signature, bindings, aliases,
    /// work, state effects).
    BeforeBindings,
    /// The semantic check of the binding at this index (the bindings before it are
    /// recorded first: their cross-node consistency is checked before this error).
    Binding(usize),
    /// A check after every binding is recorded (compatibility, selection, estimate).
    AfterBindings,
}

/// One node checked on its own: every check of rules 2.2 that reads nothing other nodes'
/// checks produce. What is left for the pass in program order is the cross-node
/// consistency of the values each node binds and the state hazard dependencies.
struct NodeDraft {
    /// The node as planned, but its `dependencies` (empty here).
    node: Result<PlanNode, (FailurePoint, NodeError)>,
    /// The producers of the node's inputs (its dependencies before the state hazards).
    producer_dependencies: BTreeSet<NodeId>,
}

/// Checks every node (rules 2.2, step 10 of rules 2.1) and builds its [`PlanNode`], in
/// program order: `pairs[i]` is node `i` with its resolution, `choices[i]` its decision.
///
/// Each node's own checks run in parallel ([`plan_node`]); then one pass in program order
/// records the values each node binds (their cross-node consistency) and its state
/// effects (the hazard dependencies). The error is the one the checks would give run one
/// node after another: the first failing node in program order, and within it the first
/// failing check in the reference order.
pub(crate) fn build_nodes<'a>(
    ctx: &NodePlanContext<'_>,
    state: &mut NodeBuildState<'a>,
    pairs: &[(&'a ProgramNode, &'a NodeResolution)],
    choices: &[NodeChoice<'_>],
) -> Result<Vec<PlanNode>, NodeError> {
    use rayon::prelude::*;
    let drafts: Vec<NodeDraft> = pairs
        .par_iter()
        .zip(choices.par_iter())
        .enumerate()
        .map(|(index, (&(node, resolution), choice))| NodeDraft {
            node: plan_node(ctx, index, node, resolution, choice),
            producer_dependencies: node
                .inputs
                .iter()
                .filter_map(|v| ctx.producers.get(v).map(|n| (*n).clone()))
                .collect(),
        })
        .collect();
    let mut nodes = Vec::with_capacity(drafts.len());
    for (&(node, resolution), draft) in pairs.iter().zip(drafts) {
        nodes.push(finish_node(state, node, resolution, draft)?);
    }
    Ok(nodes)
}

/// The checks of one node that need other nodes' results, run in program order after its
/// own: the bound values' cross-node consistency, then the node's own first failure, then
/// the state hazard dependencies.
fn finish_node<'a>(
    state: &mut NodeBuildState<'a>,
    node: &'a ProgramNode,
    resolution: &'a NodeResolution,
    draft: NodeDraft,
) -> Result<PlanNode, NodeError> {
    let values = &resolution.values;
    let recorded = match &draft.node {
        Ok(_) | Err((FailurePoint::AfterBindings, _)) => values.len(),
        Err((FailurePoint::Binding(index), _)) => *index,
        Err((FailurePoint::BeforeBindings, _)) => 0,
    };
    for binding in &values[..recorded] {
        state.bound.record(&node.id, binding)?;
    }
    let mut planned = draft.node.map_err(|(_, error)| error)?;
    let mut dependencies = draft.producer_dependencies;
    dependencies.extend(state.hazards.record(&node.id, &planned.state_effects));
    dependencies.remove(&node.id);
    planned.dependencies = dependencies.into_iter().collect();
    Ok(planned)
}

/// Checks node `index` on its own (rules 2.2) and builds its [`PlanNode`], dependencies
/// left empty; a failure says where in the reference order it stopped.
fn plan_node(
    ctx: &NodePlanContext<'_>,
    index: usize,
    node: &ProgramNode,
    resolution: &NodeResolution,
    choice: &NodeChoice<'_>,
) -> Result<PlanNode, (FailurePoint, NodeError)> {
    let before = |error| (FailurePoint::BeforeBindings, error);
    let after = |error| (FailurePoint::AfterBindings, error);
    let id = &node.id;
    let Some(operation) = ctx.catalog.operations.get(&node.operation_id) else {
        return Err(before(NodeError::UnknownOperation {
            node: id.clone(),
            operation: node.operation_id.clone(),
        }));
    };
    if !operation.version.satisfies(node.required_version) {
        return Err(before(NodeError::IncompatibleOperationVersion {
            node: id.clone(),
            operation: operation.id.clone(),
            required: node.required_version,
            available: operation.version,
        }));
    }
    attributes::validate_attributes(id, operation, &node.attributes).map_err(before)?;
    let values = &resolution.values;
    bindings::validate_bindings(id, operation, values).map_err(before)?;
    if node.inputs.len() != operation.inputs.len() || node.outputs.len() != operation.outputs.len()
    {
        return Err(before(NodeError::SignatureMismatch {
            node: id.clone(),
            operation: operation.id.clone(),
            program_inputs: node.inputs.len(),
            program_outputs: node.outputs.len(),
            operation_inputs: operation.inputs.len(),
            operation_outputs: operation.outputs.len(),
        }));
    }
    let program_slots = node
        .inputs
        .iter()
        .enumerate()
        .map(|(i, v)| (ValueRole::Input, i, v))
        .chain(
            node.outputs
                .iter()
                .enumerate()
                .map(|(i, v)| (ValueRole::Output, i, v)),
        );
    for ((role, ordinal, expected), binding) in program_slots.zip(values) {
        if &binding.value_id != expected {
            return Err(before(NodeError::BindingMirror {
                node: id.clone(),
                role,
                ordinal: ordinal as u32,
                expected: expected.clone(),
                found: binding.value_id.clone(),
            }));
        }
    }
    let exact_aliases = extract_exact_aliases(id, values).map_err(before)?;
    let work = work::derive_work_contract(id, operation, &node.work, values).map_err(before)?;
    let liveness = AliasLiveness {
        state_values: &ctx.state_values,
        program_outputs: &ctx.classes.outputs,
        last_consumers: &ctx.last_consumers,
        node_ids: &ctx.node_ids,
    };
    check_alias_liveness(&liveness, index, id, &exact_aliases, values).map_err(before)?;
    let state_effects = derive_state_effects(id, &ctx.program.states, values).map_err(before)?;
    for (position, binding) in values.iter().enumerate() {
        check_semantic_binding(&ctx.classes, ctx.execution_schema, id, binding)
            .map_err(|error| (FailurePoint::Binding(position), error))?;
    }

    let mut required_capabilities = operation.provider.required_capabilities.clone();
    required_capabilities.extend(resolution.required_capabilities.iter().cloned());
    let (required_weight_formats, required_quantization_formats) = node_weight_requirements(values);
    let report = provider_compatibility(
        ctx.catalog,
        operation,
        CompatibilityRequest {
            operation_id: operation.id.clone(),
            required_version: node.required_version,
            required_capabilities,
            required_weight_formats,
            required_quantization_formats,
            execution_determinism: ctx.policy.execution_determinism,
        },
    );
    let selected = &choice.resources.provider_id;
    let selection = select_provider(
        ctx.catalog,
        id,
        operation,
        &report,
        resolution.preferred_provider.as_ref(),
        selected,
        choice.storage_rejection,
    )
    .map_err(after)?;
    let operation_fingerprint = match ctx.operation_fingerprints.get(&operation.id) {
        Some(fingerprint) => fingerprint.clone(),
        None => operation_fingerprint(operation).map_err(|e| after(e.into()))?,
    };
    let descriptor = verify_estimate(
        &EstimateContext {
            family_fingerprint: ctx.family_fingerprint,
            node,
            operation,
            operation_fingerprint: &operation_fingerprint,
            resolution,
        },
        ctx.catalog.providers.get(&operation.id).map(Vec::as_slice),
        selected,
        choice.resources,
    )
    .map_err(after)?;

    let estimate = &choice.resources.estimate_fingerprint;
    let workspace = |kind: WorkspaceKind| {
        choice
            .resources
            .workspace(kind)
            .map(|_| workspace_base_id(kind, id, estimate))
    };
    let scratch_resource = workspace(WorkspaceKind::Scratch);
    let binding_resource = workspace(WorkspaceKind::Binding);
    let persistent_resource = workspace(WorkspaceKind::Persistent);
    let mut resources: BTreeSet<ResourceId> = values
        .iter()
        .flat_map(|b| b.storage.components.iter().map(|c| c.resource_id.clone()))
        .collect();
    resources.extend(
        [&scratch_resource, &binding_resource, &persistent_resource]
            .into_iter()
            .flatten()
            .cloned(),
    );

    Ok(PlanNode {
        id: id.clone(),
        dependencies: Vec::new(),
        operation_id: operation.id.clone(),
        operation_version: node.required_version,
        operation_fingerprint,
        provider_implementation_fingerprint: descriptor.provider_implementation_fingerprint.clone(),
        provider_execution_semantics: descriptor.execution_semantics.clone(),
        required_capabilities: resolution.required_capabilities.clone(),
        attributes: node.attributes.clone(),
        work,
        selection,
        provider_resources: choice.resources.clone(),
        values: values.clone(),
        exact_aliases,
        state_effects,
        scratch_resource,
        binding_resource,
        persistent_resource,
        resources: resources.into_iter().collect(),
    })
}
