//! `plan --concurrency C --input-tokens I --output-tokens O`: the serving point's
//! `performance` in `--json` and in the text, nothing without it, and bad serving flags or
//! calibration files refused with the culprit named.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::process::{jointplan, ok, ok_json, s, text, SERVING_FIGURES};

fn folder(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("models")
        .join(name)
        .display()
        .to_string()
}

fn device(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("models/devices")
        .join(name)
        .display()
        .to_string()
}

fn plan_json(extra: &[&str]) -> Value {
    let model = folder("llama-3.2-1b");
    let mut args = vec!["plan", model.as_str(), "--layers", "2", "--json"];
    args.extend_from_slice(extra);
    ok_json(&args)
}

#[test]
fn a_serving_point_adds_performance_and_leaves_the_rest_unchanged() {
    let h100 = device("h100-sxm-80gb.json");
    let plain = plan_json(&["--device", &h100]);
    assert!(plain.get("performance").is_none());
    let served = plan_json(&[
        "--device",
        &h100,
        "--concurrency",
        "2",
        "--input-tokens",
        "256",
        "--output-tokens",
        "16",
    ]);
    let p = &served["performance"];
    for key in SERVING_FIGURES {
        let v = p[key].as_f64().unwrap_or_else(|| panic!("{key} in {p}"));
        assert!(v > 0.0 && v.is_finite(), "{key} = {v}");
    }
    for phase in ["prefill", "decode_step"] {
        for key in ["compute_seconds", "memory_seconds", "overhead_seconds"] {
            assert!(p[phase][key].as_f64().is_some(), "{phase}.{key}");
        }
    }
    assert!(!p["by_kind"].as_array().unwrap().is_empty());
    assert_eq!(p["serving_point"]["engine"], "vllm");
    // Everything else is the plan without a serving point (the interactive policy already
    // allows the 2 sequences asked for).
    let mut rest = served.clone();
    rest.as_object_mut().unwrap().remove("performance");
    assert_eq!(rest, plain);
}

#[test]
fn random_lengths_are_simulated_and_said_and_fixed_ones_change_nothing() {
    let h100 = device("h100-sxm-80gb.json");
    let point = [
        "--device",
        h100.as_str(),
        "--concurrency",
        "8",
        "--input-tokens",
        "1000",
        "--output-tokens",
        "100",
    ];
    let with = |lengths: Option<&str>| {
        let mut args = point.to_vec();
        if let Some(l) = lengths {
            args.extend_from_slice(&["--lengths", l]);
        }
        plan_json(&args)
    };
    let fixed = with(None);
    // `fixed` is the default: the same bytes, no `lengths` key.
    assert_eq!(with(Some("fixed")), fixed);
    assert!(fixed["performance"]["serving_point"]
        .get("lengths")
        .is_none());
    let random = with(Some("sglang:0"));
    let p = &random["performance"];
    assert_eq!(
        p["serving_point"]["lengths"],
        serde_json::json!({"kind": "sglang-random", "range_ratio": 0.0, "seed": 1})
    );
    let rules: Vec<&str> = p["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        rules
            .iter()
            .any(|r| r.starts_with("lengths = SGLang's random dataset")),
        "{rules:?}"
    );
    // Prompts of 500 tokens on average: one prompt alone is shorter than at 1000.
    let prefill = |v: &Value| v["performance"]["prefill"]["seconds"].as_f64().unwrap();
    assert!(prefill(&random) < prefill(&fixed));
    assert_ne!(
        p["ttft_seconds"], fixed["performance"]["ttft_seconds"],
        "the random lengths change the simulated run"
    );
    // The text says which lengths ran.
    let model = folder("llama-3.2-1b");
    let mut args = vec!["plan", model.as_str(), "--layers", "2"];
    args.extend_from_slice(&point);
    args.extend_from_slice(&["--lengths", "vllm:0.5"]);
    let result = jointplan(&args);
    ok(&result);
    let out = text(&result.stdout);
    assert!(
        out.contains("request lengths         vllm-random (range ratio 0.5): prompts 500..1500 tokens (mean 1000.0), outputs 50..150 (mean 100.0)"),
        "{out}"
    );
}

#[test]
fn the_text_summary_prints_the_predictions_and_the_roofline() {
    let model = folder("llama-3.2-1b");
    let result = jointplan(&[
        "plan",
        &model,
        "--layers",
        "2",
        "--device",
        &device("a100-80gb.json"),
        "--concurrency",
        "8",
        "--input-tokens",
        "128",
        "--output-tokens",
        "8",
        "--engine",
        "sglang",
    ]);
    ok(&result);
    let out = text(&result.stdout);
    for needle in [
        "performance (model: docs/performance-model.md; sglang engine profile on",
        "TTFT",
        "TPOT",
        "roofline by node kind",
        "policy sequence ceiling raised from 4 to 8",
        "node time = max(FLOPs",
    ] {
        assert!(out.contains(needle), "{needle} missing in\n{out}");
    }
}

#[test]
fn bad_serving_flags_name_the_flag() {
    let model = folder("llama-3.2-1b");
    // A valid serving point, the flags of the cases that need one.
    const POINT: &[&str] = &[
        "--concurrency",
        "2",
        "--input-tokens",
        "8",
        "--output-tokens",
        "8",
    ];
    // (after a valid serving point?, flags, what the error says)
    let cases: &[(bool, &[&str], &str)] = &[
        (false, &["--concurrency", "2"], "--input-tokens is missing"),
        (
            true,
            &["--engine", "x"],
            "--engine x: not one of vllm, vllm@0.6, sglang, trtllm, llama.cpp",
        ),
        (
            false,
            &["--calibration", "c.json"],
            "--calibration applies to a serving point",
        ),
        (
            false,
            &["--lengths", "sglang"],
            "--lengths applies to a serving point",
        ),
        (
            true,
            &["--lengths", "vllm:1"],
            "--lengths: vllm:1: vLLM's range ratio must be within [0, 1)",
        ),
        (
            true,
            &["--lengths", "uniform:0.5"],
            "--lengths: `uniform`: expected fixed, sglang[:R[:SEED]] or vllm[:R]",
        ),
        (
            false,
            &[
                "--concurrency",
                "0",
                "--input-tokens",
                "8",
                "--output-tokens",
                "8",
            ],
            "--concurrency: must be at least 1",
        ),
    ];
    for (point, flags, message) in cases {
        let mut args = vec!["plan", model.as_str(), "--layers", "2"];
        if *point {
            args.extend_from_slice(POINT);
        }
        args.extend_from_slice(flags);
        let result = jointplan(&args);
        assert_eq!(result.status.code(), Some(2), "{args:?}");
        let err = text(&result.stderr);
        assert!(err.contains(message), "{args:?}: {err}");
    }
}

#[test]
fn a_device_without_figures_and_a_bad_calibration_file_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let model = folder("llama-3.2-1b");
    let serving = [
        "--concurrency",
        "1",
        "--input-tokens",
        "8",
        "--output-tokens",
        "4",
    ];
    // A device file without `performance`.
    let bare: PathBuf = dir.path().join("bare.json");
    let mut device: Value =
        serde_json::from_str(&std::fs::read_to_string(device("a100-80gb.json")).unwrap()).unwrap();
    device.as_object_mut().unwrap().remove("performance");
    std::fs::write(&bare, device.to_string()).unwrap();
    let mut args = vec!["plan", model.as_str(), "--layers", "2", "--device"];
    let bare_arg = s(&bare);
    args.push(&bare_arg);
    args.extend_from_slice(&serving);
    let result = jointplan(&args);
    assert_eq!(result.status.code(), Some(2));
    assert!(
        text(&result.stderr).contains("has no `performance` figures"),
        "{}",
        text(&result.stderr)
    );
    // A calibration entry with a negative time.
    let calibration = dir.path().join("calibration.json");
    std::fs::write(
        &calibration,
        r#"{"entries": [{"operation": "dense_linear", "device": "d", "dtype": "bf16", "tokens": 1, "seconds": -2}]}"#,
    )
    .unwrap();
    let calibration_arg = s(&calibration);
    let mut args = vec![
        "plan",
        model.as_str(),
        "--layers",
        "2",
        "--calibration",
        &calibration_arg,
    ];
    args.extend_from_slice(&serving);
    let result = jointplan(&args);
    assert_eq!(result.status.code(), Some(2));
    let err = text(&result.stderr);
    assert!(
        err.contains("calibration.json: at .entries[0].seconds"),
        "{err}"
    );
    // An unknown key.
    std::fs::write(&calibration, r#"{"entries": [{"op": "x"}]}"#).unwrap();
    let result = jointplan(&args);
    assert_eq!(result.status.code(), Some(2));
    let err = text(&result.stderr);
    assert!(err.contains("entries[0].op"), "{err}");
}

/// `--engine vllm@0.6` times the serving point with vLLM V0's own profile: its spelling is
/// the point's engine, and the figures' rules say which scheduler ran (prompts first up to
/// a context of 32,768 tokens, decodes first above it, where V0 turns chunked prefill on);
/// the V1 versions keep vLLM's profile and its rules.
#[test]
fn vllm_v0_times_its_serving_point_with_its_own_scheduler() {
    let h100 = device("h100-sxm-80gb.json");
    let serving = [
        "--device",
        h100.as_str(),
        "--concurrency",
        "8",
        "--input-tokens",
        "256",
        "--output-tokens",
        "16",
    ];
    let rules = |p: &Value| -> Vec<String> {
        p["rules"]
            .as_array()
            .unwrap_or_else(|| panic!("rules in {p}"))
            .iter()
            .map(|r| r.as_str().unwrap().to_owned())
            .collect()
    };
    let with = |engine: &str, context: &str| {
        let mut args = serving.to_vec();
        args.extend_from_slice(&["--engine", engine, "--context", context]);
        plan_json(&args)["performance"].clone()
    };
    let v0 = with("vllm@0.6", "4096");
    assert_eq!(v0["serving_point"]["engine"], "vllm@0.6");
    assert!(
        rules(&v0).iter().any(|r| r.contains("prompts first")),
        "{:?}",
        rules(&v0)
    );
    let long = with("vllm@0.6", "40000");
    assert!(
        rules(&long)
            .iter()
            .any(|r| r.contains("with chunked prefill") && r.contains("decodes first")),
        "{:?}",
        rules(&long)
    );
    for v1 in ["vllm", "vllm@0.19"] {
        let p = with(v1, "4096");
        assert_eq!(p["serving_point"]["engine"], "vllm", "{v1}");
        assert!(
            !rules(&p).iter().any(|r| r.contains("vllm@0.6")),
            "{v1}: {:?}",
            rules(&p)
        );
    }
    // The V0 engine's host time per step and per sequence is larger than V1's, and its
    // prompts stall the decodes: the same point is slower per token.
    let v1 = with("vllm", "4096");
    assert!(
        v0["tpot_seconds"].as_f64().unwrap() > v1["tpot_seconds"].as_f64().unwrap(),
        "{v0} {v1}"
    );
}

/// vLLM V0's `enable_chunked_prefill` decides its scheduling whatever the context: given
/// `true` at a 4,096-token context the point is scheduled decodes first (the same figures
/// as at 40,000 tokens' rule, with the echoed flag), given `false` above 32K prompts first;
/// on a placement too. The serving point records the flag.
#[test]
fn vllm_v0_schedules_by_its_chunked_prefill_argument() {
    let h100 = device("h100-sxm-80gb.json");
    let rules = |p: &Value| -> Vec<String> {
        p["rules"]
            .as_array()
            .unwrap_or_else(|| panic!("rules in {p}"))
            .iter()
            .map(|r| r.as_str().unwrap().to_owned())
            .collect()
    };
    let decodes_first = |p: &Value| {
        rules(p)
            .iter()
            .any(|r| r.contains("with chunked prefill") && r.contains("decodes first"))
    };
    let prompts_first = |p: &Value| rules(p).iter().any(|r| r.contains("prompts first"));
    let with = |extra: &[&str]| {
        let mut args = vec![
            "--device",
            h100.as_str(),
            "--concurrency",
            "8",
            "--input-tokens",
            "256",
            "--output-tokens",
            "16",
            "--engine",
            "vllm@0.6",
        ];
        args.extend_from_slice(extra);
        plan_json(&args)["performance"].clone()
    };
    let default = with(&["--context", "4096"]);
    assert!(prompts_first(&default), "{:?}", rules(&default));
    assert_eq!(default["serving_point"]["chunked_prefill"], false);
    let chunked = with(&[
        "--context",
        "4096",
        "--engine-arg",
        "enable_chunked_prefill=true",
        "--engine-arg",
        "max_num_batched_tokens=512",
    ]);
    assert!(decodes_first(&chunked), "{:?}", rules(&chunked));
    assert_eq!(chunked["serving_point"]["chunked_prefill"], true);
    // Requests of varied lengths fall out of step: prompts first stalls the decodes at
    // every admission, decodes first does not, so chunked prefill is faster per token.
    let varied = |flag: &str| {
        with(&[
            "--context",
            "4096",
            "--engine-arg",
            flag,
            "--engine-arg",
            "max_num_batched_tokens=4096",
            "--lengths",
            "sglang",
        ])["tpot_seconds"]
            .as_f64()
            .unwrap()
    };
    assert!(
        varied("enable_chunked_prefill=true") < varied("enable_chunked_prefill=false"),
        "decodes first is not faster per token than prompts first"
    );
    let unchunked = with(&[
        "--context",
        "40000",
        "--engine-arg",
        "enable_chunked_prefill=false",
    ]);
    assert!(prompts_first(&unchunked), "{:?}", rules(&unchunked));
    // A placement over two devices follows the argument as well.
    let model = folder("llama-3.2-1b");
    let placed = |flag: &str| {
        let json = ok_json(&[
            "plan",
            model.as_str(),
            "--device",
            h100.as_str(),
            "--count",
            "2",
            "--context",
            "4096",
            "--engine",
            "vllm@0.6",
            "--engine-arg",
            "tensor_parallel_size=2",
            "--engine-arg",
            flag,
            "--engine-arg",
            "max_num_batched_tokens=4096",
            "--concurrency",
            "8",
            "--input-tokens",
            "256",
            "--output-tokens",
            "16",
            "--json",
        ]);
        json["performance"].clone()
    };
    let on = placed("enable_chunked_prefill=true");
    let off = placed("enable_chunked_prefill=false");
    assert!(decodes_first(&on), "{on}");
    assert!(prompts_first(&off), "{off}");
}
