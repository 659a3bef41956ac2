//! The exact placement solver: for each parallel option, a dynamic program over layer
//! boundaries and the tensor-parallel groups used so far of each device kind, keeping at
//! each state the labels `(host bytes, KV tokens, stage time, stages)` that no other label
//! of the state dominates (the stage time is the objective's phase, decode or prefill,
//! under a time objective, else 0). A stage is appended in each of its ways to offload (the
//! minimal combinations of streamed layers, host-KV layers or sequences and expert groups,
//! `stage_ways.rs`), computed once per stage when the program first reaches its first
//! layer, pruned to those no other way covers, and dropped when the program moves past that
//! layer. With the sequence grain, the layer grain's optimum bounds the first figure of
//! the answer's key (its time, devices or host bytes): labels and ways that cannot come
//! within it are left out (the incumbent bound). The proof that it returns the optimum under the objective's
//! lexicographic key with the canonical tie-break is in docs/solver.md, "Placement across
//! devices".

use std::cmp::Ordering;

use super::problem::{Decision, Objective, ParallelOption, Problem, Solution, StageChoice};
use super::stage_ways::{
    label_time, stage_variants, sums, time_prefixes, Limits, Prefix, Stage, StageCost,
};

/// A partial placement reaching a state: its host bytes, KV tokens, the objective's stage
/// time (0 under a memory objective), both phases' stage times, and its stages.
#[derive(Clone, Debug)]
struct Label {
    host: u128,
    tokens: u64,
    time: u128,
    decode: u128,
    prefill: u128,
    path: Vec<Decision>,
    units: Vec<u64>,
}

/// `prefix` followed by `last` against `path`, lexicographically (a prefix first).
fn extended_cmp(path: &[Decision], prefix: &[Decision], last: &Decision) -> Ordering {
    let shared = path.len().min(prefix.len());
    match path[..shared].cmp(&prefix[..shared]) {
        Ordering::Equal => {}
        other => return other,
    }
    if path.len() <= prefix.len() {
        return path.len().cmp(&(prefix.len() + 1));
    }
    match path[prefix.len()].cmp(last) {
        Ordering::Equal => path.len().cmp(&(prefix.len() + 1)),
        other => other,
    }
}

/// Whether a label `(host, tokens, time, path)` covers another of the same state
/// (docs/solver.md): no worse in host bytes, and either strictly faster under a time
/// objective (the time leads every time key, so nothing after it matters), or no worse in
/// time, KV tokens and stage order (`order`: the first path against the second).
fn covers(
    time_objective: bool,
    a: (u128, u64, u128),
    b: (u128, u64, u128),
    order: impl FnOnce() -> Ordering,
) -> bool {
    a.0 <= b.0
        && ((time_objective && a.2 < b.2)
            || (a.2 <= b.2 && a.1 >= b.1 && order() != Ordering::Greater))
}

/// The label `parent` extended by one stage (`decision`, `cost`), inserted at a state
/// unless a label of the state covers it; the labels it covers are removed. The extended
/// label is built only when it is kept.
fn insert(
    time_objective: bool,
    labels: &mut Vec<Label>,
    parent: &Label,
    decision: Decision,
    cost: &StageCost,
    figures: (u128, u64, u128),
) {
    let kept = |a: &Label| (a.host, a.tokens, a.time);
    if labels.iter().any(|a| {
        covers(time_objective, kept(a), figures, || {
            extended_cmp(&a.path, &parent.path, &decision)
        })
    }) {
        return;
    }
    let mut path = Vec::with_capacity(parent.path.len() + 1);
    path.extend_from_slice(&parent.path);
    path.push(decision);
    let mut units = Vec::with_capacity(parent.units.len() + 1);
    units.extend_from_slice(&parent.units);
    units.push(cost.units);
    let label = Label {
        host: figures.0,
        tokens: figures.1,
        time: figures.2,
        decode: parent.decode + cost.decode,
        prefill: parent.prefill + cost.prefill,
        path,
        units,
    };
    labels.retain(|b| !covers(time_objective, figures, kept(b), || label.path.cmp(&b.path)));
    labels.push(label);
}

/// The optimal placement of `problem` (`None`: no placement fits).
pub fn solve(problem: &Problem) -> Option<Solution> {
    solve_counted(problem, true).0
}

/// What the incumbent bound left out in one solve (for tests and measurements): stages
/// (a layer range on a kind) whose ways it cut short or left out altogether, and extended
/// labels it did not insert.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BoundEffect {
    /// Stages some of whose candidate ways the bound left out.
    pub stages: u64,
    /// Extended labels the bound excludes.
    pub labels: u64,
}

/// The optimal placement of `problem` with the incumbent bound when `bounded` (the
/// answer is the same either way: docs/solver.md), and what the bound left out.
pub fn solve_counted(problem: &Problem, bounded: bool) -> (Option<Solution>, BoundEffect) {
    let limit = if bounded { incumbent(problem) } else { None };
    let mut effect = BoundEffect::default();
    let answer = solve_within(problem, limit, &mut effect);
    (answer, effect)
}

/// The incumbent bound of a problem with the sequence grain: the first figure of the
/// objective's key (its time, time x devices, devices or host bytes) at the layer grain's
/// optimum. Every layer-grain way is a fitting point of the finer grain, above one of its
/// minimal points, which is no slower and offloads no more bytes (docs/solver.md): so the
/// optimum's figure is at most this one. `None`: no bound (the layer grain, `most-kv-tokens`
/// whose tokens the argument does not bound, a time objective without a serving point, or
/// no placement at the layer grain).
fn incumbent(problem: &Problem) -> Option<u128> {
    let finer = problem.kv_sequence_grain
        && problem.kv_offload
        && problem.host_bytes.is_some()
        && problem.sequences > 1;
    let bounded = match problem.objective {
        Objective::FewestDevices | Objective::LeastOffloaded => true,
        Objective::MostKvTokens => false,
        _ => problem.fixed_time.is_some(),
    };
    if !(finer && bounded) {
        return None;
    }
    let coarse = Problem {
        kv_sequence_grain: false,
        ..problem.clone()
    };
    let answer = solve_within(&coarse, None, &mut BoundEffect::default())?;
    Some(problem.objective.key(&answer)[0])
}

/// The optimal placement of `problem`, given that its objective's first figure is at most
/// `limit` (`None`: no bound known).
fn solve_within(
    problem: &Problem,
    limit: Option<u128>,
    effect: &mut BoundEffect,
) -> Option<Solution> {
    let mut best: Option<Solution> = None;
    for (index, option) in problem.options.iter().enumerate() {
        let bound = limit.and_then(|limit| Bound::of(problem, option, limit));
        let Some(candidate) = solve_option(problem, index, option, bound.as_ref(), effect) else {
            continue;
        };
        let better = best.as_ref().is_none_or(|b| {
            candidate.order_key(problem.objective) < b.order_key(problem.objective)
        });
        if better {
            best = Some(candidate);
        }
    }
    best
}

/// What the incumbent bound leaves of an option (docs/solver.md, "The incumbent bound"):
/// a partial placement whose least possible figure exceeds `limit` is left out. The least
/// figure adds to the label's stage times the least time of the layers still to place
/// (per layer the fastest kind's, and the fastest last-stage extra), one boundary per
/// stage that must follow, and the fixed time; under `max-throughput`, times the least
/// devices.
struct TimeBound {
    limit: u128,
    throughput: bool,
    degree: u128,
    boundary: u128,
    fixed: u128,
    /// `before[i]`: the least time of layers `0..i` and, for `i > 0`, of the first stage's
    /// extra nodes.
    before: Vec<u128>,
    /// `after[j]`: the least time of layers `j..n` and, for `j < n`, of the last stage's
    /// extra nodes.
    after: Vec<u128>,
}

/// What the incumbent bound leaves of an option, by the objective's first figure: its
/// time (or time x devices), its devices, or its host bytes (docs/solver.md, "The
/// incumbent bound").
enum Bound {
    /// A time objective's.
    Time(TimeBound),
    /// `fewest-devices`: at most `limit` devices, `degree` per stage, `n` layers.
    Devices { limit: u128, degree: u128, n: usize },
    /// `least-offloaded`: at most this many host bytes.
    Host(u128),
}

impl Bound {
    /// The bound of `option` under `limit`, the first figure of the objective's key at
    /// the layer grain's optimum (`None`: no bound).
    fn of(problem: &Problem, option: &ParallelOption, limit: u128) -> Option<Bound> {
        match problem.objective {
            Objective::FewestDevices => Some(Bound::Devices {
                limit,
                degree: u128::from(option.degree),
                n: option.layers.len(),
            }),
            Objective::LeastOffloaded => Some(Bound::Host(limit)),
            Objective::MostKvTokens => None,
            _ => TimeBound::of(problem, option, limit).map(Bound::Time),
        }
    }

    /// Whether a label of stage time `time` and `host` bytes at boundary `end` after
    /// `stages` stages can complete within the bound.
    fn admits(&self, time: u128, host: u128, end: usize, stages: usize) -> bool {
        match self {
            Bound::Time(bound) => bound.admits(time, end, stages),
            Bound::Devices { limit, degree, n } => {
                degree * (stages + usize::from(end < *n)) as u128 <= *limit
            }
            Bound::Host(limit) => host <= *limit,
        }
    }

    /// What a way of `stage` may take within the bound, whatever the other stages.
    fn budget(&self, stage: Stage) -> Budget {
        match self {
            Bound::Time(bound) => bound.budget(stage),
            Bound::Devices { limit, degree, .. } => {
                if degree * if stage.several { 2 } else { 1 } <= *limit {
                    Budget::Within(Limits::default())
                } else {
                    Budget::Nothing
                }
            }
            Bound::Host(limit) => Budget::Within(Limits {
                time: None,
                host: Some(*limit),
            }),
        }
    }
}

/// What the bound lets a stage take.
enum Budget {
    /// Ways within these limits.
    Within(Limits),
    /// No way of the stage can be part of a placement within the bound.
    Nothing,
}

impl TimeBound {
    /// The bound of `option` under `limit`; `None` when the option has no times (its
    /// placements' time figures are 0) or a kind has none (its stages take 0).
    fn of(problem: &Problem, option: &ParallelOption, limit: u128) -> Option<TimeBound> {
        let times = option.time.as_ref()?;
        let fixed = problem.fixed_time?;
        if times.kinds.len() < problem.kinds.len() || times.kinds.is_empty() {
            return None;
        }
        let n = option.layers.len();
        let phase = |decode: u64, prefill: u64| {
            label_time(problem.objective, u128::from(decode), u128::from(prefill))
        };
        let mut least = vec![u128::MAX; n];
        let (mut first, mut last) = (u128::MAX, u128::MAX);
        for kind in &times.kinds {
            let (decode, prefill) = sums(&kind.layers, n);
            for (i, slot) in least.iter_mut().enumerate() {
                let own = label_time(
                    problem.objective,
                    decode[i + 1] - decode[i],
                    prefill[i + 1] - prefill[i],
                );
                *slot = (*slot).min(own);
            }
            first = first.min(phase(kind.first.decode, kind.first.prefill));
            last = last.min(phase(kind.last.decode, kind.last.prefill));
        }
        let mut before = vec![0u128; n + 1];
        for i in 0..n {
            before[i + 1] = before[i] + least[i];
        }
        let mut after = vec![0u128; n + 1];
        for j in (0..n).rev() {
            after[j] = after[j + 1] + least[j];
        }
        for value in before.iter_mut().skip(1) {
            *value += first;
        }
        for value in after.iter_mut().take(n) {
            *value += last;
        }
        Some(TimeBound {
            limit,
            throughput: problem.objective == Objective::MaxThroughput,
            degree: u128::from(option.degree),
            boundary: phase(times.boundary.decode, times.boundary.prefill),
            fixed: phase(fixed.decode, fixed.prefill),
            before,
            after,
        })
    }

    /// The most the placement's time may be with at least `stages` stages: the limit, or
    /// under `max-throughput` the limit over the least devices.
    fn time_limit(&self, stages: usize) -> u128 {
        if self.throughput {
            self.limit / (self.degree * stages as u128).max(1)
        } else {
            self.limit
        }
    }

    /// Whether a label of stage time `time` at boundary `end` after `stages` stages can
    /// complete within the bound.
    fn admits(&self, time: u128, end: usize, stages: usize) -> bool {
        let n = self.after.len() - 1;
        let least_stages = stages + usize::from(end < n);
        let least = time
            + self.after[end]
            + self.boundary * (least_stages.saturating_sub(1) as u128)
            + self.fixed;
        least <= self.time_limit(least_stages)
    }

    /// The most time a way of `stage` may take within the bound, whatever the other
    /// stages.
    fn budget(&self, stage: Stage) -> Budget {
        let least_stages = if stage.several { 2 } else { 1 };
        let others = self.before[stage.start]
            + self.after[stage.end]
            + self.boundary * (least_stages - 1) as u128
            + self.fixed;
        match self.time_limit(least_stages).checked_sub(others) {
            Some(left) => Budget::Within(Limits {
                time: Some(left),
                host: None,
            }),
            None => Budget::Nothing,
        }
    }
}

fn solve_option(
    problem: &Problem,
    index: usize,
    option: &ParallelOption,
    bound: Option<&Bound>,
    effect: &mut BoundEffect,
) -> Option<Solution> {
    let n = option.layers.len();
    if n == 0 || n != problem.layer_count as usize {
        return None;
    }
    let prefix = Prefix::of(option);
    let times = time_prefixes(option);
    let time_objective = problem.objective.is_time();
    let kinds = problem.kinds.len();
    let limits: Vec<usize> = problem
        .kinds
        .iter()
        .map(|k| k.groups_of(option.degree) as usize)
        .collect();
    // Mixed-radix index of the groups used per kind.
    let mut radix = Vec::with_capacity(limits.len());
    let mut combos = 1usize;
    for limit in &limits {
        radix.push(combos);
        combos = combos.checked_mul(limit + 1)?;
    }
    let used_of = |combo: usize, kind: usize| (combo / radix[kind]) % (limits[kind] + 1);
    let stages_of = |combo: usize| (0..limits.len()).map(|k| used_of(combo, k)).sum::<usize>();
    let pinned = problem.pipeline_stages.map(|p| p as usize);
    let mut states: Vec<Vec<Label>> = vec![Vec::new(); (n + 1) * combos];
    states[0].push(Label {
        host: 0,
        tokens: u64::MAX,
        time: 0,
        decode: 0,
        prefill: 0,
        path: Vec::new(),
        units: Vec::new(),
    });
    for start in 0..n {
        // The ways of the stages starting here, computed when first reached: (end, kind,
        // several stages). No state after `start` needs them.
        let mut cache: Vec<Option<Vec<StageCost>>> = vec![None; (n + 1) * kinds * 2];
        for combo in 0..combos {
            let labels = std::mem::take(&mut states[start * combos + combo]);
            if labels.is_empty() {
                continue;
            }
            let stages = stages_of(combo);
            for (kind, limit) in limits.iter().enumerate() {
                if used_of(combo, kind) == *limit {
                    continue;
                }
                let next_combo = combo + radix[kind];
                let next_stages = stages + 1;
                if pinned.is_some_and(|p| next_stages > p) {
                    continue;
                }
                for end in start + 1..=n {
                    if end < n && pinned == Some(next_stages) {
                        continue;
                    }
                    if end == n && pinned.is_some_and(|p| p != next_stages) {
                        continue;
                    }
                    let several = !(start == 0 && end == n);
                    let stage = Stage {
                        start,
                        end,
                        kind,
                        several,
                    };
                    let slot = (end * kinds + kind) * 2 + usize::from(several);
                    let variants = cache[slot].get_or_insert_with(|| {
                        let limits = match bound.map(|b| b.budget(stage)) {
                            None => Limits::default(),
                            Some(Budget::Within(limits)) => limits,
                            Some(Budget::Nothing) => {
                                effect.stages += 1;
                                return Vec::new();
                            }
                        };
                        let (ways, cut) =
                            stage_variants(problem, option, &prefix, &times, stage, limits);
                        effect.stages += u64::from(cut);
                        ways
                    });
                    for cost in variants.iter() {
                        let time = label_time(problem.objective, cost.decode, cost.prefill);
                        let decision = (
                            end as u32,
                            kind as u32,
                            cost.layers,
                            cost.kv_layers,
                            cost.kv_sequences,
                        );
                        for label in &labels {
                            let host = label.host + cost.host;
                            if problem.host_bytes.is_some_and(|h| host > u128::from(h)) {
                                continue;
                            }
                            let sum = label.time + time;
                            if bound.is_some_and(|b| !b.admits(sum, host, end, next_stages)) {
                                effect.labels += 1;
                                continue;
                            }
                            insert(
                                time_objective,
                                &mut states[end * combos + next_combo],
                                label,
                                decision,
                                cost,
                                (host, label.tokens.min(cost.tokens), sum),
                            );
                        }
                    }
                }
            }
        }
    }
    let mut best: Option<Solution> = None;
    for combo in 0..combos {
        let stages = stages_of(combo);
        for label in &states[n * combos + combo] {
            let solution = solution_of(problem, index, option, label, stages)?;
            let better = best.as_ref().is_none_or(|b| {
                solution.order_key(problem.objective) < b.order_key(problem.objective)
            });
            if better {
                best = Some(solution);
            }
        }
    }
    best
}

fn solution_of(
    problem: &Problem,
    index: usize,
    option: &ParallelOption,
    label: &Label,
    stage_count: usize,
) -> Option<Solution> {
    let stages = label
        .path
        .iter()
        .zip(&label.units)
        .map(
            |(&(end, kind, layers, kv_layers, kv_sequences), &units)| StageChoice {
                end_layer: end,
                kind,
                offloaded_units: units,
                offloaded_layers: layers,
                kv_offloaded_layers: kv_layers,
                kv_offloaded_sequences: kv_sequences,
            },
        )
        .collect();
    let (tpot_ns, ttft_ns) = match (&option.time, problem.fixed_time) {
        (Some(t), Some(fixed)) => {
            let boundaries = stage_count.saturating_sub(1) as u128;
            let tpot = label.decode
                + boundaries * u128::from(t.boundary.decode)
                + u128::from(fixed.decode);
            let ttft = label.prefill
                + boundaries * u128::from(t.boundary.prefill)
                + u128::from(fixed.prefill);
            (
                Some(u64::try_from(tpot).ok()?),
                Some(u64::try_from(ttft).ok()?),
            )
        }
        _ => (None, None),
    };
    Some(Solution {
        option: u32::try_from(index).ok()?,
        stages,
        devices: u64::from(option.degree) * stage_count as u64,
        offloaded_bytes: u64::try_from(label.host).ok()?,
        kv_tokens: label.tokens,
        tpot_ns,
        ttft_ns,
    })
}
