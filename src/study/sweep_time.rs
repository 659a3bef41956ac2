//! The serving-point columns of a sweep and its device-set points.
//!
//! A grid that gives a serving point (`concurrency`, `input_tokens`, `output_tokens`) prices
//! every planned row: time to first token, time per output token and output tokens per
//! second in total, per device and per user ([`SweepTime`]), each with the rule that priced
//! it. A single-device row is priced as `plan --concurrency C --input-tokens I
//! --output-tokens O` prices it (the performance model's serving simulation,
//! docs/performance-model.md, with the time profile of the point's engine, vLLM's when it
//! names none); a device-set row (knob `devices`, with `tensor_parallel` and
//! `pipeline_parallel`) is placed and priced as `plan --devices SET.json --tensor-parallel N
//! ...` places and prices it (docs/placement.md; a named engine sets its degree, its budget
//! on every device and its time profile, as `plan --devices --engine` does).
//!
//! Placement sits above this layer, so a sweep reaches it through a [`Placer`] its caller
//! hands in (the library's is `placement::sweep::SweepPlacer`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::builder::BuildOptions;
use crate::perf::{self, Calibration, ServingPoint};
use crate::plan::ExecutionPlan;
use crate::request::PlanRequest;
use crate::synth::{DeviceDescription, ModelSource, PolicyPreset};

/// The rule a single-device row's times follow.
pub const SINGLE_DEVICE_RULE: &str = "serving-simulation";
/// The rule a device-set row's times follow.
pub const PLACEMENT_RULE: &str = "placement-timing";

/// The rule text a device-set row that names an engine carries: the engine's time profile
/// priced the placement, its memory rules did not apply (`plan --devices --engine E`
/// places by the device set's and the policy's budget, not the engine's).
pub fn placement_engine_rule(engine: &str) -> String {
    format!(
        "engine {engine}: its memory rules held every device of the placement to its \
         budget at its tensor-parallel degree (one stage), and its time profile priced it, \
         as `plan --devices --engine` does (docs/placement.md, \"Serving engines across \
         devices\")"
    )
}

/// A row's predicted times at the grid's serving point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepTime {
    /// Mean time to first token (seconds).
    pub ttft_seconds: f64,
    /// Mean time per output token after the first (seconds).
    pub tpot_seconds: f64,
    /// Output tokens per second, all requests.
    pub output_tokens_per_second: f64,
    /// Output tokens per second per device serving.
    pub output_tokens_per_second_per_device: f64,
    /// Output tokens per second of one request (`1 / TPOT`).
    pub output_tokens_per_second_per_user: f64,
    /// Devices serving (1 for a single-device row).
    pub devices: u64,
    /// The engine profile that priced the point.
    pub engine: String,
    /// Which model priced the row: `serving-simulation` (one device:
    /// docs/performance-model.md) or `placement-timing` (a device set: docs/placement.md).
    pub rule: String,
    /// The rules the figures follow, as `plan` prints them.
    pub rules: Vec<String>,
}

/// What a device-set row's placement chose.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepPlacement {
    /// The placement plan's id.
    pub placement_id: String,
    /// The tensor-parallel degree placed.
    pub tensor_parallel: u32,
    /// The pipeline depth placed.
    pub pipeline_parallel: u32,
    /// Devices the placement uses.
    pub devices_used: u64,
    /// Sequences the placement holds at the maximum context (the policy's, raised to the
    /// concurrency when lower).
    pub sequences: u64,
    /// Tokens of KV cache that fit across the devices.
    pub kv_tokens_that_fit: Option<u64>,
    /// How the placement was proved optimal (`exhaustive` or `dynamic-program`).
    pub certificate: String,
}

/// A grid point's serving point: requests in flight, prompt and output tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ServingTerms {
    /// Requests in flight.
    pub concurrency: u64,
    /// Prompt tokens of each request.
    pub input_tokens: u64,
    /// Output tokens of each request.
    pub output_tokens: u64,
}

/// A device-set point to place: everything `plan --devices` reads.
pub struct PlacementJob<'a> {
    /// The model source (folder, weight format, layers, experts, policy preset name).
    pub source: &'a ModelSource,
    /// The device set file.
    pub set: PathBuf,
    /// The policy preset with the point's fields set.
    pub preset: PolicyPreset,
    /// A pinned tensor-parallel degree.
    pub tensor_parallel: Option<u32>,
    /// A pinned pipeline depth.
    pub pipeline_parallel: Option<u32>,
    /// The serving point to price the placement at.
    pub serving: Option<ServingTerms>,
    /// The time profile that prices it (`vllm`, ...: the point's engine, else the
    /// default).
    pub engine: &'a str,
    /// The engine the point names, whose memory rules hold the placement (its degree, its
    /// budget on every device; `placement::serving_engine`), with its default arguments.
    pub memory_engine: Option<crate::engine::EngineChoice>,
    /// Build options of the model's plan.
    pub options: &'a BuildOptions,
}

/// What placing a point gave.
#[derive(Clone, Debug, PartialEq)]
pub enum PlacementOutcome {
    /// Placed, certified and checked, and priced when the point has a serving point (or
    /// why it could not be priced).
    Placed {
        /// What the placement chose.
        placement: SweepPlacement,
        /// The times at the serving point (boxed: the figures and their rules are most of
        /// the outcome, and a failed point has none).
        time: Option<Result<Box<SweepTime>, String>>,
        /// The budget the point's engine held every device to (absent: the policy's).
        engine_budget: Option<super::budget::Budget>,
    },
    /// No placement: `status` is a row status (`infeasible`, `bad-input`, `error`).
    Failed {
        /// The row status.
        status: &'static str,
        /// Why.
        reason: String,
    },
}

/// Places device-set points for a sweep (implemented above this layer).
pub trait Placer: Sync {
    /// Places one point.
    fn place(&self, job: &PlacementJob) -> PlacementOutcome;
}

/// The serving point `plan` prices for `request` at `terms`: the policy's token budget and
/// sequence ceiling, 4 x C simulated requests, the time profile of `engine` (`plan
/// --engine E`'s; [`crate::perf::DEFAULT_ENGINE`] without one).
pub fn serving_point(request: &PlanRequest, terms: ServingTerms, engine: &str) -> ServingPoint {
    ServingPoint {
        concurrency: terms.concurrency,
        input_tokens: terms.input_tokens,
        output_tokens: terms.output_tokens,
        engine: engine.to_owned(),
        scheduled_token_budget: request.policy.maximum_scheduled_tokens,
        maximum_sequences: u64::from(request.policy.maximum_active_sequences),
        simulated_requests: terms.concurrency.saturating_mul(4),
        lengths: crate::perf::Lengths::Fixed,
        context_tokens: Some(super::report::context_tokens(request)),
        chunked_prefill: None,
    }
}

/// The times of a single-device `plan` of `request` on `device` at `terms` with the time
/// profile `engine` (what `plan [--engine E] --concurrency C --input-tokens I
/// --output-tokens O` prints), or why it has none.
pub fn single_device_time(
    request: &PlanRequest,
    plan: &ExecutionPlan,
    device: &DeviceDescription,
    terms: ServingTerms,
    engine: &str,
) -> Result<SweepTime, String> {
    let model = perf::plan_time_model(request, plan, device, Calibration::default())
        .map_err(|e| e.to_string())?;
    let p =
        perf::predict(&model, &serving_point(request, terms, engine)).map_err(|e| e.to_string())?;
    Ok(SweepTime {
        ttft_seconds: p.ttft_seconds,
        tpot_seconds: p.tpot_seconds,
        output_tokens_per_second: p.output_tokens_per_second,
        output_tokens_per_second_per_device: p.output_tokens_per_second_per_device,
        output_tokens_per_second_per_user: p.output_tokens_per_second_per_user,
        devices: p.devices,
        engine: p.serving_point.engine,
        rule: SINGLE_DEVICE_RULE.to_owned(),
        rules: p.rules.iter().map(|r| (*r).to_owned()).collect(),
    })
}
