//! The integer program, solved level by level with good_lp and microlp.
//!
//! Variables: one-hot `x[n][c]` per node and candidate; `y[r][k]` per
//! resource and per profile rank that some candidate touching `r` accepts.
//! Constraints (the *aggregated* form):
//!
//! * `Σ_c x[n][c] = 1` for every node;
//! * `x[n][c] ≤ Σ_{k ∈ accepts(c, r)} y[r][k]` for every candidate and every
//!   resource it touches;
//! * `Σ_k y[r][k] ≤ 1` for every resource.
//!
//! A lexicographic objective is reached exactly by solving one integer
//! objective per level (or per chunk of a sequence level) and fixing what
//! each proves before the next; small integer weights only (at most 2^24 in
//! total), so every level objective is exact in `f64` and far above
//! microlp's pruning tolerance. An incumbent that already meets the best
//! possible value at a position settles it without a solve. See
//! docs/solver.md for the proof.

pub(crate) use crate::selection::exact::backend::IlpLimits;
use crate::selection::exact::backend::{solve_model, Model, RawError, Sense};
use crate::selection::exact::preference_groups::preference_groups;
use crate::selection::model::objective::{compare_scores, Level, Weights};
use crate::selection::reduce::components::{Comp, Score};

/// The largest total absolute objective coefficient of one level solve.
pub(crate) const MAX_MAGNITUDE: f64 = (1u64 << 24) as f64;

/// The result of the hierarchical integer program.
#[derive(Debug, Clone)]
pub(crate) enum IlpOutcome {
    /// A solution, optimal when `stopped` is `None`.
    Solved {
        /// One local candidate index per node.
        choice: Vec<usize>,
        /// Number of integer programs solved.
        solves: usize,
        /// Where a limit stopped the hierarchy, if it did.
        stopped: Option<String>,
        /// Relative gap of the interrupted level solve, where known.
        gap: Option<f64>,
    },
    /// The component has no solution (proved by the first solve).
    Infeasible,
}

struct Builder<'a> {
    comp: &'a Comp,
    /// First x variable of each node.
    xoff: Vec<usize>,
    /// y variables per resource: (rank, variable).
    yvars: Vec<Vec<(usize, usize)>>,
    /// y variables per rank.
    yrank: Vec<Vec<usize>>,
    model: Model,
}

impl<'a> Builder<'a> {
    fn new(comp: &'a Comp) -> Self {
        let mut xoff = Vec::with_capacity(comp.nodes.len());
        let mut nv = 0usize;
        for n in &comp.nodes {
            xoff.push(nv);
            nv += n.cands.len();
        }
        let mut ymask = vec![0u64; comp.nres()];
        for n in &comp.nodes {
            for c in &n.cands {
                for &(r, m) in &c.res {
                    ymask[r as usize] |= m;
                }
            }
        }
        let mut yvars = vec![Vec::new(); comp.nres()];
        let mut yrank = vec![Vec::new(); comp.profiles];
        for (r, &m) in ymask.iter().enumerate() {
            for (k, yr) in yrank.iter_mut().enumerate() {
                if m >> k & 1 == 1 {
                    yvars[r].push((k, nv));
                    yr.push(nv);
                    nv += 1;
                }
            }
        }
        let mut rows = Vec::new();
        for (i, n) in comp.nodes.iter().enumerate() {
            rows.push((
                (0..n.cands.len()).map(|c| (xoff[i] + c, 1.0)).collect(),
                Sense::Eq,
                1.0,
            ));
            for (c, cand) in n.cands.iter().enumerate() {
                for &(r, m) in &cand.res {
                    let mut t = vec![(xoff[i] + c, 1.0)];
                    for &(k, v) in &yvars[r as usize] {
                        if m >> k & 1 == 1 {
                            t.push((v, -1.0));
                        }
                    }
                    rows.push((t, Sense::Le, 0.0));
                }
            }
        }
        for ys in &yvars {
            if ys.len() > 1 {
                rows.push((ys.iter().map(|&(_, v)| (v, 1.0)).collect(), Sense::Le, 1.0));
            }
        }
        Builder {
            comp,
            xoff,
            yvars,
            yrank,
            model: Model {
                bounds: vec![(0.0, 1.0); nv],
                rows,
            },
        }
    }

    fn x(&self, i: usize, c: usize) -> usize {
        self.xoff[i] + c
    }

    /// Variable values of a choice, with each used resource at its lowest
    /// accepted rank (a valid warm start).
    fn values_of(&self, choice: &[usize], score: &Score) -> Vec<f64> {
        let mut v = vec![0.0; self.model.bounds.len()];
        for (i, &c) in choice.iter().enumerate() {
            v[self.x(i, c)] = 1.0;
        }
        for (r, rank) in score.ranks.iter().enumerate() {
            if let Some(k) = rank {
                if let Some(&(_, var)) = self.yvars[r].iter().find(|(kk, _)| kk == k) {
                    v[var] = 1.0;
                }
            }
        }
        v
    }

    fn choice_of(&self, values: &[f64]) -> Result<Vec<usize>, String> {
        let mut out = Vec::with_capacity(self.comp.nodes.len());
        for (i, n) in self.comp.nodes.iter().enumerate() {
            let on: Vec<usize> = (0..n.cands.len())
                .filter(|&c| values[self.x(i, c)] > 0.5)
                .collect();
            if on.len() != 1 {
                return Err(format!(
                    "the MILP solution is not one-hot at component node {i} ({} candidates set)",
                    on.len()
                ));
            }
            out.push(on[0]);
        }
        Ok(out)
    }

    /// The value of `obj` at the variable values `values`.
    fn value_of(&self, obj: &[(usize, f64)], values: &[f64]) -> f64 {
        obj.iter().map(|&(v, c)| c * values[v]).sum()
    }

    /// The relative gap of a solution worth `value` on `obj`: against the
    /// backend's bound where it has one, and never weaker than the bound
    /// every binary model has (fixed variables at their value, each free
    /// one at its cheaper end). Objective values are integers, so the
    /// distance is measured in whole units over `max(|value|, 1)`.
    fn gap(&self, obj: &[(usize, f64)], value: f64, bound: Option<f64>) -> f64 {
        let trivial = self.trivial_bound(obj);
        // Integer objective values: a fractional bound rounds up.
        let lower = bound.map_or(trivial, |b| b.max(trivial));
        let lower = (lower - 1e-6).ceil();
        (value - lower).max(0.0) / value.abs().max(1.0)
    }

    /// The lower bound of `obj` every binary model has: fixed variables at
    /// their value, each free one at its cheaper end.
    fn trivial_bound(&self, obj: &[(usize, f64)]) -> f64 {
        obj.iter()
            .map(|&(v, c)| match self.fixed(v) {
                Some(true) => c,
                Some(false) => 0.0,
                None => c.min(0.0),
            })
            .sum()
    }

    fn fixed(&self, var: usize) -> Option<bool> {
        match self.model.bounds[var] {
            (lo, _) if lo > 0.5 => Some(true),
            (_, hi) if hi < 0.5 => Some(false),
            _ => None,
        }
    }

    fn fix(&mut self, var: usize, on: bool) {
        let v = if on { 1.0 } else { 0.0 };
        self.model.bounds[var] = (v, v);
    }
}

#[derive(Clone)]
struct Incumbent {
    choice: Vec<usize>,
    score: Score,
}

/// Solves `comp` to `levels` exactly (unless a limit stops it).
pub(crate) fn solve_ilp(
    comp: &Comp,
    levels: &[Level],
    weights: Option<&Weights>,
    limits: &IlpLimits,
    warm: Option<&[usize]>,
) -> Result<IlpOutcome, String> {
    solve_ilp_proved(comp, levels, weights, limits, warm, 0)
}

/// [`solve_ilp`] when `warm` is already proved optimal on the first
/// `proved` levels (lexicographically: each at its optimum given the ones
/// before): those levels add their rows at `warm`'s values without a solve,
/// exactly as if a solve had returned `warm`.
pub(crate) fn solve_ilp_proved(
    comp: &Comp,
    levels: &[Level],
    weights: Option<&Weights>,
    limits: &IlpLimits,
    warm: Option<&[usize]>,
    proved: usize,
) -> Result<IlpOutcome, String> {
    let mut b = Builder::new(comp);
    let mut inc: Option<Incumbent> = warm.and_then(|w| {
        comp.evaluate_local(w).map(|score| Incumbent {
            choice: w.to_vec(),
            score,
        })
    });
    let mut solves = 0usize;
    let pref_cand: Vec<Option<usize>> = comp
        .nodes
        .iter()
        .map(|n| n.cands.iter().position(|c| c.preferred))
        .collect();

    // One solve; validates the answer against the model's fixings and the
    // exact evaluation. `Ok(None)` means infeasible; a limit comes back with
    // the gap of the best solution known against the best bound known.
    enum Step {
        Solved(Incumbent, bool, Option<f64>),
        Limit(Option<f64>),
    }
    // The level being solved, for the progress observer only.
    let current = std::cell::Cell::new(None::<Level>);
    // Whether the level being solved is one of the proved ones.
    let at_proved = std::cell::Cell::new(false);
    let do_solve =
        |b: &Builder, obj: &[(usize, f64)], inc: &Option<Incumbent>, solves: &mut usize| {
            let mag: f64 = obj.iter().map(|(_, c)| c.abs()).sum();
            if mag > MAX_MAGNITUDE {
                return Err(format!(
                "a level objective needs total weight {mag}, above the exact limit {MAX_MAGNITUDE}"
            ));
            }
            if let (true, Some(known)) = (at_proved.get(), inc) {
                return Ok(Some(Step::Solved(known.clone(), true, None)));
            }
            let warm_values = inc.as_ref().map(|i| b.values_of(&i.choice, &i.score));
            let warm_value = warm_values.as_deref().map(|w| b.value_of(obj, w));
            *solves += 1;
            if let Some(p) = &limits.progress {
                p.level_started(current.get(), *solves, warm_value, b.trivial_bound(obj));
            }
            let result = solve_model(&b.model, obj, warm_values.as_deref(), limits);
            if let Some(p) = &limits.progress {
                p.level_solved(
                    current.get(),
                    *solves,
                    &result,
                    |v| b.value_of(obj, v),
                    warm_value,
                );
            }
            match result {
                Ok(raw) => {
                    let choice = b.choice_of(&raw.values)?;
                    for (i, &c) in choice.iter().enumerate() {
                        for cc in 0..comp.nodes[i].cands.len() {
                            if let Some(f) = b.fixed(b.x(i, cc)) {
                                if f != (cc == c) {
                                    return Err(format!(
                                        "the MILP solution violates a fixing at component node {i}"
                                    ));
                                }
                            }
                        }
                    }
                    let score = comp.evaluate_local(&choice).ok_or_else(|| {
                    "the MILP solution is infeasible on re-check (a resource has no common profile)"
                        .to_string()
                })?;
                    let new = Incumbent { choice, score };
                    let gap = (!raw.optimal).then(|| {
                        let v = b.value_of(obj, &b.values_of(&new.choice, &new.score));
                        let best = warm_value.map_or(v, |w| w.min(v));
                        b.gap(obj, best, raw.bound)
                    });
                    Ok(Some(Step::Solved(new, raw.optimal, gap)))
                }
                Err(RawError::Infeasible) => Ok(None),
                Err(RawError::Limit(bound)) => {
                    Ok(Some(Step::Limit(warm_value.map(|w| b.gap(obj, w, bound)))))
                }
                Err(RawError::Other(m)) => Err(m),
            }
        };

    // Handles a solve result; returns Err(stop) to leave the hierarchy.
    macro_rules! take {
        ($step:expr, $what:expr) => {
            match $step {
                None => {
                    if inc.is_none() {
                        return Ok(IlpOutcome::Infeasible);
                    }
                    return Err(format!(
                        "the MILP reported infeasible at {} although the incumbent satisfies every fixing",
                        $what
                    ));
                }
                Some(Step::Limit(gap)) => {
                    return finish(comp, levels, weights, inc, solves, Some($what.to_string()), gap);
                }
                Some(Step::Solved(new, optimal, gap)) => {
                    if !optimal {
                        let better = match &inc {
                            Some(old) => {
                                compare_scores(levels, weights, &new.score, &old.score)
                                    == std::cmp::Ordering::Less
                            }
                            None => true,
                        };
                        if better {
                            inc = Some(new);
                        }
                        return finish(comp, levels, weights, inc, solves, Some($what.to_string()), gap);
                    }
                    new
                }
            }
        };
    }

    for (li, level) in levels.iter().enumerate() {
        current.set(Some(*level));
        at_proved.set(li < proved);
        match *level {
            Level::PreferredLex => {
                let positions: Vec<usize> = (0..comp.nodes.len())
                    .filter(|&i| pref_cand[i].is_some())
                    .collect();
                let mut at = 0usize;
                while at < positions.len() {
                    let i = positions[at];
                    let Some(pc) = pref_cand[i] else {
                        at += 1;
                        continue;
                    };
                    let var = b.x(i, pc);
                    if b.fixed(var).is_some() {
                        at += 1;
                        continue;
                    }
                    if inc.as_ref().is_some_and(|s| s.choice[i] == pc) {
                        b.fix(var, true);
                        at += 1;
                        continue;
                    }
                    const K: usize = 20;
                    let chunk: Vec<(usize, usize)> = positions[at..]
                        .iter()
                        .filter_map(|&j| pref_cand[j].map(|p| (j, b.x(j, p))))
                        .filter(|&(_, v)| b.fixed(v).is_none())
                        .take(K)
                        .collect();
                    let k = chunk.len();
                    let obj: Vec<(usize, f64)> = chunk
                        .iter()
                        .enumerate()
                        .map(|(j, &(_, v))| (v, -((1u64 << (k - 1 - j)) as f64)))
                        .collect();
                    let step = do_solve(&b, &obj, &inc, &mut solves)?;
                    let new = take!(step, "the preferred level");
                    for &(j, v) in &chunk {
                        let on = pref_cand[j] == Some(new.choice[j]);
                        b.fix(v, on);
                    }
                    inc = Some(new);
                }
            }
            Level::PreferredCount => {
                let vars: Vec<usize> = (0..comp.nodes.len())
                    .filter_map(|i| pref_cand[i].map(|p| b.x(i, p)))
                    .filter(|&v| b.fixed(v) != Some(false))
                    .collect();
                if vars.is_empty() {
                    continue;
                }
                let all_met = inc.as_ref().is_some_and(|s| {
                    (0..comp.nodes.len()).all(|i| match pref_cand[i] {
                        Some(p) => b.fixed(b.x(i, p)) == Some(false) || s.choice[i] == p,
                        None => true,
                    })
                });
                if all_met {
                    for v in vars {
                        b.fix(v, true);
                    }
                    continue;
                }
                let obj: Vec<(usize, f64)> = vars.iter().map(|&v| (v, -1.0)).collect();
                let step = do_solve(&b, &obj, &inc, &mut solves)?;
                let new = take!(step, "the preferred-count level");
                let met = new.score.pref.iter().filter(|&&p| p).count();
                let live: Vec<usize> = (0..comp.nodes.len())
                    .filter(|&i| pref_cand[i].is_some_and(|p| b.fixed(b.x(i, p)) != Some(false)))
                    .collect();
                match preference_groups(comp, &pref_cand, &live, &new.choice, met, limits)? {
                    Some(groups) => {
                        for (nodes, best) in groups {
                            let gv: Vec<usize> = nodes
                                .iter()
                                .filter_map(|&i| pref_cand[i].map(|p| b.x(i, p)))
                                .collect();
                            if best == gv.len() {
                                for v in gv {
                                    b.fix(v, true);
                                }
                            } else {
                                b.model.rows.push((
                                    gv.iter().map(|&v| (v, 1.0)).collect(),
                                    Sense::Ge,
                                    best as f64 - 0.5,
                                ));
                            }
                        }
                    }
                    None => b.model.rows.push((
                        vars.iter().map(|&v| (v, 1.0)).collect(),
                        Sense::Ge,
                        met as f64 - 0.5,
                    )),
                }
                inc = Some(new);
            }
            Level::RankCount(k) => {
                let ys = b.yrank[k].clone();
                if ys.is_empty() {
                    continue;
                }
                if inc.as_ref().is_some_and(|s| s.score.counts[k] == 0) {
                    for v in ys {
                        b.fix(v, false);
                    }
                    continue;
                }
                let obj: Vec<(usize, f64)> = ys.iter().map(|&v| (v, 1.0)).collect();
                let step = do_solve(&b, &obj, &inc, &mut solves)?;
                let new = take!(step, format!("the rank-{k} count level"));
                let opt = new.score.counts[k];
                if opt == 0 {
                    for v in ys {
                        b.fix(v, false);
                    }
                } else {
                    b.model.rows.push((
                        ys.iter().map(|&v| (v, 1.0)).collect(),
                        Sense::Le,
                        opt as f64 + 0.5,
                    ));
                }
                inc = Some(new);
            }
            Level::Weighted => {
                let Some(w) = weights else { continue };
                let mut obj: Vec<(usize, f64)> = Vec::new();
                for (k, ys) in b.yrank.iter().enumerate() {
                    if w.ranks[k] != 0 {
                        obj.extend(ys.iter().map(|&v| (v, w.ranks[k] as f64)));
                    }
                }
                if w.preferred != 0 {
                    for (i, p) in pref_cand.iter().enumerate() {
                        if let Some(p) = p {
                            obj.push((b.x(i, *p), -(w.preferred as f64)));
                        }
                    }
                }
                if w.has_time() {
                    // Exact only within the magnitude limit, which the solve checks.
                    for (i, node) in comp.nodes.iter().enumerate() {
                        for (c, cand) in node.cands.iter().enumerate() {
                            if cand.time != 0 {
                                obj.push((b.x(i, c), cand.time as f64));
                            }
                        }
                    }
                    for (r, ys) in b.yvars.iter().enumerate() {
                        for &(k, v) in ys {
                            let t = comp.res_cost(r as u32, k);
                            if t != 0 {
                                obj.push((v, t as f64));
                            }
                        }
                    }
                    // One coefficient per variable (a variable may carry a rank or
                    // preference weight and a time cost).
                    let mut merged: std::collections::BTreeMap<usize, f64> = Default::default();
                    for (v, c) in obj.drain(..) {
                        *merged.entry(v).or_insert(0.0) += c;
                    }
                    obj.extend(merged.into_iter().filter(|&(_, c)| c != 0.0));
                }
                if obj.is_empty() {
                    continue;
                }
                let step = do_solve(&b, &obj, &inc, &mut solves)?;
                let new = take!(step, "the weighted level");
                let met = new.score.pref.iter().filter(|&&p| p).count() as u64;
                let opt = w.score_with_time(met, &new.score.counts, new.score.time) as f64;
                b.model.rows.push((obj.clone(), Sense::Le, opt + 0.5));
                inc = Some(new);
            }
            Level::ProviderLex => {
                let mut i = 0usize;
                while i < comp.nodes.len() {
                    let ncand = comp.nodes[i].cands.len();
                    let live: Vec<usize> = (0..ncand)
                        .filter(|&c| b.fixed(b.x(i, c)) != Some(false))
                        .collect();
                    let decided = (0..ncand).any(|c| b.fixed(b.x(i, c)) == Some(true));
                    if decided || live.len() <= 1 {
                        if let (false, Some(&c)) = (decided, live.first()) {
                            let v = b.x(i, c);
                            b.fix(v, true);
                        }
                        i += 1;
                        continue;
                    }
                    if inc.as_ref().is_some_and(|s| s.choice[i] == live[0]) {
                        let v = b.x(i, live[0]);
                        b.fix(v, true);
                        i += 1;
                        continue;
                    }
                    // The incumbent with node i switched to its smallest live
                    // candidate: if it is still a solution with the same
                    // values on every earlier level, it proves live[0].
                    if let Some(s) = inc.as_ref() {
                        let mut alt = s.choice.clone();
                        alt[i] = live[0];
                        if let Some(score) = comp.evaluate_local(&alt) {
                            if compare_scores(&levels[..li], weights, &score, &s.score)
                                == std::cmp::Ordering::Equal
                            {
                                inc = Some(Incumbent { choice: alt, score });
                                let v = b.x(i, live[0]);
                                b.fix(v, true);
                                i += 1;
                                continue;
                            }
                        }
                    }
                    // A chunk of undecided nodes from here, as digits of a
                    // base-B number.
                    let mut chunk: Vec<(usize, Vec<usize>)> = Vec::new();
                    let mut base = 1usize;
                    let mut j = i;
                    while j < comp.nodes.len() {
                        let nc = comp.nodes[j].cands.len();
                        let lv: Vec<usize> = (0..nc)
                            .filter(|&c| b.fixed(b.x(j, c)) != Some(false))
                            .collect();
                        let dec = (0..nc).any(|c| b.fixed(b.x(j, c)) == Some(true));
                        if !dec && lv.len() > 1 {
                            let nb = base.max(lv.len());
                            let digits = chunk.len() + 1;
                            if (nb as f64).powi(digits as i32) * nb as f64 > MAX_MAGNITUDE
                                && !chunk.is_empty()
                            {
                                break;
                            }
                            base = nb;
                            chunk.push((j, lv));
                        }
                        j += 1;
                    }
                    let k = chunk.len();
                    let mut obj = Vec::new();
                    for (d, (node, lv)) in chunk.iter().enumerate() {
                        let wgt = (base as f64).powi((k - 1 - d) as i32);
                        for (rank, &c) in lv.iter().enumerate() {
                            if rank > 0 {
                                obj.push((b.x(*node, c), wgt * rank as f64));
                            }
                        }
                    }
                    let step = do_solve(&b, &obj, &inc, &mut solves)?;
                    let new = take!(step, "the provider-id level");
                    for (node, _) in &chunk {
                        let v = b.x(*node, new.choice[*node]);
                        b.fix(v, true);
                    }
                    inc = Some(new);
                    i += 1;
                }
            }
        }
    }
    if inc.is_none() {
        current.set(None);
        let step = do_solve(&b, &[], &inc, &mut solves)?;
        let new = take!(step, "the feasibility solve");
        inc = Some(new);
    }
    finish(comp, levels, weights, inc, solves, None, None)
}

fn finish(
    _comp: &Comp,
    _levels: &[Level],
    _weights: Option<&Weights>,
    inc: Option<Incumbent>,
    solves: usize,
    stopped: Option<String>,
    gap: Option<f64>,
) -> Result<IlpOutcome, String> {
    match inc {
        Some(s) => Ok(IlpOutcome::Solved {
            choice: s.choice,
            solves,
            stopped,
            gap,
        }),
        None => Err(match stopped {
            Some(at) => format!("a limit was reached at {at} before any solution was found"),
            None => "no solution was found".into(),
        }),
    }
}
