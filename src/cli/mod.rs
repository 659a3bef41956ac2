//! The `jointplan` command line: argument parsing and dispatch.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub mod solve;

/// jointplan: verified execution plans for ML model graphs.
#[derive(Debug, Parser)]
#[command(name = "jointplan", version, about)]
pub struct Cli {
    /// The command to run.
    #[command(subcommand)]
    pub command: Commands,
}

/// The commands of `jointplan`.
#[derive(Debug, Subcommand)]
pub enum Commands {
    /// Solve a joint provider/storage-profile selection problem (JSON).
    Solve(solve::SolveArgs),
}

/// Parses the process arguments and runs the command.
pub fn run() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match cli.command {
        Commands::Solve(args) => solve::run(&args),
    }
}
