//! Backing pools (rules 4.5): descriptors with equal compatibility keys share a pool;
//! each pool gets its minima, step slots with ordered first-fit reuse, invocation liveness,
//! theoretical ceiling and provisioning bounds.
//!
//! Cost: one pass over every node's resources (O(Σ|resources| log R)) finds the users of
//! every step and invocation resource; grouping is O(R log R). Step slots are first-fit over
//! the open reusable slots; each slot keeps the largest last-user index and a small
//! "frontier" of last users whose ancestry implies all others', so a joining interval costs
//! one index comparison plus one ancestry query per frontier node (one in a chain).

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use crate::plan::PlanNode;
use crate::request::fingerprints::prefixed_canonical_id;
use crate::request::{BufferUsage, ContractVersion, IdMap, ResourceId};

use super::ancestry::Ancestry;
use super::emit::DescriptorBytes;
use super::error::{overflow, MemoryError};
use super::liveness::invocation_phases;
use super::{
    AllocationKind, AllocationLifetime, DynamicBackingPool, DynamicResourceDemand,
    DynamicResourceDescriptor, InvocationLivenessMode, InvocationLivenessRow, PoolCompatibilityKey,
    PoolProvisioning, ProvisioningMode, StepResourceSlot, StepSlotKind,
};

/// The prefix of every pool id.
pub const POOL_ID_PREFIX: &str = "dynamic-pool/sha256/";

/// The compatibility key of a descriptor.
pub fn compatibility_key(descriptor: &DynamicResourceDescriptor) -> PoolCompatibilityKey {
    PoolCompatibilityKey {
        version: ContractVersion::new(1, 0),
        profile: descriptor.storage.profile,
        usage: descriptor.usage,
        element_type: descriptor.element_type,
        logical_layout_fingerprint: descriptor.storage.logical_layout_fingerprint.clone(),
        alignment_bytes: descriptor.alignment_bytes,
    }
}

/// `dynamic-pool/sha256/` + the canonical sha256 of the key.
pub fn pool_id(key: &PoolCompatibilityKey) -> Result<String, MemoryError> {
    Ok(prefixed_canonical_id(
        POOL_ID_PREFIX,
        "pool compatibility key",
        key,
    )?)
}

/// Pool ids of many keys, each computed once.
#[derive(Default)]
pub(crate) struct PoolIds {
    cache: BTreeMap<PoolCompatibilityKey, String>,
}

impl PoolIds {
    /// The pool id of a descriptor's key.
    pub fn of(&mut self, descriptor: &DynamicResourceDescriptor) -> Result<String, MemoryError> {
        let key = compatibility_key(descriptor);
        if let Some(id) = self.cache.get(&key) {
            return Ok(id.clone());
        }
        let id = pool_id(&key)?;
        self.cache.insert(key, id.clone());
        Ok(id)
    }
}

/// One invocation liveness row: a node (execution index) and its members (descriptor
/// indices, ascending).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Row {
    pub node: usize,
    pub members: Vec<usize>,
}

/// The ceiling-independent structure of one pool.
#[derive(Clone, Debug)]
pub(crate) struct PoolLayout {
    pub pool_id: String,
    pub key: PoolCompatibilityKey,
    /// Descriptor indices, ascending (= resource id order).
    pub members: Vec<usize>,
    pub minimum_request: u64,
    pub minimum_sequence: u64,
    pub minimum_step: u64,
    /// Step slots: descriptor indices, ascending, slots sorted.
    pub slots: Vec<Vec<usize>>,
    pub theoretical: u128,
    /// What the pool holds at once at the largest shapes (rules 4.5, live maximum):
    /// request and sequence members at their theoretical bytes × instances, one step's
    /// slots at their largest member, and the invocation peak under the pool's liveness
    /// mode, at theoretical bytes.
    pub live_maximum: u128,
    pub mode: InvocationLivenessMode,
    /// Invocation rows in execution order.
    pub rows: Vec<Row>,
    /// The rows' phases (ranges of `rows`): rows of different phases are never live at once.
    pub phases: Vec<Range<usize>>,
    pub invocation_peak: u64,
}

/// What pool derivation reads.
pub(crate) struct PoolInputs<'a> {
    /// Descriptors sorted by base id.
    pub descriptors: &'a [DynamicResourceDescriptor],
    /// Their bytes, parallel to `descriptors`.
    pub bytes: &'a [DescriptorBytes],
    /// The plan nodes.
    pub nodes: &'a [PlanNode],
    /// Retained resources.
    pub retained: &'a BTreeSet<ResourceId>,
}

struct Users {
    first: Vec<usize>,
    last: Vec<usize>,
    /// Per descriptor: used by at least one node.
    used: Vec<bool>,
    /// Per descriptor of invocation lifetime: (node, descriptor) in execution order.
    invocation: Vec<(usize, usize)>,
}

fn find_users(inputs: &PoolInputs<'_>) -> Users {
    let n = inputs.descriptors.len();
    let mut users = Users {
        first: vec![usize::MAX; n],
        last: vec![0; n],
        used: vec![false; n],
        invocation: Vec::new(),
    };
    let index: IdMap<&ResourceId, usize> = inputs
        .descriptors
        .iter()
        .enumerate()
        .map(|(d, descriptor)| (&descriptor.base_resource_id, d))
        .collect();
    for (node_index, node) in inputs.nodes.iter().enumerate() {
        for resource in &node.resources {
            let Some(&d) = index.get(resource) else {
                continue;
            };
            if !users.used[d] {
                users.used[d] = true;
                users.first[d] = node_index;
            }
            users.last[d] = node_index;
            if inputs.descriptors[d].lifetime == AllocationLifetime::Invocation {
                users.invocation.push((node_index, d));
            }
        }
    }
    users
}

/// Groups descriptors into pools and derives every ceiling-independent field, sorted by
/// pool id.
pub(crate) fn layout_pools(
    inputs: &PoolInputs<'_>,
    ancestry: &mut Ancestry,
) -> Result<Vec<PoolLayout>, MemoryError> {
    let mut ids = PoolIds::default();
    let mut groups: BTreeMap<String, (PoolCompatibilityKey, Vec<usize>)> = BTreeMap::new();
    for (index, descriptor) in inputs.descriptors.iter().enumerate() {
        let key = compatibility_key(descriptor);
        let derived = ids.of(descriptor)?;
        if descriptor.pool_id != derived {
            return Err(MemoryError::PoolIdMismatch {
                resource: descriptor.base_resource_id.clone(),
                stored: descriptor.pool_id.clone(),
                derived,
            });
        }
        let entry = groups
            .entry(derived.clone())
            .or_insert_with(|| (key.clone(), Vec::new()));
        if entry.0 != key {
            return Err(MemoryError::PoolIdCollision { pool: derived });
        }
        entry.1.push(index);
    }
    let users = find_users(inputs);
    let mut pool_of = vec![usize::MAX; inputs.descriptors.len()];
    for (p, (_, (_, members))) in groups.iter().enumerate() {
        for &m in members {
            pool_of[m] = p;
        }
    }
    let mut rows_by_pool: Vec<Vec<Row>> = vec![Vec::new(); groups.len()];
    for &(node, d) in &users.invocation {
        let rows = &mut rows_by_pool[pool_of[d]];
        match rows.last_mut() {
            Some(row) if row.node == node => row.members.push(d),
            _ => rows.push(Row {
                node,
                members: vec![d],
            }),
        }
    }
    let mut layouts = Vec::with_capacity(groups.len());
    for ((pool, (key, members)), mut rows) in groups.into_iter().zip(rows_by_pool) {
        for row in &mut rows {
            row.members.sort_unstable();
            row.members.dedup();
        }
        layouts.push(layout_pool(
            inputs, &users, ancestry, pool, key, members, rows,
        )?);
    }
    Ok(layouts)
}

fn sum(
    values: impl Iterator<Item = u64>,
    context: impl Fn() -> String,
) -> Result<u64, MemoryError> {
    let mut total = 0u64;
    for v in values {
        total = total.checked_add(v).ok_or_else(|| overflow(context()))?;
    }
    Ok(total)
}

fn layout_pool(
    inputs: &PoolInputs<'_>,
    users: &Users,
    ancestry: &mut Ancestry,
    pool_id: String,
    key: PoolCompatibilityKey,
    members: Vec<usize>,
    rows: Vec<Row>,
) -> Result<PoolLayout, MemoryError> {
    let descriptors = inputs.descriptors;
    let bytes = inputs.bytes;
    let of_lifetime = |lifetime| {
        members
            .iter()
            .copied()
            .filter(move |&m| descriptors[m].lifetime == lifetime)
    };
    let minimum_request = sum(
        of_lifetime(AllocationLifetime::Request).map(|m| bytes[m].minimum),
        || format!("pool {pool_id}: minimum request bytes"),
    )?;
    let minimum_sequence = sum(
        of_lifetime(AllocationLifetime::Sequence).map(|m| bytes[m].minimum),
        || format!("pool {pool_id}: minimum sequence bytes"),
    )?;

    let step_members: Vec<usize> = of_lifetime(AllocationLifetime::Step).collect();
    for &m in &step_members {
        if !users.used[m] {
            return Err(MemoryError::StepResourceWithoutUsers {
                pool: pool_id,
                resource: descriptors[m].base_resource_id.clone(),
            });
        }
    }
    let slots = step_slots(inputs, users, ancestry, &step_members);
    let minimum_step = sum(
        slots
            .iter()
            .map(|slot| slot.iter().map(|&m| bytes[m].minimum).max().unwrap_or(0)),
        || format!("pool {pool_id}: minimum step bytes"),
    )?;

    let mut theoretical = 0u128;
    let mut held_by_sequences = 0u128;
    for &m in &members {
        let instances = u128::from(descriptors[m].theoretical_maximum_instances);
        let all_instances = u128::from(bytes[m].theoretical)
            .checked_mul(instances)
            .ok_or_else(|| overflow(format!("pool {pool_id}: theoretical ceiling")))?;
        theoretical = theoretical
            .checked_add(all_instances)
            .ok_or_else(|| overflow(format!("pool {pool_id}: theoretical ceiling")))?;
        if matches!(
            descriptors[m].lifetime,
            AllocationLifetime::Request | AllocationLifetime::Sequence
        ) {
            held_by_sequences = held_by_sequences
                .checked_add(all_instances)
                .ok_or_else(|| overflow(format!("pool {pool_id}: live maximum")))?;
        }
    }
    let step_maximum = sum(
        slots.iter().map(|slot| {
            slot.iter()
                .map(|&m| bytes[m].theoretical)
                .max()
                .unwrap_or(0)
        }),
        || format!("pool {pool_id}: live maximum of the step slots"),
    )?;

    let invocation_members: Vec<usize> = of_lifetime(AllocationLifetime::Invocation).collect();
    for &m in &invocation_members {
        if !users.used[m] {
            return Err(MemoryError::InvocationResourceWithoutUsers {
                pool: pool_id,
                resource: descriptors[m].base_resource_id.clone(),
            });
        }
    }
    let has_binding = invocation_members
        .iter()
        .any(|&m| matches!(descriptors[m].kind, AllocationKind::Binding { .. }));
    let phases = invocation_phases(&rows, has_binding, ancestry);
    let mode = if invocation_members.is_empty() {
        InvocationLivenessMode::NoInvocationResources
    } else if !has_binding && phases.len() == rows.len() {
        // Every phase is one row: consecutive rows are ordered by dependencies.
        InvocationLivenessMode::TotalOrderReuse
    } else {
        InvocationLivenessMode::ConservativeConcurrent
    };
    let invocation_peak = invocation_bytes(
        &phases,
        &rows,
        |m| Ok(bytes[m].minimum),
        || format!("pool {pool_id}: invocation peak"),
    )?;
    let invocation_maximum = invocation_bytes(
        &phases,
        &rows,
        |m| Ok(bytes[m].theoretical),
        || format!("pool {pool_id}: live maximum of the invocation rows"),
    )?;
    let live_maximum = held_by_sequences
        .checked_add(u128::from(step_maximum))
        .and_then(|t| t.checked_add(u128::from(invocation_maximum)))
        .ok_or_else(|| overflow(format!("pool {pool_id}: live maximum")))?;
    Ok(PoolLayout {
        pool_id,
        key,
        members,
        minimum_request,
        minimum_sequence,
        minimum_step,
        slots,
        theoretical,
        live_maximum,
        mode,
        rows,
        phases,
        invocation_peak,
    })
}

/// Invocation bytes of a pool: the largest phase, a phase costing the Σ of its rows' members,
/// with member bytes from `member_bytes` (0 without rows).
pub(crate) fn invocation_bytes(
    phases: &[Range<usize>],
    rows: &[Row],
    mut member_bytes: impl FnMut(usize) -> Result<u64, MemoryError>,
    context: impl Fn() -> String,
) -> Result<u64, MemoryError> {
    let mut peak = 0u64;
    for phase in phases {
        let mut phase_bytes = 0u64;
        for row in &rows[phase.clone()] {
            for &m in &row.members {
                phase_bytes = phase_bytes
                    .checked_add(member_bytes(m)?)
                    .ok_or_else(|| overflow(context()))?;
            }
        }
        peak = peak.max(phase_bytes);
    }
    Ok(peak)
}

struct OpenSlot {
    members: Vec<usize>,
    reusable: bool,
    max_last: usize,
    /// Last users whose ancestry of a node implies every member's.
    frontier: Vec<usize>,
}

fn step_slots(
    inputs: &PoolInputs<'_>,
    users: &Users,
    ancestry: &mut Ancestry,
    step_members: &[usize],
) -> Vec<Vec<usize>> {
    let descriptors = inputs.descriptors;
    let mut intervals: Vec<(usize, usize, usize)> = step_members
        .iter()
        .map(|&m| (users.first[m], users.last[m], m))
        .collect();
    intervals.sort_unstable();
    let mut slots: Vec<OpenSlot> = Vec::new();
    let mut reusable_slots: Vec<usize> = Vec::new();
    for (first, last, m) in intervals {
        let d = &descriptors[m];
        let reusable = d.usage == BufferUsage::Activations
            && d.kind == AllocationKind::Value
            && matches!(d.demand, DynamicResourceDemand::Tokens { .. })
            && !inputs.retained.contains(&d.base_resource_id);
        let mut joined = false;
        if reusable {
            for &s in &reusable_slots {
                let slot = &slots[s];
                if slot.max_last >= first {
                    continue;
                }
                let ordered = slot
                    .frontier
                    .iter()
                    .all(|&f| ancestry.is_ancestor(f, first));
                if !ordered {
                    continue;
                }
                let spans = first == last || ancestry.is_ancestor(first, last);
                let slot = &mut slots[s];
                slot.members.push(m);
                slot.max_last = last;
                if spans {
                    slot.frontier.clear();
                }
                slot.frontier.push(last);
                joined = true;
                break;
            }
        }
        if !joined {
            if reusable {
                reusable_slots.push(slots.len());
            }
            slots.push(OpenSlot {
                members: vec![m],
                reusable,
                max_last: last,
                frontier: vec![last],
            });
        }
    }
    let mut result: Vec<Vec<usize>> = slots
        .into_iter()
        .map(|mut slot| {
            debug_assert!(slot.reusable || slot.members.len() == 1);
            slot.members.sort_unstable();
            slot.members
        })
        .collect();
    result.sort();
    result
}

/// Completes a pool with its reusable ceiling and the dynamic capacity.
pub(crate) fn finish_pool(
    layout: &PoolLayout,
    descriptors: &[DynamicResourceDescriptor],
    nodes: &[PlanNode],
    ceiling: u64,
    dynamic_capacity: u64,
) -> Result<DynamicBackingPool, MemoryError> {
    let id = |m: usize| descriptors[m].base_resource_id.clone();
    let pool = &layout.pool_id;
    let minimum_resident = [
        layout.minimum_request,
        layout.minimum_sequence,
        layout.minimum_step,
        layout.invocation_peak,
    ]
    .into_iter()
    .try_fold(0u64, |acc, v| acc.checked_add(v))
    .ok_or_else(|| overflow(format!("pool {pool}: minimum resident bytes")))?;
    if minimum_resident == 0 {
        return Err(MemoryError::EmptyPoolResidency { pool: pool.clone() });
    }
    let ceiling_total = layout
        .live_maximum
        .checked_add(u128::from(ceiling))
        .ok_or_else(|| overflow(format!("pool {pool}: live maximum + reusable ceiling")))?;
    let maximum_resident =
        u64::try_from(ceiling_total.min(u128::from(dynamic_capacity))).unwrap_or(dynamic_capacity);
    let mut invocation_liveness: Vec<InvocationLivenessRow> = layout
        .rows
        .iter()
        .map(|row| InvocationLivenessRow {
            node_id: nodes[row.node].id.clone(),
            resource_ids: row.members.iter().map(|&m| id(m)).collect(),
        })
        .collect();
    invocation_liveness.sort();
    Ok(DynamicBackingPool {
        pool_id: pool.clone(),
        compatibility: layout.key.clone(),
        resource_ids: layout.members.iter().map(|&m| id(m)).collect(),
        minimum_request_bytes: layout.minimum_request,
        minimum_sequence_bytes: layout.minimum_sequence,
        minimum_step_bytes: layout.minimum_step,
        minimum_invocation_peak_bytes: layout.invocation_peak,
        step_resource_slots: layout
            .slots
            .iter()
            .map(|slot| StepResourceSlot {
                kind: if slot.len() == 1 {
                    StepSlotKind::Dedicated
                } else {
                    StepSlotKind::OrderedSingleFenceStepWave
                },
                resource_ids: slot.iter().map(|&m| id(m)).collect(),
            })
            .collect(),
        theoretical_ceiling_bytes: layout.theoretical.to_string(),
        reusable_workspace_ceiling_bytes: ceiling,
        provisioning: PoolProvisioning {
            mode: ProvisioningMode::DemandDrivenElastic,
            minimum_resident_bytes: minimum_resident,
            maximum_resident_bytes: maximum_resident,
        },
        invocation_liveness_mode: layout.mode,
        invocation_liveness,
    })
}

/// A pool must fit the dynamic capacity on its own: maximum resident ≥ minimum resident.
pub(crate) fn check_residency(
    pool: &DynamicBackingPool,
    dynamic_capacity: u64,
) -> Result<(), MemoryError> {
    let provisioning = &pool.provisioning;
    if provisioning.maximum_resident_bytes < provisioning.minimum_resident_bytes {
        return Err(MemoryError::PoolExceedsDynamicCapacity {
            pool: pool.pool_id.clone(),
            profile: pool.compatibility.profile.to_string(),
            usage: pool.compatibility.usage,
            minimum_resident: provisioning.minimum_resident_bytes,
            maximum_resident: provisioning.maximum_resident_bytes,
            dynamic_capacity,
        });
    }
    Ok(())
}
