//! The research loop without friction: the id patterns summaries print are accepted by
//! `--pin`, `--forbid` and `explain --node`; `diff` groups what changed as summaries do;
//! `explain --json` exists for every form; one meaning per word; why-infeasible answers a
//! static overflow at once and says what the allocations hold.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::process::{jointplan, ok, ok_json, s, text};

fn llama() -> String {
    s(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models/llama-3.2-1b"))
}

const PAGED: &str = "provider.cuda.causal_paged_attention.paged";

/// Plans llama-3.2-1b with `layers` layers and `extra` flags into `dir/name.plan.json`.
fn plan(dir: &Path, name: &str, layers: &str, extra: &[&str]) -> PathBuf {
    let out = dir.join(format!("{name}.plan.json"));
    let model = llama();
    let out_text = s(&out);
    let mut args = vec!["plan", model.as_str(), "--layers", layers, "-o", &out_text];
    args.extend_from_slice(extra);
    ok(&jointplan(&args));
    out
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Each node's provider in a stored plan, by node id.
fn providers(plan: &Value) -> Vec<(String, String)> {
    plan["payload"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["id"].as_str().unwrap().to_owned(),
                n["provider_resources"]["provider_id"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            )
        })
        .collect()
}

fn attention_providers(plan: &Value) -> Vec<String> {
    providers(plan)
        .into_iter()
        .filter(|(id, _)| id.ends_with(".attention"))
        .map(|(_, p)| p)
        .collect()
}

#[test]
fn pin_and_forbid_take_the_id_patterns_summaries_print() {
    let dir = tempfile::tempdir().unwrap();
    let default = read(&plan(dir.path(), "default", "4", &[]));
    let chosen = attention_providers(&default);
    assert_eq!(chosen.len(), 4);
    assert!(chosen.iter().all(|p| p != PAGED), "{chosen:?}");
    // One flag pins every attention node, as the summary's group line names them.
    let pin = format!("node.layer.[0-3].attention={PAGED}");
    let pinned = read(&plan(dir.path(), "pinned", "4", &["--pin", &pin]));
    assert_eq!(attention_providers(&pinned), vec![PAGED; 4]);
    let recorded = pinned["payload"]["selection_settings"]["pins"]
        .as_object()
        .unwrap();
    assert_eq!(recorded.len(), 4, "{recorded:?}");
    // A step and a list select what they print; forbidding the default at layers 0 and 2
    // leaves layers 1 and 3 alone.
    let forbid = format!("node.layer.[0-2 step 2].attention={}", chosen[0]);
    let forbidden = read(&plan(dir.path(), "forbidden", "4", &["--forbid", &forbid]));
    let after = attention_providers(&forbidden);
    assert_ne!(after[0], chosen[0]);
    assert_ne!(after[2], chosen[0]);
    let forbids = forbidden["payload"]["selection_settings"]["forbids"]
        .as_object()
        .unwrap();
    let mut nodes: Vec<&str> = forbids.keys().map(String::as_str).collect();
    nodes.sort_unstable();
    assert_eq!(nodes, ["node.layer.0.attention", "node.layer.2.attention"]);
    // A pattern that selects nothing, and a summary that does not list its numbers, are
    // bad input naming the flag.
    let model = llama();
    let none = format!("node.layer.[7-9].attention={PAGED}");
    let result = jointplan(&["plan", &model, "--layers", "4", "--pin", &none]);
    assert_eq!(result.status.code(), Some(2));
    assert!(
        text(&result.stderr).contains("selects no node"),
        "{}",
        text(&result.stderr)
    );
    let summary = format!("node.layer.[64 values in 0-255].attention={PAGED}");
    let result = jointplan(&["plan", &model, "--layers", "4", "--forbid", &summary]);
    assert_eq!(result.status.code(), Some(2));
    let stderr = text(&result.stderr);
    assert!(
        stderr.contains("--forbid") && stderr.contains("summarises"),
        "{stderr}"
    );
}

#[test]
fn explain_takes_a_pattern_and_prints_json_for_every_form() {
    let dir = tempfile::tempdir().unwrap();
    let path = plan(dir.path(), "plan", "3", &[]);
    let stored = read(&path);
    let p = s(&path);
    let pattern = "node.layer.[0-2].attention";
    let result = jointplan(&["explain", &p, "--node", pattern]);
    ok(&result);
    let out = text(&result.stdout);
    for layer in 0..3 {
        assert!(
            out.contains(&format!("node node.layer.{layer}.attention (operation")),
            "{out}"
        );
    }
    assert!(!out.contains("node node.embedding"), "{out}");
    // --json without --why-not: the explanation itself, for a pattern, a plan and a node.
    let answer = ok_json(&["explain", &p, "--node", pattern, "--json"]);
    assert_eq!(answer["plan_id"], stored["payload"]["plan_id"]);
    let nodes = answer["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 3);
    assert!(nodes.iter().all(|n| n["alternatives"].is_null()));
    let whole = ok_json(&["explain", &p, "--json"]);
    assert_eq!(
        whole["nodes"].as_array().unwrap().len(),
        stored["payload"]["nodes"].as_array().unwrap().len()
    );
    // One node by id is read alone (the plan is not parsed whole) and answers the same.
    let one = ok_json(&["explain", &p, "--node", "node.layer.1.attention", "--json"]);
    assert_eq!(one["nodes"][0], nodes[1]);
    assert_eq!(one["plan_id"], answer["plan_id"]);
    // With the request: the providers passed over, and the trade-off when the text has it.
    let request = dir.path().join("request.json");
    let model = llama();
    ok(&jointplan(&[
        "synth",
        "--model",
        &model,
        "--layers",
        "3",
        "-o",
        &s(&request),
    ]));
    let r = s(&request);
    let with_request = ok_json(&["explain", &p, "--request", &r, "--json"]);
    let attention = &with_request["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == "node.layer.0.attention")
        .unwrap()["alternatives"];
    assert!(attention
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["provider"] == PAGED));
    let text_form = text(&jointplan(&["explain", &p, "--request", &r]).stdout);
    assert_eq!(
        text_form.starts_with("explain trade-off"),
        !with_request["kv_tradeoff"].is_null(),
        "{text_form}"
    );
    // A pattern that selects no node is answered with the closest ids.
    let result = jointplan(&["explain", &p, "--node", "node.layer.[5-6].attention"]);
    assert_eq!(result.status.code(), Some(2));
    assert!(text(&result.stderr).contains("closest: node.layer."));
}

#[test]
fn diff_groups_changed_nodes_as_summaries_do() {
    let dir = tempfile::tempdir().unwrap();
    let a = s(&plan(dir.path(), "a", "4", &[]));
    let pin = format!("node.layer.[0-3].attention={PAGED}");
    let b = s(&plan(dir.path(), "b", "4", &["--pin", &pin]));
    let result = jointplan(&["diff", &a, &b]);
    ok(&result);
    let out = text(&result.stdout);
    assert!(
        out.contains("    node.layer.[0-3].attention  x4\n"),
        "{out}"
    );
    assert!(!out.contains("    node.layer.2.attention\n"), "{out}");
    let result = jointplan(&["diff", &a, &b, "--full"]);
    ok(&result);
    let full = text(&result.stdout);
    for layer in 0..4 {
        assert!(
            full.contains(&format!("    node.layer.{layer}.attention\n")),
            "{full}"
        );
    }
    // Grouping shortens the text, it never drops a resource: the counts are the same.
    let count = |text: &str| {
        text.lines()
            .find(|l| l.starts_with("storage profiles:"))
            .unwrap()
            .to_owned()
    };
    assert_eq!(count(&out), count(&full));
}

#[test]
fn one_meaning_per_word_in_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let model = llama();
    let out = s(&dir.path().join("plan.json"));
    let result = jointplan(&["plan", &model, "--layers", "2", "-o", &out]);
    ok(&result);
    let summary = text(&result.stdout);
    // "headroom" is the room for sequences at the ceilings; usable - static - minimum
    // runnable is the spare at the minimum load.
    assert!(summary.contains("  spare at minimum load   "), "{summary}");
    assert!(summary.contains("headroom for sequences"), "{summary}");
    assert_eq!(summary.matches("headroom").count(), 1, "{summary}");
    let json = ok_json(&["plan", &model, "--layers", "2", "--json"]);
    assert!(json["memory"]["spare_bytes"].is_i64(), "{json}");
    assert!(json["memory"].get("headroom_bytes").is_none());
    assert!(json["memory"]["report"]["headroom_bytes"].is_i64());
}

#[test]
fn a_static_overflow_is_answered_without_searching_what_cannot_fix_it() {
    let dir = tempfile::tempdir().unwrap();
    // llama-3.2-1b's weights alone (about 2.5 GB) do not fit a 2 GiB device.
    let device = dir.path().join("small.json");
    let mut small: Value = serde_json::from_str(
        &std::fs::read_to_string(
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models/devices/rtx-4090-24gb.json"),
        )
        .unwrap(),
    )
    .unwrap();
    small["total_memory_bytes"] = Value::from(2u64 << 30);
    // The driver's figure is the real card's: a smaller card reports its own.
    small.as_object_mut().unwrap().remove("driver_memory_bytes");
    std::fs::write(&device, small.to_string()).unwrap();
    // The devices beside it: one a little larger (still too small for the weights, so it is
    // never built), one with room for everything: the next device of the directory.
    let mut larger = small.clone();
    larger["total_memory_bytes"] = Value::from(9u64 << 28);
    std::fs::write(dir.path().join("larger.json"), larger.to_string()).unwrap();
    let mut huge = small.clone();
    huge["total_memory_bytes"] = Value::from(1u64 << 40);
    std::fs::write(dir.path().join("huge.json"), huge.to_string()).unwrap();
    std::fs::write(dir.path().join("notes.json"), "{\"not\": \"a device\"}").unwrap();
    let model = llama();
    let result = jointplan(&["plan", &model, "--device", &s(&device), "--json"]);
    assert_eq!(result.status.code(), Some(1), "{}", text(&result.stderr));
    let answer: Value = serde_json::from_slice(&result.stdout).unwrap();
    assert_eq!(answer["kind"], "capacity");
    let notes = answer["notes"].as_array().unwrap();
    assert!(
        notes[0]
            .as_str()
            .unwrap()
            .contains("static allocations alone"),
        "{notes:?}"
    );
    let searched: Vec<&str> = answer["relaxations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["field"].as_str().unwrap())
        .collect();
    assert!(!searched.contains(&"policy.maximum_active_sequences"));
    assert!(!searched.contains(&"policy.maximum_scheduled_tokens"));
    assert!(answer.get("unsearched").is_none(), "{answer}");
    // The capacity search built a plan: what it holds, grouped, with the levers.
    let held = &answer["holdings"];
    assert_eq!(held["states"], 16, "{held}");
    let each = held["state_bytes_each"].as_u64().unwrap();
    assert_eq!(held["sequence_state_bytes"].as_u64().unwrap(), 16 * each);
    let stderr = text(&result.stderr);
    assert!(
        stderr.contains("KV cache and sequence state for one 131072-token sequence:"),
        "{stderr}"
    );
    assert!(stderr.contains("(16 states x "), "{stderr}");
    for lever in [
        "fewer sequences",
        "a shorter context",
        "a smaller weight format",
    ] {
        assert!(stderr.contains(lever), "{stderr}");
    }
    // The next device of the directory: the smallest larger one whose plan's worst case fits.
    let next = &answer["next_device"];
    assert_eq!(
        next["device_file"],
        s(&dir.path().join("huge.json")),
        "{answer}"
    );
    assert_eq!(next["fits"], true);
    assert!(next["plan_id"]
        .as_str()
        .unwrap()
        .starts_with("plan/sha256/"));
    assert!(
        stderr.contains("the next device of its directory that fits: ")
            && stderr.contains("huge.json"),
        "{stderr}"
    );
}
