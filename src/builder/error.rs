//! Errors of the build pipeline (rules 2.1): the request's load-time errors, each
//! builder layer's error (candidates and selection, node rules, memory plan), and the
//! pipeline's own rules (resolution indexing, completion retention, wire limits).

use crate::candidates::CandidateError;
use crate::canonical::CanonicalError;
use crate::node::{join, NodeError};
use crate::request::{NodeId, ProgramValueId, ResourceId};

/// Why a plan could not be built from a request.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The built plan breaks rules of a valid plan that the independent checker re-derives:
    /// a planner bug (the plan is not written).
    #[error("the built plan fails the independent checker ({} violations): {}", violations.len(), crate::node::join(violations))]
    Check {
        /// Every violation, in rule order.
        violations: Vec<crate::check::Violation>,
    },
    /// Candidate derivation or the joint selection failed (a per-node rule broken while
    /// deriving candidates is reported as [`PlanError::Node`]).
    #[error(transparent)]
    Candidates(CandidateError),
    /// A node breaks a per-node rule. Boxed: a `NodeError` names its culprits by id and is
    /// the largest payload, and every `Result` of the build carries this type.
    #[error(transparent)]
    Node(Box<NodeError>),
    /// The request breaks a load-time invariant.
    #[error(transparent)]
    Request(#[from] crate::request::validate::RequestError),
    /// The plan file would exceed the policy's wire limit on plan JSON bytes (the
    /// reference 16 MiB unless the policy's `wire_limits` raises it).
    #[error(
        "the plan JSON is {measured} bytes, over the wire limit maximum_plan_json_bytes = \
         {limit} (raise it with the policy's wire_limits)"
    )]
    PlanJsonTooLarge {
        /// Bytes of the plan file as written (pretty JSON and its final newline).
        measured: u64,
        /// The limit in force.
        limit: u64,
    },
    /// The build's thread pool could not be started.
    #[error("cannot start a pool of {threads} build threads: {message}")]
    ThreadPool {
        /// The thread count asked for.
        threads: usize,
        /// The operating system's reason.
        message: String,
    },
    /// The memory plan could not be derived (a capacity failure, or inconsistent resources).
    #[error("memory plan: {0}")]
    Memory(crate::memory::MemoryError),
    /// The built plan failed its internal validation (rules 6): a planner bug. Boxed, as
    /// [`PlanError::Node`] is: a large payload on a path no correct build takes.
    #[error("internal validation of the built plan: {0}")]
    Internal(Box<crate::builder::internal::InternalError>),
    /// A fingerprint could not be computed.
    #[error(transparent)]
    Canonical(#[from] CanonicalError),
    /// The request has no node resolution.
    #[error("the request has no node resolutions")]
    NoNodeResolutions,
    /// A time objective cannot price the candidates (no serving point, no usable device
    /// figures, or the performance model refused the request).
    #[error("time objective: {0}")]
    TimeObjective(String),
    /// Two resolutions name the same node.
    #[error("{path}: node {node} has more than one resolution (keep one entry per node)")]
    DuplicateResolution {
        /// The node.
        node: NodeId,
        /// JSON path of the second resolution's `node_id`.
        path: String,
    },
    /// Resolutions name nodes the program does not have.
    #[error("resolutions for unknown nodes: {}", join(nodes))]
    UnknownResolutions {
        /// The nodes.
        nodes: Vec<NodeId>,
    },
    /// A program node has no resolution.
    #[error(
        "{path}: program node {node} has no resolution (add a `node_resolutions` entry for it)"
    )]
    MissingResolution {
        /// The node.
        node: NodeId,
        /// JSON path of the node's id in the program.
        path: String,
    },

    // ---- 2.1 steps 14-16 ---------------------------------------------------------------
    /// A retained value is not a node output.
    #[error("retained value {value} is not the output of any node")]
    RetainedNotProduced {
        /// The value.
        value: ProgramValueId,
    },
    /// A retained value is not an activation with one storage component.
    #[error("retained value {value} (node {node}): {detail}")]
    RetainedShape {
        /// The value.
        value: ProgramValueId,
        /// Its producer.
        node: NodeId,
        /// What is wrong.
        detail: String,
    },
    /// A retained value is overwritten before completion.
    #[error("retained value {value} (resource {resource}) is overwritten by value {writer_value} of node {writer}")]
    RetainedOverwritten {
        /// The value.
        value: ProgramValueId,
        /// Its resource.
        resource: ResourceId,
        /// The writing node.
        writer: NodeId,
        /// The value it writes.
        writer_value: ProgramValueId,
    },
    /// No program output has a resource.
    #[error("no program output has a storage resource")]
    NoTerminalOutputResources,
    /// Byte arithmetic overflowed.
    #[error("{what}: byte arithmetic overflows u64")]
    Overflow {
        /// Where.
        what: String,
    },
}

impl From<CandidateError> for PlanError {
    fn from(error: CandidateError) -> Self {
        match error {
            CandidateError::Node(error) => PlanError::Node(error),
            other => PlanError::Candidates(other),
        }
    }
}

impl PlanError {
    /// The JSON path of the culprit in the request, where the error has one.
    pub fn json_path(&self) -> Option<&str> {
        match self {
            PlanError::Request(error) => Some(error.path()),
            PlanError::DuplicateResolution { path, .. }
            | PlanError::MissingResolution { path, .. } => Some(path),
            _ => None,
        }
    }

    /// The kind of failure: [`ErrorKind::Infeasible`](crate::error_kind::ErrorKind::Infeasible) when the
    /// request is well formed but no plan fits it (the selection is infeasible, no provider
    /// is compatible, capacity is exceeded, no certified optimum, a wire limit), otherwise
    /// [`ErrorKind::BadInput`](crate::error_kind::ErrorKind::BadInput) (malformed or inconsistent
    /// requests).
    pub fn kind(&self) -> crate::error_kind::ErrorKind {
        use crate::error_kind::ErrorKind::{BadInput, Infeasible};
        match self {
            PlanError::Candidates(error) => error.kind(),
            PlanError::Node(error) => error.kind(),
            PlanError::Memory(
                crate::memory::MemoryError::CapacityExceeded { .. }
                | crate::memory::MemoryError::StaticExceedsUsable { .. }
                | crate::memory::MemoryError::PoolExceedsDynamicCapacity { .. }
                | crate::memory::MemoryError::TooManyRows { .. },
            ) => Infeasible,
            PlanError::PlanJsonTooLarge { .. } => Infeasible,
            PlanError::Check { .. } => crate::error_kind::ErrorKind::Rejected,
            _ => BadInput,
        }
    }
}

// Wrappers displayed with context are not also returned as `source()` (a reporter that
// walks the chain would print the inner error twice), hence these hand-written `From`s.

impl From<crate::memory::MemoryError> for PlanError {
    fn from(error: crate::memory::MemoryError) -> Self {
        PlanError::Memory(error)
    }
}

impl From<crate::builder::internal::InternalError> for PlanError {
    fn from(error: crate::builder::internal::InternalError) -> Self {
        PlanError::Internal(Box::new(error))
    }
}

impl From<NodeError> for PlanError {
    fn from(error: NodeError) -> Self {
        PlanError::Node(Box::new(error))
    }
}
