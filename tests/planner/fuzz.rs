//! The fuzzing harness: structure-aware mutations (tests/common/fuzz.rs) of the shipped
//! requests, of selection problems and of plans, run through the library.
//!
//! Properties, for every case:
//! - no panic;
//! - a request either plans or fails with a kind (bad input, infeasible, rejected), and a
//!   bad input names where (a JSON path, or a quoted node, provider or resource);
//! - a selection problem either solves or fails with a message naming its culprit;
//! - a mutated plan verifies if and only if it parses strictly to a document canonically
//!   identical to the plan (any other change is rejected).
//!
//! The default run is bounded (a few thousand cases); `JOINTPLAN_FUZZ_CASES=N` (per target)
//! and `JOINTPLAN_FUZZ_SEED=S` make a long run, e.g.
//! `JOINTPLAN_FUZZ_CASES=40000 cargo test --release --test planner fuzz -- --nocapture`.
//! Every case is reproducible from its seed and index, which a finding reports.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use jointplan::builder::BuildOptions;
use jointplan::plan::ExecutionPlan;
use jointplan::request::PlanRequest;
use jointplan::selection::{instances, SelectionError, SelectionProblem, SolveOptions};
use jointplan::synth::ModelSource;
use jointplan::ErrorKind;
use serde_json::Value;

use crate::common::fuzz::{cases, mutate, seed, Rng};
use crate::common::models::shipped_models;

/// Outcome counts and findings of one target.
#[derive(Default)]
struct Tally {
    outcomes: BTreeMap<&'static str, u64>,
    findings: Vec<String>,
}

impl Tally {
    fn count(&mut self, outcome: &'static str) {
        *self.outcomes.entry(outcome).or_default() += 1;
    }

    fn report(&self, target: &str) -> String {
        let counts: Vec<String> = self
            .outcomes
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        format!(
            "{target}: {} cases ({}), {} findings",
            self.outcomes.values().sum::<u64>(),
            counts.join(", "),
            self.findings.len()
        )
    }
}

fn kind_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::BadInput => "bad input",
        ErrorKind::Infeasible => "infeasible",
        ErrorKind::Rejected => "rejected",
        _ => "other kind",
    }
}

/// Whether an error names its culprit: a JSON path, or an id of the input (a dotted token of
/// the message that the input holds as a string, such as `node.layer.0.v_proj`).
fn names_a_culprit(error: &jointplan::Error, input: &str) -> bool {
    if error.json_path().is_some_and(|p| !p.is_empty()) {
        return true;
    }
    error
        .to_string()
        .split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':' | '/')))
        .map(|token| token.trim_end_matches(['.', ':']))
        .filter(|token| (token.contains('.') && token.len() > 3) || token.len() >= 16)
        .any(|token| input.contains(&format!("\"{token}\"")))
}

fn requests() -> Vec<(String, Value)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out: Vec<(String, Value)> = shipped_models()
        .into_iter()
        .map(|(name, r)| (name.to_owned(), r.to_json_tree().unwrap()))
        .collect();
    let mut source = ModelSource::folder(root.join("models/llama-3.2-1b"));
    source.layers = Some(1);
    let request = source.synthesize().unwrap().request;
    out.push((
        "llama-3.2-1b (1 layer)".to_owned(),
        request.to_json_tree().unwrap(),
    ));
    out
}

fn run_request_case(text: &str, tally: &mut Tally, label: &str) {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let request =
            PlanRequest::parse(Path::new("mutated.json"), text).map_err(jointplan::Error::from)?;
        jointplan::build(&request, &BuildOptions::default()).map(drop)
    }));
    match outcome {
        Err(_) => tally.findings.push(format!("{label}: PANIC")),
        Ok(Ok(())) => tally.count("planned"),
        Ok(Err(error)) => {
            tally.count(kind_name(error.kind()));
            if error.kind() == ErrorKind::BadInput && !names_a_culprit(&error, text) {
                tally
                    .findings
                    .push(format!("{label}: bad input names no culprit: {error}"));
            }
        }
    }
}

fn run_problem_case(text: &str, tally: &mut Tally, label: &str) {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let problem = SelectionProblem::from_json_str(text)?;
        jointplan::solve(&problem, &SolveOptions::default()).map(drop)
    }));
    match outcome {
        Err(_) => tally.findings.push(format!("{label}: PANIC")),
        Ok(Ok(())) => tally.count("solved"),
        Ok(Err(SelectionError::BadInput(message))) => {
            tally.count("bad input");
            if !message.contains('`') {
                tally
                    .findings
                    .push(format!("{label}: bad input names no culprit: {message}"));
            }
        }
        Ok(Err(SelectionError::Infeasible { .. })) => tally.count("infeasible"),
        Ok(Err(other)) => tally
            .findings
            .push(format!("{label}: unexpected solver error: {other}")),
    }
}

fn run_plan_case(
    request: &PlanRequest,
    original: &str,
    text: &str,
    tally: &mut Tally,
    label: &str,
) {
    // Canonically identical: parses strictly, and the canonical texts are equal.
    let identical = jointplan::json_input::parse_strict::<Value>(text)
        .ok()
        .is_some_and(|v| {
            jointplan::canonical::canonical_json("plan", &v)
                .ok()
                .as_deref()
                == Some(original)
        });
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        jointplan::verify(request, text, &BuildOptions::default()).map(drop)
    }));
    match (outcome, identical) {
        (Err(_), _) => tally.findings.push(format!("{label}: PANIC")),
        (Ok(Ok(())), true) => tally.count("verified (identical)"),
        (Ok(Ok(())), false) => tally
            .findings
            .push(format!("{label}: a changed plan VERIFIED")),
        (Ok(Err(error)), true) => tally
            .findings
            .push(format!("{label}: an identical plan was rejected: {error}")),
        (Ok(Err(error)), false) => {
            tally.count(if error.kind() == ErrorKind::BadInput {
                "rejected as bad input"
            } else {
                "rejected"
            });
            if !names_a_culprit(&error, text) {
                tally
                    .findings
                    .push(format!("{label}: rejection names no culprit: {error}"));
            }
        }
    }
}

#[test]
fn fuzz_requests_problems_and_plans() {
    let per_target = cases(700);
    let seed = seed();
    let mut report = Vec::new();

    let documents = requests();
    let mut tally = Tally::default();
    for index in 0..per_target {
        let mut rng = Rng::for_case(seed, index);
        let (name, document) = &documents[rng.below(documents.len())];
        let case = mutate(document, &mut rng);
        let label = format!(
            "request {name} seed {seed} case {index} {:?}",
            case.mutations
        );
        run_request_case(&case.text, &mut tally, &label);
    }
    report.push((tally.report("requests"), tally.findings));

    let spec: Value = serde_json::from_str(include_str!("../data/spec-example.json")).unwrap();
    let params = instances::Params::default();
    let problems: Vec<Value> = vec![
        spec,
        serde_json::to_value(instances::chain(12, &params, 3)).unwrap(),
        serde_json::to_value(instances::long_range(16, 0.5, &params, 5)).unwrap(),
    ];
    let mut tally = Tally::default();
    for index in 0..per_target {
        let mut rng = Rng::for_case(seed ^ 0x51, index);
        let document = &problems[rng.below(problems.len())];
        let case = mutate(document, &mut rng);
        let label = format!("problem seed {seed} case {index} {:?}", case.mutations);
        run_problem_case(&case.text, &mut tally, &label);
    }
    report.push((tally.report("selection problems"), tally.findings));

    let plans: Vec<(PlanRequest, Value, String)> = shipped_models()
        .into_iter()
        .map(|(_, request)| {
            let plan = ExecutionPlan::build(&request, &BuildOptions::default()).unwrap();
            let value = plan.to_json_tree().unwrap();
            let canonical = jointplan::canonical::canonical_json("plan", &value).unwrap();
            (request, value, canonical)
        })
        .collect();
    let mut tally = Tally::default();
    for index in 0..per_target {
        let mut rng = Rng::for_case(seed ^ 0xA7, index);
        let (request, value, canonical) = &plans[rng.below(plans.len())];
        let case = mutate(value, &mut rng);
        let label = format!("plan seed {seed} case {index} {:?}", case.mutations);
        run_plan_case(request, canonical, &case.text, &mut tally, &label);
    }
    report.push((tally.report("plans"), tally.findings));

    let mut failures = Vec::new();
    for (line, findings) in &report {
        println!("{line}");
        for finding in findings.iter().take(20) {
            println!("  {finding}");
        }
        failures.extend(findings.iter().cloned());
    }
    assert!(
        failures.is_empty(),
        "{} findings; first: {}",
        failures.len(),
        failures[0]
    );
}
