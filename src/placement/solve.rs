//! The exact placement solver: for each parallel option, a dynamic program over layer
//! boundaries and the tensor-parallel groups used so far of each device kind, keeping at
//! each state the labels `(host bytes, KV tokens, stage time, stages)` that no other label
//! of the state dominates (the stage time is the objective's phase, decode or prefill,
//! under a time objective, else 0). The proof that it returns the optimum under the objective's lexicographic
//! key with the canonical tie-break is in docs/solver.md, "Placement across devices".

use super::problem::{Objective, ParallelOption, Problem, Solution, StageChoice};

/// A partial placement reaching a state.
#[derive(Clone, Debug)]
struct Label {
    host: u128,
    tokens: u64,
    time: u128,
    path: Vec<(u32, u32)>,
}

/// Prefix sums of one option's layer costs (`u128`: no sum of `u64` figures overflows).
struct Prefix {
    weights: Vec<u128>,
    kv_sequence: Vec<u128>,
    kv_token: Vec<u128>,
    units: Vec<u128>,
}

impl Prefix {
    fn of(option: &ParallelOption) -> Prefix {
        let n = option.layers.len();
        let mut p = Prefix {
            weights: vec![0; n + 1],
            kv_sequence: vec![0; n + 1],
            kv_token: vec![0; n + 1],
            units: vec![0; n + 1],
        };
        for (i, layer) in option.layers.iter().enumerate() {
            p.weights[i + 1] = p.weights[i] + u128::from(layer.weight_bytes);
            p.kv_sequence[i + 1] = p.kv_sequence[i] + u128::from(layer.kv_sequence_bytes);
            p.kv_token[i + 1] = p.kv_token[i] + u128::from(layer.kv_token_bytes);
            p.units[i + 1] = p.units[i] + u128::from(layer.units);
        }
        p
    }
}

/// What a stage costs: units offloaded per device, host bytes, KV tokens, and its decode
/// and prefill nanoseconds (0 without times).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StageCost {
    pub units: u64,
    pub host: u128,
    pub tokens: u64,
    pub decode: u128,
    pub prefill: u128,
}

/// Prefix sums of one kind's layer times under an option.
struct TimePrefix {
    decode: Vec<u128>,
    prefill: Vec<u128>,
}

fn time_prefixes(option: &ParallelOption) -> Vec<TimePrefix> {
    let Some(times) = &option.time else {
        return Vec::new();
    };
    times
        .kinds
        .iter()
        .map(|kind| {
            let mut p = TimePrefix {
                decode: vec![0; kind.layers.len() + 1],
                prefill: vec![0; kind.layers.len() + 1],
            };
            for (i, layer) in kind.layers.iter().enumerate() {
                p.decode[i + 1] = p.decode[i] + u128::from(layer.decode);
                p.prefill[i + 1] = p.prefill[i] + u128::from(layer.prefill);
            }
            p
        })
        .collect()
}

/// The stage time the labels of `objective` carry: decode for TPOT and throughput,
/// prefill for TTFT, none for memory objectives.
fn label_time(objective: Objective, cost: &StageCost) -> u128 {
    match objective {
        Objective::MinTpot | Objective::MaxThroughput => cost.decode,
        Objective::MinTtft => cost.prefill,
        _ => 0,
    }
}

#[allow(clippy::too_many_arguments)]
fn stage_cost(
    problem: &Problem,
    option: &ParallelOption,
    prefix: &Prefix,
    times: &[TimePrefix],
    kind: usize,
    start: usize,
    end: usize,
    several_stages: bool,
) -> Option<StageCost> {
    let usable = problem.kinds[kind].usable_bytes;
    let mut non_kv = prefix.weights[end] - prefix.weights[start] + u128::from(option.device_bytes);
    if start == 0 {
        non_kv += u128::from(option.first_bytes);
    }
    if end == option.layers.len() {
        non_kv += u128::from(option.last_bytes);
    }
    if several_stages {
        non_kv += u128::from(option.pipeline_bytes);
    }
    let kv = u128::from(problem.sequences) * (prefix.kv_sequence[end] - prefix.kv_sequence[start]);
    let usable = u128::from(usable);
    let need = non_kv + kv;
    let units = if need <= usable {
        0
    } else {
        problem.host_bytes?;
        let unit = u128::from(option.unit_bytes);
        if unit == 0 {
            return None;
        }
        let units = (need - usable).div_ceil(unit);
        if units > prefix.units[end] - prefix.units[start] {
            return None;
        }
        units
    };
    let freed = units * u128::from(option.unit_bytes);
    let host = u128::from(option.degree) * freed;
    let per_token = prefix.kv_token[end] - prefix.kv_token[start];
    let room = usable + freed - non_kv;
    let tokens = if per_token == 0 {
        u64::MAX
    } else {
        u64::try_from(room / per_token).unwrap_or(u64::MAX - 1)
    };
    let (mut decode, mut prefill) = (0u128, 0u128);
    if let (Some(option_times), Some(t)) = (&option.time, times.get(kind)) {
        let k = &option_times.kinds[kind];
        decode = t.decode[end] - t.decode[start] + units * u128::from(k.unit.decode);
        prefill = t.prefill[end] - t.prefill[start] + units * u128::from(k.unit.prefill);
        if start == 0 {
            decode += u128::from(k.first.decode);
            prefill += u128::from(k.first.prefill);
        }
        if end == option.layers.len() {
            decode += u128::from(k.last.decode);
            prefill += u128::from(k.last.prefill);
        }
    }
    Some(StageCost {
        units: u64::try_from(units).ok()?,
        host,
        tokens,
        decode,
        prefill,
    })
}

/// Whether label `a` covers label `b` of the same state (docs/solver.md): `a` is no worse in
/// host bytes, and either strictly faster under a time objective (the time leads every
/// time key, so nothing after it matters), or no worse in time, KV tokens and stage order.
fn covers(time_objective: bool, a: &Label, b: &Label) -> bool {
    a.host <= b.host
        && ((time_objective && a.time < b.time)
            || (a.time <= b.time && a.tokens >= b.tokens && a.path <= b.path))
}

/// Inserts `label`, unless a label of the state covers it; removes the labels it covers.
fn insert(time_objective: bool, labels: &mut Vec<Label>, label: Label) {
    if labels.iter().any(|a| covers(time_objective, a, &label)) {
        return;
    }
    labels.retain(|b| !covers(time_objective, &label, b));
    labels.push(label);
}

/// The optimal placement of `problem` (`None`: no placement fits).
pub fn solve(problem: &Problem) -> Option<Solution> {
    let mut best: Option<Solution> = None;
    for (index, option) in problem.options.iter().enumerate() {
        let Some(candidate) = solve_option(problem, index, option) else {
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

fn solve_option(problem: &Problem, index: usize, option: &ParallelOption) -> Option<Solution> {
    let n = option.layers.len();
    if n == 0 || n != problem.layer_count as usize {
        return None;
    }
    let prefix = Prefix::of(option);
    let times = time_prefixes(option);
    let time_objective = problem.objective.is_time();
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
        path: Vec::new(),
    });
    for start in 0..n {
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
                    let Some(cost) =
                        stage_cost(problem, option, &prefix, &times, kind, start, end, several)
                    else {
                        continue;
                    };
                    let time = label_time(problem.objective, &cost);
                    for label in &labels {
                        let host = label.host + cost.host;
                        if problem.host_bytes.is_some_and(|h| host > u128::from(h)) {
                            continue;
                        }
                        let mut path = label.path.clone();
                        path.push((end as u32, kind as u32));
                        insert(
                            time_objective,
                            &mut states[end * combos + next_combo],
                            Label {
                                host,
                                tokens: label.tokens.min(cost.tokens),
                                time: label.time + time,
                                path,
                            },
                        );
                    }
                }
            }
        }
    }
    let mut best: Option<Solution> = None;
    for combo in 0..combos {
        let stages = stages_of(combo);
        for label in &states[n * combos + combo] {
            let solution = solution_of(problem, index, option, &prefix, &times, label, stages)?;
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
    prefix: &Prefix,
    times: &[TimePrefix],
    label: &Label,
    stage_count: usize,
) -> Option<Solution> {
    let several = stage_count > 1;
    let mut start = 0usize;
    let mut stages = Vec::with_capacity(label.path.len());
    let (mut decode, mut prefill) = (0u128, 0u128);
    for &(end, kind) in &label.path {
        let cost = stage_cost(
            problem,
            option,
            prefix,
            times,
            kind as usize,
            start,
            end as usize,
            several,
        )?;
        decode += cost.decode;
        prefill += cost.prefill;
        stages.push(StageChoice {
            end_layer: end,
            kind,
            offloaded_units: cost.units,
        });
        start = end as usize;
    }
    let (tpot_ns, ttft_ns) = match (&option.time, problem.fixed_time) {
        (Some(t), Some(fixed)) => {
            let boundaries = stage_count.saturating_sub(1) as u128;
            let tpot =
                decode + boundaries * u128::from(t.boundary.decode) + u128::from(fixed.decode);
            let ttft =
                prefill + boundaries * u128::from(t.boundary.prefill) + u128::from(fixed.prefill);
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
