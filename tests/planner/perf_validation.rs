//! The validation table of `docs/performance-model.md` is current: the example
//! `examples/perf_validation.rs` plans and predicts every published measurement of
//! `docs/data/serving-measurements.json`, and the table it prints must equal the one
//! committed between the `perf-validation` markers (rewrite it with
//! `cargo run --release --example perf_validation -- --write`).

#[allow(dead_code)]
#[path = "../../examples/perf_validation.rs"]
mod example;

#[test]
fn perf_validation_table_is_current() {
    let (table, fit) = example::table();
    // The engine profile's constant is the fit the table states (to 0.1 ms).
    let constant = jointplan::perf::engine_profile::VLLM_REQUEST_OVERHEAD_SECONDS;
    assert!(
        (constant - (fit * 1e4).round() / 1e4).abs() < 1e-9,
        "VLLM_REQUEST_OVERHEAD_SECONDS is {constant}, the odd rows give {fit}"
    );
    let docs = std::fs::read_to_string(example::DOCS).unwrap();
    let current = example::with_table(&docs, &table).expect("the docs have the markers");
    assert!(
        docs == current,
        "the validation table in {} is stale: run `cargo run --release --example perf_validation -- --write`\n{table}",
        example::DOCS
    );
}
