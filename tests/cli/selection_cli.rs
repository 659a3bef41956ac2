//! `jointplan solve` end to end: the spec example, bad input (exit 2),
//! infeasibility (exit 1), determinism and flags.

use std::io::Write;
use std::process::{Command, Output};

fn jointplan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_jointplan"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(text.as_bytes()).unwrap();
    path.to_string_lossy().into_owned()
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON object")
}

const SPEC: &str = include_str!("../data/spec-example.json");

#[test]
fn spec_example_solves_to_the_seed_lex_optimum() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(&dir, "p.json", SPEC);
    let out = jointplan(&["solve", &p, "--no-timings"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    assert_eq!(v["status"], "optimal");
    assert_eq!(v["objective"], "seed-lex");
    // Key 1: the preferred provider `flash` is feasible, so it wins.
    assert_eq!(v["choices"]["layer0.attention"], "flash");
    assert_eq!(v["profiles"]["kv.0"], "contiguous");
    assert_eq!(v["profiles"]["act.0"], "contiguous");
    assert_eq!(v["summary"]["nodes"], 1);
    assert_eq!(v["summary"]["components"], 1);
    assert_eq!(v["summary"]["preferred_met"], 1);
    assert_eq!(
        v["summary"]["penalty_by_rank"],
        serde_json::json!([2, 0, 0])
    );
    let c = &v["components"][0];
    assert_eq!(c["nodes"], 1);
    assert_eq!(c["resources"], 2);
    // The preference is met by a witness and the re-split leaves nothing
    // for the integer program: the method says so.
    assert_eq!(c["method"], "presolve");
    assert!(
        c["certificate"]
            .as_str()
            .is_some_and(|s| s.contains("preferred level decided exactly (1 met")),
        "{c}"
    );
    assert_eq!(c["check"], "dp-agrees");
    assert_eq!(c["seconds"], 0.0);
}

#[test]
fn output_is_byte_identical_across_thread_counts() {
    let dir = tempfile::tempdir().unwrap();
    let p = jointplan::selection::instances::long_range(
        40,
        0.4,
        &jointplan::selection::instances::Params::default(),
        7,
    );
    let path = write(&dir, "p.json", &serde_json::to_string(&p).unwrap());
    let one = jointplan(&["solve", &path, "--no-timings", "--threads", "1"]);
    let two = jointplan(&["solve", &path, "--no-timings", "--threads", "2"]);
    assert_eq!(one.status.code(), Some(0));
    assert_eq!(one.stdout, two.stdout);
}

#[test]
fn preference_conflict_and_profile_penalty() {
    // rules 3.5 (a): the preferred candidate accepts only linear, the
    // fallback and the consumer only paged: fallback + paged.
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        &dir,
        "p.json",
        r#"{"profiles": ["linear", "paged"], "nodes": [
          {"id": "a", "preferred": "pref", "candidates": [
            {"provider": "pref", "accepts": {"r": ["linear"]}},
            {"provider": "fallback", "accepts": {"r": ["paged"]}}]},
          {"id": "b", "candidates": [{"provider": "consumer", "accepts": {"r": ["paged"]}}]}]}"#,
    );
    let out = jointplan(&["solve", &p]);
    assert_eq!(out.status.code(), Some(0));
    let v = json(&out);
    assert_eq!(v["choices"]["a"], "fallback");
    assert_eq!(v["profiles"]["r"], "paged");
    // (b): a single node, provider/a paged vs provider/z linear: z, because
    // the profile penalty precedes provider-id order.
    let p = write(
        &dir,
        "q.json",
        r#"{"profiles": ["linear", "paged"], "nodes": [
          {"id": "n", "candidates": [
            {"provider": "provider/a", "accepts": {"r": ["paged"]}},
            {"provider": "provider/z", "accepts": {"r": ["linear"]}}]}]}"#,
    );
    let v = json(&jointplan(&["solve", &p]));
    assert_eq!(v["choices"]["n"], "provider/z");
}

#[test]
fn infeasible_exits_1_and_names_the_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        &dir,
        "p.json",
        r#"{"profiles": ["linear", "paged"], "nodes": [
          {"id": "free", "candidates": [{"provider": "x", "accepts": {"other": ["linear"]}}]},
          {"id": "A", "candidates": [{"provider": "p", "accepts": {"r": ["linear"]}}]},
          {"id": "B", "candidates": [{"provider": "q", "accepts": {"r": ["paged"]}}]}]}"#,
    );
    let out = jointplan(&["solve", &p]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("component 1"), "{err}");
    assert!(
        err.contains("`A`") && err.contains("`B`") && err.contains("`r`"),
        "{err}"
    );
}

#[test]
fn infeasible_without_forced_nodes_gives_a_small_conflict_set() {
    let dir = tempfile::tempdir().unwrap();
    // Three nodes pairwise incompatible through two resources; a fourth
    // node is irrelevant and must not be in the conflict set.
    let p = write(
        &dir,
        "p.json",
        r#"{"profiles": ["l", "p"], "nodes": [
          {"id": "A", "candidates": [
            {"provider": "a1", "accepts": {"r": ["l"], "s": ["l"]}},
            {"provider": "a2", "accepts": {"r": ["p"], "s": ["p"]}}]},
          {"id": "B", "candidates": [
            {"provider": "b1", "accepts": {"r": ["l"], "s": ["p"]}},
            {"provider": "b2", "accepts": {"r": ["p"], "s": ["l"]}}]},
          {"id": "C", "candidates": [
            {"provider": "c1", "accepts": {"s": ["l", "p"], "t": ["l"]}}]}]}"#,
    );
    let out = jointplan(&["solve", &p]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`A`") && err.contains("`B`"), "{err}");
    assert!(!err.contains("node `C`"), "{err}");
}

#[test]
fn bad_input_exits_2_with_one_message_naming_the_culprit() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("{", "invalid problem JSON"),
        (
            r#"{"profiles": ["a"], "nodes": [{"id": 3, "candidates": []}]}"#,
            "nodes[0].id",
        ),
        (
            r#"{"profiles": ["a"], "nodes": [{"id": "x", "candidates": [{"provider": "p", "accepts": {}}]},
               {"id": "x", "candidates": [{"provider": "p", "accepts": {}}]}]}"#,
            "node id `x`",
        ),
        (
            r#"{"profiles": ["a"], "nodes": [{"id": "x", "candidates": [{"provider": "p", "accepts": {"r": ["zz"]}}]}]}"#,
            "unknown profile `zz`",
        ),
        (
            r#"{"profiles": ["a", "a"], "nodes": []}"#,
            "profile `a` is listed twice",
        ),
        (
            r#"{"profiles": ["a"], "nodes": [{"id": "x", "candidates": [{"provider": "p", "accepts": {"r": []}}]}]}"#,
            "node `x` is left with no usable candidate",
        ),
        (
            r#"{"profiles": ["a"], "nodes": [{"id": "x", "candidates": [
               {"provider": "p", "accepts": {}}, {"provider": "p", "accepts": {}}]}]}"#,
            "provider `p`",
        ),
    ];
    for (text, needle) in cases {
        let p = write(&dir, "bad.json", text);
        let out = jointplan(&["solve", &p]);
        assert_eq!(out.status.code(), Some(2), "{text}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{text}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "one message: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let out = jointplan(&["solve", "/nonexistent/problem.json"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn unusable_candidates_are_dropped_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        &dir,
        "p.json",
        r#"{"profiles": ["a", "b"], "nodes": [{"id": "x", "preferred": "p", "candidates": [
            {"provider": "p", "accepts": {"r": [], "s": ["a"]}},
            {"provider": "q", "accepts": {"s": ["b"]}}]}]}"#,
    );
    let out = jointplan(&["solve", &p]);
    assert_eq!(out.status.code(), Some(0));
    let v = json(&out);
    assert_eq!(v["choices"]["x"], "q");
    assert_eq!(
        v["summary"]["unusable_candidates"],
        serde_json::json!([{"node": "x", "provider": "p", "resource": "r"}])
    );
    assert!(v["profiles"].get("r").is_none());
}

#[test]
fn objectives_and_solvers_are_selectable() {
    let dir = tempfile::tempdir().unwrap();
    // Meeting the preference costs a rank-1 profile.
    let p = write(
        &dir,
        "p.json",
        r#"{"profiles": ["a", "b"], "nodes": [{"id": "x", "preferred": "p", "candidates": [
            {"provider": "p", "accepts": {"r": ["b"]}},
            {"provider": "q", "accepts": {"r": ["a"]}}]}]}"#,
    );
    let w = write(&dir, "w.json", r#"{"preferred": 1, "ranks": [0, 5]}"#);
    for (args, expect) in [
        (vec!["--objective", "seed-lex"], "p"),
        (vec!["--objective", "max-preferred"], "p"),
        (vec!["--objective", "min-penalty"], "q"),
        (vec!["--objective", "weighted", "--weights", &w], "q"),
        (vec!["--solver", "dp"], "p"),
        (vec!["--solver", "auto"], "p"),
        (vec!["--time-limit", "10", "--node-limit", "1000"], "p"),
    ] {
        let mut all = vec!["solve", &p];
        all.extend(args.iter().copied());
        let out = jointplan(&all);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(json(&out)["choices"]["x"], expect, "{args:?}");
    }
    let out = jointplan(&["solve", &p, "--objective", "weighted"]);
    assert_eq!(out.status.code(), Some(2));
    let out = jointplan(&["solve", &p, "--objective", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    let bad_w = write(&dir, "bw.json", r#"{"preferred": 1, "ranks": [3, 1]}"#);
    let out = jointplan(&["solve", &p, "--objective", "weighted", "--weights", &bad_w]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn dp_skipped_is_reported_with_the_ilp_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(&dir, "p.json", SPEC);
    let out = jointplan(&["solve", &p, "--dp-state-budget", "0"]);
    assert_eq!(out.status.code(), Some(0));
    let v = json(&out);
    let check = v["components"][0]["check"].as_str().unwrap();
    assert!(check.starts_with("dp-skipped: "), "{check}");
    assert!(check.contains("certificate: "), "{check}");
    assert_eq!(v["status"], "optimal");
}

/// `--generate` writes a benchmark instance with the asked profile count
/// (which then solves), and refuses a profile count outside 1..=64.
#[test]
fn generate_writes_an_instance_with_the_asked_profiles() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lr.json");
    let file = file.to_str().unwrap();
    let out = jointplan(&["solve", "--generate", "long-range:40:3:4", file]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let problem: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    assert_eq!(problem["profiles"].as_array().unwrap().len(), 4);
    assert_eq!(problem["nodes"].as_array().unwrap().len(), 40);
    let solved = jointplan(&["solve", file]);
    assert!(solved.status.success());
    assert_eq!(
        json(&solved)["summary"]["penalty_by_rank"]
            .as_array()
            .unwrap()
            .len(),
        4
    );

    let bad = jointplan(&["solve", "--generate", "long-range:40:3:65", file]);
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("PROFILES in 1..=64"), "{err}");
}

#[test]
fn a_closed_stdout_pipe_ends_the_solve_output_without_a_panic() {
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let p = write(&dir, "p.json", SPEC);
    let mut child = Command::new(env!("CARGO_BIN_EXE_jointplan"))
        .args(["solve", &p])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close the reading end at once, as `| head -1` does after its line.
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(output.status.code(), Some(0), "{stderr}");
}

/// `--without STEP` switches a solver step off: every answer (choices and profiles) is the
/// default one, only the certificate changes; the step named is absent from it.
#[test]
fn without_a_step_the_answer_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p.json").to_string_lossy().into_owned();
    let out = jointplan(&["solve", "--generate", "long-range:200:2:4:100", &p]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let w = write(&dir, "w.json", r#"{"preferred": 5, "ranks": [0, 1, 3, 9]}"#);
    for objective in ["seed-lex", "max-preferred", "min-penalty", "weighted"] {
        let mut args = vec!["solve", &p, "--no-timings", "--objective", objective];
        if objective == "weighted" {
            args.extend(["--weights", &w]);
        }
        let base = json(&jointplan(&args));
        assert_eq!(base["status"], "optimal", "{objective}");
        for step in [
            "settled-counts",
            "prefix-dominance",
            "elimination",
            "optimal-supports",
            "reduced-costs",
        ] {
            let mut with = args.clone();
            with.extend(["--without", step]);
            let v = json(&jointplan(&with));
            assert_eq!(v["status"], "optimal", "{objective} without {step}");
            assert_eq!(v["choices"], base["choices"], "{objective} without {step}");
            assert_eq!(
                v["profiles"], base["profiles"],
                "{objective} without {step}"
            );
            let certificates = v["components"].to_string();
            let absent = match step {
                "prefix-dominance" => "prefix-dominated",
                "elimination" => "variable elimination",
                "optimal-supports" => "optimal supports",
                "reduced-costs" => "dual bound",
                _ => "settled at their best possible value",
            };
            assert!(
                !certificates.contains(absent),
                "{objective} without {step}: {certificates}"
            );
        }
    }
    let bad = jointplan(&["solve", &p, "--without", "presolve"]);
    assert_eq!(bad.status.code(), Some(2));
}
