//! Predicts every published serving measurement of `docs/data/serving-measurements.json`
//! (each record with its source) with the performance model and prints the table of
//! measured against predicted TTFT and TPOT, with the median and worst absolute errors:
//!
//! ```sh
//! cargo run --release --example perf_validation            # print the table
//! cargo run --release --example perf_validation -- --write # rewrite it in the docs
//! ```
//!
//! `tests/planner/perf_validation.rs` recomputes the table and fails when the one committed
//! in `docs/performance-model.md` (between the `perf-validation` markers) is stale.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use jointplan::perf::profile::ComputeType;
use jointplan::perf::work::{work, StepShape};
use jointplan::perf::{self, Calibration, ServingPoint};
use jointplan::synth::{ModelSource, PolicyPreset};
use jointplan::{build, BuildOptions};
use serde_json::Value;

const DATA: &str = "docs/data/serving-measurements.json";
pub const DOCS: &str = "docs/performance-model.md";
pub const BEGIN: &str = "<!-- perf-validation:begin -->";
pub const END: &str = "<!-- perf-validation:end -->";

/// The model folder or config of a published model id, if jointplan can synthesize it.
fn model_source(model: &str) -> Option<ModelSource> {
    let lower = model.to_ascii_lowercase();
    fn folder(name: &str) -> ModelSource {
        ModelSource::folder(Path::new("models").join(name))
    }
    fn config(name: &str) -> ModelSource {
        ModelSource {
            config: Some(PathBuf::from(format!(
                "docs/data/models/{name}/config.json"
            ))),
            ..ModelSource::default()
        }
    }
    // LLaMA 7B (the first version) has Llama-2-7B's shapes; llama-bench's "llama 3B"
    // label on a Llama 3.2 run is Llama-3.2-3B.
    let table: &[(&[&str], fn(&str) -> ModelSource, &str)] = &[
        (&["llama-2-7b", "llama 7b"], config, "llama-2-7b"),
        (&["codellama-7b"], config, "codellama-7b"),
        (&["llama-3.2-3b", "llama 3b"], config, "llama-3.2-3b"),
        (&["qwen3-14b"], config, "qwen3-14b"),
        (&["qwen3-4b"], config, "qwen3-4b"),
        (&["qwen3-1.7b"], config, "qwen3-1.7b"),
        (&["qwen2.5-7b"], folder, "qwen2.5-7b"),
        (&["llama-3.1-8b"], folder, "llama-3.1-8b"),
        (&["qwen3-30b-a3b"], folder, "qwen3-30b-a3b"),
        (&["mixtral-8x7b"], folder, "mixtral-8x7b"),
        (&["llama-3.2-1b"], folder, "llama-3.2-1b"),
    ];
    table
        .iter()
        .find(|(keys, _, _)| keys.iter().any(|k| lower.contains(k)))
        .map(|(_, make, name)| make(name))
}

/// The device file of a published GPU name (an A100 whose variant is not stated is taken
/// as the SXM4 80 GB).
fn device_file(gpu: &str) -> Option<&'static str> {
    let g = gpu.to_ascii_lowercase();
    if g.contains("h100") && !g.contains("pcie") {
        Some("h100-sxm-80gb.json")
    } else if g.contains("h200") {
        Some("h200-141gb.json")
    } else if g.contains("b200") {
        Some("b200-180gb.json")
    } else if g.contains("l40s") {
        Some("l40s-48gb.json")
    } else if g.contains("a100") && g.contains("40") {
        Some("a100-40gb.json")
    } else if g.contains("a100") {
        Some("a100-80gb.json")
    } else if g.contains("4090") {
        Some("rtx-4090-24gb.json")
    } else if g.contains("m2 ultra") {
        Some("m2-ultra-128gb.json")
    } else if g.contains("m3 ultra") {
        Some("m3-ultra-512gb.json")
    } else {
        None
    }
}

/// The engine profile of a published engine name.
fn engine(name: &str) -> Option<&'static str> {
    let n = name.to_ascii_lowercase();
    ["vllm", "sglang", "trtllm", "llama.cpp"]
        .into_iter()
        .find(|e| n.starts_with(e))
}

fn number(record: &Value, key: &str) -> Option<f64> {
    record.get(key).and_then(Value::as_f64)
}

struct Row {
    id: String,
    text: String,
    ttft_error: Option<f64>,
    tpot_error: Option<f64>,
    /// Measured TTFT minus the predicted TTFT without the engine's request overhead
    /// (seconds), for the served (HTTP) engines: the residual the overhead is fitted to.
    ttft_residual: Option<f64>,
}

/// Plans and predicts one record, or says why it is not predicted.
fn predict(record: &Value) -> Result<Row, String> {
    let text = |key: &str| {
        record
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let id = text("id");
    let gpus = number(record, "gpu_count").unwrap_or(1.0);
    let tp = number(record, "tensor_parallel").unwrap_or(1.0);
    let pp = number(record, "pipeline_parallel").unwrap_or(1.0);
    if gpus != 1.0 || tp != 1.0 || pp != 1.0 {
        return Err("several GPUs (one-device model)".to_owned());
    }
    if number(record, "request_rate").is_some() {
        return Err("a Poisson request rate, not a concurrency".to_owned());
    }
    let precision = text("precision").to_ascii_lowercase();
    let format = match precision.as_str() {
        p if p.starts_with("fp16") || p.starts_with("f16") || p.starts_with("float16") => {
            "dense-f16"
        }
        p if p.is_empty() || p.starts_with("bf16") || p.starts_with("bfloat16") => "dense-bf16",
        p if p.starts_with("q4_k") => "gguf-q4k",
        other => return Err(format!("precision {other} (no such weight format)")),
    };
    let mut source = model_source(&text("model")).ok_or("model not synthesizable")?;
    let device = device_file(&text("gpu")).ok_or("no device file")?;
    let engine_name = engine(&text("engine")).ok_or("no engine profile")?;
    let concurrency = number(record, "concurrency").ok_or("no concurrency")? as u64;
    let input = number(record, "input_tokens").ok_or("no input length")? as u64;
    let output = number(record, "output_tokens").ok_or("no output length")? as u64;
    let measured = record.get("measured").ok_or("no measurements")?;
    let ttft = number(measured, "ttft_ms_mean").map(|ms| ms / 1e3);
    let tpot = number(measured, "tpot_ms_mean")
        .or_else(|| number(measured, "itl_ms_mean"))
        .map(|ms| ms / 1e3);
    if ttft.is_none() && tpot.is_none() {
        return Err("neither TTFT nor TPOT measured".to_owned());
    }
    source.device = Some(Path::new("models/devices").join(device));
    source.weight_format = Some(format.to_owned());
    // The server preset, with the engines' default 8192-token step budget, room for the
    // concurrency, and the context the point needs.
    let mut policy = PolicyPreset::resolve("server").map_err(|e| e.to_string())?;
    policy.maximum_active_sequences = u32::try_from(concurrency).map_err(|e| e.to_string())?;
    policy.maximum_scheduled_tokens = 8192;
    policy.maximum_context_tokens = Some(input + output);
    let synthesized = source
        .synthesize_with_policy(&policy)
        .map_err(|e| format!("synthesis: {e}"))?;
    let options = BuildOptions {
        threads: std::num::NonZeroUsize::new(1),
        ..Default::default()
    };
    let outcome = build(&synthesized.request, &options).map_err(|e| format!("plan: {e}"))?;
    let model = perf::plan_time_model(
        &synthesized.request,
        &outcome.plan,
        &synthesized.device,
        Calibration::default(),
    )
    .map_err(|e| e.to_string())?;
    // A static batch (a `batch_size` record) is one wave of `C` requests; a served
    // concurrency is the closed loop's `4 x C` requests.
    let waves = if number(record, "batch_size").is_some() {
        1
    } else {
        4
    };
    let point = ServingPoint {
        concurrency,
        input_tokens: input,
        output_tokens: output,
        engine: engine_name.to_owned(),
        scheduled_token_budget: 8192,
        maximum_sequences: concurrency,
        simulated_requests: concurrency * waves,
    };
    let p = perf::predict(&model, &point).map_err(|e| e.to_string())?;
    // The prompt's FLOPs at the datasheet peak (no efficiency) bound any TTFT from below; a
    // measurement under it did not compute the whole prompt (a prefix cache, a shorter
    // prompt) and is shown but left out of the errors.
    let prompt = StepShape::prefill(input);
    let flops: f64 = model
        .groups
        .iter()
        .map(|g| work(&g.cost, &prompt).total_flops() * g.nodes.len() as f64)
        .sum();
    let bound = flops / model.peak(ComputeType::Bf16);
    let impossible = ttft.is_some_and(|t| t < bound);
    let error = |measured: Option<f64>, predicted: f64| measured.map(|m| (predicted - m) / m);
    let ttft_error = error(ttft, p.ttft_seconds).filter(|_| !impossible);
    let engine_profile = perf::engine_profile(engine_name).ok_or("no engine profile")?;
    let ttft_residual = ttft
        .filter(|_| !impossible && waves == 4 && engine_profile.request_overhead_seconds > 0.0)
        .map(|t| t - (p.ttft_seconds - engine_profile.request_overhead_seconds));
    let tpot_error = if output > 1 {
        error(tpot, p.tpot_seconds)
    } else {
        None
    };
    let cell = |v: Option<f64>| v.map_or("-".to_owned(), |s| format!("{:.2}", s * 1e3));
    let pct = |v: Option<f64>| v.map_or("-".to_owned(), |e| format!("{:+.0}%", e * 100.0));
    let version = text("engine_version");
    let row = format!(
        "| {id} | {engine_name} {} | {} | {} | {format} | {concurrency} | {input}/{output} | {} | {} | {} | {} | {} | {} |",
        version.split_whitespace().next().unwrap_or("?"),
        text("gpu"),
        text("model"),
        cell(ttft),
        cell(Some(p.ttft_seconds)),
        if impossible {
            format!("below the compute bound {:.1}", bound * 1e3)
        } else {
            pct(ttft_error)
        },
        cell(tpot.filter(|_| output > 1)),
        cell(Some(p.tpot_seconds).filter(|_| output > 1)),
        pct(tpot_error),
    );
    Ok(Row {
        id,
        text: row,
        ttft_error,
        tpot_error,
        ttft_residual,
    })
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// Every record predicted, or the reason it is not; and the number of records.
fn rows() -> (Vec<Row>, Vec<(String, String)>, usize) {
    let records: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(DATA).unwrap()).unwrap();
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    for record in &records {
        match predict(record) {
            Ok(row) => rows.push(row),
            Err(reason) => skipped.push((
                record
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_owned(),
                reason,
            )),
        }
    }
    (rows, skipped, records.len())
}

/// The request overhead fitted on the odd served rows (1st, 3rd, ... among the rows with a
/// residual), and the TTFT abs errors of the even ones.
fn request_overhead_fit(rows: &[Row]) -> ((f64, usize), Vec<f64>) {
    let served: Vec<&Row> = rows.iter().filter(|r| r.ttft_residual.is_some()).collect();
    let odd: Vec<f64> = served
        .iter()
        .step_by(2)
        .filter_map(|r| r.ttft_residual)
        .collect();
    let even: Vec<f64> = served
        .iter()
        .skip(1)
        .step_by(2)
        .filter_map(|r| r.ttft_error.map(f64::abs))
        .collect();
    ((median(odd.clone()), odd.len()), even)
}

/// The committed table: predicted points, the error summary, the points not predicted.
/// The table, and the request overhead the odd served rows give (seconds).
pub fn table() -> (String, f64) {
    let (rows, skipped, records) = rows();
    let mut out = String::new();
    out.push_str("Generated by `cargo run --release --example perf_validation -- --write` from `docs/data/serving-measurements.json` (sources there, by id); the test fails when this table is stale. Times in ms; error = (predicted - measured) / measured; TPOT is the source's mean TPOT, or its mean inter-token latency where it reports no TPOT; a `batch_size` record is one static batch (one wave of `C` requests), a concurrency record a closed loop of `4 x C` requests.\n\n");
    out.push_str("| id | engine | GPU | model | weights | C | I/O | TTFT measured | TTFT predicted | error | TPOT measured | TPOT predicted | error |\n");
    out.push_str("|---|---|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|\n");
    for row in &rows {
        out.push_str(&row.text);
        out.push('\n');
    }
    let ttft: Vec<f64> = rows
        .iter()
        .filter_map(|r| r.ttft_error.map(f64::abs))
        .collect();
    let tpot: Vec<f64> = rows
        .iter()
        .filter_map(|r| r.tpot_error.map(f64::abs))
        .collect();
    let worst = |errors: &[f64], pick: fn(&Row) -> Option<f64>| {
        rows.iter()
            .filter_map(|r| pick(r).map(|e| (e.abs(), r.id.as_str())))
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map_or("-".to_owned(), |(e, id)| {
                format!("{:.0}% ({id})", e * 100.0)
            })
            + &format!(" over {} points", errors.len())
    };
    let _ = writeln!(
        out,
        "\n| | median abs error | worst abs error |\n|---|---:|---|\n| TTFT | {:.0}% | {} |\n| TPOT | {:.0}% | {} |",
        median(ttft.clone()) * 100.0,
        worst(&ttft, |r| r.ttft_error),
        median(tpot.clone()) * 100.0,
        worst(&tpot, |r| r.tpot_error),
    );
    let (fit, held_out) = request_overhead_fit(&rows);
    let _ = writeln!(
        out,
        "\nThe HTTP engines' request overhead ({:.1} ms in `src/perf/engine_profile.rs`) is the median TTFT residual (measured minus predicted without it) of the odd rows of the served points: {:.1} ms over {} rows. On the {} even rows (held out) the TTFT median abs error is {:.0}%.",
        perf::engine_profile::VLLM_REQUEST_OVERHEAD_SECONDS * 1e3,
        fit.0 * 1e3,
        fit.1,
        held_out.len(),
        median(held_out.clone()) * 100.0,
    );
    let _ = writeln!(
        out,
        "\nNot predicted: {} of {} records, by reason:\n",
        skipped.len(),
        records
    );
    let mut reasons: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for (id, reason) in &skipped {
        reasons.entry(reason).or_default().push(id);
    }
    for (reason, ids) in &reasons {
        let _ = writeln!(out, "- {reason} ({}): {}", ids.len(), ids.join(", "));
    }
    (out, fit.0)
}

/// The docs with the table between the markers replaced by `table`.
pub fn with_table(docs: &str, table: &str) -> Option<String> {
    let (begin, end) = (docs.find(BEGIN)?, docs.find(END)?);
    Some(format!(
        "{}{BEGIN}\n{table}{}",
        &docs[..begin],
        &docs[end..]
    ))
}

fn main() {
    let (table, fit) = table();
    print!("{table}");
    println!("\nfitted request overhead: {:.2} ms", fit * 1e3);
    if std::env::args().any(|a| a == "--write") {
        let docs = std::fs::read_to_string(DOCS).unwrap();
        let updated = with_table(&docs, &table).expect("the docs have the perf-validation markers");
        std::fs::write(DOCS, updated).unwrap();
    }
}
