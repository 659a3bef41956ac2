//! The smallest number of identical devices that serves a model: for each device file of a
//! directory, the placement with the fewest devices among up to `max_count` of them on one
//! NVLink domain (`jointplan fit MODEL --devices DIR --max-count N`).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::builder::BuildOptions;
use crate::synth::ModelSource;

use super::problem::Objective;
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
        tensor_parallel: None,
        pipeline_parallel: None,
        host_offload: false,
        host_memory: None,
        objective: Objective::FewestDevices,
        serving: None,
        policy: None,
        why_not: None,
    };
    let mut rows = Vec::with_capacity(files.len());
    for file in files {
        let set = DeviceSet::uniform(&file, max_count, None)?;
        let memory = set.kinds[0].description.total_memory_bytes;
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
        };
        match place(source, &set, &settings, options, budget) {
            Ok(placed) => {
                let p = &placed.plan.payload;
                row.count = Some(p.devices_used);
                row.total_memory_bytes = p.devices_used.checked_mul(memory);
                row.tensor_parallel = Some(p.tensor_parallel);
                row.pipeline_parallel = Some(p.pipeline_parallel);
                row.placement_id = Some(placed.plan.placement_id.clone());
                row.certificate = Some(placed.certificate.method.clone());
            }
            Err(PlacementError::Infeasible(reason)) => row.reason = Some(reason),
            Err(other) => return Err(other),
        }
        rows.push(row);
    }
    rows.sort_by(|a, b| {
        (a.count.is_none(), a.total_memory_bytes, &a.device_file).cmp(&(
            b.count.is_none(),
            b.total_memory_bytes,
            &b.device_file,
        ))
    });
    Ok(rows)
}
