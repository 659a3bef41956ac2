//! The exact placement solver: for each parallel option, a dynamic program over layer
//! boundaries and the tensor-parallel groups used so far of each device kind, keeping at
//! each state the labels `(host bytes, KV tokens, stages)` that no other label of the state
//! dominates. The proof that it returns the optimum under the objective's lexicographic
//! key with the canonical tie-break is in docs/solver.md, "Placement across devices".

use super::problem::{ParallelOption, Problem, Solution, StageChoice};

/// A partial placement reaching a state.
#[derive(Clone, Debug)]
struct Label {
    host: u128,
    tokens: u64,
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

/// What a stage costs: units offloaded per device, host bytes, KV tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StageCost {
    pub units: u64,
    pub host: u128,
    pub tokens: u64,
}

#[allow(clippy::too_many_arguments)]
fn stage_cost(
    problem: &Problem,
    option: &ParallelOption,
    prefix: &Prefix,
    usable: u64,
    start: usize,
    end: usize,
    several_stages: bool,
) -> Option<StageCost> {
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
    Some(StageCost {
        units: u64::try_from(units).ok()?,
        host,
        tokens,
    })
}

/// Inserts `label`, unless a label of the state is at least as good in host bytes, KV
/// tokens and stage order; removes the labels it is at least as good as.
fn insert(labels: &mut Vec<Label>, label: Label) {
    let covers =
        |a: &Label, b: &Label| a.host <= b.host && a.tokens >= b.tokens && a.path <= b.path;
    if labels.iter().any(|a| covers(a, &label)) {
        return;
    }
    labels.retain(|b| !covers(&label, b));
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
                let usable = problem.kinds[kind].usable_bytes;
                for end in start + 1..=n {
                    if end < n && pinned == Some(next_stages) {
                        continue;
                    }
                    if end == n && pinned.is_some_and(|p| p != next_stages) {
                        continue;
                    }
                    let several = !(start == 0 && end == n);
                    let Some(cost) =
                        stage_cost(problem, option, &prefix, usable, start, end, several)
                    else {
                        continue;
                    };
                    for label in &labels {
                        let host = label.host + cost.host;
                        if problem.host_bytes.is_some_and(|h| host > u128::from(h)) {
                            continue;
                        }
                        let mut path = label.path.clone();
                        path.push((end as u32, kind as u32));
                        insert(
                            &mut states[end * combos + next_combo],
                            Label {
                                host,
                                tokens: label.tokens.min(cost.tokens),
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
            let solution = solution_of(problem, index, option, &prefix, label, stages)?;
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
    label: &Label,
    stage_count: usize,
) -> Option<Solution> {
    let several = stage_count > 1;
    let mut start = 0usize;
    let mut stages = Vec::with_capacity(label.path.len());
    for &(end, kind) in &label.path {
        let usable = problem.kinds[kind as usize].usable_bytes;
        let cost = stage_cost(
            problem,
            option,
            prefix,
            usable,
            start,
            end as usize,
            several,
        )?;
        stages.push(StageChoice {
            end_layer: end,
            kind,
            offloaded_units: cost.units,
        });
        start = end as usize;
    }
    Some(Solution {
        option: u32::try_from(index).ok()?,
        stages,
        devices: u64::from(option.degree) * stage_count as u64,
        offloaded_bytes: u64::try_from(label.host).ok()?,
        kv_tokens: label.tokens,
    })
}
