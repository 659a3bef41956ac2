//! Predicts the multi-GPU serving measurements listed in
//! `docs/data/perf-validation-multi-gpu.json` (the measured figures and their sources are
//! the records of `docs/data/serving-measurements.json`, by id) with the placement's time
//! model (docs/placement.md, "Time across devices"): each point placed on its device set
//! at the tensor-parallel degree the source ran, one pipeline stage, at its serving point,
//! and timed by the serving simulation run on the placement (the placement's simulated
//! TTFT and TPOT, not the objective's linear estimate); and prints the table of measured
//! against predicted TTFT and TPOT, the median and worst errors over all points, by
//! tensor-parallel degree, by engine and by model, and every other record on several
//! devices with the reason it is not predicted (from the record's own figures, or the
//! `left_out` reasons of the points file):
//!
//! ```sh
//! cargo run --release --example placement_validation             # print the table
//! cargo run --release --example placement_validation -- --write  # rewrite it in the docs
//! ```
//!
//! `tests/planner/multi_gpu_validation.rs` recomputes the table and fails when the one
//! committed in `docs/performance-validation.md` (between the `placement-validation` markers)
//! is stale. SGLang's request overhead and prefill launch factor are fitted on the SGLang
//! points of the fit half ([`sglang_fit`]), vLLM V0's host time per step and per sequence
//! on its vLLM 0.5.4 points ([`vllm_v0_fit`]; the test checks the constants against both
//! fits); every other constant is the single-device fit's or a cited one.

use std::path::PathBuf;

use jointplan::perf::{EngineProfile, Lengths};
use jointplan::placement::{self, timing::Serving, DeviceSet, Objective, Settings};
use jointplan::synth::ModelSource;
use jointplan::BuildOptions;
use rayon::prelude::*;
use serde_json::Value;

const POINTS: &str = "docs/data/perf-validation-multi-gpu.json";
const DATA: &str = "docs/data/serving-measurements.json";
/// The per-request lengths of the runs whose result files list them.
const REQUEST_LENGTHS: &str = "docs/data/request-lengths.json";
/// The docs holding the table.
pub const DOCS: &str = "docs/performance-validation.md";
/// The table's first marker.
pub const BEGIN: &str = "<!-- placement-validation:begin -->";
/// The table's last marker.
pub const END: &str = "<!-- placement-validation:end -->";
/// The engines' default scheduled-token budget the points are planned with.
const BUDGET: u64 = 8192;

/// SGLang's request overhead and prefill launch factor, fitted on the fit half.
#[path = "support/sglang_fit.rs"]
pub mod sglang_fit;

/// vLLM V0's host time per step and per sequence, fitted on the fit half.
// Each example is its own crate; the planner tests include both examples in one crate,
// where the shared support file is loaded twice (once per example module).
#[allow(clippy::duplicate_mod)]
#[path = "support/vllm_v0_fit.rs"]
pub mod vllm_v0_fit;

/// Which records are vLLM V0 runs, and their servers' settings.
// Each example is its own crate; the planner tests include both examples in one crate,
// where the shared support file is loaded twice (once per example module).
#[allow(clippy::duplicate_mod)]
#[path = "support/vllm_v0.rs"]
pub mod vllm_v0;

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
    /// How the requests' lengths were drawn (`fixed`, `sglang-random`, `listed`).
    lengths: &'static str,
    placement: String,
    /// The tensor-parallel degree the point is placed at.
    tensor_parallel: u32,
    /// The architecture synthesized: the model folder's name (of `models/` or
    /// `docs/data/models`).
    architecture: String,
    fit: bool,
    /// The record's source: its URL and title.
    cited: (String, String),
    ttft: (Option<f64>, f64),
    tpot: (Option<f64>, f64),
    /// The objective's linear estimate's TTFT and TPOT (ms), for comparison.
    linear: (f64, f64),
    /// An SGLang point of the fit half with one client and a measured TTFT: the row the
    /// SGLang constants are fitted on ([`sglang_fit`]).
    sglang_fit: Option<sglang_fit::FitRow>,
    /// A vLLM 0.5.4 point of the fit half with a measured TPOT: a row vLLM V0's host times
    /// are fitted on ([`vllm_v0_fit`]).
    v0_fit: Option<vllm_v0_fit::FitRow>,
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

/// The lengths a point is simulated at: `(input, output, distribution, requests)` from its
/// `lengths` (the source's random dataset, or `listed`: the per-request lengths of
/// `docs/data/request-lengths.json`), else the record's mean lengths, fixed. A distribution
/// is checked against the record: its draws' means are the measured ones.
fn lengths_of(
    point: &Value,
    record: &Value,
    id: &str,
) -> Result<Option<(u64, u64, Lengths, u64)>, String> {
    let Some(spec) = point.get("lengths") else {
        return Ok(None);
    };
    let count = |key: &str| {
        spec.get(key)
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("lengths.{key}: not a count"))
    };
    let measured = |key: &str| number(record, key).ok_or(format!("no {key}"));
    let (measured_in, measured_out) = (measured("input_tokens")?, measured("output_tokens")?);
    match text(spec, "kind")? {
        "sglang-random" => {
            let (input, output, requests) = (
                count("random_input_len")?,
                count("random_output_len")?,
                count("num_prompts")?,
            );
            let lengths = Lengths::SglangRandom {
                range_ratio: number(spec, "range_ratio").ok_or("lengths.range_ratio")?,
                seed: u32::try_from(count("seed")?).map_err(|e| e.to_string())?,
            };
            lengths.validate().map_err(|e| e.to_string())?;
            // The benchmark prints its total prompt tokens (the drawn lengths) and total
            // generated tokens (one fewer per request where the server does not count the
            // last token: the Qwen3 rows).
            let drawn = lengths.draws(requests, input, output);
            let (mean_in, mean_out) = mean_lengths(&drawn);
            if (mean_in - measured_in).abs() > 0.051 || (mean_out - measured_out).abs() > 1.051 {
                return Err(format!(
                    "{id}: the SGLang draws' means {mean_in:.2}/{mean_out:.2} are not the measured {measured_in}/{measured_out}"
                ));
            }
            Ok(Some((input, output, lengths, requests)))
        }
        "listed" => {
            let file: Value = serde_json::from_str(
                &std::fs::read_to_string(REQUEST_LENGTHS).map_err(|e| e.to_string())?,
            )
            .map_err(|e| e.to_string())?;
            let run = file["runs"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|r| r["id"].as_str() == Some(id))
                .ok_or(format!("{id}: not a run of {REQUEST_LENGTHS}"))?;
            let list = |key: &str| -> Vec<u64> {
                run[key]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_u64)
                    .collect()
            };
            let requests: Vec<(u64, u64)> = list("input_lens")
                .into_iter()
                .zip(list("output_lens"))
                .collect();
            let (mean_in, mean_out) = mean_lengths(&requests);
            if (mean_in - measured_in).abs() > 0.051 || (mean_out - measured_out).abs() > 0.051 {
                return Err(format!(
                    "{id}: the listed lengths' means {mean_in:.2}/{mean_out:.2} are not the record's {measured_in}/{measured_out}"
                ));
            }
            let count = requests.len() as u64;
            let lengths = Lengths::Listed {
                requests,
                source: text(run, "source")?.to_owned(),
            };
            lengths.validate().map_err(|e| e.to_string())?;
            Ok(Some((
                measured_in.round() as u64,
                (measured_out.round() as u64).max(1),
                lengths,
                count,
            )))
        }
        other => Err(format!("lengths.kind {other}: not sglang-random or listed")),
    }
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
    let drawn = lengths_of(point, record, &id)?;
    let (input, output) = match &drawn {
        Some((input, output, _, _)) => (*input, *output),
        None => (
            number(record, "input_tokens")
                .ok_or("no input tokens")?
                .round() as u64,
            number(record, "output_tokens")
                .ok_or("no output tokens")?
                .round()
                .max(1.0) as u64,
        ),
    };
    // A TTFT-only point (one output token) has no TPOT to compare.
    let tpot_measured = tpot_measured.filter(|_| output > 1);
    let v0 = vllm_v0::v0_run(record);
    let engine = match &v0 {
        Some(_) => "vllm@0.6".to_owned(),
        None => text(record, "engine")?
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_owned(),
    };
    let degree = number(point, "tensor_parallel").ok_or("no tensor_parallel")? as u32;
    // A model folder, or a `config.json` of docs/data/models.
    let model = PathBuf::from(text(point, "model")?);
    let folder = if model.extension().is_some_and(|e| e == "json") {
        model.parent()
    } else {
        Some(model.as_path())
    };
    let architecture = folder
        .and_then(|f| f.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
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
    let lengths = drawn
        .as_ref()
        .map_or(Lengths::Fixed, |(_, _, l, _)| l.clone());
    let (longest_in, longest_out) = lengths.longest(input, output);
    policy.maximum_context_tokens = Some((longest_in + longest_out).div_ceil(256) * 256);
    policy.maximum_scheduled_tokens = BUDGET;
    // vLLM V0 runs at its server's `--max-model-len` and its defaults: 256 sequences, a
    // budget of whole prompts (`max(max_model_len, 2048)`), or 512 tokens where the
    // context turns chunked prefill on.
    if let Some(run) = &v0 {
        let context = run
            .max_model_len
            .max(policy.maximum_context_tokens.unwrap_or(0));
        policy.maximum_context_tokens = Some(context);
        policy.maximum_active_sequences =
            u32::try_from(concurrency.min(vllm_v0::MAX_NUM_SEQS)).map_err(|e| e.to_string())?;
        policy.maximum_scheduled_tokens = vllm_v0::budget(context);
    }
    // Simulated the way it was measured, as the single-device table does: one batch of the
    // `C` requests for a static batch, else the benchmark's request count (its
    // `--num-prompts` where the point's lengths give it, `4 x C` when the source does not
    // say).
    let requests = if number(record, "batch_size").is_some() {
        concurrency
    } else if let Some((_, _, _, requests)) = &drawn {
        *requests
    } else {
        number(record, "requests")
            .map_or(4 * concurrency, |r| r as u64)
            .max(concurrency)
    };
    let settings = Settings {
        tensor_parallel: Some(degree),
        pipeline_parallel: Some(1),
        expert_split: None,
        host_offload: false,
        host_memory: None,
        kv_sequence_grain: false,
        objective: Objective::MinTpot,
        serving: Some(Serving {
            concurrency,
            input_tokens: input,
            output_tokens: output,
            engine: engine.clone(),
            simulated_requests: Some(requests),
            lengths: lengths.clone(),
            chunked_prefill: None,
        }),
        policy: Some(policy),
        why_not: None,
        budget: None,
    };
    // Chosen and certified as `plan --devices` places it; the table needs no placement
    // plan written out (nor the single-device plan's hash and checks it quotes).
    let chosen = placement::choose(
        &source,
        &set,
        &settings,
        &BuildOptions::default(),
        placement::DEFAULT_ENUMERATION_BUDGET,
    )
    .map_err(|e| e.to_string())?;
    let perf = chosen
        .performance()
        .map_err(|e| e.to_string())?
        .ok_or("no performance")?;
    let fit = fit_half(text(point, "id")?);
    let sglang_fit = match ttft_measured {
        Some(measured) if fit && engine == "sglang" && concurrency == 1 => {
            let profile = jointplan::perf::engine_profile("sglang").ok_or("no sglang profile")?;
            let ttft = |overhead: f64, factor: f64| -> Result<f64, String> {
                let engine = EngineProfile {
                    request_overhead_seconds: overhead,
                    prefill_launch_factor: factor,
                    ..profile
                };
                Ok(chosen
                    .simulate_with(&engine)
                    .map_err(|e| e.to_string())?
                    .ok_or("no performance")?
                    .ttft_seconds)
            };
            let base = ttft(0.0, 0.0)?;
            let row = sglang_fit::FitRow {
                measured: measured * 1e-3,
                base,
                launches: ttft(0.0, 1.0)? - base,
            };
            // One request at a time: the TTFT is linear in both constants.
            let check = ttft(0.05, 2.0)?;
            if (check - row.at(0.05, 2.0)).abs() > 1e-9 {
                return Err(format!(
                    "{id}: the one-client TTFT is not A + o + f K ({check} against {})",
                    row.at(0.05, 2.0)
                ));
            }
            Some(row)
        }
        _ => None,
    };
    let placement = format!(
        "tp {} pp {}",
        chosen.tensor_parallel(),
        chosen.pipeline_parallel()
    );
    let tensor_parallel = chosen.tensor_parallel();
    let v0_fit = match (&v0, tpot_measured) {
        (Some(run), Some(measured)) if fit && !run.multi_step => Some(vllm_v0_fit::FitRow {
            measured: measured * 1e-3,
            context: run.max_model_len,
            chosen,
        }),
        _ => None,
    };
    Ok(Row {
        id,
        engine,
        gpus: format!("{} x {}", set.device_count(), set.kinds[0].description.name),
        model: text(record, "model")?.to_owned(),
        weights: text(point, "weight_format")?.to_owned(),
        concurrency,
        input,
        output,
        lengths: lengths.name(),
        placement,
        tensor_parallel,
        architecture,
        fit,
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
        sglang_fit,
        v0_fit,
    })
}

/// The points file: `{points: [{id, model, weight_format, devices, tensor_parallel, note}],
/// left_out: [{ids, reason}]}`.
pub fn points_file() -> Value {
    serde_json::from_str(&std::fs::read_to_string(POINTS).unwrap()).unwrap()
}

/// The records of the serving measurements.
pub fn records() -> Vec<Value> {
    serde_json::from_str(&std::fs::read_to_string(DATA).unwrap()).unwrap()
}

/// The number of devices a record ran on: its GPU count, or its tensor- times its
/// pipeline-parallel degree when that is more (the rule of `examples/perf_validation.rs`,
/// whose table predicts the records on one device).
pub fn devices(record: &Value) -> u64 {
    let gpus = number(record, "gpu_count").unwrap_or(1.0);
    let tp = number(record, "tensor_parallel").unwrap_or(1.0);
    let pp = number(record, "pipeline_parallel").unwrap_or(1.0);
    gpus.max(tp * pp) as u64
}

/// Why a record cannot be predicted whatever its set-up, read from the record itself (the
/// single-device table's reasons): a Poisson request rate, no concurrency, no mean latency,
/// no lengths. `None`: the record measures what the placement's time model predicts.
pub fn screened(record: &Value) -> Option<String> {
    let measured = record.get("measured");
    let mean = |key: &str| measured.and_then(|m| number(m, key)).is_some();
    if number(record, "request_rate").is_some() {
        Some("a Poisson request rate, not a concurrency".to_owned())
    } else if number(record, "concurrency").is_none() {
        Some("no concurrency".to_owned())
    } else if !mean("ttft_ms_mean") && !mean("tpot_ms_mean") && !mean("itl_ms_mean") {
        Some("neither TTFT nor TPOT measured (no mean TTFT, TPOT or ITL)".to_owned())
    } else if number(record, "input_tokens").is_none() {
        Some("no input length".to_owned())
    } else if number(record, "output_tokens").is_none() {
        Some("no output length".to_owned())
    } else {
        None
    }
}

/// The reason `left_out` of the points file gives for `id`, if any.
pub fn left_out<'a>(points: &'a Value, id: &str) -> Option<&'a str> {
    points["left_out"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|entry| {
            entry["ids"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|i| i.as_str() == Some(id))
        })
        .and_then(|entry| entry["reason"].as_str())
}

/// The reason given to a record on several devices that is neither a point, screened out
/// nor left out with a reason (`tests/planner/multi_gpu_validation.rs` checks none is).
pub const NOT_SET_UP: &str = "no point set up in docs/data/perf-validation-multi-gpu.json";

/// Every point predicted, in the points file's order; and every other record on several
/// devices with the reason it is not predicted (screened by [`screened`], left out by the
/// points file with its reason, or the placement's error), in the records' order.
pub fn rows() -> (Vec<Row>, Vec<(String, String)>, usize) {
    let points = points_file();
    let data = records();
    let several: Vec<&Value> = data.iter().filter(|r| devices(r) > 1).collect();
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    // The points are independent: placed on every core, kept in the points file's order.
    let listed: Vec<&Value> = points["points"].as_array().into_iter().flatten().collect();
    let predicted: Vec<(String, Result<Row, String>)> = listed
        .par_iter()
        .map(|point| {
            let id = point["id"].as_str().unwrap_or("").to_owned();
            let predicted = match several
                .iter()
                .find(|r| r["id"].as_str() == Some(id.as_str()))
            {
                Some(record) => match screened(record) {
                    Some(reason) => Err(reason),
                    // One line per reason in the list.
                    None => predict(point, record).map_err(|e| e.replace('\n', "; ")),
                },
                None => Err(format!("not a record on several devices of {DATA}")),
            };
            (id, predicted)
        })
        .collect();
    for (id, predicted) in predicted {
        match predicted {
            Ok(row) => rows.push(row),
            Err(reason) => skipped.push((id, reason)),
        }
    }
    let is_point = |id: &str| {
        points["points"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|p| p["id"].as_str() == Some(id))
    };
    for record in &several {
        let id = record["id"].as_str().unwrap_or("");
        if is_point(id) {
            continue;
        }
        let reason = screened(record)
            .or_else(|| left_out(&points, id).map(str::to_owned))
            .unwrap_or_else(|| NOT_SET_UP.to_owned());
        skipped.push((id.to_owned(), reason));
    }
    (rows, skipped, several.len())
}

/// The mean input and output lengths of a run's requests.
fn mean_lengths(requests: &[(u64, u64)]) -> (f64, f64) {
    let n = requests.len().max(1) as f64;
    let sum = |f: fn(&(u64, u64)) -> u64| requests.iter().map(|r| f(r) as f64).sum::<f64>() / n;
    (sum(|r| r.0), sum(|r| r.1))
}

/// The committed table and the constants its fit half gives.
#[path = "support/placement_table.rs"]
mod placement_table;
use placement_table::median;
pub use placement_table::table;

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
