//! jointplan's engine accounting against published engine startup logs: the table of
//! `docs/engines-validation.md` (issue 37, item 6), computed from `docs/data/engine-logs.json`.
//!
//! Each record names the model folder, the engine (and version), the engine's arguments as
//! the log's author gave them, and the device memory the engine logged (the driver's total,
//! or for SGLang the memory free at startup); the prediction runs
//! [`crate::engine::account`] on the folder's synthesized model, and the table compares the
//! weights and the KV cache tokens with what the engine logged. Records whose settings are
//! incomplete or whose model is not modelled are listed with the reason.

use std::path::Path;

use serde::Deserialize;

use crate::engine::{self, EngineArgs, EngineChoice, GIB};
use crate::synth::ModelSource;

use super::engine_facts::{compute_capability, model_facts};
use super::StudyError;

#[derive(Deserialize)]
struct Data {
    records: Vec<Record>,
}

#[derive(Deserialize)]
struct Record {
    id: String,
    source: String,
    #[serde(default)]
    gpu_key: Option<String>,
    #[serde(default)]
    gpu: Option<String>,
    jointplan: Mapping,
}

#[derive(Deserialize)]
struct Mapping {
    predict: bool,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    why: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    engine: Option<String>,
    #[serde(default)]
    engine_args: Vec<String>,
    #[serde(default)]
    driver_total_gib: Option<f64>,
    #[serde(default)]
    free_at_start_gib: Option<f64>,
    #[serde(default)]
    device_name: Option<String>,
    #[serde(default)]
    synth_device: Option<String>,
    #[serde(default)]
    weight_format: Option<String>,
    #[serde(default)]
    logged_weights_gib: Option<f64>,
    #[serde(default)]
    logged_kv: Option<u64>,
    #[serde(default)]
    logged_activation_gib: Option<f64>,
    #[serde(default)]
    logged_non_torch_gib: Option<f64>,
    #[serde(default)]
    logged_kv_gib: Option<f64>,
    #[serde(default)]
    logged_concurrency: Option<f64>,
}

/// One predicted record.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The record id.
    pub id: String,
    /// Engine and modelled version.
    pub engine: String,
    /// The GPU (the data's `gpu_key`).
    pub gpu: String,
    /// The model folder.
    pub model: String,
    /// The engine's arguments as the log's author gave them.
    pub flags: String,
    /// Whether a constant was taken from this record (`fit`) or it tests them (`test`).
    pub fit: bool,
    /// Weights as logged (GiB).
    pub weights_logged_gib: f64,
    /// Weights as predicted (GiB).
    pub weights_predicted_gib: f64,
    /// The profile run's activation peak, logged and predicted (GiB), where logged.
    pub activation_gib: Option<(f64, f64)>,
    /// The KV cache memory, logged and predicted (GiB), where logged.
    pub kv_gib: Option<(f64, f64)>,
    /// KV cache tokens as logged (`None`: a record that logs only its weights, such as a
    /// post whose excerpt stops before the KV line or whose GPU total is not stated).
    pub kv_logged: Option<u64>,
    /// KV cache tokens as predicted.
    pub kv_predicted: u64,
    /// The maximum concurrency, logged and predicted, where logged.
    pub concurrency: Option<(f64, f64)>,
    /// The resolved `max_num_batched_tokens` and `max_num_seqs` of a vLLM record.
    pub batch: Option<(u64, u64)>,
    /// The tensor-parallel size.
    pub tp: u64,
    /// The pipeline-parallel size (the log's figures besides the KV tokens and the
    /// concurrency are stage 0's).
    pub pp: u64,
    /// The non-torch memory as logged (GiB), where logged.
    pub non_torch_logged_gib: Option<f64>,
    /// vLLM 0.19 records whose profile-run peak the sampler sets: the bytes per logit the
    /// logged peak implies beyond the logits in the model dtype, once the hidden states
    /// and the fused-MoE workspaces are taken off (docs/engines.md).
    pub sampler_extra_per_logit: Option<f64>,
}

/// The validation table.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    /// Predicted records, in the data's order.
    pub rows: Vec<Row>,
    /// Records not predicted, with why (and the constant a record fixes, if any).
    pub skipped: Vec<(String, String)>,
    /// The sources, by record id.
    pub sources: Vec<(String, String)>,
}

fn bad(path: &str, message: impl Into<String>) -> StudyError {
    StudyError::Settings {
        path: format!("docs/data/engine-logs.json: {path}"),
        message: message.into(),
    }
}

fn bytes_of_gib(gib: f64) -> u64 {
    (gib * GIB as f64).round() as u64
}

/// Predicts every record of `data` (the text of `docs/data/engine-logs.json`) whose settings
/// are complete, reading model folders under `root`.
pub fn validation_table(data: &str, root: &Path) -> Result<Table, StudyError> {
    let data: Data =
        serde_json::from_str(data).map_err(|e| bad("(file)", format!("not the data set: {e}")))?;
    let mut table = Table {
        rows: Vec::new(),
        skipped: Vec::new(),
        sources: Vec::new(),
    };
    for record in data.records {
        let m = record.jointplan;
        table
            .sources
            .push((record.id.clone(), record.source.clone()));
        if !m.predict {
            let why = match (&m.why, &m.role) {
                (Some(why), Some(role)) => format!("{why}; {role}"),
                (Some(why), None) => why.clone(),
                (None, _) => return Err(bad(&record.id, "a record not predicted says why")),
            };
            table.skipped.push((record.id, why));
            continue;
        }
        let field = |name: &str| bad(&format!("{}.jointplan.{name}", record.id), "is missing");
        let model_dir = m.model.as_deref().ok_or_else(|| field("model"))?;
        let choice: EngineChoice = m
            .engine
            .as_deref()
            .ok_or_else(|| field("engine"))?
            .parse()?;
        let args = EngineArgs::parse(&m.engine_args)?;
        let mut source = ModelSource::folder(root.join(model_dir));
        // A configuration folder without synth.json is synthesized on the record's device
        // file (the facts read only the configuration and the weight schema).
        source.device = m.synth_device.as_deref().map(|d| root.join(d));
        source.weight_format = m.weight_format.clone();
        let synthesized = source.synthesize()?;
        let facts = model_facts(&synthesized.request)?;
        let total = m
            .driver_total_gib
            .or(m.free_at_start_gib)
            .ok_or_else(|| field("driver_total_gib"))?;
        let device = engine::DeviceFacts {
            name: m.device_name.clone().unwrap_or_else(|| record.id.clone()),
            total_bytes: bytes_of_gib(total),
            total_source: "the engine's log (docs/data/engine-logs.json)".to_owned(),
            free_at_start_bytes: m.free_at_start_gib.map(bytes_of_gib),
            // The GPU generation (vLLM picks its MXFP4 kernels by it) is the stated device
            // file's; a record that states none has none.
            compute_capability: m
                .synth_device
                .as_ref()
                .and_then(|_| compute_capability(&synthesized.device.runtime)),
        };
        let report = engine::account(&choice, &facts, &device, &args)?;
        // llama.cpp logs buffers: the model buffer is its weights column, the compute
        // buffer its activation column, the KV buffer its KV column.
        let (weights_term, activation_term, kv_term) = match choice.engine {
            engine::Engine::LlamaCpp => ("model_buffer", "compute_buffer", "kv_buffer"),
            _ => ("weights", "activation_peak", "kv_cache"),
        };
        let weights = report
            .budget
            .iter()
            .find(|t| t.name == weights_term)
            .map(|t| t.bytes)
            .ok_or_else(|| bad(&record.id, "the engine's budget has no weights term"))?;
        let term = |name: &str| {
            report
                .budget
                .iter()
                .find(|t| t.name == name)
                .map(|t| t.bytes as f64 / GIB as f64)
        };
        let pair = |logged: Option<f64>, predicted: Option<f64>| logged.zip(predicted);
        let batch = report
            .args
            .get("max_num_batched_tokens")
            .and_then(|t| t.parse().ok())
            .zip(report.args.get("max_num_seqs").and_then(|s| s.parse().ok()));
        table.rows.push(Row {
            id: record.id.clone(),
            engine: format!("{}@{}", choice.engine, choice.version),
            gpu: record
                .gpu_key
                .or(record.gpu)
                .unwrap_or_else(|| "not stated".to_owned()),
            model: model_dir.to_owned(),
            flags: m.engine_args.join(" "),
            fit: m.role.as_deref().is_some_and(|r| r.starts_with("fit")),
            weights_logged_gib: m
                .logged_weights_gib
                .ok_or_else(|| field("logged_weights_gib"))?,
            weights_predicted_gib: weights as f64 / GIB as f64,
            activation_gib: pair(m.logged_activation_gib, term(activation_term)),
            kv_gib: pair(m.logged_kv_gib, term(kv_term)),
            kv_logged: m.logged_kv,
            kv_predicted: report.kv_cache_tokens,
            concurrency: m.logged_concurrency.map(|c| (c, report.max_concurrency)),
            batch,
            tp: args.count("tensor_parallel_size").unwrap_or(1),
            pp: args.count("pipeline_parallel_size").unwrap_or(1),
            non_torch_logged_gib: m.logged_non_torch_gib,
            sampler_extra_per_logit: match (choice.version.as_str(), batch) {
                // A stage-0 log of pipeline stages: the sampler runs on the last stage.
                _ if args.count("pipeline_parallel_size").unwrap_or(1) > 1 => None,
                ("0.19", Some((tokens, seqs))) => {
                    sampler_extra(&facts, &args, tokens, seqs, m.logged_activation_gib)?
                }
                _ => None,
            },
        });
    }
    Ok(table)
}

/// The bytes per logit beyond the logits (model dtype) that a vLLM 0.19 record's logged
/// activation peak implies, when the sampler sets that peak: (peak - hidden states -
/// fused-MoE workspaces) / (sequences x vocabulary) - dtype bytes (+ 4 for float32 logits,
/// which need no float32 copy). `None` when the logged peak is within 25% of the forward
/// rule's figure (the forward pass may have set it).
fn sampler_extra(
    facts: &engine::ModelFacts,
    args: &EngineArgs,
    tokens: u64,
    seqs: u64,
    logged: Option<f64>,
) -> Result<Option<f64>, StudyError> {
    use engine::vllm_activation as rules;
    let Some(logged) = logged else {
        return Ok(None);
    };
    let float32;
    let facts = if matches!(args.word("dtype"), Some("float32" | "float")) {
        float32 = facts.as_float32()?;
        &float32
    } else {
        facts
    };
    let copy = if facts.dtype_bytes == 4 { 4.0 } else { 0.0 };
    let tp = args.count("tensor_parallel_size").unwrap_or(1);
    let rows = seqs.min(tokens) as f64 * facts.vocab_size as f64;
    let hidden = (tokens * facts.hidden_size * facts.dtype_bytes) as f64;
    let forward = (tokens * rules::forward_bytes_per_token(facts, tp)?) as f64;
    // The forward rule cannot be what set a peak 25% above it: the sampler did.
    if logged * (GIB as f64) <= 1.25 * forward {
        return Ok(None);
    }
    let workspace = (tokens * rules::moe_workspace_bytes_per_token(facts, tp)?) as f64;
    Ok(Some(
        (logged * GIB as f64 - hidden - workspace) / rows - facts.dtype_bytes as f64 + copy,
    ))
}

/// The vLLM 0.19 constants fitted on the fit half of the records (docs/engines.md).
#[derive(Clone, Debug, PartialEq)]
pub struct Fit019 {
    /// Median bytes per logit beyond the logits, over the fit records the sampler sets.
    pub sampler_extra_per_logit: f64,
    /// Records that fit it.
    pub sampler_records: usize,
    /// Median non-torch GiB of the fit records without tensor parallelism (one GPU, or a
    /// stage-0 log of pipeline stages).
    pub non_torch_tp1_gib: f64,
    /// Records that fit it.
    pub non_torch_tp1_records: usize,
    /// Median non-torch GiB of the fit records with tensor parallelism.
    pub non_torch_tp_gib: f64,
    /// Records that fit it.
    pub non_torch_tp_records: usize,
}

impl Row {
    /// (predicted - logged) / logged of the weights, in percent.
    pub fn weights_error(&self) -> f64 {
        percent(self.weights_predicted_gib, self.weights_logged_gib)
    }
    /// (predicted - logged) / logged of the KV tokens, in percent, where logged.
    pub fn kv_error(&self) -> Option<f64> {
        self.kv_logged
            .map(|logged| percent(self.kv_predicted as f64, logged as f64))
    }
    /// The error of the activation peak, in percent, where logged.
    pub fn activation_error(&self) -> Option<f64> {
        self.activation_gib.map(|(l, p)| percent(p, l))
    }
    /// The error of the KV cache memory, in percent, where logged.
    pub fn kv_gib_error(&self) -> Option<f64> {
        self.kv_gib.map(|(l, p)| percent(p, l))
    }
    /// The error of the maximum concurrency, in percent, where logged.
    pub fn concurrency_error(&self) -> Option<f64> {
        self.concurrency.map(|(l, p)| percent(p, l))
    }
}

fn percent(predicted: f64, logged: f64) -> f64 {
    (predicted - logged) / logged * 100.0
}

/// The median |error| and the worst error (with its record) of one column over the test
/// records.
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnSummary {
    /// The column.
    pub column: &'static str,
    /// Test records with the column.
    pub records: usize,
    /// Median |error|, percent.
    pub median: f64,
    /// The error of largest magnitude, percent.
    pub worst: f64,
    /// Its record.
    pub worst_id: String,
}

/// The columns of the table, with the error each row has in it.
type Column = (&'static str, fn(&Row) -> Option<f64>);

const COLUMNS: [Column; 5] = [
    ("weights", |r| Some(r.weights_error())),
    ("activation peak", Row::activation_error),
    ("KV cache GiB", Row::kv_gib_error),
    ("KV cache tokens", Row::kv_error),
    ("concurrency", Row::concurrency_error),
];

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn cell(pair: Option<(f64, f64)>, decimals: usize) -> String {
    match pair {
        Some((l, p)) => format!("{l:.decimals$} / {p:.decimals$} ({:+.2}%)", percent(p, l)),
        None => "-".to_owned(),
    }
}

impl Table {
    /// Per column, the median and the worst error of the test records.
    pub fn summary(&self) -> Vec<ColumnSummary> {
        let tests: Vec<&Row> = self.rows.iter().filter(|r| !r.fit).collect();
        COLUMNS
            .iter()
            .map(|(column, error)| {
                let errors: Vec<(f64, &str)> = tests
                    .iter()
                    .filter_map(|r| error(r).map(|e| (e, r.id.as_str())))
                    .collect();
                let worst = errors
                    .iter()
                    .max_by(|a, b| a.0.abs().total_cmp(&b.0.abs()))
                    .map(|(e, id)| (*e, (*id).to_owned()))
                    .unwrap_or((0.0, String::new()));
                ColumnSummary {
                    column,
                    records: errors.len(),
                    median: median(errors.iter().map(|(e, _)| e.abs()).collect()),
                    worst: worst.0,
                    worst_id: worst.1,
                }
            })
            .collect()
    }

    /// The vLLM 0.19 constants as fitted on the records marked `fit` (medians), or `None`
    /// when the fit half holds no such record.
    pub fn fit_019(&self) -> Option<Fit019> {
        let fit: Vec<&Row> = self
            .rows
            .iter()
            .filter(|r| r.fit && r.engine == "vllm@0.19")
            .collect();
        let sampler: Vec<f64> = fit
            .iter()
            .filter_map(|r| r.sampler_extra_per_logit)
            .collect();
        let tp1: Vec<f64> = fit
            .iter()
            .filter(|r| r.tp == 1)
            .filter_map(|r| r.non_torch_logged_gib)
            .collect();
        let tpn: Vec<f64> = fit
            .iter()
            .filter(|r| r.tp > 1)
            .filter_map(|r| r.non_torch_logged_gib)
            .collect();
        if sampler.is_empty() || tp1.is_empty() || tpn.is_empty() {
            return None;
        }
        Some(Fit019 {
            sampler_records: sampler.len(),
            sampler_extra_per_logit: median(sampler),
            non_torch_tp1_records: tp1.len(),
            non_torch_tp1_gib: median(tp1),
            non_torch_tp_records: tpn.len(),
            non_torch_tp_gib: median(tpn),
        })
    }

    /// The table as markdown (the block between the markers of docs/engines-validation.md).
    pub fn markdown(&self) -> String {
        let mut out = String::from(
            "Each figure cell: logged / predicted (error).\n\n| record | engine | GPU | model | flags | role | weights (GiB) | activation peak (GiB) | KV cache (GiB) | KV cache tokens | max concurrency |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
        );
        for r in &self.rows {
            out.push_str(&format!(
                "| `{}` | {} | {} | `{}` | `{}` | {} | {} | {} | {} | {} | {} |\n",
                r.id,
                r.engine,
                r.gpu,
                r.model,
                r.flags,
                if r.fit { "fit" } else { "test" },
                cell(Some((r.weights_logged_gib, r.weights_predicted_gib)), 2),
                cell(r.activation_gib, 2),
                cell(r.kv_gib, 2),
                match (r.kv_logged, r.kv_error()) {
                    (Some(logged), Some(error)) =>
                        format!("{logged} / {} ({error:+.2}%)", r.kv_predicted),
                    _ => "-".to_owned(),
                },
                cell(r.concurrency, 2),
            ));
        }
        out.push_str(&format!(
            "\nTest records: {} of {} predicted.\n\n| column | test records | median \\|error\\| | worst | worst record |\n| --- | ---: | ---: | ---: | --- |\n",
            self.rows.iter().filter(|r| !r.fit).count(),
            self.rows.len()
        ));
        for c in self.summary() {
            out.push_str(&format!(
                "| {} | {} | {:.2}% | {:+.2}% | `{}` |\n",
                c.column, c.records, c.median, c.worst, c.worst_id
            ));
        }
        if let Some(fit) = self.fit_019() {
            out.push_str(&format!(
                "\nvLLM 0.19 constants fitted on the `fit` rows (medians): sampler {:.2} bytes per logit beyond the logits ({} records), non-torch {:.2} GiB without tensor parallelism ({} records), {:.2} GiB with tensor parallelism ({} records).\n",
                fit.sampler_extra_per_logit,
                fit.sampler_records,
                fit.non_torch_tp1_gib,
                fit.non_torch_tp1_records,
                fit.non_torch_tp_gib,
                fit.non_torch_tp_records
            ));
        }
        out.push_str("\nNot predicted:\n\n");
        for (id, why) in &self.skipped {
            out.push_str(&format!("* `{id}`: {why}\n"));
        }
        out.push_str("\nSources:\n\n");
        for (id, source) in &self.sources {
            out.push_str(&format!("* `{id}`: <{source}>\n"));
        }
        out
    }
}
