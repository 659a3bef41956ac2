//! The memory plan (rules 4): value demands, workspaces, static allocations,
//! dynamic descriptors, pools with lifetime reuse, reusable-execution budgets, and the
//! capacity check.
//!
//! The private modules read as the derivation: `values` (4.1) and `workspaces` (4.2) become
//! rows (`emit`, 4.3, with the row rules of 1.9); `pools` (4.5) with step slots and
//! invocation liveness (`ancestry` answers the ordering questions), `reusable` budgets (4.6)
//! and global `liveness` (4.7) complete them; `derive` (4.4) orchestrates, `validate` (4.8)
//! re-derives a stored plan and `report` summarises one for the command line. `demand`
//! holds the demand arithmetic (1.6, 1.9). The public API is [`derive_memory_plan`],
//! [`validate_memory_plan`] and [`memory_report`].

mod ancestry;
mod demand;
mod derive;
mod emit;
mod error;
mod liveness;
mod pools;
mod report;
mod reusable;
mod validate;
mod values;
mod workspaces;

use std::collections::{BTreeMap, BTreeSet};

use crate::plan::PlanNode;
// The memory plan's data types live with the plan's (`crate::plan`); the derivation's
// modules name them through here.
use crate::plan::{
    AllocationKind, AllocationLifetime, DynamicBackingPool, DynamicResourceDemand,
    DynamicResourceDescriptor, InvocationLivenessMode, InvocationLivenessRow, MemoryPlan,
    PoolBudget, PoolCompatibilityKey, PoolProvisioning, ProvisioningMode, ResourceAllocation,
    ResourceInitialization, ReusableBucketBudget, ReusableExecutionMemoryPlan, StepResourceSlot,
    StepSlotKind,
};
use crate::request::{ModelProgram, ResourceId, RuntimePolicy, StorageProfile};

pub use ancestry::MEMO_LIMIT;
pub use demand::{
    bind_runtime_limits, demand_problem, evaluate, quantized_bytes, theoretical_maximum_shape,
    Shape, MAXIMUM_SHAPE_BUCKETS,
};
pub use derive::{derive_memory_plan, MAXIMUM_RESOURCE_ROWS};
pub use error::{Contributor, MemoryError};
pub use liveness::{liveness_reference_limit, InvocationPhases, MAXIMUM_LIVENESS_REFERENCES};
pub use pools::{compatibility_key, pool_id, POOL_ID_PREFIX};
pub use report::{memory_report, DynamicBreakdown, MemoryReport, PoolReport, StaticBreakdown};
pub use reusable::MAXIMUM_REUSABLE_BUCKETS;
pub use validate::{validate_memory_plan, validate_memory_plan_within};

/// Everything the memory plan is derived from.
#[derive(Clone, Copy, Debug)]
pub struct MemoryInput<'a> {
    /// The device's memory (the policy capacity must not exceed it).
    pub device_capacity_bytes: u64,
    /// Capacity, reserve, sequence and token ceilings, reusable-execution policy.
    pub policy: &'a RuntimePolicy,
    /// Classifies values: weights, states, program inputs and outputs.
    pub program: &'a ModelProgram,
    /// The built nodes, in execution order (bindings, work contract, workspaces,
    /// dependencies, resources).
    pub nodes: &'a [PlanNode],
    /// The storage profile joint selection chose for every dynamic resource.
    pub selected_profiles: &'a BTreeMap<ResourceId, StorageProfile>,
    /// Retained values' resources ∪ terminal output resources.
    pub retained_resources: &'a BTreeSet<ResourceId>,
}
