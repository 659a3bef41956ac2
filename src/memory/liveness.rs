//! Global invocation liveness (rules 4.7): every pool's rows merged by node.

use std::collections::{BTreeMap, BTreeSet};

use crate::request::{NodeId, ResourceId};

use super::error::MemoryError;
use super::{DynamicBackingPool, InvocationLivenessMode, InvocationLivenessRow};

/// Most resource references the global liveness may hold.
pub const MAXIMUM_LIVENESS_REFERENCES: usize = 65_536;

/// Merges the pools' rows by node (union of resource ids, sorted by node id); the mode is
/// none without invocation members, total order if every pool with members is totally
/// ordered, conservative otherwise.
pub(crate) fn global_liveness(
    pools: &[DynamicBackingPool],
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
    if count > MAXIMUM_LIVENESS_REFERENCES {
        return Err(MemoryError::TooManyLivenessReferences {
            count,
            limit: MAXIMUM_LIVENESS_REFERENCES,
        });
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
