//! `jointplan solve PROBLEM.json`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::progress::Progress;

use jointplan::selection::{
    objective_by_name, solve, Backend, Method, SelectionError, SelectionProblem, SolveOptions,
    Weights, DEFAULT_DP_STATE_BUDGET,
};

/// The `--solver` choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SolverArg {
    /// The integer program, checked by the closure frontier.
    Ilp,
    /// The closure frontier alone.
    Dp,
    /// The frontier where it is provably small, the integer program otherwise.
    Auto,
}

/// The `--backend` choice of `solve` and `plan`. Both names parse in every
/// build, so a build without the `highs` feature can say what is missing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    /// microlp, the pure-Rust MILP solver (the default).
    #[default]
    Microlp,
    /// HiGHS (needs a build with the cargo feature `highs`).
    Highs,
}

impl BackendArg {
    /// The backend, or why this build cannot run it (a usage error).
    pub fn backend(self) -> Result<Backend, String> {
        match self {
            BackendArg::Microlp => Ok(Backend::Microlp),
            #[cfg(feature = "highs")]
            BackendArg::Highs => Ok(Backend::Highs),
            #[cfg(not(feature = "highs"))]
            BackendArg::Highs => Err(
                "--backend highs: this jointplan was built without the cargo feature `highs`; \
                 build it with `cargo build --release --features highs`"
                    .into(),
            ),
        }
    }
}

/// A step of the solver that `--without` switches off, for ablation
/// studies: the answer stays the same (every step is exact), only the time
/// and the certificate change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StepArg {
    /// Leading count levels settled by re-checked witnesses.
    SettledCounts,
    /// The levels before the provider ids solved without prefix-dominated candidates.
    PrefixDominance,
    /// Variable elimination over a tree decomposition (and the optimal supports it finds).
    Elimination,
    /// Candidates in no optimum of the leading levels set aside by elimination.
    OptimalSupports,
    /// Candidates set aside by the reduced costs of the dual bound (and the guess at the bound).
    ReducedCosts,
}

/// Arguments of `jointplan solve`.
#[derive(Debug, Args)]
pub struct SolveArgs {
    /// The problem file (JSON, see docs/selection-problem.md); `-` reads stdin.
    pub problem: PathBuf,
    /// Objective: seed-lex, max-preferred, min-penalty, weighted, or a time objective
    /// min-tpot, min-ttft or max-throughput (the problem's `time_ps` costs; see
    /// docs/selection-problem.md).
    #[arg(long, default_value = "seed-lex")]
    pub objective: String,
    /// Weights file (JSON `{"preferred": N, "ranks": [...], "time": {"tpot": N}}`, `time`
    /// optional) for `weighted`.
    #[arg(long, value_name = "FILE")]
    pub weights: Option<PathBuf>,
    /// Solver: ilp (default), dp or auto.
    #[arg(long, value_enum, default_value = "ilp")]
    pub solver: SolverArg,
    /// MILP backend of the integer program: microlp (default) or highs (cargo
    /// feature `highs`).
    #[arg(long, value_enum, default_value = "microlp")]
    pub backend: BackendArg,
    /// Maximum number of states the frontier search may create per component.
    #[arg(long, default_value_t = DEFAULT_DP_STATE_BUDGET)]
    pub dp_state_budget: u64,
    /// Branch-and-bound node budget of each integer-program solve.
    #[arg(long)]
    pub node_limit: Option<u64>,
    /// Time limit in seconds of the whole solve: on expiry the best solution
    /// found is returned with status `feasible` and the gap of the level
    /// that was being solved.
    #[arg(long, value_name = "SECONDS")]
    pub time_limit: Option<f64>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Switch a step of the solver off (repeatable), to measure what it buys:
    /// the answer is unchanged, only the time and the certificate differ
    /// (docs/solver.md describes each step).
    #[arg(long, value_enum, value_name = "STEP")]
    pub without: Vec<StepArg>,
    /// Report every `seconds` as 0.0 (byte-identical output across runs).
    #[arg(long)]
    pub no_timings: bool,
    /// Write a generated instance `KIND:N[:SEED[:PROFILES[:PREFERRED]]]`
    /// (chain, residual, long-range, layers; seed 1, 3 profiles and 70%
    /// preferred nodes by default, as in `instances::benchmark_families`;
    /// PREFERRED is the percentage of nodes with a preferred provider) to
    /// PROBLEM instead of solving (for timing runs).
    #[arg(long, hide = true, value_name = "KIND:N[:SEED[:PROFILES[:PREFERRED]]]")]
    pub generate: Option<String>,
}

fn generate(spec: &str, out: &Path) -> Result<String, SelectionError> {
    use jointplan::selection::instances;
    let bad = || {
        SelectionError::BadInput(format!(
            "--generate `{spec}`: expected KIND:N[:SEED[:PROFILES[:PREFERRED]]] with PROFILES in 1..=64 and PREFERRED a percentage in 0..=100"
        ))
    };
    let parts: Vec<&str> = spec.split(':').collect();
    let n: usize = parts.get(1).and_then(|s| s.parse().ok()).ok_or_else(bad)?;
    let seed: u64 = match parts.get(2) {
        Some(s) => s.parse().map_err(|_| bad())?,
        None => 1,
    };
    let mut params = instances::Params::default();
    if let Some(s) = parts.get(3) {
        params.profiles = s
            .parse()
            .ok()
            .filter(|p| (1..=64).contains(p))
            .ok_or_else(bad)?;
    }
    if let Some(s) = parts.get(4) {
        let percent: u32 = s.parse().ok().filter(|p| *p <= 100).ok_or_else(bad)?;
        params.preferred_prob = f64::from(percent) / 100.0;
    }
    if parts.len() > 5 {
        return Err(bad());
    }
    let p = match parts[0] {
        "chain" => instances::chain(n, &params, seed),
        "residual" => instances::residual_stream(n, &params, seed),
        "long-range" => instances::long_range(n, 0.5, &params, seed),
        "layers" => instances::repeated_layers(n.div_ceil(20), 20, &params, seed),
        _ => return Err(bad()),
    };
    let text = serde_json::to_string(&p).map_err(|e| SelectionError::BadInput(e.to_string()))?;
    crate::cli::destination::Destination::open(out, &[], false, None)
        .and_then(|destination| destination.write_bytes(text.as_bytes()))
        .map_err(|e| SelectionError::BadInput(e.to_string()))?;
    Ok(String::new())
}

fn read(path: &Path, what: &str) -> Result<String, SelectionError> {
    use jointplan::json_input::{read_text, InputLimits};
    let limits = InputLimits::current();
    let text = if path.as_os_str() == "-" {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(std::io::stdin(), limits.file_bytes.saturating_add(1)),
            &mut bytes,
        )
        .map_err(|e| e.to_string())
        .and_then(|_| {
            if bytes.len() as u64 > limits.file_bytes {
                Err(limits
                    .breach(
                        jointplan::json_input::Limit::FileBytes,
                        ".",
                        bytes.len() as u64,
                    )
                    .message)
            } else {
                String::from_utf8(bytes).map_err(|e| format!("not UTF-8 text: {e}"))
            }
        })
    } else {
        read_text(path, &limits).map_err(|e| e.to_string())
    };
    text.map_err(|e| SelectionError::BadInput(format!("{what} `{}`: {e}", path.display())))
}

fn options(args: &SolveArgs) -> Result<SolveOptions, SelectionError> {
    let backend = args.backend.backend().map_err(SelectionError::BadInput)?;
    let weights = match &args.weights {
        Some(p) => Some(Weights::from_json_str(&read(p, "weights file")?)?),
        None => None,
    };
    let objective = objective_by_name(&args.objective, weights)?;
    let time_limit = match args.time_limit {
        Some(s) if s.is_finite() && s >= 0.0 => Some(Duration::from_secs_f64(s)),
        Some(s) => {
            return Err(SelectionError::BadInput(format!(
                "--time-limit {s}: expected a non-negative number of seconds"
            )))
        }
        None => None,
    };
    let on = |step| !args.without.contains(&step);
    let defaults = SolveOptions::default();
    Ok(SolveOptions {
        settle_counts: on(StepArg::SettledCounts),
        prefix_dominance: on(StepArg::PrefixDominance),
        elimination_budget: if on(StepArg::Elimination) {
            defaults.elimination_budget
        } else {
            0
        },
        optimal_supports: on(StepArg::OptimalSupports),
        reduced_costs: on(StepArg::ReducedCosts),
        objective: Arc::from(objective),
        method: match args.solver {
            SolverArg::Ilp => Method::Ilp,
            SolverArg::Dp => Method::Dp,
            SolverArg::Auto => Method::Auto,
        },
        dp_state_budget: args.dp_state_budget,
        node_limit: args.node_limit,
        time_limit,
        timings: !args.no_timings,
        presolve: true,
        backend,
        ..defaults
    })
}

fn run_inner(args: &SolveArgs) -> Result<String, SelectionError> {
    if let Some(spec) = &args.generate {
        return generate(spec, &args.problem);
    }
    let mut opts = options(args)?;
    // On a terminal, a solve that runs over a second shows what it is doing on standard
    // error; the line is cleared when `progress` is dropped, before the answer is printed.
    let progress = Progress::start_quiet_for("solve", Duration::from_secs(1));
    opts.observer = progress.solve_observer();
    progress.step(&format!("reading {}", args.problem.display()));
    let problem = SelectionProblem::from_json_str(&read(&args.problem, "problem file")?)?;
    progress.step("selection");
    let work = || solve(&problem, &opts);
    let solution = match args.threads {
        Some(0) => {
            return Err(SelectionError::BadInput(
                "--threads 0: expected at least one thread".into(),
            ))
        }
        Some(k) => rayon::ThreadPoolBuilder::new()
            .num_threads(k)
            .build()
            .map_err(|e| SelectionError::BadInput(format!("--threads {k}: {e}")))?
            .install(work)?,
        None => work()?,
    };
    serde_json::to_string_pretty(&solution).map_err(|e| SelectionError::Solver {
        component: 0,
        first_node: String::new(),
        message: format!("cannot serialize the solution: {e}"),
    })
}

/// Runs `jointplan solve`: exit 0 solved, 1 infeasible, 2 bad input, 3 solver
/// failure or limit without a solution, 4 certification failure.
pub fn run(args: &SolveArgs) -> ExitCode {
    match run_inner(args) {
        Ok(text) if text.is_empty() => ExitCode::SUCCESS,
        // A closed pipe (`jointplan solve ... | head`) ends the output quietly.
        Ok(text) => match super::output::write_stdout(&format!("{text}\n")) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("jointplan solve: {e}");
                ExitCode::from(2)
            }
        },
        Err(e) => {
            eprintln!("jointplan solve: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
