//! The research commands as a user runs them: `plan --objective/--pin/--forbid` on a model
//! folder and `verify` of what it wrote, `diff [--json]`, `explain --why-not`, and the
//! why-infeasible answer of `plan` (`--json`, exit 1).

use std::path::PathBuf;
use std::process::Output;

use serde_json::Value;

use crate::process::{jointplan, ok, ok_json, s, text};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The command failed with `code` and its standard error mentions `needle`.
fn fails(result: &Output, code: i32, needle: &str) {
    let err = text(&result.stderr);
    assert_eq!(result.status.code(), Some(code), "{err}");
    has(&err, needle);
}

/// `haystack` contains `needle` (shown otherwise).
fn has(haystack: &str, needle: &str) {
    assert!(haystack.contains(needle), "{haystack}");
}

/// The keys of a JSON object, sorted.
fn keys(value: &Value) -> Vec<&str> {
    value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect()
}

const F16: &str = "provider.cuda.causal_paged_attention.f16";
const FLASH: &str = "provider.cuda.causal_paged_attention.f16.flash";

fn decoder() -> String {
    s(&root().join("models/decoder-2layer/request.json"))
}

#[test]
fn every_objective_of_a_model_folder_plan_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let request = dir.path().join("request.json");
    let model = s(&root().join("models/llama-3.2-1b"));
    ok(&jointplan(&[
        "synth",
        "--model",
        &model,
        "--layers",
        "2",
        "-o",
        &s(&request),
    ]));
    let weights = dir.path().join("weights.json");
    std::fs::write(&weights, r#"{"preferred": 1, "ranks": [0, 3]}"#).unwrap();
    for objective in ["seed-lex", "max-preferred", "min-penalty", "weighted"] {
        let plan = dir.path().join(format!("{objective}.plan.json"));
        let mut args = vec!["plan", &model, "--layers", "2", "--objective", objective];
        let w = s(&weights);
        if objective == "weighted" {
            args.extend(["--weights", &w]);
        }
        let out = s(&plan);
        args.extend(["-o", &out]);
        ok(&jointplan(&args));
        ok(&jointplan(&["verify", &s(&request), &out]));
        let stored: Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
        let recorded = &stored["payload"]["selection_settings"]["objective"];
        if objective == "seed-lex" {
            assert!(recorded.is_null());
        } else {
            assert_eq!(recorded, objective);
        }
    }
    // A pin and a forbid are recorded and verified too.
    let pinned = dir.path().join("pinned.plan.json");
    ok(&jointplan(&[
        "plan",
        &model,
        "--layers",
        "2",
        "--pin",
        "node.layer.0.attention=provider.cuda.causal_paged_attention.paged",
        "--forbid",
        "node.embedding=provider.cuda.token_embedding.gather",
        "-o",
        &s(&pinned),
    ]));
    ok(&jointplan(&["verify", &s(&request), &s(&pinned)]));
    // A malformed pin is bad input naming the flag.
    let result = jointplan(&["plan", &model, "--layers", "2", "--pin", "node.embedding"]);
    fails(&result, 2, "--pin node.embedding");
}

#[test]
fn diff_prints_the_changes_and_its_json_has_exactly_the_documented_keys() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.json");
    let b = dir.path().join("b.json");
    ok(&jointplan(&["plan", &decoder(), "-o", &s(&a)]));
    ok(&jointplan(&[
        "plan",
        &decoder(),
        "--objective",
        "min-penalty",
        "-o",
        &s(&b),
    ]));
    let diff = ok_json(&["diff", &s(&a), &s(&b), "--json"]);
    assert_eq!(
        keys(&diff),
        [
            "memory",
            "nodes_changed",
            "objective",
            "patterns",
            "profiles_changed",
            "programs_equal"
        ]
    );
    for change in diff["nodes_changed"].as_array().unwrap() {
        assert_eq!(keys(change), ["a", "b", "node"]);
    }
    for pattern in diff["patterns"].as_array().unwrap() {
        assert_eq!(keys(pattern), ["a", "b", "count"]);
    }
    for (_, item) in diff["memory"].as_object().unwrap() {
        assert_eq!(keys(item), ["a", "b", "delta"]);
    }
    assert!(!diff["memory"]
        .as_object()
        .unwrap()
        .contains_key("report.weights_bytes"));
    // With the request, the memory report's items join the figures.
    let with_report = ok_json(&["diff", &s(&a), &s(&b), "--json", "--request", &decoder()]);
    for item in [
        "report.weights_bytes",
        "report.kv_bytes_per_token",
        "report.worst_case_fits",
    ] {
        assert_eq!(
            keys(&with_report["memory"][item]),
            ["a", "b", "delta"],
            "{item}"
        );
    }
    assert_eq!(diff["objective"]["a"]["objective"], "seed-lex");
    assert_eq!(diff["objective"]["b"]["objective"], "min-penalty");
    let result = jointplan(&["diff", &s(&a), &s(&b)]);
    ok(&result);
    let out = text(&result.stdout);
    has(&out, &format!("{F16} -> {FLASH}: 2"));
    // A plan with itself: exit 0 and no difference.
    let result = jointplan(&["diff", &s(&a), &s(&a)]);
    ok(&result);
    assert!(text(&result.stdout).contains("no difference"));
    // Two programs: refused, exit 2.
    let tiny = dir.path().join("tiny.json");
    ok(&jointplan(&[
        "plan",
        &s(&root().join("models/tiny/request.json")),
        "-o",
        &s(&tiny),
    ]));
    let result = jointplan(&["diff", &s(&a), &s(&tiny)]);
    fails(&result, 2, "different programs");
}

#[test]
fn explain_why_not_and_the_providers_not_chosen() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    ok(&jointplan(&["plan", &decoder(), "-o", &s(&plan)]));
    let (plan_arg, request, question) = (
        s(&plan),
        decoder(),
        format!("node.layer.1.attention={FLASH}"),
    );
    let why_not = |json: bool| {
        let mut args = vec![
            "explain",
            &plan_arg,
            "--request",
            &request,
            "--why-not",
            &question,
        ];
        if json {
            args.push("--json");
        }
        let result = jointplan(&args);
        ok(&result);
        result
    };
    let out = text(&why_not(false).stdout);
    has(&out, "gets worse first at key preferred_in_node_order");
    has(&out, &format!("node.layer.1.attention  {F16} -> {FLASH}"));
    let result = why_not(true);
    let answer: Value = serde_json::from_slice(&result.stdout).unwrap();
    assert_eq!(answer["status"], "feasible");
    assert_eq!(answer["first_difference"]["worse"], true);
    // --why-not needs the request.
    let result = jointplan(&[
        "explain",
        &s(&plan),
        "--why-not",
        &format!("node.layer.1.attention={FLASH}"),
    ]);
    fails(&result, 2, "--request");
    // Without --why-not and with the request: the providers not chosen per node.
    let result = jointplan(&["explain", &s(&plan), "--request", &decoder()]);
    ok(&result);
    assert!(text(&result.stdout).contains("compatible providers not chosen"));
}

#[test]
fn an_infeasible_plan_says_why_and_exits_1() {
    let args = [
        "plan",
        &decoder(),
        "--pin",
        &format!("node.layer.0.attention={FLASH}"),
        "--pin",
        &format!("node.layer.1.attention={F16}"),
    ]
    .map(|a| a.to_owned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = jointplan(&args);
    assert_eq!(result.status.code(), Some(1));
    let err = text(&result.stderr);
    has(&err, "these 4 facts of the request conflict");
    has(&err, &format!("drop --pin node.layer.0.attention={FLASH}"));
    let mut json = args.clone();
    json.push("--json");
    let result = jointplan(&json);
    assert_eq!(result.status.code(), Some(1));
    let answer: Value = serde_json::from_slice(&result.stdout).unwrap();
    assert_eq!(answer["status"], "infeasible");
    assert_eq!(answer["core"].as_array().unwrap().len(), 4);
    assert_eq!(answer["relaxations"].as_array().unwrap().len(), 2);
}
