//! One test per rule of rules 2.2 (semantic bindings, estimate verification), 2.7
//! (provider selection evidence), 3.1 (candidates) and 3.5 (storage rejection evidence),
//! the worked selection examples and the whole pipeline: each mutates the valid fixture in
//! one place and asserts the exact `PlanError` variant.

#![allow(clippy::result_large_err)]

use crate::common::build_fixture;
use jointplan::candidates::CandidateError;
use jointplan::node::NodeError;

use build_fixture::*;
use jointplan::builder::error::PlanError;
use jointplan::builder::BuildOptions;
use jointplan::plan::{ExecutionPlan, RejectionReason, SelectionReason};
use jointplan::request::validate::RequestError;
use jointplan::request::*;

// ---- 1.4 / 2.7 compatibility and evidence ------------------------------------

#[test]
fn unsupported_operation_when_nothing_is_compatible() {
    let err = fails(|r| {
        resolution_mut(r, "node/a")
            .required_capabilities
            .insert(id("capability.extra"));
    });
    let err = assert_node_error!(err, NodeError::UnsupportedOperation { .. });
    assert_eq!(err.kind(), jointplan::ErrorKind::Infeasible);
    assert!(err.to_string().contains("capability.extra"), "{err}");
}

#[test]
fn incompatible_provider_evidence() {
    let core = build(&sealed(request(), |r| {
        r.policy.execution_determinism = DeterminismRequirement::BitwiseSameRuntimeWithReplay;
        provider_mut(r, "operation.main", "provider/fallback").execution_semantics =
            ExecutionSemantics::new(ReplayEquivalence::Ineligible);
    }))
    .unwrap();
    let selection = &core.nodes[0].selection;
    assert_eq!(
        selection.selection_reason,
        SelectionReason::PreferredCompatible
    );
    assert_eq!(selection.rejected_providers.len(), 1);
    assert!(matches!(
        selection.rejected_providers[0].reasons,
        RejectionReason::Incompatible(_)
    ));
}

#[test]
fn selected_incompatible_provider() {
    let err = fails(|r| {
        r.policy.execution_determinism = DeterminismRequirement::BitwiseSameRuntimeWithReplay;
        provider_mut(r, "operation.main", "provider/fallback").execution_semantics =
            ExecutionSemantics::new(ReplayEquivalence::Ineligible);
        let res = resolution_mut(r, "node/a");
        res.provider_resource_candidates
            .retain(|c| c.provider_id.as_str() == "provider/fallback");
        res.preferred_provider = None;
    });
    assert_node_error!(err, NodeError::SelectedIncompatibleProvider { .. });
}

#[test]
fn not_registered_evidence() {
    let core = build(&sealed(request(), |r| {
        resolution_mut(r, "node/a").preferred_provider = Some(id("provider/ghost"));
    }))
    .unwrap();
    let selection = &core.nodes[0].selection;
    assert_eq!(
        selection.selection_reason,
        SelectionReason::FallbackFromPreferred
    );
    assert_eq!(
        selection.rejected_providers[0].provider_id.as_str(),
        "provider/ghost"
    );
    assert_eq!(
        selection.rejected_providers[0].reasons,
        RejectionReason::NotRegistered
    );
}

#[test]
fn fallback_lacks_evidence() {
    let err = fails(|r| {
        resolution_mut(r, "node/a")
            .provider_resource_candidates
            .retain(|c| c.provider_id.as_str() == "provider/fallback");
    });
    assert_node_error!(err, NodeError::FallbackLacksEvidence { .. });
}

#[test]
fn resolution_rejection_is_evidence() {
    let core = build(&sealed(request(), |r| {
        let res = resolution_mut(r, "node/a");
        res.provider_resource_candidates
            .retain(|c| c.provider_id.as_str() == "provider/fallback");
        res.provider_resolution_rejections.insert(
            id("provider/preferred"),
            ResolutionRejection::StorageIncompatible {
                resource_ids: vec![id("resource/activation-a")],
            },
        );
    }))
    .unwrap();
    let selection = &core.nodes[0].selection;
    assert_eq!(
        selection.selection_reason,
        SelectionReason::FallbackFromPreferred
    );
    assert!(matches!(
        selection.rejected_providers[0].reasons,
        RejectionReason::StorageIncompatible { .. }
    ));
}

#[test]
fn duplicate_rejection_evidence() {
    let err = fails(|r| {
        let res = resolution_mut(r, "node/a");
        res.provider_resource_candidates
            .retain(|c| c.provider_id.as_str() == "provider/fallback");
        res.provider_resolution_rejections.insert(
            id("provider/preferred"),
            ResolutionRejection::StorageIncompatible {
                resource_ids: vec![id("resource/activation-a")],
            },
        );
        r.policy.execution_determinism = DeterminismRequirement::BitwiseSameRuntimeWithReplay;
        provider_mut(r, "operation.main", "provider/preferred").execution_semantics =
            ExecutionSemantics::new(ReplayEquivalence::Ineligible);
    });
    assert_node_error!(err, NodeError::DuplicateRejectionEvidence { .. });
}

// ---- 2.2 estimate verification -----------------------------------------------

fn candidate_mut<'a>(
    r: &'a mut PlanRequest,
    node: &str,
    provider: &str,
) -> &'a mut ProviderResourcePlan {
    resolution_mut(r, node)
        .provider_resource_candidates
        .iter_mut()
        .find(|c| c.provider_id.as_str() == provider)
        .unwrap()
}

#[test]
fn estimator_identity() {
    let err = fails(|r| {
        candidate_mut(r, "node/a", "provider/preferred").estimator_version =
            ContractVersion::new(1, 1)
    });
    assert_node_error!(err, NodeError::EstimatorIdentityMismatch { .. });
}

#[test]
fn value_alignment() {
    let err = fails(|r| candidate_mut(r, "node/a", "provider/preferred").value_alignment_bytes = 8);
    assert_node_error!(
        err,
        NodeError::ValueAlignment {
            alignment: 8,
            minimum: 16,
            ..
        }
    );
}

fn workspace() -> WorkspaceRequirement {
    WorkspaceRequirement {
        size_formula: WorkspaceSizeFormula::Fixed { bytes: 64 },
        alignment_bytes: 16,
        scope: WorkspaceScope::Invocation,
        storage: StorageRequirement {
            accepted_profiles: vec![LINEAR],
        },
    }
}

#[test]
fn workspace_presence() {
    let err =
        fails(|r| candidate_mut(r, "node/a", "provider/preferred").binding = Some(workspace()));
    assert_node_error!(
        err,
        NodeError::WorkspacePresence {
            kind: "binding",
            present: true,
            ..
        }
    );
}

#[test]
fn workspace_ids_and_resources() {
    let core = build(&sealed(request(), |r| {
        candidate_mut(r, "node/a", "provider/preferred").scratch = Some(workspace());
    }))
    .unwrap();
    let a = &core.nodes[0];
    let scratch = a.scratch_resource.as_ref().expect("scratch workspace");
    assert!(scratch.as_str().starts_with("resource/scratch/sha256/"));
    assert!(a.resources.contains(scratch));
    let mut sorted = a.resources.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted, a.resources);
    assert!(core.profiles.contains_key(scratch));
}

#[test]
fn estimator_input_fingerprint() {
    let mut r = request();
    let c = candidate_mut(&mut r, "node/a", "provider/preferred");
    c.estimator_input_fingerprint = Sha256Hex::new("5".repeat(64)).unwrap();
    c.estimate_fingerprint = jointplan::request::fingerprints::estimate_fingerprint(c).unwrap();
    let err = build(&r).unwrap_err();
    assert_node_error!(err, NodeError::EstimatorInputMismatch { .. });
}

// ---- 3.1 candidates ---------------------------------------------------------

#[test]
fn candidate_provider_not_in_catalog() {
    let err = fails(|r| {
        let mut ghost = candidate_mut(r, "node/a", "provider/preferred").clone();
        ghost.provider_id = id("provider/zz-ghost");
        resolution_mut(r, "node/a")
            .provider_resource_candidates
            .push(ghost);
    });
    assert_variant!(
        err,
        PlanError::Candidates(CandidateError::CandidateProviderNotInCatalog { .. })
    );
}

#[test]
fn no_storage_candidate_explains_each_provider() {
    let err = fails(|r| {
        for p in ["provider/fallback", "provider/preferred"] {
            set_slot_storage(
                r,
                "operation.state_update",
                p,
                ValueRole::Input,
                1,
                &[paged()],
            );
        }
    });
    let err = assert_variant!(err, PlanError::Candidates(CandidateError::NoStorageCandidate { ref explanations, .. }) if explanations.len() == 2);
    let text = err.to_string();
    assert!(
        text.contains("input 1 (value value.state)")
            && text.contains("fixed_block(4096)+paged(4096)")
            && text.contains("linear+contiguous"),
        "{text}"
    );
    assert_eq!(err.kind(), jointplan::ErrorKind::Infeasible);
}

// ---- 3.5 worked examples ---------------------------------------------------

#[test]
fn example_a_shared_resource_falls_back_to_paged() {
    let core = build(&sealed(request(), |r| {
        order(r, &[LINEAR, paged()]);
        set_slot_storage(
            r,
            "operation.state_update",
            "provider/preferred",
            ValueRole::Input,
            1,
            &[LINEAR],
        );
        set_slot_storage(
            r,
            "operation.state_update",
            "provider/fallback",
            ValueRole::Input,
            1,
            &[paged()],
        );
        for p in ["provider/fallback", "provider/preferred"] {
            set_slot_storage(
                r,
                "operation.state_read",
                p,
                ValueRole::Input,
                1,
                &[paged()],
            );
        }
    }))
    .unwrap();
    let state: ResourceId = id("resource/shared-state");
    assert_eq!(core.profiles[&state], paged());
    let b = &core.nodes[1].selection;
    assert_eq!(b.selected_provider.as_str(), "provider/fallback");
    assert_eq!(b.selection_reason, SelectionReason::FallbackFromPreferred);
    assert_eq!(
        b.rejected_providers[0].reasons,
        RejectionReason::StorageIncompatible {
            resource_ids: vec![state]
        }
    );
}

#[test]
fn example_b_profile_penalty_precedes_provider_id() {
    let core = build(&sealed(request(), |r| {
        order(r, &[LINEAR, paged()]);
        resolution_mut(r, "node/a").preferred_provider = None;
        set_slot_storage(
            r,
            "operation.main",
            "provider/fallback",
            ValueRole::Input,
            0,
            &[paged()],
        );
        set_slot_storage(
            r,
            "operation.main",
            "provider/preferred",
            ValueRole::Input,
            0,
            &[LINEAR],
        );
    }))
    .unwrap();
    let a = &core.nodes[0].selection;
    assert_eq!(a.selected_provider.as_str(), "provider/preferred");
    assert_eq!(a.selection_reason, SelectionReason::CanonicalCompatible);
}

#[test]
fn example_c_conflicting_shared_resource_is_infeasible() {
    let err = fails(|r| {
        order(r, &[LINEAR, paged()]);
        for p in ["provider/fallback", "provider/preferred"] {
            set_slot_storage(
                r,
                "operation.state_update",
                p,
                ValueRole::Input,
                1,
                &[LINEAR],
            );
            set_slot_storage(
                r,
                "operation.state_read",
                p,
                ValueRole::Input,
                1,
                &[paged()],
            );
        }
    });
    let err = assert_variant!(
        err,
        PlanError::Candidates(CandidateError::Selection {
            infeasible: true,
            ..
        })
    );
    assert_eq!(err.kind(), jointplan::ErrorKind::Infeasible);
}

#[test]
fn example_d_disjoint_resources_are_separate_components() {
    use jointplan::candidates::{derive_node_candidates, selection_problem};
    let r = request();
    let nodes: Vec<&ProgramNode> = r.family.program.nodes().collect();
    let derived: Vec<_> = [0usize, 3]
        .iter()
        .map(|&i| {
            derive_node_candidates(&r.catalog, &r.policy, nodes[i], &r.node_resolutions[i]).unwrap()
        })
        .collect();
    let problem = selection_problem(&r.policy, &derived);
    let solution = jointplan::selection::solve(&problem, &Default::default()).unwrap();
    assert_eq!(solution.components.len(), 2);
    assert_eq!(solution.choices["node/a"], "provider/preferred");
}

// ---- the whole pipeline -------------------------------------------------------

#[test]
fn full_plan_is_hashed_and_deterministic() {
    let r = request();
    let first =
        ExecutionPlan::build(&r, &BuildOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let second = ExecutionPlan::build(&r, &BuildOptions::default()).unwrap();
    assert_eq!(first, second);
    assert_eq!(
        first.payload.plan_id,
        format!("plan/sha256/{}", first.plan_hash)
    );
    assert_eq!(first.payload.terminal_output_resources.len(), 1);
}

#[test]
fn retained_value_overwritten_in_place() {
    // node/b overwrites value.hidden in place, so it cannot be retained.
    let err = fails(|r| {
        r.completion_retention
            .values
            .insert(value_id("value.hidden"));
    });
    assert_variant!(err, PlanError::RetainedOverwritten { ref writer, .. } if writer.as_str() == "node/b");
}

#[test]
fn retained_value_resolved() {
    let core = build(&sealed(request(), |r| {
        r.completion_retention.values.insert(value_id("value.out"));
    }))
    .unwrap();
    assert_eq!(core.retained_completion_values.len(), 1);
    let v = &core.retained_completion_values[0];
    assert_eq!(v.producer_node_id.as_str(), "node/c");
    assert!(core.retained_resources.contains(&v.resource_id));
}

#[test]
fn request_errors_are_bad_input() {
    let err = fails(|r| r.policy.maximum_active_sequences = 0);
    assert_eq!(err.kind(), jointplan::ErrorKind::BadInput);
    let _: &RequestError = match &err {
        PlanError::Request(inner) => inner,
        other => panic!("{other:?}"),
    };
}

// ---- rules without a test before the issue 2 audit ---------------------------------------

#[test]
fn state_binding_tensor_equals_the_program_state() {
    // The state's program tensor becomes f32; node/b still binds it as f16 [2, 8].
    let err = fails(|r| r.family.program.states[0].tensor.element_type = ElementType::F32);
    assert_node_error!(
        err,
        NodeError::SemanticTensor { ref node, ref value, .. }
            if node.as_str() == "node/b" && value.as_str() == "value.state"
    );
}

#[test]
fn weights_are_bound_read_only() {
    // The operation lets its second input be read_write, and node/a binds the weight so.
    let err = fails(|r| {
        r.catalog
            .operations
            .get_mut("operation.main")
            .unwrap()
            .inputs[1]
            .access = TensorAccess::ReadWrite;
        resolution_mut(r, "node/a").values[1].access = TensorAccess::ReadWrite;
    });
    assert_node_error!(
        err,
        NodeError::WeightAccess { ref node, ref value, found: TensorAccess::ReadWrite }
            if node.as_str() == "node/a" && value.as_str() == "value.weight"
    );
}

#[test]
fn an_exact_alias_overwrites_only_activations() {
    // node/b writes value.mid in place of value.hidden, which it now binds as persistent
    // memory (with fixed work, so that the work contract does not reject it first).
    let err = fails(|r| {
        node_mut(r, "node/b").work = WorkSpec::Fixed;
        resolution_mut(r, "node/b").values[0].usage = BufferUsage::Persistent;
    });
    assert_node_error!(
        err,
        NodeError::AliasInputNotActivations { ref node, ref input, usage: BufferUsage::Persistent, .. }
            if node.as_str() == "node/b" && input.as_str() == "value.hidden"
    );
}

#[test]
fn program_node_signature_equals_the_operation() {
    // node/c reads a third value; its operation (and its bindings) have two inputs.
    let err = fails(|r| node_mut(r, "node/c").inputs.push(value_id("value.input")));
    assert_node_error!(
        err,
        NodeError::SignatureMismatch { ref node, program_inputs: 3, operation_inputs: 2, .. }
            if node.as_str() == "node/c"
    );
}

fn does_not_fit(capacity: u64) -> PlanError {
    let request = sealed(request(), |r| {
        r.policy.memory_capacity_bytes = capacity;
        r.policy.memory_reserve_bytes = 128;
    });
    match ExecutionPlan::build(&request, &BuildOptions::default()) {
        Ok(plan) => panic!(
            "{} usable bytes hold the fixture: {:?}",
            capacity - 128,
            plan.payload.memory.minimum_runnable_request_bytes
        ),
        Err(err) => err,
    }
}

#[test]
fn a_plan_that_does_not_fit_is_infeasible_not_bad_input() {
    use jointplan::memory::MemoryError;
    // 64 usable bytes do not hold the 128-byte weight.
    let err = assert_variant!(
        does_not_fit(192),
        PlanError::Memory(MemoryError::StaticExceedsUsable {
            static_bytes: 128,
            usable: 64,
            ..
        })
    );
    assert_eq!(err.kind(), jointplan::ErrorKind::Infeasible);
    assert!(err.to_string().contains("resource/weights"), "{err}");
    // 129 usable bytes hold the weight, not the minimum runnable activations and state.
    let err = assert_variant!(
        does_not_fit(257),
        PlanError::Memory(MemoryError::CapacityExceeded { usable: 129, .. })
    );
    assert_eq!(err.kind(), jointplan::ErrorKind::Infeasible);
    assert!(err.to_string().contains("resource/"), "{err}");
}
