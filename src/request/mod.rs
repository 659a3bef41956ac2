//! The plan request: what a user hands jointplan (rules 1).
//!
//! A request is one JSON document with the model family (configuration, weight schema and
//! program), the capability catalog, the runtime policy, one resolution per program node,
//! the completion retention and, optionally, an execution weight plan. Loading checks the
//! JSON shape and every id (with the JSON path of the culprit); [`PlanRequest::validate`]
//! then checks every load-time invariant of rules 1.1-1.8.

pub mod catalog;
pub mod family;
pub mod fingerprints;
pub mod ids;
pub mod policy;
pub mod program;
pub mod resolution;
pub mod seal;
pub mod storage;
pub mod tensor;
pub mod validate;
pub mod weights;

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use catalog::*;
pub use family::ModelFamily;
pub use ids::*;
pub use policy::*;
pub use program::*;
pub use resolution::*;
pub use storage::*;
pub use tensor::*;
pub use weights::*;

/// Everything needed to build one execution plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanRequest {
    /// The model family.
    pub family: ModelFamily,
    /// The capability catalog of the device.
    pub catalog: CapabilityCatalog,
    /// The runtime policy.
    pub policy: RuntimePolicy,
    /// One resolution per program node.
    pub node_resolutions: Vec<NodeResolution>,
    /// Values whose bytes must survive until completion.
    #[serde(default)]
    pub completion_retention: CompletionRetention,
    /// The execution weight plan; the identity materializer of the family's schema if absent.
    #[serde(default)]
    pub execution_weights: Option<ExecutionWeightPlan>,
}

/// A request or plan file that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("{file}: cannot read: {source}")]
    Io {
        /// The file.
        file: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The JSON is malformed or does not match the format.
    #[error("{file}: at {json_path}: {message}")]
    Json {
        /// The file.
        file: PathBuf,
        /// JSON path of the culprit (`.` for the document).
        json_path: String,
        /// What is wrong.
        message: String,
    },
}

/// Parses JSON text into `T`, naming the JSON path of the first problem.
pub fn parse_json<T: serde::de::DeserializeOwned>(file: &Path, text: &str) -> Result<T, LoadError> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value: T =
        serde_path_to_error::deserialize(&mut deserializer).map_err(|err| LoadError::Json {
            file: file.to_path_buf(),
            json_path: err.path().to_string(),
            message: err.inner().to_string(),
        })?;
    deserializer.end().map_err(|err| LoadError::Json {
        file: file.to_path_buf(),
        json_path: ".".to_owned(),
        message: err.to_string(),
    })?;
    Ok(value)
}

/// Reads and parses a JSON file into `T`.
pub fn read_json<T: serde::de::DeserializeOwned>(file: &Path) -> Result<T, LoadError> {
    let text = std::fs::read_to_string(file).map_err(|source| LoadError::Io {
        file: file.to_path_buf(),
        source,
    })?;
    parse_json(file, &text)
}

impl PlanRequest {
    /// Reads a request file (shape and ids only; call [`PlanRequest::validate`] next).
    pub fn read(file: &Path) -> Result<Self, LoadError> {
        read_json(file)
    }
}
