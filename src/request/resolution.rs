//! Node resolutions: where each value of a node lives, and each candidate provider's resource
//! estimate (rules 1.5, 1.6).

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::catalog::AliasPolicy;
use super::ids::{
    CapabilityId, ContractVersion, EstimatorId, NodeId, ProgramValueId, ProviderId, ResourceId,
    Sha256Hex, WeightId,
};
use super::storage::StorageRequirement;
use super::tensor::{BufferUsage, ElementType, TensorAccess, TensorSpec, ValueRole};
use super::weights::ResolvedWeightBinding;

/// One byte range of a resource that holds (part of) a value.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct StorageComponent {
    /// The weight component stored here (weights only; `None` for a single plain component).
    pub component_id: Option<WeightId>,
    /// The resource.
    pub resource_id: ResourceId,
    /// Start offset in the resource.
    pub offset_bytes: u64,
    /// Length in bytes (> 0).
    pub length_bytes: u64,
    /// Element type of the bytes.
    pub element_type: ElementType,
}

impl StorageComponent {
    /// One past the last byte, `None` on overflow.
    pub fn end_bytes(&self) -> Option<u64> {
        self.offset_bytes.checked_add(self.length_bytes)
    }

    /// Whether the two components share a byte.
    pub fn overlaps(&self, other: &StorageComponent) -> bool {
        self.resource_id == other.resource_id
            && self.offset_bytes < other.offset_bytes.saturating_add(other.length_bytes)
            && other.offset_bytes < self.offset_bytes.saturating_add(self.length_bytes)
    }
}

/// Where a value lives: one or more components.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct ValueStorage {
    /// Components, sorted by (component id with none first, resource id, offset).
    pub components: Vec<StorageComponent>,
}

impl ValueStorage {
    /// Whether any component of `self` shares a byte with any component of `other`.
    pub fn overlaps(&self, other: &ValueStorage) -> bool {
        self.components
            .iter()
            .any(|a| other.components.iter().any(|b| a.overlaps(b)))
    }

    /// The resources of the components, sorted and unique.
    pub fn resource_ids(&self) -> BTreeSet<&ResourceId> {
        self.components.iter().map(|c| &c.resource_id).collect()
    }
}

/// One value as a node binds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ValueBinding {
    /// The program value.
    pub value_id: ProgramValueId,
    /// Input or output.
    pub role: ValueRole,
    /// Slot ordinal within the role.
    pub ordinal: u32,
    /// The concrete tensor.
    pub tensor: TensorSpec,
    /// Access (equal to the slot contract's).
    pub access: TensorAccess,
    /// Alias policy (equal to the slot contract's).
    pub alias: AliasPolicy,
    /// What the buffer holds.
    pub usage: BufferUsage,
    /// The weight, for weights usage.
    pub weight: Option<ResolvedWeightBinding>,
    /// Where it lives.
    pub storage: ValueStorage,
}

/// The scope a provider workspace lives in.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceScope {
    /// The whole plan.
    Plan,
    /// One request.
    Request,
    /// One sequence.
    Sequence,
    /// One scheduler step.
    Step,
    /// One invocation of the node.
    Invocation,
}

/// One bucket of a bounded-shape size formula.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct ShapeBucket {
    /// Most sequences covered.
    pub maximum_sequences: u32,
    /// Most tokens covered.
    pub maximum_tokens: u64,
    /// Most pages covered.
    pub maximum_pages: u64,
    /// Bytes needed for any shape within the bucket.
    pub bytes: u64,
}

/// How a provider's workspace grows with the shape of a step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum WorkspaceSizeFormula {
    /// A fixed size.
    Fixed {
        /// Bytes (> 0).
        bytes: u64,
    },
    /// Bytes per active sequence.
    ActualSequences {
        /// Bytes per sequence (> 0).
        bytes_per_sequence: u64,
    },
    /// Bytes per scheduled token.
    Tokens {
        /// Bytes per token (> 0).
        bytes_per_token: u64,
    },
    /// Fixed plus per-sequence plus per-token bytes.
    Affine {
        /// Fixed bytes.
        fixed_bytes: u64,
        /// Bytes per sequence.
        bytes_per_sequence: u64,
        /// Bytes per token.
        bytes_per_token: u64,
    },
    /// Bytes per page, up to a provider bound.
    Pages {
        /// Bytes per page (> 0).
        bytes_per_page: u64,
        /// Most pages (> 0).
        maximum_pages: u64,
    },
    /// The bytes of the first bucket that covers the shape.
    BoundedShapeBuckets {
        /// 1..=64 buckets, a strictly growing chain.
        buckets: Vec<ShapeBucket>,
    },
}

/// A workspace a provider needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceRequirement {
    /// Size formula.
    pub size_formula: WorkspaceSizeFormula,
    /// Alignment (power of two).
    pub alignment_bytes: u64,
    /// Scope.
    pub scope: WorkspaceScope,
    /// Accepted storage profiles.
    pub storage: StorageRequirement,
}

/// The three workspace kinds a node may own.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceKind {
    /// Per-invocation scratch.
    Scratch,
    /// Per-invocation binding data.
    Binding,
    /// Persistent across invocations.
    Persistent,
}

impl WorkspaceKind {
    /// All kinds, in the order the planner visits them.
    pub const ALL: [WorkspaceKind; 3] = [Self::Scratch, Self::Binding, Self::Persistent];

    /// The name used in workspace resource ids.
    pub fn name(self) -> &'static str {
        match self {
            Self::Scratch => "scratch",
            Self::Binding => "binding",
            Self::Persistent => "persistent",
        }
    }
}

/// A provider's trusted resource estimate for one node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProviderResourcePlan {
    /// The provider.
    pub provider_id: ProviderId,
    /// The estimator that produced it.
    pub estimator_id: EstimatorId,
    /// Estimator version.
    pub estimator_version: ContractVersion,
    /// Estimator implementation fingerprint.
    pub estimator_implementation_fingerprint: Sha256Hex,
    /// Canonical sha256 of the estimator's input (see `plan::fingerprints`).
    pub estimator_input_fingerprint: Sha256Hex,
    /// Canonical sha256 of every other field.
    pub estimate_fingerprint: Sha256Hex,
    /// Alignment of every value offset on the node (power of two).
    pub value_alignment_bytes: u64,
    /// Scratch workspace (invocation scope).
    pub scratch: Option<WorkspaceRequirement>,
    /// Binding workspace (invocation scope).
    pub binding: Option<WorkspaceRequirement>,
    /// Persistent workspace (not invocation scope).
    pub persistent: Option<WorkspaceRequirement>,
}

impl ProviderResourcePlan {
    /// The workspace of one kind.
    pub fn workspace(&self, kind: WorkspaceKind) -> Option<&WorkspaceRequirement> {
        match kind {
            WorkspaceKind::Scratch => self.scratch.as_ref(),
            WorkspaceKind::Binding => self.binding.as_ref(),
            WorkspaceKind::Persistent => self.persistent.as_ref(),
        }
    }
}

/// Why a resolution itself ruled a provider out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ResolutionRejection {
    /// No storage profile fits these resources (non-empty, strictly ascending).
    StorageIncompatible {
        /// The resources without a usable profile.
        resource_ids: Vec<ResourceId>,
    },
}

/// Everything resolved for one program node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeResolution {
    /// The node.
    pub node_id: NodeId,
    /// Bindings: inputs by ordinal, then outputs by ordinal.
    pub values: Vec<ValueBinding>,
    /// Capabilities required beyond the operation's.
    #[serde(default)]
    pub required_capabilities: BTreeSet<CapabilityId>,
    /// The provider the caller would like.
    #[serde(default)]
    pub preferred_provider: Option<ProviderId>,
    /// One estimate per candidate provider, sorted by provider id, non-empty.
    pub provider_resource_candidates: Vec<ProviderResourcePlan>,
    /// Providers the resolution ruled out, with the reason.
    #[serde(default)]
    pub provider_resolution_rejections: BTreeMap<ProviderId, ResolutionRejection>,
}
