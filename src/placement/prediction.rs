//! What a placement's serving point is predicted to give: the closed-loop serving
//! simulation of `crate::perf::serving` run on the placement ([`super::step_price`] prices
//! each step), and the objective's linear estimate the solver ranks placements by
//! (docs/placement.md, "Time across devices").

use serde::Serialize;

use crate::perf::{serving, EngineProfile, ServingPoint, ServingPrediction};

use super::problem::Solution;
use super::step_price::{StepParts, StepPricer};
use super::timing::{Parts, Timing};
use super::PlacementError;

/// One phase's predicted time, by part (seconds).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PhaseBreakdown {
    /// The phase's time: the sum of the parts below (bubble excluded: it is inside them).
    pub seconds: f64,
    /// Its device time by part (nodes summed over the stages, all-reduces, sends between
    /// stages, transfers from the host: offloaded expert groups, streamed layers' weights
    /// and KV cache).
    #[serde(flatten)]
    pub parts: StepParts,
    /// The engine's host time (and, for the prompt, the request's overhead).
    pub engine_seconds: f64,
    /// The mean time a device waits while the other stages run (part of the above).
    pub bubble_seconds: f64,
    /// TPOT only: the other requests' prompts' share, `(batch - 1) / O` of a prompt's
    /// stage times, sends and host time per chunk (part of the above).
    pub prompts_seconds: f64,
}

/// The objective's linear estimate: what `--placement-objective min-tpot|min-ttft` ranks
/// placements by (integer nanoseconds in the solver), here in seconds by part.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LinearEstimate {
    /// Time per output token: the steady decode step plus the other requests' prompts'
    /// share.
    pub tpot: PhaseBreakdown,
    /// Time to first token: one prompt alone (no queueing).
    pub ttft: PhaseBreakdown,
    /// Output tokens per second, all requests: batch / TPOT.
    pub output_tokens_per_second: f64,
    /// Per device.
    pub output_tokens_per_second_per_device: f64,
    /// The rules the estimate follows.
    pub rules: Vec<&'static str>,
}

/// The simulated run's time by part: every step's device time summed over the run, and
/// the engine's host time of its steps.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RunParts {
    /// The steps' device time by part, summed.
    #[serde(flatten)]
    pub device: StepParts,
    /// The engine's host time of the steps (steps x its host time per step).
    pub engine_seconds: f64,
}

/// The predicted times of a placement: the simulation's figures first (the same fields as
/// a single-device plan's `performance`), then the objective's linear estimate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Prediction {
    /// The serving point.
    pub serving_point: ServingPoint,
    /// Mean time to first token over the simulated requests (queueing included), seconds.
    pub ttft_seconds: f64,
    /// Mean time per output token after the first, seconds.
    pub tpot_seconds: f64,
    /// Output tokens per second of the whole simulated run.
    pub output_tokens_per_second: f64,
    /// That over the devices the placement uses.
    pub output_tokens_per_second_per_device: f64,
    /// Output tokens per second of one request (`1 / tpot`).
    pub output_tokens_per_second_per_user: f64,
    /// Scheduler steps the simulation ran.
    pub simulated_steps: u64,
    /// The simulated run's time by part.
    pub simulated_time: RunParts,
    /// The rules the simulated figures follow.
    pub rules: Vec<&'static str>,
    /// The objective's linear estimate (what the solver certified the placement by).
    pub linear_estimate: LinearEstimate,
    /// The links the figures use.
    pub links: Vec<String>,
}

/// The rules of a placement's simulated figures.
pub const RULES: &[&str] = &[
    "serving = the closed loop of the single-device model (docs/performance-model.md): C clients, continuous batching, decodes first then prompt chunks up to the scheduled-token budget, at most `sequences` running, the serving point's simulated requests (4 x C unless a benchmark's own count is given), each request's engine request overhead before it is scheduled; TTFT, TPOT and tokens/s are the simulated run's means",
    "step time = the placement's price of the step's shape + the engine's host time per step; the price = the sum over the stages one after another (no micro-batching: a step's batch passes every stage before the next step) of the stage's nodes on one rank, its all-reduces and host transfers, plus one send per stage boundary",
    "node times: the performance model's roofline on each stage's device (docs/performance-model.md); on a rank of a tensor-parallel group of r, FLOPs / r and bytes / r (attention's KV read / min(r, KV heads); a latent cache is read whole on every rank), launches unchanged",
    "tokens/s per device = total / devices used; per user = 1 / TPOT",
];

/// The rules of the objective's linear estimate.
pub const LINEAR_RULES: &[&str] = &[
    "the objective's linear estimate (what min-tpot and min-ttft rank, not a simulation): TPOT = the decode step of min(C, sequences) requests at context I + O/2, plus (min(C, sequences) - 1) / O of one prompt's time (each other client sends about one prompt while a request generates its O tokens)",
    "the objective's linear estimate: TTFT = one prompt alone through every stage (no queueing), in chunks of the budget, plus the engine's request overhead and host time per chunk",
    "the objective's linear estimate: output tokens/s = min(concurrency, sequences) / TPOT; per device = that / devices",
];

/// The predicted times of `solution` (timed by `timing`): the serving simulation on the
/// placement, and the objective's linear estimate.
pub fn predict(timing: &Timing, solution: &Solution) -> Result<Prediction, PlacementError> {
    let linear_estimate = linear(timing, solution)?;
    let pricer = StepPricer::new(&timing.pricing, solution)?;
    // The engine as it runs on the placement's devices (vLLM V0's host time differs on one).
    let engine = timing.pricing.engine.on_devices(solution.devices);
    let mut run = RunParts::default();
    let served = serving::simulate_steps(
        |shape, launch| {
            let parts = pricer.price(shape, launch);
            run.device.add(&parts);
            parts.seconds()
        },
        &engine,
        &timing.point,
    )
    .map_err(|e| PlacementError::Internal(format!("the serving simulation: {e}")))?;
    run.engine_seconds = served.host_seconds;
    let mut rules: Vec<&'static str> = RULES.to_vec();
    rules.extend(engine.rule());
    rules.extend(timing.point.lengths.rule());
    rules.extend_from_slice(crate::perf::communication::RULES);
    Ok(Prediction {
        serving_point: timing.point.clone(),
        ttft_seconds: served.ttft_seconds,
        tpot_seconds: served.tpot_seconds,
        output_tokens_per_second: served.output_tokens_per_second,
        output_tokens_per_second_per_device: served.output_tokens_per_second
            / solution.devices.max(1) as f64,
        output_tokens_per_second_per_user: served.output_tokens_per_second_per_user,
        simulated_steps: served.steps,
        simulated_time: run,
        rules,
        linear_estimate,
        links: timing.links.clone(),
    })
}

/// The serving simulation of `solution` (timed by `timing`) run with `engine` instead of
/// the serving point's own engine profile: how a fit (`examples/placement_validation.rs`)
/// sees the simulated figures move with an engine constant, on the same placement and
/// pricing.
pub fn simulate_with(
    timing: &Timing,
    solution: &Solution,
    engine: &EngineProfile,
) -> Result<ServingPrediction, PlacementError> {
    let pricer = StepPricer::new(&timing.pricing, solution)?;
    serving::simulate_steps(
        |shape, launch| pricer.price(shape, launch).seconds(),
        engine,
        &timing.point,
    )
    .map_err(|e| PlacementError::Internal(format!("the serving simulation: {e}")))
}

/// The objective's linear estimate of `solution` (timed by `timing`), part by part.
fn linear(timing: &Timing, solution: &Solution) -> Result<LinearEstimate, PlacementError> {
    let (kinds, boundary) = timing
        .options
        .get(solution.option as usize)
        .ok_or_else(|| PlacementError::Internal("a solution of an untimed option".to_owned()))?;
    let p = solution.stages.len();
    let phase_of = |phase: usize| -> PhaseBreakdown {
        let mut parts = Parts::default();
        let mut host = 0.0;
        let mut stages_total = 0.0;
        let mut start = 0usize;
        for (s, stage) in solution.stages.iter().enumerate() {
            let kind = &kinds[stage.kind as usize];
            let mut here = Parts::default();
            for layer in &kind.layers[start..stage.end_layer as usize] {
                here.add(&layer[phase]);
            }
            if s == 0 {
                here.add(&kind.first[phase]);
            }
            if s + 1 == p {
                here.add(&kind.last[phase]);
            }
            let mut transfer = stage.offloaded_units as f64 * kind.unit[phase];
            let from = start;
            let layers_end = (from + stage.offloaded_layers as usize).min(stage.end_layer as usize);
            let kv_end = (from + stage.kv_offloaded_layers as usize).min(stage.end_layer as usize);
            transfer += kind
                .layer_from_host
                .get(from..layers_end)
                .map_or(0.0, |l| l.iter().map(|t| t[phase]).sum::<f64>());
            transfer += kind
                .kv_from_host
                .get(from..kv_end)
                .map_or(0.0, |l| l.iter().map(|t| t[phase]).sum::<f64>());
            if stage.kv_offloaded_sequences > 0 {
                // That share of the next layer's sequences streams that share of its KV.
                let share =
                    stage.kv_offloaded_sequences as f64 / timing.pricing.sequences.max(1) as f64;
                transfer += kind
                    .kv_from_host
                    .get(kv_end)
                    .map_or(0.0, |t| share * t[phase]);
            }
            host += transfer;
            stages_total += here.total() + transfer;
            parts.add(&here);
            start = stage.end_layer as usize;
        }
        let sends = p.saturating_sub(1) as f64 * boundary[phase];
        let engine = timing.fixed[phase];
        PhaseBreakdown {
            seconds: stages_total + sends + engine,
            parts: StepParts {
                compute_seconds: parts.compute,
                memory_seconds: parts.memory,
                launch_seconds: parts.overhead,
                all_reduce_seconds: parts.all_reduce,
                send_seconds: sends,
                host_transfer_seconds: host,
            },
            engine_seconds: engine,
            bubble_seconds: stages_total * (p as f64 - 1.0) / p.max(1) as f64,
            prompts_seconds: 0.0,
        }
    };
    let decode = phase_of(0);
    let ttft = phase_of(1);
    // TPOT: the decode step plus the share of the other requests' prompts.
    let w = timing.share;
    let prompts = w * (ttft.seconds - ttft.engine_seconds + timing.chunk_overheads);
    let mut tpot_parts = decode.parts;
    tpot_parts.add_scaled(&ttft.parts, w);
    let tpot = PhaseBreakdown {
        seconds: decode.seconds + prompts,
        parts: tpot_parts,
        engine_seconds: decode.engine_seconds + w * timing.chunk_overheads,
        bubble_seconds: decode.bubble_seconds + w * ttft.bubble_seconds,
        prompts_seconds: prompts,
    };
    let batch = timing.point.concurrency.min(timing.point.maximum_sequences) as f64;
    let total = if tpot.seconds > 0.0 {
        batch / tpot.seconds
    } else {
        0.0
    };
    Ok(LinearEstimate {
        tpot,
        ttft,
        output_tokens_per_second: total,
        output_tokens_per_second_per_device: total / solution.devices.max(1) as f64,
        rules: LINEAR_RULES.to_vec(),
    })
}
