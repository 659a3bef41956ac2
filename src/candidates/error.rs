//! Errors of candidate derivation and the joint provider/storage selection (rules 3.1,
//! 3.5), each naming its culprit in the request's terms.

use crate::request::{NodeId, OperationId, ProviderId};

use crate::node::NodeError;

/// The command-line flag of a selection setting, named in its errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SettingFlag {
    /// `--pin NODE=PROVIDER`.
    Pin,
    /// `--forbid NODE=PROVIDER`.
    Forbid,
}

impl std::fmt::Display for SettingFlag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SettingFlag::Pin => "pin",
            SettingFlag::Forbid => "forbid",
        })
    }
}

/// Why the candidates of the nodes, or their joint selection, could not be derived.
#[derive(Debug, thiserror::Error)]
pub enum CandidateError {
    /// A candidate's resource plan breaks a per-node rule. Boxed: a `NodeError` names its
    /// culprits by id and is the largest payload; [`crate::builder::error::PlanError`] takes
    /// the box over as it is.
    #[error(transparent)]
    Node(Box<NodeError>),

    // ---- 3 joint selection -----------------------------------------------------------------
    /// A resolution candidate names a provider the catalog row of the operation lacks.
    #[error(
        "node {node}: candidate provider {provider} is not registered for operation {operation}"
    )]
    CandidateProviderNotInCatalog {
        /// The node.
        node: NodeId,
        /// The provider.
        provider: ProviderId,
        /// The operation.
        operation: OperationId,
    },
    /// Every candidate of a node was dropped for storage reasons.
    #[error("node {node}: no provider candidate with an available storage profile: {}", explanations.join("; "))]
    NoStorageCandidate {
        /// The node.
        node: NodeId,
        /// Why each provider was dropped, in the input's terms.
        explanations: Vec<String>,
    },
    /// The solver failed.
    #[error("joint provider/storage selection: {detail}")]
    Selection {
        /// The solver's message, in the input's terms.
        detail: String,
        /// True when the problem is infeasible (exit 1), false for a malformed problem.
        infeasible: bool,
    },
    /// A limit kept the solver from proving components optimal, and uncertified
    /// selections were not allowed (exit 1: the plan is refused, the input is fine).
    #[error(
        "joint provider/storage selection is not proved optimal for {}; accept it with --allow-uncertified",
        components.join("; ")
    )]
    Uncertified {
        /// Each uncertified component: its first node and why it is not certified.
        components: Vec<String>,
    },
    /// The solver's solution leaves a node without a provider.
    #[error("joint solver omitted program node {node}")]
    SolverOmittedNode {
        /// The node.
        node: NodeId,
    },
    /// The solver's solution assigns a node twice or names an unknown node.
    #[error("joint solver assigned node {node} inconsistently: {detail}")]
    SolverBadAssignment {
        /// The node.
        node: String,
        /// What is wrong.
        detail: String,
    },
    /// The solver's solution profiles a resource twice, names an unknown one, or misses one.
    #[error("joint solver profiled resource {resource} inconsistently: {detail}")]
    SolverBadProfile {
        /// The resource.
        resource: String,
        /// What is wrong.
        detail: String,
    },
    /// The preferred provider was not chosen, but no resource explains why.
    #[error(
        "node {node}: preferred provider {provider} was not selected without a storage conflict"
    )]
    PreferredLostWithoutConflict {
        /// The node.
        node: NodeId,
        /// The preferred provider.
        provider: ProviderId,
    },
    /// A pin or forbid names a node the program does not have.
    #[error("--{setting} {node}={provider}: the program has no node {node}")]
    SettingUnknownNode {
        /// The flag.
        setting: SettingFlag,
        /// The node.
        node: NodeId,
        /// The provider.
        provider: ProviderId,
    },
    /// A pin or forbid names a provider that is not a candidate of the node's resolution.
    #[error("--{setting} {node}={provider}: {provider} is not a provider candidate of node {node} (its candidates: {candidates})")]
    SettingUnknownProvider {
        /// The flag.
        setting: SettingFlag,
        /// The node.
        node: NodeId,
        /// The provider.
        provider: ProviderId,
        /// The node's candidates, comma-separated.
        candidates: String,
    },
    /// A node is both pinned to a provider and forbidden to use it.
    #[error("--pin {node}={provider} and --forbid {node}={provider} contradict each other; give one of them")]
    SettingContradiction {
        /// The node.
        node: NodeId,
        /// The provider.
        provider: ProviderId,
    },
    /// After pins and forbids a node has no usable candidate left.
    #[error("node {node} has no usable provider left under the pins and forbids: {detail}")]
    SettingLeavesNoCandidate {
        /// The node.
        node: NodeId,
        /// Which candidates were removed, and why.
        detail: String,
    },
}

impl CandidateError {
    /// The kind of failure: [`ErrorKind::Infeasible`](crate::error_kind::ErrorKind::Infeasible) when the
    /// request is well formed but no provider/profile choice satisfies it (or none could be
    /// proved optimal within the solver's limits), otherwise
    /// [`ErrorKind::BadInput`](crate::error_kind::ErrorKind::BadInput).
    pub fn kind(&self) -> crate::error_kind::ErrorKind {
        match self {
            CandidateError::NoStorageCandidate { .. }
            | CandidateError::Selection {
                infeasible: true, ..
            }
            | CandidateError::Uncertified { .. }
            | CandidateError::SettingLeavesNoCandidate { .. } => {
                crate::error_kind::ErrorKind::Infeasible
            }
            CandidateError::Node(error) => error.kind(),
            _ => crate::error_kind::ErrorKind::BadInput,
        }
    }
}

impl From<NodeError> for CandidateError {
    fn from(error: NodeError) -> Self {
        CandidateError::Node(Box::new(error))
    }
}
