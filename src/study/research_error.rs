//! The error of the research queries (`diff`, `why_not`, `infeasible`).

use crate::builder::error::PlanError;

/// Why a research query could not be answered.
#[derive(Debug, thiserror::Error)]
pub enum ResearchError {
    /// Two plans of different programs cannot be compared node by node.
    #[error("the plans are of different programs ({detail}); diff compares two plans of one program (the same model and layers)")]
    DifferentPrograms {
        /// Where they first differ.
        detail: String,
    },
    /// The question names a node the plan or request does not have.
    #[error("{flag} {node}: the plan has no node {node}")]
    UnknownNode {
        /// The flag that named it.
        flag: &'static str,
        /// The node.
        node: String,
    },
    /// A node name (an id or an id pattern) selects no node of the plan.
    #[error(
        "{flag} {node}: the plan has no such node ({nodes} nodes; closest: {}; `jointplan plan --full` lists every node)",
        closest.join(", ")
    )]
    NoSuchNode {
        /// The flag (or argument) that named it.
        flag: &'static str,
        /// The name as given.
        node: String,
        /// How many nodes the plan has.
        nodes: usize,
        /// The ids closest to the name (those sharing its longest prefix, at most eight).
        closest: Vec<String>,
    },
    /// A node name is an id pattern that cannot be read.
    #[error("{flag} {error}")]
    BadPattern {
        /// The flag (or argument) that gave it.
        flag: &'static str,
        /// Why it cannot be read.
        error: crate::request::id_pattern::IdPatternError,
    },
    /// The stored plan was not built from this request.
    #[error("the plan was not built from this request: {detail}")]
    PlanNotOfRequest {
        /// What differs.
        detail: String,
    },
    /// A build that the query needs failed for another reason than infeasibility.
    #[error("a build the query needs failed: {0}")]
    Build(Box<PlanError>),
    /// The memory report of a plan could not be computed.
    #[error("the memory report: {detail}")]
    Report {
        /// Why.
        detail: String,
    },
    /// A plan could not be priced at a serving point.
    #[error(transparent)]
    Perf(#[from] crate::perf::PerfError),
    /// A number overflowed.
    #[error("{what} overflows")]
    Overflow {
        /// The quantity.
        what: String,
    },
}

impl ResearchError {
    /// The kind of failure: a failed build keeps its own kind, everything else is bad input.
    pub fn kind(&self) -> crate::error_kind::ErrorKind {
        match self {
            ResearchError::Build(error) => error.kind(),
            _ => crate::error_kind::ErrorKind::BadInput,
        }
    }
}

impl From<PlanError> for ResearchError {
    fn from(error: PlanError) -> Self {
        ResearchError::Build(Box::new(error))
    }
}
