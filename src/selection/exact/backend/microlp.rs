//! The microlp backend (the default build), driven directly.
//!
//! The model is handed to microlp as it is (integer variables in model
//! order, one constraint per row), so that every solve can use what
//! good_lp's wrapper does not expose together: the incumbent as a warm
//! start, the node budget, the time limit and, when a limit stops the
//! search, the best proven bound.

use super::{guarded, seconds_left, IlpLimits, Model, RawError, RawSolution, Sense};

/// One solve of `objective` over `model` with microlp.
pub(super) fn solve(
    model: &Model,
    objective: &[(usize, f64)],
    warm: Option<&[f64]>,
    limits: &IlpLimits,
) -> Result<RawSolution, RawError> {
    let seconds = seconds_left(limits.deadline)?;
    guarded("microlp", || {
        let mut coeff = vec![0.0; model.bounds.len()];
        for &(v, c) in objective {
            coeff[v] += c;
        }
        let mut p = microlp::Problem::new(microlp::OptimizationDirection::Minimize);
        let vars: Vec<microlp::Variable> = model
            .bounds
            .iter()
            .zip(&coeff)
            .map(|(&(lo, hi), &c)| p.add_integer_var(c, (lo.round() as i32, hi.round() as i32)))
            .collect();
        for (terms, sense, rhs) in &model.rows {
            let expr: microlp::LinearExpr = terms.iter().map(|&(v, c)| (vars[v], c)).collect();
            let op = match sense {
                Sense::Le => microlp::ComparisonOp::Le,
                Sense::Ge => microlp::ComparisonOp::Ge,
                Sense::Eq => microlp::ComparisonOp::Eq,
            };
            p.add_constraint(expr, op, *rhs);
        }
        let mut opts = microlp::SolveOptions::default();
        opts.node_limit = limits.node_limit;
        opts.time_limit = seconds.map(std::time::Duration::from_secs_f64);
        opts.warm_start = warm.map(|w| vars.iter().copied().zip(w.iter().copied()).collect());
        match p.solve_with(opts) {
            Ok(microlp::SolveOutcome::Solution(s)) => {
                let optimal = s.status() == microlp::SolutionStatus::Optimal;
                let values: Vec<f64> = s.iter().map(|(_, v)| v).collect();
                Ok(RawSolution {
                    values,
                    optimal,
                    bound: if optimal {
                        Some(s.objective())
                    } else {
                        s.stats().best_bound
                    },
                })
            }
            Ok(microlp::SolveOutcome::Interrupted(i)) => Err(RawError::Limit(i.stats().best_bound)),
            Err(microlp::Error::Infeasible) => Err(RawError::Infeasible),
            Err(e) => Err(RawError::Other(e.to_string())),
        }
    })
}
