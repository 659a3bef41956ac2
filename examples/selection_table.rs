//! Prints the selection timing table of `docs/performance.md`: every
//! benchmark family and size, each method timed as the median of three runs
//! (one run where a single run exceeds 2 s).
//!
//! ```sh
//! cargo run --release --example selection_table
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use jointplan::selection::{
    frontier_solve, instances, solve, FrontierKind, FrontierResult, Method, SeedLex,
    SelectionProblem, SolveOptions, Status,
};

const FRONTIER_BUDGET: u64 = 2_000_000;

fn median(mut f: impl FnMut() -> String) -> (Duration, String) {
    let mut times = Vec::new();
    let mut note = String::new();
    for _ in 0..3 {
        let t = Instant::now();
        note = f();
        let d = t.elapsed();
        times.push(d);
        if d > Duration::from_secs(2) {
            break;
        }
    }
    times.sort();
    (times[times.len() / 2], note)
}

fn frontier(p: &SelectionProblem, kind: FrontierKind) -> String {
    match frontier_solve(p, &SeedLex, kind, FRONTIER_BUDGET) {
        Ok(FrontierResult::Skipped(_)) => "over budget".into(),
        Ok(_) => "exact".into(),
        Err(e) => format!("error: {e}"),
    }
}

fn ours(p: &SelectionProblem, method: Method, budget: u64) -> String {
    let opts = SolveOptions {
        objective: Arc::new(SeedLex),
        method,
        dp_state_budget: budget,
        timings: false,
        ..SolveOptions::default()
    };
    match solve(p, &opts) {
        Ok(s) => {
            let status = if s.status == Status::Optimal {
                "optimal"
            } else {
                "feasible"
            };
            let checks: Vec<&str> = s
                .components
                .iter()
                .map(|c| {
                    if c.check == "dp-agrees" {
                        "dp-agrees"
                    } else {
                        "dp-skipped"
                    }
                })
                .collect();
            let mut checks = checks;
            checks.dedup();
            format!("{status}, {}", checks.join("/"))
        }
        Err(e) => format!(
            "error: {}",
            e.to_string().chars().take(60).collect::<String>()
        ),
    }
}

fn main() {
    println!("| family | nodes | reference frontier | closure frontier | ilp, no check | solve (default) |");
    println!("| --- | ---: | --- | --- | --- | --- |");
    for (family, n, p) in instances::benchmark_families() {
        let cell = |(d, note): (Duration, String)| format!("{:.3} s ({note})", d.as_secs_f64());
        let reference = if n <= 100 {
            cell(median(|| frontier(&p, FrontierKind::Reference)))
        } else {
            "-".to_string()
        };
        let closure = cell(median(|| frontier(&p, FrontierKind::Closure)));
        let unchecked = cell(median(|| ours(&p, Method::Ilp, 0)));
        let default = cell(median(|| {
            ours(
                &p,
                Method::Ilp,
                jointplan::selection::DEFAULT_DP_STATE_BUDGET,
            )
        }));
        println!("| {family} | {n} | {reference} | {closure} | {unchecked} | {default} |");
    }
}
