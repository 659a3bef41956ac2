//! Questions asked of plans: the independent checker, explain and why-not, the semantic diff of two plans, and fit (the largest value of a knob that
//! fits, or which devices of a directory fit). JSON in, JSON out, the GIL released.

use std::path::Path;

use jointplan::plan::ExecutionPlan;
use jointplan::request::{NodeId, ProviderId};
use jointplan::study::diff::{diff_plans, diff_plans_with_reports};
use jointplan::study::fit::{fit as fit_knob, fit_devices as rank_devices, FitSubject, Knob};
use pyo3::prelude::*;
use serde_json::json;

use crate::{call_options, model_source, request_from, to_json, Failure};

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
/// settings): the answer `jointplan explain --why-not NODE=PROVIDER --json` prints.
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
        let plan = stored_plan("plan", &plan_json)?;
        let request = request_from(request_json.as_deref(), source_json.as_deref())?;
        let bad = |e: String| Failure::bad_input(format!("why_not {node}={provider}: {e}"));
        let node_id = NodeId::new(node.as_str()).map_err(bad)?;
        let provider_id = ProviderId::new(provider.as_str()).map_err(bad)?;
        let answer =
            jointplan::study::why_not::why_not(&request, &plan, &node_id, &provider_id, &options)
                .map_err(research)?;
        let text = jointplan::render::infeasible_text::why_not_text(&node, &provider, &answer);
        to_json(&json!({ "answer": answer, "text": text }))
    })
    .map_err(Failure::into_py)
}

/// The semantic comparison of two plans of one program: `{"answer": DIFF, "text": TEXT}`,
/// what `jointplan diff --json` and `jointplan diff` print; with their requests (A's and
/// B's, or one for both), the memory report's items too.
#[pyfunction]
#[pyo3(signature = (a_json, b_json, request_a_json, request_b_json))]
fn diff(
    py: Python<'_>,
    a_json: String,
    b_json: String,
    request_a_json: Option<String>,
    request_b_json: Option<String>,
) -> PyResult<String> {
    py.detach(|| {
        let a = stored_plan("plan A", &a_json)?;
        let b = stored_plan("plan B", &b_json)?;
        let diff = match (request_a_json, request_b_json) {
            (None, None) => diff_plans(&a, &b),
            (Some(one), None) | (None, Some(one)) => {
                let request = request_from(Some(&one), None)?;
                diff_plans_with_reports((&a, &request), (&b, &request))
            }
            (Some(ra), Some(rb)) => {
                let (ra, rb) = (
                    request_from(Some(&ra), None)?,
                    request_from(Some(&rb), None)?,
                );
                diff_plans_with_reports((&a, &ra), (&b, &rb))
            }
        }
        .map_err(research)?;
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
            (None, Some(source)) => FitSubject::Model(model_source(&source)?),
            (None, None) => return Err(Failure::bad_input("give a request or a model")),
        };
        let answer = fit_knob(&subject, knob, &options).map_err(study)?;
        to_json(&answer)
    })
    .map_err(Failure::into_py)
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
