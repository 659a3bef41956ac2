//! Golden plan hashes for every request in `models/`, and determinism: each model built
//! twice and under 1 and 2 rayon threads gives byte-identical plans.
//!
//! Bless after an intended change: `JOINTPLAN_BLESS=1 cargo test --test planner golden_models`.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use jointplan::builder::BuildOptions;
use jointplan::canonical::canonical_json;
use jointplan::plan::ExecutionPlan;
use jointplan::request::PlanRequest;
use jointplan::verify::verify;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn model_requests() -> Vec<(String, PathBuf)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(root().join("models")).unwrap() {
        let folder = entry.unwrap().path();
        let request = folder.join("request.json");
        if request.is_file() {
            let name = folder.file_name().unwrap().to_string_lossy().into_owned();
            found.push((name, request));
        }
    }
    found.sort();
    assert!(
        found.len() >= 3,
        "models/ should hold at least three requests"
    );
    found
}

fn build_in(threads: usize, request: &PlanRequest) -> String {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let plan = pool
        .install(|| ExecutionPlan::build(request, &BuildOptions::default()))
        .unwrap_or_else(|e| panic!("build failed: {e}"));
    canonical_json("plan", &plan).unwrap()
}

#[test]
fn every_model_has_its_golden_hash_and_builds_deterministically() {
    let golden_file = root().join("tests/golden/plan-hashes.json");
    let mut hashes = BTreeMap::new();
    for (name, file) in model_requests() {
        let request = PlanRequest::read(&file).unwrap_or_else(|e| panic!("{e}"));
        let one = build_in(1, &request);
        let again = build_in(1, &request);
        let two = build_in(2, &request);
        assert_eq!(one, again, "{name}: two builds differ");
        assert_eq!(one, two, "{name}: 1 and 2 threads differ");
        let plan: ExecutionPlan = serde_json::from_str(&one).unwrap();
        let stored = serde_json::to_value(&plan).unwrap();
        verify(&request, &stored, &BuildOptions::default())
            .unwrap_or_else(|e| panic!("{name}: its own plan does not verify: {e}"));
        hashes.insert(name, plan.plan_hash.to_string());
    }
    if std::env::var_os("JOINTPLAN_BLESS").is_some() {
        let mut text = serde_json::to_string_pretty(&hashes).unwrap();
        text.push('\n');
        std::fs::write(&golden_file, text).unwrap();
        return;
    }
    let golden: BTreeMap<String, String> =
        serde_json::from_str(&std::fs::read_to_string(&golden_file).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (bless with JOINTPLAN_BLESS=1)",
                golden_file.display()
            )
        }))
        .unwrap();
    assert_eq!(
        hashes, golden,
        "plan hashes changed; if intended, bless with JOINTPLAN_BLESS=1"
    );
}

#[test]
fn shipped_models_match_their_generator() {
    // `cargo run --example write_models` writes exactly these files.
    for (name, request) in common::models::shipped_models() {
        let file = root().join("models").join(name).join("request.json");
        let stored = PlanRequest::read(&file).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            stored == request,
            "{}: out of date; run `cargo run --example write_models`",
            file.display()
        );
    }
}

#[test]
fn the_decoder_falls_back_on_the_paged_kv_conflict() {
    use jointplan::plan::{RejectionReason, SelectionReason};
    let request = common::models::decoder_2layer();
    let plan = ExecutionPlan::build(&request, &BuildOptions::default()).unwrap();
    let node = plan
        .payload
        .nodes
        .iter()
        .find(|n| n.id.as_str() == "node.layer.1.attention")
        .unwrap();
    assert_eq!(
        node.selection.selection_reason,
        SelectionReason::FallbackFromPreferred
    );
    assert_eq!(
        node.selection.selected_provider.as_str(),
        "provider.cuda.causal_paged_attention.f16"
    );
    let evidence: Vec<_> = node
        .selection
        .rejected_providers
        .iter()
        .filter_map(|r| match &r.reasons {
            RejectionReason::StorageIncompatible { resource_ids } => {
                Some((r.provider_id.as_str(), resource_ids.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(evidence.len(), 1);
    assert_eq!(
        evidence[0].0,
        "provider.cuda.causal_paged_attention.f16.flash"
    );
    assert_eq!(
        evidence[0].1.iter().map(|r| r.as_str()).collect::<Vec<_>>(),
        ["resource/state/kv-cache"]
    );
    let kv = plan
        .payload
        .memory
        .dynamic_descriptors
        .iter()
        .find(|d| d.base_resource_id.as_str() == "resource/state/kv-cache")
        .unwrap();
    assert_eq!(
        kv.storage.profile.to_string(),
        "fixed_block(65536)+paged(65536)"
    );
}

#[test]
fn the_hybrid_block_zeroes_its_recurrent_state_and_adds_the_residual_in_place() {
    use jointplan::plan::ResourceInitialization;
    let request = common::models::hybrid_block();
    let plan = ExecutionPlan::build(&request, &BuildOptions::default()).unwrap();
    let residual = plan
        .payload
        .nodes
        .iter()
        .find(|n| n.id.as_str() == "node.layer.0.residual")
        .unwrap();
    assert_eq!(residual.exact_aliases.len(), 1);
    assert_eq!(
        residual.exact_aliases[0].input_value_id.as_str(),
        "value.layer.0.attention"
    );
    for state in [
        "resource/state/layer.0.conv",
        "resource/state/layer.0.delta",
    ] {
        let row = plan
            .payload
            .memory
            .dynamic_descriptors
            .iter()
            .find(|d| d.base_resource_id.as_str() == state)
            .unwrap();
        assert_eq!(row.initialization, ResourceInitialization::Zero, "{state}");
    }
}
