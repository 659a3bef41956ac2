//! Rules 19-22 for one dynamic pool: its id is the hash of its compatibility key, its
//! members are exactly the descriptors of that key, its ceilings are the sums and live
//! maxima of its members' bytes, and its step slots give the pool's minimum step bytes.

use std::collections::BTreeSet;

use crate::canonical::canonical_fingerprint;
use crate::plan::{
    AllocationKind, AllocationLifetime, DynamicBackingPool, DynamicResourceDemand,
    DynamicResourceDescriptor, ExecutionPlanPayload, PoolCompatibilityKey, StepSlotKind,
};
use crate::request::{BufferUsage, ContractVersion, IdMap, IdSet, ResourceId};

use super::liveness::{invocation, phase_peak};
use super::memory::{minimum_bytes, sum, theoretical_bytes, Shown};
use super::order::ExecutionOrder;
use super::Findings;

/// 19-22 for one pool; returns its theoretical ceiling plus reusable ceiling.
pub(super) fn check(
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
    let minimum: IdMap<&ResourceId, u64> = members
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
    let largest: IdMap<&ResourceId, u64> = members
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
    minimum: &IdMap<&ResourceId, u64>,
    found: &mut Findings,
) -> Option<u64> {
    let step_members: BTreeSet<&ResourceId> = members
        .iter()
        .filter(|d| d.lifetime == AllocationLifetime::Step)
        .map(|d| &d.base_resource_id)
        .collect();
    let mut in_slots: IdSet<&ResourceId> = IdSet::default();
    let retained: IdSet<&ResourceId> = payload
        .retained_completion_values
        .iter()
        .map(|r| &r.resource_id)
        .chain(&payload.terminal_output_resources)
        .collect();
    let by_id: IdMap<&ResourceId, &&DynamicResourceDescriptor> =
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
    for missing in step_members.iter().filter(|id| !in_slots.contains(*id)) {
        found.add(
            21,
            format!("{at}.step_resource_slots"),
            format!("step member {missing} is in no slot"),
        );
    }
    total
}
