//! The smallest number of identical devices that serves a model: for each device file of a
//! directory, the placement with the fewest devices among up to `max_count` of them on one
//! NVLink domain (`jointplan fit MODEL --devices DIR --max-count N`), ranked by total memory
//! or (`--by price`) by the price per hour of the set (count x the file's
//! `price_per_hour`: the fewest devices of a file are also its cheapest set).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::builder::BuildOptions;
use crate::synth::device::PricePerHour;
use crate::synth::ModelSource;

use super::{place, DeviceSet, PlacementError, Settings};

/// One device file's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

/// [`smallest_counts_by`] under `query`. Without an engine, one placement of `max_count`
/// devices under `fewest-devices` answers each file exactly (the fewest devices it uses).
/// With an engine, which runs at one tensor-parallel degree in one stage, each count `n`
/// from 1 is placed at degree `n` with the engine's budget, and the answer is the first
/// that places.
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
        let memory = set.kinds[0].description.total_memory_bytes;
        let price = set.kinds[0].description.price_per_hour;
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
        };
        let outcome = if query.engine.is_some() {
            first_count(source, &file, max_count, &settings, options, budget, query)?
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

/// The placement of the first count `n` in `1..=max_count` of `file`'s devices that places
/// under `settings` at the engine's degree `n`, or why none does (the last count's reason).
/// Errors other than a count that cannot serve stop the search.
fn first_count(
    source: &ModelSource,
    file: &Path,
    max_count: u32,
    settings: &Settings,
    options: &BuildOptions,
    budget: u64,
    query: &CountQuery,
) -> Result<Result<super::Placed, PlacementError>, PlacementError> {
    let mut last = format!("no count up to {max_count} serves it");
    for n in 1..=max_count {
        let set = DeviceSet::uniform(file, n, None)?;
        let settings = match &query.engine {
            Some((choice, args)) => {
                let policy = match &settings.policy {
                    Some(policy) => policy.clone(),
                    None => source
                        .policy_preset()
                        .map_err(|e| PlacementError::Synth(Box::new(e)))?,
                };
                let engine = super::serving_engine::engine_on_set(
                    source,
                    &set,
                    &policy,
                    choice,
                    args,
                    Some(n),
                    None,
                )?;
                engine.settings(settings)
            }
            None => settings.clone(),
        };
        match place(source, &set, &settings, options, budget) {
            Ok(placed) => return Ok(Ok(placed)),
            Err(PlacementError::Infeasible(why)) => {
                last = format!("{n} device(s): {}", why.lines().next().unwrap_or(&why))
            }
            // A degree the model cannot take at `n` (the engine's pinned degree).
            Err(PlacementError::Usage(why)) if query.engine.is_some() => {
                last = format!("{n} device(s): {why}")
            }
            Err(other) => return Err(other),
        }
    }
    Ok(Err(PlacementError::Infeasible(last)))
}
