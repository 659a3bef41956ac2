//! Every JSON input is read strictly: a duplicate key (a forged first copy that a
//! first-key-wins reader would see) and trailing bytes are bad input (exit 2) naming the
//! JSON path, in plans, requests, selection problems and weight files; selection problems
//! reject a profile listed twice and empty provider ids, naming where.

use std::path::Path;
use std::process::Output;

use crate::process::{jointplan, text};

fn tiny() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("models/tiny/request.json")
        .display()
        .to_string()
}

fn write(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    path.display().to_string()
}

/// Inserts `member,` right after the first occurrence of `anchor` (an object's opening
/// `"key": {`), so the object gains a forged first copy of one of its keys.
fn insert_after(body: &str, anchor: &str, member: &str) -> String {
    let at = body.find(anchor).expect("anchor present") + anchor.len();
    format!("{}{member},{}", &body[..at], &body[at..])
}

fn assert_bad_input(out: &Output, needles: &[&str]) {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    for needle in needles {
        assert!(stderr.contains(needle), "`{needle}` missing from: {stderr}");
    }
}

#[test]
fn verify_rejects_a_plan_with_a_forged_duplicate_key() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    let made = jointplan(&["plan", &tiny(), "-o", &plan.display().to_string()]);
    assert_eq!(made.status.code(), Some(0), "{}", text(&made.stderr));
    let body = std::fs::read_to_string(&plan).unwrap();
    let anchor = "\"payload\": {";
    assert!(body.contains(anchor), "the plan has a payload object");
    // The forged copy comes first: last-key-wins readers see the clean plan.
    let forged = insert_after(&body, anchor, "\"device_id\": \"device.EVIL.0\"");
    let forged_path = write(dir.path(), "forged.json", &forged);
    let out = jointplan(&["verify", &tiny(), &forged_path]);
    assert_bad_input(&out, &["payload.device_id", "duplicate key `device_id`"]);
    // `hash` reads the same way.
    let hashed = jointplan(&["hash", &forged_path]);
    assert_bad_input(&hashed, &["duplicate key `device_id`"]);
    // Trailing bytes after the plan are refused too.
    let trailing = write(dir.path(), "trailing.json", &format!("{body}\n{{}}"));
    assert_bad_input(&jointplan(&["verify", &tiny(), &trailing]), &["trailing"]);
}

#[test]
fn a_request_with_a_duplicate_attribute_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let body = std::fs::read_to_string(tiny()).unwrap();
    let forged = insert_after(
        &body,
        "\"attributes\": {",
        "\"hidden_size\": {\"unsigned\": 65}",
    );
    let path = write(dir.path(), "request.json", &forged);
    let out = jointplan(&["plan", &path]);
    assert_bad_input(
        &out,
        &["attributes.hidden_size", "duplicate key `hidden_size`"],
    );
}

const SPEC: &str = include_str!("../data/spec-example.json");

#[test]
fn solve_rejects_trailing_garbage_in_the_problem_and_the_weights() {
    let dir = tempfile::tempdir().unwrap();
    let problem = write(dir.path(), "p.json", &format!("{SPEC} this is not JSON"));
    assert_bad_input(&jointplan(&["solve", &problem]), &["trailing characters"]);
    let clean = write(dir.path(), "clean.json", SPEC);
    let weights = write(
        dir.path(),
        "w.json",
        r#"{"preferred": 1, "ranks": [0, 1, 2]} garbage"#,
    );
    let out = jointplan(&[
        "solve",
        &clean,
        "--objective",
        "weighted",
        "--weights",
        &weights,
    ]);
    assert_bad_input(&out, &["weights", "trailing characters"]);
}

#[test]
fn solve_rejects_a_resource_listed_twice_in_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let twice = SPEC.replacen(
        r#""accepts": { "kv.0": ["contiguous"],"#,
        r#""accepts": { "kv.0": ["paged-16"], "kv.0": ["contiguous"],"#,
        1,
    );
    assert_ne!(twice, SPEC);
    let path = write(dir.path(), "p.json", &twice);
    assert_bad_input(
        &jointplan(&["solve", &path]),
        &[
            "nodes[0].candidates[0].accepts.kv.0",
            "duplicate key `kv.0`",
        ],
    );
}

#[test]
fn solve_rejects_a_profile_listed_twice_and_empty_ids_naming_where() {
    let dir = tempfile::tempdir().unwrap();
    let twice = SPEC.replacen(r#"["contiguous"]"#, r#"["contiguous", "contiguous"]"#, 1);
    let path = write(dir.path(), "twice.json", &twice);
    assert_bad_input(
        &jointplan(&["solve", &path]),
        &["`flash`", "`kv.0`", "profile `contiguous` is listed twice"],
    );
    let empty_provider = SPEC.replacen(r#""provider": "paged""#, r#""provider": """#, 1);
    let path = write(dir.path(), "provider.json", &empty_provider);
    assert_bad_input(
        &jointplan(&["solve", &path]),
        &["nodes[0].candidates[1].provider", "empty"],
    );
    let empty_node = SPEC.replacen(r#""id": "layer0.attention""#, r#""id": """#, 1);
    let path = write(dir.path(), "node.json", &empty_node);
    assert_bad_input(&jointplan(&["solve", &path]), &["nodes[0].id", "empty"]);
}
