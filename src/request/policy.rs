//! The runtime policy: memory capacity and reserve, sequence and token ceilings, determinism,
//! storage-profile order and reusable executions (rules 1.7).

use std::collections::BTreeSet;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::catalog::DeterminismRequirement;
use super::ids::{ContractVersion, PolicyId, ProgramValueId, ReusableExecutionClassId};
use super::storage::StorageProfile;

/// The runtime policy a plan is built for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RuntimePolicy {
    /// Policy id.
    pub policy_id: PolicyId,
    /// Policy version (major ≠ 0).
    pub version: ContractVersion,
    /// Memory ceiling before the reserve (0 < capacity ≤ device memory).
    pub memory_capacity_bytes: u64,
    /// Bytes held back from planning (< capacity).
    pub memory_reserve_bytes: u64,
    /// Most sequences active at once (> 0).
    pub maximum_active_sequences: u32,
    /// Most tokens scheduled in one step (> 0).
    pub maximum_scheduled_tokens: u64,
    /// Determinism every provider must meet.
    pub execution_determinism: DeterminismRequirement,
    /// Allowed storage profiles, most wanted first (index = rank; non-empty, unique).
    pub dynamic_storage_profile_order: Vec<StorageProfile>,
    /// Budgets for reusable (captured) executions, if any.
    #[serde(default)]
    pub reusable_execution: Option<ReusableExecutionPolicy>,
    /// Wire limits the plan must fit; absent means the reference limits
    /// ([`WireLimits::REFERENCE`]). An extension of the reference policy: left out of the
    /// JSON when absent, so policies without it keep their fingerprints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire_limits: Option<WireLimits>,
}

/// Limits of the plan wire format (rules 1.10: 16 MiB plan JSON, 65,536 resource rows).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct WireLimits {
    /// Most static plus dynamic resource rows in the memory plan.
    pub maximum_resource_rows: u64,
    /// Most bytes of the plan file (pretty JSON with its final newline, as written).
    pub maximum_plan_json_bytes: u64,
}

impl WireLimits {
    /// The reference limits: 65,536 rows, 16 MiB of plan JSON.
    pub const REFERENCE: WireLimits = WireLimits {
        maximum_resource_rows: 65_536,
        maximum_plan_json_bytes: 16 * 1024 * 1024,
    };
}

impl RuntimePolicy {
    /// The rank of `profile` in the policy order.
    pub fn rank(&self, profile: &StorageProfile) -> Option<usize> {
        self.dynamic_storage_profile_order
            .iter()
            .position(|p| p == profile)
    }

    /// The wire limits in force: the policy's, or the reference ones.
    pub fn effective_wire_limits(&self) -> WireLimits {
        self.wire_limits.unwrap_or(WireLimits::REFERENCE)
    }
}

/// The capacity of one reusable-execution bucket.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct BucketCapacity {
    /// Most sequences (> 0).
    pub maximum_sequences: u32,
    /// Most tokens (> 0).
    pub maximum_tokens: u64,
    /// Most pages (> 0).
    pub maximum_pages: u64,
}

/// One bucket of reusable executions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReusableExecutionBucket {
    /// `reusable-bucket/sha256/` + canonical sha256 of `{domain, class_id, capacity}`.
    pub bucket_id: String,
    /// The class of executions.
    pub class_id: ReusableExecutionClassId,
    /// Its capacity.
    pub capacity: BucketCapacity,
}

/// Budgets for reusable executions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReusableExecutionPolicy {
    /// Most lanes held at once (> 0).
    pub maximum_reusable_lanes: u32,
    /// 1..=64 buckets sorted by (class, capacity); within a class each strictly extends the
    /// previous one.
    pub buckets: Vec<ReusableExecutionBucket>,
}

/// The domain tag of reusable bucket ids.
pub const REUSABLE_BUCKET_DOMAIN: &str = "ferrum.runtime-vnext.reusable-execution-bucket.v1";

/// Values whose bytes must survive until the request completes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompletionRetention {
    /// The retained values (each some node's output).
    pub values: BTreeSet<ProgramValueId>,
}
