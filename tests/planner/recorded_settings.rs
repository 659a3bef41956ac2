//! Selection settings recorded in a plan (objective, weights, pins, forbids, uncertified
//! components): every objective's plan verifies, default plans carry no settings (and keep
//! their bytes), a tampered setting is rejected by `verify`, and the independent checker
//! holds a plan to its recorded pins and forbids.

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use crate::common::verify_tree as verify;
use jointplan::builder::BuildOptions;
use jointplan::check::check_plan;
use jointplan::plan::hash::{plan_hash, plan_id};
use jointplan::plan::{ExecutionPlan, RejectionReason, SettingRejection};
use jointplan::request::{NodeId, PlanRequest, ProviderId};
use jointplan::selection::{objective_by_name, Weights};
use jointplan::synth::ModelSource;
use jointplan::verify::{verify_text, VerifyError};
use serde_json::Value;

use crate::common;

/// decoder-2layer: the objectives choose differently there (seed-lex keeps a preference
/// that max-preferred and min-penalty trade away).
fn decoder() -> &'static PlanRequest {
    static REQUEST: OnceLock<PlanRequest> = OnceLock::new();
    REQUEST.get_or_init(common::models::decoder_2layer)
}

fn request() -> &'static PlanRequest {
    static REQUEST: OnceLock<PlanRequest> = OnceLock::new();
    REQUEST.get_or_init(|| {
        let mut source =
            ModelSource::folder(concat!(env!("CARGO_MANIFEST_DIR"), "/models/llama-3.2-1b"));
        source.layers = Some(2);
        source.synthesize().unwrap().request
    })
}

fn options(objective: &str, weights: Option<Weights>) -> BuildOptions {
    let mut options = BuildOptions {
        threads: std::num::NonZeroUsize::new(1),
        ..Default::default()
    };
    options.selection.objective = Arc::from(objective_by_name(objective, weights).unwrap());
    options
}

fn weights() -> Weights {
    Weights {
        preferred: 1,
        ranks: vec![0, 5],
        time: None,
    }
}

fn all_objectives() -> Vec<(&'static str, BuildOptions)> {
    vec![
        ("seed-lex", options("seed-lex", None)),
        ("max-preferred", options("max-preferred", None)),
        ("min-penalty", options("min-penalty", None)),
        ("weighted", options("weighted", Some(weights()))),
    ]
}

fn build(options: &BuildOptions) -> ExecutionPlan {
    build_for(request(), options)
}

fn build_for(request: &PlanRequest, options: &BuildOptions) -> ExecutionPlan {
    ExecutionPlan::build(request, options).unwrap_or_else(|e| panic!("{options:?}: {e}"))
}

fn tree(plan: &ExecutionPlan) -> Value {
    plan.to_json_tree().unwrap()
}

/// Verifies `plan` with the default verify options, as the plan file `plan -o` writes (held
/// against the rebuilt plan's file form) and as compact JSON with sorted keys (held to the
/// rebuilt plan's hash): the recorded settings must be read the same way from both.
fn verifies(request: &PlanRequest, plan: &ExecutionPlan, what: &str) {
    let file = String::from_utf8(plan.write_json(Vec::new()).unwrap()).unwrap();
    for (layout, text) in [("plan file", file), ("compact", tree(plan).to_string())] {
        let verified = verify_text(request, &text, &BuildOptions::default())
            .unwrap_or_else(|e| panic!("{what}, {layout}: {e}"));
        assert_eq!(&verified, plan, "{what}, {layout}");
    }
}

/// Re-hashes an edited plan tree, so that only the edited field is false.
fn rehash(tree: Value) -> Value {
    let mut plan = ExecutionPlan::from_json_tree(tree).unwrap();
    plan.plan_hash = plan_hash(&plan.payload).unwrap();
    plan.payload.plan_id = plan_id(&plan.plan_hash);
    plan.to_json_tree().unwrap()
}

#[test]
fn every_objectives_plan_verifies_with_default_verify_options() {
    let mut ids = BTreeSet::new();
    for (name, options) in all_objectives() {
        let plan = build(&options);
        let t = tree(&plan);
        let recorded = &t["payload"]["selection_settings"];
        if name == "seed-lex" {
            assert!(
                recorded.is_null(),
                "a default plan records no settings: {recorded}"
            );
        } else {
            assert_eq!(recorded["objective"], name);
        }
        // verify is given the defaults: it must rebuild with the recorded settings.
        verifies(request(), &plan, name);
        ids.insert(plan.payload.plan_id.clone());
    }
    assert_eq!(ids.len(), 4, "settings are part of the hash: {ids:?}");
}

#[test]
fn a_default_plan_has_no_settings_field() {
    let plan = build(&BuildOptions::default());
    let text = plan.to_json_text().unwrap();
    assert!(!text.contains("selection_settings"));
    assert!(plan.payload.selection_settings.is_default());
}

fn expect_rejected(t: &Value, what: &str) -> VerifyError {
    expect_rejected_for(request(), t, what)
}

fn expect_rejected_for(request: &PlanRequest, t: &Value, what: &str) -> VerifyError {
    match verify(request, t, &BuildOptions::default()) {
        Ok(_) => panic!("{what}: the tampered plan verified"),
        Err(e) => e,
    }
}

#[test]
fn a_tampered_recorded_setting_is_rejected() {
    let min_penalty = tree(&build_for(decoder(), &options("min-penalty", None)));
    let seed_lex = tree(&build(&options("seed-lex", None)));
    let decoder_seed_lex = tree(&build_for(decoder(), &options("seed-lex", None)));
    assert!(
        min_penalty["payload"]["memory"] != decoder_seed_lex["payload"]["memory"],
        "the objectives must choose different storage profiles on decoder-2layer"
    );
    let expect_rejected_decoder = |t: &Value, what: &str| expect_rejected_for(decoder(), t, what);

    // The objective swapped to the default (re-hashed, so only the setting is false).
    let mut t = min_penalty.clone();
    t["payload"]["selection_settings"]["objective"] = "seed-lex".into();
    let error = expect_rejected_decoder(&rehash(t), "objective swapped");
    assert!(matches!(error, VerifyError::Differs { .. }), "{error}");

    // The setting removed: the plan now claims the default objective.
    let mut t = min_penalty.clone();
    t["payload"]
        .as_object_mut()
        .unwrap()
        .remove("selection_settings");
    let error = expect_rejected_decoder(&rehash(t), "setting removed");
    assert!(matches!(error, VerifyError::Differs { .. }), "{error}");

    // Not re-hashed: the hash no longer matches either way.
    let mut t = min_penalty.clone();
    t["payload"]["selection_settings"]["objective"] = "max-preferred".into();
    expect_rejected_decoder(&t, "objective edited without re-hashing");

    // An unknown objective is named by its path.
    let mut t = min_penalty.clone();
    t["payload"]["selection_settings"]["objective"] = "fastest".into();
    let error = expect_rejected_decoder(&t, "unknown objective");
    assert!(
        error.to_string().contains("payload.selection_settings"),
        "{error}"
    );

    // Weights tampered: the weights of a plan that counts rank-1 resources recorded on the plan
    // of weights that count nothing (ties broken by seed-lex), which chooses differently here.
    let weighted = |preferred, ranks: Vec<u32>| {
        tree(&build_for(
            decoder(),
            &options(
                "weighted",
                Some(Weights {
                    preferred,
                    ranks,
                    time: None,
                }),
            ),
        ))
    };
    let counts_nothing = weighted(0, vec![0, 0]);
    let counts_penalty = weighted(0, vec![0, 1]);
    assert!(
        counts_nothing["payload"]["memory"] != counts_penalty["payload"]["memory"],
        "the two weightings must choose different storage profiles"
    );
    let mut t = counts_nothing.clone();
    t["payload"]["selection_settings"]["weights"] =
        counts_penalty["payload"]["selection_settings"]["weights"].clone();
    expect_rejected_decoder(&rehash(t), "weights changed");
    verify(decoder(), &counts_nothing, &BuildOptions::default()).unwrap();

    // A pin added to a default plan: the rebuild honours it, so the plan differs.
    let mut t = seed_lex.clone();
    t["payload"]["selection_settings"] = serde_json::json!({
        "pins": {"node.layer.0.attention": "provider.cuda.causal_paged_attention.paged"}
    });
    expect_rejected(&rehash(t), "pin added");
}

fn pinned_options() -> BuildOptions {
    let mut options = options("seed-lex", None);
    options.pins.insert(
        NodeId::new("node.layer.0.attention").unwrap(),
        ProviderId::new("provider.cuda.causal_paged_attention.paged").unwrap(),
    );
    options
        .forbids
        .entry(NodeId::new("node.embedding").unwrap())
        .or_default()
        .insert(ProviderId::new("provider.cuda.token_embedding.gather").unwrap());
    options
}

#[test]
fn pins_and_forbids_are_honoured_recorded_and_verified() {
    let plan = build(&pinned_options());
    let node = |id: &str| {
        plan.payload
            .nodes
            .iter()
            .find(|n| n.id.as_str() == id)
            .unwrap()
    };
    let attention = node("node.layer.0.attention");
    assert_eq!(
        attention.selection.selected_provider.as_str(),
        "provider.cuda.causal_paged_attention.paged"
    );
    let embedding = node("node.embedding");
    assert_ne!(
        embedding.selection.selected_provider.as_str(),
        "provider.cuda.token_embedding.gather"
    );
    let evidence: Vec<&RejectionReason> = embedding
        .selection
        .rejected_providers
        .iter()
        .filter(|r| r.provider_id.as_str() == "provider.cuda.token_embedding.gather")
        .map(|r| &r.reasons)
        .collect();
    assert_eq!(
        evidence,
        vec![&RejectionReason::Setting(SettingRejection::Forbidden)]
    );
    assert_eq!(plan.payload.selection_settings.pins.len(), 1);
    verifies(request(), &plan, "pins and forbids");
    assert!(check_plan(&plan).is_valid());

    // The checker holds the plan to its settings: a pin to the other provider, and a forbid
    // of the selected one, are violations of rule 5 naming the node's selected provider.
    let mut wrong = plan.clone();
    wrong.payload.selection_settings.pins.insert(
        attention.id.clone(),
        ProviderId::new("provider.cuda.causal_paged_attention.contiguous").unwrap(),
    );
    let report = check_plan(&wrong);
    assert!(
        report
            .violations
            .iter()
            .any(|v| v.rule == 5 && v.json_path.ends_with("selection.selected_provider")),
        "{:?}",
        report.violations
    );
    let mut wrong = plan.clone();
    wrong.payload.selection_settings.forbids.clear();
    let report = check_plan(&wrong);
    assert!(
        report
            .violations
            .iter()
            .any(|v| v.rule == 5 && v.message.contains("Forbidden")),
        "{:?}",
        report.violations
    );
}

#[test]
fn pins_and_forbids_naming_nothing_are_bad_input_and_a_forbidden_node_is_infeasible() {
    let mut bad = options("seed-lex", None);
    bad.pins.insert(
        NodeId::new("node.nowhere").unwrap(),
        ProviderId::new("provider.cuda.rms_norm.fused").unwrap(),
    );
    let error = ExecutionPlan::build(request(), &bad).unwrap_err();
    assert_eq!(error.kind(), jointplan::ErrorKind::BadInput);
    assert!(error.to_string().contains("node.nowhere"), "{error}");

    let mut empty = options("seed-lex", None);
    let embedding = NodeId::new("node.embedding").unwrap();
    for provider in [
        "provider.cuda.token_embedding.gather",
        "provider.cuda.token_embedding.gguf_gather",
    ] {
        empty
            .forbids
            .entry(embedding.clone())
            .or_default()
            .insert(ProviderId::new(provider).unwrap());
    }
    let error = ExecutionPlan::build(request(), &empty).unwrap_err();
    assert_eq!(error.kind(), jointplan::ErrorKind::Infeasible);
    assert!(error.to_string().contains("node.embedding"), "{error}");
}

#[test]
fn a_plan_recorded_as_uncertified_verifies_by_replaying_its_choices() {
    // No shipped request stops the integer program early, so an uncertified record is made
    // from a certified plan: the replay must re-derive it from its recorded choices.
    let plan = build(&options("seed-lex", None));
    let mut t = tree(&plan);
    t["payload"]["selection_settings"] =
        serde_json::json!({"uncertified_components": ["node.embedding"]});
    let t = rehash(t);
    verifies(
        request(),
        &serde_json::from_value(t.clone()).unwrap(),
        "uncertified",
    );
    // The same record on a plan that was certified is part of the hash: dropping it fails.
    let mut dropped = t.clone();
    dropped["payload"]
        .as_object_mut()
        .unwrap()
        .remove("selection_settings");
    expect_rejected(&dropped, "uncertified record dropped without re-hashing");
}
