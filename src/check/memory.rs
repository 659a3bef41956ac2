//! Rules 6 (rows), 7 and 15-24: the memory plan, re-derived by summation from its own rows
//! and the nodes that use them (the rules of one dynamic pool, 19-22, are in
//! [`super::pools`]).

use crate::plan::{
    AllocationKind, AllocationLifetime, DynamicResourceDemand, DynamicResourceDescriptor,
    ExecutionPlanPayload, MemoryPlan,
};
use crate::request::{IdSet, ResourceId, StorageAllocator, StorageProfile};

use super::liveness::global_liveness;
use super::order::ExecutionOrder;
use super::Findings;

/// A runtime shape: sequences, tokens, pages.
type Shape = (u64, u64, u64);

/// Logical bytes of a demand at a shape (`None`: outside the demand's bounds, zero, or
/// overflow).
fn evaluate(demand: &DynamicResourceDemand, (s, t, p): Shape) -> Option<u64> {
    let bytes = match demand {
        DynamicResourceDemand::Fixed { bytes } => Some(*bytes),
        DynamicResourceDemand::ActualSequences {
            bytes_per_sequence,
            maximum_sequences,
        } => (s <= u64::from(*maximum_sequences)).then(|| bytes_per_sequence.checked_mul(s))?,
        DynamicResourceDemand::Tokens {
            bytes_per_token,
            maximum_tokens,
        } => (t <= *maximum_tokens).then(|| bytes_per_token.checked_mul(t))?,
        DynamicResourceDemand::Affine {
            fixed_bytes,
            bytes_per_sequence,
            maximum_sequences,
            bytes_per_token,
            maximum_tokens,
        } => (s <= u64::from(*maximum_sequences) && t <= *maximum_tokens).then(|| {
            let seq = bytes_per_sequence.checked_mul(s)?;
            let tok = bytes_per_token.checked_mul(t)?;
            fixed_bytes.checked_add(seq)?.checked_add(tok)
        })?,
        DynamicResourceDemand::Pages {
            bytes_per_page,
            maximum_pages,
        } => (p <= *maximum_pages).then(|| bytes_per_page.checked_mul(p))?,
        DynamicResourceDemand::BoundedShapeBuckets { buckets } => buckets
            .iter()
            .find(|b| {
                s <= u64::from(b.maximum_sequences) && t <= b.maximum_tokens && p <= b.maximum_pages
            })
            .map(|b| b.bytes),
    };
    bytes.filter(|b| *b > 0)
}

/// The largest shape a demand allows.
fn largest_shape(demand: &DynamicResourceDemand) -> Option<Shape> {
    Some(match demand {
        DynamicResourceDemand::Fixed { .. } => (1, 1, 1),
        DynamicResourceDemand::ActualSequences {
            maximum_sequences, ..
        } => (u64::from(*maximum_sequences), 1, 1),
        DynamicResourceDemand::Tokens { maximum_tokens, .. } => (1, *maximum_tokens, 1),
        DynamicResourceDemand::Affine {
            maximum_sequences,
            maximum_tokens,
            ..
        } => (u64::from(*maximum_sequences), *maximum_tokens, 1),
        DynamicResourceDemand::Pages { maximum_pages, .. } => (1, 1, *maximum_pages),
        DynamicResourceDemand::BoundedShapeBuckets { buckets } => {
            let last = buckets.last()?;
            (
                u64::from(last.maximum_sequences),
                last.maximum_tokens,
                last.maximum_pages,
            )
        }
    })
}

fn round_up(value: u64, to: u64) -> Option<u64> {
    if to == 0 {
        return None;
    }
    value.div_ceil(to).checked_mul(to)
}

/// Physical bytes: rounded up to the alignment, then to the profile's block.
fn physical(bytes: u64, alignment: u64, profile: &StorageProfile) -> Option<u64> {
    let aligned = round_up(bytes, alignment)?;
    match profile.allocator {
        StorageAllocator::LinearArena => Some(aligned),
        StorageAllocator::FixedBlockArena { block_bytes } => round_up(aligned, block_bytes),
    }
}

pub(super) fn minimum_bytes(d: &DynamicResourceDescriptor) -> Option<u64> {
    physical(
        evaluate(&d.demand, (1, 1, 1))?,
        d.alignment_bytes,
        &d.storage.profile,
    )
}

pub(super) fn theoretical_bytes(d: &DynamicResourceDescriptor) -> Option<u64> {
    let shape = largest_shape(&d.demand)?;
    physical(
        evaluate(&d.demand, shape)?,
        d.alignment_bytes,
        &d.storage.profile,
    )
}

/// A byte count that may have overflowed, for messages.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct Shown(pub(super) Option<u64>);

impl std::fmt::Display for Shown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(bytes) => write!(f, "{bytes}"),
            None => f.write_str("an overflow"),
        }
    }
}

pub(super) fn sum(values: impl IntoIterator<Item = u64>) -> Option<u64> {
    values.into_iter().try_fold(0u64, u64::checked_add)
}

pub(super) fn check(payload: &ExecutionPlanPayload, found: &mut Findings) {
    let memory = &payload.memory;
    capacity(memory, found);
    rows(payload, found);
    let static_bytes = static_rows(memory, found);
    descriptors(memory, found);
    let dynamic_capacity = memory
        .usable_capacity_bytes
        .checked_sub(static_bytes.unwrap_or(0));
    let order = ExecutionOrder::of(payload);
    let mut theoretical_total: u128 = static_bytes.map(u128::from).unwrap_or(0);
    for (p, pool) in memory.dynamic_pools.iter().enumerate() {
        if let Some(t) = super::pools::check(payload, &order, p, pool, dynamic_capacity, found) {
            theoretical_total = theoretical_total.saturating_add(t);
        }
    }
    global_liveness(memory, found);
    totals(memory, static_bytes, theoretical_total, found);
}

/// 15.
fn capacity(m: &MemoryPlan, found: &mut Findings) {
    if m.device_capacity_bytes == 0 {
        found.add(15, "payload.memory.device_capacity_bytes", "is zero");
    }
    if m.policy_capacity_bytes == 0 || m.policy_capacity_bytes > m.device_capacity_bytes {
        found.add(
            15,
            "payload.memory.policy_capacity_bytes",
            "must be positive and at most the device's",
        );
    }
    if m.reserve_bytes >= m.policy_capacity_bytes {
        found.add(
            15,
            "payload.memory.reserve_bytes",
            "must be below the policy capacity",
        );
    }
    if m.policy_capacity_bytes.checked_sub(m.reserve_bytes) != Some(m.usable_capacity_bytes) {
        found.add(
            15,
            "payload.memory.usable_capacity_bytes",
            "is not policy capacity − reserve",
        );
    }
    if m.maximum_active_sequences == 0 {
        found.add(15, "payload.memory.maximum_active_sequences", "is zero");
    }
}

/// 6 (rows of node resources), 7 and 16.
fn rows(payload: &ExecutionPlanPayload, found: &mut Findings) {
    let m = &payload.memory;
    let statics: Vec<&ResourceId> = m
        .static_allocations
        .iter()
        .map(|a| &a.resource_id)
        .collect();
    let dynamics: Vec<&ResourceId> = m
        .dynamic_descriptors
        .iter()
        .map(|d| &d.base_resource_id)
        .collect();
    let pools: Vec<&String> = m.dynamic_pools.iter().map(|p| &p.pool_id).collect();
    for (name, ids) in [
        ("static_allocations", &statics),
        ("dynamic_descriptors", &dynamics),
    ] {
        if let Some(k) = ids.windows(2).position(|w| w[0] >= w[1]) {
            found.add(
                16,
                format!("payload.memory.{name}[{}]", k + 1),
                "rows are not strictly ascending by resource id",
            );
        }
    }
    if let Some(k) = pools.windows(2).position(|w| w[0] >= w[1]) {
        found.add(
            16,
            format!("payload.memory.dynamic_pools[{}]", k + 1),
            "pools are not strictly ascending by id",
        );
    }
    let static_set: IdSet<&ResourceId> = statics.iter().copied().collect();
    let dynamic_set: IdSet<&ResourceId> = dynamics.iter().copied().collect();
    for both in statics.iter().filter(|id| dynamic_set.contains(*id)) {
        found.add(
            16,
            "payload.memory",
            format!("{both} is both static and dynamic"),
        );
    }
    let mut used = IdSet::default();
    for (i, node) in payload.nodes.iter().enumerate() {
        for resource in &node.resources {
            used.insert(resource);
            if !static_set.contains(resource) && !dynamic_set.contains(resource) {
                found.add(
                    6,
                    format!("payload.nodes[{i}].resources"),
                    format!("{resource} has no memory row"),
                );
            }
        }
    }
    for (k, id) in statics.iter().enumerate() {
        if !used.contains(id) {
            found.add(
                7,
                format!("payload.memory.static_allocations[{k}]"),
                format!("{id} is no node's resource"),
            );
        }
    }
    for (k, id) in dynamics.iter().enumerate() {
        if !used.contains(id) {
            found.add(
                7,
                format!("payload.memory.dynamic_descriptors[{k}]"),
                format!("{id} is no node's resource"),
            );
        }
    }
}

/// 17; returns the recomputed static bytes.
fn static_rows(m: &MemoryPlan, found: &mut Findings) -> Option<u64> {
    for (k, a) in m.static_allocations.iter().enumerate() {
        let at = format!("payload.memory.static_allocations[{k}]");
        let stride = physical(a.per_instance_bytes, a.alignment_bytes, &a.storage.profile);
        if a.per_instance_bytes == 0
            || a.instance_count != 1
            || !a.alignment_bytes.is_power_of_two()
            || stride != Some(a.instance_stride_bytes)
            || a.size_bytes != a.instance_stride_bytes
        {
            let stride_shown = Shown(stride);
            found.add(
                17,
                &at,
                format!(
                    "one instance of {} bytes aligned to {} under {} has stride {stride_shown} and size \
                     equal to it; the row says stride {}, count {}, size {}",
                    a.per_instance_bytes,
                    a.alignment_bytes,
                    a.storage.profile,
                    a.instance_stride_bytes,
                    a.instance_count,
                    a.size_bytes
                ),
            );
        }
        if a.lifetime != AllocationLifetime::Plan {
            found.add(
                17,
                format!("{at}.lifetime"),
                "a static allocation lives for the plan",
            );
        }
        if matches!(
            a.kind,
            AllocationKind::Scratch { .. } | AllocationKind::Binding { .. }
        ) {
            found.add(
                17,
                format!("{at}.kind"),
                "scratch and binding workspaces are never static",
            );
        }
    }
    let total = sum(m.static_allocations.iter().map(|a| a.size_bytes));
    if total != Some(m.static_bytes) {
        let total_shown = Shown(total);
        found.add(
            17,
            "payload.memory.static_bytes",
            format!("the static rows sum to {total_shown}"),
        );
    }
    total
}

/// 18.
fn descriptors(m: &MemoryPlan, found: &mut Findings) {
    // (pool, member) pairs, so that membership is a lookup, not a scan of the pool's list.
    let listed: IdSet<(&String, &ResourceId)> = m
        .dynamic_pools
        .iter()
        .flat_map(|p| p.resource_ids.iter().map(move |r| (&p.pool_id, r)))
        .collect();
    for (k, d) in m.dynamic_descriptors.iter().enumerate() {
        let at = || format!("payload.memory.dynamic_descriptors[{k}]");
        if d.lifetime == AllocationLifetime::Plan {
            found.add(
                18,
                format!("{}.lifetime", at()),
                "a dynamic resource never lives for the plan",
            );
        }
        if !d.alignment_bytes.is_power_of_two() {
            found.add(
                18,
                format!("{}.alignment_bytes", at()),
                "not a power of two",
            );
        }
        if d.theoretical_maximum_instances != m.maximum_active_sequences {
            found.add(
                18,
                format!("{}.theoretical_maximum_instances", at()),
                "is not the sequence ceiling",
            );
        }
        if minimum_bytes(d).is_none() {
            found.add(
                18,
                format!("{}.demand", at()),
                "has no positive size at the minimum shape",
            );
        }
        if !listed.contains(&(&d.pool_id, &d.base_resource_id)) {
            found.add(
                18,
                format!("{}.pool_id", at()),
                format!("pool {} does not list {}", d.pool_id, d.base_resource_id),
            );
        }
    }
}

/// 24.
fn totals(m: &MemoryPlan, static_bytes: Option<u64>, theoretical: u128, found: &mut Findings) {
    let pools = &m.dynamic_pools;
    let fields: [(&str, u64, Option<u64>); 4] = [
        (
            "minimum_request_bytes",
            m.minimum_request_bytes,
            sum(pools.iter().map(|p| p.minimum_request_bytes)),
        ),
        (
            "minimum_sequence_bytes",
            m.minimum_sequence_bytes,
            sum(pools.iter().map(|p| p.minimum_sequence_bytes)),
        ),
        (
            "minimum_step_bytes",
            m.minimum_step_bytes,
            sum(pools.iter().map(|p| p.minimum_step_bytes)),
        ),
        (
            "minimum_invocation_peak_bytes",
            m.minimum_invocation_peak_bytes,
            sum(pools.iter().map(|p| p.minimum_invocation_peak_bytes)),
        ),
    ];
    for (field, stored, derived) in fields {
        if Some(stored) != derived {
            let derived_shown = Shown(derived);
            found.add(
                24,
                format!("payload.memory.{field}"),
                format!("the pools sum to {derived_shown}"),
            );
        }
    }
    let runnable = sum(fields.iter().map(|f| f.1));
    if runnable != Some(m.minimum_runnable_request_bytes) {
        let runnable_shown = Shown(runnable);
        found.add(
            24,
            "payload.memory.minimum_runnable_request_bytes",
            format!("the four minima sum to {runnable_shown}"),
        );
    }
    let needed = static_bytes.and_then(|s| s.checked_add(m.minimum_runnable_request_bytes));
    if needed.is_none_or(|n| n > m.usable_capacity_bytes) {
        let needed_shown = Shown(needed);
        found.add(
            24,
            "payload.memory.minimum_runnable_request_bytes",
            format!(
                "static + minimum runnable bytes ({needed_shown}) exceed the usable {}",
                m.usable_capacity_bytes
            ),
        );
    }
    if m.theoretical_ceiling_bytes != theoretical.to_string() {
        found.add(
            24,
            "payload.memory.theoretical_ceiling_bytes",
            format!("static + pool ceilings give {theoretical}"),
        );
    }
}
