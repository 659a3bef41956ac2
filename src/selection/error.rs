//! The errors of the selection solver.

/// Why a selection problem could not be solved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectionError {
    /// The input is malformed; the message names the node, candidate,
    /// resource or JSON path at fault.
    #[error("{0}")]
    BadInput(String),
    /// A component has no feasible selection.
    #[error("component {component} (first node `{first_node}`) is infeasible: {explanation}")]
    Infeasible {
        /// Component index (components are sorted by first node).
        component: usize,
        /// Id of the component's first node.
        first_node: String,
        /// A small conflicting set of nodes and resources, in the input's terms.
        explanation: String,
    },
    /// The solver failed or hit a limit before it found any solution.
    #[error("component {component} (first node `{first_node}`): solver failure: {message}")]
    Solver {
        /// Component index.
        component: usize,
        /// Id of the component's first node.
        first_node: String,
        /// What went wrong.
        message: String,
    },
    /// Two methods, or a method and the independent re-check, disagree. This
    /// is a bug; both answers are included.
    #[error("component {component} (first node `{first_node}`): CERTIFICATION FAILED: {details}")]
    Disagreement {
        /// Component index.
        component: usize,
        /// Id of the component's first node.
        first_node: String,
        /// Both answers and what differs.
        details: String,
    },
}

impl SelectionError {
    /// The process exit status `jointplan solve` uses for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            SelectionError::Infeasible { .. } => 1,
            SelectionError::BadInput(_) => 2,
            SelectionError::Solver { .. } => 3,
            SelectionError::Disagreement { .. } => 4,
        }
    }
}
