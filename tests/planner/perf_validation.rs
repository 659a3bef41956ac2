//! The validation table of `docs/performance-validation.md` is current: the example
//! `examples/perf_validation.rs` plans and predicts every published measurement of
//! `docs/data/serving-measurements.json`, and the table it prints must equal the one
//! committed between the `perf-validation` markers (rewrite it with
//! `cargo run --release --example perf_validation -- --write`). The constants fitted on the
//! fit half (the request overhead, the devices' memory factors) must be the ones the
//! performance model uses.

#[allow(dead_code)]
#[path = "../../examples/perf_validation.rs"]
mod example;

use jointplan::perf::efficiency::{device_memory_factor, DEVICE_FACTORS};

#[test]
fn perf_validation_table_is_current() {
    let (table, fit) = example::table();
    // The engine profile's constant is the fit the table states (to 0.1 ms).
    let constant = jointplan::perf::engine_profile::VLLM_REQUEST_OVERHEAD_SECONDS;
    assert!(
        (constant - fit.request_overhead.0).abs() < 1e-9,
        "VLLM_REQUEST_OVERHEAD_SECONDS is {constant}, the fit half gives {}",
        fit.request_overhead.0
    );
    let step = jointplan::perf::engine_profile::VLLM_STEP_OVERHEAD_SECONDS;
    assert!(
        (step - fit.vllm_step.0).abs() < 1e-9,
        "VLLM_STEP_OVERHEAD_SECONDS is {step}, the fit half gives {}",
        fit.vllm_step.0
    );
    let launch = jointplan::perf::engine_profile::VLLM_DECODE_LAUNCH_FACTOR;
    assert!(
        (launch - fit.decode_launch).abs() < 1e-9,
        "VLLM_DECODE_LAUNCH_FACTOR is {launch}, the fit half gives {}",
        fit.decode_launch
    );
    // vLLM V0's host times on one device are the fit the table states (on its one-device
    // vLLM 0.5.4 points of the fit half).
    let v0 = fit
        .vllm_v0_one_device
        .as_ref()
        .expect("the table has one-device vLLM 0.5.4 points in its fit half");
    let step = jointplan::perf::engine_profile::VLLM_V0_STEP_OVERHEAD_SECONDS;
    assert!(
        (step - v0.step_overhead).abs() < 1e-9,
        "VLLM_V0_STEP_OVERHEAD_SECONDS is {step}, the fit half gives {}",
        v0.step_overhead
    );
    let sequence = jointplan::perf::engine_profile::VLLM_V0_SEQUENCE_OVERHEAD_SECONDS;
    assert!(
        (sequence - v0.sequence_overhead).abs() < 1e-12,
        "VLLM_V0_SEQUENCE_OVERHEAD_SECONDS is {sequence}, the fit half gives {}",
        v0.sequence_overhead
    );
    // Every fitted device factor is in the table of the model, and nothing else is.
    for (device, factor, _) in &fit.devices {
        assert!(
            (device_memory_factor(device) - factor).abs() < 1e-9,
            "the memory factor of {device} is {}, the fit half gives {factor}",
            device_memory_factor(device)
        );
    }
    assert_eq!(
        DEVICE_FACTORS.len(),
        fit.devices.len(),
        "DEVICE_FACTORS has entries the fit half does not give"
    );
    let docs = std::fs::read_to_string(example::DOCS).unwrap();
    let current = example::with_table(&docs, &table).expect("the docs have the markers");
    assert!(
        docs == current,
        "the validation table in {} is stale: run `cargo run --release --example perf_validation -- --write`\n{table}",
        example::DOCS
    );
}

#[test]
fn the_split_is_by_the_hash_of_the_id() {
    // FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c (even), of "b" 0xaf63df4c8601f1a5 (odd).
    assert!(example::fit_half("a"));
    assert!(!example::fit_half("b"));
}

/// The engines' table of `docs/performance-model.md` ("Engines") states the profiles the
/// code uses: host time per step and per sequence of a step, decode and prefill launch
/// factors, request overhead.
#[test]
fn the_engine_table_states_the_profiles() {
    let docs = std::fs::read_to_string("docs/performance-model.md").unwrap();
    let section = docs
        .split("\n## Engines\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("docs/performance-model.md has an Engines section");
    let millis = |cell: &str| -> f64 {
        let cell = cell.trim();
        let number = cell.strip_suffix(" ms").unwrap_or(cell);
        number
            .parse::<f64>()
            .unwrap_or_else(|_| panic!("not a time: {cell:?}"))
            * 1e-3
    };
    // Each profile's row, and a profile whose host time differs on several devices has a
    // second row (`NAME, several devices`) stating that pair.
    let mut rows = Vec::new();
    for engine in jointplan::perf::engine_profile::ENGINES {
        rows.push((engine.name.to_owned(), *engine));
        if engine.several_devices_host.is_some() {
            rows.push((
                format!("{}, several devices", engine.name),
                engine.on_devices(2),
            ));
        }
    }
    for (name, engine) in &rows {
        let row = section
            .lines()
            .find(|l| l.starts_with(&format!("| {name} |")))
            .unwrap_or_else(|| panic!("no row for {name} in the Engines table"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(
            close(millis(cells[2]), engine.step_overhead_seconds),
            "{row}"
        );
        let micros = |cell: &str| -> f64 {
            let cell = cell.trim();
            cell.strip_suffix(" us")
                .unwrap_or(cell)
                .parse::<f64>()
                .unwrap_or_else(|_| panic!("not a time: {cell:?}"))
                * 1e-6
        };
        assert!(
            close(micros(cells[3]), engine.sequence_overhead_seconds),
            "{row}"
        );
        assert!(
            close(cells[4].parse().unwrap(), engine.decode_launch_factor),
            "{row}"
        );
        assert!(
            close(cells[5].parse().unwrap(), engine.prefill_launch_factor),
            "{row}"
        );
        assert!(
            close(millis(cells[6]), engine.request_overhead_seconds),
            "{row}"
        );
    }
}
