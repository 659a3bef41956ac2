//! Global invocation liveness (rules 4.7): every pool's rows merged by node.

use std::collections::{BTreeMap, BTreeSet};

use crate::request::{NodeId, ResourceId};

use super::error::MemoryError;
use super::{DynamicBackingPool, InvocationLivenessMode, InvocationLivenessRow};

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
