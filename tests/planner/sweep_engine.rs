//! The `engine` knob of a sweep, in the library: a grid without it keeps the keys its
//! points had before the knob existed (existing results directories resume and merge as
//! they did), and a bad engine value is refused before any point is planned, naming the
//! grid key and the value.

use std::path::PathBuf;

use jointplan::study::sweep::{prepare_point_in, Grid};
use jointplan::BuildOptions;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The keys of these points, computed by the code before the `engine` knob was added
/// (relative paths, read from the repository root): a plain point, a serving point, a
/// device-set point and an error row.
#[test]
fn a_grid_without_engine_keeps_its_point_keys() {
    let grids = [
        (
            serde_json::json!({"model": ["models/llama-3.2-1b"], "layers": [2]}),
            "3c7d70e8a40b4699ca47308c88336dd8f9e9e93b344c62668b8704fb2216f824",
        ),
        (
            serde_json::json!({
                "model": ["models/llama-3.2-1b"],
                "device": ["models/devices/h100-sxm-80gb.json"],
                "layers": [2],
                "concurrency": [2],
                "input_tokens": [64],
                "output_tokens": [8],
            }),
            "1e46c881a75bec4d3f6c745dcb24b3318b558354dad4e8b0a96a1e81e8e55e47",
        ),
        (
            serde_json::json!({
                "model": ["models/llama-3.1-8b"],
                "devices": ["models/devices/sets/a100-80gb-x2.json"],
                "layers": [2],
                "tensor_parallel": [2],
            }),
            "f0f1bf8802ff320d6fcf5468ff7bab4774bbcf303d25e245cfc0bcbfafefc381",
        ),
    ];
    let options = BuildOptions::default();
    let mut keys = Vec::new();
    let mut wanted = Vec::new();
    for (grid, expected) in grids {
        let grid: Grid = serde_json::from_value(grid).unwrap();
        let points = grid.points().unwrap();
        assert_eq!(points.len(), 1);
        let prepared = prepare_point_in(&points[0], Some(&root()), &options).unwrap();
        keys.push(prepared.key().to_owned());
        wanted.push(expected);
    }
    assert_eq!(keys, wanted);
}

/// A bad engine value is refused by the grid itself (before any point is synthesized),
/// naming `grid.engine[i]`, the value and every accepted spelling.
#[test]
fn a_bad_engine_value_names_the_grid_key_and_what_is_accepted() {
    for (engines, key, value) in [
        (vec!["sglang", "tgi"], "grid.engine[1]", "\"tgi\""),
        (vec!["llama.cpp@1"], "grid.engine[0]", "\"llama.cpp@1\""),
        (vec![""], "grid.engine[0]", "\"\""),
    ] {
        let grid: Grid = serde_json::from_value(serde_json::json!({
            "model": ["models/llama-3.2-1b"],
            "engine": engines,
        }))
        .unwrap();
        let err = grid.points().unwrap_err().to_string();
        for needle in [key, value, "vllm@0.6", "sglang", "trtllm", "llama.cpp"] {
            assert!(err.contains(needle), "{needle} missing in {err}");
        }
    }
    let grid: Grid = serde_json::from_value(serde_json::json!({
        "model": ["models/llama-3.2-1b"],
        "engine": ["vllm", "vllm@0.10", "trtllm"],
        "layers": [1, 2],
    }))
    .unwrap();
    let points = grid.points().unwrap();
    // The engine is the last knob: it varies fastest.
    let engines: Vec<Option<&str>> = points.iter().map(|p| p.engine.as_deref()).collect();
    assert_eq!(
        engines,
        [Some("vllm"), Some("vllm@0.10"), Some("trtllm")].repeat(2)
    );
    assert_eq!(grid.varying(), ["layers", "engine"]);
}

/// A results directory written before a column existed keeps its CSV header on resume:
/// the appended lines follow that header's columns (the JSON lines keep every figure).
#[test]
fn appending_to_an_older_csv_keeps_its_columns() {
    use jointplan::study::results::{append_rows, csv_header, CSV};
    use jointplan::study::sweep::{SweepPoint, SweepRow};
    let row = SweepRow {
        point: SweepPoint {
            model: "m".into(),
            engine: Some("sglang".into()),
            ..SweepPoint::default()
        },
        key: "k1".into(),
        request_hash: "sha256:r".into(),
        context_used: Some(4096),
        status: "fits".into(),
        plan_id: Some("plan/x".into()),
        choice_id: None,
        providers: vec!["p".into()],
        reason: None,
        certified: Some(true),
        report: None,
        engine_budget: None,
        plan_seconds: 0.5,
        placement: None,
        time: None,
        time_error: None,
    };
    // A fresh directory gets today's header.
    let fresh = tempfile::tempdir().unwrap();
    append_rows(fresh.path(), std::slice::from_ref(&row)).unwrap();
    let text = std::fs::read_to_string(fresh.path().join(CSV)).unwrap();
    assert_eq!(text.lines().next().unwrap(), csv_header().trim_end());
    // An older header without `engine` and `time_engine`.
    let old = tempfile::tempdir().unwrap();
    let header = "model,key,status,context_used,plan_id,plan_seconds,providers\n";
    std::fs::write(old.path().join(CSV), header).unwrap();
    append_rows(old.path(), &[row]).unwrap();
    let text = std::fs::read_to_string(old.path().join(CSV)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], header.trim_end());
    assert_eq!(lines[1], "m,k1,fits,4096,plan/x,0.500,p");
}

/// A point whose model the engine's accounting does not model (a hybrid model with
/// recurrent layers under vLLM) is an error row naming the engine and what is not
/// modelled, as `plan --engine` refuses it; the sweep goes on with the next point.
#[test]
fn a_model_the_engine_does_not_model_is_an_error_row_and_the_sweep_goes_on() {
    let grid: Grid = serde_json::from_value(serde_json::json!({
        "model": ["models/qwen3-next-80b-a3b", "models/llama-3.2-1b"],
        "layers": [4],
        "engine": ["vllm"],
    }))
    .unwrap();
    let options = BuildOptions {
        threads: std::num::NonZeroUsize::new(1),
        ..BuildOptions::default()
    };
    let rows = jointplan::study::sweep::plan_batch(
        &grid.points().unwrap(),
        Some(&root()),
        &std::collections::BTreeSet::new(),
        &options,
        &jointplan::placement::sweep::SweepPlacer,
    )
    .unwrap();
    let status: Vec<&str> = rows.iter().map(|r| r.status.as_str()).collect();
    assert_eq!(status, ["error", "fits"]);
    let reason = rows[0].reason.as_deref().unwrap();
    assert!(
        reason.starts_with("vllm: ") && reason.contains("not modelled"),
        "{reason}"
    );
    assert!(rows[1]
        .engine_budget
        .as_ref()
        .is_some_and(|b| b.rule.contains("vLLM")));
}

/// `vllm` and `vllm@0.19` (its default version) give equal requests: planned once, each
/// point keeps its row with the engine as given and the budget its engine's rule set;
/// `vllm@0.10` reserves more and plans on its own.
#[test]
fn equal_engine_requests_are_planned_once_and_keep_their_rows() {
    let grid: Grid = serde_json::from_value(serde_json::json!({
        "model": ["models/llama-3.2-1b"],
        "device": ["models/devices/h100-sxm-80gb.json"],
        "layers": [2],
        "context": [4096],
        "engine": ["vllm", "vllm@0.19", "vllm@0.10"],
    }))
    .unwrap();
    let options = BuildOptions {
        threads: std::num::NonZeroUsize::new(1),
        ..BuildOptions::default()
    };
    let rows = jointplan::study::sweep::plan_batch(
        &grid.points().unwrap(),
        Some(&root()),
        &std::collections::BTreeSet::new(),
        &options,
        &jointplan::placement::sweep::SweepPlacer,
    )
    .unwrap();
    let engines: Vec<Option<&str>> = rows.iter().map(|r| r.point.engine.as_deref()).collect();
    assert_eq!(
        engines,
        [Some("vllm"), Some("vllm@0.19"), Some("vllm@0.10")]
    );
    assert_eq!(rows[0].plan_id, rows[1].plan_id);
    assert_ne!(rows[0].plan_id, rows[2].plan_id);
    assert_ne!(rows[0].key, rows[1].key);
    let rules: Vec<&str> = rows
        .iter()
        .map(|r| r.engine_budget.as_ref().unwrap().rule.as_str())
        .collect();
    assert!(rules[0].starts_with("vLLM 0.19") && rules[1].starts_with("vLLM 0.19"));
    assert!(rules[2].starts_with("vLLM 0.10"), "{rules:?}");
    let reserve = |i: usize| rows[i].engine_budget.as_ref().unwrap().reserve_bytes;
    assert!(reserve(2) > reserve(0));
}
