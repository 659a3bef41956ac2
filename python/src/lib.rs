//! `jointplan._native`: the Python extension module.
//!
//! Deliberately thin: every function takes JSON text and returns JSON text, so that jobs
//! and results cross process boundaries (Dask, Ray, multiprocessing) as plain data and no
//! Rust object needs to pickle. The GIL is released while Rust runs, and every call takes
//! an explicit thread count, so that a worker running several calls side by side does not
//! oversubscribe its machine. The typed layer (`jointplan/__init__.py`) wraps these.
//!
//! This file holds the planning calls and what every call shares (failures, options,
//! model sources); [`research`] the questions asked of plans (check, explain, diff, fit)
//! and [`sweep`] the pieces a distributed sweep is made of.
#![forbid(unsafe_code)]

mod research;
mod sweep;
mod timing;

/// The allocator of the extension's Rust code (Python's objects keep Python's): planning
/// allocates and frees many small values across threads, where mimalloc is faster than the
/// system allocator (as in the `jointplan` binary; the library itself sets none).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use jointplan::request::id_pattern::IdPattern;
use jointplan::request::{NodeId, ProviderId};
use jointplan::selection::{objective_by_name, Weights};
use jointplan::study::ServingReport;
use jointplan::synth::ModelSource;
use jointplan::{BuildOptions, ErrorKind, PlanRequest, SelectionProblem, SolveOptions};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use serde_json::Value;

create_exception!(
    _native,
    NativeError,
    PyException,
    "A jointplan error: args are (kind, message, json_path, file, reason); reason is the JSON of why an infeasible request has no plan, or None."
);

/// A failure on its way to Python: kind (`bad_input`, `infeasible`, `rejected`), message,
/// JSON path and file where known.
pub(crate) struct Failure {
    kind: &'static str,
    message: String,
    json_path: Option<String>,
    file: Option<String>,
    /// Why an infeasible request has no plan (`jointplan::study::infeasible`), as JSON.
    reason: Option<String>,
}

impl Failure {
    pub(crate) fn bad_input(message: impl Into<String>) -> Self {
        Failure {
            kind: "bad_input",
            message: message.into(),
            json_path: None,
            file: None,
            reason: None,
        }
    }

    pub(crate) fn into_py(self) -> PyErr {
        NativeError::new_err((
            self.kind,
            self.message,
            self.json_path,
            self.file,
            self.reason,
        ))
    }
}

fn kind_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::BadInput => "bad_input",
        ErrorKind::Infeasible => "infeasible",
        ErrorKind::Rejected => "rejected",
        _ => "bad_input",
    }
}

impl From<jointplan::Error> for Failure {
    fn from(error: jointplan::Error) -> Self {
        Failure {
            kind: kind_name(error.kind()),
            json_path: error.json_path(),
            file: error.file().map(|f| f.display().to_string()),
            message: error.to_string(),
            reason: None,
        }
    }
}

impl From<jointplan::selection::SelectionError> for Failure {
    fn from(error: jointplan::selection::SelectionError) -> Self {
        use jointplan::selection::SelectionError as E;
        let kind = match &error {
            E::Infeasible { .. } => "infeasible",
            E::BadInput(_) => "bad_input",
            _ => "internal",
        };
        Failure {
            kind,
            message: error.to_string(),
            json_path: None,
            file: None,
            reason: None,
        }
    }
}

pub(crate) fn parse<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> Result<T, Failure> {
    jointplan::request::parse_json(Path::new(what), text)
        .map_err(|e| Failure::from(jointplan::Error::from(e)))
}

pub(crate) fn to_json(value: &impl serde::Serialize) -> Result<String, Failure> {
    serde_json::to_string(value).map_err(|e| Failure::bad_input(format!("cannot serialize: {e}")))
}

/// Options shared by `plan`, `verify` and `solve`, as the typed layer sends them.
pub(crate) struct CallOptions {
    threads: Option<NonZeroUsize>,
    solve: SolveOptions,
    allow_uncertified: bool,
    pins: BTreeMap<NodeId, ProviderId>,
    forbids: BTreeMap<NodeId, BTreeSet<ProviderId>>,
    /// Pins and forbids whose node is an id pattern (`node.layer.[0-31].attention`), each
    /// with `true` for a pin: expanded against the request's nodes by [`CallOptions::expand`].
    patterns: Vec<(IdPattern, ProviderId, bool)>,
}

/// A node id and a provider id of a pin or a forbid (`what` names the option).
fn node_provider(what: &str, node: &str, provider: &str) -> Result<(NodeId, ProviderId), Failure> {
    let bad = |detail: String| Failure::bad_input(format!("{what} {node}={provider}: {detail}"));
    Ok((
        NodeId::new(node).map_err(|e| bad(format!("bad node id: {e}")))?,
        ProviderId::new(provider).map_err(|e| bad(format!("bad provider id: {e}")))?,
    ))
}

pub(crate) fn call_options(text: &str) -> Result<CallOptions, Failure> {
    let value: Value = parse("options", text)?;
    let field = |name: &str| value.get(name).filter(|v| !v.is_null());
    let threads = match field("threads") {
        None => None,
        Some(v) => Some(
            v.as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .and_then(NonZeroUsize::new)
                .ok_or_else(|| Failure::bad_input("threads must be a positive integer"))?,
        ),
    };
    let weights = match field("weights") {
        None => None,
        Some(v) => Some(
            serde_json::from_value::<Weights>(v.clone())
                .map_err(|e| Failure::bad_input(format!("weights: {e}")))?,
        ),
    };
    let objective = field("objective")
        .and_then(Value::as_str)
        .unwrap_or("seed-lex");
    let mut solve = SolveOptions {
        objective: Arc::from(objective_by_name(objective, weights)?),
        ..SolveOptions::default()
    };
    if let Some(v) = field("node_limit") {
        solve.node_limit = Some(
            v.as_u64()
                .ok_or_else(|| Failure::bad_input("node_limit must be a non-negative integer"))?,
        );
    }
    if let Some(v) = field("time_limit") {
        let seconds = v
            .as_f64()
            .filter(|s| s.is_finite() && *s > 0.0)
            .ok_or_else(|| Failure::bad_input("time_limit must be a positive number of seconds"))?;
        solve.time_limit = Some(Duration::from_secs_f64(seconds));
    }
    if field("timings").and_then(Value::as_bool) == Some(false) {
        solve.timings = false;
    }
    let mut pins = BTreeMap::new();
    let mut patterns = Vec::new();
    let pattern = |what: &str, node: &str, provider: &str| {
        let bad =
            |detail: String| Failure::bad_input(format!("{what} {node}={provider}: {detail}"));
        Ok::<_, Failure>((
            IdPattern::parse(node).map_err(|e| bad(e.to_string()))?,
            ProviderId::new(provider).map_err(|e| bad(format!("bad provider id: {e}")))?,
        ))
    };
    if let Some(map) = field("pins").and_then(Value::as_object) {
        for (node, provider) in map {
            let provider = provider.as_str().ok_or_else(|| {
                Failure::bad_input(format!("pin {node}: the provider must be a string"))
            })?;
            if IdPattern::is_pattern(node) {
                let (node, provider) = pattern("pin", node, provider)?;
                patterns.push((node, provider, true));
                continue;
            }
            let (node, provider) = node_provider("pin", node, provider)?;
            pins.insert(node, provider);
        }
    }
    let mut forbids: BTreeMap<NodeId, BTreeSet<ProviderId>> = BTreeMap::new();
    if let Some(map) = field("forbids").and_then(Value::as_object) {
        for (node, providers) in map {
            let providers = providers.as_array().ok_or_else(|| {
                Failure::bad_input(format!("forbid {node}: give a list of provider ids"))
            })?;
            for provider in providers {
                let provider = provider.as_str().ok_or_else(|| {
                    Failure::bad_input(format!("forbid {node}: a provider must be a string"))
                })?;
                if IdPattern::is_pattern(node) {
                    let (node, provider) = pattern("forbid", node, provider)?;
                    patterns.push((node, provider, false));
                    continue;
                }
                let (node, provider) = node_provider("forbid", node, provider)?;
                forbids.entry(node).or_default().insert(provider);
            }
        }
    }
    Ok(CallOptions {
        threads,
        solve,
        allow_uncertified: field("allow_uncertified").and_then(Value::as_bool) == Some(true),
        pins,
        forbids,
        patterns,
    })
}

impl CallOptions {
    /// Expands the pins and forbids given as id patterns into the nodes of `request` they
    /// select, as the command line's `--pin` and `--forbid` do.
    pub(crate) fn expand(&mut self, request: &PlanRequest) -> Result<(), Failure> {
        for (pattern, provider, pin) in std::mem::take(&mut self.patterns) {
            let what = if pin { "pin" } else { "forbid" };
            let nodes: Vec<NodeId> = request
                .family
                .program
                .nodes()
                .filter(|n| pattern.matches(n.id.as_str()))
                .map(|n| n.id.clone())
                .collect();
            if nodes.is_empty() {
                return Err(Failure::bad_input(format!(
                    "{what} {pattern}={provider}: the pattern {pattern} selects no node of the request"
                )));
            }
            for node in nodes {
                if pin {
                    if let Some(earlier) = self.pins.insert(node.clone(), provider.clone()) {
                        if earlier != provider {
                            return Err(Failure::bad_input(format!(
                                "pin {pattern}={provider}: node {node} is already pinned to {earlier}"
                            )));
                        }
                    }
                } else {
                    self.forbids
                        .entry(node)
                        .or_default()
                        .insert(provider.clone());
                }
            }
        }
        Ok(())
    }

    pub(crate) fn build(&self) -> BuildOptions {
        BuildOptions {
            selection: self.solve.clone(),
            allow_uncertified: self.allow_uncertified,
            threads: self.threads,
            pins: self.pins.clone(),
            forbids: self.forbids.clone(),
            ..BuildOptions::default()
        }
    }
}

pub(crate) fn model_source(text: &str) -> Result<ModelSource, Failure> {
    let value: Value = parse("model source", text)?;
    let text_field = |name: &str| value.get(name).and_then(Value::as_str).map(str::to_owned);
    let number = |name: &str| -> Result<Option<u64>, Failure> {
        match value.get(name).filter(|v| !v.is_null()) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| Failure::bad_input(format!("{name} must be a positive integer"))),
        }
    };
    Ok(ModelSource {
        folder: text_field("model").map(Into::into),
        config: text_field("config").map(Into::into),
        device: text_field("device").map(Into::into),
        policy: text_field("policy"),
        layers: number("layers")?,
        experts: number("experts")?,
        expert_group_size: number("expert_group_size")?,
        weight_format: text_field("weight_format"),
        kv_cache_dtype: text_field("kv_cache_dtype"),
        speculative: text_field("speculative"),
    })
}

pub(crate) fn request_from(
    request_json: Option<&str>,
    source_json: Option<&str>,
) -> Result<PlanRequest, Failure> {
    match (request_json, source_json) {
        (Some(text), _) => jointplan::request::PlanRequest::parse(Path::new("request"), text)
            .map_err(|e| Failure::from(jointplan::Error::from(e))),
        (None, Some(source)) => Ok(model_source(source)?
            .synthesize()
            .map_err(|e| Failure::from(jointplan::Error::from(e)))?
            .request),
        (None, None) => Err(Failure::bad_input("give a request or a model")),
    }
}

/// Synthesizes the request of a model source (JSON: `model`, `config`, `device`, `policy`,
/// `layers`, `experts`, `expert_group_size`, `weight_format`); returns the request's JSON.
#[pyfunction]
fn synth(py: Python<'_>, source_json: String) -> PyResult<String> {
    py.detach(|| {
        let request = request_from(None, Some(&source_json))?;
        to_json(&request)
    })
    .map_err(Failure::into_py)
}

/// Builds a plan from a request (JSON) or a model source (JSON); returns
/// `{"plan": PLAN, "components": [...], "report": REPORT, "limits": LIMITS}` (the memory
/// report in serving terms, as `jointplan plan --json` gives it under `memory`), and with a
/// serving point (`serving` in the options) `"performance"`, what `plan --concurrency ...
/// --json` gives: a model source's sequence ceiling is raised to the concurrency when
/// lower, and a time objective records the point, as on the command line.
#[pyfunction]
#[pyo3(signature = (request_json, source_json, options_json))]
fn plan(
    py: Python<'_>,
    request_json: Option<String>,
    source_json: Option<String>,
    options_json: String,
) -> PyResult<String> {
    py.detach(|| {
        let mut call = call_options(&options_json)?;
        let serving = timing::serving_options(&options_json)?;
        let synth = |e: jointplan::synth::SynthError| Failure::from(jointplan::Error::from(e));
        // A model source keeps what it was synthesized from: why-infeasible tries the larger
        // devices of its device's directory.
        let (request, origin, device) = match (request_json.as_deref(), source_json.as_deref()) {
            (None, Some(source)) => {
                let source = model_source(source)?;
                let mut synthesized = source.synthesize().map_err(synth)?;
                if let Some(serving) = &serving {
                    let wanted = u32::try_from(serving.load.concurrency).unwrap_or(u32::MAX);
                    if synthesized.policy.maximum_active_sequences < wanted {
                        let policy = synthesized.policy.with_sequence_ceiling(wanted);
                        synthesized = source.synthesize_with_policy(&policy).map_err(synth)?;
                    }
                }
                // A named engine holds the plan to its budget, as `plan --engine` does.
                if let Some(engine) = serving.as_ref().and_then(|s| s.engine.as_deref()) {
                    let study = |e: jointplan::study::StudyError| {
                        Failure::from(jointplan::Error::from(e))
                    };
                    let choice: jointplan::engine::EngineChoice = engine
                        .parse()
                        .map_err(|e| study(jointplan::study::StudyError::from(e)))?;
                    synthesized.request = jointplan::study::engine_facts::apply_engine(
                        &synthesized.request,
                        &synthesized.device,
                        &synthesized.policy,
                        &choice,
                        &jointplan::engine::EngineArgs::default(),
                    )
                    .map_err(study)?
                    .request;
                }
                let device_file = synthesized.device_file;
                (
                    synthesized.request,
                    Some((source, device_file)),
                    Some(synthesized.device),
                )
            }
            (request, source) => {
                if serving.as_ref().is_some_and(|s| s.engine.is_some()) {
                    return Err(Failure::bad_input(
                        "engine= applies to a model folder (model=; it needs the device file); a request is planned as it is",
                    ));
                }
                (request_from(request, source)?, None, None)
            }
        };
        call.expand(&request)?;
        let mut options = call.build();
        let pricer = match &serving {
            Some(serving) => Some(serving.pricer(device.as_ref())?),
            None => None,
        };
        let objective = options.selection.objective.clone();
        if objective.time_weights().is_some() {
            let Some(pricer) = &pricer else {
                return Err(Failure::bad_input(format!(
                    "objective {}: a time objective needs a serving point: give concurrency=, input_tokens= and output_tokens=",
                    objective.name()
                )));
            };
            options.serving = Some(jointplan::builder::time_costs::recorded_serving(
                pricer.load.concurrency,
                pricer.load.input_tokens,
                pricer.load.output_tokens,
                &pricer.load.engine,
                &pricer.device,
                &pricer.figures,
            ));
        }
        let outcome = match jointplan::ExecutionPlan::build_with_report(&request, &options) {
            Ok(outcome) => outcome,
            Err(error) => return Err(explained(&request, origin.as_ref(), &options, error)),
        };
        let (report, limits) = ServingReport::with_limits(&request, &outcome.plan)
            .map_err(|e| Failure::from(jointplan::Error::from(e)))?;
        let performance = match &pricer {
            Some(pricer) => Some(
                pricer
                    .price(&request, &outcome.plan)
                    .map_err(timing::perf_failure)?,
            ),
            None => None,
        };
        // Serialized from the plan itself (no `Value` tree of a large plan), its fields in
        // the plan file's order.
        to_json(&PlanOutcome {
            plan: &outcome.plan,
            components: &outcome.selection,
            report: &report,
            limits: &limits,
            performance: performance.as_ref(),
        })
    })
    .map_err(Failure::into_py)
}

/// The failure of a build; when the request is infeasible, with why (the minimal
/// conflicting facts and the relaxations, `jointplan::study::infeasible`): the message ends
/// with the command line's explanation and the reason travels as JSON.
fn explained(
    request: &PlanRequest,
    origin: Option<&(ModelSource, std::path::PathBuf)>,
    options: &BuildOptions,
    error: jointplan::builder::error::PlanError,
) -> Failure {
    if error.kind() != ErrorKind::Infeasible {
        return Failure::from(jointplan::Error::from(error));
    }
    let answer = match origin {
        Some((source, device_file)) => jointplan::study::infeasible::explain_source_failure(
            source,
            &jointplan::study::sweep::PolicyFields::default(),
            device_file,
            request,
            options,
            &error,
        ),
        None => jointplan::study::infeasible::explain_failure(request, options, &error),
    };
    let mut failure = Failure::from(jointplan::Error::from(error));
    match answer {
        Ok(Some(reason)) => {
            failure.message.push('\n');
            failure
                .message
                .push_str(&jointplan::render::infeasible_text::infeasibility_text(
                    &reason,
                ));
            failure.reason = serde_json::to_string(&reason).ok();
        }
        Ok(None) => {}
        Err(analysis) => failure.message.push_str(&format!(
            "\n(why it is infeasible could not be found: {analysis})"
        )),
    }
    failure
}

/// What [`plan`] returns, borrowed from the build's outcome.
#[derive(serde::Serialize)]
struct PlanOutcome<'a, P, C, R, L> {
    plan: &'a P,
    components: &'a C,
    report: &'a R,
    limits: &'a L,
    /// The prediction at the serving point, when one was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    performance: Option<&'a jointplan::perf::Performance>,
}

/// Verifies a stored plan (JSON text) against its request (JSON) or model source (JSON);
/// returns the plan id.
#[pyfunction]
#[pyo3(signature = (request_json, source_json, plan_json, options_json))]
fn verify(
    py: Python<'_>,
    request_json: Option<String>,
    source_json: Option<String>,
    plan_json: String,
    options_json: String,
) -> PyResult<String> {
    py.detach(|| {
        let options = call_options(&options_json)?.build();
        let request = request_from(request_json.as_deref(), source_json.as_deref())?;
        let plan = jointplan::verify(&request, &plan_json, &options)?;
        Ok::<_, Failure>(plan.payload.plan_id)
    })
    .map_err(Failure::into_py)
}

/// Solves a selection problem (JSON); returns the solution's JSON.
#[pyfunction]
fn solve(py: Python<'_>, problem_json: String, options_json: String) -> PyResult<String> {
    py.detach(|| {
        let options = call_options(&options_json)?;
        let problem = SelectionProblem::from_json_str(&problem_json)?;
        let run = || jointplan::solve(&problem, &options.solve);
        let solution = match options.threads {
            None => run()?,
            Some(threads) => rayon::ThreadPoolBuilder::new()
                .num_threads(threads.get())
                .build()
                .map_err(|e| Failure::bad_input(format!("cannot start {threads} threads: {e}")))?
                .install(run)?,
        };
        to_json(&solution)
    })
    .map_err(Failure::into_py)
}

/// The canonical SHA-256 of a JSON document (keys sorted at every depth, compact), as
/// `sha256:<hex>`.
#[pyfunction]
fn canonical_hash(py: Python<'_>, json_text: String) -> PyResult<String> {
    py.detach(|| {
        let value: Value = parse("document", &json_text)?;
        let digest = jointplan::canonical::canonical_fingerprint("document", &value)
            .map_err(|e| Failure::bad_input(e.to_string()))?;
        Ok::<_, Failure>(format!("sha256:{digest}"))
    })
    .map_err(Failure::into_py)
}

/// The extension module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("NativeError", m.py().get_type::<NativeError>())?;
    m.add_function(wrap_pyfunction!(synth, m)?)?;
    m.add_function(wrap_pyfunction!(plan, m)?)?;
    m.add_function(wrap_pyfunction!(verify, m)?)?;
    m.add_function(wrap_pyfunction!(solve, m)?)?;
    m.add_function(wrap_pyfunction!(canonical_hash, m)?)?;
    research::register(m)?;
    sweep::register(m)?;
    Ok(())
}
