//! The capability catalog: the device, the operations with their contracts, and for each
//! operation its providers (rules 1.3, 1.4).

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ids::{
    AttributeId, CapabilityId, ContractVersion, DeviceId, EstimatorId, MaterializerId, OperationId,
    ProviderId, QuantizationFormatId, Sha256Hex, WeightFormatId,
};
use super::program::{Rational, ValueKind};
use super::storage::{StorageProfile, StorageRequirement};
use super::tensor::{ElementType, TensorAccess, ValueRole};
use super::weights::WeightMaterializerDescriptor;

/// The kind of device.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum DeviceClass {
    /// A CPU host.
    Host,
    /// A GPU or other accelerator.
    Accelerator,
    /// A reference (test) device.
    Reference,
}

/// The device a plan runs on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Device {
    /// Device id.
    pub id: DeviceId,
    /// Its class.
    pub class: DeviceClass,
    /// Its ordinal among devices of the machine.
    pub ordinal: u32,
    /// Total memory in bytes (> 0).
    pub total_memory_bytes: u64,
    /// Fingerprint of the runtime implementation that drives it.
    pub runtime_implementation_fingerprint: Sha256Hex,
    /// Capabilities it offers.
    pub capabilities: BTreeSet<CapabilityId>,
    /// Storage profiles the runtime can physically offer (non-empty).
    pub dynamic_storage_profiles: BTreeSet<StorageProfile>,
}

/// A constraint on one tensor axis.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum DimensionConstraint {
    /// Exactly this extent (non-zero).
    Exact(u64),
    /// A named extent, bound node-wide by the first binding that meets it.
    Symbol(String),
    /// An extent within `[minimum, maximum]`, minimum ≥ 1.
    Range {
        /// Smallest extent.
        minimum: u64,
        /// Largest extent.
        maximum: u64,
    },
}

/// A stride constraint of a strided layout.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum StrideConstraint {
    /// Exactly this many bytes (non-zero).
    ExactBytes(u64),
    /// A named stride, bound node-wide.
    Symbol(String),
}

/// A layout a tensor contract accepts.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum LayoutConstraint {
    /// Row-major dense.
    Contiguous,
    /// Strided, one stride constraint per axis.
    Strided {
        /// Stride constraint per axis.
        strides: Vec<StrideConstraint>,
    },
    /// Blocked with this block and axis order (padding is not constrained).
    Blocked {
        /// Block extent per axis.
        block: Vec<u64>,
        /// A permutation of `0..rank`.
        axis_order: Vec<u32>,
    },
}

/// Whether an output may share storage with an input.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum AliasPolicy {
    /// Never overlaps another binding.
    NoAlias,
    /// May be stored in place of input `tensor_index`.
    MayAlias {
        /// The input it may alias.
        tensor_index: u32,
    },
    /// Must be stored in place of input `tensor_index`.
    MustAlias {
        /// The input it must alias.
        tensor_index: u32,
    },
}

/// The contract of one tensor slot of an operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TensorContract {
    /// One constraint per axis.
    pub dimensions: Vec<DimensionConstraint>,
    /// Accepted element types (non-empty).
    pub element_types: BTreeSet<ElementType>,
    /// Accepted layouts (sorted, unique, non-empty).
    pub layouts: Vec<LayoutConstraint>,
    /// Access of the slot.
    pub access: TensorAccess,
    /// Alias policy of the slot (inputs: `no_alias`).
    pub alias: AliasPolicy,
}

/// A constraint on an attribute value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum AttributeConstraint {
    /// Any value of the kind.
    None,
    /// A boolean that must equal this.
    BoolEquals(bool),
    /// A signed integer within bounds.
    IntegerRange {
        /// Smallest value.
        minimum: i64,
        /// Largest value.
        maximum: i64,
    },
    /// An unsigned integer within bounds.
    UnsignedRange {
        /// Smallest value.
        minimum: u64,
        /// Largest value.
        maximum: u64,
    },
    /// A rational within bounds (inclusive).
    RationalRange {
        /// Smallest value.
        minimum: Rational,
        /// Largest value.
        maximum: Rational,
    },
    /// Text that is one of these.
    TextChoices(BTreeSet<String>),
    /// An integer list of a length within bounds.
    IntegerListLength {
        /// Fewest entries.
        minimum: u32,
        /// Most entries.
        maximum: u32,
    },
}

/// The schema of one attribute.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AttributeSpec {
    /// Kind of the value.
    pub value_kind: ValueKind,
    /// Whether every node must give it.
    pub required: bool,
    /// Constraint on the value.
    pub constraint: AttributeConstraint,
}

/// Whether a workspace must, may or must not be present.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Presence {
    /// Must be absent.
    Forbidden,
    /// Either.
    Optional,
    /// Must be present.
    Required,
}

impl Presence {
    /// Whether a workspace that is `present` (or not) meets this rule.
    pub fn accepts(self, present: bool) -> bool {
        match self {
            Self::Forbidden => !present,
            Self::Optional => true,
            Self::Required => present,
        }
    }
}

/// Resource rules of an operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourceRequirements {
    /// Minimum alignment of every value offset (non-zero power of two).
    pub minimum_value_alignment_bytes: u64,
    /// Scratch workspace presence.
    pub scratch: Presence,
    /// Binding workspace presence.
    pub binding: Presence,
    /// Persistent workspace presence.
    pub persistent: Presence,
}

/// How a provider's numerical output is checked against the operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum OracleSpec {
    /// Bitwise equal.
    Exact,
    /// Within an absolute tolerance.
    AbsoluteTolerance(Rational),
    /// Within a relative tolerance.
    RelativeTolerance(Rational),
    /// Equal to another operation.
    ReferenceOperation {
        /// The reference operation.
        operation_id: OperationId,
        /// Its version.
        version: ContractVersion,
    },
}

/// What providers of an operation must offer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProviderRequirement {
    /// Oldest acceptable provider version (same major as the operation).
    pub minimum_version: ContractVersion,
    /// Capabilities every provider needs.
    pub required_capabilities: BTreeSet<CapabilityId>,
}

/// Attribute schema of an operation.
pub type AttributeSchema = BTreeMap<AttributeId, AttributeSpec>;

/// An operation: its version and contracts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OperationDescriptor {
    /// Operation id.
    pub id: OperationId,
    /// Contract version (major ≠ 0).
    pub version: ContractVersion,
    /// Input slot contracts.
    pub inputs: Vec<TensorContract>,
    /// Output slot contracts (at least one).
    pub outputs: Vec<TensorContract>,
    /// Attribute schema.
    pub attributes: AttributeSchema,
    /// Resource rules.
    pub resources: ResourceRequirements,
    /// Numerical oracle.
    pub oracle: OracleSpec,
    /// Provider requirements.
    pub provider: ProviderRequirement,
}

impl OperationDescriptor {
    /// The contract of the slot at (role, ordinal).
    pub fn slot(&self, role: ValueRole, ordinal: u32) -> Option<&TensorContract> {
        let slots = match role {
            ValueRole::Input => &self.inputs,
            ValueRole::Output => &self.outputs,
        };
        slots.get(ordinal as usize)
    }
}

/// Bitwise repeatability a provider guarantees.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Repeatability {
    /// Same bits on the same runtime.
    BitwiseSameRuntime,
}

/// Whether replaying a captured execution matches eager execution.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ReplayEquivalence {
    /// Replay is not guaranteed to match.
    Ineligible,
    /// Replay matches eager execution bitwise.
    BitwiseEagerEquivalent,
}

/// The execution semantics a provider promises.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecutionSemantics {
    /// Must be 1.0.
    pub contract_version: ContractVersion,
    /// SHA-256 over the tagged contract bytes (see [`ExecutionSemantics::expected_fingerprint`]).
    pub contract_fingerprint: Sha256Hex,
    /// Repeatability.
    pub repeatability: Repeatability,
    /// Replay equivalence.
    pub replay_equivalence: ReplayEquivalence,
}

/// The tag of the provider execution contract fingerprint.
pub const EXECUTION_SEMANTICS_TAG: &str = "ferrum.runtime-vnext.provider-execution-semantics.v1";

impl ExecutionSemantics {
    /// The contract fingerprint these semantics must carry: SHA-256 over the tag, NUL, major
    /// and minor as little-endian u16, one byte repeatability (1), one byte replay (0 or 1).
    pub fn expected_fingerprint(&self) -> Sha256Hex {
        let mut bytes = Vec::with_capacity(EXECUTION_SEMANTICS_TAG.len() + 7);
        bytes.extend_from_slice(EXECUTION_SEMANTICS_TAG.as_bytes());
        bytes.push(0);
        bytes.extend_from_slice(&self.contract_version.major.to_le_bytes());
        bytes.extend_from_slice(&self.contract_version.minor.to_le_bytes());
        bytes.push(1);
        bytes.push(match self.replay_equivalence {
            ReplayEquivalence::Ineligible => 0,
            ReplayEquivalence::BitwiseEagerEquivalent => 1,
        });
        crate::canonical::sha256_hex(&bytes)
    }

    /// Semantics with the given replay equivalence and their correct fingerprint.
    pub fn new(replay_equivalence: ReplayEquivalence) -> Self {
        let mut semantics = Self {
            contract_version: ContractVersion::new(1, 0),
            contract_fingerprint: crate::canonical::sha256_hex(b""),
            repeatability: Repeatability::BitwiseSameRuntime,
            replay_equivalence,
        };
        semantics.contract_fingerprint = semantics.expected_fingerprint();
        semantics
    }
}

/// The determinism a runtime policy requires of every provider.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum DeterminismRequirement {
    /// Same bits on the same runtime.
    BitwiseSameRuntime,
    /// Same bits, and replay equivalent to eager execution.
    BitwiseSameRuntimeWithReplay,
}

impl DeterminismRequirement {
    /// Whether `semantics` meet this requirement.
    pub fn accepts(self, semantics: &ExecutionSemantics) -> bool {
        semantics.repeatability == Repeatability::BitwiseSameRuntime
            && (self == Self::BitwiseSameRuntime
                || semantics.replay_equivalence == ReplayEquivalence::BitwiseEagerEquivalent)
    }
}

/// The storage a provider accepts for one binding slot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StorageBindingRequirement {
    /// Role of the slot.
    pub role: ValueRole,
    /// Ordinal of the slot.
    pub ordinal: u32,
    /// Accepted profiles.
    pub storage: StorageRequirement,
}

/// One provider (kernel implementation) of an operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProviderDescriptor {
    /// Provider id (unique within the operation's row).
    pub provider_id: ProviderId,
    /// The operation it implements.
    pub operation_id: OperationId,
    /// Declaration-order fingerprint of that operation.
    pub operation_fingerprint: Sha256Hex,
    /// Fingerprint of the kernel implementation.
    pub provider_implementation_fingerprint: Sha256Hex,
    /// The determinism it promises.
    pub execution_semantics: ExecutionSemantics,
    /// Provider version.
    pub version: ContractVersion,
    /// The device it runs on.
    pub device_id: DeviceId,
    /// Capabilities it has.
    pub capabilities: BTreeSet<CapabilityId>,
    /// Weight formats it reads.
    pub accepted_weight_formats: BTreeSet<WeightFormatId>,
    /// Quantization formats it reads.
    pub accepted_quantization_formats: BTreeSet<QuantizationFormatId>,
    /// Storage accepted per binding slot, sorted by (role, ordinal), non-empty.
    pub dynamic_storage_bindings: Vec<StorageBindingRequirement>,
    /// Its resource estimator.
    pub resource_estimator_id: EstimatorId,
    /// Estimator version (major ≠ 0).
    pub resource_estimator_version: ContractVersion,
    /// Estimator implementation fingerprint.
    pub resource_estimator_implementation_fingerprint: Sha256Hex,
}

impl ProviderDescriptor {
    /// The storage this provider accepts for the slot (role, ordinal); `None` means it cannot
    /// bind that slot.
    pub fn storage_for(&self, role: ValueRole, ordinal: u32) -> Option<&StorageRequirement> {
        self.dynamic_storage_bindings
            .binary_search_by(|b| (b.role, b.ordinal).cmp(&(role, ordinal)))
            .ok()
            .map(|i| &self.dynamic_storage_bindings[i].storage)
    }
}

/// A runtime engine (evidence only; part of the catalog fingerprint).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EngineProviderDescriptor {
    /// Engine id.
    pub provider_id: ProviderId,
    /// Contract version.
    pub contract_version: ContractVersion,
    /// Implementation fingerprint.
    pub implementation_fingerprint: Sha256Hex,
    /// Device it drives.
    pub device_id: DeviceId,
    /// Capabilities it has.
    pub capabilities: BTreeSet<CapabilityId>,
}

/// The capability catalog of one device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapabilityCatalog {
    /// The device.
    pub device: Device,
    /// Operations by id.
    pub operations: BTreeMap<OperationId, OperationDescriptor>,
    /// Providers of each operation, sorted by (provider id, version).
    pub providers: BTreeMap<OperationId, Vec<ProviderDescriptor>>,
    /// Runtime engines by id.
    pub engine_providers: BTreeMap<ProviderId, EngineProviderDescriptor>,
    /// Trusted weight materializers by id (the identity materializer is always trusted).
    #[serde(default)]
    pub weight_materializers: BTreeMap<MaterializerId, WeightMaterializerDescriptor>,
}

impl CapabilityCatalog {
    /// The provider `provider` of operation `operation`.
    pub fn provider(
        &self,
        operation: &OperationId,
        provider: &ProviderId,
    ) -> Option<&ProviderDescriptor> {
        self.providers
            .get(operation)?
            .iter()
            .find(|p| &p.provider_id == provider)
    }
}
