//! `MemoryPlan::validate` (rules 4.8): every structural rule of a stored memory plan,
//! with pools, reusable budgets, liveness and aggregates re-derived from the stored rows and
//! the plan nodes and compared; no stored number is trusted.

use std::collections::BTreeSet;

use crate::plan::PlanNode;
use crate::request::{ResourceId, WireLimits};

use super::derive::{check_row_count, derive_core, usable_capacity, CoreRows, ReusableSource};
use super::emit::{check_descriptor, check_static};
use super::error::MemoryError;
use super::{DynamicBackingPool, MemoryPlan};

fn strictly_sorted<T, K: Ord + ToString>(
    table: &'static str,
    rows: &[T],
    key: impl Fn(&T) -> &K,
) -> Result<(), MemoryError> {
    for pair in rows.windows(2) {
        let (a, b) = (key(&pair[0]), key(&pair[1]));
        if a >= b {
            return Err(MemoryError::UnsortedRows {
                table,
                previous: a.to_string(),
                id: b.to_string(),
            });
        }
    }
    Ok(())
}

fn aggregate<T: PartialEq + ToString>(
    field: &'static str,
    stored: &T,
    derived: &T,
) -> Result<(), MemoryError> {
    if stored != derived {
        return Err(MemoryError::AggregateMismatch {
            field,
            stored: stored.to_string(),
            derived: derived.to_string(),
        });
    }
    Ok(())
}

fn compare_pool(
    stored: &DynamicBackingPool,
    derived: &DynamicBackingPool,
) -> Result<(), MemoryError> {
    let differs = |field: &'static str| MemoryError::PoolMismatch {
        pool: stored.pool_id.clone(),
        field,
    };
    let checks: [(&'static str, bool); 13] = [
        (
            "compatibility",
            stored.compatibility == derived.compatibility,
        ),
        ("resource_ids", stored.resource_ids == derived.resource_ids),
        (
            "minimum_request_bytes",
            stored.minimum_request_bytes == derived.minimum_request_bytes,
        ),
        (
            "minimum_sequence_bytes",
            stored.minimum_sequence_bytes == derived.minimum_sequence_bytes,
        ),
        (
            "step_resource_slots",
            stored.step_resource_slots == derived.step_resource_slots,
        ),
        (
            "minimum_step_bytes",
            stored.minimum_step_bytes == derived.minimum_step_bytes,
        ),
        (
            "minimum_invocation_peak_bytes",
            stored.minimum_invocation_peak_bytes == derived.minimum_invocation_peak_bytes,
        ),
        (
            "theoretical_ceiling_bytes",
            stored.theoretical_ceiling_bytes == derived.theoretical_ceiling_bytes,
        ),
        (
            "reusable_workspace_ceiling_bytes",
            stored.reusable_workspace_ceiling_bytes == derived.reusable_workspace_ceiling_bytes,
        ),
        (
            "provisioning.minimum_resident_bytes",
            stored.provisioning.minimum_resident_bytes
                == derived.provisioning.minimum_resident_bytes,
        ),
        (
            "provisioning.maximum_resident_bytes",
            stored.provisioning.maximum_resident_bytes
                == derived.provisioning.maximum_resident_bytes,
        ),
        (
            "invocation_liveness_mode",
            stored.invocation_liveness_mode == derived.invocation_liveness_mode,
        ),
        (
            "invocation_liveness",
            stored.invocation_liveness == derived.invocation_liveness,
        ),
    ];
    if let Some((field, _)) = checks.iter().find(|(_, equal)| !equal) {
        return Err(differs(field));
    }
    // Remaining fields (mode of provisioning) are single-valued enums.
    debug_assert_eq!(stored.provisioning.mode, derived.provisioning.mode);
    Ok(())
}

/// Validates a stored memory plan against the plan nodes and the retained resources
/// (retained values' resources ∪ terminal output resources).
///
/// The nodes are needed because step slots and invocation liveness are facts about which
/// nodes use which resources and how the nodes are ordered; every pool, the reusable plan,
/// the global liveness and every aggregate are re-derived from the stored descriptors and
/// the nodes and compared with the stored values.
pub fn validate_memory_plan(
    plan: &MemoryPlan,
    nodes: &[PlanNode],
    retained_resources: &BTreeSet<ResourceId>,
) -> Result<(), MemoryError> {
    validate_memory_plan_within(plan, nodes, retained_resources, WireLimits::REFERENCE)
}

/// [`validate_memory_plan`] under the given wire limits (the policy's `wire_limits`).
pub fn validate_memory_plan_within(
    plan: &MemoryPlan,
    nodes: &[PlanNode],
    retained_resources: &BTreeSet<ResourceId>,
    limits: WireLimits,
) -> Result<(), MemoryError> {
    if plan.maximum_active_sequences == 0 {
        return Err(MemoryError::ZeroMaximumActiveSequences);
    }
    if nodes.is_empty() {
        return Err(MemoryError::NoNodes);
    }
    check_row_count(
        plan.static_allocations.len(),
        plan.dynamic_descriptors.len(),
        limits,
    )?;
    strictly_sorted("static allocation", &plan.static_allocations, |s| {
        &s.resource_id
    })?;
    strictly_sorted("dynamic descriptor", &plan.dynamic_descriptors, |d| {
        &d.base_resource_id
    })?;
    strictly_sorted("dynamic pool", &plan.dynamic_pools, |p| &p.pool_id)?;
    let usable = usable_capacity(
        plan.device_capacity_bytes,
        plan.policy_capacity_bytes,
        plan.reserve_bytes,
    )?;
    aggregate(
        "usable_capacity_bytes",
        &plan.usable_capacity_bytes,
        &usable,
    )?;
    for allocation in &plan.static_allocations {
        check_static(allocation)?;
    }
    let mut bytes = Vec::with_capacity(plan.dynamic_descriptors.len());
    for descriptor in &plan.dynamic_descriptors {
        if plan
            .static_allocations
            .binary_search_by(|s| s.resource_id.cmp(&descriptor.base_resource_id))
            .is_ok()
        {
            return Err(MemoryError::StaticAndDynamic {
                resource: descriptor.base_resource_id.clone(),
            });
        }
        bytes.push(check_descriptor(descriptor)?);
        if descriptor.theoretical_maximum_instances != plan.maximum_active_sequences {
            return Err(MemoryError::InstancesMismatch {
                resource: descriptor.base_resource_id.clone(),
                stored: descriptor.theoretical_maximum_instances,
                expected: plan.maximum_active_sequences,
            });
        }
    }
    let reusable_source = match &plan.reusable_execution {
        Some(stored) => ReusableSource::Stored(stored),
        None => ReusableSource::None,
    };
    let derived = derive_core(
        &CoreRows {
            statics: &plan.static_allocations,
            dynamics: &plan.dynamic_descriptors,
            bytes: &bytes,
            nodes,
            retained: retained_resources,
            usable,
            maximum_sequences: plan.maximum_active_sequences,
            liveness_limit: super::liveness::liveness_reference_limit(limits),
        },
        reusable_source,
    )?;
    aggregate("static_bytes", &plan.static_bytes, &derived.static_bytes)?;
    let stored_ids: Vec<&String> = plan.dynamic_pools.iter().map(|p| &p.pool_id).collect();
    let derived_ids: Vec<&String> = derived.pools.iter().map(|p| &p.pool_id).collect();
    if stored_ids != derived_ids {
        return Err(MemoryError::PoolSetMismatch {
            stored: stored_ids.into_iter().cloned().collect(),
            derived: derived_ids.into_iter().cloned().collect(),
        });
    }
    for (stored, derived) in plan.dynamic_pools.iter().zip(&derived.pools) {
        compare_pool(stored, derived)?;
    }
    if let (Some(stored), Some(derived)) = (&plan.reusable_execution, &derived.reusable) {
        if stored.maximum_device_executables != derived.maximum_device_executables {
            return Err(MemoryError::ReusablePlanMismatch {
                field: "maximum_device_executables",
            });
        }
        if stored.buckets != derived.buckets {
            return Err(MemoryError::ReusablePlanMismatch { field: "buckets" });
        }
    }
    if plan.invocation_liveness_mode != derived.mode {
        return Err(MemoryError::LivenessMismatch { field: "mode" });
    }
    if plan.invocation_liveness != derived.liveness {
        return Err(MemoryError::LivenessMismatch { field: "rows" });
    }
    aggregate(
        "minimum_request_bytes",
        &plan.minimum_request_bytes,
        &derived.minimum_request,
    )?;
    aggregate(
        "minimum_sequence_bytes",
        &plan.minimum_sequence_bytes,
        &derived.minimum_sequence,
    )?;
    aggregate(
        "minimum_step_bytes",
        &plan.minimum_step_bytes,
        &derived.minimum_step,
    )?;
    aggregate(
        "minimum_invocation_peak_bytes",
        &plan.minimum_invocation_peak_bytes,
        &derived.minimum_invocation,
    )?;
    aggregate(
        "minimum_runnable_request_bytes",
        &plan.minimum_runnable_request_bytes,
        &derived.minimum_runnable,
    )?;
    aggregate(
        "theoretical_ceiling_bytes",
        &plan.theoretical_ceiling_bytes,
        &derived.theoretical.to_string(),
    )?;
    Ok(())
}
