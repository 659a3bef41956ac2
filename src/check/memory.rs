//! Rules 6 (rows), 7 and 15-24: the memory plan, re-derived by summation from its own rows
//! and the nodes that use them.

use std::collections::{BTreeMap, BTreeSet};

use crate::canonical::canonical_fingerprint;
use crate::plan::{
    AllocationKind, AllocationLifetime, DynamicBackingPool, DynamicResourceDemand,
    DynamicResourceDescriptor, ExecutionPlanPayload, MemoryPlan, PoolCompatibilityKey,
    StepSlotKind,
};
use crate::request::{BufferUsage, ContractVersion, ResourceId, StorageAllocator, StorageProfile};

use super::liveness::{global_liveness, invocation, phase_peak};
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

fn minimum_bytes(d: &DynamicResourceDescriptor) -> Option<u64> {
    physical(
        evaluate(&d.demand, (1, 1, 1))?,
        d.alignment_bytes,
        &d.storage.profile,
    )
}

fn theoretical_bytes(d: &DynamicResourceDescriptor) -> Option<u64> {
    let shape = largest_shape(&d.demand)?;
    physical(
        evaluate(&d.demand, shape)?,
        d.alignment_bytes,
        &d.storage.profile,
    )
}

/// A byte count that may have overflowed, for messages.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Shown(Option<u64>);

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
        if let Some(t) = pool_rules(payload, &order, p, pool, dynamic_capacity, found) {
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
    let static_set: BTreeSet<&ResourceId> = statics.iter().copied().collect();
    let dynamic_set: BTreeSet<&ResourceId> = dynamics.iter().copied().collect();
    for both in static_set.intersection(&dynamic_set) {
        found.add(
            16,
            "payload.memory",
            format!("{both} is both static and dynamic"),
        );
    }
    let mut used = BTreeSet::new();
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
    let listed: BTreeSet<(&String, &ResourceId)> = m
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

/// 19-22 for one pool; returns its theoretical ceiling plus reusable ceiling.
fn pool_rules(
    payload: &ExecutionPlanPayload,
    order: &ExecutionOrder<'_>,
    p: usize,
    pool: &DynamicBackingPool,
    dynamic_capacity: Option<u64>,
    found: &mut Findings,
) -> Option<u128> {
    let at = format!("payload.memory.dynamic_pools[{p}]");
    let m = &payload.memory;
    // 19.
    match canonical_fingerprint("pool key", &pool.compatibility) {
        Ok(hash) if pool.pool_id == format!("dynamic-pool/sha256/{hash}") => {}
        _ => found.add(
            19,
            format!("{at}.pool_id"),
            "is not the canonical hash of the compatibility key",
        ),
    }
    let members: Vec<&DynamicResourceDescriptor> = m
        .dynamic_descriptors
        .iter()
        .filter(|d| d.pool_id == pool.pool_id)
        .collect();
    let member_ids: Vec<&ResourceId> = members.iter().map(|d| &d.base_resource_id).collect();
    if pool.resource_ids.iter().collect::<Vec<_>>() != member_ids {
        found.add(
            19,
            format!("{at}.resource_ids"),
            "are not the descriptors that name this pool, sorted",
        );
    }
    for d in &members {
        let key = PoolCompatibilityKey {
            version: ContractVersion::new(1, 0),
            profile: d.storage.profile,
            usage: d.usage,
            element_type: d.element_type,
            logical_layout_fingerprint: d.storage.logical_layout_fingerprint.clone(),
            alignment_bytes: d.alignment_bytes,
        };
        if key != pool.compatibility {
            found.add(
                19,
                format!("{at}.compatibility"),
                format!("{} has another key", d.base_resource_id),
            );
        }
    }
    // 20, by summation.
    let minimum: BTreeMap<&ResourceId, u64> = members
        .iter()
        .filter_map(|d| Some((&d.base_resource_id, minimum_bytes(d)?)))
        .collect();
    let of_lifetime = |lifetime| {
        sum(members
            .iter()
            .filter(|d| d.lifetime == lifetime)
            .map(|d| minimum.get(&d.base_resource_id).copied().unwrap_or(0)))
    };
    let request = of_lifetime(AllocationLifetime::Request);
    let sequence = of_lifetime(AllocationLifetime::Sequence);
    for (field, stored, derived) in [
        ("minimum_request_bytes", pool.minimum_request_bytes, request),
        (
            "minimum_sequence_bytes",
            pool.minimum_sequence_bytes,
            sequence,
        ),
    ] {
        if Some(stored) != derived {
            let derived_shown = Shown(derived);
            found.add(
                20,
                format!("{at}.{field}"),
                format!("the members sum to {derived_shown}"),
            );
        }
    }
    let step = step_slots(payload, order, &at, pool, &members, &minimum, found);
    if Some(pool.minimum_step_bytes) != step {
        let step_shown = Shown(step);
        found.add(
            20,
            format!("{at}.minimum_step_bytes"),
            format!("the slots' largest members sum to {step_shown}"),
        );
    }
    let phases = invocation(payload, order, &at, pool, &members, found);
    let peak = phase_peak(&phases, &minimum);
    if Some(pool.minimum_invocation_peak_bytes) != peak {
        let peak_shown = Shown(peak);
        found.add(
            20,
            format!("{at}.minimum_invocation_peak_bytes"),
            format!("the rows give {peak_shown}"),
        );
    }
    let resident = sum([
        pool.minimum_request_bytes,
        pool.minimum_sequence_bytes,
        pool.minimum_step_bytes,
        pool.minimum_invocation_peak_bytes,
    ]);
    let prov = &pool.provisioning;
    if resident != Some(prov.minimum_resident_bytes) || prov.minimum_resident_bytes == 0 {
        let resident_shown = Shown(resident);
        found.add(
            20,
            format!("{at}.provisioning.minimum_resident_bytes"),
            format!("must be the positive total {resident_shown}"),
        );
    }
    let mut theoretical: u128 = 0;
    for d in &members {
        match theoretical_bytes(d) {
            Some(b) => {
                theoretical = theoretical
                    .saturating_add(u128::from(b) * u128::from(d.theoretical_maximum_instances));
            }
            None => found.add(
                20,
                format!("{at}.theoretical_ceiling_bytes"),
                format!("{} has no size at its largest shape", d.base_resource_id),
            ),
        }
    }
    if pool.theoretical_ceiling_bytes != theoretical.to_string() {
        found.add(
            20,
            format!("{at}.theoretical_ceiling_bytes"),
            format!("the members give {theoretical}"),
        );
    }
    let ceiling = theoretical.saturating_add(u128::from(pool.reusable_workspace_ceiling_bytes));
    let live = live_maximum(pool, &members, &phases)
        .map(|live| live.saturating_add(u128::from(pool.reusable_workspace_ceiling_bytes)));
    let maximum = match (live, dynamic_capacity) {
        (Some(live), Some(c)) => Some(u64::try_from(live.min(u128::from(c))).unwrap_or(c)),
        _ => None,
    };
    if maximum != Some(prov.maximum_resident_bytes)
        || prov.maximum_resident_bytes < prov.minimum_resident_bytes
    {
        let maximum_shown = Shown(maximum);
        found.add(
            20,
            format!("{at}.provisioning.maximum_resident_bytes"),
            format!("must be min(live maximum + reusable ceiling, dynamic capacity) = {maximum_shown} and at least the minimum"),
        );
    }
    Some(ceiling)
}

/// What a pool holds at once at the largest shapes, read from the pool's own slots and the
/// invocation phases rule 22 derived from its rows: request and sequence members at their
/// largest size × instances, each step slot at its largest member, and the largest
/// invocation phase with members at their largest sizes. `None` when a member has no size at
/// its largest shape.
fn live_maximum(
    pool: &DynamicBackingPool,
    members: &[&DynamicResourceDescriptor],
    phases: &[Vec<&ResourceId>],
) -> Option<u128> {
    let largest: BTreeMap<&ResourceId, u64> = members
        .iter()
        .map(|d| Some((&d.base_resource_id, theoretical_bytes(d)?)))
        .collect::<Option<_>>()?;
    let mut live: u128 = 0;
    for d in members {
        if matches!(
            d.lifetime,
            AllocationLifetime::Request | AllocationLifetime::Sequence
        ) {
            let bytes = u128::from(*largest.get(&d.base_resource_id)?);
            live =
                live.checked_add(bytes.checked_mul(u128::from(d.theoretical_maximum_instances))?)?;
        }
    }
    for slot in &pool.step_resource_slots {
        let widest = slot
            .resource_ids
            .iter()
            .filter_map(|id| largest.get(id).copied())
            .max()
            .unwrap_or(0);
        live = live.checked_add(u128::from(widest))?;
    }
    let mut invocation: u128 = 0;
    for phase in phases {
        let mut bytes: u128 = 0;
        for id in phase {
            bytes = bytes.checked_add(u128::from(largest.get(id).copied().unwrap_or(0)))?;
        }
        invocation = invocation.max(bytes);
    }
    live.checked_add(invocation)
}

/// 21; returns the pool's minimum step bytes as the slots give them.
fn step_slots(
    payload: &ExecutionPlanPayload,
    order: &ExecutionOrder<'_>,
    at: &str,
    pool: &DynamicBackingPool,
    members: &[&DynamicResourceDescriptor],
    minimum: &BTreeMap<&ResourceId, u64>,
    found: &mut Findings,
) -> Option<u64> {
    let step_members: BTreeSet<&ResourceId> = members
        .iter()
        .filter(|d| d.lifetime == AllocationLifetime::Step)
        .map(|d| &d.base_resource_id)
        .collect();
    let mut in_slots: BTreeSet<&ResourceId> = BTreeSet::new();
    let retained: BTreeSet<&ResourceId> = payload
        .retained_completion_values
        .iter()
        .map(|r| &r.resource_id)
        .chain(&payload.terminal_output_resources)
        .collect();
    let by_id: BTreeMap<&ResourceId, &&DynamicResourceDescriptor> =
        members.iter().map(|d| (&d.base_resource_id, d)).collect();
    let mut total = Some(0u64);
    for (s, slot) in pool.step_resource_slots.iter().enumerate() {
        let sat = format!("{at}.step_resource_slots[{s}]");
        for id in &slot.resource_ids {
            if !step_members.contains(id) || !in_slots.insert(id) {
                found.add(
                    21,
                    &sat,
                    format!("{id} is not a step member of the pool, or is in two slots"),
                );
            }
        }
        let single = slot.resource_ids.len() == 1;
        if (slot.kind == StepSlotKind::Dedicated) != single || slot.resource_ids.is_empty() {
            found.add(
                21,
                format!("{sat}.kind"),
                "a dedicated slot has exactly one member, a shared slot more",
            );
        }
        if !single {
            let mut intervals = Vec::new();
            for id in &slot.resource_ids {
                let reusable = by_id.get(id).is_some_and(|d| {
                    d.usage == BufferUsage::Activations
                        && d.kind == AllocationKind::Value
                        && matches!(d.demand, DynamicResourceDemand::Tokens { .. })
                }) && !retained.contains(id);
                if !reusable {
                    found.add(21, &sat, format!("{id} may not share a slot (not a token-scaled, unretained activation value)"));
                }
                if let Some((first, last)) = order.use_interval(id) {
                    intervals.push((first, last, id));
                }
            }
            // Every pair must be ordered. Sorted by first use, it is enough that each
            // member's first use reaches its last use and each member's last use reaches the
            // next member's first use: ordering then follows by transitivity.
            intervals.sort();
            for member in &intervals {
                if !order.ancestor(member.0, member.1) {
                    found.add(
                        21,
                        &sat,
                        format!(
                            "{}: its first use does not reach its last through dependencies",
                            member.2
                        ),
                    );
                }
            }
            for pair in intervals.windows(2) {
                let (early, late) = (&pair[0], &pair[1]);
                if !(early.1 < late.0 && order.ancestor(early.1, late.0)) {
                    found.add(
                        21,
                        &sat,
                        format!("{} and {} are not ordered by dependencies", early.2, late.2),
                    );
                }
            }
        }
        let largest = slot
            .resource_ids
            .iter()
            .filter_map(|id| minimum.get(id).copied())
            .max()
            .unwrap_or(0);
        total = total.and_then(|t| t.checked_add(largest));
    }
    for missing in step_members.difference(&in_slots) {
        found.add(
            21,
            format!("{at}.step_resource_slots"),
            format!("step member {missing} is in no slot"),
        );
    }
    total
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
