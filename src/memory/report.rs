//! An itemised summary of a memory plan for the command line (`--json` prints it).

use serde::Serialize;

use crate::request::{BufferUsage, StorageProfile};

use super::{AllocationLifetime, MemoryPlan};

/// Static bytes by usage.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StaticBreakdown {
    /// Weights.
    pub weights_bytes: u64,
    /// State.
    pub state_bytes: u64,
    /// Activations.
    pub activations_bytes: u64,
    /// Persistent workspaces.
    pub persistent_bytes: u64,
    /// Anything else (never produced by derivation).
    pub other_bytes: u64,
}

/// Minimum runnable dynamic bytes by lifetime.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DynamicBreakdown {
    /// Request-lifetime bytes.
    pub request_bytes: u64,
    /// Sequence-lifetime bytes.
    pub sequence_bytes: u64,
    /// Step bytes (after slot sharing).
    pub step_bytes: u64,
    /// Invocation peak bytes.
    pub invocation_peak_bytes: u64,
}

/// One pool of the summary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PoolReport {
    /// The pool id.
    pub pool_id: String,
    /// Its profile.
    pub profile: StorageProfile,
    /// Its profile as a label (`linear+contiguous`).
    pub profile_label: String,
    /// Its usage.
    pub usage: BufferUsage,
    /// How many resources it backs.
    pub members: usize,
    /// Step slots shared by more than one resource.
    pub shared_step_slots: usize,
    /// Minimum resident bytes.
    pub minimum_resident_bytes: u64,
    /// Maximum resident bytes.
    pub maximum_resident_bytes: u64,
}

/// An itemised breakdown of a memory plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MemoryReport {
    /// Usable capacity (policy capacity − reserve).
    pub usable_capacity_bytes: u64,
    /// Reserve.
    pub reserve_bytes: u64,
    /// Total static bytes.
    pub static_bytes: u64,
    /// Static bytes by usage.
    pub static_by_usage: StaticBreakdown,
    /// Minimum runnable dynamic bytes.
    pub minimum_runnable_bytes: u64,
    /// Minimum dynamic bytes by lifetime.
    pub dynamic_minimum_by_lifetime: DynamicBreakdown,
    /// usable − static − minimum runnable (0 if the plan is invalid and would go negative).
    pub headroom_bytes: u64,
    /// Theoretical ceiling (u128 decimal).
    pub theoretical_ceiling_bytes: String,
    /// Static allocation count.
    pub static_allocations: usize,
    /// Dynamic descriptor count.
    pub dynamic_resources: usize,
    /// Dynamic descriptors by lifetime: request, sequence, step, invocation.
    pub dynamic_resources_by_lifetime: [usize; 4],
    /// Pools, by pool id.
    pub pools: Vec<PoolReport>,
    /// Σ over pools of their maximum resident bytes (saturating). Each maximum is what its
    /// pool alone may hold at once, capped at the dynamic capacity; the pools draw on that
    /// one capacity, so the sum may exceed it.
    pub pool_maxima_sum_bytes: u64,
    /// Usable capacity − static bytes: the dynamic capacity every pool draws on.
    pub dynamic_capacity_bytes: u64,
    /// True when the pool maxima add up to more than the dynamic capacity: the pools share
    /// it, and not every pool can reach its maximum at the same time.
    pub pools_share_dynamic_capacity: bool,
}

/// Summarises a (validated) memory plan.
pub fn memory_report(plan: &MemoryPlan) -> MemoryReport {
    let mut by_usage = StaticBreakdown::default();
    for allocation in &plan.static_allocations {
        let slot = match allocation.usage {
            BufferUsage::Weights => &mut by_usage.weights_bytes,
            BufferUsage::State => &mut by_usage.state_bytes,
            BufferUsage::Activations => &mut by_usage.activations_bytes,
            BufferUsage::Persistent => &mut by_usage.persistent_bytes,
            _ => &mut by_usage.other_bytes,
        };
        *slot = slot.saturating_add(allocation.size_bytes);
    }
    let mut by_lifetime = [0usize; 4];
    for descriptor in &plan.dynamic_descriptors {
        let index = match descriptor.lifetime {
            AllocationLifetime::Plan | AllocationLifetime::Request => 0,
            AllocationLifetime::Sequence => 1,
            AllocationLifetime::Step => 2,
            AllocationLifetime::Invocation => 3,
        };
        by_lifetime[index] += 1;
    }
    let pool_maxima_sum_bytes = plan.dynamic_pools.iter().fold(0u64, |acc, pool| {
        acc.saturating_add(pool.provisioning.maximum_resident_bytes)
    });
    let dynamic_capacity_bytes = plan.usable_capacity_bytes.saturating_sub(plan.static_bytes);
    MemoryReport {
        pool_maxima_sum_bytes,
        dynamic_capacity_bytes,
        pools_share_dynamic_capacity: pool_maxima_sum_bytes > dynamic_capacity_bytes,
        usable_capacity_bytes: plan.usable_capacity_bytes,
        reserve_bytes: plan.reserve_bytes,
        static_bytes: plan.static_bytes,
        static_by_usage: by_usage,
        minimum_runnable_bytes: plan.minimum_runnable_request_bytes,
        dynamic_minimum_by_lifetime: DynamicBreakdown {
            request_bytes: plan.minimum_request_bytes,
            sequence_bytes: plan.minimum_sequence_bytes,
            step_bytes: plan.minimum_step_bytes,
            invocation_peak_bytes: plan.minimum_invocation_peak_bytes,
        },
        headroom_bytes: plan
            .usable_capacity_bytes
            .saturating_sub(plan.static_bytes)
            .saturating_sub(plan.minimum_runnable_request_bytes),
        theoretical_ceiling_bytes: plan.theoretical_ceiling_bytes.clone(),
        static_allocations: plan.static_allocations.len(),
        dynamic_resources: plan.dynamic_descriptors.len(),
        dynamic_resources_by_lifetime: by_lifetime,
        pools: plan
            .dynamic_pools
            .iter()
            .map(|pool| PoolReport {
                pool_id: pool.pool_id.clone(),
                profile: pool.compatibility.profile,
                profile_label: pool.compatibility.profile.to_string(),
                usage: pool.compatibility.usage,
                members: pool.resource_ids.len(),
                shared_step_slots: pool
                    .step_resource_slots
                    .iter()
                    .filter(|s| s.resource_ids.len() > 1)
                    .count(),
                minimum_resident_bytes: pool.provisioning.minimum_resident_bytes,
                maximum_resident_bytes: pool.provisioning.maximum_resident_bytes,
            })
            .collect(),
    }
}
