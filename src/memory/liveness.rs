//! Invocation liveness: the phases of a pool's invocation rows (rules 4.5) and the global
//! liveness (rules 4.7), every pool's rows merged by node.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use crate::request::{IdSet, NodeId, ResourceId};

use crate::plan::PlanNode;
use crate::request::BufferUsage;

use super::ancestry::Ancestry;
use super::error::MemoryError;
use super::pools::Row;
use super::{DynamicBackingPool, InvocationLivenessMode, InvocationLivenessRow};

/// The invocation phases of a plan's stored pools (rules 4.5): for each phase, the
/// resources of its rows, from the plan's nodes in execution order and the pool's liveness
/// rows. Reports that size a pool's invocation need (the study's serving report) read them
/// here, so they follow the memory plan's rule. The nodes' dependency index is built once,
/// on the first pool that has invocation rows, and shared by every pool after it.
pub struct InvocationPhases<'p> {
    nodes: &'p [PlanNode],
    ancestry: Option<Ancestry>,
}

impl<'p> InvocationPhases<'p> {
    /// The phases of pools of the plan whose nodes are `nodes`.
    pub fn new(nodes: &'p [PlanNode]) -> Self {
        InvocationPhases {
            nodes,
            ancestry: None,
        }
    }

    /// The invocation phases of `pool` (none when it has no invocation rows).
    pub fn of_pool(
        &mut self,
        pool: &DynamicBackingPool,
    ) -> Result<Vec<Vec<&'p ResourceId>>, MemoryError> {
        let members: IdSet<&ResourceId> = pool
            .invocation_liveness
            .iter()
            .flat_map(|row| &row.resource_ids)
            .collect();
        if members.is_empty() {
            return Ok(Vec::new());
        }
        let mut ids: Vec<&'p ResourceId> = Vec::new();
        let mut rows: Vec<Row> = Vec::new();
        for (index, node) in self.nodes.iter().enumerate() {
            let start = ids.len();
            ids.extend(node.resources.iter().filter(|r| members.contains(r)));
            if ids.len() > start {
                rows.push(Row {
                    node: index,
                    members: (start..ids.len()).collect(),
                });
            }
        }
        let ancestry = match &mut self.ancestry {
            Some(ancestry) => ancestry,
            empty => empty.insert(Ancestry::new(self.nodes)?),
        };
        let binding = pool.compatibility.usage == BufferUsage::Binding;
        Ok(invocation_phases(&rows, binding, ancestry)
            .into_iter()
            .map(|phase| {
                rows[phase]
                    .iter()
                    .flat_map(|row| row.members.iter().map(|&m| ids[m]))
                    .collect()
            })
            .collect())
    }
}

/// Most resource references the global liveness may hold under the reference wire limits.
pub const MAXIMUM_LIVENESS_REFERENCES: usize = 65_536;

/// Most resource references the global liveness may hold under `limits`: 65,536, or the
/// resource-row limit when a request raises it above that (a plan allowed more resource
/// rows is allowed as many liveness references; a 100,000-node mixture of experts has one
/// scratch reference per expert).
pub fn liveness_reference_limit(limits: crate::request::WireLimits) -> usize {
    usize::try_from(limits.maximum_resource_rows)
        .unwrap_or(usize::MAX)
        .max(MAXIMUM_LIVENESS_REFERENCES)
}

/// Merges the pools' rows by node (union of resource ids, sorted by node id); the mode is
/// none without invocation members, total order if every pool with members is totally
/// ordered, conservative otherwise.
pub(crate) fn global_liveness(
    pools: &[DynamicBackingPool],
    limit: usize,
) -> Result<(InvocationLivenessMode, Vec<InvocationLivenessRow>), MemoryError> {
    let mut merged: BTreeMap<&NodeId, BTreeSet<&ResourceId>> = BTreeMap::new();
    let mut any = false;
    let mut all_ordered = true;
    for pool in pools {
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
                .extend(row.resource_ids.iter());
        }
    }
    let count: usize = merged.values().map(BTreeSet::len).sum();
    if count > limit {
        return Err(MemoryError::TooManyLivenessReferences { count, limit });
    }
    let mode = if !any {
        InvocationLivenessMode::NoInvocationResources
    } else if all_ordered {
        InvocationLivenessMode::TotalOrderReuse
    } else {
        InvocationLivenessMode::ConservativeConcurrent
    };
    let rows = merged
        .into_iter()
        .map(|(node, resources)| InvocationLivenessRow {
            node_id: node.clone(),
            resource_ids: resources.into_iter().cloned().collect(),
        })
        .collect();
    Ok((mode, rows))
}

/// Splits a pool's invocation rows (execution order) into *phases* (rules 4.5): the finest
/// split into consecutive runs such that every row of a run is a transitive dependency
/// ancestor of every row of each later run. Rows of different phases are never live at once;
/// rows of one phase may be, so a phase costs the Σ of its rows and the pool's invocation need
/// is its largest phase. A pool of binding workspaces is one phase: binding data is written
/// in the wave's preamble, so every row is live at once whatever the order.
///
/// Built in one pass: a row opens a new phase when every row of the last phase is its
/// ancestor; otherwise it joins the last phase, and while some row of the phase before is not
/// its ancestor, the last two phases merge. A split the pass keeps is valid by transitivity
/// (each phase precedes the next); a valid split is never merged across, because every row
/// after it has every row before it as an ancestor, so the result is the finest. A chain costs
/// one ancestry query per row; a run of k mutually unordered rows (a layer's experts) costs
/// O(k) queries per row against the phase before.
pub(crate) fn invocation_phases(
    rows: &[Row],
    binding: bool,
    ancestry: &mut Ancestry,
) -> Vec<Range<usize>> {
    if rows.is_empty() {
        return Vec::new();
    }
    if binding {
        return std::iter::once(0..rows.len()).collect();
    }
    // Phase k is starts[k]..starts[k + 1] (the last one ends at the current row).
    let mut starts: Vec<usize> = vec![0];
    for k in 1..rows.len() {
        let node = rows[k].node;
        let precedes = |phase: Range<usize>, ancestry: &mut Ancestry| {
            rows[phase]
                .iter()
                .rev()
                .all(|row| ancestry.is_ancestor(row.node, node))
        };
        let last = starts[starts.len() - 1];
        if precedes(last..k, ancestry) {
            starts.push(k);
            continue;
        }
        while starts.len() >= 2 {
            let (before, last) = (starts[starts.len() - 2], starts[starts.len() - 1]);
            if precedes(before..last, ancestry) {
                break;
            }
            starts.pop();
        }
    }
    let mut phases = Vec::with_capacity(starts.len());
    for (i, &start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(rows.len());
        phases.push(start..end);
    }
    phases
}
