//! The error of every jointplan operation, and the exit status it maps to.

use std::path::PathBuf;

use crate::request::LoadError;

/// Everything that can go wrong, by the part of the pipeline that found it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or parsed.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A request breaks a load-time invariant (docs/rules.md 1.1-1.8).
    #[error(transparent)]
    Request(#[from] crate::request::validate::RequestError),
    /// A plan could not be built.
    #[error(transparent)]
    Plan(#[from] crate::plan::error::PlanError),
    /// A stored plan was rejected.
    #[error(transparent)]
    Verify(#[from] crate::plan::verify::VerifyError),
    /// A request could not be sealed.
    #[error(transparent)]
    Seal(#[from] crate::request::seal::SealError),
    /// A request could not be synthesized from a model folder.
    #[error(transparent)]
    Synth(#[from] crate::synth::SynthError),
    /// An output could not be written.
    #[error(transparent)]
    Output(#[from] crate::cli::output::OutputError),
    /// The command line names something the input does not have.
    #[error("{0}")]
    Usage(String),
    /// An error found while processing a named file.
    #[error("{}: {source}", file.display())]
    File {
        /// The file.
        file: PathBuf,
        /// The error.
        #[source]
        source: Box<Error>,
    },
}

impl Error {
    /// The process exit status: 2 for bad input, 1 for an infeasible or rejected plan.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Load(_) | Error::Request(_) | Error::Seal(_) | Error::Usage(_) => 2,
            Error::Output(_) | Error::Synth(_) => 2,
            Error::Plan(error) => error.exit_code(),
            Error::Verify(error) => error.exit_code(),
            Error::File { source, .. } => source.exit_code(),
        }
    }

    /// Attaches the file the error was found in (load errors already name it).
    pub fn in_file(self, file: &std::path::Path) -> Error {
        match self {
            Error::Load(_) | Error::File { .. } => self,
            other => Error::File {
                file: file.to_path_buf(),
                source: Box::new(other),
            },
        }
    }
}
