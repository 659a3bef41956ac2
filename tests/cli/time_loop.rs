//! The research loop with time: `diff` and `explain --why-not` priced at a serving point, and
//! `fit --max-tpot-ms/--max-ttft-ms --maximize sequences`, each checked against plans priced
//! independently by `plan --concurrency ... --json` (the command line's own pricing path).

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::process::{jointplan, ok, s, text};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn device(name: &str) -> String {
    s(&root().join("models/devices").join(name))
}

fn json(result: &Output) -> Value {
    ok(result);
    serde_json::from_slice(&result.stdout).unwrap()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Whether `x` and `y` agree to rounding (sums of the same terms in another order).
fn close(x: f64, y: f64) -> bool {
    (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1e-12)
}

const POINT: [&str; 6] = [
    "--concurrency",
    "4",
    "--input-tokens",
    "128",
    "--output-tokens",
    "16",
];

/// The request of llama-3.2-1b with 2 layers under the server policy (whose catalog offers
/// reference kernels that `min-penalty` takes), written to `dir`.
fn request(dir: &Path) -> String {
    let file = dir.join("request.json");
    let model = s(&root().join("models/llama-3.2-1b"));
    ok(&jointplan(&[
        "synth",
        "--model",
        &model,
        "--layers",
        "2",
        "--policy",
        "server",
        "-o",
        &s(&file),
    ]));
    s(&file)
}

/// `plan REQUEST [extra] --concurrency ... --performance-device h100 --json -o OUT`: the
/// plan's performance as `plan` prices it.
fn priced_plan(request: &str, out: &Path, extra: &[&str]) -> Value {
    let h100 = device("h100-sxm-80gb.json");
    let out = s(out);
    let mut args = vec!["plan", request, "--json", "-o", &out];
    args.extend_from_slice(extra);
    args.extend_from_slice(&POINT);
    args.extend_from_slice(&["--performance-device", &h100]);
    json(&jointplan(&args))
}

#[test]
fn diff_prices_both_plans_as_plan_does_and_its_changes_add_up() {
    let dir = tempfile::tempdir().unwrap();
    let request = request(dir.path());
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let pa = priced_plan(&request, &a, &[]);
    let pb = priced_plan(&request, &b, &["--objective", "min-penalty"]);
    let h100 = device("h100-sxm-80gb.json");
    let mut args = vec![
        "diff",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--request",
        &request,
        "--json",
        "--performance-device",
        &h100,
    ];
    args.extend_from_slice(&POINT);
    let diff = json(&jointplan(&args));
    let time = &diff["time"];
    assert!(time.is_object(), "{diff}");
    // Both sides are exactly what `plan` predicts for each plan.
    for (side, plan) in [("a", &pa), ("b", &pb)] {
        let p = &plan["performance"];
        assert_eq!(time["ttft_seconds"][side], p["ttft_seconds"], "{side}");
        assert_eq!(time["tpot_seconds"][side], p["tpot_seconds"], "{side}");
        assert_eq!(
            time["output_tokens_per_second"][side],
            p["output_tokens_per_second"]
        );
        assert_eq!(time["prefill_seconds"][side], p["prefill"]["seconds"]);
        assert_eq!(
            time["decode_step_seconds"][side],
            p["decode_step"]["seconds"]
        );
    }
    // The provider changes add up to the step deltas: one program, one point, one device.
    let patterns = diff["patterns"].as_array().unwrap();
    assert!(
        !patterns.is_empty(),
        "min-penalty changes providers: {diff}"
    );
    let (mut prefill, mut decode) = (0.0, 0.0);
    for p in patterns {
        prefill += f(&p["time"]["prefill_seconds"]);
        decode += f(&p["time"]["decode_step_seconds"]);
    }
    assert!(close(prefill, f(&time["changes_prefill_seconds"])));
    assert!(close(decode, f(&time["changes_decode_step_seconds"])));
    assert!(time["not_additive"].is_null(), "{time}");
    assert!(
        close(prefill, f(&time["prefill_seconds"]["delta"])),
        "{prefill} vs {}",
        time["prefill_seconds"]
    );
    assert!(
        close(decode, f(&time["decode_step_seconds"]["delta"])),
        "{decode} vs {}",
        time["decode_step_seconds"]
    );
    // Moving to reference kernels costs time.
    assert!(f(&time["decode_step_seconds"]["delta"]) > 0.0, "{time}");
    // The text prints both sides, the changes and the rule.
    let mut args: Vec<&str> = args.into_iter().filter(|a| *a != "--json").collect();
    args.push("--full");
    let out = jointplan(&args);
    ok(&out);
    let out = text(&out.stdout);
    for needle in [
        "time (A | B | B - A; model: docs/performance-model.md; from the serving point given):",
        "vllm engine profile on",
        "roofline",
        "TTFT",
        "TPOT",
        "time (B - A, these nodes only): prefill +",
        "the changes add up to the prefill and decode-step deltas",
    ] {
        assert!(out.contains(needle), "{needle} missing in\n{out}");
    }
    // Without a serving point nothing is priced and the JSON keeps its keys.
    let plain = json(&jointplan(&[
        "diff",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--request",
        &request,
        "--json",
    ]));
    assert!(plain.get("time").is_none());
    assert!(plain["patterns"][0].get("time").is_none());
}

#[test]
fn diff_prices_at_the_point_a_time_objective_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let request = request(dir.path());
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let pa = priced_plan(&request, &a, &["--objective", "min-penalty"]);
    let pb = priced_plan(&request, &b, &["--objective", "min-tpot"]);
    let diff = json(&jointplan(&[
        "diff",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--request",
        &request,
        "--json",
    ]));
    let time = &diff["time"];
    assert_eq!(
        time["source"],
        "plan B's recorded serving point (A records none)"
    );
    assert_eq!(time["tpot_seconds"]["a"], pa["performance"]["tpot_seconds"]);
    assert_eq!(time["tpot_seconds"]["b"], pb["performance"]["tpot_seconds"]);
    // min-tpot is certified optimal for the decode step: min-penalty's is not shorter.
    assert!(f(&time["decode_step_seconds"]["delta"]) <= 0.0, "{time}");
}

#[test]
fn why_not_time_is_the_difference_of_two_independently_priced_plans() {
    let dir = tempfile::tempdir().unwrap();
    let request = request(dir.path());
    let (a, pinned) = (dir.path().join("a.json"), dir.path().join("pinned.json"));
    let pa = priced_plan(&request, &a, &[]);
    // A node and a provider the plan passed over.
    let explanation = json(&jointplan(&[
        "explain",
        a.to_str().unwrap(),
        "--request",
        &request,
        "--json",
    ]));
    let (node, provider) = explanation["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|n| {
            let alternative = n["alternatives"].as_array()?.iter().find(|a| {
                a["dropped"].is_null()
                    && a["provider"]
                        .as_str()
                        .is_some_and(|p| p.contains("reference"))
            })?;
            Some((
                n["node"].as_str()?.to_owned(),
                alternative["provider"].as_str()?.to_owned(),
            ))
        })
        .expect("a node with a reference kernel passed over");
    let question = format!("{node}={provider}");
    let h100 = device("h100-sxm-80gb.json");
    let mut args = vec![
        "explain",
        a.to_str().unwrap(),
        "--request",
        &request,
        "--why-not",
        &question,
        "--json",
        "--performance-device",
        &h100,
    ];
    args.extend_from_slice(&POINT);
    let answer = json(&jointplan(&args));
    assert_eq!(answer["status"], "feasible", "{answer}");
    let pp = priced_plan(&request, &pinned, &["--pin", &question]);
    assert_eq!(
        answer["plan_id"], pp["plan_id"],
        "the pinned plan is `plan --pin`'s"
    );
    let time = &answer["diff"]["time"];
    for (key, path) in [
        ("tpot_seconds", &["tpot_seconds"][..]),
        ("ttft_seconds", &["ttft_seconds"][..]),
        ("decode_step_seconds", &["decode_step", "seconds"][..]),
        ("prefill_seconds", &["prefill", "seconds"][..]),
    ] {
        let at = |v: &Value| {
            path.iter()
                .fold(v["performance"].clone(), |v, k| v[k].clone())
        };
        let expected = f(&at(&pp)) - f(&at(&pa));
        assert!(
            close(f(&time[key]["delta"]), expected),
            "{key}: {} vs {expected}",
            time[key]["delta"]
        );
    }
    assert!(f(&time["decode_step_seconds"]["delta"]) > 0.0, "{time}");
    args.retain(|a| *a != "--json");
    let out = jointplan(&args);
    ok(&out);
    let out = text(&out.stdout);
    for needle in [
        "provider changes and their time (pinned - chosen):",
        "time (chosen | pinned | pinned - chosen;",
        "efficiency class",
    ] {
        assert!(out.contains(needle), "{needle} missing in\n{out}");
    }
}

fn fit(extra: &[&str]) -> Output {
    let model = s(&root().join("models/llama-3.2-1b"));
    let h100 = device("h100-sxm-80gb.json");
    let mut args = vec![
        "fit",
        &model,
        "--layers",
        "2",
        "--device",
        &h100,
        "--maximize",
        "sequences",
        "--input-tokens",
        "128",
        "--output-tokens",
        "16",
        "--json",
    ];
    args.extend_from_slice(extra);
    jointplan(&args)
}

/// `plan` at `n` sequences served at concurrency `n`, as `fit` probes it.
fn plan_at(n: u64, extra: &[&str]) -> Output {
    let model = s(&root().join("models/llama-3.2-1b"));
    let h100 = device("h100-sxm-80gb.json");
    let n = n.to_string();
    let mut args = vec![
        "plan",
        &model,
        "--layers",
        "2",
        "--device",
        &h100,
        "--sequences",
        &n,
        "--concurrency",
        &n,
        "--input-tokens",
        "128",
        "--output-tokens",
        "16",
        "--json",
    ];
    args.extend_from_slice(extra);
    jointplan(&args)
}

#[test]
fn fit_with_a_tpot_target_is_the_largest_concurrency_plan_says_meets_it() {
    // A target the latency binds (memory holds 147 sequences of this 2-layer model; TPOT
    // passes 0.6 ms at 79 at the fitted vLLM constants).
    let target_ms = 0.6;
    let answer = json(&fit(&["--max-tpot-ms", "0.6"]));
    let n = answer["largest"]
        .as_u64()
        .expect("some concurrency meets it");
    let latency = &answer["latency"];
    assert_eq!(f(&latency["target"]["max_tpot_seconds"]), target_ms / 1e3);
    let next = &answer["next"];
    assert_eq!(next["value"].as_u64(), Some(n + 1));
    assert_eq!(next["binds"], "latency", "{answer}");
    // At N: `plan` builds the plan fit found, predicts the same figures, meets the target.
    let at_n = json(&plan_at(n, &[]));
    assert_eq!(at_n["plan_id"], answer["plan_id"]);
    let p = &at_n["performance"];
    assert!(f(&p["tpot_seconds"]) * 1e3 <= target_ms);
    assert_eq!(latency["at_largest"]["tpot_seconds"], p["tpot_seconds"]);
    assert_eq!(latency["at_largest"]["ttft_seconds"], p["ttft_seconds"]);
    assert_eq!(at_n["memory"]["report"]["worst_case_fits"], true);
    // At N + 1: the memory still fits, the target is missed.
    let above = json(&plan_at(n + 1, &[]));
    assert!(f(&above["performance"]["tpot_seconds"]) * 1e3 > target_ms);
    assert_eq!(
        next["latency"]["tpot_seconds"],
        above["performance"]["tpot_seconds"]
    );
    assert_eq!(above["memory"]["report"]["worst_case_fits"], true);
}

#[test]
fn fit_with_a_loose_target_is_bound_by_memory_and_says_so() {
    // A 24 GB device and a TTFT target no step misses: the memory binds.
    let model = s(&root().join("models/llama-3.2-1b"));
    let rtx = device("rtx-4090-24gb.json");
    let loose = json(&jointplan(&[
        "fit",
        &model,
        "--layers",
        "2",
        "--device",
        &rtx,
        "--maximize",
        "sequences",
        "--input-tokens",
        "128",
        "--output-tokens",
        "4",
        "--max-ttft-ms",
        "100000",
        "--json",
    ]));
    let plain = json(&jointplan(&[
        "fit",
        &model,
        "--layers",
        "2",
        "--device",
        &rtx,
        "--maximize",
        "sequences",
        "--json",
    ]));
    assert_eq!(loose["largest"], plain["largest"], "{loose}");
    assert_eq!(loose["plan_id"], plain["plan_id"]);
    assert!(loose["next"]["binds"]
        .as_str()
        .unwrap()
        .starts_with("memory"));
    assert_eq!(loose["latency"]["at_largest"]["meets"], true);
}

#[test]
fn bad_latency_targets_name_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--max-tpot-ms", "0"],
            "--max-tpot-ms: 0 is not a positive number",
        ),
        (
            &["--max-tpot-ms", "-3"],
            "--max-tpot-ms: -3 is not a positive number",
        ),
        (
            &["--max-ttft-ms", "NaN"],
            "--max-ttft-ms: NaN is not a positive number",
        ),
        (
            &["--max-tpot-ms", "inf"],
            "--max-tpot-ms: inf is not a positive number",
        ),
    ];
    for (flags, message) in cases {
        let result = fit(flags);
        assert_eq!(result.status.code(), Some(2), "{flags:?}");
        let err = text(&result.stderr);
        assert!(err.contains(message), "{flags:?}: {err}");
    }
    // Serving flags without a target, a target on another knob.
    let model = s(&root().join("models/llama-3.2-1b"));
    let result = jointplan(&[
        "fit",
        &model,
        "--maximize",
        "sequences",
        "--input-tokens",
        "8",
    ]);
    assert_eq!(result.status.code(), Some(2));
    assert!(text(&result.stderr).contains("--input-tokens applies to a latency target"));
    let result = jointplan(&[
        "fit",
        &model,
        "--maximize",
        "context",
        "--max-tpot-ms",
        "20",
        "--input-tokens",
        "8",
        "--output-tokens",
        "8",
    ]);
    assert_eq!(result.status.code(), Some(2));
    let err = text(&result.stderr);
    assert!(
        err.contains("--max-tpot-ms") && err.contains("applies to --maximize sequences"),
        "{err}"
    );
}

#[test]
fn plans_priced_at_different_points_say_why_the_changes_need_not_add_up() {
    let dir = tempfile::tempdir().unwrap();
    let request = request(dir.path());
    let h100 = device("h100-sxm-80gb.json");
    let mut sides = Vec::new();
    for (name, concurrency) in [("a.json", "4"), ("b.json", "32")] {
        let out = s(&dir.path().join(name));
        let plan = json(&jointplan(&[
            "plan",
            &request,
            "--objective",
            "max-throughput",
            "--concurrency",
            concurrency,
            "--input-tokens",
            "128",
            "--output-tokens",
            "16",
            "--performance-device",
            &h100,
            "--json",
            "-o",
            &out,
        ]));
        sides.push((out, plan));
    }
    let diff = json(&jointplan(&[
        "diff",
        &sides[0].0,
        &sides[1].0,
        "--request",
        &request,
        "--json",
    ]));
    let time = &diff["time"];
    assert_eq!(time["source"], "each plan's recorded serving point");
    assert_eq!(time["point_a"]["concurrency"], 4);
    assert_eq!(time["point_b"]["concurrency"], 32);
    assert!(
        time["not_additive"]
            .as_str()
            .is_some_and(|w| w.contains("serving points differ")),
        "{time}"
    );
    for (side, (_, plan)) in ["a", "b"].into_iter().zip(&sides) {
        assert_eq!(
            time["tpot_seconds"][side],
            plan["performance"]["tpot_seconds"]
        );
    }
}
