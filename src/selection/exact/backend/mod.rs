//! MILP backends: one file per solver, all behind one call. This file is the contract
//! between the hierarchy and the backends (the [`Model`], its [`Row`]s, the limits
//! [`IlpLimits`], the answers [`RawSolution`] and [`RawError`]): a backend imports from
//! here only, never from the hierarchy that calls it.
//!
//! The hierarchy in [`super::ilp`] builds one [`Model`] (binary variables,
//! linear rows) and asks [`solve_model`] for an optimum of one integer
//! objective at a time. The backend is chosen per solve by [`Backend`];
//! microlp (pure Rust) is the default build, HiGHS is behind the `highs`
//! cargo feature. Whatever a backend returns is re-checked by the caller
//! (one-hot rows, fixings, exact re-evaluation), so a backend is trusted for
//! optimality only, never for feasibility.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

#[cfg(feature = "highs")]
use good_lp::{variable, Constraint, Expression, ProblemVariables};

use crate::selection::model::progress::PartReporter;

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

/// Limits of one component's integer program, the backend that solves it,
/// and the observer of its progress.
#[derive(Debug, Clone, Default)]
pub(crate) struct IlpLimits {
    /// Wall-clock deadline for the whole hierarchy.
    pub deadline: Option<Instant>,
    /// Branch-and-bound node budget of each solve.
    pub node_limit: Option<u64>,
    /// The MILP backend of every level solve.
    pub backend: Backend,
    /// Told when each level solve begins and ends (a progress display).
    pub progress: Option<PartReporter>,
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
    /// The best proven lower bound on the objective, where the backend has
    /// one (the objective value itself when optimal).
    pub bound: Option<f64>,
}

/// Why a backend returned no solution.
pub(crate) enum RawError {
    /// The model has no integer solution.
    Infeasible,
    /// A limit was hit before any solution was found (with the best proven
    /// lower bound, where the backend has one).
    Limit(Option<f64>),
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

#[cfg(feature = "highs")]
/// `model` and `objective` in good_lp's terms, for any good_lp solver: the
/// variables (in model order, integer, with the model's bounds), the
/// objective expression and one constraint per row.
fn good_lp_model(
    model: &Model,
    objective: &[(usize, f64)],
) -> (
    ProblemVariables,
    Vec<good_lp::Variable>,
    Expression,
    Vec<Constraint>,
) {
    let mut pv = ProblemVariables::new();
    let vars: Vec<good_lp::Variable> = model
        .bounds
        .iter()
        .map(|&(lo, hi)| pv.add(variable().integer().clamp(lo, hi)))
        .collect();
    let expression = |terms: &[(usize, f64)]| {
        let mut e = Expression::with_capacity(terms.len());
        for &(v, c) in terms {
            e.add_mul(c, vars[v]);
        }
        e
    };
    let obj = expression(objective);
    let rows = model
        .rows
        .iter()
        .map(|(terms, sense, rhs)| {
            let e = expression(terms);
            match sense {
                Sense::Le => e.leq(*rhs),
                Sense::Ge => e.geq(*rhs),
                Sense::Eq => e.eq(*rhs),
            }
        })
        .collect();
    (pv, vars, obj, rows)
}

/// Seconds left before `deadline` (`None`: no deadline); a deadline already
/// passed is a limit.
fn seconds_left(deadline: Option<Instant>) -> Result<Option<f64>, RawError> {
    match deadline {
        Some(d) => {
            let left = d.saturating_duration_since(Instant::now()).as_secs_f64();
            if left <= 0.0 {
                return Err(RawError::Limit(None));
            }
            Ok(Some(left))
        }
        None => Ok(None),
    }
}

/// Runs one backend call; a panic inside the solver (microlp has panicked
/// on some inputs in the past) becomes a backend error naming `backend`
/// instead of taking the planner down.
fn guarded<T>(backend: &str, run: impl FnOnce() -> Result<T, RawError>) -> Result<T, RawError> {
    match catch_unwind(AssertUnwindSafe(run)) {
        Ok(r) => r,
        Err(_) => Err(RawError::Other(format!("the {backend} backend panicked"))),
    }
}
