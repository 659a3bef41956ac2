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

/// `plan models/deepseek-v3` at four layers and eight experts in bf16 on an H200, `--json`.
fn deepseek(extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "plan",
        "models/deepseek-v3",
        "--layers",
        "4",
        "--experts",
        "8",
        "--weight-format",
        "dense-bf16",
        "--device",
        "models/devices/h200-141gb.json",
        "--json",
    ];
    args.extend_from_slice(extra);
    jointplan(&args)
}

#[test]
fn vllm_speculative_config_builds_the_mtp_layer_and_echoes_the_flag() {
    let config = r#"speculative_config={"method":"deepseek_mtp","num_speculative_tokens":1}"#;
    let plain = deepseek(&["--engine", "vllm"]);
    ok(&plain);
    let with = deepseek(&["--engine", "vllm", "--engine-arg", config]);
    ok(&with);
    let flag = deepseek(&["--engine", "vllm", "--speculative", "mtp"]);
    ok(&flag);
    let plain: Value = serde_json::from_slice(&plain.stdout).unwrap();
    let with: Value = serde_json::from_slice(&with.stdout).unwrap();
    let flag: Value = serde_json::from_slice(&flag.stdout).unwrap();
    // The engine argument synthesizes what --speculative mtp does: the same weights and KV.
    let weights = |v: &Value| {
        v["engine"]["budget"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "weights")
            .unwrap()["bytes"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(weights(&with), weights(&flag));
    // 8 experts: the MTP module's own parameters are 686,322,688 (docs/synth.md's count
    // with 8 routed experts), 2 bytes each.
    assert_eq!(weights(&with) - weights(&plain), 1_372_645_376);
    let flags: Vec<&str> = with["engine"]["flags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(
        flags.contains(
            &r#"--speculative-config '{"method":"deepseek_mtp","num_speculative_tokens":1}'"#
        ),
        "{flags:?}"
    );
    // Fewer KV tokens: one more latent layer of (512 + 64) x 2 bytes per token.
    assert!(
        with["engine"]["kv_cache_tokens"].as_u64().unwrap()
            < plain["engine"]["kv_cache_tokens"].as_u64().unwrap()
    );
    // Refused: a contradiction, a model without MTP layers, another method.
    let out = deepseek(&[
        "--engine",
        "vllm",
        "--engine-arg",
        config,
        "--speculative",
        "none",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--speculative"),
        "{}",
        text(&out.stderr)
    );
    let out = jointplan(&["plan", MODEL, "--layers", "2", "--speculative", "mtp"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("num_nextn_predict_layers")
            || text(&out.stderr).contains("deepseek_v3"),
        "{}",
        text(&out.stderr)
    );
    // An unmodelled method is refused listing the modelled ones; EAGLE without its head's
    // configuration names the missing key.
    for (config, says) in [
        (
            r#"speculative_config={"method":"ngram","num_speculative_tokens":1}"#,
            "deepseek_mtp",
        ),
        (
            r#"speculative_config={"method":"eagle","num_speculative_tokens":1}"#,
            "speculative_config.model is missing",
        ),
    ] {
        let out = deepseek(&["--engine", "vllm", "--engine-arg", config]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        assert!(text(&out.stderr).contains(says), "{}", text(&out.stderr));
    }
}
