//! One sweep row per grid point: a context the model caps keeps its requested value and
//! records the one used (the equal requests planned once), a point that cannot be
//! synthesized is an error row and the sweep goes on, and the plots of a sweep colour a
//! plan choice alike on every region map, label no two choices alike, draw doubling grids
//! on a log2 axis and keep legends and labels out of the data.

use std::collections::BTreeSet;
use std::num::NonZeroUsize;
use std::path::PathBuf;

use jointplan::placement::sweep::SweepPlacer;
use jointplan::study::plot::{figures, Choices, RegionMap};
use jointplan::study::sweep::{plan_batch, run_points, Grid, SweepRow};
use jointplan::BuildOptions;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn one_thread() -> BuildOptions {
    BuildOptions {
        threads: NonZeroUsize::new(1),
        ..BuildOptions::default()
    }
}

fn sweep(grid: serde_json::Value) -> Vec<SweepRow> {
    let grid: Grid = serde_json::from_value(grid).unwrap();
    let points = grid.points().unwrap();
    let mut rows = Vec::new();
    let mut done = BTreeSet::new();
    let jobs = NonZeroUsize::new(2).unwrap();
    run_points(
        &points,
        &mut done,
        jobs,
        &one_thread(),
        &SweepPlacer,
        |batch, _| {
            rows.extend_from_slice(batch);
            Ok(())
        },
    )
    .unwrap();
    rows
}

/// phi-3-mini is trained for 4096 positions: contexts 8192, 32768 and 131072 all plan at
/// 4096. Before, the three points shared one key and became one row labelled 8192.
#[test]
fn a_capped_context_keeps_one_row_per_point_with_the_value_used() {
    let rows = sweep(serde_json::json!({
        "model": [root().join("models/phi-3-mini")],
        "layers": [2],
        "context": [2048, 4096, 8192, 32768, 131072],
    }));
    let asked: Vec<Option<u64>> = rows.iter().map(|r| r.point.context).collect();
    assert_eq!(
        asked,
        [2048, 4096, 8192, 32768, 131072].map(Some).to_vec(),
        "one row per grid point, in grid order, with the value asked for"
    );
    let used: Vec<Option<u64>> = rows.iter().map(|r| r.context_used).collect();
    assert_eq!(used, [2048, 4096, 4096, 4096, 4096].map(Some).to_vec());
    let capped: Vec<bool> = rows.iter().map(SweepRow::capped).collect();
    assert_eq!(capped, [false, false, true, true, true]);
    // The capped points have the plan of context 4096: same request, same plan id.
    for row in &rows[2..] {
        assert_eq!(row.request_hash, rows[1].request_hash);
        assert_eq!(row.plan_id, rows[1].plan_id);
        assert_eq!(row.status, rows[1].status);
    }
    let keys: BTreeSet<&str> = rows.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys.len(), rows.len(), "every point has its own key");
    // The CSV keeps the requested context and adds the one used.
    let dir = tempfile::tempdir().unwrap();
    jointplan::study::results::append_rows(dir.path(), &rows).unwrap();
    let csv = std::fs::read_to_string(dir.path().join("results.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let at = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let line: Vec<&str> = csv.lines().nth(5).unwrap().split(',').collect();
    assert_eq!(line[at("context")], "131072");
    assert_eq!(line[at("context_used")], "4096");
    // Read back, the rows are the same five.
    assert_eq!(
        jointplan::study::results::read_rows(dir.path()).unwrap(),
        rows
    );
}

/// A point whose request cannot be synthesized (llama-3.2-1b has 16 layers) is an error
/// row naming the cause; the points after it are planned. Before, it stopped the sweep.
#[test]
fn a_point_that_cannot_be_synthesized_is_an_error_row_and_the_sweep_goes_on() {
    let grid = serde_json::json!({
        "model": [root().join("models/llama-3.2-1b")],
        "layers": [2, 99, 3],
        "context": [1024],
    });
    let rows = sweep(grid.clone());
    let status: Vec<&str> = rows.iter().map(|r| r.status.as_str()).collect();
    assert_eq!(status, ["fits", "error", "fits"]);
    let error = &rows[1];
    let reason = error.reason.as_deref().unwrap();
    assert!(reason.contains("99"), "{reason}");
    assert!(reason.contains("layers"), "{reason}");
    assert!(error.request_hash.is_empty() && error.plan_id.is_none());
    // The distributed path (one batch on a worker) gives the same rows.
    let grid: Grid = serde_json::from_value(grid).unwrap();
    let batch = plan_batch(
        &grid.points().unwrap(),
        None,
        &BTreeSet::new(),
        &one_thread(),
        &SweepPlacer,
    )
    .unwrap();
    let strip = |rows: &[SweepRow]| -> Vec<SweepRow> {
        rows.iter()
            .map(|r| SweepRow {
                plan_seconds: 0.0,
                ..r.clone()
            })
            .collect()
    };
    assert_eq!(strip(&batch), strip(&rows));
    // A resumed sweep skips the error row too (its key is known).
    let done: BTreeSet<String> = rows.iter().map(|r| r.key.clone()).collect();
    let again = plan_batch(
        &grid.points().unwrap(),
        None,
        &done,
        &one_thread(),
        &SweepPlacer,
    )
    .unwrap();
    assert!(again.is_empty());
}

/// An unknown objective is the grid's fault: the sweep refuses it before planning,
/// naming the entry.
#[test]
fn an_unknown_objective_is_refused_naming_the_grid_entry() {
    let grid: Grid = serde_json::from_value(serde_json::json!({
        "model": ["models/llama-3.2-1b"],
        "objective": ["seed-lex", "fastest"],
    }))
    .unwrap();
    let error = grid.points().unwrap_err().to_string();
    assert!(error.contains("grid.objective[1]"), "{error}");
}

fn two_device_rows() -> Vec<SweepRow> {
    sweep(serde_json::json!({
        "model": [root().join("models/llama-3.2-1b")],
        "layers": [2],
        "device": [
            root().join("models/devices/rtx-4090-24gb.json"),
            root().join("models/devices/a100-40gb.json")
        ],
        "context": [1024, 4096, 16384],
        "storage_views": [["contiguous", "paged"], ["paged", "contiguous"]],
    }))
}

/// Every map of one sweep gives a choice the same index (colour and letter), whatever
/// choices the map itself holds; no two choices have the same label.
#[test]
fn region_maps_of_one_sweep_colour_a_choice_alike_and_label_choices_apart() {
    let rows = two_device_rows();
    let choices = Choices::of(&rows);
    let labels: BTreeSet<&String> = choices.labels.iter().collect();
    assert_eq!(labels.len(), choices.labels.len(), "{:?}", choices.labels);
    let mut seen: std::collections::BTreeMap<String, usize> = Default::default();
    for device in ["rtx-4090-24gb", "a100-40gb"] {
        let members: Vec<&SweepRow> = rows
            .iter()
            .filter(|r| r.point.device.as_deref().unwrap().contains(device))
            .collect();
        let map = RegionMap::in_sweep(&members, "context", Some("storage_views"), &choices);
        for region in &map.regions {
            let index = *seen.entry(region.choice_id.clone()).or_insert(region.index);
            assert_eq!(index, region.index, "{device}: {}", region.choice_id);
            assert_eq!(choices.ids[index], region.choice_id);
        }
    }
    assert!(!seen.is_empty());
}

/// The figures of a sweep: small multiples (one panel per device), a log2 context axis
/// with short tick labels, and, by the layout's own estimate, every text inside the
/// canvas and outside the plot areas unless it annotates the data, legends beside them.
#[test]
fn figures_are_small_multiples_with_readable_ticks_and_legends_outside_the_data() {
    let rows = two_device_rows();
    let varying = ["context", "storage_views", "device"];
    let figures = figures(&rows, &varying).unwrap();
    let names: Vec<&str> = figures.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "memory-vs-context.svg",
            "tokens-vs-context.svg",
            "regions-rtx-4090-24gb.svg",
            "regions-a100-40gb.svg"
        ]
    );
    for figure in &figures {
        let layout = &figure.layout;
        let canvas = jointplan::study::plot::Rect::new(
            0.0,
            0.0,
            f64::from(layout.width),
            f64::from(layout.height),
        );
        for (text, rect) in &layout.texts {
            assert!(
                canvas.contains(rect),
                "{}: {text:?} leaves the canvas",
                figure.name
            );
            let float = text.ends_with(".0")
                || text
                    .split(' ')
                    .next()
                    .is_some_and(|n| n.contains(".0") && n.parse::<f64>().is_ok());
            assert!(!float, "{}: tick {text:?}", figure.name);
            let annotation = layout.annotations.iter().any(|a| a == rect);
            for area in &layout.plot_areas {
                assert!(
                    annotation || !area.overlaps(rect),
                    "{}: {text:?} covers the data",
                    figure.name
                );
            }
        }
        for legend in &layout.legends {
            for area in &layout.plot_areas {
                assert!(
                    !area.overlaps(legend),
                    "{}: legend over the data",
                    figure.name
                );
            }
        }
    }
    let tokens = &figures[1];
    assert_eq!(tokens.layout.plot_areas.len(), 2, "one panel per device");
    let texts: Vec<&str> = tokens.layout.texts.iter().map(|t| t.0.as_str()).collect();
    for tick in ["1024", "4096", "16k"] {
        assert!(texts.contains(&tick), "{tick} in {texts:?}");
    }
    assert!(texts.contains(&"context (log2 scale)"), "{texts:?}");
    assert!(
        texts.contains(&"rtx-4090-24gb"),
        "short panel titles: {texts:?}"
    );
}
