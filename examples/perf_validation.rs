//! Predicts every published serving measurement of `docs/data/serving-measurements.json`
//! (each record with its source) with the performance model and prints the table of
//! measured against predicted TTFT and TPOT, with the median and worst absolute errors:
//!
//! ```sh
//! cargo run --release --example perf_validation               # print the table
//! cargo run --release --example perf_validation -- --write    # rewrite it in the docs
//! cargo run --release --example perf_validation -- --residuals # one line of errors per row
//! ```
//!
//! `tests/planner/perf_validation.rs` recomputes the table and fails when the one committed
//! in `docs/performance-validation.md` (between the `perf-validation` markers) is stale.

use std::path::{Path, PathBuf};

use jointplan::perf::profile::ComputeType;
use jointplan::perf::work::{work, StepShape};
use jointplan::perf::{self, Calibration, EngineProfile, Lengths, ServingPoint, TimeModel};
use jointplan::synth::{ModelSource, PolicyPreset};
use jointplan::{build, BuildOptions};
use serde_json::Value;

/// Which records are vLLM V0 runs, and their servers' settings.
// Each example is its own crate; the planner tests include both examples in one crate,
// where the shared support file is loaded twice (once per example module).
#[allow(clippy::duplicate_mod)]
#[path = "support/vllm_v0.rs"]
mod vllm_v0;

/// vLLM V0's host times on one device, fitted on the single-device V0 rows of the fit half
/// as the multi-GPU table fits those of several devices.
#[allow(dead_code)]
// Each example is its own crate; the planner tests include both examples in one crate,
// where the shared support file is loaded twice (once per example module).
#[allow(clippy::duplicate_mod)]
#[path = "support/vllm_v0_fit.rs"]
mod vllm_v0_fit;

/// The constants fitted on the fit half, and the decomposition of a TPOT they are fitted
/// from.
#[path = "support/perf_fit.rs"]
mod fit;

pub use fit::Fit;
use fit::{decomposition, fit};

const DATA: &str = "docs/data/serving-measurements.json";
pub const DOCS: &str = "docs/performance-validation.md";
pub const BEGIN: &str = "<!-- perf-validation:begin -->";
pub const END: &str = "<!-- perf-validation:end -->";
/// The engines' default scheduled-token budget the points are planned with.
const BUDGET: u64 = 8192;

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
    type Entry = (
        &'static [&'static str],
        fn(&str) -> ModelSource,
        &'static str,
    );
    let table: &[Entry] = &[
        (&["llama-2-7b", "llama 7b"], config, "llama-2-7b"),
        (&["codellama-7b"], config, "codellama-7b"),
        (&["llama-3.2-3b", "llama 3b"], config, "llama-3.2-3b"),
        (&["qwen3-14b"], config, "qwen3-14b"),
        (&["qwen3-4b"], config, "qwen3-4b"),
        (&["qwen3-1.7b"], config, "qwen3-1.7b"),
        (&["mistral-7b-instruct-v0.3"], config, "mistral-7b-v0.3"),
        (&["gemma-3-4b"], config, "gemma-3-4b"),
        (&["qwen2.5-7b"], folder, "qwen2.5-7b"),
        (&["llama-3.1-70b", "llama-3.3-70b"], folder, "llama-3.1-70b"),
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
    let table: &[(&[&str], &[&str], &str)] = &[
        (&["h100"], &["pcie"], "h100-sxm-80gb.json"),
        (&["h200"], &[], "h200-141gb.json"),
        (&["b200"], &[], "b200-180gb.json"),
        (&["l40s"], &[], "l40s-48gb.json"),
        (&["a100", "40"], &[], "a100-40gb.json"),
        (&["a100"], &[], "a100-80gb.json"),
        (&["4090"], &[], "rtx-4090-24gb.json"),
        (&["m2 ultra"], &[], "m2-ultra-128gb.json"),
        (&["m3 ultra"], &[], "m3-ultra-512gb.json"),
    ];
    table
        .iter()
        .find(|(all, none, _)| {
            all.iter().all(|k| g.contains(k)) && !none.iter().any(|k| g.contains(k))
        })
        .map(|(_, _, file)| *file)
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

fn text(record: &Value, key: &str) -> String {
    record
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

/// How a record was measured, which fixes what is simulated.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Method {
    /// A served benchmark: a closed loop of `C` clients sending `requests` requests.
    Served { requests: u64 },
    /// One static batch of `C` requests.
    StaticBatch,
    /// llama-bench: a prompt of `I` tokens alone (TTFT = I / prompt tokens/s) and `O`
    /// tokens generated after an empty context (TPOT = 1 / generation tokens/s).
    LlamaBench,
}

/// A published point, read from its record.
struct Case {
    id: String,
    engine: &'static str,
    version: String,
    gpu: String,
    model: String,
    format: &'static str,
    /// Devices serving (tensor x pipeline parallel).
    devices: u64,
    concurrency: u64,
    input: u64,
    output: u64,
    method: Method,
    ttft: Option<f64>,
    tpot: Option<f64>,
    /// `TPOT` or `ITL`: which per-token figure `tpot` is.
    per_token: &'static str,
    source: ModelSource,
    /// The record's source: its URL and title.
    cited: (String, String),
    /// A vLLM V0 run (`vllm@0.6`: version 0.5.x, or a multi-step run of September 2024):
    /// its server's `--max-model-len` (the `len` of its result file's name).
    v0_context: Option<u64>,
    /// A multi-step V0 run (its host time is spread over a schedule's steps): not a row of
    /// the V0 host-time fit.
    v0_multi_step: bool,
}

/// A vLLM V0 point on one device of the fit half: a row of the one-device host-time fit
/// ([`vllm_v0_fit`]), simulated again at each pair.
struct V0Row {
    case: Case,
    model: TimeModel,
    measured: f64,
}

impl vllm_v0_fit::HostTimeRow for V0Row {
    fn measured(&self) -> f64 {
        self.measured
    }

    fn at(&self, engine: &EngineProfile) -> Result<f64, String> {
        predicted(&self.case, &self.model, engine).map(|p| p.1)
    }
}

/// Whether the record is a run on ShareGPT prompts (lengths vary widely per request).
fn sharegpt(record: &Value) -> bool {
    text(record, "notes").contains("ShareGPT")
}

/// The measured time per output token (seconds): the mean TPOT, or the mean inter-token
/// latency where no TPOT is reported. On ShareGPT runs ([`itl_first`]) the mean ITL: request
/// lengths vary widely there and the per-request mean TPOT weighs a short request's stalls
/// as much as a long request's tokens, while the mean ITL (over every inter-token gap) is
/// the token-weighted figure a simulation at the mean lengths predicts.
fn itl_or_tpot(record: &Value, measured: &Value) -> Option<f64> {
    let (tpot, itl) = (
        number(measured, "tpot_ms_mean"),
        number(measured, "itl_ms_mean"),
    );
    if itl_first(record, measured) {
        itl
    } else {
        tpot.or(itl)
    }
    .map(|ms| ms / 1e3)
}

/// Whether the mean ITL stands for the time per output token: a ShareGPT run whose mean
/// ITL is below its mean TPOT (an ITL above the TPOT means tokens were streamed in chunks,
/// multi-step scheduling, and one gap spans several tokens).
fn itl_first(record: &Value, measured: &Value) -> bool {
    match (
        number(measured, "itl_ms_mean"),
        number(measured, "tpot_ms_mean"),
    ) {
        (Some(itl), Some(tpot)) => sharegpt(record) && itl < tpot,
        _ => false,
    }
}

/// Reads a record, or says why it is not predicted.
fn case(record: &Value) -> Result<Case, String> {
    let id = text(record, "id");
    let gpus = number(record, "gpu_count").unwrap_or(1.0);
    let tp = number(record, "tensor_parallel").unwrap_or(1.0);
    let pp = number(record, "pipeline_parallel").unwrap_or(1.0);
    let devices = gpus.max(tp * pp) as u64;
    if devices != 1 {
        return Err("several GPUs (one-device model)".to_owned());
    }
    if number(record, "request_rate").is_some() {
        return Err("a Poisson request rate, not a concurrency".to_owned());
    }
    let precision = text(record, "precision").to_ascii_lowercase();
    let format = match precision.as_str() {
        p if p.starts_with("fp16") || p.starts_with("f16") || p.starts_with("float16") => {
            "dense-f16"
        }
        p if p.is_empty() || p.starts_with("bf16") || p.starts_with("bfloat16") => "dense-bf16",
        p if p.starts_with("q4_k") => "gguf-q4k",
        // An fp8 checkpoint (W8A8, per-tensor scales) or vLLM's online fp8: `--weight-format
        // fp8`.
        p if p.starts_with("fp8") => "fp8",
        other => return Err(format!("precision {other} (no such weight format)")),
    };
    let source = model_source(&text(record, "model")).ok_or("model not synthesizable")?;
    let gpu = text(record, "gpu");
    let device = device_file(&gpu).ok_or("no device file")?;
    let engine_name = engine(&text(record, "engine")).ok_or("no engine profile")?;
    let v0 = vllm_v0::v0_run(record);
    let v0_context = v0.as_ref().map(|run| run.max_model_len);
    let v0_multi_step = v0.as_ref().is_some_and(|run| run.multi_step);
    let engine_name = if v0_context.is_some() {
        "vllm@0.6"
    } else {
        engine_name
    };
    let concurrency = number(record, "concurrency").ok_or("no concurrency")? as u64;
    let measured = record.get("measured").ok_or("no measurements")?;
    let derived = record.get("derived");
    let (method, ttft, tpot, output) = match derived {
        // llama-bench reports tokens/s; the record's `derived` holds their inverses.
        Some(d) => (
            Method::LlamaBench,
            number(d, "ttft_ms_from_pp").map(|ms| ms / 1e3),
            number(d, "tpot_ms_from_tg").map(|ms| ms / 1e3),
            number(record, "output_tokens").unwrap_or(1.0),
        ),
        None => (
            if number(record, "batch_size").is_some() {
                Method::StaticBatch
            } else {
                Method::Served {
                    requests: number(record, "requests")
                        .map_or(4 * concurrency, |r| r as u64)
                        .max(concurrency),
                }
            },
            number(measured, "ttft_ms_mean").map(|ms| ms / 1e3),
            itl_or_tpot(record, measured),
            number(record, "output_tokens").ok_or("no output length")?,
        ),
    };
    let per_token = if itl_first(record, measured) {
        "ITL"
    } else {
        "TPOT"
    };
    let input = number(record, "input_tokens")
        .ok_or("no input length")?
        .round() as u64;
    let output = output.round().max(1.0) as u64;
    let tpot = tpot.filter(|_| output > 1);
    if ttft.is_none() && tpot.is_none() {
        return Err("neither TTFT nor TPOT measured".to_owned());
    }
    let mut source = source;
    source.device = Some(Path::new("models/devices").join(device));
    source.weight_format = Some(format.to_owned());
    Ok(Case {
        id,
        engine: engine_name,
        version: text(record, "engine_version"),
        gpu,
        model: text(record, "model"),
        format,
        devices,
        concurrency,
        input,
        output,
        method,
        ttft,
        tpot,
        per_token,
        source,
        cited: (text(record, "source"), text(record, "source_title")),
        v0_context,
        v0_multi_step,
    })
}

/// Plans the case's model on its device (the `server` preset with the engines' default
/// 8192-token step budget, room for the concurrency and `context` tokens: the longest
/// context of the points planned with the same model, device, weights and concurrency).
fn time_model(case: &Case, context: u64) -> Result<TimeModel, String> {
    let mut policy = PolicyPreset::resolve("server").map_err(|e| e.to_string())?;
    policy.maximum_active_sequences = u32::try_from(case.concurrency).map_err(|e| e.to_string())?;
    policy.maximum_scheduled_tokens = BUDGET;
    policy.maximum_context_tokens = Some(context);
    let synthesized = case
        .source
        .synthesize_with_policy(&policy)
        .map_err(|e| format!("synthesis: {e}"))?;
    let options = BuildOptions {
        threads: std::num::NonZeroUsize::new(1),
        ..Default::default()
    };
    let outcome = build(&synthesized.request, &options).map_err(|e| format!("plan: {e}"))?;
    perf::plan_time_model(
        &synthesized.request,
        &outcome.plan,
        &synthesized.device,
        Calibration::default(),
    )
    .map_err(|e| e.to_string())
}

fn point(case: &Case, concurrency: u64, input: u64, output: u64, requests: u64) -> ServingPoint {
    // A vLLM V0 server at its defaults: 256 sequences, whole prompts up to
    // `max(max_model_len, 2048)` tokens a step, or 512-token chunks where the context turns
    // chunked prefill on.
    let (budget, sequences) = match case.v0_context {
        Some(context) => (
            vllm_v0::budget(context),
            concurrency.min(vllm_v0::MAX_NUM_SEQS),
        ),
        None => (BUDGET, concurrency),
    };
    ServingPoint {
        concurrency,
        input_tokens: input,
        output_tokens: output,
        engine: case.engine.to_owned(),
        scheduled_token_budget: budget,
        maximum_sequences: sequences,
        simulated_requests: requests,
        // Each request at the record's lengths: no record here ran a random dataset at other
        // than its default range (fixed lengths); the ShareGPT runs are simulated at their
        // mean lengths against their token-weighted ITL, which the fit is built on (the
        // multi-GPU table runs its Lambda points at their listed lengths,
        // docs/performance-model.md, "Request lengths").
        lengths: Lengths::Fixed,
        context_tokens: case.v0_context,
        chunked_prefill: None,
    }
}

/// Predicted TTFT and TPOT of the case (seconds) the way it was measured, with `engine`'s
/// time profile.
fn predicted(case: &Case, model: &TimeModel, engine: &EngineProfile) -> Result<(f64, f64), String> {
    let run = |p: ServingPoint| {
        p.validate().map_err(|e| e.to_string())?;
        let engine = engine.at_context(p.context_tokens);
        perf::serving::simulate(model, &engine, &p).map_err(|e| e.to_string())
    };
    Ok(match case.method {
        Method::LlamaBench => (
            run(point(case, 1, case.input, 1, 1))?.ttft_seconds,
            run(point(case, 1, 1, case.output + 1, 1))?.tpot_seconds,
        ),
        Method::StaticBatch => {
            let c = case.concurrency;
            let p = run(point(case, c, case.input, case.output, c))?;
            (p.ttft_seconds, p.tpot_seconds)
        }
        Method::Served { requests } => {
            let c = case.concurrency;
            let p = run(point(case, c, case.input, case.output, requests))?;
            (p.ttft_seconds, p.tpot_seconds)
        }
    })
}

/// One predicted row.
struct Row {
    id: String,
    /// The model, GPU and engine: the rows the summary groups.
    group: String,
    /// The device file's `name`: the key of its memory factor.
    device: String,
    /// Whether the row is in the fit half ([`fit_half`]).
    fit: bool,
    text: String,
    ttft_error: Option<f64>,
    tpot_error: Option<f64>,
    /// Measured TTFT minus the predicted TTFT without the engine's request overhead
    /// (seconds), for the rows served by vLLM: the residual its overhead is fitted to
    /// (SGLang's is fitted on the multi-GPU table, `examples/placement_validation.rs`).
    ttft_residual: Option<f64>,
    /// The engine (its profile's spelling).
    engine: &'static str,
    /// The measured time per output token (seconds), when it counts (not under the
    /// datasheet bound).
    tpot_measured: Option<f64>,
    /// The predicted TPOT as `A + s x h + B / m` (`[A, s, B]`) in the engine's host time
    /// per step `h` and the device's memory factor `m` (fit half only; [`decomposition`]).
    tpot_parts: Option<[f64; 4]>,
    /// One line of residuals, for `--residuals`.
    residual: String,
    /// The record's source: its URL and title.
    cited: (String, String),
}

/// FNV-1a (64 bits) of `text`.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The split, stated before any test-half error was looked at: a point is in the fit half
/// when the FNV-1a 64-bit hash of its record id is even, in the test half otherwise (a
/// point keeps its half whatever other points are added).
pub fn fit_half(id: &str) -> bool {
    fnv1a(id) % 2 == 0
}

/// The datasheet bound of a step: its FLOPs at each type's dense peak or its bytes at the
/// full bandwidth, whichever is longer (no efficiency, no overhead). No run of the step on
/// the device at the stated precision can be faster.
fn datasheet_bound(model: &TimeModel, shape: &StepShape) -> f64 {
    let (mut compute, mut bytes) = (0.0, 0.0);
    for g in &model.groups {
        let w = work(&g.cost, shape);
        let n = g.nodes.len() as f64;
        for t in ComputeType::ALL {
            compute += w.flops[t.index()] * n / model.peak(t);
        }
        bytes += w.bytes * n;
    }
    let bandwidth = model.device.memory_bandwidth_gb_per_second as f64 * 1e9;
    compute.max(bytes / bandwidth)
}

/// The steady decode step of the case as measured: `C` sequences at context `I + O/2`
/// (llama-bench: one sequence after an empty context).
fn decode_shape(case: &Case) -> StepShape {
    match case.method {
        Method::LlamaBench => StepShape::decode(1, case.output / 2 + 1),
        _ => StepShape::decode(case.concurrency, case.input + case.output / 2),
    }
}

/// Predicts one case on its planned model.
fn predict(case: &Case, model: &TimeModel) -> Result<Row, String> {
    let profile = perf::engine_profile(case.engine).ok_or("no engine profile")?;
    let (ttft, tpot) = predicted(case, model, &profile)?;
    // A measurement under the datasheet bound of its step did not do the work the record
    // states (a prefix cache, a shorter prompt, other weights than its precision says): it
    // is shown but left out of the errors.
    let bound = datasheet_bound(model, &StepShape::prefill(case.input));
    let impossible = case.ttft.is_some_and(|t| t < bound);
    let tpot_bound = datasheet_bound(model, &decode_shape(case));
    let tpot_impossible = case.tpot.is_some_and(|t| t < tpot_bound);
    let error = |measured: Option<f64>, predicted: f64| measured.map(|m| (predicted - m) / m);
    let ttft_error = error(case.ttft, ttft).filter(|_| !impossible);
    let tpot_error = error(case.tpot, tpot).filter(|_| !tpot_impossible);
    let fit = fit_half(&case.id);
    let ttft_residual = case
        .ttft
        .filter(|_| {
            !impossible && matches!(case.method, Method::Served { .. }) && profile.name == "vllm"
        })
        .map(|t| t - (ttft - profile.request_overhead_seconds));
    let tpot_measured = case.tpot.filter(|_| !tpot_impossible);
    let tpot_parts = match tpot_measured {
        Some(_) if fit => Some(decomposition(case, model, &profile)?),
        _ => None,
    };
    let cell = |v: Option<f64>| v.map_or("-".to_owned(), |s| format!("{:.2}", s * 1e3));
    let pct = |v: Option<f64>| v.map_or("-".to_owned(), |e| format!("{:+.0}%", e * 100.0));
    let method = match case.method {
        Method::Served { requests } if case.per_token == "ITL" => {
            format!("served, {requests} requests, ITL")
        }
        Method::Served { requests } => format!("served, {requests} requests"),
        Method::StaticBatch => "static batch".to_owned(),
        Method::LlamaBench => "llama-bench".to_owned(),
    };
    let half = if fit { "fit" } else { "test" };
    let text = format!(
        "| {} | {half} | {} {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
        case.id,
        case.engine,
        case.version.split_whitespace().next().unwrap_or("?"),
        case.gpu,
        case.devices,
        case.model,
        case.format,
        method,
        case.concurrency,
        format_args!("{}/{}", case.input, case.output),
        cell(case.ttft),
        cell(Some(ttft)),
        if impossible {
            format!("below the datasheet bound {:.1}", bound * 1e3)
        } else {
            pct(ttft_error)
        },
        cell(case.tpot),
        cell(Some(tpot).filter(|_| case.tpot.is_some())),
        if tpot_impossible {
            format!("below the datasheet bound {:.2}", tpot_bound * 1e3)
        } else {
            pct(tpot_error)
        },
    );
    let residual = format!(
        "{:<62} {half:<4} {:<10} {:<28} {:<9} C={:<4} {:>5}/{:<5} ttft {:>6} tpot {:>6} implied m at the fitted h {}",
        case.id,
        case.engine,
        model.device_name,
        case.format,
        case.concurrency,
        case.input,
        case.output,
        pct(ttft_error),
        pct(tpot_error),
        match (tpot_parts, tpot_measured) {
            (Some([a, s, k, b]), Some(t)) => format!(
                "{:.2}",
                b / (t - a - s * profile.step_overhead_seconds - k * profile.decode_launch_factor)
            ),
            _ => "-".to_owned(),
        },
    );
    Ok(Row {
        id: case.id.clone(),
        group: format!("{} | {} | {}", case.model, case.gpu, case.engine),
        device: model.device_name.clone(),
        fit,
        text,
        ttft_error,
        tpot_error,
        ttft_residual,
        engine: case.engine,
        tpot_measured,
        tpot_parts,
        residual,
        cited: case.cited.clone(),
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

/// Every record predicted, or why not.
struct Predicted {
    /// The predicted points, sorted by id.
    rows: Vec<Row>,
    /// The records not predicted, with the reason.
    skipped: Vec<(String, String)>,
    /// How many records the data has.
    records: usize,
    /// The rows of vLLM V0's one-device host-time fit.
    v0_rows: Vec<V0Row>,
}

/// Every record predicted (sorted by id), or the reason it is not.
fn rows() -> Predicted {
    let records: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(DATA).unwrap()).unwrap();
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    let mut cases = Vec::new();
    for record in &records {
        match case(record) {
            Ok(c) => cases.push(c),
            Err(reason) => skipped.push((text(record, "id"), reason)),
        }
    }
    // One plan per model, device, weights and concurrency, at the longest context of its
    // points (the plan's providers do not depend on the context ceiling).
    type Key = (String, &'static str, &'static str, u64);
    let key = |c: &Case| -> Key {
        (
            c.model.clone(),
            device_file(&c.gpu).unwrap_or(""),
            c.format,
            c.concurrency,
        )
    };
    let mut context: std::collections::BTreeMap<Key, u64> = Default::default();
    for c in &cases {
        let e = context.entry(key(c)).or_default();
        *e = (*e).max(c.input + c.output + 1);
    }
    let mut models: std::collections::BTreeMap<Key, Result<TimeModel, String>> = Default::default();
    let mut v0_rows = Vec::new();
    for c in cases {
        let k = key(&c);
        let model = models
            .entry(k.clone())
            .or_insert_with(|| time_model(&c, context[&k]));
        match model
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|m| predict(&c, m).map(|row| (row, m)))
        {
            Ok((row, m)) => {
                // The one-device V0 fit: the vLLM 0.5.4 points of the fit half whose TPOT
                // counts (multi-step runs held out, as in the multi-GPU fit).
                let v0_fit_row = row.fit
                    && c.v0_context.is_some()
                    && !c.v0_multi_step
                    && c.devices == 1
                    && row.tpot_error.is_some();
                if let (true, Some(measured)) = (v0_fit_row, row.tpot_measured) {
                    v0_rows.push(V0Row {
                        model: m.clone(),
                        case: c,
                        measured,
                    });
                }
                rows.push(row);
            }
            Err(reason) => skipped.push((c.id.clone(), reason)),
        }
    }
    rows.sort_by(|a, b| a.id.cmp(&b.id));
    Predicted {
        rows,
        skipped,
        records: records.len(),
        v0_rows,
    }
}

/// The committed table and the constants its fit half gives.
#[path = "support/perf_table.rs"]
mod perf_table;
pub use perf_table::table;
use perf_table::table_of;

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
    let predicted = rows();
    if std::env::args().any(|a| a == "--residuals") {
        for row in &predicted.rows {
            println!("{}", row.residual);
        }
        return;
    }
    let (table, fit) = table_of(&predicted);
    print!("{table}");
    println!(
        "\nfitted request overhead: {:.1} ms, vllm host time per step {:.1} ms, decode launch factor {:.2}",
        fit.request_overhead.0 * 1e3,
        fit.vllm_step.0 * 1e3,
        fit.decode_launch
    );
    for (device, factor, n) in &fit.devices {
        println!("fitted memory factor of {device}: {factor:.2} over {n} rows");
    }
    if let Some(v0) = &fit.vllm_v0_one_device {
        println!(
            "fitted vllm@0.6 host time on one device: {:.2} ms per step, {:.0} us per sequence over {} rows ({:.0}% median)",
            v0.step_overhead * 1e3,
            v0.sequence_overhead * 1e6,
            v0.rows,
            v0.median_error * 100.0
        );
    }
    if std::env::args().any(|a| a == "--write") {
        let docs = std::fs::read_to_string(DOCS).unwrap();
        let updated = with_table(&docs, &table).expect("the docs have the perf-validation markers");
        std::fs::write(DOCS, updated).unwrap();
    }
}
