//! Plans priced at a serving point: the performance model ([`crate::perf`]) applied to a
//! built plan, and the time a change of providers costs. `diff`, `explain --why-not` and
//! `fit --max-tpot-ms/--max-ttft-ms` price plans through this module, the command line and
//! Python alike.
//!
//! A [`Pricer`] is a load (concurrency, prompt and output tokens, engine time profile),
//! the device figures that price it and an optional calibration; the request's policy
//! gives the rest of the serving point (the scheduled-token budget, the sequence ceiling),
//! as `plan --concurrency ...` does. The time of a group of nodes whose provider changes is
//! the difference of two priced steps: the plan's own, and the same plan with only those
//! nodes on the other provider ([`change_time`]). A step's time is a sum over nodes, so on
//! one request at one serving point the changes' times add up to the difference of the two
//! plans' steps; TTFT and TPOT come from the serving simulation, which is not additive.

use serde::{Deserialize, Serialize};

use crate::perf::{self, Calibration, PerfError, Performance, ServingPoint};
use crate::plan::{ExecutionPlan, RecordedServing};
use crate::request::{NodeId, PlanRequest, ProviderId};
use crate::synth::{DeviceDescription, DevicePerformance};

/// The load of a serving point, before a request's policy gives its budget and ceiling.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Load {
    /// Requests in flight.
    pub concurrency: u64,
    /// Prompt tokens of each request.
    pub input_tokens: u64,
    /// Output tokens of each request.
    pub output_tokens: u64,
    /// The engine whose time profile prices the steps (`vllm`, `sglang`, `trtllm`,
    /// `llama.cpp`; a `@VERSION` suffix is dropped: every version shares the profile).
    pub engine: String,
    /// How the requests' lengths vary around the input and output tokens (Python's
    /// `lengths=`, the command line's `--lengths`; fixed by default). Never recorded: a time
    /// objective ranks at the fixed lengths.
    #[serde(default, skip)]
    pub lengths: crate::perf::Lengths,
}

/// What prices plans: a load, a device's figures and measured kernel times.
#[derive(Clone, Debug)]
pub struct Pricer {
    /// The load.
    pub load: Load,
    /// The device's name.
    pub device: String,
    /// Its performance figures.
    pub figures: DevicePerformance,
    /// Measured kernel times that replace the roofline, if any.
    pub calibration: Calibration,
}

/// The rule a priced figure follows, printed with it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PricingRule {
    /// The engine time profile.
    pub engine: String,
    /// The device whose figures priced the steps.
    pub device: String,
    /// `roofline`, or `roofline + calibration` when measured kernel times replace it.
    pub model: String,
}

impl Pricer {
    /// Prices `load` with the figures of `device` (an error names a device without any).
    pub fn on_device(
        load: Load,
        device: &DeviceDescription,
        calibration: Calibration,
    ) -> Result<Pricer, PerfError> {
        let figures = device
            .performance
            .clone()
            .ok_or_else(|| PerfError::NoFigures {
                device: device.name.clone(),
            })?;
        Pricer::new(load, &device.name, figures, calibration)
    }

    /// Prices `load` with `figures` of the device `device`; the load is checked (errors name
    /// the flag) and its engine must have a time profile.
    pub fn new(
        load: Load,
        device: &str,
        figures: DevicePerformance,
        calibration: Calibration,
    ) -> Result<Pricer, PerfError> {
        let mut load = load;
        load.engine = super::engine_facts::time_profile_name(&load.engine)
            .ok_or_else(|| PerfError::UnknownEngine {
                name: load.engine.clone(),
                known: perf::engine_names(),
            })?
            .to_owned();
        let pricer = Pricer {
            load,
            device: device.to_owned(),
            figures,
            calibration,
        };
        // The policy's budget and ceiling are checked when a request gives them.
        pricer.point(1 << 20, u64::from(u32::MAX)).validate()?;
        Ok(pricer)
    }

    /// The serving point and device figures a plan of a time objective recorded; unusable
    /// ones are an error naming the plan's field.
    pub fn recorded(serving: &RecordedServing) -> Result<Pricer, PerfError> {
        let field = |message: String| PerfError::ServingPoint {
            flag: "payload.selection_settings.serving".to_owned(),
            message,
        };
        let figures =
            crate::builder::time_costs::figures_of(serving).map_err(|e| field(e.to_string()))?;
        Pricer::new(
            Load {
                concurrency: serving.concurrency,
                input_tokens: serving.input_tokens,
                output_tokens: serving.output_tokens,
                engine: serving.engine.clone(),
                lengths: crate::perf::Lengths::Fixed,
            },
            &serving.device,
            figures,
            Calibration::default(),
        )
        .map_err(|e| field(e.to_string()))
    }

    /// The rule its figures follow.
    pub fn rule(&self) -> PricingRule {
        PricingRule {
            engine: self.load.engine.clone(),
            device: self.device.clone(),
            model: if self.calibration.is_empty() {
                "roofline".to_owned()
            } else {
                "roofline + calibration".to_owned()
            },
        }
    }

    fn point(&self, budget: u64, sequences: u64) -> ServingPoint {
        ServingPoint {
            concurrency: self.load.concurrency,
            input_tokens: self.load.input_tokens,
            output_tokens: self.load.output_tokens,
            engine: self.load.engine.clone(),
            scheduled_token_budget: budget,
            maximum_sequences: sequences,
            simulated_requests: self.load.concurrency.saturating_mul(4),
            lengths: self.load.lengths.clone(),
            context_tokens: None,
            chunked_prefill: None,
        }
    }

    /// The serving point under `request`'s policy (its budget and sequence ceiling), what
    /// `plan --concurrency ...` predicts.
    pub fn serving_point(&self, request: &PlanRequest) -> ServingPoint {
        ServingPoint {
            context_tokens: Some(super::report::context_tokens(request)),
            chunked_prefill: None,
            ..self.point(
                request.policy.maximum_scheduled_tokens,
                u64::from(request.policy.maximum_active_sequences),
            )
        }
    }

    fn model<'a>(
        &self,
        request: &PlanRequest,
        providers: impl Fn(&NodeId) -> Option<&'a ProviderId>,
    ) -> Result<perf::TimeModel, PerfError> {
        perf::TimeModel::new(
            request,
            providers,
            &self.device,
            &self.figures,
            self.calibration.clone(),
        )
    }

    /// The performance of `plan` (built from `request`) at this serving point: what
    /// `plan --concurrency ... --json` gives as `performance`.
    pub fn price(
        &self,
        request: &PlanRequest,
        plan: &ExecutionPlan,
    ) -> Result<Performance, PerfError> {
        let chosen = chosen_providers(plan);
        let model = self.model(request, |id| chosen.get(id).copied())?;
        perf::predict(&model, &self.serving_point(request))
    }
}

/// Each node's provider in `plan`.
fn chosen_providers(plan: &ExecutionPlan) -> std::collections::BTreeMap<&NodeId, &ProviderId> {
    plan.payload
        .nodes
        .iter()
        .map(|n| (&n.id, &n.selection.selected_provider))
        .collect()
}

/// The time one group of nodes adds when it moves from provider `a` to `b` (negative: it
/// saves), priced on plan A's request at A's serving point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChangeTime {
    /// Prefill of one prompt (seconds, B - A).
    pub prefill_seconds: f64,
    /// The steady decode step (seconds, B - A).
    pub decode_step_seconds: f64,
    /// Efficiency class of provider `a` (`dense`, `reference`, ...).
    pub class_a: String,
    /// Efficiency class of provider `b`.
    pub class_b: String,
}

/// The time `nodes` add when they move from the providers of `plan` to `to` (every node
/// of the group to the same provider), priced on `request` at `pricer`'s point.
pub fn change_time(
    pricer: &Pricer,
    request: &PlanRequest,
    plan: &ExecutionPlan,
    nodes: &[NodeId],
    from: &ProviderId,
    to: &ProviderId,
) -> Result<ChangeTime, PerfError> {
    let point = pricer.serving_point(request);
    let engine = perf::engine_profile(&point.engine)
        .ok_or_else(|| PerfError::UnknownEngine {
            name: point.engine.clone(),
            known: perf::engine_names(),
        })?
        .for_point(&point);
    let moved: std::collections::BTreeSet<&NodeId> = nodes.iter().collect();
    let chosen = chosen_providers(plan);
    let before = pricer.model(request, |id| chosen.get(id).copied())?;
    let after = pricer.model(request, |id| {
        if moved.contains(id) {
            Some(to)
        } else {
            chosen.get(id).copied()
        }
    })?;
    let prefill = |m: &perf::TimeModel| perf::serving::prefill_time(m, &engine, &point).seconds;
    let decode = |m: &perf::TimeModel| perf::serving::decode_step_time(m, &engine, &point).seconds;
    Ok(ChangeTime {
        prefill_seconds: prefill(&after) - prefill(&before),
        decode_step_seconds: decode(&after) - decode(&before),
        class_a: perf::efficiency::class_of(from).name.to_owned(),
        class_b: perf::efficiency::class_of(to).name.to_owned(),
    })
}

/// One node's share of a change's time (B - A, seconds): its candidates' roofline times,
/// the costs the time objectives use ([`crate::perf::CandidateTimes`], whole picoseconds).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct NodeTime {
    /// Prefill of one prompt.
    pub prefill_seconds: f64,
    /// The steady decode step.
    pub decode_step_seconds: f64,
}

/// Each of `nodes`' time when it moves from `from` to `to`, priced on `request` at
/// `pricer`'s point; `None` with a calibration (measured times are not split by node here).
pub fn node_times(
    pricer: &Pricer,
    request: &PlanRequest,
    nodes: &[NodeId],
    from: &ProviderId,
    to: &ProviderId,
) -> Result<Option<Vec<NodeTime>>, PerfError> {
    if !pricer.calibration.is_empty() {
        return Ok(None);
    }
    let candidates = perf::CandidateTimes::new(
        request,
        &pricer.device,
        &pricer.figures,
        &pricer.serving_point(request),
    )?;
    let seconds = |ps: Option<u64>| ps.unwrap_or(0) as f64 * 1e-12;
    nodes
        .iter()
        .map(|node| {
            let missing = || PerfError::Request {
                node: node.to_string(),
                message: "is not a node of the request's program".to_owned(),
            };
            let a = candidates.costs(node, from).ok_or_else(missing)?;
            let b = candidates.costs(node, to).ok_or_else(missing)?;
            Ok(NodeTime {
                prefill_seconds: seconds(b.ttft) - seconds(a.ttft),
                decode_step_seconds: seconds(b.tpot) - seconds(a.tpot),
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// A time figure on both sides and `b - a`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimeFigure {
    /// Plan A's.
    pub a: f64,
    /// Plan B's.
    pub b: f64,
    /// `b - a`.
    pub delta: f64,
}

impl TimeFigure {
    fn of(a: f64, b: f64) -> TimeFigure {
        TimeFigure { a, b, delta: b - a }
    }
}

/// The time of two plans and what their difference is made of.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimeDiff {
    /// How A was priced.
    pub rule_a: PricingRule,
    /// How B was priced.
    pub rule_b: PricingRule,
    /// A's serving point.
    pub point_a: ServingPoint,
    /// B's serving point.
    pub point_b: ServingPoint,
    /// Where the serving points come from (`the flags`, `plan A's recorded serving point`, ...).
    pub source: String,
    /// Mean time to first token (seconds).
    pub ttft_seconds: TimeFigure,
    /// Mean time per output token (seconds).
    pub tpot_seconds: TimeFigure,
    /// Output tokens per second, all requests.
    pub output_tokens_per_second: TimeFigure,
    /// One prompt's prefill (seconds).
    pub prefill_seconds: TimeFigure,
    /// The steady decode step (seconds).
    pub decode_step_seconds: TimeFigure,
    /// The sum of the provider changes' prefill times (each [`ChangeTime`]).
    pub changes_prefill_seconds: f64,
    /// The sum of the provider changes' decode-step times.
    pub changes_decode_step_seconds: f64,
    /// Why the changes do not add up to the difference, when they need not: the plans'
    /// programs, serving points or devices differ (the changes are priced on A's).
    /// `None`: one program at one point on one device, where they add up (to rounding).
    pub not_additive: Option<String>,
}

/// The two sides' performance, and the changes' sums.
pub(crate) fn time_diff(
    (a, pa, request_a): (&Performance, &Pricer, &PlanRequest),
    (b, pb, request_b): (&Performance, &Pricer, &PlanRequest),
    programs_equal: bool,
    changes: (f64, f64),
    source: String,
) -> TimeDiff {
    let not_additive = if !programs_equal {
        Some("the plans' programs differ (other shapes): the changes are priced on A's".to_owned())
    } else if a.serving_point != b.serving_point || request_a.policy != request_b.policy {
        Some("the serving points differ: the changes are priced at A's".to_owned())
    } else if pa.device != pb.device || pa.figures != pb.figures {
        Some("the devices differ: the changes are priced on A's".to_owned())
    } else {
        None
    };
    TimeDiff {
        rule_a: pa.rule(),
        rule_b: pb.rule(),
        point_a: a.serving_point.clone(),
        point_b: b.serving_point.clone(),
        source,
        ttft_seconds: TimeFigure::of(a.ttft_seconds, b.ttft_seconds),
        tpot_seconds: TimeFigure::of(a.tpot_seconds, b.tpot_seconds),
        output_tokens_per_second: TimeFigure::of(
            a.output_tokens_per_second,
            b.output_tokens_per_second,
        ),
        prefill_seconds: TimeFigure::of(a.prefill.seconds, b.prefill.seconds),
        decode_step_seconds: TimeFigure::of(a.decode_step.seconds, b.decode_step.seconds),
        changes_prefill_seconds: changes.0,
        changes_decode_step_seconds: changes.1,
        not_additive,
    }
}

/// Latency figures of a plan at a serving point, against targets.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencyFigures {
    /// The concurrency priced.
    pub concurrency: u64,
    /// Mean time to first token (seconds).
    pub ttft_seconds: f64,
    /// Mean time per output token (seconds).
    pub tpot_seconds: f64,
    /// Output tokens per second, all requests.
    pub output_tokens_per_second: f64,
    /// Whether every target is met.
    pub meets: bool,
}

/// Latency targets (`fit --max-tpot-ms X --max-ttft-ms Y`), in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencyTarget {
    /// Largest mean time per output token.
    pub max_tpot_seconds: Option<f64>,
    /// Largest mean time to first token.
    pub max_ttft_seconds: Option<f64>,
}

impl LatencyTarget {
    /// Targets of `--max-tpot-ms` and `--max-ttft-ms` (milliseconds); a target that is not
    /// a positive finite number is an error naming its flag.
    pub fn from_milliseconds(
        tpot_ms: Option<f64>,
        ttft_ms: Option<f64>,
    ) -> Result<LatencyTarget, PerfError> {
        let check = |flag: &str, value: Option<f64>| match value {
            None => Ok(None),
            Some(ms) if ms.is_finite() && ms > 0.0 => Ok(Some(ms / 1e3)),
            Some(ms) => Err(PerfError::ServingPoint {
                flag: flag.to_owned(),
                message: format!("{ms} is not a positive number of milliseconds"),
            }),
        };
        let target = LatencyTarget {
            max_tpot_seconds: check("--max-tpot-ms", tpot_ms)?,
            max_ttft_seconds: check("--max-ttft-ms", ttft_ms)?,
        };
        if target.max_tpot_seconds.is_none() && target.max_ttft_seconds.is_none() {
            return Err(PerfError::ServingPoint {
                flag: "--max-tpot-ms".to_owned(),
                message: "give --max-tpot-ms or --max-ttft-ms (or both)".to_owned(),
            });
        }
        Ok(target)
    }

    /// The figures of `p` against the targets.
    pub fn judge(&self, p: &Performance) -> LatencyFigures {
        let meets = self.max_tpot_seconds.is_none_or(|t| p.tpot_seconds <= t)
            && self.max_ttft_seconds.is_none_or(|t| p.ttft_seconds <= t);
        LatencyFigures {
            concurrency: p.serving_point.concurrency,
            ttft_seconds: p.ttft_seconds,
            tpot_seconds: p.tpot_seconds,
            output_tokens_per_second: p.output_tokens_per_second,
            meets,
        }
    }
}

/// A latency target on the sequence knob: each value N is served at concurrency N.
#[derive(Clone, Debug)]
pub struct LatencyQuery {
    /// The targets.
    pub target: LatencyTarget,
    /// Prompt and output tokens and the engine time profile (the concurrency is the value
    /// probed).
    pub load: Load,
    /// The device whose figures price it; `None`: the device each probe is synthesized for
    /// (a model folder's, or `--device`).
    pub device: Option<DeviceDescription>,
    /// Measured kernel times, if any.
    pub calibration: Calibration,
}

/// The latency side of a fit's answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencyAnswer {
    /// The targets.
    pub target: LatencyTarget,
    /// Prompt tokens of each request.
    pub input_tokens: u64,
    /// Output tokens of each request.
    pub output_tokens: u64,
    /// How the figures were priced.
    pub rule: PricingRule,
    /// The predicted figures at the largest value (served at that concurrency).
    pub at_largest: Option<LatencyFigures>,
}

/// The pricer of a latency query at concurrency `value` on `device` (the probe's own, where
/// the query names none).
pub(crate) fn pricer_at(
    query: &LatencyQuery,
    device: Option<&DeviceDescription>,
    value: u64,
) -> Result<Pricer, super::StudyError> {
    let device = query.device.as_ref().or(device).ok_or_else(|| {
        super::fit::settings(
            "--performance-device",
            "a latency target on a request file needs a device with performance figures",
        )
    })?;
    let mut load = query.load.clone();
    load.concurrency = value;
    Pricer::on_device(load, device, query.calibration.clone()).map_err(perf_settings)
}

/// A performance-model error as a fit's settings error, naming the flag to fix.
pub(crate) fn perf_settings(error: PerfError) -> super::StudyError {
    match error {
        PerfError::ServingPoint { flag, message } => super::fit::settings(&flag, message),
        PerfError::UnknownEngine { .. } => super::fit::settings("--engine", error.to_string()),
        PerfError::NoFigures { .. } => super::fit::settings("--device", error.to_string()),
        other => super::fit::settings("--max-tpot-ms", other.to_string()),
    }
}

/// Milliseconds of `seconds` for people: up to six decimals, trailing zeros dropped
/// (`0.0026` -> `2.6`).
pub fn milliseconds_text(seconds: f64) -> String {
    let text = format!("{:.6}", seconds * 1e3);
    let text = text.trim_end_matches('0');
    text.trim_end_matches('.').to_owned()
}

/// The most requests a latency fit serves (the serving model's own limit).
pub const MAX_SERVED: u64 = 1 << 16;

/// Which targets `figures` miss, in milliseconds.
pub(crate) fn latency_reason(target: &LatencyTarget, figures: &LatencyFigures) -> String {
    let mut missed = Vec::new();
    if let Some(t) = target.max_tpot_seconds {
        if figures.tpot_seconds > t {
            missed.push(format!(
                "TPOT {:.3} ms > {} ms",
                figures.tpot_seconds * 1e3,
                milliseconds_text(t)
            ));
        }
    }
    if let Some(t) = target.max_ttft_seconds {
        if figures.ttft_seconds > t {
            missed.push(format!(
                "TTFT {:.3} ms > {} ms",
                figures.ttft_seconds * 1e3,
                milliseconds_text(t)
            ));
        }
    }
    format!(
        "the latency target is not met at concurrency {}: {}",
        figures.concurrency,
        missed.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_must_be_positive_finite_milliseconds_and_errors_name_the_flag() {
        for (tpot, ttft, flag) in [
            (Some(0.0), None, "--max-tpot-ms"),
            (Some(-1.0), None, "--max-tpot-ms"),
            (Some(f64::NAN), None, "--max-tpot-ms"),
            (None, Some(f64::INFINITY), "--max-ttft-ms"),
            (None, None, "--max-tpot-ms"),
        ] {
            let error = LatencyTarget::from_milliseconds(tpot, ttft).unwrap_err();
            assert!(error.to_string().starts_with(flag), "{error}");
        }
        let target = LatencyTarget::from_milliseconds(Some(20.0), Some(500.0)).unwrap();
        assert_eq!(target.max_tpot_seconds, Some(0.02));
        assert_eq!(target.max_ttft_seconds, Some(0.5));
    }

    #[test]
    fn milliseconds_read_as_given() {
        assert_eq!(milliseconds_text(2.6 / 1e3), "2.6");
        assert_eq!(milliseconds_text(0.02), "20");
        assert_eq!(milliseconds_text(0.0001234), "0.1234");
    }
}
