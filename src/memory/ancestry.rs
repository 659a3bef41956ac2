//! Transitive dependency ancestry between plan nodes, for ordered step-slot reuse and
//! invocation total order (rules 4.5).
//!
//! Nodes are in execution order and every dependency is an earlier node, so the execution
//! index is a topological index and every path from `a` to `b` stays inside the index window
//! `[a, b]`. A query `is_ancestor(a, b)` first checks the direct dependency list of `b`
//! (binary search), then walks backwards from `b` visiting only nodes with index above `a`.
//! Visited marks are epoch stamps in one `Vec<u32>` (no per-query allocation), and answers are
//! memoised per `(a, b)` pair, with the memo cleared when it reaches [`MEMO_LIMIT`] entries so
//! memory stays bounded.
//!
//! Cost: building is O(N + E log N). A query is O(log d) when `a` is a direct dependency and
//! O(edges inside the window) otherwise; callers ask only about candidate pairs (consecutive
//! invocation rows, and the last user of a slot member against the first user of a joining
//! interval), so a chain of N nodes costs O(N log d) overall.

use std::collections::HashMap;

use crate::plan::PlanNode;
use crate::request::{IdMap, NodeId};

use super::error::MemoryError;

/// Largest number of memoised answers kept at once.
pub const MEMO_LIMIT: usize = 1 << 20;

/// The dependency graph of the plan nodes, by execution index.
pub(crate) struct Ancestry {
    dependencies: Vec<Vec<u32>>,
    memo: HashMap<(u32, u32), bool>,
    stamps: Vec<u32>,
    epoch: u32,
    stack: Vec<u32>,
}

impl Ancestry {
    /// Indexes the nodes; every dependency must be an earlier node and ids unique.
    pub fn new(nodes: &[PlanNode]) -> Result<Self, MemoryError> {
        let mut index: IdMap<&NodeId, u32> = IdMap::default();
        let mut dependencies = Vec::with_capacity(nodes.len());
        for (position, node) in nodes.iter().enumerate() {
            let position = u32::try_from(position)
                .map_err(|_| super::error::overflow("more than u32::MAX nodes"))?;
            let mut deps = Vec::with_capacity(node.dependencies.len());
            for dependency in &node.dependencies {
                match index.get(dependency) {
                    Some(&d) => deps.push(d),
                    None => {
                        return Err(MemoryError::DependencyNotEarlier {
                            node: node.id.clone(),
                            dependency: dependency.clone(),
                        })
                    }
                }
            }
            deps.sort_unstable();
            deps.dedup();
            dependencies.push(deps);
            if index.insert(&node.id, position).is_some() {
                return Err(MemoryError::DuplicateNode {
                    node: node.id.clone(),
                });
            }
        }
        Ok(Self {
            stamps: vec![0; dependencies.len()],
            dependencies,
            memo: HashMap::new(),
            epoch: 0,
            stack: Vec::new(),
        })
    }

    /// Whether node `a` is a transitive dependency ancestor of node `b` (`a` strictly
    /// earlier).
    pub fn is_ancestor(&mut self, a: usize, b: usize) -> bool {
        if a >= b || b >= self.dependencies.len() {
            return false;
        }
        let (a, b) = (a as u32, b as u32);
        let direct = &self.dependencies[b as usize];
        if direct.binary_search(&a).is_ok() {
            return true;
        }
        match direct.last() {
            Some(&last) if last > a => {}
            _ => return false,
        }
        if let Some(&answer) = self.memo.get(&(a, b)) {
            return answer;
        }
        let answer = self.walk(a, b);
        if self.memo.len() >= MEMO_LIMIT {
            self.memo.clear();
        }
        self.memo.insert((a, b), answer);
        answer
    }

    fn walk(&mut self, a: u32, b: u32) -> bool {
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.stamps.iter_mut().for_each(|s| *s = 0);
            self.epoch = 1;
        }
        self.stack.clear();
        self.stack.push(b);
        while let Some(v) = self.stack.pop() {
            for &d in self.dependencies[v as usize].iter().rev() {
                if d < a {
                    break;
                }
                if d == a {
                    return true;
                }
                let stamp = &mut self.stamps[d as usize];
                if *stamp != self.epoch {
                    *stamp = self.epoch;
                    self.stack.push(d);
                }
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, dependencies: &[&str]) -> PlanNode {
        let mut node = blank();
        node.id = NodeId::new(id).unwrap();
        node.dependencies = dependencies
            .iter()
            .map(|d| NodeId::new(*d).unwrap())
            .collect();
        node
    }

    fn blank() -> PlanNode {
        use crate::plan::{NodeWorkContract, ProviderSelection, SelectionReason};
        use crate::request::*;
        let fp = Sha256Hex::new("1".repeat(64)).unwrap();
        PlanNode {
            id: NodeId::new("node.blank").unwrap(),
            dependencies: Vec::new(),
            operation_id: OperationId::new("operation.main").unwrap(),
            operation_version: ContractVersion::new(1, 0),
            operation_fingerprint: fp.clone(),
            provider_implementation_fingerprint: fp.clone(),
            provider_execution_semantics: ExecutionSemantics::new(ReplayEquivalence::Ineligible),
            required_capabilities: Default::default(),
            attributes: Default::default(),
            work: NodeWorkContract::Fixed,
            selection: ProviderSelection {
                requested_provider: None,
                selected_provider: ProviderId::new("provider.operation.reference").unwrap(),
                selection_reason: SelectionReason::CanonicalCompatible,
                rejected_providers: Vec::new(),
            },
            provider_resources: ProviderResourcePlan {
                provider_id: ProviderId::new("provider.operation.reference").unwrap(),
                estimator_id: EstimatorId::new("resource-estimator.reference").unwrap(),
                estimator_version: ContractVersion::new(1, 0),
                estimator_implementation_fingerprint: fp.clone(),
                estimator_input_fingerprint: fp.clone(),
                estimate_fingerprint: fp,
                value_alignment_bytes: 16,
                scratch: None,
                binding: None,
                persistent: None,
            },
            values: Vec::new(),
            exact_aliases: Vec::new(),
            state_effects: Vec::new(),
            scratch_resource: None,
            binding_resource: None,
            persistent_resource: None,
            resources: Vec::new(),
        }
    }

    #[test]
    fn transitive_ancestry_on_a_diamond_with_a_side_branch() {
        // a -> b -> d, a -> c -> d, e independent, f after e and d.
        let nodes = vec![
            node("a", &[]),
            node("b", &["a"]),
            node("c", &["a"]),
            node("d", &["b", "c"]),
            node("e", &[]),
            node("f", &["d", "e"]),
        ];
        let mut ancestry = Ancestry::new(&nodes).unwrap();
        assert!(ancestry.is_ancestor(0, 3));
        assert!(ancestry.is_ancestor(0, 5));
        assert!(ancestry.is_ancestor(0, 5), "memoised answer");
        assert!(!ancestry.is_ancestor(1, 2));
        assert!(!ancestry.is_ancestor(4, 3));
        assert!(ancestry.is_ancestor(4, 5));
        assert!(
            !ancestry.is_ancestor(3, 0),
            "later nodes are never ancestors"
        );
        assert!(!ancestry.is_ancestor(2, 2));
    }

    #[test]
    fn forward_and_unknown_dependencies_are_rejected() {
        let nodes = vec![node("a", &["b"]), node("b", &[])];
        assert!(matches!(
            Ancestry::new(&nodes),
            Err(MemoryError::DependencyNotEarlier { .. })
        ));
        let nodes = vec![node("a", &[]), node("a", &[])];
        assert!(matches!(
            Ancestry::new(&nodes),
            Err(MemoryError::DuplicateNode { .. })
        ));
    }
}
