//! The build stage observer: a build reports validate, selection, nodes, memory, hash and
//! checks in that order, once each; a failing build stops at the stage that found the
//! error; an observer does not change the plan.

use std::path::Path;
use std::sync::{Arc, Mutex};

use jointplan::builder::{BuildObserver, BuildOptions, BuildStage};
use jointplan::plan::ExecutionPlan;
use jointplan::request::PlanRequest;

fn request(name: &str) -> PlanRequest {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("models")
        .join(name)
        .join("request.json");
    PlanRequest::read(&file).unwrap()
}

fn recording() -> (Arc<Mutex<Vec<BuildStage>>>, Arc<dyn BuildObserver>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let observer: Arc<dyn BuildObserver> =
        Arc::new(move |stage: BuildStage| sink.lock().unwrap().push(stage));
    (seen, observer)
}

#[test]
fn the_observer_sees_every_stage_in_order() {
    let request = request("decoder-2layer");
    let (seen, observer) = recording();
    let options = BuildOptions {
        observer: Some(observer),
        ..BuildOptions::default()
    };
    let observed = ExecutionPlan::build(&request, &options).unwrap();
    assert_eq!(*seen.lock().unwrap(), BuildStage::ALL.to_vec());
    let names: Vec<&str> = BuildStage::ALL.iter().map(|s| s.name()).collect();
    assert_eq!(
        names,
        ["validate", "selection", "nodes", "memory", "hash", "checks"]
    );
    let plain = ExecutionPlan::build(&request, &BuildOptions::default()).unwrap();
    assert_eq!(observed.plan_hash, plain.plan_hash);
}

#[test]
fn a_failing_build_stops_at_the_stage_that_failed() {
    let mut request = request("tiny");
    request.policy.maximum_active_sequences = 0;
    let (seen, observer) = recording();
    let options = BuildOptions {
        observer: Some(observer),
        ..BuildOptions::default()
    };
    assert!(ExecutionPlan::build(&request, &options).is_err());
    assert_eq!(*seen.lock().unwrap(), vec![BuildStage::Validate]);
}
