//! The plan's execution order as the memory rules read it: each node's dependencies as
//! node positions, ancestry through them, and each resource's interval of use.
//!
//! Built once per check from the nodes alone (every pool's rules 21 and 22 share it), so the
//! ancestry walks follow positions instead of looking every dependency id up in a map.

use std::collections::BTreeSet;

use crate::plan::ExecutionPlanPayload;
use crate::request::{IdMap, NodeId, ResourceId};

/// Node positions, dependencies by position, and use intervals of one plan.
pub(super) struct ExecutionOrder<'p> {
    /// Per node (by position), the positions of its dependencies that name a node of the
    /// plan (an unknown id is rule 4's to report; here it is no edge). A repeated node id
    /// stands for its last position.
    dependencies: Vec<Vec<usize>>,
    /// For every resource, the first and the last node (by position) whose resources
    /// contain it.
    used: IdMap<&'p ResourceId, (usize, usize)>,
}

impl<'p> ExecutionOrder<'p> {
    pub(super) fn of(payload: &'p ExecutionPlanPayload) -> Self {
        let index: IdMap<&NodeId, usize> = payload
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (&n.id, i))
            .collect();
        let dependencies = payload
            .nodes
            .iter()
            .map(|node| {
                node.dependencies
                    .iter()
                    .filter_map(|d| index.get(d).copied())
                    .collect()
            })
            .collect();
        let mut used: IdMap<&ResourceId, (usize, usize)> = IdMap::default();
        for (i, node) in payload.nodes.iter().enumerate() {
            for resource in &node.resources {
                used.entry(resource).or_insert((i, i)).1 = i;
            }
        }
        ExecutionOrder { dependencies, used }
    }

    /// Whether node `from` is `to` or reaches it through dependencies (a depth-first walk
    /// from `to` back to the earlier nodes it depends on).
    pub(super) fn ancestor(&self, from: usize, to: usize) -> bool {
        let mut stack = vec![to];
        let mut seen = BTreeSet::new();
        while let Some(n) = stack.pop() {
            if n == from {
                return true;
            }
            if !seen.insert(n) || n < from {
                continue;
            }
            let earlier = self.dependencies.get(n).into_iter().flatten();
            stack.extend(earlier.filter(|&&d| d < n));
        }
        false
    }

    /// The first and the last position of the nodes that use `resource`, if any does.
    pub(super) fn use_interval(&self, resource: &ResourceId) -> Option<(usize, usize)> {
        self.used.get(resource).copied()
    }
}
