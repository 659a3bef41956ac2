//! `MemoryPlan::from_core_with_completion_retention` (rules 4.4): value resources and
//! workspaces become sorted rows; pools, reusable budgets, liveness and aggregates are
//! derived from them; the plan must fit the usable capacity and pass [`validate`].
//!
//! [`validate`]: super::validate_memory_plan

use std::collections::BTreeSet;

use crate::plan::PlanNode;
use crate::request::{ResourceId, ReusableExecutionPolicy, WireLimits};

use super::ancestry::Ancestry;
use super::emit::{check_descriptor, emit_values, DescriptorBytes, Rows};
use super::error::{overflow, Contributor, MemoryError};
use super::liveness::global_liveness;
use super::pools::{check_residency, finish_pool, layout_pools, PoolIds, PoolInputs};
use super::reusable::{ceilings, check_reusable_policy, derive_from_policy, derive_reusable};
use super::values::{collect_value_resources, LayoutInterner, ProgramValues};
use super::workspaces::emit_workspaces;
use super::{
    AllocationLifetime, DynamicBackingPool, DynamicResourceDescriptor, InvocationLivenessMode,
    InvocationLivenessRow, MemoryInput, MemoryPlan, ResourceAllocation,
    ReusableExecutionMemoryPlan,
};
use crate::request::BufferUsage;

/// Most static plus dynamic rows a memory plan may hold under the reference wire limits
/// (a policy's `wire_limits` may set another limit).
pub const MAXIMUM_RESOURCE_ROWS: usize = 65_536;

/// How many contributors a capacity error names.
const CONTRIBUTORS: usize = 5;

/// Device, policy and reserve rules; returns the usable capacity.
pub(crate) fn usable_capacity(device: u64, policy: u64, reserve: u64) -> Result<u64, MemoryError> {
    if device == 0 {
        return Err(MemoryError::ZeroDeviceCapacity);
    }
    if policy == 0 || policy > device {
        return Err(MemoryError::PolicyCapacityOutOfRange { policy, device });
    }
    if reserve >= policy {
        return Err(MemoryError::ReserveNotBelowCapacity {
            reserve,
            capacity: policy,
        });
    }
    Ok(policy - reserve)
}

/// Rule 1: at most `limits.maximum_resource_rows` static plus dynamic rows.
pub(crate) fn check_row_count(
    statics: usize,
    dynamics: usize,
    limits: WireLimits,
) -> Result<(), MemoryError> {
    let rows = statics.saturating_add(dynamics);
    let limit = usize::try_from(limits.maximum_resource_rows).unwrap_or(usize::MAX);
    if rows > limit {
        return Err(MemoryError::TooManyRows {
            what: "static and dynamic resource rows",
            rows,
            limit,
        });
    }
    Ok(())
}

/// Where the reusable plan comes from.
pub(crate) enum ReusableSource<'a> {
    /// No reusable executions.
    None,
    /// The runtime policy, with the token ceiling.
    Policy(&'a ReusableExecutionPolicy, u64),
    /// A stored plan's lanes and bucket specs (validation).
    Stored(&'a ReusableExecutionMemoryPlan),
}

/// Everything derived from the rows.
pub(crate) struct Derived {
    pub static_bytes: u64,
    pub pools: Vec<DynamicBackingPool>,
    pub reusable: Option<ReusableExecutionMemoryPlan>,
    pub mode: InvocationLivenessMode,
    pub liveness: Vec<InvocationLivenessRow>,
    pub minimum_request: u64,
    pub minimum_sequence: u64,
    pub minimum_step: u64,
    pub minimum_invocation: u64,
    pub minimum_runnable: u64,
    pub theoretical: u128,
}

/// The rows a plan is derived from.
pub(crate) struct CoreRows<'a> {
    pub statics: &'a [ResourceAllocation],
    pub dynamics: &'a [DynamicResourceDescriptor],
    pub bytes: &'a [DescriptorBytes],
    pub nodes: &'a [PlanNode],
    pub retained: &'a BTreeSet<ResourceId>,
    pub usable: u64,
    pub maximum_sequences: u32,
    /// Most invocation liveness references (4.7), from the wire limits.
    pub liveness_limit: usize,
}

fn contributors(rows: &CoreRows<'_>) -> Vec<Contributor> {
    let mut all: Vec<Contributor> = rows
        .statics
        .iter()
        .map(|s| Contributor {
            resource_id: s.resource_id.clone(),
            what: format!("static {:?}", s.usage),
            bytes: s.size_bytes,
        })
        .chain(
            rows.dynamics
                .iter()
                .zip(rows.bytes)
                .map(|(d, b)| Contributor {
                    resource_id: d.base_resource_id.clone(),
                    what: format!("{:?} {:?} minimum", d.lifetime, d.usage),
                    bytes: b.minimum,
                }),
        )
        .collect();
    all.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then_with(|| a.resource_id.cmp(&b.resource_id))
    });
    all.truncate(CONTRIBUTORS);
    all
}

/// Steps 4–12 of 4.4 over sorted, checked rows; shared by derivation and validation.
pub(crate) fn derive_core(
    rows: &CoreRows<'_>,
    reusable_source: ReusableSource<'_>,
) -> Result<Derived, MemoryError> {
    // 4. Retained resources are step or request activations.
    for resource in rows.retained {
        let Ok(d) = rows
            .dynamics
            .binary_search_by(|d| d.base_resource_id.cmp(resource))
        else {
            return Err(MemoryError::RetainedResourceNotDynamic {
                resource: resource.clone(),
            });
        };
        let d = &rows.dynamics[d];
        if d.usage != BufferUsage::Activations
            || !matches!(
                d.lifetime,
                AllocationLifetime::Step | AllocationLifetime::Request
            )
        {
            return Err(MemoryError::RetainedResourceClass {
                resource: resource.clone(),
                usage: d.usage,
                lifetime: d.lifetime,
            });
        }
    }
    // 5. Static bytes and the dynamic capacity.
    let static_bytes = rows
        .statics
        .iter()
        .try_fold(0u64, |acc, s| acc.checked_add(s.size_bytes))
        .ok_or_else(|| overflow("static bytes"))?;
    let Some(dynamic_capacity) = rows.usable.checked_sub(static_bytes) else {
        let mut largest = contributors(&CoreRows {
            dynamics: &[],
            bytes: &[],
            ..*rows
        });
        largest.truncate(CONTRIBUTORS);
        return Err(MemoryError::StaticExceedsUsable {
            static_bytes,
            usable: rows.usable,
            contributors: largest,
        });
    };
    // 6. Base pools (the ceiling-independent part is derived once).
    let mut ancestry = Ancestry::new(rows.nodes)?;
    let inputs = PoolInputs {
        descriptors: rows.dynamics,
        bytes: rows.bytes,
        nodes: rows.nodes,
        retained: rows.retained,
    };
    let layouts = layout_pools(&inputs, &mut ancestry)?;
    // 7. Reusable plan and ceilings.
    let reusable = match reusable_source {
        ReusableSource::None => None,
        ReusableSource::Policy(policy, maximum_tokens) => Some(derive_from_policy(
            policy,
            rows.maximum_sequences,
            maximum_tokens,
            rows.nodes.len(),
            rows.dynamics,
            &layouts,
        )?),
        ReusableSource::Stored(stored) => {
            // Every stored budget must name a known pool before the plan is re-derived.
            ceilings(stored, &layouts)?;
            let specs: Vec<_> = stored.buckets.iter().map(|b| b.bucket.clone()).collect();
            check_reusable_policy(
                stored.maximum_reusable_lanes,
                &specs,
                rows.maximum_sequences,
                None,
            )?;
            Some(derive_reusable(
                stored.maximum_reusable_lanes,
                &specs,
                rows.nodes.len(),
                rows.dynamics,
                &layouts,
            )?)
        }
    };
    let ceilings = match &reusable {
        Some(plan) => ceilings(plan, &layouts)?,
        None => Default::default(),
    };
    // 8. Pools with ceilings.
    let pools = layouts
        .iter()
        .map(|layout| {
            let ceiling = ceilings.get(&layout.pool_id).copied().unwrap_or(0);
            finish_pool(layout, rows.dynamics, rows.nodes, ceiling, dynamic_capacity)
        })
        .collect::<Result<Vec<_>, _>>()?;
    // 9. Global liveness.
    let (mode, liveness) = global_liveness(&pools, rows.liveness_limit)?;
    // 10. Aggregates.
    let total = |field: fn(&DynamicBackingPool) -> u64, what: &str| {
        pools
            .iter()
            .try_fold(0u64, |acc, p| acc.checked_add(field(p)))
            .ok_or_else(|| overflow(format!("plan {what}")))
    };
    let minimum_request = total(|p| p.minimum_request_bytes, "minimum request bytes")?;
    let minimum_sequence = total(|p| p.minimum_sequence_bytes, "minimum sequence bytes")?;
    let minimum_step = total(|p| p.minimum_step_bytes, "minimum step bytes")?;
    let minimum_invocation = total(|p| p.minimum_invocation_peak_bytes, "invocation peak")?;
    let minimum_runnable = [minimum_sequence, minimum_step, minimum_invocation]
        .into_iter()
        .try_fold(minimum_request, |acc, v| acc.checked_add(v))
        .ok_or_else(|| overflow("minimum runnable request bytes"))?;
    // 11. Theoretical ceiling.
    let mut theoretical = u128::from(static_bytes);
    for (layout, pool) in layouts.iter().zip(&pools) {
        theoretical = theoretical
            .checked_add(layout.theoretical)
            .and_then(|t| t.checked_add(u128::from(pool.reusable_workspace_ceiling_bytes)))
            .ok_or_else(|| overflow("plan theoretical ceiling"))?;
    }
    // 12. The capacity check, before the per-pool bounds so the message names the plan.
    let required = u128::from(static_bytes) + u128::from(minimum_runnable);
    if required > u128::from(rows.usable) {
        return Err(MemoryError::CapacityExceeded {
            required,
            static_bytes,
            dynamic_bytes: minimum_runnable,
            usable: rows.usable,
            contributors: contributors(rows),
        });
    }
    for pool in &pools {
        check_residency(pool, dynamic_capacity)?;
    }
    Ok(Derived {
        static_bytes,
        pools,
        reusable,
        mode,
        liveness,
        minimum_request,
        minimum_sequence,
        minimum_step,
        minimum_invocation,
        minimum_runnable,
        theoretical,
    })
}

/// Derives the memory plan of built nodes (rules 4.1–4.7).
///
/// The result satisfies [`validate_memory_plan`](super::validate_memory_plan) (4.8) by
/// construction, so it is not re-validated here: its rows are checked as they are emitted
/// (unique ids, the static and descriptor rules, the instances), they are sorted by their
/// maps, and every other field is `derive_core`'s own output over those rows, which the
/// validation would compute again from the same rows and compare with itself. The
/// independent checker re-derives the memory plan (its rules 15-24) on every build.
pub fn derive_memory_plan(input: &MemoryInput<'_>) -> Result<MemoryPlan, MemoryError> {
    let policy = input.policy;
    let usable = usable_capacity(
        input.device_capacity_bytes,
        policy.memory_capacity_bytes,
        policy.memory_reserve_bytes,
    )?;
    if policy.maximum_active_sequences == 0 {
        return Err(MemoryError::ZeroMaximumActiveSequences);
    }
    if input.nodes.is_empty() {
        return Err(MemoryError::NoNodes);
    }
    // 4.1 value resources, 4.3 and 4.2 emission.
    let program = ProgramValues::new(input.program);
    let mut layouts = LayoutInterner::default();
    let values = collect_value_resources(&program, policy, input.nodes, &mut layouts)?;
    let mut rows = Rows::default();
    emit_values(
        &values,
        input.nodes,
        input.selected_profiles,
        policy.maximum_active_sequences,
        &mut layouts,
        &mut rows,
    )?;
    emit_workspaces(policy, input.nodes, input.selected_profiles, &mut rows)?;
    // 1. Row limit; 3. sorted rows (the maps are keyed by resource id).
    let limits = policy.effective_wire_limits();
    check_row_count(rows.statics.len(), rows.dynamics.len(), limits)?;
    let statics: Vec<ResourceAllocation> = rows.statics.into_values().collect();
    let mut dynamics: Vec<DynamicResourceDescriptor> = rows.dynamics.into_values().collect();
    let mut ids = PoolIds::default();
    let mut bytes = Vec::with_capacity(dynamics.len());
    for descriptor in &mut dynamics {
        bytes.push(check_descriptor(descriptor)?);
        descriptor.pool_id = ids.of(descriptor)?;
    }
    let reusable_source = match &policy.reusable_execution {
        Some(reusable) => ReusableSource::Policy(reusable, policy.maximum_scheduled_tokens),
        None => ReusableSource::None,
    };
    let derived = derive_core(
        &CoreRows {
            statics: &statics,
            dynamics: &dynamics,
            bytes: &bytes,
            nodes: input.nodes,
            retained: input.retained_resources,
            usable,
            maximum_sequences: policy.maximum_active_sequences,
            liveness_limit: super::liveness::liveness_reference_limit(limits),
        },
        reusable_source,
    )?;
    let plan = MemoryPlan {
        device_capacity_bytes: input.device_capacity_bytes,
        policy_capacity_bytes: policy.memory_capacity_bytes,
        reserve_bytes: policy.memory_reserve_bytes,
        usable_capacity_bytes: usable,
        maximum_active_sequences: policy.maximum_active_sequences,
        static_bytes: derived.static_bytes,
        minimum_request_bytes: derived.minimum_request,
        minimum_sequence_bytes: derived.minimum_sequence,
        minimum_step_bytes: derived.minimum_step,
        minimum_invocation_peak_bytes: derived.minimum_invocation,
        minimum_runnable_request_bytes: derived.minimum_runnable,
        theoretical_ceiling_bytes: derived.theoretical.to_string(),
        static_allocations: statics,
        dynamic_descriptors: dynamics,
        dynamic_pools: derived.pools,
        reusable_execution: derived.reusable,
        invocation_liveness_mode: derived.mode,
        invocation_liveness: derived.liveness,
    };
    Ok(plan)
}
