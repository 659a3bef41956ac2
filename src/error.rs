//! The error of every jointplan operation, and the exit status it maps to.

use crate::request::LoadError;

/// Everything that can go wrong, by the part of the pipeline that found it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or parsed.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A request breaks a load-time invariant (domain.md 1.1-1.8).
    #[error(transparent)]
    Request(#[from] crate::request::validate::RequestError),
}

impl Error {
    /// The process exit status: 2 for bad input, 1 for an infeasible or rejected plan.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Load(_) | Error::Request(_) => 2,
        }
    }
}
