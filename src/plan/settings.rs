//! The selection settings a plan was built with (`plan --objective/--weights/--pin/--forbid`,
//! `--allow-uncertified`), recorded in the payload where they differ from the defaults: they
//! can change which providers and profiles are chosen, so they are part of the plan hash and
//! `verify` rebuilds with exactly them.

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::request::{NodeId, ProviderId};

/// The name of the default objective, which a plan does not record.
pub const DEFAULT_OBJECTIVE: &str = "seed-lex";

/// The weights of the `weighted` objective, as recorded in a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordedWeights {
    /// Reward of each node whose preferred provider is chosen.
    pub preferred: u32,
    /// Cost of one resource at each profile rank.
    pub ranks: Vec<u32>,
    /// Weights of the time metrics (`tpot`, `ttft`, `throughput`) per picosecond, when the
    /// score has a time term.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<BTreeMap<String, u32>>,
}

/// What a time objective's candidate times were computed from: the serving point and the
/// device's performance figures (recorded so that `verify` prices the candidates again
/// from the plan alone and rebuilds the same selection).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordedServing {
    /// Requests in flight.
    pub concurrency: u64,
    /// Prompt tokens of each request.
    pub input_tokens: u64,
    /// Output tokens of each request.
    pub output_tokens: u64,
    /// The engine whose time profile priced the steps.
    pub engine: String,
    /// The device's name.
    pub device: String,
    /// Peak dense throughput per data type (GFLOP/s), as in the device file.
    pub peak_gflops: BTreeMap<String, u64>,
    /// Memory bandwidth (GB/s).
    pub memory_bandwidth_gb_per_second: u64,
    /// Kernel launch overhead (nanoseconds).
    pub launch_overhead_nanoseconds: u64,
}

/// The settings of a plan's selection that differ from the defaults. Every field is omitted
/// from the plan when it has its default, so a plan built with the defaults has the bytes
/// (and the hash) it had before settings were recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SelectionSettings {
    /// The objective (`max-preferred`, `min-penalty` or `weighted`); absent: `seed-lex`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objective: Option<String>,
    /// The weights of the `weighted` objective.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<RecordedWeights>,
    /// Nodes fixed to one provider (`--pin NODE=PROVIDER`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pins: BTreeMap<NodeId, ProviderId>,
    /// Providers a node may not use (`--forbid NODE=PROVIDER`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub forbids: BTreeMap<NodeId, BTreeSet<ProviderId>>,
    /// The serving point and device figures that priced a time objective's candidates
    /// (`--objective min-tpot|min-ttft|max-throughput`); absent for every other objective.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<RecordedServing>,
    /// The first node of every selection component accepted without a proof of optimality
    /// (`--allow-uncertified` and a solver limit), sorted. Such a plan is verified by
    /// replaying its recorded choices, not by re-solving.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uncertified_components: Vec<NodeId>,
}

impl SelectionSettings {
    /// Whether every setting has its default (the field is then omitted from the plan).
    pub fn is_default(&self) -> bool {
        self == &SelectionSettings::default()
    }

    /// The objective's name (`seed-lex` when none is recorded).
    pub fn objective_name(&self) -> &str {
        self.objective.as_deref().unwrap_or(DEFAULT_OBJECTIVE)
    }

    /// Whether `provider` is forbidden at `node`.
    pub fn forbids(&self, node: &NodeId, provider: &ProviderId) -> bool {
        self.forbids
            .get(node)
            .is_some_and(|set| set.contains(provider))
    }
}
