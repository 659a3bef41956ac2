//! Errors of plan building (docs/rules.md sections 2 and 3): one variant per rule, each naming
//! its culprit (node, value, resource, provider, operation) in the request's terms.

use crate::canonical::CanonicalError;
use crate::request::{
    BufferUsage, ContractVersion, ElementType, NodeId, OperationId, ProgramValueId, ProviderId,
    ResourceId, StateId, TensorAccess, ValueRole, WeightId,
};

/// Why a plan could not be built from a request.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    // ---- 2.1 top level -------------------------------------------------------------------
    /// The request breaks a load-time invariant.
    #[error(transparent)]
    Request(#[from] crate::request::validate::RequestError),
    /// The plan file would exceed the policy's wire limit on plan JSON bytes (the
    /// reference 16 MiB unless the policy's `wire_limits` raises it).
    #[error(
        "the plan JSON is {measured} bytes, over the wire limit maximum_plan_json_bytes = \
         {limit} (raise it with the policy's wire_limits)"
    )]
    PlanJsonTooLarge {
        /// Bytes of the plan file as written (pretty JSON and its final newline).
        measured: u64,
        /// The limit in force.
        limit: u64,
    },
    /// The memory plan could not be derived (a capacity failure, or inconsistent resources).
    #[error("memory plan: {0}")]
    Memory(#[from] crate::memory::MemoryError),
    /// The built plan failed its internal validation (docs/rules.md 6): a planner bug.
    #[error("internal validation of the built plan: {0}")]
    Internal(#[from] crate::plan::internal::InternalError),
    /// A fingerprint could not be computed.
    #[error(transparent)]
    Canonical(#[from] CanonicalError),
    /// The policy allows no active sequence.
    #[error("runtime policy {policy}: maximum_active_sequences is 0")]
    ZeroMaximumActiveSequences {
        /// The policy id.
        policy: String,
    },
    /// The policy schedules no token per step.
    #[error("runtime policy {policy}: maximum_scheduled_tokens is 0")]
    ZeroMaximumScheduledTokens {
        /// The policy id.
        policy: String,
    },
    /// The policy orders no storage profile.
    #[error("runtime policy {policy}: dynamic_storage_profile_order is empty")]
    EmptyProfileOrder {
        /// The policy id.
        policy: String,
    },
    /// The request has no node resolution.
    #[error("the request has no node resolutions")]
    NoNodeResolutions,
    /// The policy capacity is zero.
    #[error("runtime policy {policy}: memory_capacity_bytes is 0")]
    ZeroMemoryCapacity {
        /// The policy id.
        policy: String,
    },
    /// The policy capacity exceeds the device memory.
    #[error("runtime policy {policy} asks for {capacity} bytes, but device {device} has only {device_memory} bytes")]
    CapacityExceedsDevice {
        /// The policy id.
        policy: String,
        /// Policy capacity.
        capacity: u64,
        /// The device.
        device: String,
        /// Device memory.
        device_memory: u64,
    },
    /// The reserve leaves nothing to plan.
    #[error(
        "runtime policy {policy}: reserve {reserve} bytes is not below capacity {capacity} bytes"
    )]
    ReserveNotBelowCapacity {
        /// The policy id.
        policy: String,
        /// Reserve.
        reserve: u64,
        /// Capacity.
        capacity: u64,
    },
    /// The execution weight plan does not fit the family or the catalog.
    #[error("execution weights: {detail}")]
    ExecutionWeights {
        /// What is wrong, naming the materializer, component or weight.
        detail: String,
    },
    /// Two resolutions name the same node.
    #[error("node {node} has more than one resolution")]
    DuplicateResolution {
        /// The node.
        node: NodeId,
    },
    /// Resolutions name nodes the program does not have.
    #[error("resolutions for unknown nodes: {}", join(nodes))]
    UnknownResolutions {
        /// The nodes.
        nodes: Vec<NodeId>,
    },
    /// A program node has no resolution.
    #[error("program node {node} has no resolution")]
    MissingResolution {
        /// The node.
        node: NodeId,
    },

    // ---- 3 joint selection -----------------------------------------------------------------
    /// A resolution candidate names a provider the catalog row of the operation lacks.
    #[error(
        "node {node}: candidate provider {provider} is not registered for operation {operation}"
    )]
    CandidateProviderNotInCatalog {
        /// The node.
        node: NodeId,
        /// The provider.
        provider: ProviderId,
        /// The operation.
        operation: OperationId,
    },
    /// Every candidate of a node was dropped for storage reasons.
    #[error("node {node}: no provider candidate with an available storage profile: {}", explanations.join("; "))]
    NoStorageCandidate {
        /// The node.
        node: NodeId,
        /// Why each provider was dropped, in the input's terms.
        explanations: Vec<String>,
    },
    /// The solver failed.
    #[error("joint provider/storage selection: {detail}")]
    Selection {
        /// The solver's message, in the input's terms.
        detail: String,
        /// True when the problem is infeasible (exit 1), false for a malformed problem.
        infeasible: bool,
    },
    /// A limit kept the solver from proving components optimal, and uncertified
    /// selections were not allowed (exit 1: the plan is refused, the input is fine).
    #[error(
        "joint provider/storage selection is not proved optimal for {}; accept it with --allow-uncertified",
        components.join("; ")
    )]
    Uncertified {
        /// Each uncertified component: its first node and why it is not certified.
        components: Vec<String>,
    },
    /// The solver's solution leaves a node without a provider.
    #[error("joint solver omitted program node {node}")]
    SolverOmittedNode {
        /// The node.
        node: NodeId,
    },
    /// The solver's solution assigns a node twice or names an unknown node.
    #[error("joint solver assigned node {node} inconsistently: {detail}")]
    SolverBadAssignment {
        /// The node.
        node: String,
        /// What is wrong.
        detail: String,
    },
    /// The solver's solution profiles a resource twice, names an unknown one, or misses one.
    #[error("joint solver profiled resource {resource} inconsistently: {detail}")]
    SolverBadProfile {
        /// The resource.
        resource: String,
        /// What is wrong.
        detail: String,
    },
    /// The preferred provider was not chosen, but no resource explains why.
    #[error(
        "node {node}: preferred provider {provider} was not selected without a storage conflict"
    )]
    PreferredLostWithoutConflict {
        /// The node.
        node: NodeId,
        /// The preferred provider.
        provider: ProviderId,
    },

    // ---- 2.2 build_node ----------------------------------------------------------------------
    /// The node's operation is not in the catalog.
    #[error("node {node}: operation {operation} is not in the capability catalog")]
    UnknownOperation {
        /// The node.
        node: NodeId,
        /// The operation.
        operation: OperationId,
    },
    /// The catalog's operation version does not satisfy the node.
    #[error("node {node} requires operation {operation} version {required}, but {available} is available")]
    IncompatibleOperationVersion {
        /// The node.
        node: NodeId,
        /// The operation.
        operation: OperationId,
        /// Version the node requires.
        required: ContractVersion,
        /// Version available.
        available: ContractVersion,
    },
    /// A node attribute is not in the operation's schema.
    #[error("node {node}: attribute {attribute} is not in the schema of operation {operation}")]
    UnknownAttribute {
        /// The node.
        node: NodeId,
        /// The operation.
        operation: OperationId,
        /// The attribute.
        attribute: String,
    },
    /// A required attribute is missing.
    #[error("node {node}: required attribute {attribute} of operation {operation} is missing")]
    MissingAttribute {
        /// The node.
        node: NodeId,
        /// The operation.
        operation: OperationId,
        /// The attribute.
        attribute: String,
    },
    /// An attribute value has the wrong kind or breaks its constraint.
    #[error("node {node}: attribute {attribute}: {detail}")]
    AttributeValue {
        /// The node.
        node: NodeId,
        /// The attribute.
        attribute: String,
        /// What is wrong.
        detail: String,
    },

    // ---- 2.3 binding contracts ------------------------------------------------------------
    /// The node has the wrong number of bindings.
    #[error("node {node}: operation {operation} has {expected} tensor slots, but the resolution binds {found}")]
    BindingCount {
        /// The node.
        node: NodeId,
        /// The operation.
        operation: OperationId,
        /// Inputs + outputs of the operation.
        expected: usize,
        /// Bindings.
        found: usize,
    },
    /// A binding is not at the position its index implies.
    #[error("node {node}: binding {index} (value {value}) is at {found_role:?} {found_ordinal}, expected {expected_role:?} {expected_ordinal}")]
    BindingPosition {
        /// The node.
        node: NodeId,
        /// Index in the resolution's values.
        index: usize,
        /// The value.
        value: ProgramValueId,
        /// Expected role.
        expected_role: ValueRole,
        /// Expected ordinal.
        expected_ordinal: u32,
        /// Found role.
        found_role: ValueRole,
        /// Found ordinal.
        found_ordinal: u32,
    },
    /// Two bindings claim the same slot.
    #[error("node {node}: two bindings claim {role:?} slot {ordinal}")]
    DuplicateBindingPosition {
        /// The node.
        node: NodeId,
        /// Role.
        role: ValueRole,
        /// Ordinal.
        ordinal: u32,
    },
    /// A value repeats where it may not.
    #[error("node {node}: value {value} is bound at {first_role:?} {first_ordinal} and {second_role:?} {second_ordinal}; a value may repeat only across read input slots with identical tensor, storage and usage")]
    RepeatedValue {
        /// The node.
        node: NodeId,
        /// The value.
        value: ProgramValueId,
        /// First slot role.
        first_role: ValueRole,
        /// First slot ordinal.
        first_ordinal: u32,
        /// Second slot role.
        second_role: ValueRole,
        /// Second slot ordinal.
        second_ordinal: u32,
    },
    /// A binding's access differs from its slot contract.
    #[error("node {node}: value {value} at {role:?} {ordinal} has access {found:?}, but operation {operation} declares {expected:?}")]
    BindingAccess {
        /// The node.
        node: NodeId,
        /// The operation.
        operation: OperationId,
        /// The value.
        value: ProgramValueId,
        /// Role.
        role: ValueRole,
        /// Ordinal.
        ordinal: u32,
        /// The contract's access.
        expected: TensorAccess,
        /// The binding's access.
        found: TensorAccess,
    },
    /// A binding's alias policy differs from its slot contract.
    #[error("node {node}: value {value} at {role:?} {ordinal} has alias policy {found}, but operation {operation} declares {expected}")]
    BindingAlias {
        /// The node.
        node: NodeId,
        /// The operation.
        operation: OperationId,
        /// The value.
        value: ProgramValueId,
        /// Role.
        role: ValueRole,
        /// Ordinal.
        ordinal: u32,
        /// The contract's policy.
        expected: String,
        /// The binding's policy.
        found: String,
    },
    /// A binding's rank differs from its slot contract.
    #[error("node {node}: value {value} at {role:?} {ordinal} has rank {found}, but operation {operation} declares rank {expected}")]
    BindingRank {
        /// The node.
        node: NodeId,
        /// The operation.
        operation: OperationId,
        /// The value.
        value: ProgramValueId,
        /// Role.
        role: ValueRole,
        /// Ordinal.
        ordinal: u32,
        /// Contract rank.
        expected: usize,
        /// Tensor rank.
        found: usize,
    },
    /// A binding's element type is not accepted by its slot.
    #[error("node {node}: value {value} at {role:?} {ordinal} is {found:?}, but operation {operation} accepts only {accepted:?}")]
    BindingElementType {
        /// The node.
        node: NodeId,
        /// The operation.
        operation: OperationId,
        /// The value.
        value: ProgramValueId,
        /// Role.
        role: ValueRole,
        /// Ordinal.
        ordinal: u32,
        /// Binding element type.
        found: ElementType,
        /// Accepted element types.
        accepted: Vec<ElementType>,
    },
    /// A dimension breaks an exact or range constraint.
    #[error("node {node}: value {value} at {role:?} {ordinal} axis {axis} has extent {extent}, but operation {operation} requires {constraint}")]
    BindingDimension {
        /// The node.
        node: NodeId,
        /// The operation.
        operation: OperationId,
        /// The value.
        value: ProgramValueId,
        /// Role.
        role: ValueRole,
        /// Ordinal.
        ordinal: u32,
        /// Axis.
        axis: usize,
        /// Extent.
        extent: u64,
        /// The constraint, in words.
        constraint: String,
    },
    /// A node-wide dimension symbol is bound to two extents.
    #[error("node {node}: dimension symbol {symbol} is {first_extent} at value {first_value}, but {extent} at value {value} axis {axis}")]
    DimensionSymbolConflict {
        /// The node.
        node: NodeId,
        /// The symbol.
        symbol: String,
        /// The value that bound it first.
        first_value: ProgramValueId,
        /// Its extent there.
        first_extent: u64,
        /// The conflicting value.
        value: ProgramValueId,
        /// Axis.
        axis: usize,
        /// Conflicting extent.
        extent: u64,
    },
    /// A binding's layout matches no layout of its slot contract.
    #[error("node {node}: value {value} at {role:?} {ordinal} has a layout operation {operation} does not accept: {detail}")]
    BindingLayout {
        /// The node.
        node: NodeId,
        /// The operation.
        operation: OperationId,
        /// The value.
        value: ProgramValueId,
        /// Role.
        role: ValueRole,
        /// Ordinal.
        ordinal: u32,
        /// Why no layout matched.
        detail: String,
    },
    /// Two input bindings share bytes though they may not.
    #[error("node {node}: inputs {first} and {second} overlap in storage; inputs may overlap only for the same value read twice")]
    InputOverlap {
        /// The node.
        node: NodeId,
        /// First input value.
        first: ProgramValueId,
        /// Second input value.
        second: ProgramValueId,
    },
    /// An output overlaps an input it may not alias, or aliases it only partially.
    #[error("node {node}: output {output} (ordinal {output_ordinal}, {policy}) overlaps input {input} (ordinal {input_ordinal}) {detail}")]
    OutputInputOverlap {
        /// The node.
        node: NodeId,
        /// The output value.
        output: ProgramValueId,
        /// Its ordinal.
        output_ordinal: u32,
        /// The input value.
        input: ProgramValueId,
        /// Its ordinal.
        input_ordinal: u32,
        /// The output's alias policy.
        policy: String,
        /// Why that is not allowed.
        detail: String,
    },
    /// An output marked must_alias does not overlap its input.
    #[error("node {node}: output {output} (ordinal {output_ordinal}) lost its mandatory exact alias of input {input_ordinal}: its storage differs")]
    LostMandatoryAlias {
        /// The node.
        node: NodeId,
        /// The output value.
        output: ProgramValueId,
        /// Its ordinal.
        output_ordinal: u32,
        /// The input ordinal it must alias.
        input_ordinal: u32,
    },
    /// Two outputs share bytes.
    #[error("node {node}: outputs {first} and {second} overlap in storage")]
    OutputsOverlap {
        /// The node.
        node: NodeId,
        /// First output.
        first: ProgramValueId,
        /// Second output.
        second: ProgramValueId,
    },
    /// The bindings do not mirror the program node.
    #[error("node {node}: binding {role:?} {ordinal} is value {found}, but the program node has {expected} there")]
    BindingMirror {
        /// The node.
        node: NodeId,
        /// Role.
        role: ValueRole,
        /// Ordinal.
        ordinal: u32,
        /// The program's value.
        expected: ProgramValueId,
        /// The binding's value.
        found: ProgramValueId,
    },
    /// The binding counts do not mirror the program node.
    #[error("node {node}: the program node has {program_inputs} inputs and {program_outputs} outputs, the operation {operation} has {operation_inputs} and {operation_outputs}")]
    SignatureMismatch {
        /// The node.
        node: NodeId,
        /// The operation.
        operation: OperationId,
        /// Program node inputs.
        program_inputs: usize,
        /// Program node outputs.
        program_outputs: usize,
        /// Operation inputs.
        operation_inputs: usize,
        /// Operation outputs.
        operation_outputs: usize,
    },

    // ---- 2.4 aliases -----------------------------------------------------------------------
    /// An alias refers to an input slot with no binding.
    #[error(
        "node {node}: output {output} aliases input ordinal {input_ordinal}, which has no binding"
    )]
    AliasInputMissing {
        /// The node.
        node: NodeId,
        /// The output value.
        output: ProgramValueId,
        /// The input ordinal.
        input_ordinal: u32,
    },
    /// An output aliases a state.
    #[error("node {node}: output {output} aliases state {input} without a typed state transition")]
    AliasesState {
        /// The node.
        node: NodeId,
        /// The output.
        output: ProgramValueId,
        /// The state value.
        input: ProgramValueId,
    },
    /// An output aliases a non-activation input.
    #[error(
        "node {node}: output {output} aliases input {input}, which is {usage:?}, not activations"
    )]
    AliasInputNotActivations {
        /// The node.
        node: NodeId,
        /// The output.
        output: ProgramValueId,
        /// The input.
        input: ProgramValueId,
        /// The input's usage.
        usage: BufferUsage,
    },
    /// An output overwrites an input a later node still reads.
    #[error("node {node}: output {output} is stored in place of input {input}, but node {later_consumer} reads {input} later")]
    AliasInputStillLive {
        /// The node.
        node: NodeId,
        /// The output.
        output: ProgramValueId,
        /// The input.
        input: ProgramValueId,
        /// The later consumer.
        later_consumer: NodeId,
    },
    /// An output overwrites a program output.
    #[error("node {node}: output {output} is stored in place of input {input}, which is a program output")]
    AliasesProgramOutput {
        /// The node.
        node: NodeId,
        /// The output.
        output: ProgramValueId,
        /// The input.
        input: ProgramValueId,
    },
    /// A recorded exact alias does not match the node's bindings (stored plans).
    #[error("node {node}: exact alias of output {output}: {detail}")]
    AliasRecord {
        /// The node.
        node: NodeId,
        /// The output value.
        output: ProgramValueId,
        /// What is wrong.
        detail: String,
    },
    /// Two values share bytes without being exact aliases of each other.
    #[error("resource {resource}: value {first} (node {first_node}) and value {second} (node {second_node}) overlap; undeclared, partial, or non-equivalent overlap")]
    StorageOverlap {
        /// The resource.
        resource: ResourceId,
        /// First value (smaller id).
        first: ProgramValueId,
        /// A node binding it.
        first_node: NodeId,
        /// Second value.
        second: ProgramValueId,
        /// A node binding it.
        second_node: NodeId,
    },

    // ---- 2.5 work contract ---------------------------------------------------------------
    /// The token work spec names a value the node does not bind.
    #[error("node {node}: tokens work names value {value}, which the node does not bind")]
    WorkValueNotBound {
        /// The node.
        node: NodeId,
        /// The value.
        value: ProgramValueId,
    },
    /// The token axis is not a dimension symbol in the contract.
    #[error("node {node}: tokens work axis {axis} of value {value} is not a dimension symbol in operation {operation}")]
    WorkAxisNotSymbol {
        /// The node.
        node: NodeId,
        /// The operation.
        operation: OperationId,
        /// The value.
        value: ProgramValueId,
        /// The axis.
        axis: u32,
    },
    /// A token-carrying binding is not usable for tokens (not activations, or axis out of range).
    #[error(
        "node {node}: value {value} carries token symbol {symbol} on axis {axis} but {detail}"
    )]
    WorkProjection {
        /// The node.
        node: NodeId,
        /// The value.
        value: ProgramValueId,
        /// The token symbol.
        symbol: String,
        /// The axis.
        axis: u32,
        /// What is wrong.
        detail: String,
    },
    /// A binding carries the token symbol on two axes.
    #[error("node {node}: value {value} carries token symbol {symbol} on more than one axis")]
    WorkSymbolRepeated {
        /// The node.
        node: NodeId,
        /// The value.
        value: ProgramValueId,
        /// The symbol.
        symbol: String,
    },
    /// Token projections disagree on the token count.
    #[error("node {node}: value {value} has {extent} tokens on axis {axis}, but the work source {source_value} has {source_extent}")]
    TokenExtentMismatch {
        /// The node.
        node: NodeId,
        /// The value.
        value: ProgramValueId,
        /// Its axis.
        axis: u32,
        /// Its extent.
        extent: u64,
        /// The source value.
        source_value: ProgramValueId,
        /// The source extent.
        source_extent: u64,
    },

    // ---- 2.6 state effects -----------------------------------------------------------------
    /// A state binding has no storage component.
    #[error("node {node}: state {state} has no resource")]
    StateWithoutResources {
        /// The node.
        node: NodeId,
        /// The state.
        state: StateId,
    },

    // ---- 2.2 semantic bindings --------------------------------------------------------
    /// A binding has the wrong usage for its program value's class.
    #[error("node {node}: value {value} is a {class} and must be bound as {expected:?}, but is bound as {found:?}")]
    SemanticUsage {
        /// The node.
        node: NodeId,
        /// The value.
        value: ProgramValueId,
        /// Its class (weight, state, activation).
        class: &'static str,
        /// Expected usage.
        expected: BufferUsage,
        /// Found usage.
        found: BufferUsage,
    },
    /// A weight binding is not read-only.
    #[error(
        "node {node}: weight value {value} is bound with access {found:?}; weights are read only"
    )]
    WeightAccess {
        /// The node.
        node: NodeId,
        /// The value.
        value: ProgramValueId,
        /// The access.
        found: TensorAccess,
    },
    /// A binding's tensor differs from the program's tensor of the value.
    #[error("node {node}: value {value} is bound as {found}, but the program declares {expected}")]
    SemanticTensor {
        /// The node.
        node: NodeId,
        /// The value.
        value: ProgramValueId,
        /// The program's tensor.
        expected: String,
        /// The binding's tensor.
        found: String,
    },
    /// A weights-usage binding carries a weight that does not match the execution schema.
    #[error("node {node}: weight value {value}: {detail}")]
    SemanticWeight {
        /// The node.
        node: NodeId,
        /// The value.
        value: ProgramValueId,
        /// The weight.
        weight: Option<WeightId>,
        /// What differs.
        detail: String,
    },
    /// Two nodes bind one value differently.
    #[error("value {value}: node {node} binds it with {what} differing from node {first_node}")]
    CrossNodeInconsistency {
        /// The value.
        value: ProgramValueId,
        /// The node that bound it first.
        first_node: NodeId,
        /// The node that differs.
        node: NodeId,
        /// Which of tensor, usage, storage differs, with both sides.
        what: String,
    },
    /// A program input, weight, state or output is bound by no node.
    #[error("{class} {value} is bound by no node")]
    UncoveredValue {
        /// The value class.
        class: &'static str,
        /// The value.
        value: ProgramValueId,
    },

    // ---- 1.4 / 2.7 compatibility and selection ----------------------------------------
    /// No provider of the node's operation is compatible.
    #[error("node {node}: no provider of operation {operation} is compatible: {rejections}")]
    UnsupportedOperation {
        /// The node.
        node: NodeId,
        /// The operation.
        operation: OperationId,
        /// Summary of the rejections (JSON).
        rejections: String,
    },
    /// The joint solver chose an incompatible provider.
    #[error("node {node}: selected incompatible provider {provider}: {reasons}")]
    SelectedIncompatibleProvider {
        /// The node.
        node: NodeId,
        /// The provider.
        provider: ProviderId,
        /// Why it is incompatible (JSON).
        reasons: String,
    },
    /// A provider has both compatibility and storage rejection evidence.
    #[error("node {node}: duplicate compatibility and storage rejection evidence for provider {provider}")]
    DuplicateRejectionEvidence {
        /// The node.
        node: NodeId,
        /// The provider.
        provider: ProviderId,
    },
    /// The node fell back from its preferred provider without evidence.
    #[error("node {node}: fallback from preferred provider {preferred} to {selected} lacks typed rejection evidence")]
    FallbackLacksEvidence {
        /// The node.
        node: NodeId,
        /// The preferred provider.
        preferred: ProviderId,
        /// The selected provider.
        selected: ProviderId,
    },

    // ---- 2.2 estimate verification -------------------------------------------------
    /// The chosen estimate is malformed.
    #[error("node {node}: estimate of provider {provider}: {detail}")]
    EstimateShape {
        /// The node.
        node: NodeId,
        /// The provider.
        provider: ProviderId,
        /// What is wrong.
        detail: String,
    },
    /// The chosen estimate belongs to another provider than the selected one.
    #[error("node {node}: the chosen estimate is for provider {estimate_provider}, but {selected} is selected")]
    EstimateProviderMismatch {
        /// The node.
        node: NodeId,
        /// The estimate's provider.
        estimate_provider: ProviderId,
        /// The selected provider.
        selected: ProviderId,
    },
    /// The selected provider is not in the operation's catalog row.
    #[error(
        "node {node}: selected provider {provider} is not registered for operation {operation}"
    )]
    SelectedProviderNotRegistered {
        /// The node.
        node: NodeId,
        /// The provider.
        provider: ProviderId,
        /// The operation.
        operation: OperationId,
    },
    /// The estimate's estimator differs from the catalog's.
    #[error("node {node}: provider {provider}'s estimate comes from estimator {found}, but the catalog registers {expected}")]
    EstimatorIdentityMismatch {
        /// The node.
        node: NodeId,
        /// The provider.
        provider: ProviderId,
        /// The catalog's estimator (id, version, fingerprint).
        expected: String,
        /// The estimate's estimator.
        found: String,
    },
    /// The value alignment is below or not a multiple of the operation's minimum.
    #[error("node {node}: provider {provider} aligns values to {alignment} bytes, but operation {operation} requires a multiple of {minimum}")]
    ValueAlignment {
        /// The node.
        node: NodeId,
        /// The provider.
        provider: ProviderId,
        /// The operation.
        operation: OperationId,
        /// The estimate's alignment.
        alignment: u64,
        /// The operation's minimum.
        minimum: u64,
    },
    /// A workspace is present (or absent) against the operation's presence rule.
    #[error("node {node}: provider {provider} {} a {kind} workspace, but operation {operation} declares it {presence}", if *present { "requests" } else { "does not request" })]
    WorkspacePresence {
        /// The node.
        node: NodeId,
        /// The provider.
        provider: ProviderId,
        /// The operation.
        operation: OperationId,
        /// The workspace kind.
        kind: &'static str,
        /// Whether the estimate has it.
        present: bool,
        /// The operation's rule.
        presence: &'static str,
    },
    /// The estimate was computed for other inputs.
    #[error("node {node}: provider {provider}'s estimate was made for estimator input {found}, but this node's input fingerprint is {expected}")]
    EstimatorInputMismatch {
        /// The node.
        node: NodeId,
        /// The provider.
        provider: ProviderId,
        /// Recomputed fingerprint.
        expected: String,
        /// The estimate's fingerprint.
        found: String,
    },

    // ---- 2.1 steps 14-16 ---------------------------------------------------------------
    /// A retained value is not a node output.
    #[error("retained value {value} is not the output of any node")]
    RetainedNotProduced {
        /// The value.
        value: ProgramValueId,
    },
    /// A retained value is not an activation with one storage component.
    #[error("retained value {value} (node {node}): {detail}")]
    RetainedShape {
        /// The value.
        value: ProgramValueId,
        /// Its producer.
        node: NodeId,
        /// What is wrong.
        detail: String,
    },
    /// A retained value is overwritten before completion.
    #[error("retained value {value} (resource {resource}) is overwritten by value {writer_value} of node {writer}")]
    RetainedOverwritten {
        /// The value.
        value: ProgramValueId,
        /// Its resource.
        resource: ResourceId,
        /// The writing node.
        writer: NodeId,
        /// The value it writes.
        writer_value: ProgramValueId,
    },
    /// No program output has a resource.
    #[error("no program output has a storage resource")]
    NoTerminalOutputResources,
    /// Byte arithmetic overflowed.
    #[error("{what}: byte arithmetic overflows u64")]
    Overflow {
        /// Where.
        what: String,
    },
}

fn join<T: std::fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl PlanError {
    /// The process exit status: 1 when the request is well formed but no plan fits it (the
    /// selection is infeasible, no provider is compatible, capacity is exceeded), 2 for bad
    /// input (malformed or inconsistent requests).
    pub fn exit_code(&self) -> u8 {
        match self {
            PlanError::NoStorageCandidate { .. } | PlanError::UnsupportedOperation { .. } => 1,
            PlanError::Memory(
                crate::memory::MemoryError::CapacityExceeded { .. }
                | crate::memory::MemoryError::StaticExceedsUsable { .. }
                | crate::memory::MemoryError::PoolExceedsDynamicCapacity { .. },
            ) => 1,
            PlanError::Selection {
                infeasible: true, ..
            } => 1,
            PlanError::Uncertified { .. }
            | PlanError::PlanJsonTooLarge { .. }
            | PlanError::Memory(crate::memory::MemoryError::TooManyRows { .. }) => 1,
            _ => 2,
        }
    }
}
