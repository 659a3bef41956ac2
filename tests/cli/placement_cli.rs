//! `jointplan plan MODEL --devices SET.json` and `--device D --count N`: the placement is
//! printed, hashed and checked; `-o` writes it; bad flags exit 2 naming the flag; a model
//! that fits nowhere exits 1 with why.

use std::path::Path;

use serde_json::Value;

use crate::process::{jointplan, ok, ok_json, s, text, SERVING_FIGURES};

fn path(relative: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(relative)
        .display()
        .to_string()
}

#[test]
fn a_set_file_places_and_writes_the_placement() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("placement.json");
    let result = jointplan(&[
        "plan",
        &path("models/llama-3.1-8b"),
        "--layers",
        "4",
        "--devices",
        &path("models/devices/sets/a100-80gb-x2.json"),
        "--pipeline-parallel",
        "2",
        "-o",
        &s(&out),
    ]);
    ok(&result);
    let stdout = text(&result.stdout);
    assert!(
        stdout.starts_with("placement placement/sha256/"),
        "{stdout}"
    );
    assert!(stdout.contains("checker: no violations"), "{stdout}");
    assert!(
        stdout.contains("stage 1  layers 2-3 (2)  gpu.1"),
        "{stdout}"
    );
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let id = written["placement_id"].as_str().unwrap();
    assert!(stdout.contains(id), "{stdout}");
    // The JSON summary carries the same placement and its certificate.
    let json = jointplan(&[
        "plan",
        &path("models/llama-3.1-8b"),
        "--layers",
        "4",
        "--devices",
        &path("models/devices/sets/a100-80gb-x2.json"),
        "--pipeline-parallel",
        "2",
        "--json",
    ]);
    ok(&json);
    let summary: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(summary["plan"]["placement_id"], id);
    assert_eq!(summary["certificate"]["method"], "exhaustive");
    assert_eq!(summary["violations"].as_array().unwrap().len(), 0);
}

#[test]
fn the_shorthand_places_on_identical_devices() {
    let result = jointplan(&[
        "plan",
        &path("models/llama-3.1-8b"),
        "--layers",
        "2",
        "--device",
        &path("models/devices/a100-80gb.json"),
        "--count",
        "4",
        "--tensor-parallel",
        "4",
    ]);
    ok(&result);
    let stdout = text(&result.stdout);
    assert!(
        stdout.contains("4 device(s) used, tensor parallel 4"),
        "{stdout}"
    );
}

#[test]
fn policy_fields_serving_point_and_why_not_carry_into_a_placement() {
    let result = jointplan(&[
        "plan",
        &path("models/llama-3.1-8b"),
        "--layers",
        "2",
        "--devices",
        &path("models/devices/sets/a100-80gb-x2.json"),
        "--policy",
        "server",
        "--context",
        "4096",
        "--sequences",
        "2",
        "--placement-objective",
        "min-tpot",
        "--concurrency",
        "2",
        "--input-tokens",
        "128",
        "--output-tokens",
        "16",
        "--why-not",
        "pp=2",
    ]);
    ok(&result);
    let stdout = text(&result.stdout);
    for expected in [
        // KV for ceil(2 x (128 + 16) / 4096) = 1 sequence of the context; the ceiling of 2
        // bounds the serving simulation.
        "KV cache for 1 sequence(s) x 4096 tokens of context",
        "at most 2 sequences",
        "objective min-tpot",
        "simulated (",
        "objective's linear estimate",
        "TPOT (decode step)",
        "TTFT (one prompt)",
        "rule: tensor parallel: 2 all-reduces per layer",
        "why not pp=2",
        "alternative  tensor parallel 1, pipeline 2",
    ] {
        assert!(stdout.contains(expected), "{expected}: {stdout}");
    }
}

#[test]
fn bad_placement_flags_exit_2_naming_the_flag() {
    let model = path("models/llama-3.1-8b");
    let cases: [(&[&str], &str); 11] = [
        (&["--host-offload"], "--host-offload applies to a placement"),
        (
            &[
                "--devices",
                &path("models/devices/sets/a100-80gb-x2.json"),
                "--placement-objective",
                "min-tpot",
            ],
            "--placement-objective min-tpot: a time objective needs a serving point",
        ),
        (
            &[
                "--devices",
                &path("models/devices/sets/a100-80gb-x2.json"),
                "--why-not",
                "tp=0",
            ],
            "--why-not tp=0",
        ),
        (&["--count", "2"], "--count N needs --device D"),
        (
            &[
                "--device",
                &path("models/devices/a100-80gb.json"),
                "--count",
                "2",
                "--tensor-parallel",
                "3",
            ],
            "--tensor-parallel 3",
        ),
        (
            &[
                "--devices",
                &path("models/devices/sets/a100-80gb-x2.json"),
                "--placement-objective",
                "cheapest",
            ],
            "--placement-objective cheapest",
        ),
        (
            &["--expert-split", "tensor"],
            "--expert-split applies to a placement",
        ),
        (
            &[
                "--devices",
                &path("models/devices/sets/a100-80gb-x2.json"),
                "--expert-split",
                "sideways",
            ],
            "--expert-split sideways: expected `tensor`",
        ),
        (
            &[
                "--devices",
                &path("models/devices/sets/a100-80gb-x2.json"),
                "--expert-split",
                "expert",
            ],
            "--expert-split expert: the model has no routed experts",
        ),
        (
            &[
                "--devices",
                &path("models/devices/sets/a100-80gb-x2.json"),
                "--kv-offload-grain",
                "sequence",
            ],
            "--kv-offload-grain sequence needs --host-offload",
        ),
        (
            &[
                "--devices",
                &path("models/devices/sets/a100-80gb-x2.json"),
                "--host-offload",
                "--kv-offload-grain",
                "token",
            ],
            "--kv-offload-grain token: expected `layer`",
        ),
    ];
    for (flags, expected) in cases {
        let mut args = vec!["plan", model.as_str(), "--layers", "2"];
        args.extend_from_slice(flags);
        let result = jointplan(&args);
        assert_eq!(result.status.code(), Some(2), "{flags:?}");
        let stderr = text(&result.stderr);
        assert!(stderr.contains(expected), "{flags:?}: {stderr}");
    }
}

#[test]
fn a_model_that_fits_nowhere_exits_1_with_why() {
    // 8 layers of llama-3.1-70b in bf16 with one sequence of its full 131,072-token context
    // do not fit one RTX 4090 (16 layers do not fit it at any context).
    let at_layers = |layers: &str| {
        jointplan(&[
            "plan",
            &path("models/llama-3.1-70b"),
            "--weight-format",
            "dense-bf16",
            "--layers",
            layers,
            "--context",
            "131072",
            "--device",
            &path("models/devices/rtx-4090-24gb.json"),
            "--count",
            "1",
        ])
    };
    // The levers across kinds: more devices, host offload (no experts: host KV or streamed
    // layers), a shorter context.
    for (layers, levers) in [
        (
            "8",
            &["add 1 device(s)", "the KV cache of", "a context of at most"][..],
        ),
        ("16", &["add 2 device(s)", "streamed"][..]),
    ] {
        let result = at_layers(layers);
        assert_eq!(result.status.code(), Some(1));
        let stderr = text(&result.stderr);
        assert!(stderr.contains("no placement fits"), "{stderr}");
        assert!(stderr.contains("bytes of weights"), "{stderr}");
        for lever in levers {
            assert!(stderr.contains(lever), "{lever}: {stderr}");
        }
    }
    // Where the KV cache is small the weights decide: 16 layers in bf16 (27 GB) do not fit
    // one RTX 4090; the smaller format the lever names does.
    let model = path("models/llama-3.1-70b");
    let device = path("models/devices/rtx-4090-24gb.json");
    let at = |format: &str| {
        jointplan(&[
            "plan",
            &model,
            "--weight-format",
            format,
            "--layers",
            "16",
            "--sequences",
            "1",
            "--context",
            "4096",
            "--device",
            &device,
            "--count",
            "1",
        ])
    };
    let result = at("dense-bf16");
    assert_eq!(result.status.code(), Some(1));
    let stderr = text(&result.stderr);
    let format = stderr
        .split("--weight-format ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no format lever: {stderr}"));
    ok(&at(format));
}

#[test]
fn explain_asks_a_stored_placement_why_not() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("placement.json");
    let model = path("models/llama-3.1-8b");
    let set = path("models/devices/sets/a100-80gb-x2.json");
    let common = [
        "plan",
        model.as_str(),
        "--layers",
        "4",
        "--devices",
        set.as_str(),
        "--placement-objective",
        "most-kv-tokens",
    ];
    let mut args = common.to_vec();
    args.extend(["--why-not", "pp=1", "-o", out.to_str().unwrap()]);
    let planned = jointplan(&args);
    ok(&planned);
    let at_plan = text(&planned.stdout);
    let section = &at_plan[at_plan.find("\nwhy not pp=1").unwrap()..];
    let section = &section[..section[1..].find("\n\n").map_or(section.len(), |e| e + 1)];
    let asked = jointplan(&["explain", &s(&out), "--why-not", "pp=1"]);
    ok(&asked);
    let answer = text(&asked.stdout);
    assert!(answer.contains(section.trim()), "{answer}\n---\n{section}");
    // JSON: the comparison itself.
    let json = jointplan(&["explain", &s(&out), "--why-not", "pp=1", "--json"]);
    ok(&json);
    let value: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(value["alternative"], "pp=1");
    // A placement file without a question, or with a bad one, exits 2 naming it.
    let bare = jointplan(&["explain", &s(&out)]);
    assert_eq!(bare.status.code(), Some(2));
    assert!(
        text(&bare.stderr).contains("--why-not"),
        "{}",
        text(&bare.stderr)
    );
    let bad = jointplan(&["explain", &s(&out), "--why-not", "tp=zero"]);
    assert_eq!(bad.status.code(), Some(2));
    // An edited file is refused.
    let mut value: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    value["payload"]["sequences"] = Value::from(2);
    std::fs::write(&out, serde_json::to_string(&value).unwrap()).unwrap();
    let edited = jointplan(&["explain", &s(&out), "--why-not", "pp=1"]);
    assert_eq!(edited.status.code(), Some(2));
    assert!(
        text(&edited.stderr).contains("checker"),
        "{}",
        text(&edited.stderr)
    );
}

#[test]
fn fit_by_price_needs_a_known_order() {
    let result = jointplan(&[
        "fit",
        &path("models/llama-3.1-8b"),
        "--devices",
        &path("models/devices"),
        "--max-count",
        "1",
        "--by",
        "cheapest",
    ]);
    assert_eq!(result.status.code(), Some(2));
    assert!(
        text(&result.stderr).contains("--by cheapest"),
        "{}",
        text(&result.stderr)
    );
}

/// `plan --json` of llama-3.2-1b (two layers) on one H100 at a serving point, `extra` added.
fn served_json(extra: &[&str]) -> Value {
    let model = path("models/llama-3.2-1b");
    let device = path("models/devices/h100-sxm-80gb.json");
    let mut args = vec![
        "plan",
        model.as_str(),
        "--layers",
        "2",
        "--device",
        device.as_str(),
        "--sequences",
        "8",
        "--concurrency",
        "8",
        "--input-tokens",
        "700",
        "--output-tokens",
        "24",
        "--json",
    ];
    args.extend_from_slice(extra);
    ok_json(&args)
}

#[test]
fn a_one_device_placement_simulates_as_the_single_device_plan() {
    // Two code paths: the single-device plan prices each step by the performance model's
    // step time; a placement of one device (tensor parallel 1, one stage) by the placement's
    // step pricer over its stages and ranks. The same scheduler runs both, so the figures
    // agree up to the order of floating-point sums.
    let single = served_json(&[]);
    let placed = served_json(&["--count", "1"]);
    let (a, b) = (&single["performance"], &placed["performance"]);
    assert_eq!(placed["plan"]["payload"]["tensor_parallel"], 1);
    assert_eq!(placed["plan"]["payload"]["pipeline_parallel"], 1);
    assert_eq!(a["simulated_steps"], b["simulated_steps"]);
    for key in SERVING_FIGURES {
        let (x, y) = (a[key].as_f64().unwrap(), b[key].as_f64().unwrap());
        assert!(
            (x - y).abs() <= 1e-9 * x.abs().max(y.abs()),
            "{key}: single device {x}, placement {y}"
        );
    }
    // Each figure says which rule it follows: the simulation's, and the objective's linear
    // estimate under its own name.
    let rules = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap().to_owned())
            .collect()
    };
    assert!(rules(&b["rules"]).iter().any(|r| r.contains("closed loop")));
    let linear = rules(&b["linear_estimate"]["rules"]);
    assert!(!linear.is_empty());
    assert!(linear.iter().all(|r| r.contains("linear estimate")));
    for phase in ["tpot", "ttft"] {
        assert!(b["linear_estimate"][phase]["seconds"].as_f64().is_some());
    }
}
