//! Predicts the multi-GPU serving measurements listed in
//! `docs/data/perf-validation-multi-gpu.json` (the measured figures and their sources are
//! the records of `docs/data/serving-measurements.json`, by id) with the placement's time
//! model (docs/placement.md, "Time across devices"): each point placed on its device set
//! at the tensor-parallel degree the source ran, one pipeline stage, at its serving point;
//! and prints the table of measured against predicted TTFT and TPOT:
//!
//! ```sh
//! cargo run --release --example placement_validation             # print the table
//! cargo run --release --example placement_validation -- --write  # rewrite it in the docs
//! ```
//!
//! `tests/planner/multi_gpu_validation.rs` recomputes the table and fails when the one
//! committed in `docs/performance-model.md` (between the `placement-validation` markers)
//! is stale. Nothing is fitted: every constant is the performance model's or a cited one.

use std::fmt::Write as _;
use std::path::PathBuf;

use jointplan::placement::{self, timing::Serving, DeviceSet, Objective, Settings};
use jointplan::synth::ModelSource;
use jointplan::BuildOptions;
use serde_json::Value;

const POINTS: &str = "docs/data/perf-validation-multi-gpu.json";
const DATA: &str = "docs/data/serving-measurements.json";
/// The docs holding the table.
pub const DOCS: &str = "docs/performance-model.md";
/// The table's first marker.
pub const BEGIN: &str = "<!-- placement-validation:begin -->";
/// The table's last marker.
pub const END: &str = "<!-- placement-validation:end -->";
/// The engines' default scheduled-token budget the points are planned with.
const BUDGET: u64 = 8192;

/// One predicted point.
pub struct Row {
    id: String,
    engine: String,
    gpus: String,
    model: String,
    concurrency: u64,
    input: u64,
    output: u64,
    placement: String,
    ttft: (Option<f64>, f64),
    tpot: (f64, f64),
}

fn number(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

fn text<'a>(v: &'a Value, key: &str) -> Result<&'a str, String> {
    v.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("no `{key}`"))
}

fn predict(point: &Value, record: &Value) -> Result<Row, String> {
    let id = text(point, "id")?.to_owned();
    let measured = record.get("measured").ok_or("no `measured`")?;
    let tpot_measured = number(measured, "tpot_ms_mean")
        .or_else(|| number(measured, "itl_ms_mean"))
        .ok_or("no mean TPOT or ITL")?;
    let ttft_measured = number(measured, "ttft_ms_mean");
    let concurrency = number(record, "concurrency").ok_or("no concurrency")? as u64;
    let input = number(record, "input_tokens")
        .ok_or("no input tokens")?
        .round() as u64;
    let output = number(record, "output_tokens")
        .ok_or("no output tokens")?
        .round() as u64;
    let engine = text(record, "engine")?
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_owned();
    let degree = number(point, "tensor_parallel").ok_or("no tensor_parallel")? as u32;
    let mut source = ModelSource::folder(PathBuf::from(text(point, "model")?));
    source.weight_format = Some(text(point, "weight_format")?.to_owned());
    let set =
        DeviceSet::read(&PathBuf::from(text(point, "devices")?)).map_err(|e| e.to_string())?;
    // The policy the engine runs: every client's request admitted, a context of its
    // prompt and output, the engines' default budget.
    let mut policy = source.policy_preset().map_err(|e| e.to_string())?;
    policy.maximum_active_sequences = u32::try_from(concurrency).map_err(|e| e.to_string())?;
    policy.maximum_context_tokens = Some((input + output).div_ceil(256) * 256);
    policy.maximum_scheduled_tokens = BUDGET;
    let settings = Settings {
        tensor_parallel: Some(degree),
        pipeline_parallel: Some(1),
        host_offload: false,
        host_memory: None,
        objective: Objective::MinTpot,
        serving: Some(Serving {
            concurrency,
            input_tokens: input,
            output_tokens: output,
            engine: engine.clone(),
        }),
        policy: Some(policy),
        why_not: None,
    };
    let placed = placement::place(
        &source,
        &set,
        &settings,
        &BuildOptions::default(),
        placement::DEFAULT_ENUMERATION_BUDGET,
    )
    .map_err(|e| e.to_string())?;
    let perf = placed.performance.ok_or("no performance")?;
    let p = &placed.plan.payload;
    Ok(Row {
        id,
        engine,
        gpus: format!("{} x {}", set.device_count(), set.kinds[0].description.name),
        model: text(record, "model")?.to_owned(),
        concurrency,
        input,
        output,
        placement: format!("tp {} pp {}", p.tensor_parallel, p.pipeline_parallel),
        ttft: (ttft_measured, perf.ttft.seconds * 1e3),
        tpot: (tpot_measured, perf.tpot.seconds * 1e3),
    })
}

/// Every point predicted (or the reason it is not), in the points file's order.
pub fn rows() -> Vec<Result<Row, (String, String)>> {
    let points: Value = serde_json::from_str(&std::fs::read_to_string(POINTS).unwrap()).unwrap();
    let data: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(DATA).unwrap()).unwrap();
    let mut rows = Vec::new();
    for point in points["points"].as_array().into_iter().flatten() {
        let id = point["id"].as_str().unwrap_or("").to_owned();
        let row = match data.iter().find(|r| r["id"].as_str() == Some(id.as_str())) {
            Some(record) => predict(point, record).map_err(|e| (id, e)),
            None => Err((id, format!("not a record of {DATA}"))),
        };
        rows.push(row);
    }
    rows
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn error(measured: f64, predicted: f64) -> f64 {
    (predicted - measured) / measured
}

/// The table and its median absolute TPOT error.
pub fn table() -> (String, f64) {
    let rows = rows();
    let mut out = String::new();
    out.push_str("Generated by `cargo run --release --example placement_validation -- --write` from the points of `docs/data/perf-validation-multi-gpu.json` (measurements and sources: `docs/data/serving-measurements.json`, by id); the test fails when this table is stale. Each point is placed at the source's tensor-parallel degree in one stage and timed by the placement's time model (docs/placement.md, \"Time across devices\"): TPOT is the decode step plus the other requests' prompts' share, TTFT one prompt alone. Nothing is fitted. Times in ms; error = (predicted - measured) / measured.\n\n");
    out.push_str("| id | engine | GPUs | model | placement | C | I/O | TTFT measured | TTFT predicted | error | TPOT measured | TPOT predicted | error |\n|---|---|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|\n");
    let mut tpot_errors = Vec::new();
    let mut ttft_errors = Vec::new();
    for row in &rows {
        match row {
            Ok(r) => {
                let tpot_error = error(r.tpot.0, r.tpot.1);
                tpot_errors.push(tpot_error.abs());
                let (ttft_measured, ttft_error) = match r.ttft.0 {
                    Some(m) => {
                        let e = error(m, r.ttft.1);
                        ttft_errors.push(e.abs());
                        (format!("{m:.1}"), format!("{:+.0}%", e * 100.0))
                    }
                    None => ("-".to_owned(), "-".to_owned()),
                };
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {} | {}/{} | {} | {:.1} | {} | {:.2} | {:.2} | {:+.0}% |",
                    r.id,
                    r.engine,
                    r.gpus,
                    r.model,
                    r.placement,
                    r.concurrency,
                    r.input,
                    r.output,
                    ttft_measured,
                    r.ttft.1,
                    ttft_error,
                    r.tpot.0,
                    r.tpot.1,
                    tpot_error * 100.0
                );
            }
            Err((id, reason)) => {
                let _ = writeln!(out, "| {id} | not predicted: {reason} |||||||||||| ");
            }
        }
    }
    let tpot_median = median(tpot_errors.clone());
    let _ = writeln!(
        out,
        "\n{} points predicted; median absolute TPOT error {:.0}% (worst {:.0}%), median absolute TTFT error {:.0}%.",
        tpot_errors.len(),
        tpot_median * 100.0,
        tpot_errors.iter().copied().fold(0.0, f64::max) * 100.0,
        median(ttft_errors) * 100.0
    );
    (out, tpot_median)
}

/// `docs` with the table between the markers.
pub fn with_table(docs: &str, table: &str) -> Option<String> {
    let (begin, end) = (docs.find(BEGIN)?, docs.find(END)?);
    Some(format!(
        "{}{BEGIN}\n{table}{}",
        &docs[..begin],
        &docs[end..]
    ))
}

fn main() {
    let (table, _) = table();
    print!("{table}");
    if std::env::args().any(|a| a == "--write") {
        let docs = std::fs::read_to_string(DOCS).unwrap();
        let updated =
            with_table(&docs, &table).expect("the docs have the placement-validation markers");
        std::fs::write(DOCS, updated).unwrap();
    }
}
