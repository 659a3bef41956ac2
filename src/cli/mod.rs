//! The `jointplan` command line: argument parsing and dispatch.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub mod check;
pub mod destination;
pub mod diff;
pub mod engine_flags;
pub mod explain;
pub mod fit;
pub mod hash;
pub mod performance;
pub mod placement;
pub mod plan;
pub mod progress;
pub mod seal;
pub mod solve;
pub mod sweep;
pub mod synth;
pub mod verify;

/// Standard output (files are written through [`destination`]); the text itself comes from
/// the library's presentation layer, [`jointplan::render`].
pub mod output {
    use std::io::Write;
    use std::path::PathBuf;

    use super::destination::DestinationError;

    /// Writes `text` to standard output. A closed pipe (`jointplan plan ... | head`) ends the
    /// output quietly instead of panicking; any other error is reported naming `<stdout>`.
    pub fn write_stdout(text: &str) -> Result<(), DestinationError> {
        let mut stdout = std::io::stdout().lock();
        match stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush())
        {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(DestinationError::Io {
                file: PathBuf::from("<stdout>"),
                source: e,
            }),
            _ => Ok(()),
        }
    }

    /// Pretty JSON with a final newline, the form every jointplan file is written in.
    pub fn pretty_json<T: serde::Serialize>(value: &T) -> Result<String, serde_json::Error> {
        let mut text = serde_json::to_string_pretty(value)?;
        text.push('\n');
        Ok(text)
    }
}

/// jointplan: verified execution plans for ML model graphs.
#[derive(Debug, Parser)]
#[command(name = "jointplan", version, about)]
pub struct Cli {
    /// The command to run.
    #[command(subcommand)]
    pub command: Commands,
    /// Raise (or lower) an input limit, e.g. `--limit nodes=500000 --limit file-bytes=4G`.
    /// Limits: file-bytes, depth, string-bytes, array-elements, object-members, nodes,
    /// candidates-per-node, resources (defaults and rationale: docs/security.md).
    #[arg(long = "limit", global = true, value_name = "NAME=N")]
    pub limits: Vec<String>,
}

/// The commands of `jointplan`.
#[derive(Debug, Subcommand)]
pub enum Commands {
    /// Solve a joint provider/storage-profile selection problem (JSON).
    Solve(solve::SolveArgs),
    /// Build an execution plan from a request or a model folder, write it and print a summary.
    // Boxed: `plan`'s flags (placement, serving, engine) are most of the enum's bytes.
    Plan(Box<plan::Args>),
    /// Check a stored plan against its request (exit 1 names the first differing field).
    Verify(verify::Args),
    /// Check a stored plan alone with the independent checker (every violation, with its
    /// rule and JSON path).
    Check(check::Args),
    /// Compare two plans of one program: providers, profiles, objective keys, memory.
    Diff(diff::Args),
    /// Explain why each provider of a node was chosen or rejected.
    Explain(explain::Args),
    /// Recompute every derived fingerprint of a hand-edited request.
    Seal(seal::Args),
    /// Synthesize a plan request from a model config, a device and a policy preset.
    Synth(synth::Args),
    /// The largest context, sequence count or token ceiling that fits a device, found with
    /// the planner as the oracle; or which devices of a directory fit.
    Fit(fit::Args),
    /// Plan every point of a grid of knobs; write results.csv, results.jsonl and SVG plots.
    Sweep(sweep::Args),
    /// Print the canonical SHA-256 of a JSON file (sorted keys, compact).
    Hash(hash::Args),
}

/// Parses the process arguments and runs the command.
pub fn run() -> ExitCode {
    destination::install_interrupt_cleanup();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let mut limits = jointplan::json_input::InputLimits::DEFAULT;
    for setting in &cli.limits {
        if let Err(message) = limits.apply(setting) {
            eprintln!("jointplan: --limit {message}");
            return ExitCode::from(2);
        }
    }
    limits.install();
    match cli.command {
        Commands::Solve(args) => solve::run(&args),
        Commands::Plan(args) => report("plan", plan::run(&args)),
        Commands::Verify(args) => report("verify", verify::run(&args)),
        Commands::Check(args) => match check::run(&args) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(1),
            Err(error) => report("check", Err(error)),
        },
        Commands::Explain(args) => report("explain", explain::run(&args)),
        Commands::Diff(args) => report("diff", diff::run(&args)),
        Commands::Seal(args) => report("seal", seal::run(&args)),
        Commands::Hash(args) => report("hash", hash::run(&args)),
        Commands::Fit(args) => report("fit", fit::run(&args)),
        Commands::Sweep(args) => report("sweep", sweep::run(&args)),
        Commands::Synth(args) => report("synth", synth::run(&args)),
    }
}

/// A command's failure: the library's error, or the command line's own (an output that
/// could not be written, arguments that name something the input does not have).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The library failed.
    #[error(transparent)]
    Library(#[from] jointplan::Error),
    /// An output could not be written.
    #[error(transparent)]
    Output(#[from] destination::DestinationError),
    /// The command line names something the input does not have.
    #[error("{0}")]
    Usage(String),
    /// A placement across devices failed.
    #[error(transparent)]
    Placement(jointplan::placement::PlacementError),
    /// A failure with an explanation of it (why a request is infeasible).
    #[error("{error}\n{explanation}")]
    Explained {
        /// The failure.
        error: Box<Error>,
        /// Why, in the input's terms.
        explanation: String,
    },
}

impl Error {
    /// The kind of failure (bad input for the command line's own errors).
    pub fn kind(&self) -> jointplan::ErrorKind {
        match self {
            Error::Library(error) => error.kind(),
            Error::Output(_) | Error::Usage(_) => jointplan::ErrorKind::BadInput,
            Error::Explained { error, .. } => error.kind(),
            Error::Placement(error) if error.is_bad_input() => jointplan::ErrorKind::BadInput,
            Error::Placement(jointplan::placement::PlacementError::Internal(_)) => {
                jointplan::ErrorKind::Rejected
            }
            Error::Placement(_) => jointplan::ErrorKind::Infeasible,
        }
    }

    /// Attaches the file the error was found in.
    pub fn in_file(self, file: &std::path::Path) -> Error {
        match self {
            Error::Library(error) => Error::Library(error.in_file(file)),
            other => other,
        }
    }
}

/// Every library error converts through the library's [`jointplan::Error`].
macro_rules! from_library_error {
    ($($error:ty),* $(,)?) => {
        $(impl From<$error> for Error {
            fn from(error: $error) -> Self {
                Error::Library(error.into())
            }
        })*
    };
}

from_library_error!(
    jointplan::request::LoadError,
    jointplan::request::validate::RequestError,
    jointplan::builder::error::PlanError,
    jointplan::verify::VerifyError,
    jointplan::request::seal::SealError,
    jointplan::synth::SynthError,
    jointplan::perf::PerfError,
);

/// The exit status of a failure: 2 for bad input, 1 for an infeasible request or a
/// rejected plan.
pub fn exit_code(kind: jointplan::ErrorKind) -> u8 {
    match kind {
        jointplan::ErrorKind::BadInput => 2,
        // Infeasible, rejected, and any kind a later library version adds.
        _ => 1,
    }
}

/// Prints a command's error (with its cause chain) and maps it to the exit status.
fn report(command: &str, result: Result<(), Error>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("jointplan {command}: {error}");
            let mut source = std::error::Error::source(&error);
            while let Some(cause) = source {
                let text = cause.to_string();
                if !error.to_string().contains(&text) {
                    eprintln!("  caused by: {text}");
                }
                source = cause.source();
            }
            ExitCode::from(exit_code(error.kind()))
        }
    }
}
