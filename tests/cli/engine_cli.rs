//! `jointplan plan MODEL_FOLDER --engine ENGINE --engine-arg KEY=VALUE`: the engine's
//! accounting beside the plan (docs/engines.md), and the errors of bad engine flags.

use serde_json::Value;

use crate::process::{jointplan, ok, text};

const MODEL: &str = "models/llama-3.2-1b";

fn plan_json(extra: &[&str]) -> Value {
    let mut args = vec!["plan", MODEL, "--layers", "2", "--json"];
    args.extend_from_slice(extra);
    let out = jointplan(&args);
    ok(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_json_summary_gains_the_engine_only_when_asked() {
    let plain = plan_json(&[]);
    assert!(plain.get("engine").is_none());
    let with = plan_json(&[
        "--engine",
        "vllm",
        "--engine-arg",
        "gpu_memory_utilization=0.8",
        "--engine-arg",
        "max-model-len=4096",
    ]);
    let engine = &with["engine"];
    assert_eq!(engine["name"], "vllm");
    assert_eq!(engine["version"], "0.19");
    assert_eq!(engine["args"]["gpu_memory_utilization"], "0.8");
    assert_eq!(engine["context_tokens"], 4096);
    let tokens = engine["kv_cache_tokens"].as_u64().unwrap();
    let lines: Vec<&str> = engine["log"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["line"].as_str().unwrap())
        .collect();
    assert!(
        lines.iter().any(|l| l.starts_with("GPU KV cache size: ")
            && l.replace(',', "").contains(&tokens.to_string())),
        "{lines:?}"
    );
    assert!(lines
        .iter()
        .any(|l| l.starts_with("Maximum concurrency for 4,096 tokens per request: ")));
    assert!(engine["log"]
        .as_array()
        .unwrap()
        .iter()
        .all(|l| !l["rule"].as_str().unwrap().is_empty()));
    let flags: Vec<&str> = engine["flags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(flags.contains(&"--max-model-len 4096"), "{flags:?}");
    assert!(flags.contains(&"--gpu-memory-utilization 0.8"), "{flags:?}");
    // The plan is held to the engine's budget (docs/synth.md, "Policy presets"): vLLM's
    // gpu_memory_utilization share of the total, less its non-torch memory.
    let budget = &with["engine_budget"];
    let term = |name: &str| {
        engine["budget"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap()["bytes"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(budget["capacity_bytes"].as_u64(), Some(term("requested")));
    assert_eq!(
        budget["reserve_bytes"].as_u64(),
        Some(term("non_torch") + term("cuda_graph"))
    );
    assert_eq!(
        with["memory"]["usable_capacity_bytes"].as_u64(),
        Some(term("requested") - term("non_torch") - term("cuda_graph"))
    );
    // The summary keeps its keys; the same program is planned.
    let mut rest = with.clone();
    let rest = rest.as_object_mut().unwrap();
    rest.remove("engine");
    rest.remove("engine_budget");
    let keys = |v: &serde_json::Map<String, Value>| v.keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(rest), keys(plain.as_object().unwrap()));
    assert_eq!(
        with["memory"]["report"]["weights_bytes"],
        plain["memory"]["report"]["weights_bytes"]
    );
}

#[test]
fn the_text_summary_prints_each_log_line_with_its_rule() {
    let out = jointplan(&[
        "plan",
        MODEL,
        "--layers",
        "2",
        "--engine",
        "llama.cpp",
        "--engine-arg",
        "ctx_size=1000",
    ]);
    ok(&out);
    let stdout = text(&out.stdout);
    assert!(stdout.contains("engine llama.cpp b5000"), "{stdout}");
    assert!(stdout.contains("log: llama_kv_cache_unified: CUDA0 KV buffer size = "));
    assert!(stdout.contains("rule: "));
    assert!(stdout.contains("flags: -c 1024 "), "{stdout}");
}

#[test]
fn bad_engine_flags_are_refused_naming_the_culprit() {
    let cases: [(&[&str], &str); 4] = [
        (
            &[
                "--engine",
                "vllm",
                "--engine-arg",
                "mem_fraction_static=0.8",
            ],
            "known: gpu_memory_utilization",
        ),
        (
            &[
                "--engine",
                "vllm",
                "--engine-arg",
                "gpu_memory_utilization=2",
            ],
            "gpu_memory_utilization=2",
        ),
        (&["--engine", "tgi"], "vllm, sglang, trtllm, llama.cpp"),
        (
            &["--engine", "sglang", "--engine-arg", "page_size"],
            "KEY=VALUE",
        ),
    ];
    for (flags, needle) in cases {
        let mut args = vec!["plan", MODEL, "--layers", "2"];
        args.extend_from_slice(flags);
        let out = jointplan(&args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{flags:?}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).contains(needle),
            "{flags:?}: {}",
            text(&out.stderr)
        );
    }
    let out = jointplan(&["plan", MODEL, "--engine-arg", "block_size=16"]);
    assert_eq!(out.status.code(), Some(2), "--engine-arg needs --engine");
    let out = jointplan(&["plan", "models/tiny/request.json", "--engine", "vllm"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--engine applies to a model folder"));
}
