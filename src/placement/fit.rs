//! The smallest number of identical devices that serves a model: for each device file of a
//! directory, the placement with the fewest devices among up to `max_count` of them on the
//! file's own peer link (`jointplan fit MODEL --devices DIR --max-count N`), ranked by total
//! memory or (`--by price`) by the price per hour of the set (count x the file's
//! `price_per_hour`: the fewest devices of a file are also its cheapest set). With a
//! latency target, the fewest devices whose placement at the serving point meets it, timed
//! by the device file's `links`. The model is gathered once per device file
//! ([`super::reuse`]), whatever the counts tried.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::builder::BuildOptions;
use crate::synth::device::PricePerHour;
use crate::synth::ModelSource;

use crate::study::timing::LatencyTarget;
use crate::synth::DeviceDescription;

use super::timing::Serving;
use super::{place, place_with, DeviceSet, Gathered, Objective, PlacementError, Reasons, Settings};

/// One device file's answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CountFit {
    /// The device file.
    pub device_file: String,
    /// Its memory.
    pub device_memory_bytes: u64,
    /// The fewest devices that serve the policy (`null`: not even `max_count`).
    pub count: Option<u64>,
    /// `count x device memory`.
    pub total_memory_bytes: Option<u64>,
    /// The placement's tensor-parallel degree and stages.
    pub tensor_parallel: Option<u32>,
    /// Its pipeline stages.
    pub pipeline_parallel: Option<u32>,
    /// Its id.
    pub placement_id: Option<String>,
    /// How it was certified (`exhaustive` or `dynamic-program`).
    pub certificate: Option<String>,
    /// Why no count up to `max_count` serves it.
    pub reason: Option<String>,
    /// The device file's price per hour, US dollars (absent: the file gives none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_per_hour: Option<PricePerHour>,
    /// `count x price_per_hour`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_price_per_hour: Option<PricePerHour>,
    /// With a latency target: the answer's simulated mean time to first token at the
    /// serving point, seconds (as `plan --concurrency C` prints it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_seconds: Option<f64>,
    /// With a latency target: the answer's simulated mean time per output token, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_seconds: Option<f64>,
}

/// How `fit --devices DIR --max-count N` ranks the device files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RankBy {
    /// Least total memory (count x device memory) first.
    Count,
    /// Least price per hour (count x `price_per_hour`) first; files without a price come
    /// after every priced one, unranked (in file order).
    Price,
}

impl RankBy {
    /// The rank of a name (`count`, `price`).
    pub fn from_name(name: &str) -> Option<RankBy> {
        match name {
            "count" => Some(RankBy::Count),
            "price" => Some(RankBy::Price),
            _ => None,
        }
    }
}

/// What the fewest devices must serve besides the model's policy (`fit --devices DIR
/// --max-count N` with `--context` or `--engine`).
#[derive(Clone, Debug, Default)]
pub struct CountQuery {
    /// The policy preset with the command line's fields (`None`: the model's own).
    pub policy: Option<crate::synth::PolicyPreset>,
    /// A serving engine and its arguments: each count `n` is the engine at tensor
    /// parallel `n` in one stage, every device held to its budget
    /// ([`super::serving_engine`]).
    pub engine: Option<(crate::engine::EngineChoice, crate::engine::EngineArgs)>,
    /// A latency target at a serving point: each count `n` from 1 is placed at the point
    /// under `min-tpot` (`min-ttft` with a TTFT target alone), timed by the device file's
    /// `links`, and the answer is the first whose simulated figures meet the target.
    pub latency: Option<CountLatency>,
}

/// A latency target of `fit --devices DIR --max-count N` and the serving point it holds at.
#[derive(Clone, Debug)]
pub struct CountLatency {
    /// The targets (TPOT and/or TTFT, seconds).
    pub target: LatencyTarget,
    /// The serving point (concurrency, prompt and output tokens, the engine's time profile).
    pub serving: Serving,
}

impl CountLatency {
    /// The objective a count is placed under: `min-tpot` with a TPOT target, else
    /// `min-ttft`.
    pub fn objective(&self) -> Objective {
        if self.target.max_tpot_seconds.is_some() {
            Objective::MinTpot
        } else {
            Objective::MinTtft
        }
    }

    /// Why the simulated figures `(ttft, tpot)` (seconds) miss the target, or `None`.
    fn missed(&self, ttft: f64, tpot: f64) -> Option<String> {
        let mut missed = Vec::new();
        if let Some(t) = self.target.max_tpot_seconds.filter(|t| tpot > *t) {
            missed.push(format!("TPOT {:.3} ms > {:.3} ms", tpot * 1e3, t * 1e3));
        }
        if let Some(t) = self.target.max_ttft_seconds.filter(|t| ttft > *t) {
            missed.push(format!("TTFT {:.3} ms > {:.3} ms", ttft * 1e3, t * 1e3));
        }
        (!missed.is_empty()).then(|| missed.join(", "))
    }
}

/// Every `*.json` device file of `dir`, each with the fewest devices (at most `max_count`)
/// that serve `source` under its policy: serving files first, least total memory first.
pub fn smallest_counts(
    source: &ModelSource,
    dir: &Path,
    max_count: u32,
    options: &BuildOptions,
    budget: u64,
) -> Result<Vec<CountFit>, PlacementError> {
    smallest_counts_by(source, dir, max_count, options, budget, RankBy::Count)
}

/// [`smallest_counts`] ranked `by` total memory or by price per hour.
pub fn smallest_counts_by(
    source: &ModelSource,
    dir: &Path,
    max_count: u32,
    options: &BuildOptions,
    budget: u64,
    by: RankBy,
) -> Result<Vec<CountFit>, PlacementError> {
    smallest_counts_for(
        source,
        dir,
        max_count,
        options,
        budget,
        by,
        &CountQuery::default(),
    )
}

/// [`smallest_counts_by`] under `query`. Without an engine or a latency target, one
/// placement of `max_count` devices under `fewest-devices` answers each file exactly (the
/// fewest devices it uses). With an engine, which runs at one tensor-parallel degree in one
/// stage, each count `n` from 1 is placed at degree `n` with the engine's budget; with a
/// latency target, each `n` is placed at the serving point under its objective; the answer
/// is the first count that places (and meets the target). A `Usage` error of a count under
/// an engine (a degree the model cannot take) is that count's reason, not the answer's.
pub fn smallest_counts_for(
    source: &ModelSource,
    dir: &Path,
    max_count: u32,
    options: &BuildOptions,
    budget: u64,
    by: RankBy,
    query: &CountQuery,
) -> Result<Vec<CountFit>, PlacementError> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        PlacementError::Usage(format!(
            "--devices {}: cannot read the directory: {e}",
            dir.display()
        ))
    })?;
    let mut files: Vec<std::path::PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(PlacementError::Usage(format!(
            "--devices {}: no device files (*.json) in it",
            dir.display()
        )));
    }
    let settings = Settings {
        policy: query.policy.clone(),
        ..Settings::default()
    };
    let mut rows = Vec::with_capacity(files.len());
    for file in files {
        let set = DeviceSet::uniform(&file, max_count, None)?;
        let description = set.kinds[0].description.clone();
        let memory = description.total_memory_bytes;
        let price = description.price_per_hour;
        let mut row = CountFit {
            device_file: file.display().to_string(),
            device_memory_bytes: memory,
            count: None,
            total_memory_bytes: None,
            tensor_parallel: None,
            pipeline_parallel: None,
            placement_id: None,
            certificate: None,
            reason: None,
            price_per_hour: price,
            total_price_per_hour: None,
            ttft_seconds: None,
            tpot_seconds: None,
        };
        let outcome = if query.engine.is_some() || query.latency.is_some() {
            // One gathering of the model per device file, whatever the counts tried.
            let mut gathered = Gathered::kept();
            let search = Search {
                source,
                file: &file,
                description: &description,
                settings: &settings,
                options,
                budget,
                query,
            };
            search.first_count(max_count, &mut gathered)?
        } else {
            place(source, &set, &settings, options, budget)
        };
        match outcome {
            Ok(placed) => {
                let p = &placed.plan.payload;
                row.count = Some(p.devices_used);
                row.total_memory_bytes = p.devices_used.checked_mul(memory);
                row.tensor_parallel = Some(p.tensor_parallel);
                row.pipeline_parallel = Some(p.pipeline_parallel);
                row.placement_id = Some(placed.plan.placement_id.clone());
                row.certificate = Some(placed.certificate.method.clone());
                row.total_price_per_hour = price.and_then(|p| {
                    p.micro_usd
                        .checked_mul(placed.plan.payload.devices_used)
                        .map(|micro_usd| PricePerHour { micro_usd })
                });
                if query.latency.is_some() {
                    row.ttft_seconds = placed.performance.as_ref().map(|p| p.ttft_seconds);
                    row.tpot_seconds = placed.performance.as_ref().map(|p| p.tpot_seconds);
                }
            }
            Err(PlacementError::Infeasible(reason)) => row.reason = Some(reason),
            Err(other) => return Err(other),
        }
        rows.push(row);
    }
    match by {
        RankBy::Count => rows.sort_by(|a, b| {
            (a.count.is_none(), a.total_memory_bytes, &a.device_file).cmp(&(
                b.count.is_none(),
                b.total_memory_bytes,
                &b.device_file,
            ))
        }),
        // Serving and priced first by price; then serving without a price (unranked, file
        // order); then the files that do not serve.
        RankBy::Price => rows.sort_by(|a, b| {
            let key = |r: &CountFit| {
                (
                    r.count.is_none(),
                    r.total_price_per_hour.is_none(),
                    r.total_price_per_hour,
                    r.device_file.clone(),
                )
            };
            key(a).cmp(&key(b))
        }),
    }
    Ok(rows)
}

/// One device file's search over counts.
struct Search<'a> {
    source: &'a ModelSource,
    file: &'a Path,
    description: &'a DeviceDescription,
    settings: &'a Settings,
    options: &'a BuildOptions,
    budget: u64,
    query: &'a CountQuery,
}

impl Search<'_> {
    /// The settings count `n` is placed under: the serving point and its objective with a
    /// latency target; the engine's degree `n`, one stage and its budget with an engine.
    fn settings_at(
        &self,
        set: &DeviceSet,
        n: u32,
        gathered: &mut Gathered,
    ) -> Result<Settings, PlacementError> {
        let mut settings = self.settings.clone();
        if let Some(latency) = &self.query.latency {
            settings.serving = Some(latency.serving.clone());
            settings.objective = latency.objective();
        }
        let Some((choice, args)) = &self.query.engine else {
            return Ok(settings);
        };
        let policy = match &settings.policy {
            Some(policy) => policy.clone(),
            None => self
                .source
                .policy_preset()
                .map_err(|e| PlacementError::Synth(Box::new(e)))?,
        };
        let engine = super::serving_engine::engine_on_set_gathered(
            self.source,
            set,
            &policy,
            choice,
            args,
            Some(n),
            None,
            gathered,
        )?;
        Ok(engine.settings(&settings))
    }

    /// The placement of the first count `n` in `1..=max_count` that places under the
    /// query (at the engine's degree `n`; meeting the latency target), or why none does
    /// (the last count's reason). Errors other than a count that cannot serve stop the
    /// search.
    fn first_count(
        &self,
        max_count: u32,
        gathered: &mut Gathered,
    ) -> Result<Result<super::Placed, PlacementError>, PlacementError> {
        let mut last = format!("no count up to {max_count} serves it");
        // Without a peer link, more than one device cannot be timed: count 1 only.
        let unlinked = self.query.latency.is_some()
            && self
                .description
                .links
                .as_ref()
                .and_then(|l| l.peer.as_ref())
                .is_none();
        let top = if unlinked {
            max_count.min(1)
        } else {
            max_count
        };
        for n in 1..=top {
            let set = DeviceSet::uniform_of(self.file, self.description.clone(), n, None)?;
            let settings = self.settings_at(&set, n, gathered)?;
            // Only the first line of an infeasible count's reason is kept: no levers.
            match place_with(
                self.source,
                &set,
                &settings,
                self.options,
                self.budget,
                gathered,
                Reasons::Brief,
            ) {
                Ok(placed) => {
                    let Some(latency) = &self.query.latency else {
                        return Ok(Ok(placed));
                    };
                    let p = placed.performance.as_ref().ok_or_else(|| {
                        PlacementError::Internal(
                            "a placement at a serving point without its prediction".to_owned(),
                        )
                    })?;
                    match latency.missed(p.ttft_seconds, p.tpot_seconds) {
                        None => return Ok(Ok(placed)),
                        Some(missed) => {
                            last = format!(
                                "{n} device(s): the best placement (tensor parallel {}, pipeline {}) misses the target: {missed}",
                                placed.plan.payload.tensor_parallel,
                                placed.plan.payload.pipeline_parallel
                            )
                        }
                    }
                }
                Err(PlacementError::Infeasible(why)) => {
                    last = format!("{n} device(s): {}", why.lines().next().unwrap_or(&why))
                }
                // A degree the model cannot take at `n` (the engine's pinned degree).
                Err(PlacementError::Usage(why)) if self.query.engine.is_some() => {
                    last = format!("{n} device(s): {why}")
                }
                Err(other) => return Err(other),
            }
        }
        if unlinked && max_count > 1 {
            last = format!(
                "{last}; more devices are not timed: {} states no `links.peer` (add the link between two such devices to time tensor parallelism; docs/placement.md, \"Device files: links\")",
                self.file.display()
            );
        }
        Ok(Err(PlacementError::Infeasible(last)))
    }
}
