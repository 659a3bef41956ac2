//! Prints the objective table of `docs/performance.md`: every objective on
//! every shape (chain, residual stream, random long-range sharing) at every
//! size and share of preferred nodes, four profiles, with `seed-lex` as the
//! peer of each row (the other columns are also given as a ratio to it, in
//! the same run).
//!
//! ```sh
//! cargo run --release --example selection_table_objectives
//! cargo run --release --example selection_table_objectives -- --sizes 300,1000 --limit 5
//! ```
//!
//! Each cell is one solve through the library (`solve`, default options,
//! `--time-limit` = `--limit`, 10 s by default), timed as a whole. A cell
//! stopped by the limit prints `limit` with the gap of the level it was
//! solving; every other cell is a certified optimum. `weighted` uses the
//! weights `{"preferred": 3, "ranks": [0, 2, 4, 6]}`, or those of the JSON
//! file given with `--weights FILE` (as `jointplan solve --weights`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use jointplan::selection::instances::{self, Params};
use jointplan::selection::{
    solve, Objective, SelectionProblem, SolveOptions, Status, Weighted, Weights,
};

/// One timed solve: seconds and a note (`optimal`, or the limit and gap).
fn timed(p: &SelectionProblem, objective: Arc<dyn Objective>, limit: Duration) -> (f64, String) {
    let opts = SolveOptions {
        objective,
        time_limit: Some(limit),
        timings: false,
        ..SolveOptions::default()
    };
    let t = Instant::now();
    let r = solve(p, &opts);
    let secs = t.elapsed().as_secs_f64();
    let note = match r {
        Ok(s) if s.status == Status::Optimal => "optimal".to_string(),
        Ok(s) => {
            let gap = s
                .components
                .iter()
                .filter_map(|c| c.gap)
                .fold(None, |m: Option<f64>, g| Some(m.map_or(g, |m| m.max(g))));
            match gap {
                Some(g) => format!("limit, gap {g:.3}"),
                None => "limit, gap unknown".to_string(),
            }
        }
        Err(e) => format!(
            "error: {}",
            e.to_string().chars().take(50).collect::<String>()
        ),
    };
    (secs, note)
}

struct Args {
    sizes: Vec<usize>,
    limit: Duration,
    weights: Option<Weights>,
}

fn args() -> Result<Args, String> {
    let mut out = Args {
        sizes: vec![300, 1_000, 3_000],
        limit: Duration::from_secs(10),
        weights: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let value = it.next().ok_or(format!("{a} needs a value"))?;
        match a.as_str() {
            "--sizes" => {
                out.sizes = value
                    .split(',')
                    .map(|s| s.parse().map_err(|_| format!("--sizes: bad size `{s}`")))
                    .collect::<Result<_, _>>()?
            }
            "--limit" => {
                let s: f64 = value
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s >= 0.0)
                    .ok_or(format!("--limit: bad seconds `{value}`"))?;
                out.limit = Duration::from_secs_f64(s);
            }
            "--weights" => {
                let text = std::fs::read_to_string(&value)
                    .map_err(|e| format!("--weights: cannot read `{value}`: {e}"))?;
                out.weights = Some(
                    Weights::from_json_str(&text).map_err(|e| format!("--weights `{value}`: {e}"))?,
                );
            }
            other => {
                return Err(format!(
                    "unknown argument `{other}` (expected --sizes N,N,..., --limit SECONDS or --weights FILE)"
                ))
            }
        }
    }
    Ok(out)
}

fn main() -> std::process::ExitCode {
    let args = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("selection_table_objectives: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let mut objectives = instances::benchmark_objectives();
    if let Some(w) = args.weights {
        objectives.retain(|o| o.name() != "weighted");
        objectives.push(Arc::new(Weighted(w)));
    }
    println!(
        "| shape | nodes | preferred | seed-lex | max-preferred (x seed-lex) | min-penalty (x seed-lex) | weighted (x seed-lex) |"
    );
    println!("| --- | ---: | ---: | --- | --- | --- | --- |");
    type Shape = fn(usize, &Params, u64) -> SelectionProblem;
    let shapes: [(&str, Shape); 3] = [
        ("chain", instances::chain),
        ("residual", instances::residual_stream),
        ("long-range", |n, p, s| instances::long_range(n, 0.5, p, s)),
    ];
    for &n in &args.sizes {
        for (shape, build) in shapes {
            for share in [0u32, 50, 100] {
                let params = Params {
                    profiles: 4,
                    preferred_prob: f64::from(share) / 100.0,
                    ..Params::default()
                };
                let p = build(n, &params, 1);
                let mut cells = Vec::new();
                let mut peer = 0.0;
                for (i, obj) in objectives.iter().enumerate() {
                    let (secs, note) = timed(&p, obj.clone(), args.limit);
                    if i == 0 {
                        peer = secs;
                        cells.push(format!("{secs:.3} s ({note})"));
                    } else {
                        cells.push(format!(
                            "{secs:.3} s ({note}; {:.1}x)",
                            secs / peer.max(1e-9)
                        ));
                    }
                }
                println!("| {shape} | {n} | {share}% | {} |", cells.join(" | "));
            }
        }
    }
    std::process::ExitCode::SUCCESS
}
