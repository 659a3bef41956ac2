//! The largest value of one policy knob for which a model still fits its device: the plan
//! builds and the policy's worst case fits (`worst_case_fits` of the memory report), with
//! every other policy field as given.
//!
//! The planner itself is the oracle: each probe synthesizes (or edits and reseals) the
//! request at a value, builds its plan and computes its report; no formula predicts the
//! answer. The search doubles from 1 until a probe fails, then bisects; it assumes memory
//! does not shrink as the knob grows (more context, sequences or scheduled tokens never
//! need fewer bytes), and the answer is checked by the probes on both sides of it.

use serde::{Deserialize, Serialize};

use crate::builder::error::PlanError;
use crate::builder::BuildOptions;
use crate::memory::MemoryError;
use crate::plan::ExecutionPlan;
use crate::request::{seal::seal, PlanRequest, StateCapacityDemand, StateLifetime};
use crate::synth::{ModelSource, PolicyPreset};

use super::{ServingReport, StudyError};

/// The policy knob a fit maximizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Knob {
    /// The maximum context of a sequence (tokens).
    Context,
    /// The maximum active sequences.
    Sequences,
    /// The maximum tokens scheduled in one step.
    ScheduledTokens,
}

impl Knob {
    /// The knob's name on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Knob::Context => "context",
            Knob::Sequences => "sequences",
            Knob::ScheduledTokens => "scheduled-tokens",
        }
    }

    /// The largest value the knob's field can hold.
    fn ceiling(self) -> u64 {
        match self {
            Knob::Sequences => u64::from(u32::MAX),
            Knob::Context | Knob::ScheduledTokens => u64::MAX / 2,
        }
    }
}

/// What a fit is run on: a model folder (synthesized at each value) or a request.
#[derive(Clone, Debug)]
pub enum FitSubject {
    /// A model and the choices that override its folder's defaults.
    Model(ModelSource),
    /// A request as it is (context cannot vary: it lives in its states and attributes).
    Request(Box<PlanRequest>),
}

/// Why the value after the answer does not fit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FitNext {
    /// The value probed (answer + 1).
    pub value: u64,
    /// Which allocation or check fails.
    pub reason: String,
    /// By how many bytes it fails, where the failure is a byte count.
    pub bytes_short: Option<u64>,
}

/// The answer of a fit (`jointplan fit --json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FitResult {
    /// The knob maximized.
    pub knob: Knob,
    /// The largest value that fits (`null`: not even 1 fits).
    pub largest: Option<u64>,
    /// The plan id at that value.
    pub plan_id: Option<String>,
    /// Why the next value does not fit (`null` when the largest is the knob's own limit).
    pub next: Option<FitNext>,
    /// The memory report at the largest value.
    pub report: Option<ServingReport>,
    /// The smallest value the policy admits (the search starts there).
    pub lowest: u64,
    /// How many plans the search built.
    pub probes: u32,
}

/// One probe: a plan and its report, or why the value does not fit.
#[derive(Clone, Debug)]
pub enum Probe {
    /// The plan builds and its worst case fits.
    Fits {
        /// The plan id.
        plan_id: String,
        /// Its report.
        report: ServingReport,
    },
    /// The value does not fit.
    Fails(FitNext),
    /// The knob cannot take the value (the model's own limit): the search stops below it.
    Beyond(FitNext),
}

fn settings(path: &str, message: impl Into<String>) -> StudyError {
    StudyError::Settings {
        path: path.to_owned(),
        message: message.into(),
    }
}

/// The request of `subject` with `knob` set to `value`, and whether the value was capped
/// (a context beyond the model's trained positions).
fn request_at(
    subject: &FitSubject,
    preset: Option<&PolicyPreset>,
    knob: Knob,
    value: u64,
) -> Result<(PlanRequest, Option<u64>), StudyError> {
    match subject {
        FitSubject::Model(source) => {
            let mut policy = preset
                .cloned()
                .ok_or_else(|| settings("policy", "no policy preset resolved"))?;
            match knob {
                Knob::Context => policy.maximum_context_tokens = Some(value),
                Knob::Sequences => {
                    policy.maximum_active_sequences = u32::try_from(value)
                        .map_err(|_| settings("sequences", format!("{value} exceeds u32")))?
                }
                Knob::ScheduledTokens => policy.maximum_scheduled_tokens = value,
            }
            let request = source.synthesize_with_policy(&policy)?.request;
            let context = context_tokens(&request);
            let capped = (knob == Knob::Context && context < value).then_some(context);
            Ok((request, capped))
        }
        FitSubject::Request(request) => {
            let mut request = (**request).clone();
            match knob {
                Knob::Context => {
                    return Err(settings(
                        "--maximize context",
                        "a request's context lives in its states and node attributes; give a \
                         model folder to fit the context",
                    ))
                }
                Knob::Sequences => {
                    request.policy.maximum_active_sequences = u32::try_from(value)
                        .map_err(|_| settings("sequences", format!("{value} exceeds u32")))?
                }
                Knob::ScheduledTokens => request.policy.maximum_scheduled_tokens = value,
            }
            seal(&mut request).map_err(|e| settings("request", e.to_string()))?;
            Ok((request, None))
        }
    }
}

/// The maximum context of a request: its largest token-scaled sequence state.
pub fn context_tokens(request: &PlanRequest) -> u64 {
    request
        .family
        .program
        .states
        .iter()
        .filter_map(|s| match (s.lifetime, s.capacity_demand) {
            (StateLifetime::Sequence, StateCapacityDemand::TokenScaled { maximum_tokens, .. }) => {
                Some(maximum_tokens)
            }
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

/// Bytes short of a capacity failure of the builder, where it is one.
fn bytes_short(error: &PlanError) -> Option<u64> {
    match error {
        PlanError::Memory(MemoryError::CapacityExceeded {
            required, usable, ..
        }) => u64::try_from(required.saturating_sub(u128::from(*usable))).ok(),
        PlanError::Memory(MemoryError::StaticExceedsUsable {
            static_bytes,
            usable,
            ..
        }) => Some(static_bytes.saturating_sub(*usable)),
        _ => None,
    }
}

/// Builds the plan at `value` and says whether it fits.
pub fn probe(
    subject: &FitSubject,
    preset: Option<&PolicyPreset>,
    knob: Knob,
    value: u64,
    options: &BuildOptions,
) -> Result<Probe, StudyError> {
    let (request, capped) = request_at(subject, preset, knob, value)?;
    if let Some(context) = capped {
        return Ok(Probe::Beyond(FitNext {
            value,
            reason: format!(
                "the model was trained for {context} positions: the context is capped there"
            ),
            bytes_short: None,
        }));
    }
    let outcome = match ExecutionPlan::build_with_report(&request, options) {
        Ok(outcome) => outcome,
        Err(error) if error.kind() == crate::error_kind::ErrorKind::Infeasible => {
            return Ok(Probe::Fails(FitNext {
                value,
                bytes_short: bytes_short(&error),
                reason: error.to_string(),
            }))
        }
        Err(error) => return Err(StudyError::Plan(Box::new(error))),
    };
    let (report, limits) = ServingReport::with_limits(&request, &outcome.plan)?;
    if report.worst_case_fits {
        return Ok(Probe::Fits {
            plan_id: outcome.plan.payload.plan_id.clone(),
            report,
        });
    }
    let sequences = u64::from(limits.maximum_active_sequences);
    let needed = i128::from(report.kv_bytes_per_sequence) * i128::from(sequences);
    let short = u64::try_from(needed - report.headroom_bytes).ok();
    Ok(Probe::Fails(FitNext {
        value,
        reason: format!(
            "the worst case does not fit: {} x {} bytes of KV cache and \
             sequence state at {} tokens need {needed} bytes, the headroom after weights, \
             activations and workspaces is {} bytes",
            super::report::sequences(sequences),
            report.kv_bytes_per_sequence,
            limits.context_tokens,
            report.headroom_bytes
        ),
        bytes_short: short,
    }))
}

/// The smallest value the policy admits for `knob`: 1, or the largest reusable bucket's
/// capacity (a policy's buckets must stay within its ceilings).
fn lowest_value(subject: &FitSubject, preset: Option<&PolicyPreset>, knob: Knob) -> u64 {
    let capacities: Vec<crate::request::BucketCapacity> = match subject {
        FitSubject::Model(_) => preset
            .and_then(|p| p.reusable_execution.as_ref())
            .map(|r| r.buckets.iter().map(|b| b.capacity).collect())
            .unwrap_or_default(),
        FitSubject::Request(request) => request
            .policy
            .reusable_execution
            .as_ref()
            .map(|r| r.buckets.iter().map(|b| b.capacity).collect())
            .unwrap_or_default(),
    };
    capacities
        .iter()
        .map(|c| match knob {
            Knob::Context => 1,
            Knob::Sequences => u64::from(c.maximum_sequences),
            Knob::ScheduledTokens => c.maximum_tokens,
        })
        .fold(1, u64::max)
}

/// The largest value of `knob` that fits, found with the planner as the oracle. The search
/// starts at the smallest value the policy admits (see `lowest_value`).
pub fn fit(
    subject: &FitSubject,
    knob: Knob,
    options: &BuildOptions,
) -> Result<FitResult, StudyError> {
    let preset = match subject {
        FitSubject::Model(source) => Some(source.policy_preset()?),
        FitSubject::Request(_) => None,
    };
    let mut probes = 0u32;
    let mut run = |value: u64| -> Result<Result<(String, ServingReport), FitNext>, StudyError> {
        probes += 1;
        Ok(
            match probe(subject, preset.as_ref(), knob, value, options)? {
                Probe::Fits { plan_id, report } => Ok((plan_id, report)),
                Probe::Fails(next) | Probe::Beyond(next) => Err(next),
            },
        )
    };
    // Invariant: `good` fits (with its plan), `bad` does not (with its reason).
    let mut good: Option<(u64, String, ServingReport)> = None;
    let mut bad: Option<FitNext> = None;
    let lowest = lowest_value(subject, preset.as_ref(), knob);
    let mut value = lowest;
    loop {
        match run(value)? {
            Ok((plan_id, report)) => {
                good = Some((value, plan_id, report));
                if value >= knob.ceiling() {
                    break;
                }
                value = value.saturating_mul(2).min(knob.ceiling());
            }
            Err(next) => {
                bad = Some(next);
                break;
            }
        }
    }
    if let (Some((low, ..)), Some(next)) = (&good, &bad) {
        let (mut low, mut high) = (*low, next.value);
        while high - low > 1 {
            let middle = low + (high - low) / 2;
            match run(middle)? {
                Ok((plan_id, report)) => {
                    good = Some((middle, plan_id, report));
                    low = middle;
                }
                Err(next) => {
                    bad = Some(next);
                    high = middle;
                }
            }
        }
    }
    let (largest, plan_id, report) = match good {
        Some((value, plan_id, report)) => (Some(value), Some(plan_id), Some(report)),
        None => (None, None, None),
    };
    Ok(FitResult {
        knob,
        largest,
        plan_id,
        next: bad,
        report,
        lowest,
        probes,
    })
}

/// Whether a model fits one device of a directory (`jointplan fit --devices DIR`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceFit {
    /// The device file.
    pub device_file: String,
    /// The device's memory (from its plan or its description).
    pub device_memory_bytes: u64,
    /// Whether the plan builds and its worst case fits.
    pub fits: bool,
    /// The plan id, where the plan builds.
    pub plan_id: Option<String>,
    /// Headroom of the memory report, where the plan builds.
    pub headroom_bytes: Option<i128>,
    /// Sequences that fit at the maximum context, where the plan builds.
    pub sequences_that_fit: Option<u64>,
    /// Why it does not fit.
    pub reason: Option<String>,
}

/// Every `*.json` device file of `dir` tried with `source` under its policy: fitting devices
/// first, smallest memory first, then the others, smallest first.
pub fn fit_devices(
    source: &ModelSource,
    dir: &std::path::Path,
    options: &BuildOptions,
) -> Result<Vec<DeviceFit>, StudyError> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        settings(
            "--devices",
            format!("{}: cannot read the directory: {e}", dir.display()),
        )
    })?;
    let mut files: Vec<std::path::PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(settings(
            "--devices",
            format!("{}: no device files (*.json) in it", dir.display()),
        ));
    }
    let mut fits = Vec::with_capacity(files.len());
    for file in files {
        let mut device_source = source.clone();
        device_source.device = Some(file.clone());
        let request = device_source.synthesize()?.request;
        fits.push(device_fit(&request, &file, options)?);
    }
    fits.sort_by(|a, b| {
        (!a.fits, a.device_memory_bytes, &a.device_file).cmp(&(
            !b.fits,
            b.device_memory_bytes,
            &b.device_file,
        ))
    });
    Ok(fits)
}

/// Whether `request` (synthesized for the device `file`) builds and its worst case fits.
fn device_fit(
    request: &PlanRequest,
    file: &std::path::Path,
    options: &BuildOptions,
) -> Result<DeviceFit, StudyError> {
    let mut row = DeviceFit {
        device_file: file.display().to_string(),
        device_memory_bytes: request.catalog.device.total_memory_bytes,
        fits: false,
        plan_id: None,
        headroom_bytes: None,
        sequences_that_fit: None,
        reason: None,
    };
    match ExecutionPlan::build_with_report(request, options) {
        Ok(outcome) => {
            let report = ServingReport::of(request, &outcome.plan)?;
            row.fits = report.worst_case_fits;
            row.plan_id = Some(outcome.plan.payload.plan_id.clone());
            row.headroom_bytes = Some(report.headroom_bytes);
            row.sequences_that_fit = report.sequences_that_fit;
            if !report.worst_case_fits {
                row.reason = Some(format!(
                    "the worst case does not fit: {} at the maximum context",
                    super::report::sequences_fit(report.sequences_that_fit.unwrap_or(0))
                ));
            }
        }
        Err(error) if error.kind() == crate::error_kind::ErrorKind::Infeasible => {
            row.reason = Some(error.to_string());
        }
        Err(error) => return Err(StudyError::Plan(Box::new(error))),
    }
    Ok(row)
}

/// The next device of a directory: the smallest device of `device_file`'s directory, larger
/// than it, on which `source` (under its policy with `fields` set) builds and its worst case
/// fits — the "next device" lever of why-infeasible.
///
/// Devices are tried smallest first (memory, then file name); a device with less memory than
/// `needed_capacity_bytes` (the capacity the request needs, when a capacity search found it)
/// cannot hold the plan and is not built. Files of the directory that are not device
/// descriptions are skipped. `None`: no larger device of the directory fits.
pub fn next_device(
    source: &ModelSource,
    fields: &super::sweep::PolicyFields,
    device_file: &std::path::Path,
    needed_capacity_bytes: Option<u64>,
    options: &BuildOptions,
) -> Result<Option<DeviceFit>, StudyError> {
    let Some(dir) = device_file.parent() else {
        return Ok(None);
    };
    let dir = if dir.as_os_str().is_empty() {
        std::path::Path::new(".")
    } else {
        dir
    };
    let own = crate::synth::DeviceDescription::read(device_file)?.total_memory_bytes;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(None);
    };
    let mut larger: Vec<(u64, std::path::PathBuf)> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p| {
            let memory = crate::synth::DeviceDescription::read(&p)
                .ok()?
                .total_memory_bytes;
            (memory > own && needed_capacity_bytes.is_none_or(|needed| memory >= needed))
                .then_some((memory, p))
        })
        .collect();
    larger.sort();
    for (_, file) in larger {
        let mut device_source = source.clone();
        device_source.device = Some(file.clone());
        let request = fields.synthesize(&device_source)?.request;
        let row = device_fit(&request, &file, options)?;
        if row.fits {
            return Ok(Some(row));
        }
    }
    Ok(None)
}
