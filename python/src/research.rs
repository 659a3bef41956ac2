//! Questions asked of plans: the independent checker, explain and why-not, the semantic diff of two plans, and fit (the largest value of a knob that
//! fits, or which devices of a directory fit). JSON in, JSON out, the GIL released.

use std::path::Path;

use jointplan::plan::ExecutionPlan;
use jointplan::request::{NodeId, ProviderId};
use jointplan::study::diff::{add_time, diff_plans, diff_plans_with_reports, diff_pricers};
use jointplan::study::fit::{
    fit_devices as rank_devices, fit_serving, FitServing, FitSubject, Knob,
};
use jointplan::study::timing::{LatencyQuery, LatencyTarget};
use pyo3::prelude::*;
use serde_json::json;

use crate::timing::{perf_failure, serving_options};
use crate::{call_options, model_source, parse, request_from, to_json, Failure};

/// A stored plan (its JSON text), parsed strictly, as `jointplan explain` and `diff` read
/// it; an error names `what` (`plan`, `plan A`, ...) as its file.
fn stored_plan(what: &str, text: &str) -> Result<ExecutionPlan, Failure> {
    jointplan::verify::read_plan_as_stored(Path::new(what), text)
        .map_err(|e| Failure::from(jointplan::Error::from(e)))
}

fn research(error: jointplan::study::ResearchError) -> Failure {
    Failure::from(jointplan::Error::from(error))
}

fn study(error: jointplan::study::StudyError) -> Failure {
    Failure::from(jointplan::Error::from(error))
}

/// The independent checker on a stored plan alone: `{"plan_id", "valid", "violations"}`,
/// what `jointplan check --json` prints.
#[pyfunction]
fn check(py: Python<'_>, plan_json: String) -> PyResult<String> {
    py.detach(|| {
        let (plan, report) = jointplan::verify::check_stored_plan(Path::new("plan"), &plan_json)
            .map_err(|e| Failure::from(jointplan::Error::from(e)))?;
        to_json(&json!({
            "plan_id": plan.payload.plan_id,
            "valid": report.is_valid(),
            "violations": report.violations,
        }))
    })
    .map_err(Failure::into_py)
}

/// Why each provider of the nodes `node` names (an id or an id pattern; every node when
/// `None`) was chosen, with the request also the providers passed over and the KV
/// trade-off: `{"answer": EXPLANATION, "text": TEXT}`, the answer `jointplan explain --json`
/// prints and the text `jointplan explain` prints (one query, `jointplan::study::explain`).
#[pyfunction]
#[pyo3(signature = (plan_json, request_json, source_json, node))]
fn explain(
    py: Python<'_>,
    plan_json: String,
    request_json: Option<String>,
    source_json: Option<String>,
    node: Option<String>,
) -> PyResult<String> {
    py.detach(|| {
        let plan = stored_plan("plan", &plan_json)?;
        let request = match (&request_json, &source_json) {
            (None, None) => None,
            _ => Some(request_from(
                request_json.as_deref(),
                source_json.as_deref(),
            )?),
        };
        let answer = jointplan::study::explain::explain(&plan, request.as_ref(), node.as_deref())
            .map_err(research)?;
        let text = jointplan::render::explain_text::explanation_text(&answer);
        to_json(&json!({ "answer": answer, "text": text }))
    })
    .map_err(Failure::into_py)
}

/// What pinning `node` to `provider` does to the plan (re-solved under the plan's recorded
/// settings): the answer `jointplan explain --why-not NODE=PROVIDER --json` prints, priced
/// at the serving point of the options (`serving`) or the one the plan recorded.
#[pyfunction]
#[pyo3(signature = (plan_json, request_json, source_json, node, provider, options_json))]
fn why_not(
    py: Python<'_>,
    plan_json: String,
    request_json: Option<String>,
    source_json: Option<String>,
    node: String,
    provider: String,
    options_json: String,
) -> PyResult<String> {
    py.detach(|| {
        let options = call_options(&options_json)?.build();
        let pricing = serving_options(&options_json)?
            .map(|s| s.given())
            .transpose()?;
        let plan = stored_plan("plan", &plan_json)?;
        let request = request_from(request_json.as_deref(), source_json.as_deref())?;
        let bad = |e: String| Failure::bad_input(format!("why_not {node}={provider}: {e}"));
        let node_id = NodeId::new(node.as_str()).map_err(bad)?;
        let provider_id = ProviderId::new(provider.as_str()).map_err(bad)?;
        let answer = jointplan::study::why_not::why_not(
            &request,
            &plan,
            &node_id,
            &provider_id,
            &options,
            pricing,
        )
        .map_err(research)?;
        let text = jointplan::render::infeasible_text::why_not_text(&node, &provider, &answer);
        to_json(&json!({ "answer": answer, "text": text }))
    })
    .map_err(Failure::into_py)
}

/// The semantic comparison of two plans of one program: `{"answer": DIFF, "text": TEXT}`,
/// what `jointplan diff --json` and `jointplan diff` print; with their requests (A's and
/// B's, or one for both), the memory report's items too, and the time of both plans and of
/// each provider change at the serving point of the options (`serving`) or the one a plan
/// recorded.
#[pyfunction]
#[pyo3(signature = (a_json, b_json, request_a_json, request_b_json, options_json))]
fn diff(
    py: Python<'_>,
    a_json: String,
    b_json: String,
    request_a_json: Option<String>,
    request_b_json: Option<String>,
    options_json: String,
) -> PyResult<String> {
    py.detach(|| {
        let a = stored_plan("plan A", &a_json)?;
        let b = stored_plan("plan B", &b_json)?;
        let given = serving_options(&options_json)?
            .map(|s| s.given())
            .transpose()?;
        let requests = match (request_a_json, request_b_json) {
            (None, None) => None,
            (Some(one), None) | (None, Some(one)) => {
                let request = request_from(Some(&one), None)?;
                Some((request.clone(), request))
            }
            (Some(ra), Some(rb)) => Some((
                request_from(Some(&ra), None)?,
                request_from(Some(&rb), None)?,
            )),
        };
        let diff = match &requests {
            None if given.is_some() => {
                return Err(Failure::bad_input(
                    "a serving point prices the plans' nodes, which only their requests have: give request=",
                ))
            }
            None => diff_plans(&a, &b).map_err(research)?,
            Some((ra, rb)) => {
                let mut diff = diff_plans_with_reports((&a, ra), (&b, rb)).map_err(research)?;
                if let Some(pricers) = diff_pricers(given, &a, &b).map_err(research)? {
                    add_time(&mut diff, (&a, ra), (&b, rb), &pricers).map_err(research)?;
                }
                diff
            }
        };
        let text = jointplan::render::diff_text::diff_text(
            &diff,
            &a,
            &b,
            jointplan::render::summary_text::Detail::Grouped,
        );
        to_json(&json!({ "answer": diff, "text": text }))
    })
    .map_err(Failure::into_py)
}

/// The largest value of `knob` (`context`, `sequences`, `scheduled-tokens`) whose plan
/// builds and whose worst case fits, for a request (JSON) or a model source (JSON): what
/// `jointplan fit --maximize KNOB --json` prints.
#[pyfunction]
#[pyo3(signature = (request_json, source_json, knob, options_json))]
fn fit(
    py: Python<'_>,
    request_json: Option<String>,
    source_json: Option<String>,
    knob: String,
    options_json: String,
) -> PyResult<String> {
    py.detach(|| {
        let options = call_options(&options_json)?.build();
        let knob = match knob.as_str() {
            "context" => Knob::Context,
            "sequences" => Knob::Sequences,
            "scheduled-tokens" | "scheduled_tokens" => Knob::ScheduledTokens,
            other => {
                return Err(Failure::bad_input(format!(
                    "maximize {other:?}: expected context, sequences or scheduled-tokens"
                )))
            }
        };
        let subject = match (request_json, source_json) {
            (Some(text), _) => FitSubject::Request(Box::new(request_from(Some(&text), None)?)),
            (None, Some(source)) => FitSubject::Model(Box::new(model_source(&source)?)),
            (None, None) => return Err(Failure::bad_input("give a request or a model")),
        };
        let serving = fit_serving_options(&options_json)?;
        let answer = fit_serving(&subject, knob, &options, &serving).map_err(study)?;
        to_json(&answer)
    })
    .map_err(Failure::into_py)
}

/// The engine and latency target of a fit (`engine`, `max_tpot_ms`, `max_ttft_ms` and the
/// `serving` load in the options; the concurrency is each value probed).
fn fit_serving_options(options_json: &str) -> Result<FitServing, Failure> {
    let value: serde_json::Value = parse("options", options_json)?;
    let number = |name: &str| -> Result<Option<f64>, Failure> {
        match value.get(name).filter(|v| !v.is_null()) {
            None => Ok(None),
            Some(v) => v.as_f64().map(Some).ok_or_else(|| {
                Failure::bad_input(format!("{name} must be a number of milliseconds"))
            }),
        }
    };
    let engine = value
        .get("engine")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned);
    let (tpot, ttft) = (number("max_tpot_ms")?, number("max_ttft_ms")?);
    let serving = serving_options(options_json)?;
    let latency = match (tpot, ttft, serving) {
        (None, None, None) => None,
        (None, None, Some(_)) => {
            return Err(Failure::bad_input(
                "input_tokens= and output_tokens= apply to a latency target: give max_tpot_ms= or max_ttft_ms=",
            ))
        }
        (_, _, None) => {
            return Err(Failure::bad_input(
                "a latency target needs input_tokens= and output_tokens= (each value of the knob is the concurrency)",
            ))
        }
        (tpot, ttft, Some(serving)) => Some(LatencyQuery {
            target: LatencyTarget::from_milliseconds(tpot, ttft).map_err(perf_failure)?,
            load: serving.load,
            device: serving.device,
            calibration: serving.calibration,
        }),
    };
    let context = match value.get("context").filter(|v| !v.is_null()) {
        None => None,
        Some(v) => Some(
            v.as_u64()
                .filter(|c| *c > 0)
                .ok_or_else(|| Failure::bad_input("context must be a positive integer"))?,
        ),
    };
    Ok(FitServing {
        engine,
        latency,
        context,
    })
}

/// Which device files (`*.json`) of `devices_dir` fit a model source under its policy,
/// fitting first, smallest first: what `jointplan fit MODEL --devices DIR --json` prints.
#[pyfunction]
fn fit_devices(
    py: Python<'_>,
    source_json: String,
    devices_dir: String,
    options_json: String,
) -> PyResult<String> {
    py.detach(|| {
        let options = call_options(&options_json)?.build();
        let source = model_source(&source_json)?;
        let rows = rank_devices(&source, Path::new(&devices_dir), &options).map_err(study)?;
        to_json(&rows)
    })
    .map_err(Failure::into_py)
}

/// Adds this file's functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(explain, m)?)?;
    m.add_function(wrap_pyfunction!(why_not, m)?)?;
    m.add_function(wrap_pyfunction!(diff, m)?)?;
    m.add_function(wrap_pyfunction!(fit, m)?)?;
    m.add_function(wrap_pyfunction!(fit_devices, m)?)?;
    Ok(())
}
