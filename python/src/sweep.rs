//! The pieces a sweep is made of, for the Python driver that batches points into tasks
//! and sends them to local threads, Dask or Ray: a grid's points, one batch planned with
//! a fixed thread count (the unit of work a worker runs: JSON in, plain rows out), and the
//! results directory (append, read, merge, plots) written by the same code as
//! `jointplan sweep`, so the files are the command line's.

use std::collections::BTreeSet;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};

use jointplan::builder::BuildOptions;
use jointplan::placement::sweep::SweepPlacer;
use jointplan::study::plot::write_plots as draw_plots;
use jointplan::study::results;
use jointplan::study::sweep::{plan_batch as plan_points, Grid, SweepPoint, SweepRow};
use pyo3::prelude::*;
use serde::Deserialize;
use serde_json::json;

use crate::{to_json, Failure};

fn study(error: jointplan::study::StudyError) -> Failure {
    Failure::from(jointplan::Error::from(error))
}

fn grid(text: &str) -> Result<Grid, Failure> {
    serde_json::from_str(text).map_err(|e| {
        Failure::bad_input(format!(
            "grid: not a grid ({e}); knobs: model, device, policy, context, sequences, \
             scheduled_tokens, storage_views, weight_format, layers, experts, objective, \
             devices, tensor_parallel, pipeline_parallel, concurrency, input_tokens, \
             output_tokens, engine, region_axes"
        ))
    })
}

fn rows(text: &str) -> Result<Vec<SweepRow>, Failure> {
    serde_json::from_str(text)
        .map_err(|e| Failure::bad_input(format!("rows: not sweep rows ({e})")))
}

/// The points of a grid in grid order and its plot axes: `{"points": [...], "axes": [...]}`.
#[pyfunction]
fn grid_points(py: Python<'_>, grid_json: String) -> PyResult<String> {
    py.detach(|| {
        let grid = grid(&grid_json)?;
        let points = grid.points().map_err(study)?;
        let axes = grid.plot_axes().map_err(study)?;
        to_json(&json!({"points": points, "axes": axes}))
    })
    .map_err(Failure::into_py)
}

/// A batch of points as a worker receives it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Task {
    /// The points, in grid order.
    points: Vec<SweepPoint>,
    /// The directory relative paths of the points are read from.
    base: Option<PathBuf>,
    /// Keys already in the results (skipped).
    #[serde(default)]
    done: BTreeSet<String>,
    /// Threads of each plan.
    threads: NonZeroUsize,
}

/// Plans a task (`{"points", "base", "done", "threads"}`): every point not in `done`,
/// one after the other, each plan on `threads` threads; returns the rows (JSON list).
#[pyfunction]
fn plan_batch(py: Python<'_>, task_json: String) -> PyResult<String> {
    py.detach(|| {
        let task: Task = serde_json::from_str(&task_json)
            .map_err(|e| Failure::bad_input(format!("sweep task: {e}")))?;
        let options = BuildOptions {
            threads: Some(task.threads),
            ..BuildOptions::default()
        };
        let rows = plan_points(
            &task.points,
            task.base.as_deref(),
            &task.done,
            &options,
            &SweepPlacer,
        )
        .map_err(study)?;
        to_json(&rows)
    })
    .map_err(Failure::into_py)
}

/// Every row of a results directory (first per key; an empty list without results).
#[pyfunction]
fn read_rows(py: Python<'_>, dir: String) -> PyResult<String> {
    py.detach(|| to_json(&results::read_rows(Path::new(&dir)).map_err(study)?))
        .map_err(Failure::into_py)
}

/// Appends rows (JSON list) to `dir`'s `results.csv` and `results.jsonl` (both created,
/// the CSV with its header, when absent).
#[pyfunction]
fn append_rows(py: Python<'_>, dir: String, rows_json: String) -> PyResult<()> {
    py.detach(|| {
        let rows = rows(&rows_json)?;
        results::append_rows(Path::new(&dir), &rows).map_err(study)
    })
    .map_err(Failure::into_py)
}

/// The rows of several results directories in the order given, first row per key.
#[pyfunction]
fn merge_rows(py: Python<'_>, dirs: Vec<String>) -> PyResult<String> {
    py.detach(|| {
        let dirs: Vec<&Path> = dirs.iter().map(Path::new).collect();
        to_json(&results::merge_rows(&dirs).map_err(study)?)
    })
    .map_err(Failure::into_py)
}

/// Draws the plots of every row of `dir` on the grid's axes; returns the file names.
#[pyfunction]
fn write_plots(py: Python<'_>, dir: String, grid_json: String) -> PyResult<Vec<String>> {
    py.detach(|| {
        let grid = grid(&grid_json)?;
        let axes = grid.plot_axes().map_err(study)?;
        let rows = results::read_rows(Path::new(&dir)).map_err(study)?;
        draw_plots(Path::new(&dir), &rows, &axes).map_err(study)
    })
    .map_err(Failure::into_py)
}

/// The CSV columns of the results, in order (the knobs, then the figures).
#[pyfunction]
fn csv_columns() -> Vec<String> {
    results::csv_header()
        .trim_end()
        .split(',')
        .map(str::to_owned)
        .collect()
}

/// Adds this file's functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(grid_points, m)?)?;
    m.add_function(wrap_pyfunction!(plan_batch, m)?)?;
    m.add_function(wrap_pyfunction!(read_rows, m)?)?;
    m.add_function(wrap_pyfunction!(append_rows, m)?)?;
    m.add_function(wrap_pyfunction!(merge_rows, m)?)?;
    m.add_function(wrap_pyfunction!(write_plots, m)?)?;
    m.add_function(wrap_pyfunction!(csv_columns, m)?)?;
    Ok(())
}
