//! The sweep's `engine` knob against single `plan --engine E` runs through the binary (a
//! differential test: the sweep's rows and `plan`'s summary are made by separate commands):
//! a row's memory figures, KV tokens, engine budget and plan id are `plan --engine E
//! --json`'s, its time columns `plan --engine E --concurrency C ... --json`'s
//! `performance`; a device-set row takes the engine's time profile, as `plan --devices
//! --engine E` does, and says that the engine's memory rules do not apply; a bad engine
//! value is refused before the sweep starts, naming the grid key and the value.

use std::path::Path;

use serde_json::Value;

use crate::process::{jointplan, ok, ok_json, s, text, SERVING_FIGURES};

fn path(relative: &str) -> String {
    s(&Path::new(env!("CARGO_MANIFEST_DIR")).join(relative))
}

fn plan_json(args: &[&str]) -> Value {
    let mut all = vec!["plan"];
    all.extend_from_slice(args);
    all.push("--json");
    ok_json(&all)
}

fn sweep_rows(args: &[&str]) -> (tempfile::TempDir, Vec<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let out = s(&dir.path().join("out"));
    let mut all = vec!["sweep"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", &out, "--jobs", "1"]);
    let result = jointplan(&all);
    ok(&result);
    let rows = crate::sweep_loop::rows(dir.path());
    (dir, rows)
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

const ENGINES: [&str; 5] = ["vllm", "vllm@0.6", "sglang", "trtllm", "llama.cpp"];

#[test]
fn engine_rows_are_plan_engine_figures_and_times() {
    let model = path("models/llama-3.2-1b");
    let h100 = path("models/devices/h100-sxm-80gb.json");
    let fixed = ["--layers", "2", "--device", &h100, "--context", "4096"];
    let serving = [
        "--concurrency",
        "2",
        "--input-tokens",
        "64",
        "--output-tokens",
        "8",
    ];
    let engines = ENGINES.join(",");
    let (dir, rows) = sweep_rows(
        &[
            &[model.as_str(), "--engine", &engines][..],
            &fixed[..],
            &serving[..],
        ]
        .concat(),
    );
    assert_eq!(rows.len(), ENGINES.len());
    let mut plan_ids = Vec::new();
    for (row, engine) in rows.iter().zip(ENGINES) {
        assert_eq!(row["point"]["engine"], engine);
        assert_eq!(row["status"], "fits", "{engine}: {row}");
        // Memory: `plan --engine E` at the same point, without the serving point (the
        // concurrency is below the policy's ceiling, so the plan is the same).
        let plan = plan_json(&[&[model.as_str(), "--engine", engine][..], &fixed[..]].concat());
        assert_eq!(row["plan_id"], plan["plan_id"], "{engine}");
        assert_eq!(row["report"], plan["memory"]["report"], "{engine}");
        assert_eq!(row["engine_budget"], plan["engine_budget"], "{engine}");
        assert!(row["report"]["tokens_that_fit"].as_u64().is_some());
        // Times: `plan --engine E --concurrency C ...`'s performance.
        let timed = plan_json(
            &[
                &[model.as_str(), "--engine", engine][..],
                &fixed[..],
                &serving[..],
            ]
            .concat(),
        );
        assert_eq!(timed["plan_id"], row["plan_id"], "{engine}");
        let p = &timed["performance"];
        let t = &row["time"];
        for key in SERVING_FIGURES {
            assert_eq!(f(&t[key]), f(&p[key]), "{engine} {key}");
        }
        // The version's own time profile where it has one (vLLM V0), else the engine's.
        let profile = jointplan::study::engine_facts::time_profile_name(engine).unwrap();
        assert_eq!(t["engine"], profile);
        assert_eq!(p["serving_point"]["engine"], profile);
        plan_ids.push(row["plan_id"].clone());
    }
    // The engines' budgets differ, so their plans do (vLLM's versions too: 0.6 reserves
    // more for its non-torch memory), and so do their time profiles.
    for (i, a) in plan_ids.iter().enumerate() {
        assert!(!plan_ids[i + 1..].contains(a), "{a} repeats");
    }
    assert_ne!(
        rows[0]["time"]["tpot_seconds"],
        rows[2]["time"]["tpot_seconds"]
    );
    // The CSV has the engine knob and the time profile that priced the row.
    let csv = std::fs::read_to_string(dir.path().join("out/results.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let at = |name: &str| header.iter().position(|h| *h == name).unwrap();
    for (line, engine) in csv.lines().skip(1).zip(ENGINES) {
        let fields: Vec<&str> = line.split(',').collect();
        assert_eq!(fields[at("engine")], engine);
        assert_eq!(
            fields[at("time_engine")],
            jointplan::study::engine_facts::time_profile_name(engine).unwrap()
        );
    }
    // The Pareto legend says in words what priced the points.
    let svg = std::fs::read_to_string(dir.path().join("out/pareto.svg")).unwrap();
    for note in [
        "times: serving simulation on one device",
        "engine time profiles: vLLM, vLLM V0,",
        "SGLang, TensorRT-LLM, llama.cpp",
    ] {
        assert!(svg.contains(note), "{note} missing in {svg}");
    }
    assert!(!svg.contains("serving-simulation"), "{svg}");
}

#[test]
fn device_set_rows_take_the_engine_rules_as_plan_does() {
    let model = path("models/llama-3.1-8b");
    let set = path("models/devices/sets/a100-80gb-x2.json");
    let fixed = [
        "--layers",
        "2",
        "--devices",
        &set,
        "--tensor-parallel",
        "2",
        "--context",
        "4096",
        "--concurrency",
        "2",
        "--input-tokens",
        "128",
        "--output-tokens",
        "16",
    ];
    let (_dir, rows) =
        sweep_rows(&[&[model.as_str(), "--engine", "vllm,sglang"][..], &fixed[..]].concat());
    assert_eq!(rows.len(), 2);
    for (row, engine) in rows.iter().zip(["vllm", "sglang"]) {
        let placed = plan_json(&[&[model.as_str(), "--engine", engine][..], &fixed[..]].concat());
        let p = &placed["performance"];
        let t = &row["time"];
        assert_eq!(f(&t["tpot_seconds"]), f(&p["tpot_seconds"]), "{engine}");
        assert_eq!(f(&t["ttft_seconds"]), f(&p["ttft_seconds"]), "{engine}");
        assert_eq!(t["engine"], engine);
        assert_eq!(
            row["placement"]["placement_id"],
            placed["plan"]["placement_id"]
        );
        // The engine's budget held every device, as `plan --devices --engine` holds it.
        assert_eq!(
            row["engine_budget"]["rule"], placed["plan"]["payload"]["budget"],
            "{row}"
        );
        let usable = row["engine_budget"]["capacity_bytes"].as_u64().unwrap()
            - row["engine_budget"]["reserve_bytes"].as_u64().unwrap();
        for device in placed["plan"]["payload"]["devices"].as_array().unwrap() {
            assert_eq!(device["usable_bytes"].as_u64(), Some(usable), "{device}");
        }
        let rules: Vec<&str> = t["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        assert!(
            rules.iter().any(
                |r| r.starts_with(&format!("engine {engine}: its memory rules"))
                    && r.contains("its time profile priced it")
            ),
            "{rules:?}"
        );
    }
    // Each engine's budget: two placements.
    assert_ne!(
        rows[0]["time"]["tpot_seconds"],
        rows[1]["time"]["tpot_seconds"]
    );
}

#[test]
fn a_bad_engine_is_refused_before_the_sweep_naming_the_key_and_value() {
    let model = path("models/llama-3.2-1b");
    for (engines, key, value, why) in [
        ("vllm,vlm", "grid.engine[1]", "\"vlm\"", "unknown engine"),
        (
            "vllm@9.9",
            "grid.engine[0]",
            "\"vllm@9.9\"",
            "its versions: 0.19, 0.10, 0.6",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let result = jointplan(&[
            "sweep",
            &model,
            "-o",
            &s(&out),
            "--layers",
            "2",
            "--engine",
            engines,
        ]);
        assert_eq!(result.status.code(), Some(2), "{engines}");
        let err = text(&result.stderr);
        for needle in [key, value, why, "accepted: vllm, vllm@0.19", "llama.cpp"] {
            assert!(err.contains(needle), "{engines}: {needle} missing in {err}");
        }
        assert!(!out.join("results.jsonl").exists(), "nothing planned");
    }
}
