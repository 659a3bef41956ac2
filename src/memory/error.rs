//! Every way a memory plan can fail to derive or validate (rules 4), each naming
//! its culprit in the input's terms.

use crate::canonical::CanonicalError;
use crate::request::{
    BufferUsage, NodeId, ProgramValueId, ResourceId, StateId, WorkspaceKind, WorkspaceScope,
};

use super::AllocationLifetime;

/// One large contributor to a capacity failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Contributor {
    /// The resource.
    pub resource_id: ResourceId,
    /// Static or dynamic, and its usage.
    pub what: String,
    /// Its bytes (static size, or minimum request bytes of a dynamic resource).
    pub bytes: u64,
}

impl std::fmt::Display for Contributor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}, {} bytes)",
            self.resource_id, self.what, self.bytes
        )
    }
}

fn list(contributors: &[Contributor]) -> String {
    contributors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why a memory plan cannot be derived, or why a stored one is invalid.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    // ---- capacities and policy (4.4, 4.8) ----
    /// The device reports no memory.
    #[error("device capacity is zero")]
    ZeroDeviceCapacity,
    /// The policy capacity is zero or exceeds the device.
    #[error("policy capacity {policy} bytes must be in 1..={device} (the device capacity)")]
    PolicyCapacityOutOfRange {
        /// Policy capacity.
        policy: u64,
        /// Device capacity.
        device: u64,
    },
    /// The reserve is not below the policy capacity.
    #[error("reserve {reserve} bytes is not below the policy capacity {capacity} bytes")]
    ReserveNotBelowCapacity {
        /// Reserve.
        reserve: u64,
        /// Policy capacity.
        capacity: u64,
    },
    /// The policy allows no active sequence.
    #[error("maximum active sequences is zero")]
    ZeroMaximumActiveSequences,
    /// The plan has more resource rows than the wire format allows.
    #[error("memory plan has {rows} {what}, over the wire limit maximum_resource_rows = {limit}")]
    TooManyRows {
        /// Which rows.
        what: &'static str,
        /// How many.
        rows: usize,
        /// The limit.
        limit: usize,
    },
    /// A plan has no nodes.
    #[error("the plan has no nodes")]
    NoNodes,

    // ---- node graph ----
    /// Two nodes share an id.
    #[error("node {node} appears twice")]
    DuplicateNode {
        /// The node.
        node: NodeId,
    },
    /// A dependency is not an earlier node.
    #[error("node {node} depends on {dependency}, which is not an earlier node")]
    DependencyNotEarlier {
        /// The node.
        node: NodeId,
        /// The dependency.
        dependency: NodeId,
    },

    // ---- value resources (4.1) ----
    /// A node's value alignment is not a power of two.
    #[error("node {node} declares value alignment {alignment}, not a non-zero power of two")]
    InvalidValueAlignment {
        /// The node.
        node: NodeId,
        /// The alignment.
        alignment: u64,
    },
    /// A component offset is not a multiple of the node's value alignment.
    #[error(
        "node {node} places value {value} at offset {offset} of resource {resource}, not a \
         multiple of the provider's value alignment {alignment}"
    )]
    MisalignedComponent {
        /// The node.
        node: NodeId,
        /// The value.
        value: ProgramValueId,
        /// The resource.
        resource: ResourceId,
        /// The offset.
        offset: u64,
        /// The alignment.
        alignment: u64,
    },
    /// offset + length overflows.
    #[error("node {node} places value {value} on resource {resource} past u64::MAX bytes")]
    ComponentEndOverflow {
        /// The node.
        node: NodeId,
        /// The value.
        value: ProgramValueId,
        /// The resource.
        resource: ResourceId,
    },
    /// A token-projected binding does not start at offset 0.
    #[error(
        "node {node} projects value {value} onto the token axis but places it at offset \
         {offset} of resource {resource} (token-scaled bindings start at 0)"
    )]
    ProjectedComponentOffset {
        /// The node.
        node: NodeId,
        /// The value.
        value: ProgramValueId,
        /// The resource.
        resource: ResourceId,
        /// The offset.
        offset: u64,
    },
    /// A token-projected binding's length is not a whole number of tokens.
    #[error(
        "node {node} binds value {value} with {length} bytes on resource {resource}, not \
         divisible by its {extent} tokens"
    )]
    ProjectedLengthNotDivisible {
        /// The node.
        node: NodeId,
        /// The value.
        value: ProgramValueId,
        /// The resource.
        resource: ResourceId,
        /// Component length.
        length: u64,
        /// Token extent.
        extent: u64,
    },
    /// A token projection has zero bytes per token or zero tokens.
    #[error("node {node} projects value {value} with {bytes_per_token} bytes per token over {extent} tokens")]
    ZeroTokenProjection {
        /// The node.
        node: NodeId,
        /// The value.
        value: ProgramValueId,
        /// Bytes per token.
        bytes_per_token: u64,
        /// Token extent.
        extent: u64,
    },
    /// A state's capacity demand does not fit its tensor.
    #[error("state {state} (value {value}): {reason}")]
    InvalidStateDemand {
        /// The state.
        state: StateId,
        /// Its value.
        value: ProgramValueId,
        /// Why.
        reason: String,
    },
    /// A token-scaled state's bytes per token are below the bytes bound on its resource.
    #[error(
        "state {state}: node {node} binds it up to byte {end} of resource {resource}, beyond its \
         {bytes_per_token} bytes per token"
    )]
    StateBytesPerTokenBelowEnd {
        /// The node.
        node: NodeId,
        /// The state.
        state: StateId,
        /// The resource.
        resource: ResourceId,
        /// Bytes per token.
        bytes_per_token: u64,
        /// End offset of the binding.
        end: u64,
    },
    /// A value that is neither a weight nor a state is not bound as activations.
    #[error(
        "node {node} binds value {value} as {usage:?}, but a value that is neither a weight nor \
         a state must be bound as activations"
    )]
    NonActivationValue {
        /// The node.
        node: NodeId,
        /// The value.
        value: ProgramValueId,
        /// Its usage.
        usage: BufferUsage,
    },
    /// Two touches of one resource disagree.
    #[error(
        "resource {resource}: node {first_node} uses it as {first}, but node {node} uses it as \
         {second} (conflicting usage, dtype, lifetime, or demand)"
    )]
    ConflictingResourceUse {
        /// The resource.
        resource: ResourceId,
        /// The node of the first touch.
        first_node: NodeId,
        /// The node of the conflicting touch.
        node: NodeId,
        /// The first touch.
        first: Box<str>,
        /// The conflicting touch.
        second: Box<str>,
    },

    // ---- workspaces (4.2) ----
    /// A workspace resource without an estimate, or an estimate without its resource.
    #[error(
        "node {node}: {kind:?} workspace resource is {resource_state} but the selected \
         estimate {estimate_state} a {kind:?} workspace"
    )]
    WorkspacePresenceMismatch {
        /// The node.
        node: NodeId,
        /// The workspace kind.
        kind: WorkspaceKind,
        /// "present" or "absent".
        resource_state: &'static str,
        /// "has" or "has no".
        estimate_state: &'static str,
    },
    /// A scratch or binding workspace is not invocation scoped.
    #[error("node {node}: {kind:?} workspace has scope {scope:?}; it must be invocation")]
    InvocationWorkspaceScope {
        /// The node.
        node: NodeId,
        /// The kind.
        kind: WorkspaceKind,
        /// Its scope.
        scope: WorkspaceScope,
    },
    /// A persistent workspace is invocation scoped.
    #[error("node {node}: persistent workspace cannot have invocation scope")]
    PersistentInvocationScope {
        /// The node.
        node: NodeId,
    },
    /// A plan-scope persistent workspace has a non-fixed formula.
    #[error("node {node}: plan-scope persistent workspace needs a fixed size formula")]
    PlanScopeNeedsFixedFormula {
        /// The node.
        node: NodeId,
    },
    /// A workspace alignment is not a power of two.
    #[error(
        "node {node}: {kind:?} workspace alignment {alignment} is not a non-zero power of two"
    )]
    InvalidWorkspaceAlignment {
        /// The node.
        node: NodeId,
        /// The kind.
        kind: WorkspaceKind,
        /// The alignment.
        alignment: u64,
    },
    /// Joint selection chose no profile for a dynamic resource.
    #[error("resource {resource} (first used by node {node}) has no selected storage profile")]
    MissingSelectedProfile {
        /// The resource.
        resource: ResourceId,
        /// A node that uses it.
        node: NodeId,
    },
    /// One resource id names two different resources.
    #[error("resource {resource} is both {first} and {second}")]
    DuplicateResource {
        /// The resource.
        resource: ResourceId,
        /// What it first was.
        first: String,
        /// What it also is.
        second: String,
    },

    // ---- allocations and descriptors (1.9, 4.3, 4.8) ----
    /// A demand is malformed.
    #[error("resource {resource}: invalid demand: {reason}")]
    InvalidDemand {
        /// The resource.
        resource: ResourceId,
        /// Why.
        reason: String,
    },
    /// A demand cannot be evaluated at a shape.
    #[error("resource {resource}: demand cannot be evaluated at {shape}: {reason}")]
    DemandEvaluation {
        /// The resource.
        resource: ResourceId,
        /// The shape.
        shape: String,
        /// Why.
        reason: String,
    },
    /// A descriptor's kind, usage, lifetime, element type or initialization disagree.
    #[error("dynamic resource {resource}: {reason}")]
    InconsistentDescriptor {
        /// The resource.
        resource: ResourceId,
        /// Why.
        reason: String,
    },
    /// A static allocation breaks a rule.
    #[error("static allocation {resource}: {reason}")]
    InvalidStaticAllocation {
        /// The resource.
        resource: ResourceId,
        /// Why.
        reason: String,
    },
    /// A resource alignment is not a power of two.
    #[error("resource {resource}: alignment {alignment} is not a non-zero power of two")]
    InvalidResourceAlignment {
        /// The resource.
        resource: ResourceId,
        /// The alignment.
        alignment: u64,
    },
    /// A storage profile is illegal.
    #[error("resource {resource}: storage profile {profile}: {reason}")]
    IllegalProfile {
        /// The resource.
        resource: ResourceId,
        /// The profile.
        profile: String,
        /// Why.
        reason: String,
    },
    /// Byte arithmetic overflowed.
    #[error("byte arithmetic overflows: {context}")]
    Overflow {
        /// What was being computed.
        context: String,
    },
    /// Rows are not strictly sorted (or repeat an id).
    #[error("{table} rows are not strictly sorted: {id} follows {previous}")]
    UnsortedRows {
        /// Which table.
        table: &'static str,
        /// The previous id.
        previous: String,
        /// The offending id.
        id: String,
    },
    /// A resource is both a static allocation and a dynamic descriptor.
    #[error("resource {resource} is both a static allocation and a dynamic descriptor")]
    StaticAndDynamic {
        /// The resource.
        resource: ResourceId,
    },
    /// A descriptor's evidence instance count differs from the sequence ceiling.
    #[error(
        "dynamic resource {resource}: theoretical_maximum_instances {stored} must equal the \
         maximum active sequences {expected}"
    )]
    InstancesMismatch {
        /// The resource.
        resource: ResourceId,
        /// Stored.
        stored: u32,
        /// Expected.
        expected: u32,
    },

    // ---- retention (1.9, 4.4) ----
    /// A retained resource is not a dynamic descriptor.
    #[error("retained resource {resource} is not a dynamic resource of the memory plan")]
    RetainedResourceNotDynamic {
        /// The resource.
        resource: ResourceId,
    },
    /// A retained resource is not a step or request activation.
    #[error(
        "retained resource {resource} is {usage:?} with {lifetime:?} lifetime; retained \
         resources must be activations with step or request lifetime"
    )]
    RetainedResourceClass {
        /// The resource.
        resource: ResourceId,
        /// Its usage.
        usage: BufferUsage,
        /// Its lifetime.
        lifetime: AllocationLifetime,
    },

    // ---- pools (4.5) ----
    /// A descriptor names a pool other than its key's.
    #[error("dynamic resource {resource} names pool {stored}, but its compatibility key gives {derived}")]
    PoolIdMismatch {
        /// The resource.
        resource: ResourceId,
        /// Stored pool id.
        stored: String,
        /// Derived pool id.
        derived: String,
    },
    /// Two different keys hash to one pool id.
    #[error("pool {pool} is derived from two different compatibility keys")]
    PoolIdCollision {
        /// The pool.
        pool: String,
    },
    /// A step resource is used by no node.
    #[error("step resource {resource} of pool {pool} is used by no node")]
    StepResourceWithoutUsers {
        /// The pool.
        pool: String,
        /// The resource.
        resource: ResourceId,
    },
    /// An invocation resource is used by no node.
    #[error("invocation resource {resource} of pool {pool} is used by no node")]
    InvocationResourceWithoutUsers {
        /// The pool.
        pool: String,
        /// The resource.
        resource: ResourceId,
    },
    /// A pool needs no resident bytes.
    #[error("pool {pool} needs zero resident bytes")]
    EmptyPoolResidency {
        /// The pool.
        pool: String,
    },
    /// A pool alone does not fit the dynamic capacity.
    #[error(
        "pool {pool} ({profile}, {usage:?}) needs at least {minimum_resident} resident bytes, \
         but at most {maximum_resident} fit (dynamic capacity {dynamic_capacity})"
    )]
    PoolExceedsDynamicCapacity {
        /// The pool.
        pool: String,
        /// Its profile.
        profile: String,
        /// Its usage.
        usage: BufferUsage,
        /// Minimum resident bytes.
        minimum_resident: u64,
        /// Maximum resident bytes.
        maximum_resident: u64,
        /// Dynamic capacity.
        dynamic_capacity: u64,
    },
    /// A reusable ceiling or budget names an unknown pool.
    #[error("reusable-execution budget names unknown pool {pool}")]
    UnknownCeilingPool {
        /// The pool.
        pool: String,
    },

    // ---- reusable execution (4.6) ----
    /// The reusable-execution policy is malformed.
    #[error("reusable-execution policy: {reason}")]
    InvalidReusablePolicy {
        /// Why.
        reason: String,
    },
    /// A bucket shape cannot be evaluated for a pool member.
    #[error("reusable bucket {bucket} (pool {pool}): resource {resource}: {reason}")]
    ReusableBucketShape {
        /// The bucket.
        bucket: String,
        /// The pool.
        pool: String,
        /// The resource.
        resource: ResourceId,
        /// Why.
        reason: String,
    },

    // ---- liveness (4.7) ----
    /// Too many invocation liveness references.
    #[error("invocation liveness has {count} resource references (at most {limit}, the larger of 65536 and the wire limit maximum_resource_rows: raise wire_limits.maximum_resource_rows)")]
    TooManyLivenessReferences {
        /// How many.
        count: usize,
        /// The limit.
        limit: usize,
    },

    // ---- capacity (4.4) ----
    /// Static allocations alone exceed the usable capacity.
    #[error(
        "static allocations require {static_bytes} bytes, exceeding usable capacity {usable} \
         bytes; largest: {}", list(.contributors)
    )]
    StaticExceedsUsable {
        /// Static bytes.
        static_bytes: u64,
        /// Usable capacity.
        usable: u64,
        /// The largest static allocations.
        contributors: Vec<Contributor>,
    },
    /// The minimum runnable plan does not fit.
    #[error(
        "minimum runnable plan requires {required} bytes (static {static_bytes} + dynamic \
         {dynamic_bytes}) exceeding usable capacity {usable}; largest contributors: {}",
        list(.contributors)
    )]
    CapacityExceeded {
        /// static + dynamic.
        required: u128,
        /// Static bytes.
        static_bytes: u64,
        /// Minimum runnable dynamic bytes.
        dynamic_bytes: u64,
        /// Usable capacity.
        usable: u64,
        /// The largest contributors.
        contributors: Vec<Contributor>,
    },

    // ---- stored plan against re-derivation (4.8) ----
    /// A stored aggregate differs from its re-derived value.
    #[error("memory plan field {field} is {stored} but re-derives to {derived}")]
    AggregateMismatch {
        /// The field.
        field: &'static str,
        /// Stored.
        stored: String,
        /// Derived.
        derived: String,
    },
    /// A stored pool differs from its re-derivation.
    #[error("pool {pool}: field {field} differs from its re-derivation")]
    PoolMismatch {
        /// The pool.
        pool: String,
        /// The field.
        field: &'static str,
    },
    /// The stored pool list differs from the re-derived one.
    #[error("stored pools {stored:?} differ from the re-derived pools {derived:?}")]
    PoolSetMismatch {
        /// Stored pool ids.
        stored: Vec<String>,
        /// Derived pool ids.
        derived: Vec<String>,
    },
    /// The stored reusable plan differs from its re-derivation.
    #[error("reusable-execution plan field {field} differs from its re-derivation")]
    ReusablePlanMismatch {
        /// The field.
        field: &'static str,
    },
    /// The stored global liveness differs from its re-derivation.
    #[error("global invocation liveness {field} differs from its re-derivation")]
    LivenessMismatch {
        /// The field.
        field: &'static str,
    },
    /// A fingerprint could not be computed.
    #[error(transparent)]
    Fingerprint(#[from] CanonicalError),
}

/// Shorthand for an overflow error.
pub(crate) fn overflow(context: impl Into<String>) -> MemoryError {
    MemoryError::Overflow {
        context: context.into(),
    }
}
