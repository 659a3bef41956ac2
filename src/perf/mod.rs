//! The performance model: time per node and provider (a roofline at the provider's
//! efficiency class, or a calibrated measurement), and the serving model built on it that
//! predicts time to first token, time per output token and throughput at a serving point.
//!
//! Everything is derived from the plan request's program (operations, bound tensors and
//! their stored encodings, states) and the device's performance figures; the rules and
//! their sources are in `docs/performance-model.md`.

pub mod calibration;
pub mod communication;
pub mod efficiency;
pub mod engine_profile;
pub mod lengths;
pub mod model;
pub mod profile;
pub mod selection_time;
pub mod serving;
pub mod work;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::request::{NodeId, PlanRequest, ProviderId};
use crate::synth::DeviceDescription;

pub use calibration::{Calibration, CalibrationEntry};
pub use engine_profile::{engine_names, engine_profile, EngineProfile, DEFAULT_ENGINE, ENGINES};
pub use lengths::Lengths;
pub use model::{PhaseTime, TimeModel};
pub use selection_time::CandidateTimes;
pub use serving::{ServingPoint, ServingPrediction};

/// A failure of the performance model.
#[derive(Debug, thiserror::Error)]
pub enum PerfError {
    /// The device file has no performance figures.
    #[error(
        "device {device} has no `performance` figures (peak_gflops, memory_bandwidth_gb_per_second, launch_overhead_nanoseconds): add them to its file, or pick a device of models/devices that has them"
    )]
    NoFigures {
        /// The device.
        device: String,
    },
    /// The serving point is unusable.
    #[error("{flag}: {message}")]
    ServingPoint {
        /// The flag to fix.
        flag: String,
        /// What is wrong.
        message: String,
    },
    /// An engine name no profile has.
    #[error("--engine {name}: not one of {known}")]
    UnknownEngine {
        /// The name given.
        name: String,
        /// The names known.
        known: String,
    },
    /// A calibration file could not be read or parsed.
    #[error(transparent)]
    CalibrationLoad(Box<crate::request::LoadError>),
    /// A calibration entry is unusable.
    #[error("{}: at {json_path}: {message}", file.display())]
    Calibration {
        /// The file.
        file: PathBuf,
        /// JSON path of the entry's field.
        json_path: String,
        /// What is wrong.
        message: String,
    },
    /// A request's node cannot be priced.
    #[error("node {node}: {message}")]
    Request {
        /// The node.
        node: String,
        /// What is missing.
        message: String,
    },
    /// A byte or element count overflowed.
    #[error("node {node}: {what} overflows u64")]
    Overflow {
        /// The node.
        node: String,
        /// What overflowed.
        what: String,
    },
    /// An invariant of the model itself broke (a bug, never bad input).
    #[error("internal performance-model error: {0}")]
    Internal(String),
}

/// One node kind's share of a phase: the roofline table's row.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KindTime {
    /// The operation id's last part.
    pub kind: String,
    /// Efficiency classes of its providers (`dense`, `paged`, ...), joined by `+`.
    pub class: String,
    /// Nodes of the kind.
    pub nodes: u64,
    /// Seconds in the steady decode step.
    pub decode_seconds: f64,
    /// Share of the decode step's node time.
    pub decode_share: f64,
    /// `compute` or `memory`: the larger side of the kind's decode roofline.
    pub decode_bound: &'static str,
    /// Seconds in the prompt's prefill.
    pub prefill_seconds: f64,
    /// Share of the prefill's node time.
    pub prefill_share: f64,
    /// `compute` or `memory`, in the prefill.
    pub prefill_bound: &'static str,
}

/// The predictions at a serving point: `plan --json`'s `performance`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Performance {
    /// What was served.
    pub serving_point: ServingPoint,
    /// The device's name.
    pub device: String,
    /// Devices serving (one: aggregated serving on the plan's device).
    pub devices: u64,
    /// Mean time to first token (seconds).
    pub ttft_seconds: f64,
    /// Mean time per output token after the first (seconds).
    pub tpot_seconds: f64,
    /// Output tokens per second, all requests.
    pub output_tokens_per_second: f64,
    /// Output tokens per second per device.
    pub output_tokens_per_second_per_device: f64,
    /// Output tokens per second of one request (`1 / tpot`).
    pub output_tokens_per_second_per_user: f64,
    /// One prompt alone, in chunks of the budget (at the mean lengths when they vary).
    pub prefill: PhaseTime,
    /// The steady decode step (`min(C, max_sequences)` requests at context `I + O/2`; at
    /// the mean lengths when they vary).
    pub decode_step: PhaseTime,
    /// Node kinds by decode time, largest first.
    pub by_kind: Vec<KindTime>,
    /// Scheduler steps the serving simulation ran.
    pub simulated_steps: u64,
    /// The rules the figures follow.
    pub rules: Vec<&'static str>,
}

/// The rules every [`Performance`] follows (printed with it).
pub const RULES: &[&str] = &[
    "node time = max(FLOPs / (eff_c x peak[dtype]), bytes / (m_device x eff_m x bandwidth)) + kernels x launch overhead, or the calibrated time; m_device = the device's memory factor fitted on the validation fit half, in decode steps (1 without one, and in steps with a prompt chunk)",
    "bytes = stored weight bytes (expert groups: the expected touched share 1 - (1 - k/E)^rows) + activations + KV read at the context (capped by the sliding window) + KV written + recurrent state read and written",
    "FLOPs = 2 x rows x matrix elements + attention pairs x FLOPs per pair + recurrent updates",
    "serving = closed loop of C clients, continuous batching, decodes first then prompt chunks up to the scheduled-token budget, 4 x C requests; step = node times + engine host time",
    "tokens/s per user = 1 / TPOT; per device = total / devices",
];

/// The time model of a built plan: [`time_model`] with each node's provider the one the
/// plan selected.
pub fn plan_time_model(
    request: &PlanRequest,
    plan: &crate::plan::ExecutionPlan,
    device: &DeviceDescription,
    calibration: Calibration,
) -> Result<TimeModel, PerfError> {
    let providers: BTreeMap<&NodeId, &ProviderId> = plan
        .payload
        .nodes
        .iter()
        .map(|n| (&n.id, &n.selection.selected_provider))
        .collect();
    time_model(
        request,
        |id| providers.get(id).copied(),
        device,
        calibration,
    )
}

/// Builds the model of `request` with `providers` on `device`, or says why it cannot.
pub fn time_model<'a>(
    request: &PlanRequest,
    providers: impl Fn(&NodeId) -> Option<&'a ProviderId>,
    device: &DeviceDescription,
    calibration: Calibration,
) -> Result<TimeModel, PerfError> {
    let figures = device
        .performance
        .as_ref()
        .ok_or_else(|| PerfError::NoFigures {
            device: device.name.clone(),
        })?;
    TimeModel::new(request, providers, &device.name, figures, calibration)
}

/// Predicts `point` for the model.
pub fn predict(model: &TimeModel, point: &ServingPoint) -> Result<Performance, PerfError> {
    point.validate()?;
    let engine = engine_profile(&point.engine)
        .ok_or_else(|| PerfError::UnknownEngine {
            name: point.engine.clone(),
            known: engine_names(),
        })?
        .for_point(point);
    let served = serving::simulate(model, &engine, point)?;
    // One prompt and the steady decode step at the mean lengths (the point itself when
    // they are fixed).
    let mean = point.at_mean_lengths();
    let prefill = serving::prefill_time(model, &engine, &mean);
    let decode_step = serving::decode_step_time(model, &engine, &mean);
    let by_kind = by_kind(model, &engine, &mean);
    let mut rules = RULES.to_vec();
    rules.extend(engine.rule());
    rules.extend(point.lengths.rule());
    Ok(Performance {
        serving_point: point.clone(),
        device: model.device_name.clone(),
        devices: 1,
        ttft_seconds: served.ttft_seconds,
        tpot_seconds: served.tpot_seconds,
        output_tokens_per_second: served.output_tokens_per_second,
        output_tokens_per_second_per_device: served.output_tokens_per_second,
        output_tokens_per_second_per_user: served.output_tokens_per_second_per_user,
        prefill,
        decode_step,
        by_kind,
        simulated_steps: served.steps,
        rules,
    })
}

fn bound(t: &PhaseTime) -> &'static str {
    if t.compute_bound() {
        "compute"
    } else {
        "memory"
    }
}

fn by_kind(model: &TimeModel, engine: &EngineProfile, point: &ServingPoint) -> Vec<KindTime> {
    let decode = serving::decode_shape(point);
    let prefill = work::StepShape::prefill(point.input_tokens.min(point.scheduled_token_budget));
    let mut kinds: BTreeMap<&str, (PhaseTime, PhaseTime, u64, Vec<&str>)> = BTreeMap::new();
    for group in &model.groups {
        let n = group.nodes.len() as f64;
        let d = model.node_time(group, &decode, engine.decode_launch_factor);
        let p = model.node_time(group, &prefill, engine.prefill_launch_factor);
        let entry = kinds.entry(group.cost.kind.as_str()).or_default();
        for (into, from) in [(&mut entry.0, d), (&mut entry.1, p)] {
            into.compute_seconds += from.compute_seconds * n;
            into.memory_seconds += from.memory_seconds * n;
            into.overhead_seconds += from.overhead_seconds * n;
            into.seconds += from.seconds * n;
        }
        entry.2 += group.nodes.len() as u64;
        if !entry.3.contains(&group.class.name) {
            entry.3.push(group.class.name);
        }
    }
    let decode_total: f64 = kinds.values().map(|k| k.0.seconds).sum();
    let prefill_total: f64 = kinds.values().map(|k| k.1.seconds).sum();
    let share = |x: f64, total: f64| if total > 0.0 { x / total } else { 0.0 };
    let mut rows: Vec<KindTime> = kinds
        .into_iter()
        .map(|(kind, (d, p, nodes, classes))| KindTime {
            kind: kind.to_owned(),
            class: classes.join("+"),
            nodes,
            decode_seconds: d.seconds,
            decode_share: share(d.seconds, decode_total),
            decode_bound: bound(&d),
            prefill_seconds: p.seconds,
            prefill_share: share(p.seconds, prefill_total),
            prefill_bound: bound(&p),
        })
        .collect();
    rows.sort_by(|a, b| {
        b.decode_seconds
            .total_cmp(&a.decode_seconds)
            .then_with(|| a.kind.cmp(&b.kind))
    });
    rows
}
