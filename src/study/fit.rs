//! The largest value of one policy knob for which a model still fits its device: the plan
//! builds and the policy's requirement fits ([`ServingReport::meets`]: the sequences the
//! policy requires, 1 when it states none, at its context), with every other policy field
//! as given. The sequence and token fields are ceilings (at most), never requirements:
//! `fit --maximize context` answers the longest context one sequence reaches under them.
//!
//! The planner itself is the oracle: each probe synthesizes (or edits and reseals) the
//! request at a value, builds its plan and computes its report; no formula predicts the
//! answer. The search doubles from 1 until a probe fails, then bisects; it assumes memory
//! does not shrink as the knob grows (more context, sequences or scheduled tokens never
//! need fewer bytes), and the answer is checked by the probes on both sides of it.
//!
//! With a latency target ([`FitServing::latency`], `fit --max-tpot-ms X --max-ttft-ms Y
//! --maximize sequences`) a value N fits when, besides memory, the plan at N served at
//! concurrency N ([`super::timing::Pricer`], the rule of `plan --concurrency N`) meets the
//! targets; the search assumes TPOT and TTFT do not fall as concurrency grows, and the
//! answer says which bound fails at N + 1. With an engine ([`FitServing::engine`], `fit
//! --engine NAME`), each probe's memory is held to the engine's budget as `plan --engine`
//! holds it.

use serde::{Deserialize, Serialize};

use crate::builder::error::PlanError;
use crate::builder::BuildOptions;
use crate::memory::MemoryError;
use crate::plan::ExecutionPlan;
use crate::request::{seal::seal, PlanRequest};
use crate::synth::{ModelSource, PolicyPreset};

use super::timing::{
    latency_reason, pricer_at, LatencyAnswer, LatencyFigures, LatencyQuery, PricingRule, MAX_SERVED,
};
use super::{ServingReport, StudyError};
use crate::synth::DeviceDescription;

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
    /// A model and the choices that override its folder's defaults (boxed as the request
    /// is: a source is ten optional paths and names).
    Model(Box<ModelSource>),
    /// A request as it is (context cannot vary: it lives in its states and attributes).
    Request(Box<PlanRequest>),
}

/// Why the value after the answer does not fit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FitNext {
    /// The value probed (answer + 1).
    pub value: u64,
    /// Which allocation or check fails.
    pub reason: String,
    /// By how many bytes it fails, where the failure is a byte count.
    pub bytes_short: Option<u64>,
    /// With a latency target: which bound fails, `memory`, `latency` or `memory and
    /// latency`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binds: Option<String>,
    /// With a latency target: the predicted latency at the value, where its plan builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencyFigures>,
}

impl FitNext {
    fn memory(value: u64, reason: String, bytes_short: Option<u64>) -> FitNext {
        FitNext {
            value,
            reason,
            bytes_short,
            binds: None,
            latency: None,
        }
    }
}

/// What a fit serves besides memory: an engine's budget and a latency target.
#[derive(Clone, Debug, Default)]
pub struct FitServing {
    /// The engine (`vllm`, `vllm@0.6`, ...) whose memory budget each probe is held to, as
    /// `plan MODEL --engine NAME` (model folders only).
    pub engine: Option<String>,
    /// The latency target (the sequence knob only).
    pub latency: Option<LatencyQuery>,
    /// The context ceiling of a model folder's preset (`fit --context TOKENS`, as
    /// `plan --context`), for the sequence and token knobs.
    pub context: Option<u64>,
}

/// The answer of a fit (`jointplan fit --json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// The value the search starts at (1: a ceiling below a reusable bucket drops it).
    pub lowest: u64,
    /// How many plans the search built.
    pub probes: u32,
    /// With a latency target: the target and the figures at the largest value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencyAnswer>,
}

/// One probe: a plan and its report, or why the value does not fit.
#[derive(Clone, Debug)]
pub enum Probe {
    /// The plan builds and its worst case fits (and its latency meets the target).
    Fits {
        /// The plan id.
        plan_id: String,
        /// Its report.
        report: ServingReport,
        /// Its predicted latency, with a latency target.
        latency: Option<LatencyFigures>,
    },
    /// The value does not fit.
    Fails(FitNext),
    /// The knob cannot take the value (the model's own limit): the search stops below it.
    Beyond(FitNext),
}

pub(crate) fn settings(path: &str, message: impl Into<String>) -> StudyError {
    StudyError::Settings {
        path: path.to_owned(),
        message: message.into(),
    }
}

/// The request of `subject` with `knob` set to `value`, whether the value was capped (a
/// context beyond the model's trained context), and the sequences that must fit: the
/// value itself when the knob is the sequence ceiling, else the policy's requirement
/// (`minimum_sequences`, 1 when absent; 1 for a request file). A ceiling below a reusable
/// bucket drops the bucket (buckets stay within the ceilings), so every value from 1 up is
/// admitted.
fn request_at(
    subject: &FitSubject,
    preset: Option<&PolicyPreset>,
    knob: Knob,
    value: u64,
    engine: Option<&str>,
) -> Result<(PlanRequest, Option<u64>, u64, Option<DeviceDescription>), StudyError> {
    match subject {
        FitSubject::Model(source) => {
            let preset = preset.ok_or_else(|| settings("policy", "no policy preset resolved"))?;
            let policy = match knob {
                Knob::Context => {
                    let mut policy = preset.clone();
                    policy.maximum_context_tokens = Some(value);
                    policy
                }
                Knob::Sequences => preset.with_sequence_ceiling(
                    u32::try_from(value)
                        .map_err(|_| settings("sequences", format!("{value} exceeds u32")))?,
                ),
                Knob::ScheduledTokens => preset.with_token_ceiling(value),
            };
            let required = match knob {
                Knob::Sequences => value,
                _ => u64::from(policy.required_sequences()),
            };
            let synthesized = source.synthesize_with_policy(&policy)?;
            let mut request = synthesized.request;
            if let Some(engine) = engine {
                let choice: crate::engine::EngineChoice = engine.parse()?;
                let report = super::engine_facts::engine_report(
                    &request,
                    &synthesized.device,
                    &synthesized.policy,
                    &choice,
                    &crate::engine::EngineArgs::default(),
                )?;
                request = super::engine_facts::with_engine_budget(
                    &request,
                    &synthesized.device,
                    &report,
                )?
                .0;
            }
            let context = context_tokens(&request);
            let capped = (knob == Knob::Context && context < value).then_some(context);
            Ok((request, capped, required, Some(synthesized.device)))
        }
        FitSubject::Request(request) => {
            if engine.is_some() {
                return Err(settings(
                    "--engine",
                    "applies to a model folder (the engine's budget needs the device file); give a model folder",
                ));
            }
            let mut request = (**request).clone();
            let policy = &mut request.policy;
            match knob {
                Knob::Context => {
                    return Err(settings(
                        "--maximize context",
                        "a request's context lives in its states and node attributes; give a \
                         model folder to fit the context",
                    ))
                }
                Knob::Sequences => {
                    policy.maximum_active_sequences = u32::try_from(value)
                        .map_err(|_| settings("sequences", format!("{value} exceeds u32")))?
                }
                Knob::ScheduledTokens => policy.maximum_scheduled_tokens = value,
            }
            let (sequences, tokens) = (
                policy.maximum_active_sequences,
                policy.maximum_scheduled_tokens,
            );
            if let Some(reusable) = &mut policy.reusable_execution {
                reusable.buckets.retain(|b| {
                    b.capacity.maximum_sequences <= sequences && b.capacity.maximum_tokens <= tokens
                });
                if reusable.buckets.is_empty() {
                    policy.reusable_execution = None;
                }
            }
            seal(&mut request).map_err(|e| settings("request", e.to_string()))?;
            let required = if knob == Knob::Sequences { value } else { 1 };
            Ok((request, None, required, None))
        }
    }
}

pub use super::report::context_tokens;

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
    probe_serving(
        subject,
        preset,
        knob,
        value,
        options,
        &FitServing::default(),
    )
}

/// [`probe`] with an engine's budget and a latency target: the value fits when the memory
/// fits and the plan served at concurrency `value` meets the target.
pub fn probe_serving(
    subject: &FitSubject,
    preset: Option<&PolicyPreset>,
    knob: Knob,
    value: u64,
    options: &BuildOptions,
    serving: &FitServing,
) -> Result<Probe, StudyError> {
    let (request, capped, required, device) =
        request_at(subject, preset, knob, value, serving.engine.as_deref())?;
    if let Some(context) = capped {
        let rule = super::report::trained_context(&request)
            .map_or_else(String::new, |t| format!(" ({})", t.rule));
        return Ok(Probe::Beyond(FitNext::memory(
            value,
            format!(
                "the model's trained context is {context} tokens{rule}: the context is capped there"
            ),
            None,
        )));
    }
    if serving.latency.is_some() && value > MAX_SERVED {
        return Ok(Probe::Beyond(FitNext::memory(
            value,
            format!("the performance model serves at most {MAX_SERVED} requests at once"),
            None,
        )));
    }
    let outcome = match ExecutionPlan::build_with_report(&request, options) {
        Ok(outcome) => outcome,
        Err(error) if error.kind() == crate::error_kind::ErrorKind::Infeasible => {
            let mut next = FitNext::memory(value, error.to_string(), bytes_short(&error));
            if serving.latency.is_some() {
                next.binds = Some("memory".to_owned());
            }
            return Ok(Probe::Fails(next));
        }
        Err(error) => return Err(StudyError::Plan(Box::new(error))),
    };
    let latency = match &serving.latency {
        Some(query) => {
            let pricer = pricer_at(query, device.as_ref(), value)?;
            let performance = pricer
                .price(&request, &outcome.plan)
                .map_err(super::timing::perf_settings)?;
            Some(query.target.judge(&performance))
        }
        None => None,
    };
    let latency_fails = latency.as_ref().is_some_and(|l| !l.meets);
    let (report, limits) = ServingReport::with_limits(&request, &outcome.plan)?;
    if report.meets(required) {
        if let (true, Some(figures), Some(query)) = (latency_fails, &latency, &serving.latency) {
            return Ok(Probe::Fails(FitNext {
                value,
                reason: latency_reason(&query.target, figures),
                bytes_short: None,
                binds: Some("latency".to_owned()),
                latency: latency.clone(),
            }));
        }
        return Ok(Probe::Fits {
            plan_id: outcome.plan.payload.plan_id.clone(),
            report,
            latency,
        });
    }
    let sequences = required;
    let needed = i128::from(report.kv_bytes_per_sequence) * i128::from(sequences);
    let short = u64::try_from(needed - report.headroom_bytes).ok();
    let mut reason = format!(
        "the requirement does not fit: {} x {} bytes of KV cache and \
         sequence state at {} tokens need {needed} bytes, the headroom after weights, \
         activations and workspaces is {} bytes",
        super::report::sequences(sequences),
        report.kv_bytes_per_sequence,
        limits.context_tokens,
        report.headroom_bytes
    );
    let binds = match (&latency, &serving.latency) {
        (Some(figures), Some(query)) if latency_fails => {
            reason.push_str("; and ");
            reason.push_str(&latency_reason(&query.target, figures));
            Some("memory and latency".to_owned())
        }
        (Some(_), _) => Some("memory".to_owned()),
        _ => None,
    };
    Ok(Probe::Fails(FitNext {
        value,
        reason,
        bytes_short: short,
        binds,
        latency,
    }))
}

/// The largest value of `knob` that fits, found with the planner as the oracle: the plan
/// builds and the requirement fits (the sequences the policy requires, 1 when it states
/// none, at the context; for the sequence knob, that many sequences). Every other knob
/// keeps the policy's value as its ceiling. The search starts at 1.
pub fn fit(
    subject: &FitSubject,
    knob: Knob,
    options: &BuildOptions,
) -> Result<FitResult, StudyError> {
    fit_serving(subject, knob, options, &FitServing::default())
}

/// [`fit`] with an engine's budget and a latency target (the sequence knob only): the
/// largest N whose memory fits and whose plan, served at concurrency N, meets the target.
pub fn fit_serving(
    subject: &FitSubject,
    knob: Knob,
    options: &BuildOptions,
    serving: &FitServing,
) -> Result<FitResult, StudyError> {
    if serving.latency.is_some() && knob != Knob::Sequences {
        return Err(settings(
            "--max-tpot-ms",
            format!(
                "a latency target applies to --maximize sequences (each value is served at that concurrency), not to --maximize {}",
                knob.name()
            ),
        ));
    }
    let preset =
        match (subject, serving.context) {
            (_, Some(_)) if knob == Knob::Context => {
                return Err(settings(
                    "--context",
                    "is the knob of --maximize context: give one of the two",
                ))
            }
            (FitSubject::Request(_), Some(_)) => return Err(settings(
                "--context",
                "a request's context lives in its states and node attributes; give a model folder",
            )),
            (FitSubject::Model(source), context) => {
                let mut preset = source.policy_preset()?;
                if let Some(context) = context {
                    preset.maximum_context_tokens = Some(context);
                }
                Some(preset)
            }
            (FitSubject::Request(_), None) => None,
        };
    let mut probes = 0u32;
    type Good = (String, ServingReport, Option<LatencyFigures>);
    let mut run = |value: u64| -> Result<Result<Good, FitNext>, StudyError> {
        probes += 1;
        Ok(
            match probe_serving(subject, preset.as_ref(), knob, value, options, serving)? {
                Probe::Fits {
                    plan_id,
                    report,
                    latency,
                } => Ok((plan_id, report, latency)),
                Probe::Fails(next) | Probe::Beyond(next) => Err(next),
            },
        )
    };
    // Invariant: `good` fits (with its plan), `bad` does not (with its reason).
    let mut good: Option<(u64, Good)> = None;
    let mut bad: Option<FitNext> = None;
    let lowest = 1;
    let mut value = lowest;
    loop {
        match run(value)? {
            Ok(fits) => {
                good = Some((value, fits));
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
                Ok(fits) => {
                    good = Some((middle, fits));
                    low = middle;
                }
                Err(next) => {
                    bad = Some(next);
                    high = middle;
                }
            }
        }
    }
    let latency_rule = match &serving.latency {
        Some(query) => Some((query, rule_of(query, subject, preset.as_ref(), serving)?)),
        None => None,
    };
    let (largest, plan_id, report, at_largest) = match good {
        Some((value, (plan_id, report, latency))) => {
            (Some(value), Some(plan_id), Some(report), latency)
        }
        None => (None, None, None, None),
    };
    Ok(FitResult {
        knob,
        largest,
        plan_id,
        next: bad,
        report,
        lowest,
        probes,
        latency: latency_rule.map(|(query, rule)| LatencyAnswer {
            target: query.target,
            input_tokens: query.load.input_tokens,
            output_tokens: query.load.output_tokens,
            rule,
            at_largest,
        }),
    })
}

/// How a latency query's figures are priced (its device: the query's, else the one a
/// request at 1 sequence is synthesized for).
fn rule_of(
    query: &LatencyQuery,
    subject: &FitSubject,
    preset: Option<&PolicyPreset>,
    serving: &FitServing,
) -> Result<PricingRule, StudyError> {
    let device = match &query.device {
        Some(device) => Some(device.clone()),
        None => {
            request_at(
                subject,
                preset,
                Knob::Sequences,
                1,
                serving.engine.as_deref(),
            )?
            .3
        }
    };
    Ok(pricer_at(query, device.as_ref(), 1)?.rule())
}

/// Whether a model fits one device of a directory (`jointplan fit --devices DIR`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceFit {
    /// The device file.
    pub device_file: String,
    /// The device's memory (from its plan or its description).
    pub device_memory_bytes: u64,
    /// Whether the plan builds and the policy's requirement fits ([`ServingReport::meets`]).
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
    let required = u64::from(source.policy_preset()?.required_sequences());
    let mut fits = Vec::with_capacity(files.len());
    for file in files {
        let mut device_source = source.clone();
        device_source.device = Some(file.clone());
        let request = device_source.synthesize()?.request;
        fits.push(device_fit(&request, &file, required, options)?);
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
    required: u64,
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
            row.fits = report.meets(required);
            row.plan_id = Some(outcome.plan.payload.plan_id.clone());
            row.headroom_bytes = Some(report.headroom_bytes);
            row.sequences_that_fit = report.sequences_that_fit;
            if !row.fits {
                row.reason = Some(format!(
                    "the requirement of {} does not fit: {} at the maximum context",
                    super::report::sequences(required),
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
/// than it, on which `source` (under its policy with `fields` set) builds and the policy's
/// requirement fits — the "next device" lever of why-infeasible.
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
        let synthesized = fields.synthesize(&device_source)?;
        let required = u64::from(synthesized.policy.required_sequences());
        let row = device_fit(&synthesized.request, &file, required, options)?;
        if row.fits {
            return Ok(Some(row));
        }
    }
    Ok(None)
}
