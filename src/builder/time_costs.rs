//! The candidates' time costs of a time objective (`min-tpot`, `min-ttft`,
//! `max-throughput`, or `weighted` with time weights): each node's candidate providers
//! priced by the performance model ([`crate::perf::CandidateTimes`]) at the serving point
//! the build options carry, with the device figures recorded beside it. `verify` rebuilds
//! from the recorded settings alone, so it prices the same candidates the same way.

use std::collections::BTreeMap;

use crate::candidates::{NodeCandidates, TimeTable};
use crate::perf::{CandidateTimes, ServingPoint};
use crate::plan::RecordedServing;
use crate::request::PlanRequest;
use crate::selection::{SelectionError, TimeWeights};
use crate::synth::DevicePerformance;

use super::error::PlanError;
use super::BuildOptions;

/// The time weights as recorded in a plan: metric name → weight (zero weights left out).
pub(super) fn recorded_time_weights(t: &TimeWeights) -> BTreeMap<String, u32> {
    [
        ("tpot", t.tpot),
        ("ttft", t.ttft),
        ("throughput", t.throughput),
    ]
    .into_iter()
    .filter(|(_, w)| *w != 0)
    .map(|(k, w)| (k.to_owned(), w))
    .collect()
}

/// The time weights of a recorded map; an unknown metric is an error naming it.
pub(super) fn time_weights_of(map: &BTreeMap<String, u32>) -> Result<TimeWeights, SelectionError> {
    let mut t = TimeWeights::default();
    for (k, &w) in map {
        match k.as_str() {
            "tpot" => t.tpot = w,
            "ttft" => t.ttft = w,
            "throughput" => t.throughput = w,
            other => {
                return Err(SelectionError::BadInput(format!(
                    "weights.time: unknown metric `{other}` (expected tpot, ttft or throughput)"
                )))
            }
        }
    }
    Ok(t)
}

/// The device figures of a recorded serving point.
pub fn figures_of(serving: &RecordedServing) -> Result<DevicePerformance, PlanError> {
    let value = serde_json::json!({
        "peak_gflops": serving.peak_gflops,
        "memory_bandwidth_gb_per_second": serving.memory_bandwidth_gb_per_second,
        "launch_overhead_nanoseconds": serving.launch_overhead_nanoseconds,
    });
    let figures: DevicePerformance = serde_json::from_value(value).map_err(|e| {
        PlanError::TimeObjective(format!(
            "the recorded device figures of {} are unusable: {e}",
            serving.device
        ))
    })?;
    if let Some((field, problem)) = figures.problem() {
        return Err(PlanError::TimeObjective(format!(
            "device {}: {field} {problem}",
            serving.device
        )));
    }
    Ok(figures)
}

/// The serving point to record for `figures` of device `device` (what `plan` stores).
pub fn recorded_serving(
    concurrency: u64,
    input_tokens: u64,
    output_tokens: u64,
    engine: &str,
    device: &str,
    figures: &DevicePerformance,
) -> RecordedServing {
    let peak = serde_json::to_value(&figures.peak_gflops)
        .ok()
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default();
    RecordedServing {
        concurrency,
        input_tokens,
        output_tokens,
        engine: engine.to_owned(),
        device: device.to_owned(),
        peak_gflops: peak,
        memory_bandwidth_gb_per_second: figures.memory_bandwidth_gb_per_second,
        launch_overhead_nanoseconds: figures.launch_overhead_nanoseconds,
    }
}

/// The serving point of `serving` under `request`'s policy (its scheduled-token budget
/// and sequence ceiling).
pub fn serving_point(request: &PlanRequest, serving: &RecordedServing) -> ServingPoint {
    ServingPoint {
        concurrency: serving.concurrency,
        input_tokens: serving.input_tokens,
        output_tokens: serving.output_tokens,
        engine: serving.engine.clone(),
        scheduled_token_budget: request.policy.maximum_scheduled_tokens,
        maximum_sequences: u64::from(request.policy.maximum_active_sequences),
        simulated_requests: serving.concurrency.saturating_mul(4),
        lengths: crate::perf::Lengths::Fixed,
        context_tokens: None,
        chunked_prefill: None,
    }
}

/// The time costs of every candidate when the objective has a time term; `None` otherwise.
pub(super) fn candidate_times(
    request: &PlanRequest,
    options: &BuildOptions,
    candidates: &[NodeCandidates<'_>],
) -> Result<Option<TimeTable>, PlanError> {
    let objective = options.selection.objective.as_ref();
    if objective.time_weights().is_none() {
        return Ok(None);
    }
    let Some(serving) = &options.serving else {
        return Err(PlanError::TimeObjective(format!(
            "objective `{}` needs a serving point to price the candidates: give --concurrency, --input-tokens and --output-tokens (and a device with performance figures)",
            objective.name()
        )));
    };
    let figures = figures_of(serving)?;
    let point = serving_point(request, serving);
    let pricer = CandidateTimes::new(request, &serving.device, &figures, &point)
        .map_err(|e| PlanError::TimeObjective(e.to_string()))?;
    let mut table = TimeTable::new();
    for node in candidates {
        let mut row = BTreeMap::new();
        for c in &node.candidates {
            let provider = &c.plan.provider_id;
            let costs = pricer.costs(node.node, provider).ok_or_else(|| {
                PlanError::TimeObjective(format!("node {} has no performance profile", node.node))
            })?;
            row.insert(provider.clone(), costs);
        }
        table.insert(node.node.clone(), row);
    }
    Ok(Some(table))
}
