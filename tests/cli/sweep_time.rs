//! A sweep's time columns against single `plan` runs at the same point (a differential
//! test through the binary): one device (`plan --concurrency C --input-tokens I
//! --output-tokens O`) and a device set with pinned degrees (`plan --devices SET.json
//! --tensor-parallel N ...`); a point whose placement fails is an error row, not a stop.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::process::{jointplan, ok, ok_json, s, text, SERVING_FIGURES};

fn path(relative: &str) -> String {
    s(&Path::new(env!("CARGO_MANIFEST_DIR")).join(relative))
}

/// The rows of the sweep written to `out` (a tempdir's `out`, as `sweep` makes it).
fn rows(out: &Path) -> Vec<Value> {
    crate::sweep_loop::rows(out.parent().unwrap())
}

fn sweep(args: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut all = vec!["sweep"];
    all.extend_from_slice(args);
    let out_text = s(&out);
    all.extend_from_slice(&["-o", &out_text, "--jobs", "1"]);
    let result = jointplan(&all);
    ok(&result);
    (dir, out)
}

fn plan_json(args: &[&str]) -> Value {
    let mut all = vec!["plan"];
    all.extend_from_slice(args);
    all.push("--json");
    ok_json(&all)
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn single_device_time_columns_are_plans_figures() {
    let model = path("models/llama-3.1-8b");
    let h100 = path("models/devices/h100-sxm-80gb.json");
    // Concurrency 8 is above the interactive policy's 4 sequences: the ceiling is raised
    // to it, as `plan --concurrency` raises it.
    let fixed = [
        "--layers",
        "2",
        "--device",
        &h100,
        "--context",
        "2048",
        "--input-tokens",
        "256",
        "--output-tokens",
        "16",
    ];
    let (_dir, out) = sweep(&[&[model.as_str(), "--concurrency", "1,8"], &fixed[..]].concat());
    let rows = rows(&out);
    assert_eq!(rows.len(), 2);
    for row in &rows {
        let c = row["point"]["concurrency"].to_string();
        let plan = plan_json(&[&[model.as_str(), "--concurrency", &c], &fixed[..]].concat());
        let p = &plan["performance"];
        let t = &row["time"];
        for key in SERVING_FIGURES {
            assert_eq!(f(&t[key]), f(&p[key]), "c={c} {key}");
        }
        assert_eq!(t["rule"], "serving-simulation");
        assert_eq!(t["devices"], 1);
        assert_eq!(row["plan_id"], plan["plan_id"], "c={c}");
    }
    // The CSV carries the same figures, and the Pareto plot is drawn.
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let at = |name: &str| header.iter().position(|h| *h == name).unwrap();
    for (line, row) in csv.lines().skip(1).zip(&rows) {
        let fields: Vec<&str> = line.split(',').collect();
        let tpot: f64 = fields[at("tpot_seconds")].parse().unwrap();
        assert_eq!(tpot, f(&row["time"]["tpot_seconds"]));
        assert_eq!(fields[at("time_rule")], "serving-simulation");
    }
    assert!(out.join("pareto.svg").is_file());
}

#[test]
fn device_set_rows_are_plans_placements_and_a_failing_degree_is_an_error_row() {
    let model = path("models/llama-3.1-8b");
    let set = path("models/devices/sets/a100-80gb-x2.json");
    let fixed = [
        "--layers",
        "2",
        "--devices",
        &set,
        "--context",
        "4096",
        "--concurrency",
        "2",
        "--input-tokens",
        "128",
        "--output-tokens",
        "16",
    ];
    let (_dir, out) =
        sweep(&[&[model.as_str(), "--tensor-parallel", "1,3,2"], &fixed[..]].concat());
    let rows = rows(&out);
    let status: Vec<&str> = rows.iter().map(|r| r["status"].as_str().unwrap()).collect();
    assert_eq!(status.len(), 3);
    assert_eq!(status[0], "fits");
    assert_ne!(status[1], "fits", "tp3 on two devices: {}", rows[1]);
    assert!(rows[1]["reason"].as_str().is_some_and(|r| !r.is_empty()));
    assert_eq!(
        status[2], "fits",
        "the sweep goes on after the failed point"
    );
    for row in [&rows[0], &rows[2]] {
        let tp = row["point"]["tensor_parallel"].to_string();
        let placed = plan_json(&[&[model.as_str(), "--tensor-parallel", &tp], &fixed[..]].concat());
        let p = &placed["performance"];
        let t = &row["time"];
        assert_eq!(f(&t["tpot_seconds"]), f(&p["tpot_seconds"]), "tp{tp}");
        assert_eq!(f(&t["ttft_seconds"]), f(&p["ttft_seconds"]), "tp{tp}");
        assert_eq!(
            f(&t["output_tokens_per_second"]),
            f(&p["output_tokens_per_second"])
        );
        assert_eq!(
            f(&t["output_tokens_per_second_per_device"]),
            f(&p["output_tokens_per_second_per_device"])
        );
        assert_eq!(
            f(&t["output_tokens_per_second_per_user"]),
            f(&p["output_tokens_per_second_per_user"])
        );
        assert_eq!(t["rule"], "placement-timing");
        let placement = &row["placement"];
        assert_eq!(placement["placement_id"], placed["plan"]["placement_id"]);
        assert_eq!(placement["tensor_parallel"].to_string(), tp);
        assert_eq!(
            placement["devices_used"],
            placed["plan"]["payload"]["devices_used"]
        );
    }
    let svg = std::fs::read_to_string(out.join("pareto.svg")).unwrap();
    assert!(svg.contains("Pareto"), "{svg}");
    assert!(
        !out.join("regions.svg").exists(),
        "device sets draw no region map"
    );
}

#[test]
fn bad_sweep_knobs_name_the_grid_field() {
    let model = path("models/llama-3.1-8b");
    let cases: [(&[&str], &str); 3] = [
        (&["--concurrency", "4"], "grid.input_tokens"),
        (&["--tensor-parallel", "2"], "grid.tensor_parallel"),
        (
            &[
                "--concurrency",
                "0",
                "--input-tokens",
                "1",
                "--output-tokens",
                "1",
            ],
            "grid.concurrency[0]",
        ),
    ];
    for (args, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        let out = s(&dir.path().join("out"));
        let mut all = vec!["sweep", &model, "-o", &out];
        all.extend_from_slice(args);
        let result = jointplan(&all);
        assert_eq!(result.status.code(), Some(2), "{args:?}");
        let err = text(&result.stderr);
        assert!(err.contains(expected), "{args:?}: {err}");
    }
}
