//! The serving point of a call: `serving` in the options JSON (`concurrency`,
//! `input_tokens`, `output_tokens`, `engine`, `performance_device`, `calibration`,
//! `lengths`), read
//! into the library's pricing ([`jointplan::study::timing`]) so that Python prices plans
//! with the same queries as the command line.

use std::path::Path;

use jointplan::perf::{Calibration, Lengths, PerfError, DEFAULT_ENGINE};
use jointplan::study::diff::GivenPricing;
use jointplan::study::timing::{Load, Pricer};
use jointplan::synth::DeviceDescription;
use serde_json::Value;

use crate::{parse, Failure};

/// A serving point asked for by a call.
pub(crate) struct ServingOptions {
    /// The load.
    pub load: Load,
    /// The device whose figures price it (`performance_device`), if given.
    pub device: Option<DeviceDescription>,
    /// Measured kernel times (`calibration`), if given.
    pub calibration: Calibration,
    /// The engine as given (`vllm@0.6`), if given: on a model source it also sets the
    /// memory budget, as the command line's `--engine`.
    pub engine: Option<String>,
}

/// A performance-model error in the keyword names of Python (`--max-tpot-ms` ->
/// `max_tpot_ms`).
pub(crate) fn perf_failure(error: PerfError) -> Failure {
    match error {
        PerfError::ServingPoint { flag, message } => Failure::bad_input(format!(
            "{}: {message}",
            flag.trim_start_matches("--").replace('-', "_")
        )),
        other => Failure::from(jointplan::Error::from(other)),
    }
}

/// The `serving` object of `options_json`, if present; a field of the wrong type names
/// its keyword. A fit's load has no concurrency (each value probed is one): it reads as 1.
pub(crate) fn serving_options(options_json: &str) -> Result<Option<ServingOptions>, Failure> {
    let value: Value = parse("options", options_json)?;
    let Some(serving) = value.get("serving").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let count = |name: &str| -> Result<u64, Failure> {
        serving
            .get(name)
            .and_then(Value::as_u64)
            .ok_or_else(|| Failure::bad_input(format!("{name} must be a non-negative integer")))
    };
    let text = |name: &str| serving.get(name).and_then(Value::as_str).map(str::to_owned);
    let load = Load {
        concurrency: match serving.get("concurrency").filter(|v| !v.is_null()) {
            None if serving.get("fit").and_then(Value::as_bool) == Some(true) => 1,
            _ => count("concurrency")?,
        },
        input_tokens: count("input_tokens")?,
        output_tokens: count("output_tokens")?,
        engine: text("engine").unwrap_or_else(|| DEFAULT_ENGINE.to_owned()),
        lengths: match text("lengths") {
            Some(spec) => Lengths::parse(&spec).map_err(perf_failure)?,
            None => Lengths::Fixed,
        },
    };
    let device = match text("performance_device") {
        Some(file) => Some(DeviceDescription::read(Path::new(&file)).map_err(|e| {
            Failure::from(jointplan::Error::from(e.in_device_file(Path::new(&file))))
        })?),
        None => None,
    };
    let calibration = match text("calibration") {
        Some(file) => Calibration::read(Path::new(&file)).map_err(perf_failure)?,
        None => Calibration::default(),
    };
    Ok(Some(ServingOptions {
        load,
        device,
        calibration,
        engine: text("engine"),
    }))
}

impl ServingOptions {
    /// The pricer on the given device, else on `fallback` (a model source's device).
    pub(crate) fn pricer(&self, fallback: Option<&DeviceDescription>) -> Result<Pricer, Failure> {
        let device = self.device.as_ref().or(fallback).ok_or_else(|| {
            Failure::bad_input(
                "a serving point on a request needs performance_device= (a device file with performance figures, e.g. models/devices/h100-sxm-80gb.json)",
            )
        })?;
        Pricer::on_device(self.load.clone(), device, self.calibration.clone()).map_err(perf_failure)
    }

    /// The pricing of a diff or why-not: the device's when given, else the figures a plan
    /// recorded.
    pub(crate) fn given(self) -> Result<GivenPricing, Failure> {
        Ok(match &self.device {
            Some(_) => GivenPricing::Pricer(Box::new(self.pricer(None)?)),
            None => GivenPricing::Load {
                load: self.load,
                calibration: self.calibration,
            },
        })
    }
}
