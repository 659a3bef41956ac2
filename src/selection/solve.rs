//! Orchestration: components in parallel, presolve, identical-part reuse,
//! the integer program or the frontier, the check, and the output object.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rayon::prelude::*;

use crate::selection::certify::certificate::{compare_with_dp, conflict_set, describe, recheck};
use crate::selection::error::SelectionError;
use crate::selection::exact::backend::Backend;
use crate::selection::exact::elimination::ELIMINATION_BUDGET;
use crate::selection::exact::frontier::{closure_state_bound, frontier, DpOutcome, Mode};
use crate::selection::exact::ilp::{IlpLimits, IlpOutcome};
use crate::selection::exact::part_method::PartMethod;
use crate::selection::exact::strategy::{
    PartResult, PartSolver, PROVIDER_SEARCH_STEPS, SUBPART_FRONTIER_STATES,
};
use crate::selection::model::objective::{Level, Objective, SeedLex, Weights};
use crate::selection::model::problem::{best_rank, Instance, SelectionProblem};
use crate::selection::model::progress::{PartReporter, SolveObserver, SolveProgress};
use crate::selection::model::solution::{
    ComponentReport, PresolveReport, Solution, Status, Summary, TimeSums,
};
use crate::selection::reduce::components::{instance_components, Comp};
use crate::selection::reduce::presolve::{presolve, Part, PresolveStats, Presolved};

/// The default state budget of the frontier check.
pub const DEFAULT_DP_STATE_BUDGET: u64 = 250_000;

/// Which method solves a component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Method {
    /// The integer program (after presolve), checked by the closure frontier
    /// within its budget.
    #[default]
    Ilp,
    /// The closure frontier alone; fails if it exceeds its budget.
    Dp,
    /// The closure frontier where its state bound (from the cut structure)
    /// fits the budget, the integer program otherwise.
    Auto,
}

/// Options of [`solve`].
#[derive(Debug, Clone)]
pub struct SolveOptions {
    /// The objective (default `seed-lex`).
    pub objective: Arc<dyn Objective>,
    /// The method.
    pub method: Method,
    /// Maximum number of states the frontier may create per component.
    pub dp_state_budget: u64,
    /// Branch-and-bound node budget of each integer-program solve.
    pub node_limit: Option<u64>,
    /// Wall-clock limit of the whole solve, counted from its start: every
    /// integer-program solve and provider-id search stops at it and the best
    /// solution found is returned with status `feasible` and a gap.
    pub time_limit: Option<Duration>,
    /// Report real seconds (`false`: every `seconds` is 0.0, so the output is
    /// byte-identical across runs).
    pub timings: bool,
    /// Run presolve before the integer program (on by default; off only to
    /// test presolve's exactness).
    pub presolve: bool,
    /// The MILP backend of the integer program (microlp by default).
    pub backend: Backend,
    /// After presolve, a sub-part whose closure state bound is at most this
    /// many states is solved by the exact closure frontier instead of the
    /// integer program (default 20,000; 0 sends every sub-part to the
    /// integer program, to study or test that path).
    pub subpart_dp_states: u64,
    /// Settle leading count levels at their best possible value by
    /// re-checked witnesses and solve the restricted part (on by default;
    /// off only to study or test the paths it bypasses; docs/solver.md).
    pub settle_counts: bool,
    /// Solve the levels before the provider ids without the candidates
    /// that cannot change them (prefix dominance), then choose the provider
    /// ids on the whole part (on by default; off only to study or test the
    /// paths it bypasses; docs/solver.md).
    pub prefix_dominance: bool,
    /// Candidate trials of the provider-id depth-first search before the
    /// provider ids are decided by probing (with prefix dominance) or by the
    /// integer program (default 20,000; 0 sends every part to the
    /// fallback, to test it; docs/solver.md).
    pub provider_search_steps: u64,
    /// Combinations variable elimination over a tree decomposition may
    /// visit on one part whose remaining levels are all sums (every level
    /// before the provider ids); a part that needs more goes to the
    /// frontier try and the integer program (default 16,777,216 = 2^24; 0
    /// never eliminates, to test the paths it bypasses; docs/solver.md).
    pub elimination_budget: u64,
    /// Whether candidates in no optimum of a leading run of levels are set
    /// aside, found by elimination within the same budget (on by default;
    /// off to test the paths it bypasses; docs/solver.md, "Optimal
    /// supports").
    pub optimal_supports: bool,
    /// Whether candidates that the reduced costs of the first level's dual
    /// bound rule out against an incumbent are set aside (on by default;
    /// off to test the paths it bypasses; docs/solver.md, "Reduced costs
    /// of a dual bound").
    pub reduced_costs: bool,
    /// Told what the solve is doing (a progress display; none by default).
    /// It only watches: the solution does not depend on it.
    pub observer: Option<SolveObserver>,
}

impl Default for SolveOptions {
    fn default() -> Self {
        SolveOptions {
            objective: Arc::new(SeedLex),
            method: Method::Ilp,
            dp_state_budget: DEFAULT_DP_STATE_BUDGET,
            node_limit: None,
            time_limit: None,
            timings: true,
            presolve: true,
            backend: Backend::Microlp,
            subpart_dp_states: SUBPART_FRONTIER_STATES,
            settle_counts: true,
            prefix_dominance: true,
            provider_search_steps: PROVIDER_SEARCH_STEPS,
            elimination_budget: ELIMINATION_BUDGET,
            optimal_supports: true,
            reduced_costs: true,
            observer: None,
        }
    }
}

/// A finished component.
struct Done {
    choice: Vec<usize>,
    report: ComponentReport,
}

/// A component waiting for its integer program.
struct Pending {
    comp: Comp,
    dp: (DpOutcome, u64),
    fixed: Vec<(usize, usize)>,
    parts: Vec<Part>,
    stats: PresolveStats,
    elapsed: Duration,
}

enum PhaseA {
    Done(Box<Done>),
    Pending(Box<Pending>),
    Failed(SelectionError),
}

struct Ctx<'a> {
    inst: &'a Instance,
    levels: Vec<Level>,
    weights: Option<&'a Weights>,
    free_rank: Vec<bool>,
    opts: &'a SolveOptions,
    /// When `--time-limit` runs out, counted from the start of the solve.
    deadline: Option<Instant>,
}

/// Solves a selection problem.
///
/// Components are solved in parallel on the current rayon pool and joined in
/// component order; the result does not depend on the number of threads.
pub fn solve(
    problem: &SelectionProblem,
    options: &SolveOptions,
) -> Result<Solution, SelectionError> {
    let deadline = options.time_limit.map(|d| Instant::now() + d);
    let (inst, weights) =
        crate::selection::model::problem::prepare(problem, options.objective.as_ref())?;
    let levels = options.objective.levels(inst.profiles.len());
    // A rank is free when no level charges it: not a rank-count level of
    // its own, and no weight in a weighted level (whose tie-breaks may still
    // count it).
    let free_rank: Vec<bool> = (0..inst.profiles.len())
        .map(|k| {
            levels.iter().all(|l| match *l {
                Level::RankCount(j) => j != k,
                Level::Weighted => weights.as_ref().is_none_or(|w| w.ranks[k] == 0),
                _ => true,
            })
        })
        .collect();
    let ctx = Ctx {
        inst: &inst,
        levels,
        weights: weights.as_ref(),
        free_rank,
        opts: options,
        deadline,
    };
    let comps = instance_components(&inst);
    let first_node = |ci: usize| inst.nodes[comps[ci][0] as usize].id.clone();

    // Phase A: per component, the frontier where it is the method, else presolve.
    let phase_a: Vec<PhaseA> = comps
        .par_iter()
        .enumerate()
        .map(|(ci, nodes)| phase_a(&ctx, ci, nodes))
        .collect();

    // Phase B: identical parts are solved once.
    let mut unique: BTreeMap<Vec<u64>, usize> = BTreeMap::new();
    let mut jobs: Vec<(usize, usize)> = Vec::new(); // (component, part)
    for (ci, a) in phase_a.iter().enumerate() {
        if let PhaseA::Pending(p) = a {
            for (pi, part) in p.parts.iter().enumerate() {
                if !unique.contains_key(part.signature.as_slice()) {
                    unique.insert(part.signature.clone(), jobs.len());
                    jobs.push((ci, pi));
                }
            }
        }
    }
    let report = |event: SolveProgress| {
        if let Some(o) = &ctx.opts.observer {
            o.report(&event);
        }
    };
    report(SolveProgress::Queued {
        components: comps.len(),
        parts: jobs.len(),
    });
    // The parts and the frontier checks of pending components run side by
    // side on the pool; neither reads the other, so the joined result is the
    // same as if they ran one after the other.
    let checks = || -> Vec<(usize, (DpOutcome, u64), Duration)> {
        phase_a
            .par_iter()
            .enumerate()
            .filter_map(|(ci, a)| match a {
                PhaseA::Pending(p) => {
                    let t = Instant::now();
                    // Decide from the cut structure before running: the
                    // bound is an upper bound on the states the closure
                    // frontier creates, so a component within it is checked
                    // to the end; one beyond it is not run at all (it would
                    // only spend the budget) and is certified by what its
                    // solve proved (phase C says which).
                    let bound = closure_state_bound(&p.comp);
                    let budget = ctx.opts.dp_state_budget;
                    if bound > budget {
                        let reason = format!(
                            "not run: the closure state bound {bound} (from the cut structure) exceeds the budget of {budget} states"
                        );
                        return Some((ci, (DpOutcome::Skipped(reason), 0), t.elapsed()));
                    }
                    let (dp, stats) = frontier(
                        &p.comp,
                        &ctx.levels,
                        ctx.weights,
                        Mode::Closure,
                        ctx.opts.dp_state_budget,
                    );
                    Some((ci, (dp, stats.states), t.elapsed()))
                }
                _ => None,
            })
            .collect()
    };
    let parts = || -> Vec<(Result<PartResult, String>, Duration)> {
        jobs.par_iter()
            .enumerate()
            .map(|(job, &(ci, pi))| {
                let PhaseA::Pending(p) = &phase_a[ci] else {
                    return (
                        Err("internal: job of a finished component".into()),
                        Duration::ZERO,
                    );
                };
                let part = &p.parts[pi];
                report(SolveProgress::PartStarted {
                    part: job,
                    nodes: part.comp.nodes.len(),
                });
                let t = Instant::now();
                let solver = PartSolver {
                    inst: ctx.inst,
                    levels: &ctx.levels,
                    weights: ctx.weights,
                    free_rank: &ctx.free_rank,
                    limits: IlpLimits {
                        deadline: ctx.deadline,
                        node_limit: ctx.opts.node_limit,
                        backend: ctx.opts.backend,
                        progress: ctx.opts.observer.as_ref().map(|o| PartReporter {
                            observer: o.clone(),
                            part: job,
                        }),
                    },
                    subpart_dp_states: ctx.opts.subpart_dp_states,
                    settle_counts: ctx.opts.settle_counts,
                    prefix_dominance: ctx.opts.prefix_dominance,
                    provider_search_steps: ctx.opts.provider_search_steps,
                    elimination_budget: ctx.opts.elimination_budget,
                    optimal_supports: ctx.opts.optimal_supports,
                    reduced_costs: ctx.opts.reduced_costs,
                    refused: Default::default(),
                };
                let r = solver.solve_part(&part.comp, None);
                let spent = t.elapsed();
                report(SolveProgress::PartFinished { part: job });
                (r, spent)
            })
            .collect()
    };
    let (results, checks) = rayon::join(parts, checks);
    let mut phase_a = phase_a;
    for (ci, dp, spent) in checks {
        if let PhaseA::Pending(p) = &mut phase_a[ci] {
            p.dp = dp;
            p.elapsed += spent;
        }
    }

    // Phase C: assemble, re-check, compare with the frontier.
    let finished: Vec<Result<Done, SelectionError>> = phase_a
        .into_par_iter()
        .enumerate()
        .map(|(ci, a)| {
            let done = match a {
                PhaseA::Done(d) => Ok(*d),
                PhaseA::Failed(e) => Err(e),
                PhaseA::Pending(p) => {
                    phase_c(&ctx, ci, &first_node(ci), *p, &unique, &jobs, &results)
                }
            };
            if let Ok(d) = &done {
                report(SolveProgress::ComponentFinished {
                    component: ci,
                    nodes: d.report.nodes,
                    status: d.report.status,
                });
            }
            done
        })
        .collect();

    let mut choices = BTreeMap::new();
    let mut reports = Vec::with_capacity(comps.len());
    let mut chosen: Vec<usize> = vec![usize::MAX; inst.nodes.len()];
    for (ci, f) in finished.into_iter().enumerate() {
        let d = f?;
        for (pos, &g) in comps[ci].iter().enumerate() {
            chosen[g as usize] = d.choice[pos];
        }
        reports.push(d.report);
    }
    // Profiles, recomputed from the chosen candidates over the whole problem.
    let mut masks: BTreeMap<u32, u64> = BTreeMap::new();
    let mut preferred_met = 0;
    for (g, node) in inst.nodes.iter().enumerate() {
        let cand = &node.cands[chosen[g]];
        choices.insert(node.id.clone(), cand.provider.clone());
        preferred_met += usize::from(cand.preferred);
        for &(r, m) in &cand.res {
            *masks.entry(r).or_insert(u64::MAX) &= m;
        }
    }
    let mut penalty_by_rank = vec![0usize; inst.profiles.len()];
    let mut profiles = BTreeMap::new();
    let has_time = problem.profile_time_ps.values().next().is_some()
        || inst
            .nodes
            .iter()
            .any(|n| n.cands.iter().any(|c| c.time != Default::default()));
    let mut time = TimeSums::default();
    let mut add = |t: &crate::selection::model::problem::TimeCosts| {
        time.tpot += u128::from(t.tpot.unwrap_or(0));
        time.ttft += u128::from(t.ttft.unwrap_or(0));
        time.throughput += u128::from(t.throughput.unwrap_or(0));
    };
    for (g, node) in inst.nodes.iter().enumerate() {
        add(&node.cands[chosen[g]].time);
    }
    for (r, m) in masks {
        if m == 0 {
            return Err(SelectionError::Disagreement {
                component: 0,
                first_node: String::new(),
                details: format!(
                    "resource `{}` has no common profile in the joined solution",
                    inst.resources[r as usize]
                ),
            });
        }
        let k = best_rank(m);
        penalty_by_rank[k] += 1;
        let at = |l: &Option<Vec<u64>>| l.as_ref().and_then(|l| l.get(k).copied());
        let rt = &inst.res_times[r as usize];
        add(&crate::selection::model::problem::TimeCosts {
            tpot: at(&rt.tpot),
            ttft: at(&rt.ttft),
            throughput: at(&rt.throughput),
        });
        profiles.insert(inst.resources[r as usize].clone(), inst.profiles[k].clone());
    }
    let status = if reports.iter().all(|r| r.status == Status::Optimal) {
        Status::Optimal
    } else {
        Status::Feasible
    };
    Ok(Solution {
        status,
        objective: options.objective.name().to_string(),
        choices,
        profiles,
        summary: Summary {
            nodes: inst.nodes.len(),
            components: comps.len(),
            preferred_met,
            penalty_by_rank,
            unusable_candidates: inst.unusable.clone(),
            time_ps: has_time.then_some(time),
        },
        components: reports,
    })
}

fn seconds(ctx: &Ctx, d: Duration) -> f64 {
    if ctx.opts.timings {
        d.as_secs_f64()
    } else {
        0.0
    }
}

fn infeasible(ctx: &Ctx, ci: usize, comp: &Comp, explanation: Option<String>) -> SelectionError {
    let explanation = explanation.unwrap_or_else(|| conflict_set(ctx.inst, comp, 200));
    SelectionError::Infeasible {
        component: ci,
        first_node: ctx.inst.nodes[comp.nodes[0].global as usize].id.clone(),
        explanation,
    }
}

fn phase_a(ctx: &Ctx, ci: usize, nodes: &[u32]) -> PhaseA {
    let t = Instant::now();
    let comp = Comp::from_instance(ctx.inst, nodes);
    let first = ctx.inst.nodes[nodes[0] as usize].id.clone();
    let budget = ctx.opts.dp_state_budget;
    let use_dp = match ctx.opts.method {
        Method::Dp => true,
        Method::Auto => closure_state_bound(&comp) <= budget,
        Method::Ilp => false,
    };
    if use_dp {
        let (dp, dp_stats) = frontier(&comp, &ctx.levels, ctx.weights, Mode::Closure, budget);
        return match dp {
            DpOutcome::Optimal(choice) => {
                if let Err(m) = recheck(&comp, &choice) {
                    return PhaseA::Failed(SelectionError::Disagreement {
                        component: ci,
                        first_node: first,
                        details: format!("{m}: {}", describe(ctx.inst, &comp, &choice)),
                    });
                }
                PhaseA::Done(Box::new(Done {
                    report: ComponentReport {
                        nodes: comp.nodes.len(),
                        resources: comp.nres(),
                        method: "dp".into(),
                        check: "dp-agrees".into(),
                        seconds: seconds(ctx, t.elapsed()),
                        first_node: first,
                        status: Status::Optimal,
                        gap: None,
                        certificate: format!(
                            "closure frontier is exact ({} states); re-check: feasible, objective recomputed",
                            dp_stats.states
                        ),
                        presolve: None,
                    },
                    choice,
                }))
            }
            DpOutcome::Infeasible => PhaseA::Failed(infeasible(ctx, ci, &comp, None)),
            DpOutcome::Skipped(reason) => PhaseA::Failed(SelectionError::Solver {
                component: ci,
                first_node: first,
                message: format!("{reason}; raise --dp-state-budget or use --solver ilp"),
            }),
        };
    }
    let (fixed, parts, stats) = if ctx.opts.presolve {
        match presolve(ctx.inst, &comp, &ctx.free_rank) {
            Presolved::Infeasible(expl) => {
                // Rare: cross-check the refutation with the frontier now.
                let (dp, _) = frontier(&comp, &ctx.levels, ctx.weights, Mode::Closure, budget);
                if let DpOutcome::Optimal(choice) = &dp {
                    return PhaseA::Failed(SelectionError::Disagreement {
                        component: ci,
                        first_node: first,
                        details: format!(
                            "presolve proved the component infeasible ({expl}) but the frontier found {}",
                            describe(ctx.inst, &comp, choice)
                        ),
                    });
                }
                return PhaseA::Failed(infeasible(ctx, ci, &comp, Some(expl)));
            }
            Presolved::Reduced {
                fixed,
                parts,
                stats,
            } => (fixed, parts, stats),
        }
    } else {
        let positions: Vec<usize> = (0..comp.nodes.len()).collect();
        let part = Part {
            comp: comp.clone(),
            positions,
            signature: Vec::new(),
        };
        (Vec::new(), vec![part], PresolveStats::default())
    };
    let mut parts = parts;
    if !ctx.opts.presolve {
        // Without presolve every component is its own job.
        parts[0].signature = vec![u64::MAX, ci as u64];
    }
    PhaseA::Pending(Box::new(Pending {
        comp,
        dp: (DpOutcome::Skipped("the check did not run".into()), 0),
        fixed,
        parts,
        stats,
        elapsed: t.elapsed(),
    }))
}

#[allow(clippy::too_many_arguments)]
fn phase_c(
    ctx: &Ctx,
    ci: usize,
    first: &str,
    p: Pending,
    unique: &BTreeMap<Vec<u64>, usize>,
    jobs: &[(usize, usize)],
    results: &[(Result<PartResult, String>, Duration)],
) -> Result<Done, SelectionError> {
    let t = Instant::now();
    let fail = |m: String| SelectionError::Solver {
        component: ci,
        first_node: first.to_string(),
        message: m,
    };
    let mut choice = vec![usize::MAX; p.comp.nodes.len()];
    for &(pos, c) in &p.fixed {
        choice[pos] = c;
    }
    let mut solves = 0usize;
    let mut how = PartMethod::default();
    let mut spent = Duration::ZERO;
    let mut stopped: Vec<String> = Vec::new();
    let mut gap: Option<f64> = None;
    let mut reused = 0usize;
    let mut any_infeasible = false;
    for (pi, part) in p.parts.iter().enumerate() {
        let Some(&job) = unique.get(part.signature.as_slice()) else {
            return Err(fail("internal: part without a job".into()));
        };
        let own_job = jobs[job] == (ci, pi);
        if !own_job {
            reused += 1;
        }
        let (res, d) = &results[job];
        if own_job {
            spent += *d;
        }
        let res = match res {
            Err(m) => return Err(fail(m.clone())),
            Ok(r) => r,
        };
        if own_job {
            how.add(&res.method);
        }
        match &res.outcome {
            IlpOutcome::Infeasible => any_infeasible = true,
            IlpOutcome::Solved {
                choice: local,
                solves: s,
                stopped: st,
                gap: g,
            } => {
                if own_job {
                    solves += s;
                }
                if let Some(st) = st {
                    stopped.push(st.clone());
                    gap = *g;
                }
                for (j, &pos) in part.positions.iter().enumerate() {
                    let orig = part.comp.nodes[j].cands[local[j]].orig;
                    match p.comp.nodes[pos].cands.iter().position(|c| c.orig == orig) {
                        Some(c) => choice[pos] = c,
                        None => return Err(fail("internal: unknown candidate in a part".into())),
                    }
                }
            }
        }
    }
    let dp_outcome = &p.dp.0;
    if any_infeasible {
        if let DpOutcome::Optimal(dc) = dp_outcome {
            return Err(SelectionError::Disagreement {
                component: ci,
                first_node: first.to_string(),
                details: format!(
                    "the integer program proved the component infeasible but the frontier found {}",
                    describe(ctx.inst, &p.comp, dc)
                ),
            });
        }
        return Err(infeasible(ctx, ci, &p.comp, None));
    }
    if choice.contains(&usize::MAX) {
        return Err(fail("internal: a node was left unassigned".into()));
    }
    let disagreement = |details: String| SelectionError::Disagreement {
        component: ci,
        first_node: first.to_string(),
        details,
    };
    recheck(&p.comp, &choice)
        .map_err(|m| disagreement(format!("{m}: {}", describe(ctx.inst, &p.comp, &choice))))?;
    let limited = !stopped.is_empty();
    let nparts = p.parts.len();
    let ilp_cert = if nparts == 0 {
        "presolve fixed every node".to_string()
    } else if limited {
        format!(
            "none: a limit stopped the integer program at {}",
            stopped.join(", ")
        )
    } else {
        format!("{} ({nparts} parts)", how.describe())
    };
    let label = if nparts == 0 { "presolve" } else { how.label() };
    let (method, check, status, final_choice, certificate) = match dp_outcome {
        DpOutcome::Optimal(dc) if limited => {
            // The frontier's answer is exact; the interrupted program's is not.
            (
                "dp",
                "dp-agrees".to_string(),
                Status::Optimal,
                dc.clone(),
                format!(
                    "closure frontier is exact ({} states); the integer program was interrupted",
                    p.dp.1
                ),
            )
        }
        DpOutcome::Optimal(dc) => {
            compare_with_dp(ctx.inst, &p.comp, &ctx.levels, ctx.weights, &choice, dc)
                .map_err(disagreement)?;
            (
                label,
                "dp-agrees".to_string(),
                Status::Optimal,
                choice,
                format!("{ilp_cert}; re-check: feasible, objective recomputed"),
            )
        }
        DpOutcome::Infeasible => {
            return Err(disagreement(format!(
                "the frontier proved the component infeasible but the integer program found {}",
                describe(ctx.inst, &p.comp, &choice)
            )));
        }
        DpOutcome::Skipped(reason) => (
            label,
            format!("dp-skipped: {reason}; certificate: {ilp_cert}"),
            if limited {
                Status::Feasible
            } else {
                Status::Optimal
            },
            choice,
            format!("{ilp_cert}; re-check: feasible, objective recomputed"),
        ),
    };
    Ok(Done {
        report: ComponentReport {
            nodes: p.comp.nodes.len(),
            resources: p.comp.nres(),
            method: method.into(),
            check,
            seconds: seconds(ctx, p.elapsed + spent + t.elapsed()),
            first_node: first.to_string(),
            status,
            gap: if status == Status::Optimal { None } else { gap },
            certificate,
            presolve: ctx.opts.presolve.then_some(PresolveReport {
                propagated: p.stats.propagated,
                dominated: p.stats.dominated,
                settled: p.stats.settled,
                fixed: p.stats.fixed,
                parts: nparts,
                reused,
            }),
        },
        choice: final_choice,
    })
}
