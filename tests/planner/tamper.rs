//! Tampering with one field of a built plan, for every field class, makes `verify` fail
//! and name the field by its JSON path; re-hashed tampering (a consistent but false plan)
//! is caught by the typed internal checks of rules 6.

use crate::common;

use std::sync::OnceLock;

use crate::common::verify_tree as verify;
use jointplan::builder::internal::{validate_internal, InternalError};
use jointplan::builder::BuildOptions;
use jointplan::plan::hash::{plan_hash, plan_id};
use jointplan::plan::{ExecutionPlan, RejectionReason, SelectionReason};
use jointplan::request::{PlanRequest, ResourceId};
use jointplan::verify::{verify_text, VerifyError};
use serde_json::Value;

struct Built {
    request: PlanRequest,
    plan: ExecutionPlan,
    tree: Value,
}

fn decoder() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| {
        let request = common::models::decoder_2layer();
        let plan = ExecutionPlan::build(&request, &BuildOptions::default())
            .unwrap_or_else(|e| panic!("decoder-2layer must build: {e}"));
        let tree = plan.to_json_tree().unwrap();
        Built {
            request,
            plan,
            tree,
        }
    })
}

/// Applies `edit` to the value at the JSON pointer and verifies; returns the error.
fn tamper(pointer: &str, edit: impl FnOnce(&mut Value)) -> VerifyError {
    let built = decoder();
    let mut tree = built.tree.clone();
    let slot = tree
        .pointer_mut(pointer)
        .unwrap_or_else(|| panic!("no field at {pointer}"));
    edit(slot);
    match verify(&built.request, &tree, &BuildOptions::default()) {
        Ok(_) => panic!("tampering {pointer} was not detected"),
        Err(error) => error,
    }
}

fn assert_path(error: &VerifyError, expected_prefix: &str) {
    let path = error
        .json_path()
        .unwrap_or_else(|| panic!("error names no JSON path: {error}"));
    assert!(
        path.starts_with(expected_prefix),
        "expected a path under {expected_prefix}, got {path} ({error})"
    );
    assert!(
        error.to_string().contains(path),
        "message does not name the path: {error}"
    );
}

fn differs_with_internal(error: &VerifyError) {
    match error {
        VerifyError::Differs { internal, .. } => {
            assert!(
                internal.is_some(),
                "the stored plan should also fail internally: {error}"
            )
        }
        other => panic!("expected Differs, got {other}"),
    }
}

fn node_index(id: &str) -> usize {
    decoder()
        .plan
        .payload
        .nodes
        .iter()
        .position(|n| n.id.as_str() == id)
        .unwrap_or_else(|| panic!("no node {id}"))
}

#[test]
fn the_untampered_plan_verifies() {
    let built = decoder();
    let verified = verify(&built.request, &built.tree, &BuildOptions::default()).unwrap();
    assert_eq!(verified, built.plan);
}

/// The plan file form (what `plan -o` writes) of `plan`.
fn file_text(plan: &ExecutionPlan) -> String {
    String::from_utf8(plan.write_json(Vec::new()).unwrap()).unwrap()
}

#[test]
fn the_plan_file_and_every_other_layout_of_it_verify() {
    // The file form is accepted by holding it against the rebuilt plan's file form; any
    // other layout (compact, sorted keys, other indentation) by the hash of its payload.
    let built = decoder();
    let layouts = [
        file_text(&built.plan),
        built.tree.to_string(),
        serde_json::to_string_pretty(&built.tree).unwrap(),
        file_text(&built.plan).replace("\n  ", "\n    "),
    ];
    for (k, text) in layouts.iter().enumerate() {
        let verified = verify_text(&built.request, text, &BuildOptions::default())
            .unwrap_or_else(|e| panic!("layout {k}: {e}"));
        assert_eq!(verified, built.plan, "layout {k}");
    }
}

#[test]
fn a_changed_plan_file_is_caught_at_its_path() {
    let built = decoder();
    let i = node_index("node.layer.1.attention");
    let mut changed = built.plan.clone();
    changed.payload.nodes[i].selection.selected_provider = serde_json::from_value(Value::from(
        "provider.cuda.causal_paged_attention.f16.flash",
    ))
    .unwrap();
    let error = verify_text(
        &built.request,
        &file_text(&changed),
        &BuildOptions::default(),
    )
    .expect_err("a changed provider in a plan file must be caught");
    assert_path(
        &error,
        &format!("payload.nodes[{i}].selection.selected_provider"),
    );
    differs_with_internal(&error);
}

#[test]
fn a_provider() {
    let i = node_index("node.layer.1.attention");
    let pointer = format!("/payload/nodes/{i}/selection/selected_provider");
    let error = tamper(&pointer, |v| {
        *v = Value::from("provider.cuda.causal_paged_attention.f16.flash")
    });
    assert_path(
        &error,
        &format!("payload.nodes[{i}].selection.selected_provider"),
    );
    differs_with_internal(&error);
}

#[test]
fn a_profile() {
    let memory = &decoder().plan.payload.memory;
    let k = memory
        .dynamic_descriptors
        .iter()
        .position(|d| d.base_resource_id.as_str() == "resource/state/kv-cache")
        .expect("the KV cache is a dynamic resource");
    let pointer = format!("/payload/memory/dynamic_descriptors/{k}/storage/profile");
    let error = tamper(&pointer, |v| {
        *v = serde_json::to_value(jointplan::request::StorageProfile::STATIC_CONTIGUOUS).unwrap()
    });
    assert_path(
        &error,
        &format!("payload.memory.dynamic_descriptors[{k}].storage.profile"),
    );
    differs_with_internal(&error);
}

#[test]
fn a_byte_count() {
    let error = tamper("/payload/memory/static_bytes", |v| {
        *v = Value::from(v.as_u64().unwrap() + 1)
    });
    assert_path(&error, "payload.memory.static_bytes");
    differs_with_internal(&error);
}

#[test]
fn a_dependency() {
    let i = node_index("node.layer.0.residual");
    assert!(!decoder().plan.payload.nodes[i].dependencies.is_empty());
    let pointer = format!("/payload/nodes/{i}/dependencies");
    let error = tamper(&pointer, |v| {
        v.as_array_mut().unwrap().remove(0);
    });
    assert_path(&error, &format!("payload.nodes[{i}].dependencies["));
    differs_with_internal(&error);
}

#[test]
fn the_plan_hash() {
    let error = tamper("/plan_hash", |v| *v = Value::from("0".repeat(64)));
    assert_path(&error, "plan_hash");
    match &error {
        VerifyError::Differs { internal, .. } => assert!(matches!(
            internal.as_deref(),
            Some(InternalError::PlanHashMismatch { .. })
        )),
        other => panic!("expected Differs, got {other}"),
    }
}

#[test]
fn an_evidence_entry() {
    let i = node_index("node.layer.1.attention");
    let node = &decoder().plan.payload.nodes[i];
    assert_eq!(
        node.selection.selection_reason,
        SelectionReason::FallbackFromPreferred
    );
    let j = node
        .selection
        .rejected_providers
        .iter()
        .position(|r| matches!(r.reasons, RejectionReason::StorageIncompatible { .. }))
        .expect("typed storage evidence");
    let pointer = format!(
        "/payload/nodes/{i}/selection/rejected_providers/{j}/reasons/storage_incompatible/resource_ids/0"
    );
    let error = tamper(&pointer, |v| *v = Value::from("resource/state/other"));
    assert_path(
        &error,
        &format!("payload.nodes[{i}].selection.rejected_providers[{j}].reasons"),
    );
}

#[test]
fn a_pool_id() {
    let error = tamper("/payload/memory/dynamic_pools/0/pool_id", |v| {
        *v = Value::from(format!("dynamic-pool/sha256/{}", "f".repeat(64)))
    });
    assert_path(&error, "payload.memory.dynamic_pools[0].pool_id");
    differs_with_internal(&error);
}

#[test]
fn a_fingerprint() {
    let error = tamper("/payload/nodes/0/operation_fingerprint", |v| {
        let text = v.as_str().unwrap();
        let flipped = if text.starts_with('0') { "1" } else { "0" };
        *v = Value::from(format!("{flipped}{}", &text[1..]))
    });
    assert_path(&error, "payload.nodes[0].operation_fingerprint");
    differs_with_internal(&error);
}

#[test]
fn an_unknown_field_is_malformed_with_its_path() {
    let error = tamper("/payload/nodes/0", |v| {
        v.as_object_mut()
            .unwrap()
            .insert("extra".to_owned(), Value::from(1));
    });
    assert!(matches!(error, VerifyError::Malformed { .. }), "{error}");
    assert_path(&error, "payload.nodes[0]");
}

#[test]
fn a_missing_optional_field_is_not_canonical() {
    let error = tamper("/payload/nodes/0", |v| {
        v.as_object_mut().unwrap().remove("scratch_resource");
    });
    assert!(matches!(error, VerifyError::NonCanonical(_)), "{error}");
    assert_path(&error, "payload.nodes[0].scratch_resource");
}

#[test]
fn a_malformed_plan_is_reported_before_a_request_that_does_not_build() {
    // verify reads the stored plan whole only when it needs to (the rebuilt plan differs,
    // or the request does not build): the malformed plan is still what it reports first.
    let built = decoder();
    let mut request = built.request.clone();
    request.policy.memory_capacity_bytes = 1000;
    assert!(ExecutionPlan::build(&request, &BuildOptions::default()).is_err());
    let intact = verify(&request, &built.tree, &BuildOptions::default()).unwrap_err();
    assert!(matches!(intact, VerifyError::Rebuild(_)), "{intact}");
    let mut tree = built.tree.clone();
    tree["payload"]["nodes"][0]
        .as_object_mut()
        .unwrap()
        .insert("extra".to_owned(), Value::from(1));
    let malformed = verify(&request, &tree, &BuildOptions::default()).unwrap_err();
    assert!(
        matches!(malformed, VerifyError::Malformed { .. }),
        "{malformed}"
    );
    assert_path(&malformed, "payload.nodes[0]");
}

#[test]
fn malformed_recorded_settings_are_malformed_with_their_path() {
    // The settings are read before the rebuild, by a partial parse; its failure is named by
    // the whole parse's path.
    let error = tamper("/payload", |v| {
        v.as_object_mut().unwrap().insert(
            "selection_settings".to_owned(),
            serde_json::json!({"objective": 5}),
        );
    });
    assert!(matches!(error, VerifyError::Malformed { .. }), "{error}");
    assert_path(&error, "payload.selection_settings");
}

// Re-hashed tampering: the plan is self-consistent by hash, so only the typed internal
// checks can reject it.

fn rehashed(edit: impl FnOnce(&mut ExecutionPlan)) -> InternalError {
    let built = decoder();
    let mut plan = built.plan.clone();
    edit(&mut plan);
    plan.payload.plan_id = jointplan::plan::hash::UNSET_PLAN_ID.to_owned();
    plan.plan_hash = plan_hash(&plan.payload).unwrap();
    plan.payload.plan_id = plan_id(&plan.plan_hash);
    match validate_internal(&plan, &built.request) {
        Ok(()) => panic!("the internal checks accepted a false plan"),
        Err(error) => error,
    }
}

#[test]
fn internal_accepts_the_built_plan() {
    let built = decoder();
    validate_internal(&built.plan, &built.request).unwrap();
}

#[test]
fn internal_rejects_a_wrong_schema() {
    let error = rehashed(|p| p.payload.schema = jointplan::request::ContractVersion::new(9, 9));
    assert!(
        matches!(error, InternalError::UnsupportedPlanSchema { .. }),
        "{error}"
    );
}

#[test]
fn internal_rejects_a_wrong_plan_id() {
    let built = decoder();
    let mut plan = built.plan.clone();
    plan.payload.plan_id = format!("plan/sha256/{}", "0".repeat(64));
    let error = validate_internal(&plan, &built.request).unwrap_err();
    // The plan id is not hashed, so the hash still matches and the id check names it.
    assert!(
        matches!(error, InternalError::PlanIdMismatch { .. }),
        "{error}"
    );
}

#[test]
fn internal_rejects_a_selection_reason_that_does_not_follow() {
    let i = node_index("node.layer.1.attention");
    let error = rehashed(|p| {
        p.payload.nodes[i].selection.selection_reason = SelectionReason::PreferredCompatible
    });
    assert!(
        matches!(error, InternalError::SelectionReasonMismatch { ref node, .. } if node.as_str() == "node.layer.1.attention"),
        "{error}"
    );
}

#[test]
fn internal_rejects_a_fallback_without_evidence() {
    let i = node_index("node.layer.1.attention");
    let error = rehashed(|p| p.payload.nodes[i].selection.rejected_providers.clear());
    assert!(
        matches!(error, InternalError::FallbackWithoutEvidence { .. }),
        "{error}"
    );
}

#[test]
fn internal_rejects_unsorted_storage_evidence() {
    let i = node_index("node.layer.1.attention");
    let error = rehashed(|p| {
        for rejected in &mut p.payload.nodes[i].selection.rejected_providers {
            if let RejectionReason::StorageIncompatible { resource_ids } = &mut rejected.reasons {
                resource_ids.clear();
            }
        }
    });
    assert!(
        matches!(error, InternalError::SelectionEvidence { .. }),
        "{error}"
    );
}

#[test]
fn internal_rejects_a_later_dependency() {
    let last = decoder().plan.payload.nodes.len() - 1;
    let last_id = decoder().plan.payload.nodes[last].id.clone();
    let error = rehashed(|p| p.payload.nodes[1].dependencies.push(last_id));
    assert!(matches!(error, InternalError::Dependency { .. }), "{error}");
}

#[test]
fn internal_rejects_unsorted_resources() {
    let error = rehashed(|p| p.payload.nodes[0].resources.reverse());
    assert!(
        matches!(error, InternalError::ResourcesNotAscending { .. }),
        "{error}"
    );
}

#[test]
fn internal_rejects_a_resource_closure_mismatch() {
    let error = rehashed(|p| {
        let extra = ResourceId::new("resource/weight/embed_tokens").unwrap();
        let node = p
            .payload
            .nodes
            .iter_mut()
            .find(|n| n.id.as_str() == "node.final_norm")
            .unwrap();
        node.resources.push(extra);
        node.resources.sort();
    });
    assert!(
        matches!(error, InternalError::ResourcesMismatch { .. }),
        "{error}"
    );
}

#[test]
fn internal_rejects_an_unplanned_resource() {
    let error = rehashed(|p| {
        let id = ResourceId::new("resource/activation/hidden.embedding").unwrap();
        p.payload
            .memory
            .dynamic_descriptors
            .retain(|d| d.base_resource_id != id);
    });
    assert!(
        matches!(error, InternalError::ResourceNotPlanned { .. }),
        "{error}"
    );
}

#[test]
fn internal_rejects_a_wrong_estimate_fingerprint() {
    let error = rehashed(|p| {
        p.payload.nodes[0].provider_resources.value_alignment_bytes *= 2;
    });
    assert!(
        matches!(error, InternalError::InvalidProviderResources { .. }),
        "{error}"
    );
}

#[test]
fn internal_rejects_a_workspace_without_estimate() {
    let i = node_index("node.layer.0.feed_forward");
    let error = rehashed(|p| {
        let node = &mut p.payload.nodes[i];
        let id = node.scratch_resource.take().unwrap();
        node.resources.retain(|r| r != &id);
    });
    assert!(
        matches!(error, InternalError::WorkspacePresence { .. }),
        "{error}"
    );
}

#[test]
fn internal_rejects_a_wrong_workspace_id() {
    let i = node_index("node.layer.0.feed_forward");
    let error = rehashed(|p| {
        let node = &mut p.payload.nodes[i];
        let other = ResourceId::new("resource/activation/hidden.embedding").unwrap();
        let old = node.scratch_resource.replace(other.clone()).unwrap();
        node.resources.retain(|r| r != &old);
        node.resources.push(other);
        node.resources.sort();
    });
    assert!(
        matches!(error, InternalError::WorkspaceIdMismatch { .. }),
        "{error}"
    );
}

#[test]
fn internal_rejects_a_wrong_workspace_demand() {
    let i = node_index("node.layer.0.feed_forward");
    let error = rehashed(|p| {
        let id = p.payload.nodes[i].scratch_resource.clone().unwrap();
        let row = p
            .payload
            .memory
            .dynamic_descriptors
            .iter_mut()
            .find(|d| d.base_resource_id == id)
            .unwrap();
        row.alignment_bytes *= 2;
    });
    assert!(
        matches!(
            error,
            InternalError::WorkspaceMemory {
                field: "alignment_bytes",
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn internal_rejects_a_state_effect_with_the_wrong_access() {
    let i = node_index("node.layer.0.attention");
    let error = rehashed(|p| {
        p.payload.nodes[i].state_effects[0].access = jointplan::request::TensorAccess::Read
    });
    assert!(
        matches!(error, InternalError::StateEffect { .. }),
        "{error}"
    );
}

#[test]
fn internal_rejects_a_missing_state_effect() {
    let i = node_index("node.layer.0.attention");
    let error = rehashed(|p| p.payload.nodes[i].state_effects.clear());
    assert!(
        matches!(error, InternalError::StateEffectsMismatch { .. }),
        "{error}"
    );
}

#[test]
fn internal_rejects_a_work_contract_that_matches_no_binding() {
    let error = rehashed(|p| {
        if let jointplan::plan::NodeWorkContract::Tokens { projections, .. } =
            &mut p.payload.nodes[0].work
        {
            for projection in projections.iter_mut() {
                projection.canonical_extent += 1;
            }
        }
    });
    assert!(
        matches!(error, InternalError::WorkContract { .. }),
        "{error}"
    );
}

#[test]
fn internal_rejects_empty_terminal_outputs() {
    let error = rehashed(|p| p.payload.terminal_output_resources.clear());
    assert!(matches!(error, InternalError::NoTerminalOutputs), "{error}");
}

#[test]
fn internal_rejects_unsorted_terminal_outputs() {
    let error = rehashed(|p| {
        let first = p.payload.terminal_output_resources[0].clone();
        p.payload.terminal_output_resources.push(first);
    });
    assert!(
        matches!(error, InternalError::TerminalOutputsNotAscending { .. }),
        "{error}"
    );
}

#[test]
fn internal_rejects_a_zero_token_ceiling() {
    let error = rehashed(|p| p.payload.maximum_scheduled_tokens = 0);
    assert!(
        matches!(error, InternalError::ZeroMaximumScheduledTokens),
        "{error}"
    );
}

#[test]
fn internal_rejects_foreign_execution_weights() {
    let error = rehashed(|p| {
        p.payload.execution_weights.source_schema_fingerprint =
            jointplan::request::Sha256Hex::new("0".repeat(64)).unwrap()
    });
    assert!(
        matches!(
            error,
            InternalError::ExecutionWeightsMismatch {
                field: "source_schema_fingerprint"
            }
        ),
        "{error}"
    );
}

#[test]
fn internal_rejects_a_wrong_weight_format() {
    let error = rehashed(|p| {
        p.payload.weight_format =
            jointplan::request::WeightFormatId::new("weight-format.gguf.native-block").unwrap()
    });
    assert!(
        matches!(error, InternalError::WeightFormatMismatch { .. }),
        "{error}"
    );
}

#[test]
fn internal_rejects_an_inconsistent_value_binding() {
    let i = node_index("node.layer.0.post_attention_norm");
    let error =
        rehashed(|p| p.payload.nodes[i].values[0].storage.components[0].length_bytes += 256);
    assert!(matches!(error, InternalError::NodeRule(_)), "{error}");
}

#[test]
fn internal_rejects_a_duplicate_node() {
    let error = rehashed(|p| {
        let first = p.payload.nodes[0].clone();
        p.payload.nodes[1] = first;
    });
    assert!(
        matches!(error, InternalError::DuplicateNode { .. }),
        "{error}"
    );
}

#[test]
fn internal_rejects_a_reordered_plan() {
    let error = rehashed(|p| p.payload.nodes.swap(1, 2));
    assert!(
        matches!(
            error,
            InternalError::NodeOrderMismatch { .. } | InternalError::Dependency { .. }
        ),
        "{error}"
    );
}

#[test]
fn internal_rejects_retained_values_the_request_does_not_retain() {
    let error = rehashed(|p| {
        let node = &p.payload.nodes[0];
        let output = node
            .values
            .iter()
            .find(|b| b.role == jointplan::request::ValueRole::Output)
            .unwrap();
        p.payload
            .retained_completion_values
            .push(jointplan::plan::RetainedCompletionValue {
                value_id: output.value_id.clone(),
                producer_node_id: node.id.clone(),
                output_ordinal: 0,
                resource_id: output.storage.components[0].resource_id.clone(),
                logical_offset_bytes: 0,
                tensor: output.tensor.clone(),
            });
    });
    assert!(
        matches!(error, InternalError::RetainedValuesMismatch { .. }),
        "{error}"
    );
}

#[test]
fn internal_rejects_a_memory_aggregate_that_does_not_re_derive() {
    let error = rehashed(|p| p.payload.memory.static_bytes += 1);
    assert!(matches!(error, InternalError::Memory(_)), "{error}");
}
