//! The HiGHS backend (cargo feature `highs`), for comparison with microlp.
//!
//! good_lp builds the model (the same variables and rows as the microlp
//! backend); the solve drives the `highs` crate directly on the model good_lp
//! built, because good_lp's own HiGHS `solve` folds the statuses this backend
//! must keep apart (a limit with no solution, the gap, infeasible versus
//! "unbounded or infeasible") and exposes no node limit.
//!
//! Exactness. Every objective the hierarchy in [`crate::selection::exact::ilp`]
//! hands to a backend has integer coefficients (powers of two, digit
//! weights, ranks, user weights; at most 2^24 in total) over binary
//! variables, so every level objective takes integral values on integer
//! solutions. HiGHS's relative gap is set to 0 and its absolute gap to 0.5:
//! it stops as optimal only when its incumbent and its dual bound `L` are at
//! most 0.5 apart. This backend does not take HiGHS's word for it: it rounds
//! the returned values to integers, recomputes their objective `R` exactly
//! (integers below 2^24 are exact in `f64`) and reports optimal only when
//! `R - L < 1`, so that no integral value lies in `[L, R - 1]` and `R` is the
//! exact optimum.
//!
//! The warm start. HiGHS 1.16 maps a MIP start into its presolved space, and
//! where that image is better than the start and already optimal, it reports
//! the image's objective but returns the start's own values (seen on random
//! instances: a reported optimum of 1, returned values worth 2). The check
//! above catches it; the solve is then repeated without the warm start, and
//! a second failure is a backend error, never an answer.
//!
//! Determinism: one thread, a fixed random seed, no parallel LP; the result
//! then depends only on the model (and on a time limit, when one is given).

use good_lp::SolverModel;
use highs::{HighsModelStatus, HighsSolutionStatus};

use super::{good_lp_model, guarded, seconds_left, IlpLimits, Model, RawError, RawSolution, Sense};

/// The absolute gap at which HiGHS may stop as optimal: below 1, the
/// distance of two distinct integral objective values (module docs).
const MIP_ABS_GAP: f64 = 0.5;

/// HiGHS's random seed (fixed for determinism).
const RANDOM_SEED: i32 = 1;

/// Sets one HiGHS option; an unknown option or a rejected value is a
/// backend error naming the option.
fn set<V: highs::HighsOptionValue>(
    model: &mut highs::Model,
    name: &str,
    value: V,
) -> Result<(), RawError> {
    model
        .try_set_option(name, value)
        .map_err(|e| RawError::Other(format!("HiGHS rejected option `{name}`: {e}")))
}

/// One solve of `objective` over `model` with HiGHS.
pub(super) fn solve(
    model: &Model,
    objective: &[(usize, f64)],
    warm: Option<&[f64]>,
    limits: &IlpLimits,
) -> Result<RawSolution, RawError> {
    if model.bounds.is_empty() {
        return empty(model);
    }
    let run = |warm: Option<&[f64]>| -> Result<Attempt, RawError> {
        let left = seconds_left(limits.deadline)?;
        guarded("HiGHS", || {
            solve_once(model, objective, warm, left, limits.node_limit)
        })
    };
    match run(warm)? {
        Attempt::Answer(a) => Ok(a),
        Attempt::Unproved { value, bound } => {
            let cold = if warm.is_some() {
                run(None)?
            } else {
                Attempt::Unproved { value, bound }
            };
            match cold {
                Attempt::Answer(a) => Ok(a),
                Attempt::Unproved { value, bound } => Err(RawError::Other(format!(
                    "HiGHS reported an optimum, but its solution has objective {value} and \
                     its dual bound is {bound}: not proved optimal"
                ))),
            }
        }
    }
}

/// What one HiGHS run gave.
enum Attempt {
    /// An answer to hand back.
    Answer(RawSolution),
    /// HiGHS said optimal, but the returned values are not proved optimal by
    /// its bound (`value - bound >= 1`).
    Unproved {
        /// Objective of the returned values, rounded to integers.
        value: f64,
        /// HiGHS's dual bound.
        bound: f64,
    },
}

/// One HiGHS run with the given warm start and limits.
fn solve_once(
    model: &Model,
    objective: &[(usize, f64)],
    warm: Option<&[f64]>,
    seconds: Option<f64>,
    node_limit: Option<u64>,
) -> Result<Attempt, RawError> {
    let (pv, _, obj, rows) = good_lp_model(model, objective);
    let mut problem = pv.minimise(obj).using(good_lp::highs);
    for con in rows {
        problem.add_constraint(con);
    }
    let mut m = problem
        .try_into_inner()
        .map_err(|e| RawError::Other(format!("HiGHS could not load the model: {e}")))?;
    set(&mut m, "output_flag", false)?;
    set(&mut m, "threads", 1)?;
    set(&mut m, "parallel", "off")?;
    set(&mut m, "random_seed", RANDOM_SEED)?;
    set(&mut m, "mip_rel_gap", 0.0)?;
    set(&mut m, "mip_abs_gap", MIP_ABS_GAP)?;
    if let Some(s) = seconds {
        set(&mut m, "time_limit", s)?;
    }
    if let Some(n) = node_limit {
        // `mip_max_nodes` is a HiGHS int; a budget beyond it is no limit
        // HiGHS can reach anyway.
        set(
            &mut m,
            "mip_max_nodes",
            i32::try_from(n).unwrap_or(i32::MAX),
        )?;
    }
    if let Some(w) = warm {
        m.try_set_solution(Some(w), None, None, None)
            .map_err(|e| RawError::Other(format!("HiGHS rejected the warm start: {e:?}")))?;
    }
    let solved = m
        .try_solve()
        .map_err(|e| RawError::Other(format!("HiGHS failed to run: {e:?}")))?;
    let status = solved.status();
    let has_solution = solved.primal_solution_status() == HighsSolutionStatus::Feasible;
    // The returned values rounded to integers (the caller reads them the
    // same way), their exact objective, and HiGHS's dual bound.
    let answer = || {
        let values: Vec<f64> = solved
            .get_solution()
            .columns()
            .iter()
            .map(|x| x.round())
            .collect();
        let value: f64 = objective.iter().map(|&(v, c)| c * values[v]).sum();
        let bound = solved
            .double_info_value(c"mip_dual_bound")
            .unwrap_or(f64::NEG_INFINITY);
        (values, value, bound)
    };
    match status {
        HighsModelStatus::Optimal if has_solution => {
            let (values, value, bound) = answer();
            if value - bound < 1.0 {
                Ok(Attempt::Answer(RawSolution {
                    values,
                    optimal: true,
                    // Proved exact (module docs): the value is the bound.
                    bound: Some(value),
                }))
            } else {
                Ok(Attempt::Unproved { value, bound })
            }
        }
        HighsModelStatus::Infeasible => Err(RawError::Infeasible),
        // Every variable is bounded (binaries and fixings), so the model
        // cannot be unbounded: this status proves infeasibility here.
        HighsModelStatus::UnboundedOrInfeasible
            if model
                .bounds
                .iter()
                .all(|&(lo, hi)| lo.is_finite() && hi.is_finite()) =>
        {
            Err(RawError::Infeasible)
        }
        // Time limit; node limit (HiGHS reports `mip_max_nodes` as a
        // solution limit); iteration, memory and interrupt limits.
        HighsModelStatus::ReachedTimeLimit
        | HighsModelStatus::ReachedSolutionLimit
        | HighsModelStatus::ReachedIterationLimit
        | HighsModelStatus::ReachedMemoryLimit
        | HighsModelStatus::ReachedInterrupt => {
            if !has_solution {
                return Err(RawError::Limit(None));
            }
            let (values, _, bound) = answer();
            // The caller measures the gap of its best solution against it.
            Ok(Attempt::Answer(RawSolution {
                values,
                optimal: false,
                bound: bound.is_finite().then_some(bound),
            }))
        }
        other => Err(RawError::Other(format!(
            "HiGHS ended with model status {other:?} (primal solution {:?})",
            solved.primal_solution_status()
        ))),
    }
}

/// A model without variables (HiGHS reports it as an empty model rather
/// than solving it): feasible exactly when every row holds at zero.
fn empty(model: &Model) -> Result<RawSolution, RawError> {
    let holds = model.rows.iter().all(|(_, sense, rhs)| match sense {
        Sense::Le => 0.0 <= *rhs,
        Sense::Ge => 0.0 >= *rhs,
        Sense::Eq => *rhs == 0.0,
    });
    if holds {
        Ok(RawSolution {
            values: Vec::new(),
            optimal: true,
            bound: Some(0.0),
        })
    } else {
        Err(RawError::Infeasible)
    }
}
