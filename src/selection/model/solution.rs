//! The output of a solve: the chosen providers and profiles, the summary, and
//! one report per component saying how its answer was reached and certified
//! (the `jointplan solve` output format).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::selection::model::problem::UnusableCandidate;

/// Whether an answer is proved optimal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Proved optimal for the objective.
    Optimal,
    /// Feasible; a limit stopped the proof.
    Feasible,
}

/// Presolve counters of one component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PresolveReport {
    /// Candidates removed by domain propagation.
    pub propagated: usize,
    /// Candidates removed as dominated.
    pub dominated: usize,
    /// Resources settled and removed.
    pub settled: usize,
    /// Nodes fixed outright.
    pub fixed: usize,
    /// Parts left after re-splitting.
    pub parts: usize,
    /// Parts whose answer was reused from an identical part.
    pub reused: usize,
}

/// The report of one component.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComponentReport {
    /// Number of nodes.
    pub nodes: usize,
    /// Number of resources its candidates name.
    pub resources: usize,
    /// `ilp`, `dp` or `presolve` (presolve fixed every node).
    pub method: String,
    /// `dp-agrees` or `dp-skipped: <reason>; certificate: ...`.
    pub check: String,
    /// Wall-clock seconds (0.0 with timings off).
    pub seconds: f64,
    /// Id of the first node.
    pub first_node: String,
    /// Whether this component's answer is proved optimal.
    pub status: Status,
    /// Relative gap of an interrupted solve, where known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap: Option<f64>,
    /// How the answer was certified.
    pub certificate: String,
    /// Presolve counters (integer-program path only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presolve: Option<PresolveReport>,
}

/// The summary of a solution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of nodes.
    pub nodes: usize,
    /// Number of components.
    pub components: usize,
    /// Nodes whose preferred provider was chosen.
    pub preferred_met: usize,
    /// `penalty_by_rank[k]`: number of resources whose profile has rank `k`.
    pub penalty_by_rank: Vec<usize>,
    /// Candidates dropped before solving (an empty accepted list).
    pub unusable_candidates: Vec<UnusableCandidate>,
    /// The solution's time per metric, integer picoseconds (the chosen candidates' costs
    /// and the used resources' costs at their profiles); only when the problem has time
    /// costs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_ps: Option<TimeSums>,
}

/// A solution's time per metric (picoseconds).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeSums {
    /// One decode step.
    pub tpot: u128,
    /// One prompt's prefill.
    pub ttft: u128,
    /// The device time per served batch.
    pub throughput: u128,
}

/// A solution in the output format of `jointplan solve`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Solution {
    /// `optimal` when every component is proved optimal, else `feasible`.
    pub status: Status,
    /// The objective's name.
    pub objective: String,
    /// Chosen provider per node id.
    pub choices: BTreeMap<String, String>,
    /// Profile per resource touched by a chosen candidate.
    pub profiles: BTreeMap<String, String>,
    /// Summary counts.
    pub summary: Summary,
    /// One report per component, in component order.
    pub components: Vec<ComponentReport>,
}
