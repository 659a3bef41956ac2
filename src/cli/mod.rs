//! The command line.

pub mod synth;

/// jointplan subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Synthesize a plan request from a model configuration, a device and a policy.
    Synth(synth::Args),
}

/// The jointplan command line.
#[derive(Debug, clap::Parser)]
#[command(
    name = "jointplan",
    version,
    about = "Verified execution plans for ML model graphs"
)]
pub struct Cli {
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}
