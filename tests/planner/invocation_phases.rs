//! Invocation phases (rules 4.5), differentially: on random dependency graphs the memory
//! plan's invocation peak and live maximum are checked against an oracle that computes the
//! transitive closure and tries every split of the scratch rows, sharing no code with the
//! planner's one-pass phase construction.

use crate::common::memory_fixture;

use jointplan::plan::{InvocationLivenessMode, MemoryPlan};
use jointplan::request::BufferUsage;
use memory_fixture::*;
use proptest::prelude::*;

/// A random graph: per node, its scratch bytes (`None`: no workspace) and its direct
/// dependencies (earlier nodes).
#[derive(Clone, Debug)]
struct Graph {
    scratch: Vec<Option<u64>>,
    dependencies: Vec<Vec<usize>>,
}

fn node_id(i: usize) -> String {
    format!("node/{i:02}")
}

fn graphs() -> impl Strategy<Value = Graph> {
    (1usize..10)
        .prop_flat_map(|n| {
            (
                prop::collection::vec(prop::option::weighted(0.75, 1u64..64), n),
                prop::collection::vec(prop::collection::vec(any::<bool>(), n), n),
            )
        })
        .prop_map(|(scratch, edges)| {
            let dependencies = (0..scratch.len())
                .map(|b| (0..b).filter(|&a| edges[b][a]).collect())
                .collect();
            Graph {
                scratch: scratch.into_iter().map(|s| s.map(|u| u * 16)).collect(),
                dependencies,
            }
        })
}

fn plan_of(graph: &Graph, binding: bool) -> (Fixture, MemoryPlan) {
    let mut f = Fixture::new();
    for (i, scratch) in graph.scratch.iter().enumerate() {
        let deps: Vec<String> = graph.dependencies[i].iter().map(|&d| node_id(d)).collect();
        let deps: Vec<&str> = deps.iter().map(String::as_str).collect();
        let node = f.node(&node_id(i)).after(&deps);
        match (scratch, binding) {
            (Some(bytes), false) => node.fixed_scratch(*bytes).done(),
            (Some(bytes), true) => node.fixed_binding(*bytes).done(),
            (None, _) => node.done(),
        }
    }
    let plan = f.derive().expect("a small graph plans");
    (f, plan)
}

/// The oracle: reachability by closure; a cut between rows is allowed when every row before
/// reaches every row after; phases lie between allowed cuts; the need is the largest phase.
fn oracle(graph: &Graph) -> (u64, bool) {
    let n = graph.scratch.len();
    let mut reach = vec![vec![false; n]; n];
    for (b, dependencies) in graph.dependencies.iter().enumerate() {
        for &a in dependencies {
            reach[a][b] = true;
        }
    }
    for k in 0..n {
        for a in 0..n {
            for b in 0..n {
                if reach[a][k] && reach[k][b] {
                    reach[a][b] = true;
                }
            }
        }
    }
    let rows: Vec<usize> = (0..n).filter(|&i| graph.scratch[i].is_some()).collect();
    let bytes = |i: usize| graph.scratch[i].unwrap_or(0);
    let mut peak = 0;
    let mut phase = 0;
    for (position, &row) in rows.iter().enumerate() {
        phase += bytes(row);
        let cut = position + 1 == rows.len()
            || rows[..=position]
                .iter()
                .all(|&a| rows[position + 1..].iter().all(|&b| reach[a][b]));
        if cut {
            peak = peak.max(phase);
            phase = 0;
        }
    }
    let total_order = rows.windows(2).all(|w| reach[w[0]][w[1]]);
    (peak, total_order)
}

fn scratch_pool(plan: &MemoryPlan) -> Option<&jointplan::plan::DynamicBackingPool> {
    plan.dynamic_pools.iter().find(|p| {
        matches!(
            p.compatibility.usage,
            BufferUsage::Scratch | BufferUsage::Binding
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn scratch_need_is_the_largest_phase(graph in graphs()) {
        let (fixture, plan) = plan_of(&graph, false);
        fixture.validate(&plan).expect("the derived plan validates");
        let (peak, total_order) = oracle(&graph);
        match scratch_pool(&plan) {
            None => prop_assert_eq!(peak, 0),
            Some(pool) => {
                prop_assert_eq!(pool.minimum_invocation_peak_bytes, peak);
                // Fixed scratch: the largest size is the minimum one.
                prop_assert_eq!(pool.provisioning.maximum_resident_bytes, peak);
                let mode = if total_order {
                    InvocationLivenessMode::TotalOrderReuse
                } else {
                    InvocationLivenessMode::ConservativeConcurrent
                };
                prop_assert_eq!(pool.invocation_liveness_mode, mode);
            }
        }
    }

    #[test]
    fn binding_workspaces_are_one_phase(graph in graphs()) {
        let (fixture, plan) = plan_of(&graph, true);
        fixture.validate(&plan).expect("the derived plan validates");
        let total: u64 = graph.scratch.iter().flatten().sum();
        let need = scratch_pool(&plan).map_or(0, |p| p.minimum_invocation_peak_bytes);
        prop_assert_eq!(need, total);
    }
}

/// A router feeding four unordered experts, joined by a residual that feeds a second layer's
/// router and experts: each layer's experts are one phase, the routers and residuals phases
/// of their own, so the need is one layer's experts, not both layers'.
#[test]
fn parallel_experts_of_two_layers_are_two_phases() {
    let mut f = Fixture::new();
    for layer in 0..2 {
        let router = format!("node/{layer}.0router");
        let previous = format!("node/{}.9residual", layer.max(1) - 1);
        let router_deps: Vec<&str> = if layer == 0 { vec![] } else { vec![&previous] };
        f.node(&router).after(&router_deps).fixed_scratch(32).done();
        let experts: Vec<String> = (1..=4).map(|e| format!("node/{layer}.{e}expert")).collect();
        for expert in &experts {
            f.node(expert).after(&[&router]).fixed_scratch(96).done();
        }
        let expert_ids: Vec<&str> = experts.iter().map(String::as_str).collect();
        f.node(&format!("node/{layer}.9residual"))
            .after(&expert_ids)
            .fixed_scratch(16)
            .done();
    }
    let plan = f.derive().unwrap();
    f.validate(&plan).unwrap();
    let pool = scratch_pool(&plan).unwrap();
    assert_eq!(
        pool.invocation_liveness_mode,
        InvocationLivenessMode::ConservativeConcurrent
    );
    // One layer's four experts at 96 bytes; the sum of every row would be 2 x 432.
    assert_eq!(pool.minimum_invocation_peak_bytes, 4 * 96);
}
