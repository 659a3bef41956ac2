//! One test per memory-plan rule that rejects bad input, with the exact `MemoryError`
//! variant (rules 4).

use crate::common::memory_fixture;

use jointplan::memory::MemoryError;
use jointplan::request::{
    ElementType, StateCapacityDemand, StateInitialization, StateLifetime, StorageAllocator,
    StorageProfile, StorageView, ValueRole, WorkspaceScope, WorkspaceSizeFormula,
};
use memory_fixture::*;

macro_rules! rejects {
    ($fixture:expr, $pattern:pat) => {{
        let result = $fixture.derive();
        match result {
            Err(ref err @ $pattern) => {
                assert!(!err.to_string().is_empty());
                err.to_string()
            }
            other => panic!("expected {}, got {other:?}", stringify!($pattern)),
        }
    }};
}

fn one_activation() -> Fixture {
    let mut f = Fixture::new();
    f.node("node.main")
        .writes("value.hidden", "resource/hidden", 64)
        .done();
    f
}

#[test]
fn zero_device_capacity() {
    let mut f = one_activation();
    f.device_capacity_bytes = 0;
    rejects!(f, MemoryError::ZeroDeviceCapacity);
}

#[test]
fn policy_capacity_above_the_device() {
    let mut f = one_activation();
    f.device_capacity_bytes = 1000;
    rejects!(
        f,
        MemoryError::PolicyCapacityOutOfRange {
            policy: 1048576,
            device: 1000
        }
    );
    f.device_capacity_bytes = 1 << 20;
    f.policy.memory_capacity_bytes = 0;
    rejects!(f, MemoryError::PolicyCapacityOutOfRange { policy: 0, .. });
}

#[test]
fn reserve_not_below_capacity() {
    let mut f = one_activation();
    f.policy.memory_reserve_bytes = f.policy.memory_capacity_bytes;
    rejects!(f, MemoryError::ReserveNotBelowCapacity { .. });
}

#[test]
fn zero_maximum_active_sequences() {
    let mut f = one_activation();
    f.policy.maximum_active_sequences = 0;
    rejects!(f, MemoryError::ZeroMaximumActiveSequences);
}

#[test]
fn no_nodes() {
    rejects!(Fixture::new(), MemoryError::NoNodes);
}

#[test]
fn duplicate_node() {
    let mut f = one_activation();
    f.node("node.main")
        .writes("value.other", "resource/other", 64)
        .done();
    let message = rejects!(f, MemoryError::DuplicateNode { .. });
    assert!(message.contains("node.main"));
}

#[test]
fn dependency_not_earlier() {
    let mut f = Fixture::new();
    f.node("node/a")
        .after(&["node/b"])
        .writes("value.a", "resource/a", 64)
        .done();
    f.node("node/b").writes("value.b", "resource/b", 64).done();
    let message = rejects!(f, MemoryError::DependencyNotEarlier { .. });
    assert!(message.contains("node/a depends on node/b"), "{message}");
}

#[test]
fn value_alignment_not_a_power_of_two() {
    let mut f = Fixture::new();
    f.node("node.main")
        .value_alignment(24)
        .writes("value.hidden", "resource/hidden", 64)
        .done();
    rejects!(f, MemoryError::InvalidValueAlignment { alignment: 24, .. });
}

#[test]
fn misaligned_component() {
    let mut f = Fixture::new();
    f.node("node.main")
        .bind(Bind {
            offset: 8,
            ..Bind::new("value.hidden", ValueRole::Output, "resource/hidden", 64)
        })
        .done();
    let message = rejects!(
        f,
        MemoryError::MisalignedComponent {
            offset: 8,
            alignment: 16,
            ..
        }
    );
    assert!(message.contains("resource/hidden") && message.contains("value.hidden"));
}

#[test]
fn component_end_overflows() {
    let mut f = Fixture::new();
    f.node("node.main")
        .bind(Bind {
            offset: u64::MAX - 15,
            ..Bind::new("value.hidden", ValueRole::Output, "resource/hidden", 100)
        })
        .done();
    rejects!(f, MemoryError::ComponentEndOverflow { .. });
}

#[test]
fn projected_component_not_at_offset_zero() {
    let mut f = Fixture::new();
    f.node("node.main")
        .bind(Bind {
            offset: 16,
            tokens: Some(4),
            ..Bind::new("value.hidden", ValueRole::Output, "resource/hidden", 64)
        })
        .done();
    rejects!(f, MemoryError::ProjectedComponentOffset { offset: 16, .. });
}

#[test]
fn projected_length_not_a_whole_number_of_tokens() {
    let mut f = Fixture::new();
    f.node("node.main")
        .writes_tokens("value.hidden", "resource/hidden", 10, 4)
        .done();
    rejects!(
        f,
        MemoryError::ProjectedLengthNotDivisible {
            length: 10,
            extent: 4,
            ..
        }
    );
}

#[test]
fn zero_bytes_per_token() {
    let mut f = Fixture::new();
    f.node("node.main")
        .writes_tokens("value.hidden", "resource/hidden", 0, 4)
        .done();
    rejects!(
        f,
        MemoryError::ZeroTokenProjection {
            bytes_per_token: 0,
            extent: 4,
            ..
        }
    );
}

#[test]
fn state_demand_below_its_tensor() {
    let mut f = Fixture::new();
    f.state(
        "state.cache",
        "value.state",
        vec![8],
        StateLifetime::Sequence,
        StateCapacityDemand::TokenScaled {
            bytes_per_token: 8,
            maximum_tokens: 4,
        },
        StateInitialization::None,
    );
    f.node("node.main")
        .updates_state("value.state", "resource/shared-state", 8)
        .done();
    let message = rejects!(f, MemoryError::InvalidStateDemand { .. });
    assert!(message.contains("state.cache"));
}

#[test]
fn state_binding_beyond_bytes_per_token() {
    let mut f = Fixture::new();
    f.state(
        "state.cache",
        "value.state",
        vec![4],
        StateLifetime::Sequence,
        StateCapacityDemand::TokenScaled {
            bytes_per_token: 8,
            maximum_tokens: 16,
        },
        StateInitialization::None,
    );
    f.node("node.main")
        .bind(Bind {
            usage: BufferUsage::State,
            offset: 16,
            ..Bind::new("value.state", ValueRole::Input, "resource/shared-state", 8)
        })
        .done();
    rejects!(
        f,
        MemoryError::StateBytesPerTokenBelowEnd {
            bytes_per_token: 8,
            end: 24,
            ..
        }
    );
}

#[test]
fn plain_value_bound_as_state() {
    let mut f = Fixture::new();
    f.node("node.main")
        .bind(Bind {
            usage: BufferUsage::State,
            ..Bind::new("value.hidden", ValueRole::Output, "resource/hidden", 64)
        })
        .done();
    rejects!(
        f,
        MemoryError::NonActivationValue {
            usage: BufferUsage::State,
            ..
        }
    );
}

#[test]
fn conflicting_resource_use() {
    let mut f = Fixture::new();
    f.node("node/a")
        .writes("value.a", "resource/shared", 64)
        .done();
    f.node("node/b")
        .bind(Bind {
            offset: 64,
            element_type: ElementType::F32,
            ..Bind::new("value.b", ValueRole::Output, "resource/shared", 64)
        })
        .done();
    let message = rejects!(f, MemoryError::ConflictingResourceUse { .. });
    assert!(
        message.contains("node node/a uses it as Activations F16"),
        "{message}"
    );
    assert!(
        message.contains("node node/b uses it as Activations F32"),
        "{message}"
    );
    assert!(message.contains("conflicting usage, dtype, lifetime, or demand"));
}

#[test]
fn conflicting_demand_token_scaled_and_fixed() {
    let mut f = Fixture::new();
    f.node("node/a")
        .writes_tokens("value.a", "resource/shared", 64, 4)
        .done();
    f.node("node/b")
        .reads("value.a", "resource/shared", 64)
        .done();
    rejects!(f, MemoryError::ConflictingResourceUse { .. });
}

#[test]
fn workspace_resource_without_estimate() {
    let mut f = one_activation();
    f.node_mut("node.main").scratch_resource = Some(rid("resource/scratch/node.main"));
    rejects!(
        f,
        MemoryError::WorkspacePresenceMismatch {
            resource_state: "present",
            ..
        }
    );
}

#[test]
fn estimate_without_workspace_resource() {
    let mut f = Fixture::new();
    f.node("node.main").fixed_binding(64).done();
    f.node_mut("node.main").binding_resource = None;
    rejects!(
        f,
        MemoryError::WorkspacePresenceMismatch {
            resource_state: "absent",
            ..
        }
    );
}

#[test]
fn scratch_must_be_invocation_scoped() {
    let mut f = Fixture::new();
    f.node("node.main")
        .scratch(workspace(
            WorkspaceSizeFormula::Fixed { bytes: 64 },
            16,
            WorkspaceScope::Step,
        ))
        .done();
    rejects!(
        f,
        MemoryError::InvocationWorkspaceScope {
            scope: WorkspaceScope::Step,
            ..
        }
    );
}

#[test]
fn persistent_cannot_be_invocation_scoped() {
    let mut f = Fixture::new();
    f.node("node.main")
        .persistent(workspace(
            WorkspaceSizeFormula::Fixed { bytes: 64 },
            16,
            WorkspaceScope::Invocation,
        ))
        .done();
    rejects!(f, MemoryError::PersistentInvocationScope { .. });
}

#[test]
fn plan_scope_persistent_needs_a_fixed_formula() {
    let mut f = Fixture::new();
    f.node("node.main")
        .persistent(workspace(
            WorkspaceSizeFormula::Tokens { bytes_per_token: 4 },
            16,
            WorkspaceScope::Plan,
        ))
        .done();
    rejects!(f, MemoryError::PlanScopeNeedsFixedFormula { .. });
}

#[test]
fn workspace_alignment_not_a_power_of_two() {
    let mut f = Fixture::new();
    f.node("node.main")
        .scratch(workspace(
            WorkspaceSizeFormula::Fixed { bytes: 64 },
            0,
            WorkspaceScope::Invocation,
        ))
        .done();
    rejects!(
        f,
        MemoryError::InvalidWorkspaceAlignment { alignment: 0, .. }
    );
}

#[test]
fn missing_selected_profile() {
    let mut f = one_activation();
    f.profiles.clear();
    let message = rejects!(f, MemoryError::MissingSelectedProfile { .. });
    assert!(message.contains("resource/hidden") && message.contains("node.main"));
}

#[test]
fn one_id_for_a_value_and_a_workspace() {
    let mut f = Fixture::new();
    f.node("node.main")
        .writes("value.hidden", "resource/scratch/node.main", 64)
        .fixed_scratch(64)
        .done();
    let message = rejects!(f, MemoryError::DuplicateResource { .. });
    assert!(
        message.contains("scratch workspace of node node.main"),
        "{message}"
    );
}

#[test]
fn invalid_workspace_demand() {
    let mut f = Fixture::new();
    f.node("node.main").fixed_scratch(0).done();
    rejects!(f, MemoryError::InvalidDemand { .. });
}

#[test]
fn demand_overflows_when_quantized_at_its_maximum() {
    let mut f = Fixture::new();
    f.policy.maximum_scheduled_tokens = 2;
    f.node("node.main")
        .scratch(workspace(
            WorkspaceSizeFormula::Tokens {
                bytes_per_token: (1 << 63) - 1,
            },
            16,
            WorkspaceScope::Invocation,
        ))
        .done();
    rejects!(f, MemoryError::DemandEvaluation { .. });
}

#[test]
fn zero_initialised_request_state_is_inconsistent() {
    let mut f = Fixture::new();
    f.state(
        "state.cache",
        "value.state",
        vec![4],
        StateLifetime::Request,
        StateCapacityDemand::FixedPerScope,
        StateInitialization::Zero,
    );
    f.node("node.main")
        .updates_state("value.state", "resource/shared-state", 8)
        .done();
    rejects!(f, MemoryError::InconsistentDescriptor { .. });
}

#[test]
fn zero_byte_plan_persistent_is_an_invalid_static_allocation() {
    let mut f = Fixture::new();
    f.node("node.main")
        .persistent(workspace(
            WorkspaceSizeFormula::Fixed { bytes: 0 },
            16,
            WorkspaceScope::Plan,
        ))
        .done();
    rejects!(f, MemoryError::InvalidStaticAllocation { .. });
}

#[test]
fn illegal_selected_profile() {
    let mut f = one_activation();
    f.select(
        "resource/hidden",
        StorageProfile {
            allocator: StorageAllocator::LinearArena,
            view: StorageView::PagedRegions { block_bytes: 4096 },
        },
    );
    rejects!(f, MemoryError::IllegalProfile { .. });
}

#[test]
fn static_bytes_overflow() {
    let mut f = Fixture::new();
    f.weight("value.weight.a", 1 << 62)
        .weight("value.weight.b", 1 << 62);
    f.node("node.main")
        .reads_weight("value.weight.a", "resource/weight-a", 1 << 63)
        .reads_weight("value.weight.b", "resource/weight-b", 1 << 63)
        .done();
    let message = rejects!(f, MemoryError::Overflow { .. });
    assert!(message.contains("static bytes"));
}

#[test]
fn static_quantization_overflow() {
    let mut f = Fixture::new();
    f.weight("value.weight", 1 << 62);
    f.node("node.main")
        .reads_weight("value.weight", "resource/weight", u64::MAX - 1)
        .done();
    rejects!(f, MemoryError::Overflow { .. });
}

#[test]
fn retained_weight_is_not_dynamic() {
    let mut f = Fixture::new();
    f.weight("value.weight", 64);
    f.node("node.main")
        .reads_weight("value.weight", "resource/weight", 64)
        .done();
    f.retain("resource/weight");
    rejects!(f, MemoryError::RetainedResourceNotDynamic { .. });
}

#[test]
fn retained_state_is_the_wrong_class() {
    let mut f = Fixture::new();
    f.state(
        "state.cache",
        "value.state",
        vec![4],
        StateLifetime::Sequence,
        StateCapacityDemand::FixedPerScope,
        StateInitialization::None,
    );
    f.node("node.main")
        .updates_state("value.state", "resource/shared-state", 8)
        .done();
    f.retain("resource/shared-state");
    rejects!(
        f,
        MemoryError::RetainedResourceClass {
            usage: BufferUsage::State,
            ..
        }
    );
}

#[test]
fn step_resource_used_by_no_node() {
    let mut f = one_activation();
    f.node_mut("node.main").resources.clear();
    rejects!(f, MemoryError::StepResourceWithoutUsers { .. });
}

#[test]
fn invocation_resource_used_by_no_node() {
    let mut f = Fixture::new();
    f.node("node.main").fixed_scratch(64).done();
    f.node_mut("node.main").resources.clear();
    rejects!(f, MemoryError::InvocationResourceWithoutUsers { .. });
}

#[test]
fn pool_above_the_dynamic_capacity_is_refused_naming_its_resource() {
    // Two unordered rows of 1 MiB scratch each (the second node also uses the first's): the
    // concurrent minimum is 2 MiB, above the 1 MiB less the 128-byte reserve. A pool's live
    // maximum is never below its minimum, so the refusal is the capacity check's, which
    // names the scratch resource.
    let mut f = Fixture::new();
    f.policy.maximum_active_sequences = 1;
    f.node("node/a").fixed_scratch(1 << 20).done();
    f.node("node/b").done();
    f.node_mut("node/b")
        .resources
        .push(rid("resource/scratch/node/a"));
    let message = rejects!(
        f,
        MemoryError::CapacityExceeded {
            required: 2_097_152,
            usable: 1_048_448,
            ..
        }
    );
    assert!(message.contains("resource/scratch/node/a"), "{message}");
}

#[test]
fn invalid_reusable_policy() {
    let mut f = one_activation();
    f.policy.reusable_execution = Some(reusable_policy(0, &[(1, 1, 1)]));
    rejects!(f, MemoryError::InvalidReusablePolicy { .. });
    f.policy.reusable_execution = Some(reusable_policy(1, &[(2, 2, 1), (1, 1, 1)]));
    rejects!(f, MemoryError::InvalidReusablePolicy { .. });
    f.policy.reusable_execution = Some(reusable_policy(1, &[(4, 1, 1)]));
    rejects!(f, MemoryError::InvalidReusablePolicy { .. });
    let mut policy = reusable_policy(1, &[(1, 1, 1)]);
    policy.buckets[0].bucket_id = "reusable-bucket/sha256/wrong".to_owned();
    f.policy.reusable_execution = Some(policy);
    rejects!(f, MemoryError::InvalidReusablePolicy { .. });
}

#[test]
fn reusable_bucket_beyond_a_page_bound() {
    let mut f = Fixture::new();
    f.policy.reusable_execution = Some(reusable_policy(1, &[(1, 1, 2)]));
    f.node("node.main")
        .scratch(workspace(
            WorkspaceSizeFormula::Pages {
                bytes_per_page: 64,
                maximum_pages: 1,
            },
            16,
            WorkspaceScope::Invocation,
        ))
        .done();
    rejects!(f, MemoryError::ReusableBucketShape { .. });
}

fn many_liveness_references() -> Fixture {
    let mut f = Fixture::new();
    f.device_capacity_bytes = u64::MAX;
    f.policy.memory_capacity_bytes = u64::MAX;
    let count = 32_769;
    for i in 0..count {
        f.node(&format!("node.{i}")).fixed_scratch(16).done();
    }
    let all: Vec<_> = (0..count)
        .map(|i| rid(&format!("resource/scratch/node.{i}")))
        .collect();
    let first = &mut f.nodes[0];
    first.resources.extend(all);
    first.resources.sort();
    first.resources.dedup();
    f
}

#[test]
fn too_many_invocation_liveness_references() {
    let message = rejects!(
        many_liveness_references(),
        MemoryError::TooManyLivenessReferences {
            count: 65_537,
            limit: 65_536
        }
    );
    assert!(message.contains("maximum_resource_rows"), "{message}");
}

#[test]
fn liveness_references_follow_a_raised_row_limit() {
    // The same plan under a request that may hold 100,000 resource rows: the liveness
    // bound rises with it (and never falls below 65,536 for a lower row limit).
    let mut f = many_liveness_references();
    f.policy.wire_limits = Some(jointplan::request::WireLimits {
        maximum_resource_rows: 100_000,
        ..jointplan::request::WireLimits::REFERENCE
    });
    let plan = f
        .derive()
        .expect("the raised row limit admits the references");
    let references: usize = plan
        .invocation_liveness
        .iter()
        .map(|row| row.resource_ids.len())
        .sum();
    assert_eq!(references, 65_537);
    let low = jointplan::request::WireLimits {
        maximum_resource_rows: 1_000,
        ..jointplan::request::WireLimits::REFERENCE
    };
    assert_eq!(jointplan::memory::liveness_reference_limit(low), 65_536);
}

#[test]
fn static_allocations_alone_exceed_usable_capacity() {
    let mut f = Fixture::new();
    f.weight("value.weight", 1 << 19);
    f.node("node.main")
        .reads_weight("value.weight", "resource/weight", 1 << 20)
        .done();
    let message = rejects!(
        f,
        MemoryError::StaticExceedsUsable {
            static_bytes: 1048576,
            usable: 1048448,
            ..
        }
    );
    assert!(message.contains("resource/weight"));
}
