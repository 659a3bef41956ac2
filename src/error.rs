//! The error of every jointplan operation, and the exit status it maps to.

use std::path::PathBuf;

pub use crate::error_kind::ErrorKind;
use crate::request::LoadError;

/// Everything that can go wrong, by the part of the pipeline that found it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or parsed.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A request breaks a load-time invariant (rules 1.1-1.8).
    #[error(transparent)]
    Request(#[from] crate::request::validate::RequestError),
    /// A plan could not be built.
    #[error(transparent)]
    Plan(#[from] crate::builder::error::PlanError),
    /// A stored plan was rejected.
    #[error(transparent)]
    Verify(#[from] crate::verify::VerifyError),
    /// A request could not be sealed.
    #[error(transparent)]
    Seal(#[from] crate::request::seal::SealError),
    /// A request could not be synthesized from a model folder.
    #[error(transparent)]
    Synth(#[from] crate::synth::SynthError),
    /// The performance model could not predict a serving point.
    #[error(transparent)]
    Perf(#[from] crate::perf::PerfError),
    /// A research query (diff, why-not, why-infeasible) failed.
    #[error(transparent)]
    Research(#[from] crate::study::ResearchError),
    /// A study (memory report, fit, sweep) failed.
    #[error(transparent)]
    Study(#[from] crate::study::StudyError),
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
    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Load(_) | Error::Request(_) | Error::Seal(_) => ErrorKind::BadInput,
            Error::Synth(_) => ErrorKind::BadInput,
            Error::Perf(_) => ErrorKind::BadInput,
            Error::Study(error) if error.is_infeasible() => ErrorKind::Infeasible,
            Error::Study(crate::study::StudyError::Demand { .. }) => ErrorKind::Rejected,
            Error::Study(crate::study::StudyError::Plan(error)) => error.kind(),
            Error::Study(_) => ErrorKind::BadInput,
            Error::Plan(error) => error.kind(),
            Error::Verify(error) => error.kind(),
            Error::Research(error) => error.kind(),
            Error::File { source, .. } => source.kind(),
        }
    }

    /// The JSON path of the culprit in its file (`.payload.nodes[3].provider_id`,
    /// `policy.memory_capacity_bytes`), where the error has one.
    pub fn json_path(&self) -> Option<String> {
        match self {
            Error::Load(LoadError::Json { json_path, .. } | LoadError::Limit { json_path, .. }) => {
                Some(json_path.clone())
            }
            Error::Request(error) => Some(error.path().to_owned()),
            Error::Plan(error) => error.json_path().map(str::to_owned),
            Error::Verify(error) => error.json_path().map(str::to_owned),
            Error::File { source, .. } => source.json_path(),
            _ => None,
        }
    }

    /// The file the error was found in, where it names one.
    pub fn file(&self) -> Option<&std::path::Path> {
        match self {
            Error::Load(
                LoadError::Io { file, .. }
                | LoadError::Json { file, .. }
                | LoadError::Limit { file, .. },
            ) => Some(file),
            Error::File { file, .. } => Some(file),
            _ => None,
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
