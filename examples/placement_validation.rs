//! Predicts the multi-GPU serving measurements listed in
//! `docs/data/perf-validation-multi-gpu.json` (the measured figures and their sources are
//! the records of `docs/data/serving-measurements.json`, by id) with the placement's time
//! model (docs/placement.md, "Time across devices"): each point placed on its device set
//! at the tensor-parallel degree the source ran, one pipeline stage, at its serving point,
//! and timed by the serving simulation run on the placement (the placement's simulated
//! TTFT and TPOT, not the objective's linear estimate); and prints the table of measured
//! against predicted TTFT and TPOT:
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
    weights: String,
    concurrency: u64,
    input: u64,
    output: u64,
    placement: String,
    fit: bool,
    /// The record's source: its URL and title.
    cited: (String, String),
    ttft: (Option<f64>, f64),
    tpot: (Option<f64>, f64),
    /// The objective's linear estimate's TTFT and TPOT (ms), for comparison.
    linear: (f64, f64),
}

/// FNV-1a (64 bits) of `text`.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The split of `examples/perf_validation.rs`: a point is in the fit half when the FNV-1a
/// 64-bit hash of its record id is even. Nothing here is fitted; the halves are reported so
/// that the constants fitted on the single-device fit half are seen on held-out points.
pub fn fit_half(id: &str) -> bool {
    fnv1a(id) % 2 == 0
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
    let tpot_measured =
        number(measured, "tpot_ms_mean").or_else(|| number(measured, "itl_ms_mean"));
    let ttft_measured = number(measured, "ttft_ms_mean");
    if tpot_measured.is_none() && ttft_measured.is_none() {
        return Err("no mean TTFT, TPOT or ITL".to_owned());
    }
    let concurrency = number(record, "concurrency").ok_or("no concurrency")? as u64;
    let input = number(record, "input_tokens")
        .ok_or("no input tokens")?
        .round() as u64;
    let output = number(record, "output_tokens")
        .ok_or("no output tokens")?
        .round()
        .max(1.0) as u64;
    // A TTFT-only point (one output token) has no TPOT to compare.
    let tpot_measured = tpot_measured.filter(|_| output > 1);
    let engine = text(record, "engine")?
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_owned();
    let degree = number(point, "tensor_parallel").ok_or("no tensor_parallel")? as u32;
    // A model folder, or a `config.json` of docs/data/models.
    let model = PathBuf::from(text(point, "model")?);
    // A bare config has no default policy: the `server` preset, as the single-device
    // table plans its points.
    let mut source = if model.extension().is_some_and(|e| e == "json") {
        ModelSource {
            config: Some(model),
            policy: Some("server".to_owned()),
            ..ModelSource::default()
        }
    } else {
        ModelSource::folder(model)
    };
    source.weight_format = Some(text(point, "weight_format")?.to_owned());
    let set =
        DeviceSet::read(&PathBuf::from(text(point, "devices")?)).map_err(|e| e.to_string())?;
    // The policy the engine runs: every client's request admitted, a context of its
    // prompt and output, the engines' default budget.
    let mut policy = source.policy_preset().map_err(|e| e.to_string())?;
    policy.maximum_active_sequences = u32::try_from(concurrency).map_err(|e| e.to_string())?;
    policy.maximum_context_tokens = Some((input + output).div_ceil(256) * 256);
    policy.maximum_scheduled_tokens = BUDGET;
    // Simulated the way it was measured, as the single-device table does: one batch of the
    // `C` requests for a static batch, else the benchmark's request count (`4 x C` when the
    // source does not say).
    let requests = if number(record, "batch_size").is_some() {
        concurrency
    } else {
        number(record, "requests")
            .map_or(4 * concurrency, |r| r as u64)
            .max(concurrency)
    };
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
            simulated_requests: Some(requests),
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
        weights: text(point, "weight_format")?.to_owned(),
        concurrency,
        input,
        output,
        placement: format!("tp {} pp {}", p.tensor_parallel, p.pipeline_parallel),
        fit: fit_half(text(point, "id")?),
        cited: (
            text(record, "source")?.to_owned(),
            text(record, "source_title")?.to_owned(),
        ),
        ttft: (ttft_measured, perf.ttft_seconds * 1e3),
        tpot: (tpot_measured, perf.tpot_seconds * 1e3),
        linear: (
            perf.linear_estimate.ttft.seconds * 1e3,
            perf.linear_estimate.tpot.seconds * 1e3,
        ),
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

/// The measured, predicted and error cells of one phase of `row`, its error recorded.
fn cells<'a>(
    (measured, predicted): (Option<f64>, f64),
    row: &'a Row,
    into: &mut Vec<(f64, &'a str, bool)>,
    digits: usize,
) -> (String, String, String) {
    match measured {
        Some(m) => {
            let e = error(m, predicted);
            into.push((e.abs(), row.id.as_str(), row.fit));
            (
                format!("{m:.digits$}"),
                format!("{predicted:.digits$}"),
                format!("{:+.0}%", e * 100.0),
            )
        }
        None => ("-".to_owned(), "-".to_owned(), "-".to_owned()),
    }
}

/// `points | median | worst (id)` of `errors` (absolute values with their ids).
fn summary(errors: &[(f64, &str)]) -> String {
    match errors.iter().max_by(|a, b| a.0.total_cmp(&b.0)) {
        None => "0 | - | - |".to_owned(),
        Some((worst, id)) => format!(
            "{} | {:.0}% | {:.0}% ({id}) |",
            errors.len(),
            median(errors.iter().map(|e| e.0).collect()) * 100.0,
            worst * 100.0
        ),
    }
}

/// The table and its median absolute TPOT error over all points.
pub fn table() -> (String, f64) {
    let rows = rows();
    let mut out = String::new();
    out.push_str("Generated by `cargo run --release --example placement_validation -- --write` from the points of `docs/data/perf-validation-multi-gpu.json` (measurements and sources: `docs/data/serving-measurements.json`, by id); the test fails when this table is stale. Each point is placed at the source's tensor-parallel degree in one stage and timed by the placement's serving simulation (docs/placement.md, \"Time across devices\"): the single-device closed loop of C clients (continuous batching, decodes first, chunked prompts, the engine's request overhead and host time per step), each step priced on the placement (node times split over the ranks, all-reduces); TTFT and TPOT are the simulated means. As in the single-device table, a static batch is one batch of `C` requests and a served run sends the benchmark's request count (`4 x C` when the source does not say). The last rows of the summary compare the objective's linear estimate the placement solver ranks by (TPOT: the decode step plus the other requests' prompts' share; TTFT: one prompt alone) on the same points. Nothing is fitted here; the device memory factors and the request overhead are the single-device fit's, and `half` is the point's half of the same split (FNV-1a 64-bit hash of the id even: fit). Times in ms; error = (predicted - measured) / measured.\n\n");
    out.push_str("| id | half | engine | GPUs | model | weights | placement | C | I/O | TTFT measured | TTFT predicted | error | TPOT measured | TPOT predicted | error |\n|---|---|---|---|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|\n");
    // (|error|, id, fit) per phase.
    let mut tpot_errors: Vec<(f64, &str, bool)> = Vec::new();
    let mut ttft_errors: Vec<(f64, &str, bool)> = Vec::new();
    // The same against the objective's linear estimate.
    let mut linear_ttft: Vec<(f64, &str, bool)> = Vec::new();
    let mut linear_tpot: Vec<(f64, &str, bool)> = Vec::new();
    for row in &rows {
        match row {
            Ok(r) => {
                let ttft = cells(r.ttft, r, &mut ttft_errors, 1);
                let tpot = cells(r.tpot, r, &mut tpot_errors, 2);
                for (measured, linear, into) in [
                    (r.ttft.0, r.linear.0, &mut linear_ttft),
                    (r.tpot.0, r.linear.1, &mut linear_tpot),
                ] {
                    if let Some(m) = measured {
                        into.push((error(m, linear).abs(), r.id.as_str(), r.fit));
                    }
                }
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {}/{} | {} | {} | {} | {} | {} | {} |",
                    r.id,
                    if r.fit { "fit" } else { "test" },
                    r.engine,
                    r.gpus,
                    r.model,
                    r.weights,
                    r.placement,
                    r.concurrency,
                    r.input,
                    r.output,
                    ttft.0,
                    ttft.1,
                    ttft.2,
                    tpot.0,
                    tpot.1,
                    tpot.2,
                );
            }
            Err((id, reason)) => {
                let _ = writeln!(out, "| {id} | not predicted: {reason} ||||||||||||| ");
            }
        }
    }
    let _ = writeln!(
        out,
        "\n| phase | half | points | median abs error | worst abs error |\n|---|---|---:|---:|---|"
    );
    for (phase, errors) in [
        ("TTFT", &ttft_errors),
        ("TPOT", &tpot_errors),
        ("TTFT, objective's linear estimate", &linear_ttft),
        ("TPOT, objective's linear estimate", &linear_tpot),
    ] {
        for half in ["fit", "test", "all"] {
            let chosen: Vec<(f64, &str)> = errors
                .iter()
                .filter(|e| match half {
                    "fit" => e.2,
                    "test" => !e.2,
                    _ => true,
                })
                .map(|e| (e.0, e.1))
                .collect();
            let _ = writeln!(out, "| {phase} | {half} | {}", summary(&chosen));
        }
    }
    let mut by: std::collections::BTreeMap<&(String, String), Vec<&str>> = Default::default();
    for r in rows.iter().flatten() {
        by.entry(&r.cited).or_default().push(r.id.as_str());
    }
    out.push_str("\nSources of the predicted points:\n\n");
    for ((url, title), ids) in by {
        let _ = writeln!(out, "- {url}: {title} ({})", ids.join(", "));
    }
    let tpot_median = median(tpot_errors.iter().map(|e| e.0).collect());
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
