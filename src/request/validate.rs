//! Load-time validation of a plan request (rules 1.1-1.8).
//!
//! [`validate_request`] checks every invariant of the request that can be checked without
//! joint provider/storage selection or the cross-node rules of the build (rules 2):
//! program construction, weight schemas, the execution weight plan, the capability catalog,
//! the runtime policy, each node resolution on its own and the completion retention.
//!
//! Every failure is a [`RequestError`] that carries the JSON path of the culprit in the
//! request document (`node_resolutions[3].values[2].storage.components[0].offset_bytes`,
//! `catalog.providers["operation.rms_norm"][1].operation_fingerprint`) and a detail that
//! names it in the request's own terms (node, value, provider, resource ids). Checks run in
//! `O(n log n)` of the request size: every cross-reference goes through an index map built
//! once, so requests with tens of thousands of nodes validate quickly.

mod catalog;
mod policy;
mod program;
mod providers;
mod resolution;
mod weights;

use crate::canonical::CanonicalError;

use super::PlanRequest;

macro_rules! request_errors {
    ($( $(#[doc = $doc:literal])* $name:ident => $rule:literal, )*) => {
        /// A plan request that breaks a load-time invariant (rules 1.1-1.8).
        ///
        /// Each variant is one rule family; `path` is the JSON path of the culprit in the
        /// request document and `detail` says what is wrong in the request's own terms.
        #[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
        pub enum RequestError {
            $(
                $(#[doc = $doc])*
                #[error("{path}: {}: {detail}", $rule)]
                $name {
                    /// JSON path of the culprit in the request document.
                    path: String,
                    /// What is wrong, naming the culprit.
                    detail: String,
                },
            )*
        }

        impl RequestError {
            /// JSON path of the culprit in the request document.
            pub fn path(&self) -> &str {
                match self {
                    $( Self::$name { path, .. } )|* => path,
                }
            }

            /// What is wrong, naming the culprit.
            pub fn detail(&self) -> &str {
                match self {
                    $( Self::$name { detail, .. } )|* => detail,
                }
            }

            /// The rule this error breaks, as a short sentence.
            pub fn rule(&self) -> &'static str {
                match self {
                    $( Self::$name { .. } => $rule, )*
                }
            }
        }
    };
}

request_errors! {
    // ---- program construction (1.2) ----
    /// The program's family id differs from the family's.
    ProgramFamilyMismatch => "the program belongs to another model family",
    /// A part that must be non-empty is empty: blocks, program inputs or outputs, a block's
    /// nodes, a node's outputs.
    EmptyProgramPart => "a required part of the program is empty",
    /// An id that must be unique is repeated: program inputs, states, weights, state and
    /// weight value ids (also disjoint from inputs), block ids, node ids, program outputs.
    DuplicateProgramId => "an id of the program is not unique",
    /// States are not sorted by state id, or weights by weight id.
    UnsortedProgramList => "a program list is not sorted by id",
    /// A state or weight tensor is malformed (zero extent, layout, byte overflow).
    InvalidProgramTensor => "a program tensor is malformed",
    /// A state's capacity demand does not fit its tensor.
    InvalidStateCapacity => "a state's capacity demand does not fit its tensor",
    /// Zero initialization on a state that does not live for a sequence.
    InvalidStateInitialization => "zero initialization is only legal for sequence-lifetime states",
    /// A block id breaks the identifier rule (1 to 160 bytes, no control or invisible
    /// formatting characters).
    InvalidBlockId => "a block id must be 1 to 160 bytes with no control or invisible formatting characters",
    /// The request exceeds an input limit (`--limit NAME=N` raises it).
    InputLimit => "the request exceeds an input limit",
    /// A node requires an operation version with major 0.
    UnstableNodeVersion => "a node requires an unstable (major 0) operation version",
    /// A node attribute value is malformed (empty text or list, unreduced rational).
    InvalidAttributeValue => "a node attribute value is malformed",
    /// A node reads a value that is neither a program input, a state, a weight nor an output
    /// of an earlier node.
    UnknownNodeInput => "a node reads a value that is not known yet",
    /// A node output is not a new value (a second producer, or a program input, state or
    /// weight written as an output).
    ValueRedefined => "a node output is not a new value",
    /// The token work value is not exactly once among the node's values, or is a state or
    /// weight.
    InvalidTokenWork => "a node's token work value is not one of its activations",
    /// A program output is not a known value.
    UnknownProgramOutput => "a program output is not a value of the program",
    /// Completion retention names a value that is no node's output.
    RetainedValueNotProduced => "a retained completion value is not a node output",

    // ---- weight schemas (1.2) ----
    /// A weight schema has version major 0.
    UnstableWeightSchemaVersion => "the weight schema version is unstable (major 0)",
    /// Components or tensors of a weight schema are not sorted by id and unique.
    UnsortedWeightSchema => "a weight schema list is not sorted by id and unique",
    /// A weight component has a zero extent or a byte size that overflows.
    InvalidWeightComponent => "a weight component is malformed",
    /// A quantized or block-quantized encoding breaks its rules.
    InvalidQuantization => "a weight quantization scheme is malformed",
    /// A logical weight tensor's component list is empty, unsorted, repeated or names an
    /// unknown component, or its extents are zero.
    InvalidWeightTensor => "a logical weight tensor is malformed",
    /// A program weight names no tensor of the weight schema, or its dimensions or logical
    /// element type differ from the schema's.
    WeightReferenceMismatch => "a program weight does not match the weight schema",

    // ---- execution weights (1.2) ----
    /// The execution weight plan was made from another source schema.
    ExecutionWeightsSourceMismatch => "the execution weights were materialized from another weight schema",
    /// An execution component's source list is missing, empty, repeated or names an unknown
    /// source component, or a source list names no execution component.
    InvalidComponentSources => "an execution weight component has invalid sources",
    /// A required source component feeds no execution component.
    UnreferencedSourceComponent => "a required source weight component is not materialized",
    /// The logical tensors of the execution schema differ from the source schema's.
    ExecutionTensorMismatch => "the execution weights change the logical weight tensors",
    /// The materializer is neither the identity materializer nor one the catalog trusts.
    UntrustedMaterializer => "the weight materializer is not trusted by the catalog",

    // ---- catalog (1.3, 1.4) ----
    /// The device is malformed (zero memory, no or illegal storage profiles).
    InvalidDevice => "the device is malformed",
    /// The catalog has no operations, providers or engines.
    EmptyCatalog => "the capability catalog is empty",
    /// The catalog has more rows than the budget allows.
    CatalogTooLarge => "the capability catalog exceeds its row budget",
    /// A catalog map entry is stored under another id than its own.
    CatalogKeyMismatch => "a catalog entry is stored under another id",
    /// The operation keys and the provider keys of the catalog differ.
    OperationProviderKeysDiffer => "operations and provider rows name different operations",
    /// An operation descriptor is malformed.
    InvalidOperation => "an operation descriptor is malformed",
    /// A tensor contract of an operation is malformed.
    InvalidTensorContract => "a tensor contract is malformed",
    /// An operation's oracle is malformed or its reference chain is dangling, cyclic, too
    /// deep, or reaches an operation with another signature.
    InvalidOracle => "an operation oracle is malformed",
    /// An operation, provider or engine needs a capability the device does not offer.
    UnofferedCapability => "a capability is not offered by the device",
    /// An operation's provider row is empty.
    EmptyProviderRow => "an operation has no providers",
    /// A provider row is not sorted by (provider id, version) or repeats a provider id.
    UnsortedProviderRow => "a provider row is not sorted by (provider id, version) and unique",
    /// A provider quotes another operation id or another operation fingerprint.
    ProviderOperationMismatch => "a provider does not implement the operation it is listed under",
    /// A provider or engine runs on another device.
    DeviceMismatch => "a provider or engine runs on another device",
    /// A provider's version does not satisfy the operation version or its provider minimum.
    ProviderVersionMismatch => "a provider version does not satisfy the operation",
    /// A provider lacks a capability the operation requires.
    ProviderMissingCapability => "a provider lacks a capability the operation requires",
    /// A provider's execution semantics are not the 1.0 contract with its fingerprint.
    InvalidExecutionSemantics => "a provider's execution semantics are malformed",
    /// A provider's storage bindings are empty, unsorted, repeated or accept no legal profile.
    InvalidStorageBindings => "a provider's storage bindings are malformed",
    /// A provider's resource estimator version is unstable.
    InvalidEstimatorIdentity => "a provider's resource estimator identity is malformed",

    // ---- runtime policy (1.7) ----
    /// The policy version has major 0.
    UnstablePolicyVersion => "the runtime policy version is unstable (major 0)",
    /// Capacity is zero or above device memory, or the reserve is not below it.
    InvalidMemoryCapacity => "the runtime policy memory capacity is invalid",
    /// The sequence or token ceiling is zero.
    ZeroPolicyCeiling => "a runtime policy ceiling is zero",
    /// The storage-profile order is empty, repeats a profile or holds an illegal one.
    InvalidProfileOrder => "the storage-profile order is invalid",
    /// The reusable-execution policy breaks a rule (lanes, bucket count, capacities,
    /// ceilings, order, growth within a class).
    InvalidReusableExecution => "the reusable-execution policy is invalid",
    /// A reusable bucket id is not the one derived from its class and capacity.
    ReusableBucketIdMismatch => "a reusable bucket id is not derived from its class and capacity",

    // ---- node resolutions (1.5, 1.6) ----
    /// A resolution binds no values.
    EmptyResolutionValues => "a node resolution binds no values",
    /// A binding's access or alias does not fit its role.
    InvalidBindingAccess => "a value binding's access or alias does not fit its role",
    /// A binding's tensor is malformed.
    InvalidBindingTensor => "a value binding's tensor is malformed",
    /// A storage component is empty, overflows, or is not a multiple of its element size.
    InvalidStorageComponent => "a storage component is malformed",
    /// A value's storage is empty, unsorted, repeats a component id, or mixes components
    /// with and without ids.
    InvalidValueStorage => "a value's storage is malformed",
    /// Two components of one value share bytes of one resource.
    StorageOverlap => "two storage components of one value overlap",
    /// Storage does not fit the tensor: not exactly one component for a non-weight value,
    /// another element type, or fewer bytes than the tensor needs.
    StorageDoesNotFitTensor => "a value's storage does not fit its tensor",
    /// A weight binding is missing, present on a non-weight value, or its components do not
    /// match the storage components.
    WeightBindingMismatch => "a weight binding does not match its storage",
    /// The provider candidates are empty, unsorted or repeated.
    InvalidCandidateList => "a node resolution's provider candidates are invalid",
    /// A candidate's estimate fields are malformed (estimator version, value alignment,
    /// workspace scopes).
    InvalidEstimate => "a provider resource estimate is malformed",
    /// A workspace requirement breaks a rule (formula, alignment, scope, storage).
    InvalidWorkspace => "a provider workspace requirement is malformed",
    /// A candidate's estimate fingerprint is not the one derived from its fields.
    EstimateFingerprintMismatch => "a provider estimate fingerprint is not derived from the estimate",
    /// A provider is both a candidate and rejected by the same resolution.
    CandidateAlsoRejected => "a provider is both a candidate and rejected",
    /// A resolution-local rejection is not a storage rejection with strictly ascending ids.
    InvalidResolutionRejection => "a resolution-local provider rejection is malformed",

    // ---- derived fingerprints ----
    /// A fingerprint could not be computed (the value could not be serialized).
    FingerprintUnavailable => "a fingerprint could not be computed",
}

impl RequestError {
    fn fingerprint(path: impl Into<String>, error: CanonicalError) -> Self {
        Self::FingerprintUnavailable {
            path: path.into(),
            detail: error.to_string(),
        }
    }
}

/// Text written only when it is displayed: the JSON path and the subject ("node N binds
/// value V") of each resolution, binding, component and candidate, which only an error
/// message uses. Formatted before every check, they took `validate_resolution` from 1.09%
/// to 2.83% of `plan`'s profile samples on DeepSeek-V3, for messages a valid request never
/// prints.
pub(super) struct Deferred<F>(F);

impl<F: Fn(&mut std::fmt::Formatter<'_>) -> std::fmt::Result> std::fmt::Display for Deferred<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (self.0)(f)
    }
}

/// [`Deferred`] text that `write` writes.
pub(super) fn deferred<F: Fn(&mut std::fmt::Formatter<'_>) -> std::fmt::Result>(
    write: F,
) -> Deferred<F> {
    Deferred(write)
}

/// `["key"]`: the JSON path step of a map key.
pub(crate) fn key(text: &str) -> String {
    format!("[{text:?}]")
}

/// Checks every load-time invariant of `request` (rules 1.1-1.8) that does not need
/// joint selection or the cross-node build rules, and returns the first violation found.
///
/// Order: family and program, weight schema and program weights, execution weights,
/// catalog, policy, completion retention, then node resolutions.
pub fn validate_request(request: &PlanRequest) -> Result<(), RequestError> {
    // The node resolutions read nothing else of the request: they are checked beside the
    // rest (and each in parallel), and their error comes after every other, as in the
    // order above.
    // The rest stays on this thread (an in-place scope).
    let mut resolutions = None;
    let rest = rayon::in_place_scope(|scope| {
        let resolutions = &mut resolutions;
        scope.spawn(move |_| {
            *resolutions = Some(resolution::validate_resolutions(&request.node_resolutions));
        });
        validate_all_but_resolutions(request)
    });
    rest?;
    match resolutions {
        Some(resolutions) => resolutions,
        None => resolution::validate_resolutions(&request.node_resolutions),
    }
}

/// [`validate_request`] up to the node resolutions.
fn validate_all_but_resolutions(request: &PlanRequest) -> Result<(), RequestError> {
    let family = &request.family;
    let program_index = program::validate_program(family)?;
    weights::validate_weight_schema("family.weight_schema", &family.weight_schema)?;
    weights::validate_program_weights(&family.program, &family.weight_schema)?;
    if let Some(execution) = &request.execution_weights {
        weights::validate_execution_weights(execution, &family.weight_schema, &request.catalog)?;
    }
    catalog::validate_catalog(&request.catalog)?;
    policy::validate_policy(&request.policy, &request.catalog)?;
    program::validate_retention(&request.completion_retention, &program_index)?;
    Ok(())
}

impl PlanRequest {
    /// Checks every load-time invariant (see [`validate_request`]).
    pub fn validate(&self) -> Result<(), RequestError> {
        validate_request(self)
    }
}
