//! The memory plan's types (rules 1.9): static allocations, dynamic descriptors with
//! their demands, backing pools with step slots and invocation liveness, reusable-execution
//! budgets and the aggregates the capacity check is made of.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::request::{
    BufferUsage, ContractVersion, ElementType, NodeId, ResourceId, ReusableExecutionBucket,
    ShapeBucket, StorageContract, StorageProfile,
};

/// How long an allocation lives. `plan < request < sequence < step < invocation`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum AllocationLifetime {
    /// The whole plan (static).
    Plan,
    /// One request.
    Request,
    /// One sequence.
    Sequence,
    /// One scheduler step.
    Step,
    /// One node invocation.
    Invocation,
}

/// What an allocation is for.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum AllocationKind {
    /// A program value.
    Value,
    /// A node's scratch workspace.
    Scratch {
        /// The node.
        node_id: NodeId,
    },
    /// A node's binding workspace.
    Binding {
        /// The node.
        node_id: NodeId,
    },
    /// A node's persistent workspace.
    Persistent {
        /// The node.
        node_id: NodeId,
    },
}

/// A static (plan-lifetime) allocation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourceAllocation {
    /// The resource.
    pub resource_id: ResourceId,
    /// Logical bytes of the one instance (> 0).
    pub per_instance_bytes: u64,
    /// Physically quantized bytes of one instance.
    pub instance_stride_bytes: u64,
    /// Always 1.
    pub instance_count: u64,
    /// Total bytes (= stride).
    pub size_bytes: u64,
    /// Alignment (power of two).
    pub alignment_bytes: u64,
    /// What it holds.
    pub usage: BufferUsage,
    /// Element type of its bytes.
    pub element_type: ElementType,
    /// Always `plan`.
    pub lifetime: AllocationLifetime,
    /// What it is for.
    pub kind: AllocationKind,
    /// Its storage.
    pub storage: StorageContract,
}

/// Demand of a dynamic resource, bounded by the runtime's ceilings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum DynamicResourceDemand {
    /// A fixed size.
    Fixed {
        /// Bytes.
        bytes: u64,
    },
    /// Bytes per active sequence.
    ActualSequences {
        /// Bytes per sequence.
        bytes_per_sequence: u64,
        /// Sequence ceiling.
        maximum_sequences: u32,
    },
    /// Bytes per scheduled token.
    Tokens {
        /// Bytes per token.
        bytes_per_token: u64,
        /// Token ceiling.
        maximum_tokens: u64,
    },
    /// Fixed plus per-sequence plus per-token bytes.
    Affine {
        /// Fixed bytes.
        fixed_bytes: u64,
        /// Bytes per sequence.
        bytes_per_sequence: u64,
        /// Sequence ceiling.
        maximum_sequences: u32,
        /// Bytes per token.
        bytes_per_token: u64,
        /// Token ceiling.
        maximum_tokens: u64,
    },
    /// Bytes per page.
    Pages {
        /// Bytes per page.
        bytes_per_page: u64,
        /// Page ceiling.
        maximum_pages: u64,
    },
    /// The bytes of the first covering bucket.
    BoundedShapeBuckets {
        /// The buckets.
        buckets: Vec<ShapeBucket>,
    },
}

/// How a dynamic resource's bytes start.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ResourceInitialization {
    /// Defined by the first writer.
    None,
    /// Zeroed on every sequence acquisition.
    Zero,
}

/// A resource whose size depends on the runtime shape.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DynamicResourceDescriptor {
    /// The resource.
    pub base_resource_id: ResourceId,
    /// How its bytes grow.
    pub demand: DynamicResourceDemand,
    /// Alignment.
    pub alignment_bytes: u64,
    /// What it holds.
    pub usage: BufferUsage,
    /// Element type.
    pub element_type: ElementType,
    /// Lifetime (never `plan`).
    pub lifetime: AllocationLifetime,
    /// What it is for.
    pub kind: AllocationKind,
    /// Its storage.
    pub storage: StorageContract,
    /// The pool that backs it.
    pub pool_id: String,
    /// How its bytes start.
    pub initialization: ResourceInitialization,
    /// Evidence: the policy's maximum active sequences.
    pub theoretical_maximum_instances: u32,
}

/// The key that decides which descriptors share a pool.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PoolCompatibilityKey {
    /// Always 1.0.
    pub version: ContractVersion,
    /// Storage profile.
    pub profile: StorageProfile,
    /// Usage.
    pub usage: BufferUsage,
    /// Element type.
    pub element_type: ElementType,
    /// Logical layout fingerprint.
    pub logical_layout_fingerprint: crate::request::Sha256Hex,
    /// Alignment.
    pub alignment_bytes: u64,
}

/// How the step resources of a slot share one extent.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum StepSlotKind {
    /// One member.
    Dedicated,
    /// Provably ordered transient activations submitted as one batch with one fence.
    OrderedSingleFenceStepWave,
}

/// A group of step resources that share one physical extent.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepResourceSlot {
    /// Slot kind.
    pub kind: StepSlotKind,
    /// Members.
    pub resource_ids: Vec<ResourceId>,
}

/// How invocation resources of a pool may reuse bytes.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum InvocationLivenessMode {
    /// No invocation resources.
    NoInvocationResources,
    /// Invocations are totally ordered: the peak is the largest row.
    TotalOrderReuse,
    /// Invocations may run concurrently: the peak is the sum of rows.
    ConservativeConcurrent,
}

/// The invocation resources one node uses.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InvocationLivenessRow {
    /// The node.
    pub node_id: NodeId,
    /// Its invocation resources (sorted).
    pub resource_ids: Vec<ResourceId>,
}

/// How a pool is provisioned at run time.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ProvisioningMode {
    /// Grows with demand within the bounds.
    DemandDrivenElastic,
}

/// Resident-byte bounds of a pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PoolProvisioning {
    /// Mode.
    pub mode: ProvisioningMode,
    /// Fewest resident bytes (request + sequence + step + invocation peak; > 0).
    pub minimum_resident_bytes: u64,
    /// Most resident bytes: min(theoretical + reusable ceiling, dynamic capacity).
    pub maximum_resident_bytes: u64,
}

/// One backing pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DynamicBackingPool {
    /// `dynamic-pool/sha256/` + canonical sha256 of the key.
    pub pool_id: String,
    /// The key its members share.
    pub compatibility: PoolCompatibilityKey,
    /// Members, sorted.
    pub resource_ids: Vec<ResourceId>,
    /// Σ minimum bytes of request-lifetime members.
    pub minimum_request_bytes: u64,
    /// Σ minimum bytes of sequence-lifetime members.
    pub minimum_sequence_bytes: u64,
    /// Σ over step slots of their largest member.
    pub minimum_step_bytes: u64,
    /// Peak invocation bytes.
    pub minimum_invocation_peak_bytes: u64,
    /// Step slots.
    pub step_resource_slots: Vec<StepResourceSlot>,
    /// Σ theoretical bytes × instances (u128, decimal string).
    pub theoretical_ceiling_bytes: String,
    /// Reusable-execution ceiling of this pool.
    pub reusable_workspace_ceiling_bytes: u64,
    /// Provisioning bounds.
    pub provisioning: PoolProvisioning,
    /// Invocation liveness mode.
    pub invocation_liveness_mode: InvocationLivenessMode,
    /// Invocation rows, sorted by node id.
    pub invocation_liveness: Vec<InvocationLivenessRow>,
}

/// A pool's budget within one reusable bucket.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PoolBudget {
    /// The pool.
    pub pool_id: String,
    /// Step bytes at the bucket's shape.
    pub step_bytes: u64,
    /// Invocation bytes at the bucket's shape.
    pub invocation_bytes: u64,
}

/// One resolved reusable bucket.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReusableBucketBudget {
    /// The policy bucket.
    pub bucket: ReusableExecutionBucket,
    /// Budgets per pool, sorted by pool id.
    pub pool_budgets: Vec<PoolBudget>,
}

/// Reusable-execution budgets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReusableExecutionMemoryPlan {
    /// Lanes.
    pub maximum_reusable_lanes: u32,
    /// nodes × buckets × lanes.
    pub maximum_device_executables: u64,
    /// Buckets.
    pub buckets: Vec<ReusableBucketBudget>,
}

/// The memory plan of an execution plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryPlan {
    /// Device memory.
    pub device_capacity_bytes: u64,
    /// Policy ceiling.
    pub policy_capacity_bytes: u64,
    /// Reserve.
    pub reserve_bytes: u64,
    /// policy − reserve.
    pub usable_capacity_bytes: u64,
    /// Sequence ceiling.
    pub maximum_active_sequences: u32,
    /// Σ static sizes.
    pub static_bytes: u64,
    /// Σ pool minimum request bytes.
    pub minimum_request_bytes: u64,
    /// Σ pool minimum sequence bytes.
    pub minimum_sequence_bytes: u64,
    /// Σ pool minimum step bytes.
    pub minimum_step_bytes: u64,
    /// Σ pool invocation peaks.
    pub minimum_invocation_peak_bytes: u64,
    /// request + sequence + step + invocation peak.
    pub minimum_runnable_request_bytes: u64,
    /// static + Σ pools (theoretical + reusable), u128 as a decimal string.
    pub theoretical_ceiling_bytes: String,
    /// Static allocations, sorted by resource id.
    pub static_allocations: Vec<ResourceAllocation>,
    /// Dynamic descriptors, sorted by base resource id.
    pub dynamic_descriptors: Vec<DynamicResourceDescriptor>,
    /// Pools, sorted by pool id.
    pub dynamic_pools: Vec<DynamicBackingPool>,
    /// Reusable-execution budgets.
    pub reusable_execution: Option<ReusableExecutionMemoryPlan>,
    /// Global invocation liveness mode.
    pub invocation_liveness_mode: InvocationLivenessMode,
    /// Global invocation rows.
    pub invocation_liveness: Vec<InvocationLivenessRow>,
}
