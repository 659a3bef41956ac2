//! `plan`'s serving report and refusal, `fit --json`, and `sweep --resume` through the
//! binary.

use std::path::{Path, PathBuf};

use crate::process::{jointplan, ok, ok_json, s, text};

fn models() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models")
}

#[test]
fn plan_refuses_a_device_that_holds_no_sequence_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.json");
    let result = jointplan(&[
        "plan",
        &s(&models().join("llama-3.1-8b")),
        "--device",
        &s(&models().join("devices/rtx-4090-24gb.json")),
        "--policy",
        "server",
        "-o",
        &s(&out),
    ]);
    let stderr = text(&result.stderr);
    assert_eq!(result.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("not even one sequence fits"), "{stderr}");
    assert!(stderr.contains("weights 16060522496"), "{stderr}");
    assert!(!out.exists(), "a refused plan is not written");
}

#[test]
fn plan_json_has_the_report_and_labelled_pools() {
    let summary = ok_json(&[
        "plan",
        &s(&models().join("llama-3.2-1b")),
        "--layers",
        "2",
        "--json",
    ]);
    let report = &summary["memory"]["report"];
    for key in [
        "weights_bytes",
        "kv_bytes_per_token",
        "kv_bytes_per_sequence",
        "activation_bytes",
        "workspace_bytes",
        "reserve_bytes",
        "headroom_bytes",
        "tokens_that_fit",
        "sequences_that_fit",
        "worst_case_fits",
    ] {
        assert!(!report[key].is_null(), "{key} in {report}");
    }
    // The ceilings the text prints beside the report are in the JSON too: `--json` is
    // the complete summary.
    let ceilings = &summary["memory"]["serving_ceilings"];
    assert!(
        ceilings["maximum_active_sequences"].as_u64().unwrap() > 0,
        "{ceilings}"
    );
    assert!(
        ceilings["context_tokens"].as_u64().unwrap() > 0,
        "{ceilings}"
    );
    assert_eq!(
        ceilings["usable_capacity_bytes"],
        summary["memory"]["usable_capacity_bytes"]
    );
    let holds: Vec<&str> = summary["memory"]["pools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["holds"].as_str().unwrap())
        .collect();
    assert!(holds.contains(&"KV cache and sequence state"), "{holds:?}");
}

#[test]
fn fit_json_names_the_answer_and_the_next_value() {
    let answer = ok_json(&[
        "fit",
        &s(&models().join("llama-3.2-1b")),
        "--device",
        &s(&models().join("devices/rtx-4090-24gb.json")),
        "--policy",
        "server",
        "--maximize",
        "sequences",
        "--json",
        "--threads",
        "1",
    ]);
    assert_eq!(answer["knob"], "sequences");
    let largest = answer["largest"].as_u64().unwrap();
    assert_eq!(answer["next"]["value"].as_u64(), Some(largest + 1));
    assert!(answer["next"]["bytes_short"].as_u64().unwrap() > 0);
    assert!(answer["plan_id"]
        .as_str()
        .unwrap()
        .starts_with("plan/sha256/"));
}

#[test]
fn sweep_resume_plans_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let grid = dir.path().join("grid.json");
    std::fs::write(
        &grid,
        serde_json::json!({
            "model": [models().join("llama-3.2-1b")],
            "layers": [2],
            "context": [1024, 2048],
        })
        .to_string(),
    )
    .unwrap();
    let out = dir.path().join("out");
    let first = jointplan(&["sweep", &s(&grid), "-o", &s(&out), "--jobs", "1"]);
    ok(&first);
    assert!(
        text(&first.stdout).contains("2 planned"),
        "{}",
        text(&first.stdout)
    );
    let again = jointplan(&["sweep", &s(&grid), "-o", &s(&out)]);
    assert_eq!(
        again.status.code(),
        Some(2),
        "a directory with results needs --resume"
    );
    let resumed = jointplan(&["sweep", &s(&grid), "-o", &s(&out), "--resume"]);
    ok(&resumed);
    assert!(
        text(&resumed.stdout).contains("0 planned"),
        "{}",
        text(&resumed.stdout)
    );
    let lines = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 2);
    assert!(out.join("regions.svg").exists());
    assert!(out.join("tokens-vs-context.svg").exists());
}
