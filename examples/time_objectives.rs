//! The time objectives on 10,000-node selection problems: for each benchmark family at
//! 10,000 nodes with time costs ([`instances::with_time_costs`]), the wall-clock time of
//! `min-penalty` (no time costs used) and of `min-tpot`, `min-ttft` and `max-throughput`
//! on the same problem in the same run, each a full solve with its certificate (the
//! exact re-check of every component, the frontier check where it fits), and the ratio.
//!
//! ```sh
//! cargo run --release --example time_objectives
//! ```
//!
//! Each cell is the median of three runs (one run when a run exceeds 2 s); the status of
//! every time-objective solve must be `optimal` (certified), else the example says so.

use std::sync::Arc;
use std::time::{Duration, Instant};

use jointplan::selection::{
    instances, objective_by_name, solve, Objective, SelectionProblem, SolveOptions, Status,
};

fn timed(problem: &SelectionProblem, objective: &Arc<dyn Objective>) -> (Duration, String) {
    let options = SolveOptions {
        objective: objective.clone(),
        timings: false,
        ..SolveOptions::default()
    };
    let mut times = Vec::new();
    let mut note = String::new();
    for _ in 0..3 {
        let start = Instant::now();
        note = match solve(problem, &options) {
            Ok(s) if s.status == Status::Optimal => "optimal".to_owned(),
            Ok(_) => "NOT PROVED".to_owned(),
            Err(e) => format!("error: {e}"),
        };
        let took = start.elapsed();
        times.push(took);
        if took > Duration::from_secs(2) {
            break;
        }
    }
    times.sort();
    (times[times.len() / 2], note)
}

fn main() {
    let params = instances::Params::default();
    let n = 10_000;
    let families: Vec<(&str, SelectionProblem, usize)> = vec![
        ("chain", instances::chain(n, &params, 1), n),
        ("residual", instances::residual_stream(n, &params, 1), n),
        (
            "repeated-layers",
            instances::repeated_layers(n / 10, 10, &params, 1),
            10,
        ),
        ("long-range", instances::long_range(n, 0.5, &params, 1), n),
    ];
    let objectives: Vec<Arc<dyn Objective>> =
        ["min-penalty", "min-tpot", "min-ttft", "max-throughput"]
            .iter()
            .map(|name| Arc::from(objective_by_name(name, None).expect("a known objective")))
            .collect();
    println!(
        "| family | nodes | min-penalty | min-tpot | min-ttft | max-throughput | slowest time / min-penalty |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (family, plain, period) in families {
        let problem = instances::with_time_costs(&plain, 7, period);
        let mut cells = Vec::new();
        let mut base = Duration::ZERO;
        let mut slowest = Duration::ZERO;
        for (i, objective) in objectives.iter().enumerate() {
            let (took, note) = timed(&problem, objective);
            if i == 0 {
                base = took;
            } else {
                slowest = slowest.max(took);
            }
            let mark = if note == "optimal" {
                String::new()
            } else {
                format!(" ({note})")
            };
            cells.push(format!("{:.3} s{mark}", took.as_secs_f64()));
        }
        println!(
            "| {family} | {n} | {} | {:.2} |",
            cells.join(" | "),
            slowest.as_secs_f64() / base.as_secs_f64().max(1e-9)
        );
    }
}
