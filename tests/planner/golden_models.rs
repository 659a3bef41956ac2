//! Golden plans for every request in `models/`, and determinism: each model built twice and
//! under 1 and 2 rayon threads gives byte-identical plans.
//!
//! `tests/golden/plan-hashes.json` holds each plan's hash and `tests/golden/plans/NAME.json`
//! the canonical plan itself, so that a change lists the JSON paths that differ instead of
//! only saying that a hash moved.
//!
//! Bless after an intended change: `JOINTPLAN_BLESS=1 cargo test --test planner golden_models`.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use jointplan::builder::BuildOptions;
use jointplan::canonical::canonical_json;
use jointplan::plan::ExecutionPlan;
use jointplan::request::PlanRequest;
use jointplan::verify::verify_text;
use serde_json::Value;

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

/// Every JSON path at which `a` and `b` differ (objects by key, arrays by index), at most
/// `limit` of them, in document order.
fn differing_paths(a: &Value, b: &Value, path: &mut String, limit: usize, out: &mut Vec<String>) {
    if out.len() >= limit {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let mark = path.len();
                path.push('.');
                path.push_str(key);
                match (x.get(key), y.get(key)) {
                    (Some(u), Some(v)) => differing_paths(u, v, path, limit, out),
                    (u, _) => out.push(format!(
                        "{path}: {}",
                        if u.is_some() {
                            "only in the golden plan"
                        } else {
                            "only in the new plan"
                        }
                    )),
                }
                path.truncate(mark);
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for index in 0..x.len().max(y.len()) {
                let mark = path.len();
                path.push_str(&format!("[{index}]"));
                match (x.get(index), y.get(index)) {
                    (Some(u), Some(v)) => differing_paths(u, v, path, limit, out),
                    (u, _) => out.push(format!(
                        "{path}: {}",
                        if u.is_some() {
                            "only in the golden plan"
                        } else {
                            "only in the new plan"
                        }
                    )),
                }
                path.truncate(mark);
            }
        }
        _ if a != b => out.push(format!("{path}: golden {a}, new {b}")),
        _ => {}
    }
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
    let plans_dir = root().join("tests/golden/plans");
    let bless = common::golden::blessing();
    let mut hashes = BTreeMap::new();
    let mut changed = Vec::new();
    for (name, file) in model_requests() {
        let request = PlanRequest::read(&file).unwrap_or_else(|e| panic!("{e}"));
        let one = build_in(1, &request);
        let again = build_in(1, &request);
        let two = build_in(2, &request);
        assert_eq!(one, again, "{name}: two builds differ");
        assert_eq!(one, two, "{name}: 1 and 2 threads differ");
        let plan = ExecutionPlan::from_json_tree(serde_json::from_str(&one).unwrap()).unwrap();
        let stored = plan.to_json_tree().unwrap();
        verify_text(&request, &stored.to_string(), &BuildOptions::default())
            .unwrap_or_else(|e| panic!("{name}: its own plan does not verify: {e}"));
        let golden_plan = plans_dir.join(format!("{name}.json"));
        if bless {
            std::fs::create_dir_all(&plans_dir).unwrap();
            std::fs::write(&golden_plan, format!("{one}\n")).unwrap();
        } else {
            let text = std::fs::read_to_string(&golden_plan).unwrap_or_else(|e| {
                panic!(
                    "{}: {e} (bless with JOINTPLAN_BLESS=1)",
                    golden_plan.display()
                )
            });
            let golden: Value = serde_json::from_str(&text).unwrap();
            let mut paths = Vec::new();
            differing_paths(&golden, &stored, &mut String::new(), 40, &mut paths);
            if !paths.is_empty() {
                changed.push(format!("{name}:\n  {}", paths.join("\n  ")));
            }
        }
        hashes.insert(name, plan.plan_hash.to_string());
    }
    let Some(golden) = common::golden::bless_or_read(&golden_file, &hashes) else {
        return;
    };
    assert!(
        changed.is_empty(),
        "plans changed (first 40 differing JSON paths per model); if intended, bless with \
         JOINTPLAN_BLESS=1 in a commit that says why:\n{}",
        changed.join("\n")
    );
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
