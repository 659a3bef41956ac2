//! `jointplan hash FILE`: the canonical sha256 of any JSON file. Reformatting and
//! reordering keys keep it; changing a value changes it; it is the canonical form the plan
//! hash uses; bad JSON exits 2 naming the file, line and column.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::process::{jointplan, text};

fn tiny_request() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models/tiny/request.json")
}

/// The hex digest `jointplan hash` prints for `file` (text form), checking the line format.
fn hash_of(file: &Path) -> String {
    let result = jointplan(&["hash", &file.display().to_string()]);
    assert_eq!(result.status.code(), Some(0), "{}", text(&result.stderr));
    let stdout = text(&result.stdout);
    let line = stdout.trim_end();
    let expected_tail = format!("  {}", file.display());
    assert!(line.starts_with("sha256:"), "{line}");
    assert!(line.ends_with(&expected_tail), "{line}");
    let hex = &line["sha256:".len()..line.len() - expected_tail.len()];
    assert_eq!(hex.len(), 64, "{line}");
    assert!(hex
        .bytes()
        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    hex.to_owned()
}

/// JSON text with every object's keys in reverse order and an odd indentation.
fn reversed(value: &Value, depth: usize, out: &mut String) {
    let pad = "   ".repeat(depth + 1);
    match value {
        Value::Object(map) => {
            out.push_str("{\n");
            let entries: Vec<_> = map.iter().rev().collect();
            for (i, (key, item)) in entries.iter().enumerate() {
                out.push_str(&format!("{pad}{}:  ", Value::String((*key).clone())));
                reversed(item, depth + 1, out);
                if i + 1 < entries.len() {
                    out.push(',');
                }
                out.push('\n');
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(" , ");
                }
                reversed(item, depth + 1, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[test]
fn reformatted_and_reordered_json_hashes_the_same_and_a_change_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let original = tiny_request();
    let tree: Value = serde_json::from_str(&std::fs::read_to_string(&original).unwrap()).unwrap();
    let mut reordered_text = String::new();
    reversed(&tree, 0, &mut reordered_text);
    let reordered = dir.path().join("reordered.json");
    std::fs::write(&reordered, &reordered_text).unwrap();
    let compact = dir.path().join("compact.json");
    std::fs::write(&compact, serde_json::to_string(&tree).unwrap()).unwrap();
    assert_ne!(
        std::fs::read(&original).unwrap(),
        reordered_text.as_bytes(),
        "the reordered file must differ byte-wise"
    );
    let expected = jointplan::canonical::canonical_fingerprint("request", &tree)
        .unwrap()
        .as_str()
        .to_owned();
    assert_eq!(hash_of(&original), expected);
    assert_eq!(hash_of(&reordered), expected);
    assert_eq!(hash_of(&compact), expected);

    let mut changed_tree = tree.clone();
    let sequences = changed_tree["policy"]["maximum_active_sequences"]
        .as_u64()
        .expect("the tiny request has a policy with maximum_active_sequences");
    changed_tree["policy"]["maximum_active_sequences"] = Value::from(sequences + 1);
    let changed = dir.path().join("changed.json");
    std::fs::write(
        &changed,
        serde_json::to_string_pretty(&changed_tree).unwrap(),
    )
    .unwrap();
    assert_ne!(hash_of(&changed), expected);
}

#[test]
fn json_output_names_the_file_and_the_canonical_size() {
    let file = tiny_request();
    let result = jointplan(&["hash", &file.display().to_string(), "--json"]);
    assert_eq!(result.status.code(), Some(0), "{}", text(&result.stderr));
    let report: Value = serde_json::from_slice(&result.stdout).unwrap();
    assert_eq!(report["file"], file.display().to_string());
    assert_eq!(report["sha256"], hash_of(&file));
    let tree: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let canonical = jointplan::canonical::canonical_json("request", &tree).unwrap();
    assert_eq!(report["canonical_bytes"], canonical.len() as u64);
}

#[test]
fn the_plan_hash_is_the_hash_of_the_payload_with_its_plan_id_unset() {
    let dir = tempfile::tempdir().unwrap();
    let plan_file = dir.path().join("tiny.plan.json");
    let result = jointplan(&[
        "plan",
        &tiny_request().display().to_string(),
        "-o",
        &plan_file.display().to_string(),
    ]);
    assert_eq!(result.status.code(), Some(0), "{}", text(&result.stderr));
    let plan: Value = serde_json::from_str(&std::fs::read_to_string(&plan_file).unwrap()).unwrap();
    let mut payload = plan["payload"].clone();
    payload["plan_id"] = Value::from("plan/unset");
    let payload_file = dir.path().join("payload.json");
    std::fs::write(
        &payload_file,
        serde_json::to_string_pretty(&payload).unwrap(),
    )
    .unwrap();
    assert_eq!(Value::from(hash_of(&payload_file)), plan["plan_hash"]);
    // The whole plan file hashes differently: it also holds the plan id and hash.
    assert_ne!(Value::from(hash_of(&plan_file)), plan["plan_hash"]);
}

#[test]
fn bad_json_exits_2_naming_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\n  \"a\": 1,\n  \"b\" 2\n}\n").unwrap();
    let result = jointplan(&["hash", &bad.display().to_string()]);
    assert_eq!(result.status.code(), Some(2));
    assert!(result.stdout.is_empty());
    let stderr = text(&result.stderr);
    assert!(
        stderr.contains(&bad.display().to_string()),
        "names the file: {stderr}"
    );
    assert!(
        stderr.contains("line 3 column 7"),
        "names the position: {stderr}"
    );

    let missing = dir.path().join("missing.json");
    let result = jointplan(&["hash", &missing.display().to_string()]);
    assert_eq!(result.status.code(), Some(2));
    assert!(text(&result.stderr).contains("missing.json: cannot read"));
}
