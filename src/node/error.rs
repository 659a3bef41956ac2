//! Errors of the per-node rules (rules 2.2-2.7): one variant per rule, each naming its
//! culprit (node, value, resource, provider, operation) in the request's terms.

use crate::canonical::CanonicalError;
use crate::request::{
    BufferUsage, ContractVersion, ElementType, NodeId, OperationId, ProgramValueId, ProviderId,
    ResourceId, StateId, TensorAccess, ValueRole, WeightId,
};

/// Why a node breaks a per-node rule of plan building.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// A fingerprint could not be computed.
    #[error(transparent)]
    Canonical(#[from] CanonicalError),

    // ---- 2.2 build_nodes ---------------------------------------------------------------------
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
    /// Byte arithmetic overflowed.
    #[error("{what}: byte arithmetic overflows u64")]
    Overflow {
        /// Where.
        what: String,
    },
}

pub(crate) fn join<T: std::fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl NodeError {
    /// The kind of failure: [`ErrorKind::Infeasible`](crate::error_kind::ErrorKind::Infeasible) when no
    /// provider of the catalog is compatible with a node, otherwise
    /// [`ErrorKind::BadInput`](crate::error_kind::ErrorKind::BadInput).
    pub fn kind(&self) -> crate::error_kind::ErrorKind {
        match self {
            NodeError::UnsupportedOperation { .. } => crate::error_kind::ErrorKind::Infeasible,
            _ => crate::error_kind::ErrorKind::BadInput,
        }
    }
}
