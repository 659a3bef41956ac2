//! The plan file written beside the checks (`ExecutionPlan::build_writing`): the bytes are
//! the plan file form that `ExecutionPlan::write_json` gives on its own, counted exactly,
//! identical whatever the thread count; over the wire limit nothing past the limit is
//! written; and when several passes fail, the error is the one the passes run one after
//! another reported first (internal validation, independent checker, wire limit).

use crate::common;

use std::num::NonZeroUsize;

use jointplan::builder::error::PlanError;
use jointplan::builder::{check_beside_writing, hash_check_and_write, BuildOptions};
use jointplan::plan::hash::{plan_hash, plan_id, UNSET_PLAN_ID};
use jointplan::plan::ExecutionPlan;
use jointplan::request::{PlanRequest, WireLimits};

fn with_plan_bytes_limit(request: &PlanRequest, limit: u64) -> PlanRequest {
    let mut request = request.clone();
    request.policy.wire_limits = Some(WireLimits {
        maximum_plan_json_bytes: limit,
        ..request.policy.effective_wire_limits()
    });
    request
}

fn threads(n: usize) -> BuildOptions {
    BuildOptions {
        threads: NonZeroUsize::new(n),
        ..BuildOptions::default()
    }
}

#[test]
fn the_file_written_beside_the_checks_is_the_plan_file_form_whatever_the_threads() {
    let request = common::models::decoder_2layer();
    let mut files = Vec::new();
    for n in [1, 2, 3] {
        let mut file = Vec::new();
        let (outcome, written) =
            ExecutionPlan::build_writing(&request, &threads(n), &mut file).unwrap();
        assert!(written.write_error.is_none());
        assert_eq!(written.bytes, file.len() as u64, "{n} threads");
        // The oracle: the plan file form serialized on its own, and its separate count.
        let alone = outcome.plan.write_json(Vec::new()).unwrap();
        assert_eq!(file, alone, "{n} threads");
        assert_eq!(outcome.plan.json_bytes().unwrap(), written.bytes);
        files.push(file);
    }
    assert_eq!(files[0], files[1]);
    assert_eq!(files[0], files[2]);
    let plain = ExecutionPlan::build(&request, &BuildOptions::default()).unwrap();
    assert_eq!(plain.write_json(Vec::new()).unwrap(), files[0]);
}

#[test]
fn over_the_wire_limit_the_error_is_the_limit_and_nothing_past_it_is_written() {
    let reference = common::models::decoder_2layer();
    let full = ExecutionPlan::build(&reference, &BuildOptions::default())
        .unwrap()
        .write_json(Vec::new())
        .unwrap();
    let limit = full.len() as u64 / 2;
    let request = with_plan_bytes_limit(&reference, limit);
    let mut file = Vec::new();
    let error = ExecutionPlan::build_writing(&request, &BuildOptions::default(), &mut file)
        .map(|_| ())
        .unwrap_err();
    match error {
        PlanError::PlanJsonTooLarge {
            measured,
            limit: reported,
        } => assert_eq!((measured, reported), (full.len() as u64, limit)),
        other => panic!("expected PlanJsonTooLarge, got {other}"),
    }
    // The plan under the lowered limit differs from the reference plan only in its policy
    // fingerprint and ids (same lengths): what was written is the start of a plan file,
    // exactly as many bytes as the limit allows.
    assert_eq!(file.len() as u64, limit, "{} bytes written", file.len());
    assert!(file.starts_with(b"{\n  \"payload\": {\n"));
}

/// A destination whose every write fails.
struct Broken;

impl std::io::Write for Broken {
    fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
        Err(std::io::Error::other("disk on fire"))
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_failed_write_is_handed_back_with_the_exact_size_after_the_checks_pass() {
    let request = common::models::decoder_2layer();
    let plan = ExecutionPlan::build(&request, &BuildOptions::default()).unwrap();
    let written = check_beside_writing(&plan, &request, Broken).unwrap();
    assert_eq!(written.bytes, plan.json_bytes().unwrap());
    let error = written.write_error.expect("the write failed");
    assert_eq!(error.to_string(), "disk on fire");
    // Over the limit as well: the limit is the error, before the write's.
    let small = with_plan_bytes_limit(&request, 100);
    let error = check_beside_writing(&plan, &small, Broken).unwrap_err();
    assert!(
        matches!(error, PlanError::PlanJsonTooLarge { .. }),
        "{error}"
    );
}

#[test]
fn when_several_passes_fail_the_error_is_the_one_the_sequential_order_gave() {
    let request = common::models::decoder_2layer();
    let built = ExecutionPlan::build(&request, &BuildOptions::default()).unwrap();
    let small = with_plan_bytes_limit(&request, 100);

    // A stored hash that is not the payload's (the plan id left as it was): only the
    // checker sees it (rule 2: the plan id is not the hash's); with the limit also broken,
    // the checker's rejection comes first.
    let mut wrong_hash = built.clone();
    wrong_hash.plan_hash = plan_hash(&{
        let mut other = built.payload.clone();
        other.maximum_scheduled_tokens += 1;
        other
    })
    .unwrap();
    let error = check_beside_writing(&wrong_hash, &small, Vec::new()).unwrap_err();
    assert!(matches!(error, PlanError::Check { .. }), "{error}");

    // A consistent (re-hashed) but false plan, whose execution weights are not the
    // request's (a fact of the request the checker cannot see): the internal validation
    // rejects it first, whatever the checker and the limit say.
    let mut false_plan = built.clone();
    false_plan
        .payload
        .execution_weights
        .materializer_version
        .minor += 1;
    false_plan.payload.plan_id = UNSET_PLAN_ID.to_owned();
    false_plan.plan_hash = plan_hash(&false_plan.payload).unwrap();
    false_plan.payload.plan_id = plan_id(&false_plan.plan_hash);
    let error = check_beside_writing(&false_plan, &small, Vec::new()).unwrap_err();
    assert!(matches!(error, PlanError::Internal(_)), "{error}");
    let error = check_beside_writing(&wrong_hash, &request, Vec::new()).unwrap_err();
    assert!(matches!(error, PlanError::Check { .. }), "{error}");

    // The built plan breaks only the limit.
    let error = check_beside_writing(&built, &small, Vec::new()).unwrap_err();
    assert!(
        matches!(error, PlanError::PlanJsonTooLarge { .. }),
        "{error}"
    );
    check_beside_writing(&built, &request, Vec::new()).unwrap();
}

#[test]
fn hashing_beside_the_internal_validation_gives_the_plan_and_the_sequential_order_of_errors() {
    let request = common::models::decoder_2layer();
    let built = ExecutionPlan::build(&request, &BuildOptions::default()).unwrap();
    let unhashed = |payload: &jointplan::plan::ExecutionPlanPayload| {
        let mut payload = payload.clone();
        payload.plan_id = UNSET_PLAN_ID.to_owned();
        payload
    };
    let small = with_plan_bytes_limit(&request, 100);
    // Execution weights that are not the request's: the internal validation's to reject.
    let mut false_payload = unhashed(&built.payload);
    false_payload.execution_weights.materializer_version.minor += 1;
    for n in [1, 2, 3] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .unwrap();
        // The oracle: the plan `build` gives and its plan file form serialized on its own.
        let mut file = Vec::new();
        let (plan, written) = pool
            .install(|| {
                hash_check_and_write(
                    unhashed(&built.payload),
                    &request,
                    &BuildOptions::default(),
                    &mut file,
                )
            })
            .unwrap();
        assert_eq!(plan.plan_hash, built.plan_hash, "{n} threads");
        assert_eq!(plan.payload.plan_id, built.payload.plan_id, "{n} threads");
        assert_eq!(file, built.write_json(Vec::new()).unwrap(), "{n} threads");
        assert_eq!(written.bytes, file.len() as u64, "{n} threads");
        // Over the wire limit alone: the limit.
        let error = pool
            .install(|| {
                hash_check_and_write(
                    unhashed(&built.payload),
                    &small,
                    &BuildOptions::default(),
                    Vec::new(),
                )
            })
            .map(|_| ())
            .unwrap_err();
        assert!(
            matches!(error, PlanError::PlanJsonTooLarge { .. }),
            "{n} threads: {error}"
        );
        // A false payload over the limit: the internal validation's error comes first.
        let error = pool
            .install(|| {
                hash_check_and_write(
                    false_payload.clone(),
                    &small,
                    &BuildOptions::default(),
                    Vec::new(),
                )
            })
            .map(|_| ())
            .unwrap_err();
        assert!(
            matches!(error, PlanError::Internal(_)),
            "{n} threads: {error}"
        );
    }
}
