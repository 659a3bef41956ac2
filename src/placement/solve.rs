//! The exact placement solver: for each parallel option, a dynamic program over layer
//! boundaries and the tensor-parallel groups used so far of each device kind, keeping at
//! each state the labels `(host bytes, KV tokens, stage time, stages)` that no other label
//! of the state dominates (the stage time is the objective's phase, decode or prefill,
//! under a time objective, else 0). A stage is appended in each of its ways to offload (the
//! minimal combinations of streamed layers, host-KV layers or sequences and expert groups,
//! problem.rs),
//! computed once per stage and pruned to those no other way covers. The proof that it
//! returns the optimum under the objective's lexicographic key with the canonical
//! tie-break is in docs/solver.md, "Placement across devices".

use super::problem::{Decision, Objective, ParallelOption, Problem, Solution, StageChoice, StepNs};

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

/// What one way of offloading a stage costs: its decisions (layers and KV layers
/// offloaded, units offloaded per device), host bytes, KV tokens, and its decode and
/// prefill nanoseconds (0 without times).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StageCost {
    pub layers: u32,
    pub kv_layers: u32,
    pub kv_sequences: u64,
    pub units: u64,
    pub host: u128,
    pub tokens: u64,
    pub decode: u128,
    pub prefill: u128,
}

/// Prefix sums of one kind's layer times under an option: the layers' own, and streaming
/// their weights and KV cache from the host.
struct TimePrefix {
    decode: Vec<u128>,
    prefill: Vec<u128>,
    layer_decode: Vec<u128>,
    layer_prefill: Vec<u128>,
    kv_decode: Vec<u128>,
    kv_prefill: Vec<u128>,
}

fn sums(steps: &[StepNs], n: usize) -> (Vec<u128>, Vec<u128>) {
    let (mut d, mut p) = (vec![0u128; n + 1], vec![0u128; n + 1]);
    for i in 0..n {
        let s = steps.get(i).copied().unwrap_or_default();
        d[i + 1] = d[i] + u128::from(s.decode);
        p[i + 1] = p[i] + u128::from(s.prefill);
    }
    (d, p)
}

fn time_prefixes(option: &ParallelOption) -> Vec<TimePrefix> {
    let Some(times) = &option.time else {
        return Vec::new();
    };
    let n = option.layers.len();
    times
        .kinds
        .iter()
        .map(|kind| {
            let (decode, prefill) = sums(&kind.layers, n);
            let (layer_decode, layer_prefill) = sums(&kind.layer_from_host, n);
            let (kv_decode, kv_prefill) = sums(&kind.kv_from_host, n);
            TimePrefix {
                decode,
                prefill,
                layer_decode,
                layer_prefill,
                kv_decode,
                kv_prefill,
            }
        })
        .collect()
}

/// The stage time the labels of `objective` carry: decode for TPOT and throughput,
/// prefill for TTFT, none for memory objectives.
fn label_time(objective: Objective, decode: u128, prefill: u128) -> u128 {
    match objective {
        Objective::MinTpot | Objective::MaxThroughput => decode,
        Objective::MinTtft => prefill,
        _ => 0,
    }
}

/// The fewest units of `unit` bytes (at most `available`) that bring `need` within
/// `usable`; `None` when none do.
fn fewest_units(need: u128, usable: u128, unit: u128, available: u128) -> Option<u128> {
    if need <= usable {
        return Some(0);
    }
    if unit == 0 {
        return None;
    }
    let units = (need - usable).div_ceil(unit);
    (units <= available).then_some(units)
}

/// Every minimal way the stage `start..end` of `kind` fits (problem.rs): one without
/// offload when it fits as it is; otherwise each minimal `(l, q, e)` (`q` host-KV layers,
/// or with the sequence grain host-KV sequences of layers in order), pruned to those no
/// other of them covers (the label relation, docs/solver.md).
#[allow(clippy::too_many_arguments)]
fn stage_variants(
    problem: &Problem,
    option: &ParallelOption,
    prefix: &Prefix,
    times: &[TimePrefix],
    kind: usize,
    start: usize,
    end: usize,
    several_stages: bool,
) -> Vec<StageCost> {
    let usable = u128::from(problem.kinds[kind].usable_bytes);
    let sequences = u128::from(problem.sequences);
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
    let kv = sequences * (prefix.kv_sequence[end] - prefix.kv_sequence[start]);
    let offload = problem.host_bytes.is_some() && non_kv + kv > usable;
    let len = end - start;
    let max_l = if offload && problem.layer_offload {
        len
    } else {
        0
    };
    let max_x = if offload && problem.kv_offload {
        len
    } else {
        0
    };
    // need_w[l]: the non-KV bytes with the first l layers' weights streamed (their staging
    // buffer is the largest of them); kv_part[x]: the KV bytes with the first x layers' KV
    // on the host (their staging buffer the largest layer's).
    let mut need_w = Vec::with_capacity(max_l + 1);
    let mut staging = 0u128;
    for l in 0..=max_l {
        if l > 0 {
            staging = staging.max(u128::from(option.layers[start + l - 1].weight_bytes));
        }
        need_w.push(non_kv - (prefix.weights[start + l] - prefix.weights[start]) + staging);
    }
    let mut kv_staging = vec![0u128; max_x + 1];
    let mut kv_part = Vec::with_capacity(max_x + 1);
    for x in 0..=max_x {
        if x > 0 {
            kv_staging[x] = kv_staging[x - 1]
                .max(sequences * u128::from(option.layers[start + x - 1].kv_sequence_bytes));
        }
        kv_part.push(
            sequences * (prefix.kv_sequence[end] - prefix.kv_sequence[start + x]) + kv_staging[x],
        );
    }
    let unit = u128::from(option.unit_bytes);
    let available = |l: usize| prefix.units[end] - prefix.units[start + l];
    let fits = |need: u128, e: u128, l: usize| e <= available(l) && need <= usable + e * unit;
    // The KV decision: `q` units of the stage's KV on the host, in layer order. By layer a
    // unit is one layer (`q = x`); with the sequence grain one sequence of one layer, so `q`
    // is `x = q / sequences` whole layers and `s = q % sequences` sequences of the next.
    let grain = if problem.kv_sequence_grain {
        sequences.max(1)
    } else {
        1
    };
    let max_q = max_x as u128 * grain;
    // The KV bytes on the device and in the staging buffer at `q`: `(x, s, kv part, staging)`.
    let kv_at = |q: u128| -> (usize, u128, u128, u128) {
        let x = (q / grain) as usize;
        let s = q % grain;
        if s == 0 {
            return (x, 0, kv_part[x], kv_staging[x]);
        }
        let k = u128::from(option.layers[start + x].kv_sequence_bytes);
        let staged = kv_staging[x].max(s * k);
        let part =
            sequences * (prefix.kv_sequence[end] - prefix.kv_sequence[start + x]) - s * k + staged;
        (x, s, part, staged)
    };
    let mut variants: Vec<StageCost> = Vec::new();
    for l in 0..=max_l {
        for q in 0..=max_q {
            let (whole, partial, kv_q, staged) = kv_at(q);
            let need = need_w[l] + kv_q;
            let Some(e) = fewest_units(need, usable, unit, available(l)) else {
                continue;
            };
            if e > 0 && problem.host_bytes.is_none() {
                continue;
            }
            if l > 0 && fits(need_w[l - 1] + kv_q, e, l - 1) {
                continue;
            }
            if q > 0 && fits(need_w[l] + kv_at(q - 1).2, e, l) {
                continue;
            }
            let k_partial = if partial > 0 {
                u128::from(option.layers[start + whole].kv_sequence_bytes)
            } else {
                0
            };
            let freed = prefix.weights[start + l] - prefix.weights[start]
                + e * unit
                + sequences * (prefix.kv_sequence[start + whole] - prefix.kv_sequence[start])
                + partial * k_partial;
            let host = u128::from(option.degree) * freed;
            let per_token = prefix.kv_token[end] - prefix.kv_token[start + whole];
            let room = usable + e * unit - need_w[l] - staged;
            let mut tokens = room
                .checked_div(per_token)
                .map_or(u64::MAX, |t| u64::try_from(t).unwrap_or(u64::MAX - 1));
            if q > 0 {
                tokens = tokens.min(problem.kv_worst_case_tokens);
            }
            let (mut decode, mut prefill) = (0u128, 0u128);
            if let (Some(option_times), Some(t)) = (&option.time, times.get(kind)) {
                let k = &option_times.kinds[kind];
                decode = t.decode[end] - t.decode[start]
                    + e * u128::from(k.unit.decode)
                    + t.layer_decode[start + l]
                    - t.layer_decode[start]
                    + t.kv_decode[start + whole]
                    - t.kv_decode[start];
                prefill = t.prefill[end] - t.prefill[start]
                    + e * u128::from(k.unit.prefill)
                    + t.layer_prefill[start + l]
                    - t.layer_prefill[start]
                    + t.kv_prefill[start + whole]
                    - t.kv_prefill[start];
                if partial > 0 {
                    // `partial / sequences` of the layer's transfer, rounded down.
                    let step = k
                        .kv_from_host
                        .get(start + whole)
                        .copied()
                        .unwrap_or_default();
                    decode += u128::from(step.decode) * partial / sequences;
                    prefill += u128::from(step.prefill) * partial / sequences;
                }
                if start == 0 {
                    decode += u128::from(k.first.decode);
                    prefill += u128::from(k.first.prefill);
                }
                if end == option.layers.len() {
                    decode += u128::from(k.last.decode);
                    prefill += u128::from(k.last.prefill);
                }
            }
            let (Ok(units), Ok(kv_sequences)) = (u64::try_from(e), u64::try_from(partial)) else {
                continue;
            };
            variants.push(StageCost {
                layers: l as u32,
                kv_layers: whole as u32,
                kv_sequences,
                units,
                host,
                tokens,
                decode,
                prefill,
            });
        }
    }
    // Keep the variants no other covers (the label relation on one stage).
    let time_objective = problem.objective.is_time();
    let as_label = |c: &StageCost| Label {
        host: c.host,
        tokens: c.tokens,
        time: label_time(problem.objective, c.decode, c.prefill),
        decode: 0,
        prefill: 0,
        path: vec![(
            end as u32,
            kind as u32,
            c.layers,
            c.kv_layers,
            c.kv_sequences,
        )],
        units: Vec::new(),
    };
    let labels: Vec<Label> = variants.iter().map(as_label).collect();
    let covered = covered_variants(time_objective, &labels);
    variants
        .into_iter()
        .zip(covered)
        .filter_map(|(v, covered)| (!covered).then_some(v))
        .collect()
}

/// Which of one stage's variants another covers ([`covers`]), the labels given in path
/// order (distinct paths, all of one length), in `O(V log V)`: exactly the pairwise test.
/// First, under a time objective, a variant that a variant of no more host bytes beats in
/// time is covered (a sweep by host bytes with the least time so far). A variant that
/// survives is covered otherwise only by one of no more host bytes and the same time
/// (a faster one would cover it already), which survives too (anything beating that one
/// would beat it); so, per time among the survivors, a sweep in path order asks whether an
/// earlier path has no more host bytes and no fewer KV tokens (a prefix maximum of the
/// tokens over the host bytes, a Fenwick tree).
fn covered_variants(time_objective: bool, labels: &[Label]) -> Vec<bool> {
    let n = labels.len();
    let mut covered = vec![false; n];
    if time_objective {
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| labels[i].host);
        let mut fastest = u128::MAX;
        let mut group = 0;
        while group < n {
            let host = labels[order[group]].host;
            let end = order[group..]
                .iter()
                .position(|&i| labels[i].host != host)
                .map_or(n, |k| group + k);
            for &i in &order[group..end] {
                fastest = fastest.min(labels[i].time);
            }
            for &i in &order[group..end] {
                covered[i] = fastest < labels[i].time;
            }
            group = end;
        }
    }
    // Survivors by time (all 0 under a memory objective), each group in path order.
    let mut by_time: std::collections::BTreeMap<u128, Vec<usize>> = Default::default();
    for i in (0..n).filter(|&i| !covered[i]) {
        by_time.entry(labels[i].time).or_default().push(i);
    }
    for group in by_time.values() {
        let mut hosts: Vec<u128> = group.iter().map(|&i| labels[i].host).collect();
        hosts.sort_unstable();
        hosts.dedup();
        // tree[k]: 1 + the most tokens of a path seen so far in its range of host ranks
        // (0: none).
        let mut tree = vec![0u128; hosts.len() + 1];
        for &i in group {
            let rank = hosts.partition_point(|&h| h <= labels[i].host);
            let mut most = 0u128;
            let mut k = rank;
            while k > 0 {
                most = most.max(tree[k]);
                k &= k - 1;
            }
            if most > u128::from(labels[i].tokens) {
                covered[i] = true;
            }
            let mut k = rank;
            while k <= hosts.len() {
                tree[k] = tree[k].max(u128::from(labels[i].tokens) + 1);
                k += k & k.wrapping_neg();
            }
        }
    }
    covered
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
    // Each stage's variants, computed once: (start, end, kind, several stages).
    let mut cache: Vec<Option<Vec<StageCost>>> = vec![None; n * (n + 1) * kinds * 2];
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
                    let slot = ((start * (n + 1) + end) * kinds + kind) * 2 + usize::from(several);
                    let variants = cache[slot].get_or_insert_with(|| {
                        stage_variants(problem, option, &prefix, &times, kind, start, end, several)
                    });
                    for cost in variants.iter() {
                        let time = label_time(problem.objective, cost.decode, cost.prefill);
                        for label in &labels {
                            let host = label.host + cost.host;
                            if problem.host_bytes.is_some_and(|h| host > u128::from(h)) {
                                continue;
                            }
                            let mut path = label.path.clone();
                            path.push((
                                end as u32,
                                kind as u32,
                                cost.layers,
                                cost.kv_layers,
                                cost.kv_sequences,
                            ));
                            let mut units = label.units.clone();
                            units.push(cost.units);
                            insert(
                                time_objective,
                                &mut states[end * combos + next_combo],
                                Label {
                                    host,
                                    tokens: label.tokens.min(cost.tokens),
                                    time: label.time + time,
                                    decode: label.decode + cost.decode,
                                    prefill: label.prefill + cost.prefill,
                                    path,
                                    units,
                                },
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
