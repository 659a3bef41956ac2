//! MILP backends: one file per solver, all behind one call.
//!
//! The hierarchy in [`super::ilp`] builds one [`Model`] (binary variables,
//! linear rows) and asks [`solve_model`] for an optimum of one integer
//! objective at a time. The backend is chosen per solve by [`Backend`];
//! microlp (pure Rust) is the default build, HiGHS is behind the `highs`
//! cargo feature. Whatever a backend returns is re-checked by the caller
//! (one-hot rows, fixings, exact re-evaluation), so a backend is trusted for
//! optimality only, never for feasibility.

use super::ilp::IlpLimits;

#[cfg(feature = "highs")]
mod highs;
mod microlp;

/// Which MILP solver runs the integer-program levels.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Backend {
    /// microlp, the pure-Rust solver, through good_lp (the default).
    #[default]
    Microlp,
    /// HiGHS through good_lp (cargo feature `highs`), for comparison.
    #[cfg(feature = "highs")]
    Highs,
}

impl Backend {
    /// The backend's name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Microlp => "microlp",
            #[cfg(feature = "highs")]
            Backend::Highs => "highs",
        }
    }
}

/// The sense of a linear row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sense {
    /// `terms ≤ rhs`.
    Le,
    /// `terms ≥ rhs`.
    Ge,
    /// `terms = rhs`.
    Eq,
}

/// A linear row: terms (variable, coefficient), sense, right-hand side.
pub(crate) type Row = (Vec<(usize, f64)>, Sense, f64);

/// An integer program over integer variables with the given bounds (every
/// variable of the hierarchy is binary; a fixing is a bound `(v, v)`).
pub(crate) struct Model {
    /// Lower and upper bound of each variable.
    pub bounds: Vec<(f64, f64)>,
    /// The constraints.
    pub rows: Vec<Row>,
}

/// A backend's answer: one value per variable.
pub(crate) struct RawSolution {
    /// Variable values, in variable order.
    pub values: Vec<f64>,
    /// Whether the backend proved the objective optimal.
    pub optimal: bool,
    /// Relative gap of an interrupted solve, where the backend knows it.
    pub gap: Option<f64>,
}

/// Why a backend returned no solution.
pub(crate) enum RawError {
    /// The model has no integer solution.
    Infeasible,
    /// A limit was hit before any solution was found.
    Limit,
    /// Anything else (a backend error or panic), in words.
    Other(String),
}

/// Minimises `objective` over `model`; `warm` is a feasible assignment to
/// start from, when one is known.
pub(crate) fn solve_model(
    model: &Model,
    objective: &[(usize, f64)],
    warm: Option<&[f64]>,
    limits: &IlpLimits,
) -> Result<RawSolution, RawError> {
    match limits.backend {
        Backend::Microlp => microlp::solve(model, objective, warm, limits),
        #[cfg(feature = "highs")]
        Backend::Highs => highs::solve(model, objective, warm, limits),
    }
}
