//! The multi-GPU validation table of `docs/performance-model.md` is current: the example
//! `examples/placement_validation.rs` places and times every point of
//! `docs/data/perf-validation-multi-gpu.json`, and the table it prints must equal the one
//! committed between the `placement-validation` markers (rewrite it with
//! `cargo run --release --example placement_validation -- --write`).

#[allow(dead_code)]
#[path = "../../examples/placement_validation.rs"]
mod example;

#[test]
fn multi_gpu_validation_table_is_current() {
    let (table, _) = example::table();
    let docs = std::fs::read_to_string(example::DOCS).unwrap();
    let current = example::with_table(&docs, &table).expect("the docs have the markers");
    assert!(
        docs == current,
        "the multi-GPU validation table in {} is stale: run `cargo run --release --example placement_validation -- --write`\n{table}",
        example::DOCS
    );
}
