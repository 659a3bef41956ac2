//! jointplan's engine accounting against published engine startup logs: the table of
//! `docs/engines.md` (issue 37, item 6), computed from `docs/data/engine-logs.json`.
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

use super::engine_facts::model_facts;
use super::StudyError;

#[derive(Deserialize)]
struct Data {
    records: Vec<Record>,
}

#[derive(Deserialize)]
struct Record {
    id: String,
    source: String,
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
    logged_weights_gib: Option<f64>,
    #[serde(default)]
    logged_kv: Option<u64>,
}

/// One predicted record.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The record id.
    pub id: String,
    /// Engine and modelled version.
    pub engine: String,
    /// The model folder.
    pub model: String,
    /// Whether a constant was taken from this record (`fit`) or it tests them (`test`).
    pub fit: bool,
    /// Weights as logged (GiB).
    pub weights_logged_gib: f64,
    /// Weights as predicted (GiB).
    pub weights_predicted_gib: f64,
    /// KV cache tokens as logged.
    pub kv_logged: u64,
    /// KV cache tokens as predicted.
    pub kv_predicted: u64,
}

impl Row {
    /// (predicted - logged) / logged of the weights, in percent.
    pub fn weights_error(&self) -> f64 {
        (self.weights_predicted_gib - self.weights_logged_gib) / self.weights_logged_gib * 100.0
    }
    /// (predicted - logged) / logged of the KV tokens, in percent.
    pub fn kv_error(&self) -> f64 {
        (self.kv_predicted as f64 - self.kv_logged as f64) / self.kv_logged as f64 * 100.0
    }
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
        let synthesized = ModelSource::folder(root.join(model_dir)).synthesize()?;
        let facts = model_facts(&synthesized.request)?;
        let total = m
            .driver_total_gib
            .or(m.free_at_start_gib)
            .ok_or_else(|| field("driver_total_gib"))?;
        let device = engine::DeviceFacts {
            name: record.id.clone(),
            total_bytes: bytes_of_gib(total),
            total_source: "the engine's log (docs/data/engine-logs.json)".to_owned(),
            free_at_start_bytes: m.free_at_start_gib.map(bytes_of_gib),
        };
        let report = engine::account(&choice, &facts, &device, &args)?;
        let weights = report
            .budget
            .iter()
            .find(|t| t.name == "weights")
            .map(|t| t.bytes)
            .ok_or_else(|| bad(&record.id, "the engine's budget has no weights term"))?;
        table.rows.push(Row {
            id: record.id.clone(),
            engine: format!("{}@{}", choice.engine, choice.version),
            model: model_dir.to_owned(),
            fit: m.role.as_deref().is_some_and(|r| r.starts_with("fit")),
            weights_logged_gib: m
                .logged_weights_gib
                .ok_or_else(|| field("logged_weights_gib"))?,
            weights_predicted_gib: weights as f64 / GIB as f64,
            kv_logged: m.logged_kv.ok_or_else(|| field("logged_kv"))?,
            kv_predicted: report.kv_cache_tokens,
        });
    }
    Ok(table)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

impl Table {
    /// The median and the worst (largest magnitude) error of the test records, in percent,
    /// with the worst record's id: `(weights, kv)`.
    pub fn summary(&self) -> ((f64, f64, String), (f64, f64, String)) {
        let tests: Vec<&Row> = self.rows.iter().filter(|r| !r.fit).collect();
        let of = |error: &dyn Fn(&Row) -> f64| {
            let worst = tests
                .iter()
                .max_by(|a, b| error(a).abs().total_cmp(&error(b).abs()))
                .map(|r| (error(r), r.id.clone()))
                .unwrap_or((0.0, String::new()));
            (
                median(tests.iter().map(|r| error(r).abs()).collect()),
                worst.0,
                worst.1,
            )
        };
        (of(&Row::weights_error), of(&Row::kv_error))
    }

    /// The table as markdown (the block between the markers of docs/engines.md).
    pub fn markdown(&self) -> String {
        let mut out = String::from(
            "| record | engine | model | role | weights logged (GiB) | predicted | error | KV tokens logged | predicted | error |\n| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n",
        );
        for r in &self.rows {
            out.push_str(&format!(
                "| `{}` | {} | `{}` | {} | {:.4} | {:.4} | {:+.2}% | {} | {} | {:+.2}% |\n",
                r.id,
                r.engine,
                r.model,
                if r.fit { "fit" } else { "test" },
                r.weights_logged_gib,
                r.weights_predicted_gib,
                r.weights_error(),
                r.kv_logged,
                r.kv_predicted,
                r.kv_error()
            ));
        }
        let ((wm, ww, wid), (km, kw, kid)) = self.summary();
        out.push_str(&format!(
            "\nTest records ({} of {}): weights median |error| {wm:.2}%, worst {ww:+.2}% (`{wid}`); KV cache tokens median |error| {km:.2}%, worst {kw:+.2}% (`{kid}`).\n\nNot predicted:\n\n",
            self.rows.iter().filter(|r| !r.fit).count(),
            self.rows.len()
        ));
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
