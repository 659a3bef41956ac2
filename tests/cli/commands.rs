//! The `jointplan` binary end to end: plan prints the summary and writes the file, verify
//! accepts the plan and rejects a tampered one (exit 1, the field path named), bad input
//! exits 2 naming the file and JSON path, and a failed command leaves no output file.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn jointplan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_jointplan"))
        .args(args)
        .output()
        .expect("the jointplan binary runs")
}

fn model(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("models")
        .join(name)
        .join("request.json")
        .display()
        .to_string()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn temp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn path_str(p: &Path) -> String {
    p.display().to_string()
}

fn plan_to(dir: &Path, name: &str) -> PathBuf {
    let out = dir.join(format!("{name}.plan.json"));
    let result = jointplan(&["plan", &model(name), "-o", &path_str(&out)]);
    assert_eq!(result.status.code(), Some(0), "{}", text(&result.stderr));
    out
}

#[test]
fn plan_prints_the_summary_and_writes_the_plan() {
    let dir = temp();
    let out = dir.path().join("plan.json");
    let result = jointplan(&["plan", &model("decoder-2layer"), "-o", &path_str(&out)]);
    let stdout = text(&result.stdout);
    assert_eq!(result.status.code(), Some(0), "{}", text(&result.stderr));
    for expected in [
        "plan plan/sha256/",
        "node.layer.1.attention  provider.cuda.causal_paged_attention.f16  fallback_from_preferred",
        "rejected provider.cuda.causal_paged_attention.f16.flash (storage_incompatible)",
        "does not accept fixed_block(65536)+paged(65536) chosen for resource/state/kv-cache",
        "static bytes",
        "minimum runnable bytes",
        "usable capacity",
        "headroom",
        "pools (",
        "selection (1 component, grouped by method, check and status)",
        " GiB (",
    ] {
        assert!(
            stdout.contains(expected),
            "summary lacks {expected:?}:\n{stdout}"
        );
    }
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert!(plan["plan_hash"].is_string());
    // Only the plan: the temporary file was renamed over it.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn plan_json_summary_is_json() {
    let result = jointplan(&["plan", &model("tiny"), "--json"]);
    assert_eq!(result.status.code(), Some(0), "{}", text(&result.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&result.stdout).unwrap();
    assert_eq!(summary["nodes"].as_array().unwrap().len(), 3);
    assert!(summary["memory"]["usable_capacity_bytes"].is_u64());
}

#[test]
fn verify_accepts_its_plan_and_rejects_a_tampered_one() {
    let dir = temp();
    let out = plan_to(dir.path(), "tiny");
    let ok = jointplan(&["verify", &model("tiny"), &path_str(&out)]);
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok.stderr));
    assert!(text(&ok.stdout).contains("verified plan/sha256/"));

    let mut plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    plan["payload"]["memory"]["static_bytes"] = serde_json::Value::from(1u64);
    let tampered = dir.path().join("tampered.json");
    std::fs::write(&tampered, serde_json::to_string_pretty(&plan).unwrap()).unwrap();
    let bad = jointplan(&["verify", &model("tiny"), &path_str(&tampered)]);
    assert_eq!(bad.status.code(), Some(1));
    let stderr = text(&bad.stderr);
    assert!(
        stderr.contains("payload.memory.static_bytes: stored 1, rebuilt "),
        "{stderr}"
    );
    assert!(stderr.contains("tampered.json"), "{stderr}");
}

#[test]
fn bad_input_exits_2_naming_the_file_and_json_path_and_writes_nothing() {
    let dir = temp();
    let request = dir.path().join("bad.json");
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(model("tiny")).unwrap()).unwrap();
    value["node_resolutions"][1]["node_id"] = serde_json::Value::from("node with spaces");
    std::fs::write(&request, serde_json::to_string(&value).unwrap()).unwrap();
    let out = dir.path().join("plan.json");
    let result = jointplan(&["plan", &path_str(&request), "-o", &path_str(&out)]);
    assert_eq!(result.status.code(), Some(2));
    let stderr = text(&result.stderr);
    assert!(stderr.contains("bad.json"), "{stderr}");
    assert!(stderr.contains("node_resolutions[1].node_id"), "{stderr}");
    assert!(!out.exists(), "a failed plan left an output file");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn an_invalid_request_exits_2_and_leaves_no_partial_output() {
    let dir = temp();
    let request = dir.path().join("stale.json");
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(model("tiny")).unwrap()).unwrap();
    // A hand edit without sealing: the candidate's estimate fingerprint is now stale.
    value["node_resolutions"][0]["provider_resource_candidates"][0]["value_alignment_bytes"] =
        serde_json::Value::from(512u64);
    std::fs::write(&request, serde_json::to_string(&value).unwrap()).unwrap();
    let out = dir.path().join("plan.json");
    let result = jointplan(&["plan", &path_str(&request), "-o", &path_str(&out)]);
    assert_eq!(result.status.code(), Some(2), "{}", text(&result.stderr));
    assert!(
        text(&result.stderr).contains("stale.json"),
        "{}",
        text(&result.stderr)
    );
    assert!(!out.exists());

    // Sealing repairs it, and then it plans.
    let sealed = jointplan(&["seal", &path_str(&request)]);
    assert_eq!(sealed.status.code(), Some(0), "{}", text(&sealed.stderr));
    assert!(
        text(&sealed.stdout).contains("estimate_fingerprint"),
        "{}",
        text(&sealed.stdout)
    );
    let again = jointplan(&["plan", &path_str(&request), "-o", &path_str(&out)]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    assert!(out.exists());
}

#[test]
fn explain_of_one_node_prints_what_the_whole_plan_prints_for_it() {
    // `explain --node ID` alone reads only that node and the rows' profiles; its text must
    // be the node's section of `explain PLAN`, which reads the whole plan.
    let dir = temp();
    for name in ["decoder-2layer", "hybrid-block"] {
        let out = plan_to(dir.path(), name);
        let whole = jointplan(&["explain", &path_str(&out)]);
        assert_eq!(whole.status.code(), Some(0), "{}", text(&whole.stderr));
        let whole = text(&whole.stdout);
        let plan: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        let nodes = plan["payload"]["nodes"].as_array().unwrap();
        assert!(nodes.len() > 3);
        for node in nodes {
            let id = node["id"].as_str().unwrap();
            let one = jointplan(&["explain", &path_str(&out), "--node", id]);
            assert_eq!(one.status.code(), Some(0), "{}", text(&one.stderr));
            let one = text(&one.stdout);
            assert!(one.starts_with(&format!("node {id} ")), "{one}");
            assert!(
                whole.contains(&one),
                "{name} {id}: not a section of the whole:\n{one}"
            );
        }
    }
}

#[test]
fn explain_names_the_evidence_and_chosen_profiles() {
    let dir = temp();
    let out = plan_to(dir.path(), "decoder-2layer");
    let result = jointplan(&[
        "explain",
        &path_str(&out),
        "--node",
        "node.layer.1.attention",
        "--request",
        &model("decoder-2layer"),
    ]);
    assert_eq!(result.status.code(), Some(0), "{}", text(&result.stderr));
    let stdout = text(&result.stdout);
    for expected in [
        "node node.layer.1.attention (operation operation.causal_paged_attention 2.0)",
        "requested: provider.cuda.causal_paged_attention.f16.flash",
        "fallback_from_preferred",
        "storage_incompatible",
        "resource/state/kv-cache",
        "provider.cuda.causal_paged_attention.f16.flash accepts [linear+contiguous] for value.state.layer.1.kv (input 8 on resource/state/kv-cache)",
    ] {
        assert!(stdout.contains(expected), "explain lacks {expected:?}:\n{stdout}");
    }
    let unknown = jointplan(&["explain", &path_str(&out), "--node", "node.nope"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(text(&unknown.stderr).contains("node.nope"));
    // A mistyped id is answered with the closest ids, not the whole node list.
    let typo = jointplan(&[
        "explain",
        &path_str(&out),
        "--node",
        "node.layer.1.atention",
    ]);
    assert_eq!(typo.status.code(), Some(2));
    let stderr = text(&typo.stderr);
    assert!(
        stderr.contains("11 nodes; closest: node.layer.1.attention"),
        "{stderr}"
    );
    assert!(!stderr.contains("node.embedding"), "{stderr}");
}

#[test]
fn a_missing_file_exits_2_naming_it() {
    let result = jointplan(&["plan", "/nonexistent/request.json"]);
    assert_eq!(result.status.code(), Some(2));
    assert!(text(&result.stderr).contains("/nonexistent/request.json"));
}

#[test]
fn check_reports_every_violation_with_its_rule_and_path() {
    let dir = temp();
    let plan = plan_to(dir.path(), "decoder-2layer");
    let valid = jointplan(&["check", &path_str(&plan)]);
    assert_eq!(valid.status.code(), Some(0), "{}", text(&valid.stderr));
    assert!(text(&valid.stdout).contains("valid"));

    // Two faults a builder could make: a static total off by one and a dropped dependency.
    let mut tampered: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    let memory = &mut tampered["payload"]["memory"];
    memory["static_bytes"] = (memory["static_bytes"].as_u64().unwrap() + 1).into();
    let node = tampered["payload"]["nodes"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|n| !n["dependencies"].as_array().unwrap().is_empty())
        .unwrap();
    node["dependencies"].as_array_mut().unwrap().pop();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, serde_json::to_string(&tampered).unwrap()).unwrap();
    let out = jointplan(&["check", &path_str(&bad), "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rules: Vec<u64> = report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["rule"].as_u64().unwrap())
        .collect();
    for rule in [2, 10, 17] {
        assert!(rules.contains(&rule), "rule {rule} missing from {rules:?}");
    }
    assert_eq!(report["valid"], false);

    let missing = jointplan(&["check", &path_str(&dir.path().join("none.json"))]);
    assert_eq!(missing.status.code(), Some(2));
}

#[test]
fn check_text_lists_the_first_violations_of_each_rule_by_path() {
    let dir = temp();
    let plan = dir.path().join("llama.plan.json");
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/llama-3.2-1b");
    let planned = jointplan(&[
        "plan",
        &path_str(&folder),
        "--layers",
        "2",
        "-o",
        &path_str(&plan),
    ]);
    assert_eq!(planned.status.code(), Some(0), "{}", text(&planned.stderr));
    // Every node's selection reason changed: one rule-5 violation per node.
    let stored = std::fs::read_to_string(&plan).unwrap();
    let nodes = stored.matches("\"preferred_compatible\"").count();
    assert!(nodes > 12, "{nodes} preferred nodes");
    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        stored.replace("\"preferred_compatible\"", "\"fallback_from_preferred\""),
    )
    .unwrap();
    let short = jointplan(&["check", &path_str(&bad)]);
    assert_eq!(short.status.code(), Some(1));
    let short = text(&short.stdout);
    let rule_5: Vec<&str> = short
        .lines()
        .filter(|l| l.starts_with("  rule 5 at"))
        .collect();
    assert_eq!(rule_5.len(), 10, "{short}");
    assert!(
        short.contains(&format!(
            "... and {} more violations of rule 5 (--full or --json lists every one)",
            nodes - 10
        )),
        "{short}"
    );
    // Indices as numbers: nodes[0] to nodes[9], not nodes[0], nodes[10], nodes[11], ...
    for (index, line) in rule_5.iter().enumerate() {
        assert!(
            line.contains(&format!("payload.nodes[{index}].selection")),
            "{line}"
        );
    }
    let full = jointplan(&["check", &path_str(&bad), "--full"]);
    let full = text(&full.stdout);
    let listed = full
        .lines()
        .filter(|l| l.starts_with("  rule 5 at"))
        .count();
    assert_eq!(listed, nodes, "{full}");
    assert!(!full.contains("more violations"), "{full}");
}
