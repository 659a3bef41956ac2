//! The prepared model family: one validated model configuration, its weights and program
//! (rules 1.2).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ids::ModelFamilyId;
use super::program::ModelProgram;
use super::weights::WeightSchema;

/// A model family as the planner receives it.
///
/// Adaptation: the reference also carries an external metadata id, a config fingerprint
/// and semantic metadata; jointplan keeps the canonical configuration itself (any JSON
/// object, hashed as part of the family fingerprint) and drops the rest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelFamily {
    /// Family id.
    pub family_id: ModelFamilyId,
    /// The model configuration (e.g. a Hugging Face `config.json`), as a JSON object.
    #[serde(default = "empty_object")]
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub canonical_config: serde_json::Value,
    /// Source weight schema.
    pub weight_schema: WeightSchema,
    /// The program.
    pub program: ModelProgram,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}
