//! The study layer: the memory report against figures re-derived from the plan, `fit`
//! checked by building the plans at its answer and its answer + 1, sweeps that resume
//! without planning a point twice, and the plan-region map against the rows it draws.

use std::num::NonZeroUsize;
use std::path::PathBuf;

use jointplan::placement::sweep::SweepPlacer;
use jointplan::plan::DynamicResourceDemand;
use jointplan::request::BufferUsage;
use jointplan::study::fit::{fit, FitSubject, Knob};
use jointplan::study::plot::RegionMap;
use jointplan::study::results::{append_rows, read_rows};
use jointplan::study::sweep::{run_points, Grid};
use jointplan::study::ServingReport;
use jointplan::synth::ModelSource;
use jointplan::{build, BuildOptions};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn one_thread() -> BuildOptions {
    BuildOptions {
        threads: NonZeroUsize::new(1),
        ..BuildOptions::default()
    }
}

fn llama_1b_server_4090() -> ModelSource {
    let mut source = ModelSource::folder(root().join("models/llama-3.2-1b"));
    source.device = Some(root().join("models/devices/rtx-4090-24gb.json"));
    source.policy = Some("server".into());
    source
}

/// The per-sequence bytes of a plan re-derived from its state descriptors: a paged cache
/// rounds the context up to whole blocks, a contiguous one reserves it whole.
fn per_sequence_bytes(plan: &jointplan::ExecutionPlan) -> u64 {
    plan.payload
        .memory
        .dynamic_descriptors
        .iter()
        .filter(|d| d.usage == BufferUsage::State)
        .map(|d| match &d.demand {
            DynamicResourceDemand::Tokens {
                bytes_per_token,
                maximum_tokens,
            } => {
                let bytes = bytes_per_token * maximum_tokens;
                let text = d.storage.profile.to_string();
                let block: u64 = text
                    .split(['(', ')'])
                    .nth(1)
                    .and_then(|b| b.parse().ok())
                    .unwrap_or(1);
                bytes.div_ceil(block) * block
            }
            DynamicResourceDemand::Fixed { bytes } => *bytes,
            other => panic!("unexpected state demand {other:?}"),
        })
        .sum()
}

#[test]
fn the_report_matches_the_plan_and_the_worst_case_arithmetic() {
    let request = llama_1b_server_4090().synthesize().unwrap().request;
    let outcome = build(&request, &one_thread()).unwrap();
    let memory = &outcome.plan.payload.memory;
    let report = ServingReport::of(&request, &outcome.plan).unwrap();
    let weights: u64 = memory
        .static_allocations
        .iter()
        .filter(|a| a.usage == BufferUsage::Weights)
        .map(|a| a.size_bytes)
        .sum();
    assert_eq!(report.weights_bytes, weights);
    assert_eq!(
        report.kv_bytes_per_sequence,
        per_sequence_bytes(&outcome.plan)
    );
    assert_eq!(report.reserve_bytes, memory.reserve_bytes);
    let headroom = i128::from(memory.usable_capacity_bytes)
        - i128::from(report.weights_bytes)
        - i128::from(report.activation_bytes)
        - i128::from(report.workspace_bytes);
    assert_eq!(report.headroom_bytes, headroom);
    let fit = report.sequences_that_fit.unwrap();
    assert_eq!(
        u128::from(fit),
        headroom as u128 / u128::from(report.kv_bytes_per_sequence)
    );
    assert_eq!(
        report.worst_case_fits,
        fit >= u64::from(memory.maximum_active_sequences)
    );
    // The server preset's 64 sequences of 32,768 tokens do not fit a 24 GB device.
    assert!(!report.worst_case_fits, "{report:?}");
    let json = serde_json::to_value(&report).unwrap();
    let keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "activation_bytes",
            "headroom_bytes",
            "kv_bytes_per_sequence",
            "kv_bytes_per_token",
            "reserve_bytes",
            "sequences_that_fit",
            "tokens_that_fit",
            "weights_bytes",
            "workspace_bytes",
            "worst_case_fits"
        ]
    );
}

#[test]
fn fit_is_exact_at_its_answer_and_its_answer_plus_one() {
    let source = llama_1b_server_4090();
    let answer = fit(
        &FitSubject::Model(Box::new(source.clone())),
        Knob::Sequences,
        &one_thread(),
    )
    .unwrap();
    let largest = answer.largest.expect("some sequence count fits");
    let next = answer.next.clone().expect("the device is finite");
    assert_eq!(next.value, largest + 1);
    let plan_at = |sequences: u64| {
        let mut preset = source.policy_preset().unwrap();
        preset.maximum_active_sequences = u32::try_from(sequences).unwrap();
        let request = source.synthesize_with_policy(&preset).unwrap().request;
        let outcome = build(&request, &one_thread());
        (request, outcome)
    };
    let (request, outcome) = plan_at(largest);
    let outcome = outcome.expect("the plan at the answer builds");
    assert_eq!(Some(&outcome.plan.payload.plan_id), answer.plan_id.as_ref());
    let at = ServingReport::of(&request, &outcome.plan).unwrap();
    // Re-derived: `largest` sequences of state fit the headroom.
    let per_sequence = per_sequence_bytes(&outcome.plan);
    assert!(i128::from(largest * per_sequence) <= at.headroom_bytes);
    assert!(at.worst_case_fits);
    let (request, outcome) = plan_at(largest + 1);
    match outcome {
        Ok(outcome) => {
            let beyond = ServingReport::of(&request, &outcome.plan).unwrap();
            assert!(!beyond.worst_case_fits);
            let needed = i128::from((largest + 1) * per_sequence_bytes(&outcome.plan));
            assert!(needed > beyond.headroom_bytes);
            assert_eq!(
                next.bytes_short,
                u64::try_from(needed - beyond.headroom_bytes).ok()
            );
        }
        Err(error) => assert_eq!(error.kind(), jointplan::ErrorKind::Infeasible),
    }
}

fn small_grid() -> Grid {
    serde_json::from_value(serde_json::json!({
        "model": [root().join("models/llama-3.2-1b")],
        "device": [root().join("models/devices/rtx-4090-24gb.json")],
        "policy": ["server"],
        "layers": [2],
        "context": [1024, 4096, 4096],
        "storage_views": [["contiguous", "paged"], ["paged", "contiguous"]],
    }))
    .unwrap()
}

#[test]
fn a_resumed_sweep_plans_no_point_twice_and_the_region_map_matches_the_rows() {
    let dir = tempfile::tempdir().unwrap();
    let grid = small_grid();
    let points = grid.points().unwrap();
    assert_eq!(points.len(), 6);
    let jobs = NonZeroUsize::new(2).unwrap();
    let mut planned = Vec::new();
    // First run: the first half of the grid, as an interrupted sweep leaves it.
    let mut done = Default::default();
    let ran = run_points(
        &points[..3],
        &mut done,
        jobs,
        &one_thread(),
        &SweepPlacer,
        |rows, _| {
            planned.extend(rows.iter().map(|r| r.key.clone()));
            append_rows(dir.path(), rows)
        },
    )
    .unwrap();
    assert_eq!(ran, 3);
    // Resume: the keys on disk are skipped, and so is the duplicated context 4096.
    let mut done = read_rows(dir.path())
        .unwrap()
        .into_iter()
        .map(|r| r.key)
        .collect();
    let ran = run_points(
        &points,
        &mut done,
        jobs,
        &one_thread(),
        &SweepPlacer,
        |rows, _| {
            planned.extend(rows.iter().map(|r| r.key.clone()));
            append_rows(dir.path(), rows)
        },
    )
    .unwrap();
    assert_eq!(ran, 1, "only the paged point at 4096 was left");
    let mut unique = planned.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), planned.len(), "a point was planned twice");
    let rows = read_rows(dir.path()).unwrap();
    assert_eq!(rows.len(), 4);
    let csv = std::fs::read_to_string(dir.path().join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 5, "one header and four rows:\n{csv}");

    // The region map over (context, storage views): each cell is the region of the plan's
    // choice in the CSV, and equal choices share a region.
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let column = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let refs: Vec<&_> = rows.iter().collect();
    let map = RegionMap::of(&refs, "context", Some("storage_views"));
    for line in csv.lines().skip(1) {
        let fields: Vec<&str> = line.split(',').collect();
        let x = map
            .x_values
            .iter()
            .position(|v| v == fields[column("context")])
            .unwrap();
        let y = map
            .y_values
            .iter()
            .position(|v| v == fields[column("storage_views")])
            .unwrap();
        let choice = fields[column("choice_id")];
        match map.cells[y][x] {
            Some(region) => assert_eq!(map.regions[region].choice_id, choice),
            None => assert!(choice.is_empty()),
        }
        let plan_id = fields[column("plan_id")];
        let row = rows.iter().find(|r| r.plan_id.as_deref() == Some(plan_id));
        assert!(plan_id.is_empty() || row.is_some());
    }
    let svg = map.svg("test").unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..40]);
    for region in &map.regions {
        // The legend names each choice by the first 8 hex digits of its id.
        assert!(
            svg.contains(&region.choice_id[7..15]),
            "legend of {}",
            region.choice_id
        );
    }
}
