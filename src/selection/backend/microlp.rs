//! The microlp backend, through good_lp (the default build).
//!
//! good_lp builds the model; a solve with a node budget drives microlp
//! directly on the model good_lp built (good_lp exposes no node budget).
//! microlp has panicked on some inputs in the past, so a panic is caught
//! and reported as a backend error rather than taking the planner down.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use good_lp::{variable, Expression, ProblemVariables, ResolutionError, Solution, SolverModel};
use good_lp::{WithInitialSolution, WithTimeLimit};

use super::{Model, RawError, RawSolution, Sense};
use crate::selection::ilp::IlpLimits;

/// One solve of `objective` over `model` with microlp.
pub(super) fn solve(
    model: &Model,
    objective: &[(usize, f64)],
    warm: Option<&[f64]>,
    limits: &IlpLimits,
) -> Result<RawSolution, RawError> {
    let seconds = match limits.deadline {
        Some(d) => {
            let left = d.saturating_duration_since(Instant::now()).as_secs_f64();
            if left <= 0.0 {
                return Err(RawError::Limit);
            }
            Some(left)
        }
        None => None,
    };
    let run = || -> Result<RawSolution, RawError> {
        let mut pv = ProblemVariables::new();
        let vars: Vec<good_lp::Variable> = model
            .bounds
            .iter()
            .map(|&(lo, hi)| pv.add(variable().integer().clamp(lo, hi)))
            .collect();
        let mut obj = Expression::with_capacity(objective.len());
        for &(v, c) in objective {
            obj.add_mul(c, vars[v]);
        }
        let mut m = pv.minimise(obj).using(good_lp::microlp);
        for (terms, sense, rhs) in &model.rows {
            let mut e = Expression::with_capacity(terms.len());
            for &(v, c) in terms {
                e.add_mul(c, vars[v]);
            }
            let con = match sense {
                Sense::Le => e.leq(*rhs),
                Sense::Ge => e.geq(*rhs),
                Sense::Eq => e.eq(*rhs),
            };
            m.add_constraint(con);
        }
        if let Some(node_limit) = limits.node_limit {
            // good_lp exposes no node budget: drive microlp directly on the
            // model good_lp built (same variables, same order).
            let mut opts = microlp::SolveOptions::default();
            opts.node_limit = Some(node_limit);
            opts.time_limit = seconds.map(std::time::Duration::from_secs_f64);
            return match m.as_inner().solve_with(opts) {
                Ok(microlp::SolveOutcome::Solution(s)) => {
                    let optimal = s.status() == microlp::SolutionStatus::Optimal;
                    let gap = s.gap();
                    let values: Vec<f64> = s.iter().map(|(_, v)| v).collect();
                    Ok(RawSolution {
                        values,
                        optimal,
                        gap: if optimal { Some(0.0) } else { gap },
                    })
                }
                Ok(microlp::SolveOutcome::Interrupted(_)) => Err(RawError::Limit),
                Err(microlp::Error::Infeasible) => Err(RawError::Infeasible),
                Err(e) => Err(RawError::Other(e.to_string())),
            };
        }
        if let Some(s) = seconds {
            m = m.with_time_limit(s);
        }
        if let Some(w) = warm {
            m = m.with_initial_solution(vars.iter().copied().zip(w.iter().copied()));
        }
        match m.solve() {
            Ok(sol) => {
                let optimal = matches!(sol.status(), good_lp::SolutionStatus::Optimal);
                let values = vars.iter().map(|&v| sol.value(v)).collect();
                Ok(RawSolution {
                    values,
                    optimal,
                    // good_lp's microlp solution carries no bound.
                    gap: if optimal { Some(0.0) } else { None },
                })
            }
            Err(ResolutionError::Infeasible) => Err(RawError::Infeasible),
            // A time-limited microlp solve that found nothing comes back as
            // `Other`, and so may a time-limited infeasible one: never read it
            // as infeasibility.
            Err(ResolutionError::Other(msg)) if seconds.is_some() => {
                let _ = msg;
                Err(RawError::Limit)
            }
            Err(e) => Err(RawError::Other(e.to_string())),
        }
    };
    match catch_unwind(AssertUnwindSafe(run)) {
        Ok(r) => r,
        Err(_) => Err(RawError::Other("the MILP backend panicked".into())),
    }
}
