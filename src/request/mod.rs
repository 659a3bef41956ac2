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
pub mod id_pattern;
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
    /// The input exceeds an input limit ([`crate::json_input::InputLimits`]).
    #[error("{file}: at {json_path}: {message}")]
    Limit {
        /// The file.
        file: PathBuf,
        /// JSON path of the culprit (`.` for the document or the file's size).
        json_path: String,
        /// The limit and its value.
        breach: crate::json_input::LimitBreach,
        /// What is wrong, naming the limit and the flag that raises it.
        message: String,
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

/// Parses JSON text into `T` strictly ([`crate::json_input::parse_strict`]: no duplicate
/// keys, no trailing bytes), naming the JSON path of the first problem.
pub fn parse_json<T: serde::de::DeserializeOwned>(file: &Path, text: &str) -> Result<T, LoadError> {
    crate::json_input::parse_strict(text).map_err(|err| LoadError::from_strict(file, err))
}

/// Reads and parses a JSON file into `T`, within the current input limits (the file's size
/// is checked while it is read).
pub fn read_json<T: serde::de::DeserializeOwned>(file: &Path) -> Result<T, LoadError> {
    parse_json(file, &read_json_text(file)?)
}

/// Reads the text of a JSON file within the current `file-bytes` limit (checked while
/// reading), failing early on a file that cannot be JSON.
pub fn read_json_text(file: &Path) -> Result<String, LoadError> {
    use crate::json_input::{read_text, InputLimits, ReadError};
    read_text(file, &InputLimits::current()).map_err(|error| match error {
        ReadError::Io(source) => LoadError::Io {
            file: file.to_path_buf(),
            source,
        },
        ReadError::TooLarge(breach) => LoadError::Limit {
            file: file.to_path_buf(),
            json_path: ".".to_owned(),
            message: format!("the file is {breach}"),
            breach,
        },
        ReadError::NotJson(message) => LoadError::Json {
            file: file.to_path_buf(),
            json_path: ".".to_owned(),
            message: format!("not a JSON document: {message}"),
        },
    })
}

impl LoadError {
    /// The error of a strict parse of `file`.
    pub fn from_strict(file: &Path, err: crate::json_input::StrictJsonError) -> LoadError {
        match err.limit {
            Some(breach) => LoadError::Limit {
                file: file.to_path_buf(),
                json_path: err.json_path,
                breach,
                message: err.message,
            },
            None => LoadError::Json {
                file: file.to_path_buf(),
                json_path: err.json_path,
                message: err.message,
            },
        }
    }
}

impl PlanRequest {
    /// The request as a JSON tree (its serde form), for callers that edit requests as JSON:
    /// one instance of the serializer, in the library, shared by every caller.
    pub fn to_json_tree(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::to_value(self)
    }

    /// The request as JSON text (its serde form), compact or `pretty`: one instance of
    /// each serializer, in the library, shared by every caller.
    pub fn to_json_text(&self, pretty: bool) -> Result<String, serde_json::Error> {
        if pretty {
            serde_json::to_string_pretty(self)
        } else {
            serde_json::to_string(self)
        }
    }

    /// A request from its JSON tree (serde's reading, without the strict checks of
    /// [`PlanRequest::parse`]).
    pub fn from_json_tree(tree: serde_json::Value) -> Result<Self, serde_json::Error> {
        serde_json::from_value(tree)
    }

    /// Reads a request file (shape and ids only; call [`PlanRequest::validate`] next).
    pub fn read(file: &Path) -> Result<Self, LoadError> {
        Self::parse(file, &read_json_text(file)?)
    }

    /// Parses request text read from `file` (named in errors). Besides the strict reading
    /// of every JSON input, the `nodes` limit is applied to `node_resolutions` (one per
    /// program node) while the text is scanned, before any typed value is built.
    pub fn parse(file: &Path, text: &str) -> Result<Self, LoadError> {
        use crate::json_input::{parse_large_strict_counting, CountedArray, InputLimits, Limit};
        let counted = CountedArray {
            path: &["node_resolutions"],
            limit: Limit::Nodes,
        };
        parse_large_strict_counting(text, &InputLimits::current(), Some(counted))
            .map_err(|err| LoadError::from_strict(file, err))
    }
}

/// A request is mostly its node resolutions (70% of DeepSeek-V3's): read on every core.
impl crate::json_input::LargeArray for PlanRequest {
    type Element = NodeResolution;
    const PATH: &'static [&'static str] = &["node_resolutions"];
    fn elements_mut(&mut self) -> &mut Vec<NodeResolution> {
        &mut self.node_resolutions
    }
}

#[cfg(test)]
mod tests {
    use crate::json_input::{parse_split_from, parse_strictly, InputLimits};

    /// The shipped requests read with their node resolutions on every core: the same
    /// request as the one-core pass reads, under the default limits and a lowered array
    /// limit that the node resolutions break.
    #[test]
    fn the_split_reading_reads_the_shipped_requests_as_the_one_pass_does() {
        for model in ["tiny", "decoder-2layer", "hybrid-block"] {
            let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("models")
                .join(model)
                .join("request.json");
            let text = std::fs::read_to_string(file).unwrap();
            let one: super::PlanRequest = parse_strictly(&text, &InputLimits::DEFAULT).unwrap();
            let split: super::PlanRequest =
                parse_split_from(&text, &InputLimits::DEFAULT, 0).unwrap();
            assert_eq!(
                crate::canonical::canonical_json("request", &split).unwrap(),
                crate::canonical::canonical_json("request", &one).unwrap(),
                "{model}"
            );
            let mut lowered = InputLimits::DEFAULT;
            lowered.array_elements = one.node_resolutions.len() as u64 - 1;
            let refused: Option<super::PlanRequest> = parse_split_from(&text, &lowered, 0);
            assert!(refused.is_none(), "{model}");
        }
    }
}
