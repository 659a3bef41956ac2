//! The multi-GPU validation table of `docs/performance-validation.md` is current: the example
//! `examples/placement_validation.rs` places and times every point of
//! `docs/data/perf-validation-multi-gpu.json`, and the table it prints must equal the one
//! committed between the `placement-validation` markers (rewrite it with
//! `cargo run --release --example placement_validation -- --write`); SGLang's request
//! overhead and prefill launch factor must be the ones its fit half gives.

#[allow(dead_code)]
#[path = "../../examples/placement_validation.rs"]
mod example;

#[test]
fn multi_gpu_validation_table_is_current() {
    let (table, fits) = example::table();
    // vLLM V0's host times on several devices are the fit the table states (on its vLLM
    // 0.5.4 points of the fit half).
    let v0 = fits
        .vllm_v0
        .expect("the table has vLLM 0.5.4 points in its fit half");
    let step = jointplan::perf::engine_profile::VLLM_V0_DISTRIBUTED_STEP_OVERHEAD_SECONDS;
    assert!(
        (step - v0.step_overhead).abs() < 1e-9,
        "VLLM_V0_DISTRIBUTED_STEP_OVERHEAD_SECONDS is {step}, the fit half gives {}",
        v0.step_overhead
    );
    let sequence = jointplan::perf::engine_profile::VLLM_V0_DISTRIBUTED_SEQUENCE_OVERHEAD_SECONDS;
    assert!(
        (sequence - v0.sequence_overhead).abs() < 1e-12,
        "VLLM_V0_DISTRIBUTED_SEQUENCE_OVERHEAD_SECONDS is {sequence}, the fit half gives {}",
        v0.sequence_overhead
    );
    // SGLang's constants are the fit the table states (on its SGLang points of the fit
    // half).
    let fit = fits
        .sglang
        .expect("the table has SGLang points in its fit half");
    let overhead = jointplan::perf::engine_profile::SGLANG_REQUEST_OVERHEAD_SECONDS;
    assert!(
        (overhead - fit.request_overhead).abs() < 1e-9,
        "SGLANG_REQUEST_OVERHEAD_SECONDS is {overhead}, the fit half gives {}",
        fit.request_overhead
    );
    let launch = jointplan::perf::engine_profile::SGLANG_PREFILL_LAUNCH_FACTOR;
    assert!(
        (launch - fit.prefill_launch).abs() < 1e-9,
        "SGLANG_PREFILL_LAUNCH_FACTOR is {launch}, the fit half gives {}",
        fit.prefill_launch
    );
    let docs = std::fs::read_to_string(example::DOCS).unwrap();
    let current = example::with_table(&docs, &table).expect("the docs have the markers");
    assert!(
        docs == current,
        "the multi-GPU validation table in {} is stale: run `cargo run --release --example placement_validation -- --write`\n{table}",
        example::DOCS
    );
}

/// Every point names a record of the serving measurements on several devices, a model and
/// a device set that exist, and a tensor-parallel degree no larger than the set; every id
/// the points file leaves out names such a record too, once, and is not a point; and every
/// record on several devices is accounted for: a point, screened out by the record's own
/// figures, or left out with a reason (none falls to [`example::NOT_SET_UP`]).
#[test]
fn multi_gpu_points_name_records_models_and_device_sets() {
    use std::collections::BTreeSet;
    let points = example::points_file();
    let records = example::records();
    let several: BTreeSet<&str> = records
        .iter()
        .filter(|r| example::devices(r) > 1)
        .filter_map(|r| r["id"].as_str())
        .collect();
    let mut seen = BTreeSet::new();
    let list = points["points"].as_array().expect("a `points` array");
    assert!(!list.is_empty());
    for point in list {
        let id = point["id"].as_str().expect("a point id");
        assert!(seen.insert(id), "point {id} listed twice");
        assert!(
            several.contains(id),
            "point {id} is not a record on several devices"
        );
        for key in ["model", "devices"] {
            let path = point[key].as_str().expect("a path");
            assert!(
                std::path::Path::new(path).exists(),
                "point {id}: {key} {path} does not exist"
            );
        }
        let set = jointplan::placement::DeviceSet::read(std::path::Path::new(
            point["devices"].as_str().unwrap(),
        ))
        .unwrap_or_else(|e| panic!("point {id}: {e}"));
        let degree = point["tensor_parallel"].as_u64().expect("a degree");
        assert!(
            degree >= 2 && degree <= set.device_count(),
            "point {id}: tensor parallel {degree} on {} devices",
            set.device_count()
        );
        assert!(point["weight_format"].as_str().is_some(), "point {id}");
    }
    for entry in points["left_out"].as_array().expect("a `left_out` array") {
        let reason = entry["reason"].as_str().expect("a reason");
        assert!(!reason.is_empty());
        for id in entry["ids"].as_array().expect("ids") {
            let id = id.as_str().expect("an id");
            assert!(
                several.contains(id),
                "left out {id} is not a record on several devices"
            );
            assert!(seen.insert(id), "{id} is a point or left out twice");
            assert!(
                example::screened(records.iter().find(|r| r["id"] == id).unwrap()).is_none(),
                "{id} is left out by hand but its record already screens it out"
            );
        }
    }
    for record in records.iter().filter(|r| example::devices(r) > 1) {
        let id = record["id"].as_str().unwrap();
        assert!(
            seen.contains(id) || example::screened(record).is_some(),
            "record {id} on several devices: {}",
            example::NOT_SET_UP
        );
    }
}
