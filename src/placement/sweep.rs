//! The placer a sweep's device-set points go through ([`crate::study::sweep_time::Placer`]):
//! each point placed as `plan MODEL --devices SET.json [--tensor-parallel N]
//! [--pipeline-parallel N] [--concurrency C --input-tokens I --output-tokens O]` places it
//! (fewest devices, no host offload, the default enumeration budget; the time profile of
//! the point's engine, else the default, as `plan --devices --engine E` prices it),
//! and its figures handed back as a row's.

use crate::study::sweep_time::{
    PlacementJob, PlacementOutcome, Placer, SweepPlacement, SweepTime, PLACEMENT_RULE,
};

use super::prediction::Prediction;
use super::timing::Serving;
use super::{place, DeviceSet, PlacementError, Settings, DEFAULT_ENUMERATION_BUDGET};

/// Places a sweep's device-set points with the library's placement.
pub struct SweepPlacer;

fn failed(error: &PlacementError) -> PlacementOutcome {
    let status = match error {
        PlacementError::Infeasible(_) => "infeasible",
        PlacementError::Internal(_) => "error",
        e if e.is_bad_input() => "bad-input",
        _ => "infeasible",
    };
    PlacementOutcome::Failed {
        status,
        reason: error.to_string(),
    }
}

/// A placement's simulated times as a sweep row's.
fn time_of(p: &Prediction, devices: u64) -> SweepTime {
    SweepTime {
        ttft_seconds: p.ttft_seconds,
        tpot_seconds: p.tpot_seconds,
        output_tokens_per_second: p.output_tokens_per_second,
        output_tokens_per_second_per_device: p.output_tokens_per_second_per_device,
        output_tokens_per_second_per_user: p.output_tokens_per_second_per_user,
        devices,
        engine: p.serving_point.engine.clone(),
        rule: PLACEMENT_RULE.to_owned(),
        rules: p.rules.iter().map(|r| (*r).to_owned()).collect(),
    }
}

impl Placer for SweepPlacer {
    fn place(&self, job: &PlacementJob) -> PlacementOutcome {
        let set = match DeviceSet::read(&job.set) {
            Ok(set) => set,
            Err(e) => return failed(&e),
        };
        let settings = Settings {
            tensor_parallel: job.tensor_parallel,
            pipeline_parallel: job.pipeline_parallel,
            serving: job.serving.map(|s| Serving {
                concurrency: s.concurrency,
                input_tokens: s.input_tokens,
                output_tokens: s.output_tokens,
                engine: job.engine.to_owned(),
                simulated_requests: None,
                lengths: crate::perf::Lengths::Fixed,
                chunked_prefill: None,
            }),
            policy: Some(job.preset.clone()),
            ..Settings::default()
        };
        // A named engine runs the model at its degree, each device held to its budget.
        let engine = match &job.memory_engine {
            Some(choice) => match super::serving_engine::engine_on_set(
                job.source,
                &set,
                &job.preset,
                choice,
                &crate::engine::EngineArgs::default(),
                job.tensor_parallel,
                job.pipeline_parallel,
            ) {
                Ok(engine) => Some(engine),
                Err(e) => return failed(&e),
            },
            None => None,
        };
        let mut settings = match &engine {
            Some(engine) => engine.settings(&settings),
            None => settings,
        };
        // The engine's resolved `enable_chunked_prefill` decides vLLM V0's scheduling, as
        // on `plan --devices --engine`.
        if let (Some(engine), Some(serving)) = (&engine, settings.serving.as_mut()) {
            serving.chunked_prefill = engine
                .applied
                .report
                .args
                .get("enable_chunked_prefill")
                .map(|value| value == "true");
        }
        let placed = match place(
            job.source,
            &set,
            &settings,
            job.options,
            DEFAULT_ENUMERATION_BUDGET,
        ) {
            Ok(placed) => placed,
            Err(e) => return failed(&e),
        };
        if let Some(v) = placed.violations.first() {
            return PlacementOutcome::Failed {
                status: "error",
                reason: format!(
                    "internal: the checker rejects the placement: {} violation(s), the first: {} at {}: {}",
                    placed.violations.len(),
                    v.rule,
                    v.path,
                    v.message
                ),
            };
        }
        let payload = &placed.plan.payload;
        let devices = payload.devices_used;
        PlacementOutcome::Placed {
            placement: SweepPlacement {
                placement_id: placed.plan.placement_id.clone(),
                tensor_parallel: payload.tensor_parallel,
                pipeline_parallel: payload.pipeline_parallel,
                devices_used: devices,
                sequences: payload.sequences,
                kv_tokens_that_fit: payload.kv_tokens_that_fit,
                certificate: placed.certificate.method.clone(),
            },
            time: placed
                .performance
                .as_ref()
                .map(|p| Ok(Box::new(time_of(p, devices)))),
            engine_budget: engine.map(|e| e.applied.budget),
        }
    }
}
