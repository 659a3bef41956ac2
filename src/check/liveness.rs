//! Rules 22 and 23: a pool's invocation rows, their mode and their phases, and the plan's
//! global liveness.

use std::collections::{BTreeMap, BTreeSet};

use crate::plan::{
    AllocationKind, AllocationLifetime, DynamicBackingPool, DynamicResourceDescriptor,
    ExecutionPlanPayload, InvocationLivenessMode, InvocationLivenessRow, MemoryPlan,
};
use crate::request::{IdMap, IdSet, NodeId, ResourceId};

use super::memory::sum;
use super::order::ExecutionOrder;
use super::Findings;

/// 22: checks the pool's rows and mode against the nodes; returns the pool's invocation
/// phases, each the invocation members of its rows. Rows are taken in execution order; a row
/// opens a new phase when every row of the current last phase is its ancestor through
/// dependencies, else it joins the last phase, and the last two phases merge for as long as
/// some row of the phase before is not its ancestor. A pool with a binding workspace is one
/// phase (binding data is written together before the wave).
pub(super) fn invocation<'p>(
    payload: &'p ExecutionPlanPayload,
    order: &ExecutionOrder<'_>,
    at: &str,
    pool: &DynamicBackingPool,
    members: &[&DynamicResourceDescriptor],
    found: &mut Findings,
) -> Vec<Vec<&'p ResourceId>> {
    let invocation_members: IdSet<&ResourceId> = members
        .iter()
        .filter(|d| d.lifetime == AllocationLifetime::Invocation)
        .map(|d| &d.base_resource_id)
        .collect();
    // Rows in execution order.
    let mut rows: Vec<(usize, Vec<&'p ResourceId>)> = Vec::new();
    for (i, node) in payload.nodes.iter().enumerate() {
        let row: Vec<&ResourceId> = node
            .resources
            .iter()
            .filter(|r| invocation_members.contains(r))
            .collect();
        if !row.is_empty() {
            rows.push((i, row));
        }
    }
    let mut expected: Vec<InvocationLivenessRow> = rows
        .iter()
        .map(|(i, r)| InvocationLivenessRow {
            node_id: payload.nodes[*i].id.clone(),
            resource_ids: r.iter().map(|&id| id.clone()).collect(),
        })
        .collect();
    expected.sort();
    if pool.invocation_liveness != expected {
        found.add(
            22,
            format!("{at}.invocation_liveness"),
            "are not the pool's invocation members per node, sorted by node",
        );
    }
    let has_binding = members.iter().any(|d| {
        d.lifetime == AllocationLifetime::Invocation
            && matches!(d.kind, AllocationKind::Binding { .. })
    });
    let ordered = rows.windows(2).all(|w| order.ancestor(w[0].0, w[1].0));
    let mode = if invocation_members.is_empty() {
        InvocationLivenessMode::NoInvocationResources
    } else if !has_binding && ordered {
        InvocationLivenessMode::TotalOrderReuse
    } else {
        InvocationLivenessMode::ConservativeConcurrent
    };
    if pool.invocation_liveness_mode != mode {
        found.add(
            22,
            format!("{at}.invocation_liveness_mode"),
            format!("the rows give {mode:?}"),
        );
    }
    if has_binding {
        return vec![rows.into_iter().flat_map(|(_, r)| r).collect()];
    }
    // Each phase: the node indices of its rows and their members.
    let mut phases: Vec<(Vec<usize>, Vec<&ResourceId>)> = Vec::new();
    for (node, row) in rows {
        let all_before = |phase: &(Vec<usize>, Vec<&ResourceId>)| {
            phase.0.iter().all(|&earlier| order.ancestor(earlier, node))
        };
        match phases.last_mut() {
            Some(last) if !all_before(last) => {
                last.0.push(node);
                last.1.extend(row);
                while phases.len() >= 2 && !all_before(&phases[phases.len() - 2]) {
                    if let Some((nodes, ids)) = phases.pop() {
                        if let Some(before) = phases.last_mut() {
                            before.0.extend(nodes);
                            before.1.extend(ids);
                        }
                    }
                }
            }
            _ => phases.push((vec![node], row)),
        }
    }
    phases.into_iter().map(|(_, ids)| ids).collect()
}

/// The largest phase's Σ of member bytes (`minimum`), 0 without phases; `None` on overflow.
pub(super) fn phase_peak(
    phases: &[Vec<&ResourceId>],
    bytes: &IdMap<&ResourceId, u64>,
) -> Option<u64> {
    let mut peak = 0;
    for phase in phases {
        peak = peak.max(sum(phase
            .iter()
            .map(|id| bytes.get(id).copied().unwrap_or(0)))?);
    }
    Some(peak)
}

/// 23.
pub(super) fn global_liveness(m: &MemoryPlan, found: &mut Findings) {
    let mut merged: BTreeMap<&NodeId, BTreeSet<&ResourceId>> = BTreeMap::new();
    let (mut any, mut all_ordered) = (false, true);
    for pool in &m.dynamic_pools {
        match pool.invocation_liveness_mode {
            InvocationLivenessMode::NoInvocationResources => continue,
            InvocationLivenessMode::TotalOrderReuse => any = true,
            InvocationLivenessMode::ConservativeConcurrent => {
                any = true;
                all_ordered = false;
            }
        }
        for row in &pool.invocation_liveness {
            merged
                .entry(&row.node_id)
                .or_default()
                .extend(&row.resource_ids);
        }
    }
    let rows: Vec<InvocationLivenessRow> = merged
        .into_iter()
        .map(|(node, ids)| InvocationLivenessRow {
            node_id: node.clone(),
            resource_ids: ids.into_iter().cloned().collect(),
        })
        .collect();
    if m.invocation_liveness != rows {
        found.add(
            23,
            "payload.memory.invocation_liveness",
            "is not the pools' rows merged by node",
        );
    }
    let mode = match (any, all_ordered) {
        (false, _) => InvocationLivenessMode::NoInvocationResources,
        (true, true) => InvocationLivenessMode::TotalOrderReuse,
        (true, false) => InvocationLivenessMode::ConservativeConcurrent,
    };
    if m.invocation_liveness_mode != mode {
        found.add(
            23,
            "payload.memory.invocation_liveness_mode",
            format!("the pools give {mode:?}"),
        );
    }
}
