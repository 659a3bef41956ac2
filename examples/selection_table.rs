//! Prints the selection timing table of `docs/performance.md`: every
//! benchmark family and size, each method timed as the median of three runs
//! (one run where a single run exceeds 2 s).
//!
//! ```sh
//! cargo run --release --example selection_table
//! cargo run --release --features highs --example selection_table   # + HiGHS column
//! cargo run --release --example selection_table -- --skip long-range-4p:5000:default
//! ```
//!
//! `--skip FAMILY:NODES[:COLUMN]` (repeatable) prints `not run` instead of
//! timing a cell (a column of `reference`, `closure`, `ilp`, `default`,
//! `highs`), or the whole row without COLUMN: for cells known to take
//! minutes. With the `highs` feature the last column is `jointplan solve
//! --backend highs` with its defaults otherwise.

use std::sync::Arc;
use std::time::{Duration, Instant};

use jointplan::selection::{
    frontier_solve, instances, solve, Backend, FrontierKind, FrontierResult, Method, SeedLex,
    SelectionProblem, SolveOptions, Status,
};

const FRONTIER_BUDGET: u64 = 2_000_000;

fn median(f: &mut dyn FnMut() -> String) -> (Duration, String) {
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

fn ours(p: &SelectionProblem, method: Method, budget: u64, backend: Backend) -> String {
    let opts = SolveOptions {
        objective: Arc::new(SeedLex),
        method,
        dp_state_budget: budget,
        timings: false,
        backend,
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

/// The cells `--skip` names: (family, nodes, column or `None` for the row).
fn skips() -> Result<Vec<(String, usize, Option<String>)>, String> {
    const COLUMNS: [&str; 5] = ["reference", "closure", "ilp", "default", "highs"];
    let mut out = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a != "--skip" {
            return Err(format!(
                "unknown argument `{a}` (expected --skip FAMILY:NODES[:COLUMN])"
            ));
        }
        let spec = args
            .next()
            .ok_or("--skip needs FAMILY:NODES[:COLUMN]".to_string())?;
        let parts: Vec<&str> = spec.split(':').collect();
        let nodes = parts.get(1).and_then(|n| n.parse().ok());
        let column = parts.get(2).map(|c| c.to_string());
        match (parts.len(), nodes, &column) {
            (2 | 3, Some(n), c) if c.as_deref().is_none_or(|c| COLUMNS.contains(&c)) => {
                out.push((parts[0].to_string(), n, column))
            }
            _ => {
                return Err(format!(
                    "--skip `{spec}`: expected FAMILY:NODES[:COLUMN], COLUMN one of {}",
                    COLUMNS.join(", ")
                ))
            }
        }
    }
    Ok(out)
}

fn main() -> std::process::ExitCode {
    let skips = match skips() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("selection_table: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let highs_header = if cfg!(feature = "highs") {
        " solve --backend highs |"
    } else {
        ""
    };
    let highs_rule = if cfg!(feature = "highs") {
        " --- |"
    } else {
        ""
    };
    println!("| family | nodes | reference frontier | closure frontier | ilp, no check | solve (default) |{highs_header}");
    println!("| --- | ---: | --- | --- | --- | --- |{highs_rule}");
    for (family, n, p) in instances::benchmark_families() {
        let skipped = |column: &str| {
            skips
                .iter()
                .any(|(f, k, c)| f == family && *k == n && c.as_deref().is_none_or(|c| c == column))
        };
        let cell = |column: &str, f: &mut dyn FnMut() -> String| {
            if skipped(column) {
                return "not run".to_string();
            }
            let (d, note) = median(f);
            format!("{:.3} s ({note})", d.as_secs_f64())
        };
        let reference = if n <= 100 {
            cell("reference", &mut || frontier(&p, FrontierKind::Reference))
        } else {
            "-".to_string()
        };
        let closure = cell("closure", &mut || frontier(&p, FrontierKind::Closure));
        let unchecked = cell("ilp", &mut || ours(&p, Method::Ilp, 0, Backend::Microlp));
        let default_budget = jointplan::selection::DEFAULT_DP_STATE_BUDGET;
        let default = cell("default", &mut || {
            ours(&p, Method::Ilp, default_budget, Backend::Microlp)
        });
        #[cfg(feature = "highs")]
        let highs = format!(
            " {} |",
            cell("highs", &mut || {
                ours(&p, Method::Ilp, default_budget, Backend::Highs)
            })
        );
        #[cfg(not(feature = "highs"))]
        let highs = String::new();
        println!("| {family} | {n} | {reference} | {closure} | {unchecked} | {default} |{highs}");
    }
    std::process::ExitCode::SUCCESS
}
