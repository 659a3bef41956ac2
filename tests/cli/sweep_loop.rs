//! The research loop through the binary: progress lines on a standard error that is not a
//! terminal, and `plan --context --sequences --scheduled-tokens` replaying a sweep row's
//! plan without a preset file.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::process::{jointplan, ok, s, text};

fn models() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models")
}

fn sweep_dir(grid: Value) -> (tempfile::TempDir, std::process::Output) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("grid.json");
    std::fs::write(&file, grid.to_string()).unwrap();
    let out = dir.path().join("out");
    let result = jointplan(&["sweep", &s(&file), "-o", &s(&out), "--jobs", "1"]);
    (dir, result)
}

/// The rows of the sweep written to `dir/out`.
pub(crate) fn rows(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("out/results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Standard error is a pipe here: one line per finished point, numbered, with its knobs
/// and status. Before, nothing was printed until the end.
#[test]
fn sweep_prints_a_progress_line_per_point_when_not_on_a_terminal() {
    let (_dir, result) = sweep_dir(serde_json::json!({
        "model": [models().join("llama-3.2-1b")],
        "layers": [2, 99],
        "context": [1024, 2048],
    }));
    ok(&result);
    let err = text(&result.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("sweep: ")).collect();
    assert_eq!(lines.len(), 4, "{err}");
    // The last knob of the grid varies fastest; the knobs are named in column order.
    assert!(
        lines[0].starts_with("sweep: 1/4 (25%) context=1024 layers=2: fits, "),
        "{err}"
    );
    assert!(
        lines[1].starts_with("sweep: 2/4 (50%) context=1024 layers=99: error: "),
        "{err}"
    );
    assert!(
        lines[3].starts_with("sweep: 4/4 (100%) context=2048 layers=99: error: "),
        "{err}"
    );
    assert!(
        text(&result.stdout).contains("4 planned"),
        "{}",
        text(&result.stdout)
    );
}

/// `plan MODEL --context C --sequences N --scheduled-tokens T` builds the plan of the
/// sweep row at those values: the same plan id, no preset file.
#[test]
fn plan_with_policy_flags_replays_a_sweep_row() {
    let (dir, result) = sweep_dir(serde_json::json!({
        "model": [models().join("llama-3.2-1b")],
        "layers": [2],
        "context": [2048],
        "sequences": [8],
        "scheduled_tokens": [1024, 2048],
    }));
    ok(&result);
    let rows = rows(dir.path());
    assert_eq!(rows.len(), 2);
    assert_ne!(rows[0]["plan_id"], rows[1]["plan_id"]);
    for row in &rows {
        let tokens = row["point"]["scheduled_tokens"].to_string();
        let plan = jointplan(&[
            "plan",
            &s(&models().join("llama-3.2-1b")),
            "--layers",
            "2",
            "--context",
            "2048",
            "--sequences",
            "8",
            "--scheduled-tokens",
            &tokens,
            "--json",
        ]);
        ok(&plan);
        let summary: Value = serde_json::from_slice(&plan.stdout).unwrap();
        assert_eq!(
            summary["plan_id"], row["plan_id"],
            "scheduled tokens {tokens}"
        );
    }
    // Without the flags the folder's preset plans something else.
    let plain = jointplan(&[
        "plan",
        &s(&models().join("llama-3.2-1b")),
        "--layers",
        "2",
        "--json",
    ]);
    ok(&plain);
    let summary: Value = serde_json::from_slice(&plain.stdout).unwrap();
    assert_ne!(summary["plan_id"], rows[0]["plan_id"]);
}

/// The flags set a model folder's preset: a request file is planned as it is, and a zero
/// is refused by the parser.
#[test]
fn policy_flags_refuse_a_request_file_and_zero() {
    let dir = tempfile::tempdir().unwrap();
    let request = dir.path().join("request.json");
    let synth = jointplan(&[
        "synth",
        "--model",
        &s(&models().join("llama-3.2-1b")),
        "--layers",
        "2",
        "--context",
        "2048",
        "-o",
        &s(&request),
    ]);
    ok(&synth);
    let refused = jointplan(&["plan", &s(&request), "--context", "2048"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        text(&refused.stderr).contains("--context applies to a model folder"),
        "{}",
        text(&refused.stderr)
    );
    let zero = jointplan(&[
        "plan",
        &s(&models().join("llama-3.2-1b")),
        "--sequences",
        "0",
    ]);
    assert_eq!(zero.status.code(), Some(2), "{}", text(&zero.stderr));
}
