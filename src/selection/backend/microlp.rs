//! The microlp backend, through good_lp (the default build).
//!
//! good_lp builds the model; a solve with a node budget drives microlp
//! directly on the model good_lp built (good_lp exposes no node budget).

use good_lp::{ResolutionError, Solution, SolverModel};
use good_lp::{WithInitialSolution, WithTimeLimit};

use super::{good_lp_model, guarded, seconds_left, Model, RawError, RawSolution};
use crate::selection::ilp::IlpLimits;

/// One solve of `objective` over `model` with microlp.
pub(super) fn solve(
    model: &Model,
    objective: &[(usize, f64)],
    warm: Option<&[f64]>,
    limits: &IlpLimits,
) -> Result<RawSolution, RawError> {
    let seconds = seconds_left(limits.deadline)?;
    guarded("microlp", || {
        let (pv, vars, obj, rows) = good_lp_model(model, objective);
        let mut m = pv.minimise(obj).using(good_lp::microlp);
        for con in rows {
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
    })
}
