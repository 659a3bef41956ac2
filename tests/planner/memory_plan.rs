//! Memory plan derivation (rules 4) on hand-built plan nodes: the numbers of
//! rules 7, demand classes, workspaces, step slots, invocation liveness,
//! reusable budgets, the capacity check and overflow.

use crate::common::memory_fixture;

use jointplan::memory::{evaluate, memory_report, quantized_bytes, MemoryError, Shape};
use jointplan::plan::{
    AllocationKind, AllocationLifetime, DynamicResourceDemand, InvocationLivenessMode, MemoryPlan,
    StepSlotKind,
};
use jointplan::request::{
    ElementType, StateCapacityDemand, StateInitialization, StateLifetime, ValueRole,
    WorkspaceScope, WorkspaceSizeFormula,
};
use memory_fixture::*;

fn descriptor<'p>(
    plan: &'p MemoryPlan,
    resource: &str,
) -> &'p jointplan::plan::DynamicResourceDescriptor {
    plan.dynamic_descriptors
        .iter()
        .find(|d| d.base_resource_id.as_str() == resource)
        .unwrap_or_else(|| panic!("no descriptor {resource}"))
}

fn pool_of<'p>(plan: &'p MemoryPlan, resource: &str) -> &'p jointplan::plan::DynamicBackingPool {
    let id = &descriptor(plan, resource).pool_id;
    plan.dynamic_pools
        .iter()
        .find(|p| &p.pool_id == id)
        .unwrap()
}

fn slot_ids(pool: &jointplan::plan::DynamicBackingPool) -> Vec<(StepSlotKind, Vec<&str>)> {
    pool.step_resource_slots
        .iter()
        .map(|s| (s.kind, s.resource_ids.iter().map(|r| r.as_str()).collect()))
        .collect()
}

#[test]
fn tokens_on_4096_byte_blocks_quantize_minimum_and_theoretical() {
    let mut f = Fixture::new();
    f.policy.maximum_scheduled_tokens = 4097;
    f.node("node.main")
        .bind(Bind {
            element_type: ElementType::U8,
            tokens: Some(8),
            ..Bind::new(
                "value.output",
                ValueRole::Output,
                "resource/activation-a",
                8,
            )
        })
        .done();
    f.select("resource/activation-a", block(4096));
    let plan = f.derive().unwrap();
    let d = descriptor(&plan, "resource/activation-a");
    assert_eq!(
        d.demand,
        DynamicResourceDemand::Tokens {
            bytes_per_token: 1,
            maximum_tokens: 4097
        }
    );
    assert_eq!(d.lifetime, AllocationLifetime::Step);
    assert_eq!(evaluate(&d.demand, Shape::MINIMUM), Ok(1));
    assert_eq!(
        quantized_bytes(&d.demand, Shape::MINIMUM, &block(4096), d.alignment_bytes),
        Ok(4096)
    );
    let pool = pool_of(&plan, "resource/activation-a");
    assert_eq!(pool.minimum_step_bytes, 4096);
    assert_eq!(pool.theoretical_ceiling_bytes, (8192u64 * 3).to_string());
    assert_eq!(plan.minimum_runnable_request_bytes, 4096);
    assert_eq!(plan.theoretical_ceiling_bytes, "24576");
}

#[test]
fn plan_scope_persistent_byte_on_a_block_has_a_block_stride() {
    let mut f = Fixture::new();
    f.node("node.main")
        .persistent(workspace(
            WorkspaceSizeFormula::Fixed { bytes: 1 },
            16,
            WorkspaceScope::Plan,
        ))
        .done();
    f.select("resource/persistent/node.main", block(4096));
    let plan = f.derive().unwrap();
    assert_eq!(plan.static_allocations.len(), 1);
    let s = &plan.static_allocations[0];
    assert_eq!(
        (s.per_instance_bytes, s.instance_stride_bytes, s.size_bytes),
        (1, 4096, 4096)
    );
    assert_eq!(s.usage, BufferUsage::Persistent);
    assert_eq!(s.element_type, ElementType::U8);
    assert_eq!(
        s.kind,
        AllocationKind::Persistent {
            node_id: nid("node.main")
        }
    );
    assert_eq!(
        s.storage.logical_layout_fingerprint.as_str(),
        "309780bb231c537e8511cd06c6de0030f971c09499f8c0504e3bdee811fad897"
    );
    assert_eq!(plan.static_bytes, 4096);
    assert!(plan.dynamic_pools.is_empty());
}

fn two_scratch_nodes(ordered: bool, binding: bool) -> Fixture {
    let mut f = Fixture::new();
    let a = f.node("node/a");
    if binding {
        a.fixed_binding(64)
    } else {
        a.fixed_scratch(64)
    }
    .done();
    let b = f.node("node/b");
    let b = if ordered { b.after(&["node/a"]) } else { b };
    if binding {
        b.fixed_binding(128)
    } else {
        b.fixed_scratch(128)
    }
    .done();
    f
}

#[test]
fn ordered_invocation_scratch_reuses_the_largest_row() {
    let plan = two_scratch_nodes(true, false).derive().unwrap();
    assert_eq!(plan.dynamic_pools.len(), 1);
    let pool = &plan.dynamic_pools[0];
    assert_eq!(
        pool.invocation_liveness_mode,
        InvocationLivenessMode::TotalOrderReuse
    );
    assert_eq!(pool.minimum_invocation_peak_bytes, 128);
    assert_eq!(pool.invocation_liveness.len(), 2);
    assert_eq!(
        plan.invocation_liveness_mode,
        InvocationLivenessMode::TotalOrderReuse
    );
    assert_eq!(plan.minimum_invocation_peak_bytes, 128);
    assert_eq!(plan.invocation_liveness[0].node_id.as_str(), "node/a");
}

#[test]
fn unordered_invocation_scratch_sums_rows() {
    let plan = two_scratch_nodes(false, false).derive().unwrap();
    let pool = &plan.dynamic_pools[0];
    assert_eq!(
        pool.invocation_liveness_mode,
        InvocationLivenessMode::ConservativeConcurrent
    );
    assert_eq!(pool.minimum_invocation_peak_bytes, 192);
    assert_eq!(
        plan.invocation_liveness_mode,
        InvocationLivenessMode::ConservativeConcurrent
    );
}

#[test]
fn binding_workspaces_are_conservative_even_when_ordered() {
    let plan = two_scratch_nodes(true, true).derive().unwrap();
    let pool = &plan.dynamic_pools[0];
    assert_eq!(pool.compatibility.usage, BufferUsage::Binding);
    assert_eq!(
        pool.invocation_liveness_mode,
        InvocationLivenessMode::ConservativeConcurrent
    );
    assert_eq!(pool.minimum_invocation_peak_bytes, 192);
}

#[test]
fn kv_cache_is_a_token_scaled_sequence_state_on_pages() {
    let (kv_heads, head_dim) = (8u64, 128u64);
    let bytes_per_token = 2 * kv_heads * head_dim * 2;
    let mut f = Fixture::new();
    f.state(
        "state.layer.0.kv",
        "value.state.layer.0.kv",
        vec![2, kv_heads, head_dim],
        StateLifetime::Sequence,
        StateCapacityDemand::TokenScaled {
            bytes_per_token,
            maximum_tokens: 32768,
        },
        StateInitialization::None,
    );
    f.node("node.layer.0.attention")
        .updates_state(
            "value.state.layer.0.kv",
            "resource/kv.layer.0",
            bytes_per_token,
        )
        .done();
    f.select("resource/kv.layer.0", paged(65536));
    let plan = f.derive().unwrap();
    let d = descriptor(&plan, "resource/kv.layer.0");
    assert_eq!(
        d.demand,
        DynamicResourceDemand::Tokens {
            bytes_per_token: 4096,
            maximum_tokens: 32768
        }
    );
    assert_eq!(
        (d.lifetime, d.usage),
        (AllocationLifetime::Sequence, BufferUsage::State)
    );
    assert_eq!(d.storage.profile, paged(65536));
    let pool = pool_of(&plan, "resource/kv.layer.0");
    assert_eq!(pool.minimum_sequence_bytes, 65536);
    assert_eq!(
        pool.theoretical_ceiling_bytes,
        (4096u64 * 32768 * 3).to_string()
    );
    assert_eq!(pool.provisioning.minimum_resident_bytes, 65536);
    assert_eq!(
        pool.provisioning.maximum_resident_bytes,
        plan.usable_capacity_bytes
    );
}

fn chain(f: &mut Fixture, ordered: bool) {
    let deps = |i: usize| -> Vec<String> {
        if ordered && i > 0 {
            vec![format!("node.{}", i - 1)]
        } else {
            Vec::new()
        }
    };
    for i in 0..5usize {
        let deps = deps(i);
        let deps: Vec<&str> = deps.iter().map(String::as_str).collect();
        let mut node = f.node(&format!("node.{i}")).after(&deps);
        if i > 0 {
            node = node.reads_tokens(
                &format!("value.act.{}", i - 1),
                &format!("resource/activation-{}", i - 1),
                64,
                4,
            );
        }
        if i < 4 {
            node = node.writes_tokens(
                &format!("value.act.{i}"),
                &format!("resource/activation-{i}"),
                64,
                4,
            );
        }
        node.done();
    }
}

#[test]
fn ordered_chain_of_activations_shares_step_slots() {
    let mut f = Fixture::new();
    chain(&mut f, true);
    let plan = f.derive().unwrap();
    let pool = pool_of(&plan, "resource/activation-0");
    let wave = StepSlotKind::OrderedSingleFenceStepWave;
    assert_eq!(
        slot_ids(pool),
        vec![
            (wave, vec!["resource/activation-0", "resource/activation-2"]),
            (wave, vec!["resource/activation-1", "resource/activation-3"]),
        ]
    );
    assert_eq!(pool.minimum_step_bytes, 32);
    assert_eq!(plan.minimum_runnable_request_bytes, 32);
}

#[test]
fn retained_activation_gets_a_dedicated_slot() {
    let mut f = Fixture::new();
    chain(&mut f, true);
    f.retain("resource/activation-2");
    let plan = f.derive().unwrap();
    let pool = pool_of(&plan, "resource/activation-0");
    let (wave, dedicated) = (
        StepSlotKind::OrderedSingleFenceStepWave,
        StepSlotKind::Dedicated,
    );
    assert_eq!(
        slot_ids(pool),
        vec![
            (wave, vec!["resource/activation-0", "resource/activation-3"]),
            (dedicated, vec!["resource/activation-1"]),
            (dedicated, vec!["resource/activation-2"]),
        ]
    );
    assert_eq!(pool.minimum_step_bytes, 48);
}

#[test]
fn unordered_activations_never_share_a_slot() {
    let mut f = Fixture::new();
    chain(&mut f, false);
    let plan = f.derive().unwrap();
    let pool = pool_of(&plan, "resource/activation-0");
    assert_eq!(pool.step_resource_slots.len(), 4);
    assert!(pool
        .step_resource_slots
        .iter()
        .all(|s| s.kind == StepSlotKind::Dedicated));
    assert_eq!(pool.minimum_step_bytes, 64);
}

#[test]
fn program_io_is_participant_fixed() {
    let mut f = Fixture::new();
    f.program_input("value.input")
        .program_output("value.output");
    f.node("node.main")
        .reads("value.input", "resource/input", 40)
        .writes("value.output", "resource/output", 24)
        .done();
    f.retain("resource/output");
    let plan = f.derive().unwrap();
    let input = descriptor(&plan, "resource/input");
    assert_eq!(
        input.demand,
        DynamicResourceDemand::ActualSequences {
            bytes_per_sequence: 48,
            maximum_sequences: 3
        }
    );
    assert_eq!(input.lifetime, AllocationLifetime::Step);
    let output = descriptor(&plan, "resource/output");
    assert_eq!(
        output.demand,
        DynamicResourceDemand::ActualSequences {
            bytes_per_sequence: 32,
            maximum_sequences: 3
        }
    );
    let pool = pool_of(&plan, "resource/input");
    assert_eq!(pool.step_resource_slots.len(), 2);
    assert_eq!(pool.minimum_step_bytes, 80);
    assert_eq!(
        pool.theoretical_ceiling_bytes,
        ((48 * 3 + 32 * 3) * 3).to_string()
    );
}

#[test]
fn plain_activation_without_projection_is_fixed_step() {
    let mut f = Fixture::new();
    f.node("node.main")
        .writes("value.hidden", "resource/hidden", 40)
        .done();
    let plan = f.derive().unwrap();
    assert_eq!(
        descriptor(&plan, "resource/hidden").demand,
        DynamicResourceDemand::Fixed { bytes: 40 }
    );
}

#[test]
fn weights_are_static_linear_contiguous() {
    let mut f = Fixture::new();
    f.weight("value.weight", 100);
    f.node("node.main")
        .reads_weight("value.weight", "resource/weight", 100)
        .done();
    f.select("resource/weight", block(4096));
    let plan = f.derive().unwrap();
    let s = &plan.static_allocations[0];
    assert_eq!((s.per_instance_bytes, s.size_bytes), (100, 112));
    assert_eq!(s.storage.profile, LINEAR);
    assert_eq!(
        s.storage.logical_layout_fingerprint.as_str(),
        "5ecd2941f2c44570bcee3178feaccaeb79f4eb49c6d9a01a0cf61df170fee566"
    );
    assert_eq!(plan.static_bytes, 112);
}

#[test]
fn zero_initialised_recurrent_state_is_fixed_per_sequence() {
    let mut f = Fixture::new();
    f.state(
        "state.layer.0.conv",
        "value.state.layer.0.conv",
        vec![4, 8],
        StateLifetime::Sequence,
        StateCapacityDemand::FixedPerScope,
        StateInitialization::Zero,
    );
    f.node("node.layer.0.attention")
        .updates_state("value.state.layer.0.conv", "resource/conv.layer.0", 64)
        .done();
    let plan = f.derive().unwrap();
    let d = descriptor(&plan, "resource/conv.layer.0");
    assert_eq!(d.demand, DynamicResourceDemand::Fixed { bytes: 64 });
    assert_eq!(
        d.initialization,
        jointplan::plan::ResourceInitialization::Zero
    );
    assert_eq!(plan.minimum_sequence_bytes, 64);
}

fn reusable_fixture() -> Fixture {
    let mut f = Fixture::new();
    f.policy.reusable_execution = Some(reusable_policy(2, &[(1, 1, 1), (2, 2, 1)]));
    f.node("node.0")
        .writes_tokens("value.act.0", "resource/activation-0", 64, 4)
        .scratch(workspace(
            WorkspaceSizeFormula::Affine {
                fixed_bytes: 32,
                bytes_per_sequence: 0,
                bytes_per_token: 8,
            },
            16,
            WorkspaceScope::Invocation,
        ))
        .done();
    f.node("node.1")
        .after(&["node.0"])
        .reads_tokens("value.act.0", "resource/activation-0", 64, 4)
        .fixed_scratch(64)
        .done();
    f
}

#[test]
fn reusable_execution_budgets_two_buckets() {
    let f = reusable_fixture();
    let plan = f.derive().unwrap();
    let reusable = plan.reusable_execution.as_ref().unwrap();
    assert_eq!(reusable.maximum_reusable_lanes, 2);
    assert_eq!(reusable.maximum_device_executables, 2 * 2 * 2);
    assert_eq!(reusable.buckets.len(), 2);
    let activations = pool_of(&plan, "resource/activation-0");
    let scratch = pool_of(&plan, "resource/scratch/node.0");
    let budget = |bucket: usize, pool: &str| {
        reusable.buckets[bucket]
            .pool_budgets
            .iter()
            .find(|b| b.pool_id == pool)
            .map(|b| (b.step_bytes, b.invocation_bytes))
    };
    assert_eq!(budget(0, &activations.pool_id), Some((16, 0)));
    assert_eq!(budget(1, &activations.pool_id), Some((32, 0)));
    assert_eq!(budget(0, &scratch.pool_id), Some((0, 64)));
    assert_eq!(budget(1, &scratch.pool_id), Some((0, 64)));
    assert_eq!(activations.reusable_workspace_ceiling_bytes, (16 + 32) * 2);
    assert_eq!(scratch.reusable_workspace_ceiling_bytes, (64 + 64) * 2);
    assert_eq!(
        activations.theoretical_ceiling_bytes,
        (16 * 4096 * 3).to_string()
    );
    assert_eq!(
        scratch.theoretical_ceiling_bytes,
        ((32800 + 64) * 3).to_string()
    );
    // The live maximum holds the step activation once (a step's token ceiling covers its
    // sequences), not once per sequence as the theoretical ceiling counts it.
    assert_eq!(
        activations.provisioning.maximum_resident_bytes,
        16 * 4096 + 96
    );
    assert_eq!(
        plan.theoretical_ceiling_bytes,
        (16u64 * 4096 * 3 + 96 + (32800 + 64) * 3 + 256).to_string()
    );
    let sorted = reusable.buckets[0]
        .pool_budgets
        .windows(2)
        .all(|w| w[0].pool_id < w[1].pool_id);
    assert!(sorted);
}

#[test]
fn capacity_failure_names_the_largest_contributors() {
    let mut f = Fixture::new();
    f.weight("value.weight", 1_048_320);
    f.node("node.main")
        .reads_weight("value.weight", "resource/weight", 1_048_320)
        .writes("value.hidden", "resource/hidden", 256)
        .done();
    let err = f.derive().unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(
            err,
            MemoryError::CapacityExceeded {
                required: 1_048_576,
                static_bytes: 1_048_320,
                dynamic_bytes: 256,
                usable: 1_048_448,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(message.contains(
        "minimum runnable plan requires 1048576 bytes (static 1048320 + dynamic 256) exceeding \
         usable capacity 1048448"
    ));
    assert!(
        message.contains("resource/weight (static Weights, 1048320 bytes)"),
        "{message}"
    );
    assert!(message.contains("resource/hidden"), "{message}");
}

#[test]
fn derivation_is_deterministic_and_round_trips() {
    let f = reusable_fixture();
    let a = f.derive().unwrap();
    let b = f.derive().unwrap();
    assert_eq!(a, b);
    let json = serde_json::to_string(&a).unwrap();
    let back: MemoryPlan = serde_json::from_str(&json).unwrap();
    assert_eq!(back, a);
    f.validate(&back).unwrap();
}

#[test]
fn report_itemises_static_dynamic_and_pools() {
    let mut f = reusable_fixture();
    f.weight("value.weight", 96);
    f.node("node.2")
        .after(&["node.1"])
        .reads_weight("value.weight", "resource/weight", 96)
        .done();
    let plan = f.derive().unwrap();
    let report = memory_report(&plan);
    assert_eq!(report.static_by_usage.weights_bytes, 96);
    assert_eq!(report.static_bytes, 96);
    assert_eq!(report.dynamic_minimum_by_lifetime.step_bytes, 16);
    assert_eq!(report.dynamic_minimum_by_lifetime.invocation_peak_bytes, 64);
    assert_eq!(report.minimum_runnable_bytes, 80);
    assert_eq!(report.headroom_bytes, plan.usable_capacity_bytes - 96 - 80);
    assert_eq!(report.pools.len(), 2);
    assert_eq!(report.dynamic_resources_by_lifetime, [0, 0, 1, 2]);
    let json = serde_json::to_value(&report).unwrap();
    assert!(json["pools"][0]["profile_label"].is_string());
}
