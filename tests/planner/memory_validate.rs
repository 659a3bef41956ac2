//! `validate_memory_plan` (rules 4.8) on a derived plan: it passes untouched, and
//! tampering with any aggregate, pool field, descriptor, static row, reusable budget or
//! liveness row is rejected with the culprit named.

use crate::common::memory_fixture;

use jointplan::memory::MemoryError;
use jointplan::plan::{
    InvocationLivenessMode, InvocationLivenessRow, MemoryPlan, StepResourceSlot, StepSlotKind,
};
use jointplan::request::{
    StateCapacityDemand, StateInitialization, StateLifetime, WorkspaceScope, WorkspaceSizeFormula,
};
use memory_fixture::*;

/// A small hybrid decoder: embedding, attention with a paged KV cache, a feed-forward with a
/// zero-initialised recurrent state, logits; weights, program I/O, scratch, binding and
/// persistent workspaces and a two-bucket reusable policy.
fn rich() -> Fixture {
    let mut f = Fixture::new();
    f.policy.reusable_execution = Some(reusable_policy(2, &[(1, 1, 1), (2, 2, 1)]));
    f.weight("value.weight", 128);
    f.state(
        "state.layer.0.kv",
        "value.state.layer.0.kv",
        vec![2, 4, 4],
        StateLifetime::Sequence,
        StateCapacityDemand::TokenScaled {
            bytes_per_token: 64,
            maximum_tokens: 1024,
        },
        StateInitialization::None,
    );
    f.state(
        "state.layer.0.conv",
        "value.state.layer.0.conv",
        vec![8],
        StateLifetime::Sequence,
        StateCapacityDemand::FixedPerScope,
        StateInitialization::Zero,
    );
    f.program_input("value.input.token_ids")
        .program_output("value.output.logits");
    f.node("node.embedding")
        .reads("value.input.token_ids", "resource/input", 32)
        .reads_weight("value.weight", "resource/weight", 128)
        .writes_tokens("value.hidden.embedding", "resource/activation-0", 64, 4)
        .fixed_scratch(64)
        .persistent(workspace(
            WorkspaceSizeFormula::Fixed { bytes: 1 },
            16,
            WorkspaceScope::Plan,
        ))
        .done();
    f.node("node.layer.0.attention")
        .after(&["node.embedding"])
        .reads_tokens("value.hidden.embedding", "resource/activation-0", 64, 4)
        .updates_state("value.state.layer.0.kv", "resource/kv", 64)
        .writes_tokens("value.layer.0.attention", "resource/activation-1", 64, 4)
        .scratch(workspace(
            WorkspaceSizeFormula::Affine {
                fixed_bytes: 32,
                bytes_per_sequence: 0,
                bytes_per_token: 8,
            },
            16,
            WorkspaceScope::Invocation,
        ))
        .binding_workspace(workspace(
            WorkspaceSizeFormula::ActualSequences {
                bytes_per_sequence: 32,
            },
            16,
            WorkspaceScope::Invocation,
        ))
        .persistent(workspace(
            WorkspaceSizeFormula::Fixed { bytes: 128 },
            16,
            WorkspaceScope::Sequence,
        ))
        .done();
    f.node("node.layer.0.feed_forward")
        .after(&["node.layer.0.attention"])
        .reads_tokens("value.layer.0.attention", "resource/activation-1", 64, 4)
        .updates_state("value.state.layer.0.conv", "resource/conv", 16)
        .writes_tokens("value.layer.0.mlp", "resource/activation-2", 64, 4)
        .fixed_scratch(128)
        .done();
    f.node("node.logits")
        .after(&["node.layer.0.feed_forward"])
        .reads_tokens("value.layer.0.mlp", "resource/activation-2", 64, 4)
        .writes("value.output.logits", "resource/output", 48)
        .done();
    f.retain("resource/output");
    f.select("resource/kv", paged(4096));
    f.select("resource/persistent/node.embedding", block(4096));
    f
}

fn derived() -> (Fixture, MemoryPlan) {
    let f = rich();
    let plan = f.derive().unwrap();
    (f, plan)
}

fn tampered(f: &Fixture, plan: &MemoryPlan, edit: impl FnOnce(&mut MemoryPlan)) -> MemoryError {
    let mut copy = plan.clone();
    edit(&mut copy);
    assert_ne!(&copy, plan, "the edit changed nothing");
    f.validate(&copy)
        .expect_err("tampered plan must be rejected")
}

#[test]
fn derived_plan_validates_and_has_every_feature() {
    let (f, plan) = derived();
    f.validate(&plan).unwrap();
    assert_eq!(plan.static_bytes, 128 + 4096);
    assert!(plan.reusable_execution.is_some());
    assert!(plan.dynamic_pools.iter().any(|p| p
        .step_resource_slots
        .iter()
        .any(|s| s.kind == StepSlotKind::OrderedSingleFenceStepWave)));
    let modes: Vec<_> = plan
        .dynamic_pools
        .iter()
        .map(|p| p.invocation_liveness_mode)
        .collect();
    assert!(modes.contains(&InvocationLivenessMode::TotalOrderReuse));
    assert!(modes.contains(&InvocationLivenessMode::ConservativeConcurrent));
    assert_eq!(
        plan.invocation_liveness_mode,
        InvocationLivenessMode::ConservativeConcurrent
    );
}

#[test]
fn every_tampered_aggregate_is_rejected() {
    let (f, plan) = derived();
    type Edit = fn(&mut MemoryPlan);
    let cases: [(&str, Edit); 8] = [
        ("static_bytes", |p| p.static_bytes += 1),
        ("minimum_request_bytes", |p| p.minimum_request_bytes += 1),
        ("minimum_sequence_bytes", |p| p.minimum_sequence_bytes += 1),
        ("minimum_step_bytes", |p| p.minimum_step_bytes += 1),
        ("minimum_invocation_peak_bytes", |p| {
            p.minimum_invocation_peak_bytes += 1
        }),
        ("minimum_runnable_request_bytes", |p| {
            p.minimum_runnable_request_bytes += 1
        }),
        ("theoretical_ceiling_bytes", |p| {
            p.theoretical_ceiling_bytes = "1".to_owned()
        }),
        ("usable_capacity_bytes", |p| p.usable_capacity_bytes -= 1),
    ];
    for (field, edit) in cases {
        match tampered(&f, &plan, edit) {
            MemoryError::AggregateMismatch { field: got, .. } => assert_eq!(got, field),
            other => panic!("{field}: {other:?}"),
        }
    }
    for edit in [
        (|p: &mut MemoryPlan| p.policy_capacity_bytes -= 16) as Edit,
        |p| p.reserve_bytes += 1,
    ] {
        assert!(matches!(
            tampered(&f, &plan, edit),
            MemoryError::AggregateMismatch {
                field: "usable_capacity_bytes",
                ..
            }
        ));
    }
    assert!(matches!(
        tampered(&f, &plan, |p| p.device_capacity_bytes = 0),
        MemoryError::ZeroDeviceCapacity
    ));
    assert!(matches!(
        tampered(&f, &plan, |p| p.device_capacity_bytes =
            p.policy_capacity_bytes - 1),
        MemoryError::PolicyCapacityOutOfRange { .. }
    ));
    assert!(matches!(
        tampered(&f, &plan, |p| p.reserve_bytes = p.policy_capacity_bytes),
        MemoryError::ReserveNotBelowCapacity { .. }
    ));
    assert!(matches!(
        tampered(&f, &plan, |p| p.maximum_active_sequences = 0),
        MemoryError::ZeroMaximumActiveSequences
    ));
    assert!(matches!(
        tampered(&f, &plan, |p| p.maximum_active_sequences = 2),
        MemoryError::InstancesMismatch {
            stored: 3,
            expected: 2,
            ..
        }
    ));
}

#[test]
fn every_tampered_pool_field_is_rejected() {
    let (f, plan) = derived();
    type Edit = fn(&mut jointplan::plan::DynamicBackingPool);
    let cases: [(&str, Edit); 14] = [
        ("compatibility", |p| p.compatibility.alignment_bytes *= 2),
        ("resource_ids", |p| {
            p.resource_ids.pop();
        }),
        ("minimum_request_bytes", |p| p.minimum_request_bytes += 1),
        ("minimum_sequence_bytes", |p| p.minimum_sequence_bytes += 1),
        ("step_resource_slots", |p| {
            p.step_resource_slots.push(StepResourceSlot {
                kind: StepSlotKind::Dedicated,
                resource_ids: vec![rid("resource/extra")],
            })
        }),
        ("minimum_step_bytes", |p| p.minimum_step_bytes += 1),
        ("minimum_invocation_peak_bytes", |p| {
            p.minimum_invocation_peak_bytes += 1
        }),
        ("theoretical_ceiling_bytes", |p| {
            p.theoretical_ceiling_bytes.push('0')
        }),
        ("reusable_workspace_ceiling_bytes", |p| {
            p.reusable_workspace_ceiling_bytes += 1
        }),
        ("provisioning.minimum_resident_bytes", |p| {
            p.provisioning.minimum_resident_bytes += 1
        }),
        ("provisioning.maximum_resident_bytes", |p| {
            p.provisioning.maximum_resident_bytes -= 1
        }),
        ("invocation_liveness_mode", |p| {
            p.invocation_liveness_mode = match p.invocation_liveness_mode {
                InvocationLivenessMode::ConservativeConcurrent => {
                    InvocationLivenessMode::TotalOrderReuse
                }
                _ => InvocationLivenessMode::ConservativeConcurrent,
            }
        }),
        ("invocation_liveness", |p| {
            p.invocation_liveness.push(InvocationLivenessRow {
                node_id: nid("node.extra"),
                resource_ids: vec![rid("resource/extra")],
            })
        }),
        ("step_resource_slots", |p| {
            for slot in &mut p.step_resource_slots {
                slot.kind = match slot.kind {
                    StepSlotKind::Dedicated => StepSlotKind::OrderedSingleFenceStepWave,
                    StepSlotKind::OrderedSingleFenceStepWave => StepSlotKind::Dedicated,
                };
            }
        }),
    ];
    for index in 0..plan.dynamic_pools.len() {
        for (field, edit) in cases {
            let mut copy = plan.clone();
            edit(&mut copy.dynamic_pools[index]);
            if copy == plan {
                continue; // e.g. flipping the kinds of a pool without step slots
            }
            match f.validate(&copy) {
                Err(MemoryError::PoolMismatch { pool, field: got }) => {
                    assert_eq!(got, field, "pool {index}");
                    assert_eq!(pool, plan.dynamic_pools[index].pool_id);
                }
                other => panic!("pool {index} field {field}: {other:?}"),
            }
        }
    }
}

#[test]
fn pool_list_tampering_is_rejected() {
    let (f, plan) = derived();
    assert!(matches!(
        tampered(&f, &plan, |p| {
            p.dynamic_pools.pop();
        }),
        MemoryError::PoolSetMismatch { .. }
    ));
    assert!(matches!(
        tampered(&f, &plan, |p| {
            let last = p.dynamic_pools.len() - 1;
            p.dynamic_pools[last].pool_id = format!("dynamic-pool/sha256/{}", "f".repeat(64));
        }),
        MemoryError::PoolSetMismatch { .. }
    ));
    assert!(matches!(
        tampered(&f, &plan, |p| p.dynamic_pools.swap(0, 1)),
        MemoryError::UnsortedRows {
            table: "dynamic pool",
            ..
        }
    ));
}

#[test]
fn descriptor_tampering_is_rejected() {
    let (f, plan) = derived();
    assert!(matches!(
        tampered(&f, &plan, |p| p.dynamic_descriptors[0].pool_id =
            format!("dynamic-pool/sha256/{}", "0".repeat(64))),
        MemoryError::PoolIdMismatch { .. }
    ));
    assert!(matches!(
        tampered(&f, &plan, |p| p.dynamic_descriptors[0].alignment_bytes = 3),
        MemoryError::InvalidResourceAlignment { alignment: 3, .. }
    ));
    assert!(matches!(
        tampered(&f, &plan, |p| p.dynamic_descriptors[0]
            .theoretical_maximum_instances = 1),
        MemoryError::InstancesMismatch { .. }
    ));
    assert!(matches!(
        tampered(&f, &plan, |p| p.dynamic_descriptors.swap(0, 1)),
        MemoryError::UnsortedRows {
            table: "dynamic descriptor",
            ..
        }
    ));
    assert!(matches!(
        tampered(&f, &plan, |p| {
            let last = p.dynamic_descriptors.len() - 1;
            p.dynamic_descriptors[last].base_resource_id = rid("resource/weight");
        }),
        MemoryError::StaticAndDynamic { .. }
    ));
    assert!(matches!(
        tampered(&f, &plan, |p| {
            let scratch = p
                .dynamic_descriptors
                .iter_mut()
                .find(|d| d.usage == BufferUsage::Scratch)
                .unwrap();
            scratch.usage = BufferUsage::Activations;
        }),
        MemoryError::InconsistentDescriptor { .. }
    ));
    assert!(matches!(
        tampered(&f, &plan, |p| {
            p.dynamic_descriptors[0].demand =
                jointplan::plan::DynamicResourceDemand::Fixed { bytes: 0 }
        }),
        MemoryError::InvalidDemand { .. }
    ));
    // A larger demand keeps every row valid but changes the re-derived pool.
    assert!(matches!(
        tampered(&f, &plan, |p| {
            let d = p
                .dynamic_descriptors
                .iter_mut()
                .find(|d| d.base_resource_id.as_str() == "resource/activation-0")
                .unwrap();
            d.demand = jointplan::plan::DynamicResourceDemand::Tokens {
                bytes_per_token: 32,
                maximum_tokens: 4096,
            };
        }),
        MemoryError::PoolMismatch { .. }
    ));
}

#[test]
fn static_tampering_is_rejected() {
    let (f, plan) = derived();
    assert!(matches!(
        tampered(&f, &plan, |p| p.static_allocations[0].size_bytes += 16),
        MemoryError::InvalidStaticAllocation { .. }
    ));
    assert!(matches!(
        tampered(&f, &plan, |p| p.static_allocations[0].instance_count = 2),
        MemoryError::InvalidStaticAllocation { .. }
    ));
    assert!(matches!(
        tampered(&f, &plan, |p| p.static_allocations[1].per_instance_bytes =
            129),
        MemoryError::InvalidStaticAllocation { .. }
    ));
    assert!(matches!(
        tampered(&f, &plan, |p| p.static_allocations.swap(0, 1)),
        MemoryError::UnsortedRows {
            table: "static allocation",
            ..
        }
    ));
    assert!(matches!(
        tampered(&f, &plan, |p| {
            let row = p.static_allocations[0].clone();
            p.static_allocations = vec![row; 65_537];
        }),
        MemoryError::TooManyRows { .. }
    ));
}

#[test]
fn reusable_plan_tampering_is_rejected() {
    let (f, plan) = derived();
    assert!(matches!(
        tampered(&f, &plan, |p| p
            .reusable_execution
            .as_mut()
            .unwrap()
            .maximum_device_executables += 1),
        MemoryError::ReusablePlanMismatch {
            field: "maximum_device_executables"
        }
    ));
    assert!(matches!(
        tampered(&f, &plan, |p| p
            .reusable_execution
            .as_mut()
            .unwrap()
            .buckets[0]
            .pool_budgets[0]
            .step_bytes += 1),
        MemoryError::ReusablePlanMismatch { field: "buckets" }
    ));
    assert!(matches!(
        tampered(&f, &plan, |p| p
            .reusable_execution
            .as_mut()
            .unwrap()
            .buckets[1]
            .pool_budgets[0]
            .pool_id =
            format!("dynamic-pool/sha256/{}", "0".repeat(64))),
        MemoryError::UnknownCeilingPool { .. }
    ));
    assert!(matches!(
        tampered(&f, &plan, |p| p
            .reusable_execution
            .as_mut()
            .unwrap()
            .maximum_reusable_lanes = 0),
        MemoryError::InvalidReusablePolicy { .. }
    ));
    assert!(matches!(
        tampered(&f, &plan, |p| p
            .reusable_execution
            .as_mut()
            .unwrap()
            .maximum_reusable_lanes = 3),
        MemoryError::PoolMismatch {
            field: "reusable_workspace_ceiling_bytes",
            ..
        }
    ));
    assert!(matches!(
        tampered(&f, &plan, |p| p.reusable_execution = None),
        MemoryError::PoolMismatch {
            field: "reusable_workspace_ceiling_bytes",
            ..
        }
    ));
}

#[test]
fn global_liveness_tampering_is_rejected() {
    let (f, plan) = derived();
    assert!(matches!(
        tampered(&f, &plan, |p| p.invocation_liveness_mode =
            InvocationLivenessMode::TotalOrderReuse),
        MemoryError::LivenessMismatch { field: "mode" }
    ));
    assert!(matches!(
        tampered(&f, &plan, |p| {
            p.invocation_liveness.pop();
        }),
        MemoryError::LivenessMismatch { field: "rows" }
    ));
}

#[test]
fn different_nodes_or_retention_re_derive_different_pools() {
    let (mut f, plan) = derived();
    f.retain("resource/activation-2");
    assert!(matches!(
        f.validate(&plan),
        Err(MemoryError::PoolMismatch {
            field: "step_resource_slots",
            ..
        })
    ));
    let (mut f, plan) = derived();
    f.node_mut("node.layer.0.feed_forward").dependencies.clear();
    assert!(matches!(
        f.validate(&plan),
        Err(MemoryError::PoolMismatch { .. })
    ));
    let (f, plan) = derived();
    assert!(matches!(
        jointplan::memory::validate_memory_plan(&plan, &[], &f.retained),
        Err(MemoryError::NoNodes)
    ));
}
