//! The serving-point flags of `plan` (`--concurrency`, `--input-tokens`, `--output-tokens`,
//! `--calibration`, `--performance-device`; the engine's time profile follows `--engine`)
//! and the performance summary they add: `performance` in `--json`, a block of lines and a
//! roofline table in the text.

use std::path::PathBuf;

use jointplan::perf::{self, Calibration, Lengths, Performance, ServingPoint, DEFAULT_ENGINE};
use jointplan::plan::ExecutionPlan;
use jointplan::request::PlanRequest;
use jointplan::synth::DeviceDescription;

use super::Error;

/// The serving point to predict, with the figures that price it.
#[derive(Debug, Default, clap::Args)]
pub struct ServingFlags {
    /// Requests in flight at the serving point (adds `performance` to the summary; needs
    /// --input-tokens and --output-tokens). A model folder's policy sequence ceiling is
    /// raised to it when lower.
    #[arg(long, value_name = "C")]
    pub concurrency: Option<u64>,
    /// Prompt tokens of each request.
    #[arg(long, value_name = "I")]
    pub input_tokens: Option<u64>,
    /// Output tokens of each request.
    #[arg(long, value_name = "O")]
    pub output_tokens: Option<u64>,
    /// How the requests' lengths vary around I and O, as a serving benchmark draws them:
    /// `fixed` (default: every request I and O); `sglang[:R[:SEED]]`, `sglang.bench_serving
    /// --dataset-name random --random-input-len I --random-output-len O
    /// --random-range-ratio R --seed SEED` (each length uniform in [max(floor(L*R), 1), L];
    /// R in [0, 1], SGLang's default 0; SEED default 1: the benchmark's own draws when its
    /// --num-prompts is the 4 x C requests simulated); `vllm[:R]`, `vllm bench serve
    /// --dataset-name random` (uniform in [floor(L*(1-R)), ceil(L*(1+R))]; R in [0, 1),
    /// vLLM's default 0 is fixed). The simulated means follow the drawn lengths
    /// (docs/performance-model.md#request-lengths).
    #[arg(long, value_name = "fixed|sglang[:R[:SEED]]|vllm[:R]")]
    pub lengths: Option<String>,
    /// Calibration file of measured kernel times that replace the roofline
    /// (docs/performance-model.md#calibration).
    #[arg(long, value_name = "FILE")]
    pub calibration: Option<PathBuf>,
    /// Device file whose performance figures price a request file (a model folder uses
    /// its own device file).
    #[arg(long, value_name = "DEVICE.json")]
    pub performance_device: Option<PathBuf>,
}

/// A requested serving point, before the policy is known.
#[derive(Clone, Debug)]
pub struct Requested {
    /// Requests in flight.
    pub concurrency: u64,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Engine spelling.
    pub engine: String,
    /// How the requests' lengths are drawn (`--lengths`).
    pub lengths: Lengths,
    /// The engine's `enable_chunked_prefill` as its accounting resolved it (`--engine`
    /// with its arguments; [`Requested::under`]); `None` without an engine report.
    pub chunked_prefill: Option<bool>,
}

impl Requested {
    /// The point served by the engine `report` describes (`--engine` with its
    /// `--engine-arg`s): its `enable_chunked_prefill` as resolved (given, or the version's
    /// default at its `max_model_len`) decides vLLM V0's scheduling. Engines without the
    /// argument leave the point as it is.
    pub fn under(self, report: Option<&jointplan::engine::EngineReport>) -> Requested {
        let chunked_prefill = report
            .and_then(|r| r.args.get("enable_chunked_prefill"))
            .map(|value| value == "true");
        Requested {
            chunked_prefill,
            ..self
        }
    }
}

impl ServingFlags {
    /// The serving point asked for, if any, with the time profile of `engine` (`--engine
    /// NAME[@VERSION]`; vLLM's without it); a partial one names the missing flag.
    pub fn requested(&self, engine: Option<&str>) -> Result<Option<Requested>, Error> {
        let given = [
            ("--concurrency", self.concurrency),
            ("--input-tokens", self.input_tokens),
            ("--output-tokens", self.output_tokens),
        ];
        let others = [
            ("--lengths", self.lengths.is_some()),
            ("--calibration", self.calibration.is_some()),
            ("--performance-device", self.performance_device.is_some()),
        ];
        if given.iter().all(|(_, v)| v.is_none()) {
            if let Some((flag, _)) = others.iter().find(|(_, set)| *set) {
                return Err(Error::Usage(format!(
                    "{flag} applies to a serving point: give --concurrency, --input-tokens and --output-tokens"
                )));
            }
            return Ok(None);
        }
        let [(_, Some(concurrency)), (_, Some(input_tokens)), (_, Some(output_tokens))] = given
        else {
            let flag = given
                .iter()
                .find(|(_, v)| v.is_none())
                .map_or("", |(f, _)| f);
            return Err(Error::Usage(format!(
                "{flag} is missing: a serving point needs --concurrency, --input-tokens and --output-tokens"
            )));
        };
        // The time profile is the engine's, whatever version `--engine` names.
        let engine = match engine {
            None => DEFAULT_ENGINE.to_owned(),
            Some(given) => jointplan::study::engine_facts::time_profile_name(given)
                .ok_or_else(|| {
                    let name = given.split('@').next().unwrap_or(given);
                    Error::Usage(format!(
                        "--engine {name}: not one of {}",
                        perf::engine_names()
                    ))
                })?
                .to_owned(),
        };
        let lengths = match &self.lengths {
            None => Lengths::Fixed,
            Some(spec) => Lengths::parse(spec).map_err(|e| Error::Usage(e.to_string()))?,
        };
        Ok(Some(Requested {
            concurrency,
            input_tokens,
            output_tokens,
            engine,
            lengths,
            chunked_prefill: None,
        }))
    }
}

/// The device that prices a serving point: `--performance-device`, else the model
/// folder's.
fn pricing_device(
    flags: &ServingFlags,
    device: Option<&DeviceDescription>,
) -> Result<DeviceDescription, Error> {
    match (&flags.performance_device, device) {
        (Some(file), _) => {
            DeviceDescription::read(file).map_err(|e| Error::from(e.in_device_file(file)))
        }
        (None, Some(device)) => Ok(device.clone()),
        (None, None) => Err(Error::Usage(
            "a serving point on a request file needs --performance-device DEVICE.json (a device file with performance figures, e.g. models/devices/h100-sxm-80gb.json)".to_owned(),
        )),
    }
}

/// What a time objective records: the serving point and the pricing device's figures
/// (`plan --objective min-tpot|min-ttft|max-throughput`).
pub fn recorded_serving(
    flags: &ServingFlags,
    point: Option<&Requested>,
    device: Option<&DeviceDescription>,
    objective: &str,
) -> Result<jointplan::plan::RecordedServing, Error> {
    let Some(point) = point else {
        return Err(Error::Usage(format!(
            "--objective {objective} needs a serving point: give --concurrency, --input-tokens and --output-tokens"
        )));
    };
    if flags.calibration.is_some() {
        return Err(Error::Usage(format!(
            "--calibration cannot be used with --objective {objective}: the candidates are priced by the roofline from the device figures recorded in the plan (so verify can price them again); drop --calibration"
        )));
    }
    let device = pricing_device(flags, device)?;
    let figures = device.performance.as_ref().ok_or_else(|| {
        Error::from(jointplan::Error::from(perf::PerfError::NoFigures {
            device: device.name.clone(),
        }))
    })?;
    Ok(jointplan::builder::time_costs::recorded_serving(
        point.concurrency,
        point.input_tokens,
        point.output_tokens,
        &point.engine,
        &device.name,
        figures,
    ))
}

/// The performance of `plan` at the serving point, on `device`.
pub fn predict(
    flags: &ServingFlags,
    point: &Requested,
    request: &PlanRequest,
    plan: &ExecutionPlan,
    device: Option<&DeviceDescription>,
) -> Result<Performance, Error> {
    let read_device;
    let device = match (&flags.performance_device, device) {
        (Some(file), _) => {
            read_device = DeviceDescription::read(file)
                .map_err(|e| Error::from(e.in_device_file(file)))?;
            &read_device
        }
        (None, Some(device)) => device,
        (None, None) => {
            return Err(Error::Usage(
                "a serving point on a request file needs --performance-device DEVICE.json (a device file with performance figures, e.g. models/devices/h100-sxm-80gb.json)".to_owned(),
            ))
        }
    };
    let calibration = match &flags.calibration {
        Some(file) => Calibration::read(file)?,
        None => Calibration::default(),
    };
    let model = perf::plan_time_model(request, plan, device, calibration)?;
    let serving = ServingPoint {
        concurrency: point.concurrency,
        input_tokens: point.input_tokens,
        output_tokens: point.output_tokens,
        engine: point.engine.clone(),
        scheduled_token_budget: request.policy.maximum_scheduled_tokens,
        maximum_sequences: u64::from(request.policy.maximum_active_sequences),
        simulated_requests: point.concurrency.saturating_mul(4),
        lengths: point.lengths.clone(),
        context_tokens: Some(jointplan::study::report::context_tokens(request)),
        chunked_prefill: point.chunked_prefill,
    };
    Ok(perf::predict(&model, &serving)?)
}
