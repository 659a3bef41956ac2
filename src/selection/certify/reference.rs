//! Whole-problem oracles for tests and benchmarks: the frontier searches and
//! brute force, independent of presolve and of the integer program.

use std::collections::BTreeMap;

use crate::selection::error::SelectionError;
use crate::selection::exact::frontier::{frontier, DpOutcome, Mode};
use crate::selection::model::objective::{compare_scores, Objective};
use crate::selection::model::problem::{Instance, SelectionProblem};
use crate::selection::reduce::components::Comp;

/// Which frontier search [`frontier_solve`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrontierKind {
    /// The reference search: the state is every resource seen so far.
    Reference,
    /// The closure search: a resource leaves the state after its last toucher.
    Closure,
}

/// The answer of an oracle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrontierResult {
    /// The optimum: chosen provider per node id.
    Optimal(BTreeMap<String, String>),
    /// No selection exists.
    Infeasible,
    /// The search exceeded its state budget.
    Skipped(String),
}

fn choices_of(inst: &Instance, comp: &Comp, choice: &[usize]) -> BTreeMap<String, String> {
    comp.nodes
        .iter()
        .zip(choice)
        .map(|(n, &c)| {
            let node = &inst.nodes[n.global as usize];
            (
                node.id.clone(),
                node.cands[n.cands[c].orig as usize].provider.clone(),
            )
        })
        .collect()
}

fn whole(inst: &Instance) -> Comp {
    let all: Vec<u32> = (0..inst.nodes.len() as u32).collect();
    Comp::from_instance(inst, &all)
}

/// Runs a frontier search over the whole problem (all components at once) to
/// `objective`, with a budget of `budget` states.
pub fn frontier_solve(
    problem: &SelectionProblem,
    objective: &dyn Objective,
    kind: FrontierKind,
    budget: u64,
) -> Result<FrontierResult, SelectionError> {
    let (inst, weights) = crate::selection::model::problem::prepare(problem, objective)?;
    let comp = whole(&inst);
    let mode = match kind {
        FrontierKind::Reference => Mode::Reference,
        FrontierKind::Closure => Mode::Closure,
    };
    let levels = objective.levels(inst.profiles.len());
    Ok(
        match frontier(&comp, &levels, weights.as_ref(), mode, budget).0 {
            DpOutcome::Optimal(c) => FrontierResult::Optimal(choices_of(&inst, &comp, &c)),
            DpOutcome::Infeasible => FrontierResult::Infeasible,
            DpOutcome::Skipped(r) => FrontierResult::Skipped(r),
        },
    )
}

/// Enumerates every selection of the whole problem (at most `limit`
/// combinations, else `Skipped`) and returns the best under `objective`.
pub fn brute_force(
    problem: &SelectionProblem,
    objective: &dyn Objective,
    limit: u64,
) -> Result<FrontierResult, SelectionError> {
    let (inst, weights) = crate::selection::model::problem::prepare(problem, objective)?;
    let comp = whole(&inst);
    let total = comp
        .nodes
        .iter()
        .try_fold(1u64, |acc, n| acc.checked_mul(n.cands.len() as u64));
    match total {
        Some(t) if t <= limit => {}
        _ => return Ok(FrontierResult::Skipped("too many combinations".into())),
    }
    let levels = objective.levels(inst.profiles.len());
    let mut choice = vec![0usize; comp.nodes.len()];
    let mut best: Option<(Vec<usize>, crate::selection::reduce::components::Score)> = None;
    loop {
        if let Some(s) = comp.evaluate_local(&choice) {
            let better = match &best {
                None => true,
                Some((_, b)) => {
                    compare_scores(&levels, weights.as_ref(), &s, b) == std::cmp::Ordering::Less
                }
            };
            if better {
                best = Some((choice.clone(), s));
            }
        }
        // Next combination (odometer).
        let mut i = 0;
        loop {
            if i == choice.len() {
                return Ok(match best {
                    Some((c, _)) => FrontierResult::Optimal(choices_of(&inst, &comp, &c)),
                    None => FrontierResult::Infeasible,
                });
            }
            choice[i] += 1;
            if choice[i] < comp.nodes[i].cands.len() {
                break;
            }
            choice[i] = 0;
            i += 1;
        }
    }
}
