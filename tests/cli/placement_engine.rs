//! `--engine` on a placement (`plan MODEL --device D --count N --engine E --engine-arg ...`):
//! the engine runs the model at its own tensor-parallel degree, every device is held to the
//! budget the engine's rule gives it, and the summary carries the engine's accounting of one
//! rank; the requirement a placement provisions KV cache for is the policy's (one request of
//! the maximum length), not its ceilings.

use std::path::Path;

use serde_json::Value;

use crate::process::{jointplan, ok, ok_json, text};

fn path(relative: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(relative)
        .display()
        .to_string()
}

fn term(engine: &Value, name: &str) -> u64 {
    engine["budget"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"] == name)
        .map(|t| t["bytes"].as_u64().unwrap())
        .sum()
}

#[test]
fn the_engine_budget_holds_every_device_and_its_accounting_matches_the_shards() {
    let json = ok_json(&[
        "plan",
        &path("models/llama-3.1-8b"),
        "--weight-format",
        "dense-bf16",
        "--device",
        &path("models/devices/h100-sxm-80gb.json"),
        "--count",
        "2",
        "--engine",
        "vllm",
        "--engine-arg",
        "tensor_parallel_size=2",
        "--engine-arg",
        "max_model_len=16384",
        "--json",
    ]);
    let payload = &json["plan"]["payload"];
    let engine = &json["engine"];
    assert_eq!(payload["tensor_parallel"], 2, "{payload}");
    assert_eq!(payload["pipeline_parallel"], 1, "{payload}");
    // The engine's longest request is the context provisioned, for one sequence.
    assert_eq!(payload["context_tokens"], 16384, "{payload}");
    assert_eq!(payload["sequences"], 1, "{payload}");
    assert!(
        payload["budget"]
            .as_str()
            .is_some_and(|r| r.contains("gpu_memory_utilization 0.9")),
        "{payload}"
    );
    // vLLM's rule: usable = gpu_memory_utilization x total less its non-torch and
    // CUDA-graph memory, read back from the engine's own terms.
    let usable = term(engine, "requested") - term(engine, "non_torch") - term(engine, "cuda_graph");
    let devices = payload["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 2);
    let rope = 131072 * 128 * 2; // max_position x rotary_dim x 2 B (bf16 cos/sin cache)
    for device in devices {
        assert_eq!(device["usable_bytes"].as_u64(), Some(usable), "{device}");
        // Two accountings of one rank's weights: the placement's shards (each tensor by
        // vLLM's split rule, norms replicated, components aligned) and the engine's
        // `parameters / tensor_parallel_size` agree within 0.1%.
        let shards = device["items"]["weights"].as_u64().unwrap() as f64;
        let engine_weights = (term(engine, "weights") - rope) as f64;
        let gap = (shards - engine_weights).abs() / engine_weights;
        assert!(
            gap < 1e-3,
            "shards {shards} vs engine {engine_weights}: {gap}"
        );
    }
    assert!(
        engine["flags"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "--tensor-parallel-size 2"),
        "{engine}"
    );
}

#[test]
fn the_summary_prints_the_engine_lines_and_a_refusal_keeps_them() {
    let base = [
        "plan".to_owned(),
        path("models/llama-3.1-70b"),
        "--weight-format".to_owned(),
        "dense-bf16".to_owned(),
        "--device".to_owned(),
        path("models/devices/a100-80gb.json"),
        "--count".to_owned(),
        "2".to_owned(),
        "--engine".to_owned(),
        "vllm".to_owned(),
        "--engine-arg".to_owned(),
        "tensor_parallel_size=2".to_owned(),
    ];
    let with = |extra: &[&str]| {
        let mut args: Vec<&str> = base.iter().map(String::as_str).collect();
        args.extend_from_slice(extra);
        jointplan(&args)
    };
    // Two A100-80s serve Llama-3.1-70B in bf16 at 8,192 tokens.
    let placed = with(&["--engine-arg", "max_model_len=8192"]);
    ok(&placed);
    let stdout = text(&placed.stdout);
    for line in [
        "tensor parallel 2, pipeline 1",
        "usable bytes: vLLM",
        "on each of the 2 tensor-parallel ranks",
        "log: GPU KV cache size:",
        "Maximum concurrency for 8,192 tokens per request",
    ] {
        assert!(stdout.contains(line), "{line}: {stdout}");
    }
    // At the server preset's 32,768 tokens neither fits: the placement names its levers and
    // the engine's own accounting says vLLM would refuse to start.
    let refused = with(&[]);
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused.stdout));
    let stderr = text(&refused.stderr);
    for line in [
        "no placement fits",
        "a context of at most",
        "vllm would refuse to start",
    ] {
        assert!(stderr.contains(line), "{line}: {stderr}");
    }
}

#[test]
fn bad_engine_settings_on_a_placement_exit_2_naming_the_key() {
    let model = path("models/llama-3.1-8b");
    let device = path("models/devices/h100-sxm-80gb.json");
    let cases: [(&[&str], &str); 6] = [
        (
            &["--count", "2", "--engine", "vllm"],
            "give --engine-arg tensor_parallel_size=N",
        ),
        (
            &["--count", "2", "--engine", "llama.cpp"],
            "modelled on one device",
        ),
        (
            &[
                "--count",
                "2",
                "--engine",
                "vllm",
                "--engine-arg",
                "tensor_parallel_size=2",
                "--tensor-parallel",
                "1",
            ],
            "disagrees with --tensor-parallel 1",
        ),
        (
            &[
                "--count",
                "2",
                "--engine",
                "vllm",
                "--engine-arg",
                "tensor_parallel_size=2",
                "--engine-arg",
                "max_model_len=8192",
                "--context",
                "4096",
            ],
            "max_model_len=8192 disagrees with --context 4096",
        ),
        (
            &[
                "--count",
                "2",
                "--engine",
                "sglang",
                "--engine-arg",
                "tp_size=2",
                "--engine-arg",
                "bogus_key=1",
            ],
            "bogus_key",
        ),
        (
            &["--engine", "vllm", "--engine-arg", "tensor_parallel_size=2"],
            "--count 2",
        ),
    ];
    for (extra, expected) in cases {
        let mut args = vec!["plan", model.as_str(), "--device", device.as_str()];
        args.extend_from_slice(extra);
        let result = jointplan(&args);
        let stderr = text(&result.stderr);
        assert_eq!(result.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains(expected), "{extra:?}: {expected}: {stderr}");
    }
}

#[test]
fn a_placement_provisions_the_requirement_and_a_serving_point_raises_it() {
    let model = path("models/llama-3.1-8b");
    let device = path("models/devices/a100-80gb.json");
    // One device: the placement holds what the single-device plan holds, which requires one
    // sequence at the context (the interactive preset's 4 are a ceiling).
    let single = ok_json(&[
        "plan",
        &model,
        "--device",
        &device,
        "--policy",
        "interactive",
        "--json",
    ]);
    let per_sequence = single["memory"]["report"]["kv_bytes_per_sequence"]
        .as_u64()
        .unwrap();
    let placed = ok_json(&[
        "plan",
        &model,
        "--device",
        &device,
        "--policy",
        "interactive",
        "--count",
        "1",
        "--json",
    ]);
    let payload = &placed["plan"]["payload"];
    assert_eq!(payload["sequences"], 1, "{payload}");
    assert_eq!(
        payload["devices"][0]["items"]["kv_cache"].as_u64(),
        Some(per_sequence),
        "{payload}"
    );
    // A serving point of C requests of I + O tokens needs ceil(C (I + O) / context)
    // sequences of the context, at most C.
    let (c, i, o, context) = (8u64, 1536u64, 512u64, 4096u64);
    let served = ok_json(&[
        "plan",
        &model,
        "--device",
        &device,
        "--policy",
        "interactive",
        "--context",
        &context.to_string(),
        "--count",
        "1",
        "--concurrency",
        &c.to_string(),
        "--input-tokens",
        &i.to_string(),
        "--output-tokens",
        &o.to_string(),
        "--json",
    ]);
    // 8 x 2,048 tokens over 4,096-token sequences: 4 of them.
    let expected = (c * (i + o)).div_ceil(context).min(c);
    assert_eq!(
        served["plan"]["payload"]["sequences"].as_u64(),
        Some(expected),
        "{}",
        served["plan"]["payload"]
    );
}

#[test]
fn fit_counts_devices_at_the_engine_degree_as_plan_places_them() {
    let dir = tempfile::tempdir().unwrap();
    let device = dir.path().join("a100-80gb.json");
    std::fs::copy(path("models/devices/a100-80gb.json"), &device).unwrap();
    let model = path("models/llama-3.1-70b");
    let rows = ok_json(&[
        "fit",
        &model,
        "--weight-format",
        "dense-bf16",
        "--devices",
        dir.path().to_str().unwrap(),
        "--max-count",
        "4",
        "--context",
        "8192",
        "--engine",
        "vllm",
        "--json",
    ]);
    let row = &rows[0];
    let count = row["count"].as_u64().unwrap();
    assert_eq!(row["tensor_parallel"].as_u64(), Some(count), "{row}");
    assert_eq!(row["pipeline_parallel"], 1, "{row}");
    // `plan` at the engine's degree: the count places with the same placement, one fewer
    // does not.
    let at = |n: u64| {
        jointplan(&[
            "plan",
            &model,
            "--weight-format",
            "dense-bf16",
            "--device",
            device.to_str().unwrap(),
            "--count",
            &n.to_string(),
            "--context",
            "8192",
            "--engine",
            "vllm",
            "--engine-arg",
            &format!("tensor_parallel_size={n}"),
            "--json",
        ])
    };
    let placed = at(count);
    ok(&placed);
    let placed: Value = serde_json::from_slice(&placed.stdout).unwrap();
    assert_eq!(placed["plan"]["placement_id"], row["placement_id"]);
    assert_eq!(at(count - 1).status.code(), Some(1));
    // A latency target needs its serving point's tokens (timed by the file's links).
    let timed = jointplan(&[
        "fit",
        &model,
        "--devices",
        dir.path().to_str().unwrap(),
        "--max-count",
        "4",
        "--max-tpot-ms",
        "30",
    ]);
    assert_eq!(timed.status.code(), Some(2));
    assert!(
        text(&timed.stderr).contains("--input-tokens is missing"),
        "{}",
        text(&timed.stderr)
    );
}
