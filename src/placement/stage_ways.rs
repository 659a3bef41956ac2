//! The ways one stage of a placement can offload (problem.rs): one without offload when the
//! stage fits as it is; otherwise every minimal `(l, q, e)` of streamed layers, host-KV
//! layers (or, with the sequence grain, host-KV sequences of layers in order) and expert
//! groups, each with its costs, pruned to those no other way of the stage covers. The
//! solver's dynamic program (`solve.rs`) appends a stage in each of its ways; the limits of
//! the incumbent bound (docs/solver.md) on a way's time or host bytes leave out the ways
//! over them, found by search in the monotone coordinates instead of by listing them.

use super::problem::{Objective, ParallelOption, Problem, StepNs};

/// Prefix sums of one option's layer costs (`u128`: no sum of `u64` figures overflows).
pub(super) struct Prefix {
    weights: Vec<u128>,
    kv_sequence: Vec<u128>,
    kv_token: Vec<u128>,
    units: Vec<u128>,
}

impl Prefix {
    /// The prefix sums of `option`'s layers.
    pub(super) fn of(option: &ParallelOption) -> Prefix {
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
pub(super) struct TimePrefix {
    decode: Vec<u128>,
    prefill: Vec<u128>,
    layer_decode: Vec<u128>,
    layer_prefill: Vec<u128>,
    kv_decode: Vec<u128>,
    kv_prefill: Vec<u128>,
}

/// Prefix sums of the decode and prefill nanoseconds of `steps` (a missing step is 0).
pub(super) fn sums(steps: &[StepNs], n: usize) -> (Vec<u128>, Vec<u128>) {
    let (mut d, mut p) = (vec![0u128; n + 1], vec![0u128; n + 1]);
    for i in 0..n {
        let s = steps.get(i).copied().unwrap_or_default();
        d[i + 1] = d[i] + u128::from(s.decode);
        p[i + 1] = p[i] + u128::from(s.prefill);
    }
    (d, p)
}

/// Every kind's time prefix sums under `option` (empty without times).
pub(super) fn time_prefixes(option: &ParallelOption) -> Vec<TimePrefix> {
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
pub(super) fn label_time(objective: Objective, decode: u128, prefill: u128) -> u128 {
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

/// One stage: its layers `start..end`, its device kind, and whether the placement has
/// several stages.
#[derive(Clone, Copy, Debug)]
pub(super) struct Stage {
    /// Its first layer.
    pub start: usize,
    /// One past its last layer.
    pub end: usize,
    /// Its device kind.
    pub kind: usize,
    /// Whether the placement has several stages (the pipeline buffers are held).
    pub several: bool,
}

/// What a stage's ways may take under the incumbent bound (docs/solver.md): the
/// objective's time and the host bytes, each `None` for no limit.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Limits {
    /// The most time in the objective's phase, nanoseconds.
    pub time: Option<u128>,
    /// The most host bytes.
    pub host: Option<u128>,
}

/// The parts of a stage's time (nanoseconds, decode and prefill): the stage's own layers
/// and first/last extras (`base`), and per streamed layer, per host-KV layer, per unit.
struct StageClock<'a> {
    prefix: &'a TimePrefix,
    transfers: &'a [StepNs],
    unit: StepNs,
    start: usize,
    sequences: u128,
    base: (u128, u128),
}

impl StageClock<'_> {
    /// Streaming the first `l` layers' weights.
    fn streamed(&self, l: usize) -> (u128, u128) {
        let t = self.prefix;
        (
            t.layer_decode[self.start + l] - t.layer_decode[self.start],
            t.layer_prefill[self.start + l] - t.layer_prefill[self.start],
        )
    }

    /// The host KV of `whole` layers and `partial` sequences of the next: `partial /
    /// sequences` of that layer's transfer, rounded down.
    fn kv(&self, whole: usize, partial: u128) -> (u128, u128) {
        let t = self.prefix;
        let mut decode = t.kv_decode[self.start + whole] - t.kv_decode[self.start];
        let mut prefill = t.kv_prefill[self.start + whole] - t.kv_prefill[self.start];
        if partial > 0 {
            let step = self
                .transfers
                .get(self.start + whole)
                .copied()
                .unwrap_or_default();
            decode += u128::from(step.decode) * partial / self.sequences;
            prefill += u128::from(step.prefill) * partial / self.sequences;
        }
        (decode, prefill)
    }
}

/// Every minimal way the stage fits (problem.rs): one without offload when it fits as it
/// is; otherwise each minimal `(l, q, e)` (`q` host-KV layers, or with the sequence grain
/// host-KV sequences of layers in order) whose time under the objective and host bytes
/// are within `limits`, pruned to those no other of them covers (the label relation,
/// docs/solver.md). The ways come in path order (`l`, then `q`, ascending), with whether
/// the limits cut the search short (some candidate was left out for its time or host
/// bytes).
///
/// Every term of a way's time and of its host bytes is non-decreasing in each of `l`, `q`
/// and `e`, and for a fixed `l` the fewest `e` is non-increasing in `q`: so the `l` loop
/// stops at the first `l` whose streamed layers alone exceed a limit, the `q` loop at the
/// first `q` whose host KV does, and starts at the least `q` whose fewest units fit what is
/// left, found by binary search (the device bytes are non-increasing in `q`).
pub(super) fn stage_variants(
    problem: &Problem,
    option: &ParallelOption,
    prefix: &Prefix,
    times: &[TimePrefix],
    stage: Stage,
    limits: Limits,
) -> (Vec<StageCost>, bool) {
    let Stage {
        start,
        end,
        kind,
        several,
    } = stage;
    let usable = u128::from(problem.kinds[kind].usable_bytes);
    let sequences = u128::from(problem.sequences);
    let mut non_kv = prefix.weights[end] - prefix.weights[start] + u128::from(option.device_bytes);
    if start == 0 {
        non_kv += u128::from(option.first_bytes);
    }
    if end == option.layers.len() {
        non_kv += u128::from(option.last_bytes);
    }
    if several {
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
    let clock = match (&option.time, times.get(kind)) {
        (Some(option_times), Some(t)) => {
            let k = &option_times.kinds[kind];
            let mut base = (
                t.decode[end] - t.decode[start],
                t.prefill[end] - t.prefill[start],
            );
            if start == 0 {
                base.0 += u128::from(k.first.decode);
                base.1 += u128::from(k.first.prefill);
            }
            if end == option.layers.len() {
                base.0 += u128::from(k.last.decode);
                base.1 += u128::from(k.last.prefill);
            }
            Some(StageClock {
                prefix: t,
                transfers: &k.kv_from_host,
                unit: k.unit,
                start,
                sequences: sequences.max(1),
                base,
            })
        }
        _ => None,
    };
    let phase = |(decode, prefill): (u128, u128)| label_time(problem.objective, decode, prefill);
    // The budget applies to the objective's phase; without times every way takes 0.
    let budget = limits.time.filter(|_| clock.is_some());
    let degree = u128::from(option.degree);
    let (base, unit_time) = clock.as_ref().map_or((0, 0), |c| {
        (
            phase(c.base),
            phase((u128::from(c.unit.decode), u128::from(c.unit.prefill))),
        )
    });
    if budget.is_some_and(|b| base > b) {
        return (Vec::new(), true);
    }
    let mut cut = false;
    let mut variants: Vec<StageCost> = Vec::new();
    for l in 0..=max_l {
        let streamed = clock.as_ref().map_or((0, 0), |c| c.streamed(l));
        // What the host limit leaves for the host KV and the units once `l` layers stream.
        let streamed_host = degree * (prefix.weights[start + l] - prefix.weights[start]);
        let host_left = match limits.host {
            Some(h) => match h.checked_sub(streamed_host) {
                Some(left) => Some(left),
                None => {
                    cut = true;
                    break;
                }
            },
            None => None,
        };
        // What the budget leaves for the host KV and the units once `l` layers stream.
        let left = match budget {
            Some(b) => match b.checked_sub(base + phase(streamed)) {
                Some(left) => Some(left),
                None => {
                    cut = true;
                    break;
                }
            },
            None => None,
        };
        // The most units the limits allow, and the least `q` at which they suffice.
        let mut cap = match (left, unit_time) {
            (Some(left), u) if u > 0 => available(l).min(left / u),
            _ => available(l),
        };
        if let Some(units) = host_left.and_then(|left| left.checked_div(degree * unit)) {
            cap = cap.min(units);
        }
        cut |= cap < available(l);
        let suffices = |q: u128| need_w[l] + kv_at(q).2 <= usable + cap * unit;
        if !suffices(max_q) {
            continue;
        }
        let (mut low, mut high) = (0u128, max_q);
        while low < high {
            let middle = low + (high - low) / 2;
            if suffices(middle) {
                high = middle;
            } else {
                low = middle + 1;
            }
        }
        for q in low..=max_q {
            let (whole, partial, kv_q, staged) = kv_at(q);
            let kv_time = clock.as_ref().map_or((0, 0), |c| c.kv(whole, partial));
            let k_partial = if partial > 0 {
                u128::from(option.layers[start + whole].kv_sequence_bytes)
            } else {
                0
            };
            let kv_host = sequences
                * (prefix.kv_sequence[start + whole] - prefix.kv_sequence[start])
                + partial * k_partial;
            if left.is_some_and(|left| phase(kv_time) > left)
                || host_left.is_some_and(|left| degree * kv_host > left)
            {
                cut = true;
                break;
            }
            let need = need_w[l] + kv_q;
            let Some(e) = fewest_units(need, usable, unit, available(l)) else {
                continue;
            };
            if left.is_some_and(|left| phase(kv_time) + e * unit_time > left)
                || host_left.is_some_and(|left| degree * (kv_host + e * unit) > left)
            {
                cut = true;
                continue;
            }
            if e > 0 && problem.host_bytes.is_none() {
                continue;
            }
            if l > 0 && fits(need_w[l - 1] + kv_q, e, l - 1) {
                continue;
            }
            if q > 0 && fits(need_w[l] + kv_at(q - 1).2, e, l) {
                continue;
            }
            let freed = prefix.weights[start + l] - prefix.weights[start] + e * unit + kv_host;
            let host = degree * freed;
            let per_token = prefix.kv_token[end] - prefix.kv_token[start + whole];
            let room = usable + e * unit - need_w[l] - staged;
            let mut tokens = room
                .checked_div(per_token)
                .map_or(u64::MAX, |t| u64::try_from(t).unwrap_or(u64::MAX - 1));
            if q > 0 {
                tokens = tokens.min(problem.kv_worst_case_tokens);
            }
            let (decode, prefill) = match &clock {
                Some(c) => (
                    c.base.0 + e * u128::from(c.unit.decode) + streamed.0 + kv_time.0,
                    c.base.1 + e * u128::from(c.unit.prefill) + streamed.1 + kv_time.1,
                ),
                None => (0, 0),
            };
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
    let keys: Vec<WayKey> = variants
        .iter()
        .map(|c| WayKey {
            host: c.host,
            tokens: c.tokens,
            time: label_time(problem.objective, c.decode, c.prefill),
        })
        .collect();
    let covered = covered_variants(problem.objective.is_time(), &keys);
    let kept = variants
        .into_iter()
        .zip(covered)
        .filter_map(|(v, covered)| (!covered).then_some(v))
        .collect();
    (kept, cut)
}

/// What the label relation compares of one way of a stage: its host bytes, KV tokens and
/// the objective's time (its path is its index, the ways being in path order).
struct WayKey {
    host: u128,
    tokens: u64,
    time: u128,
}

/// Which of one stage's ways another covers (the label relation of `solve.rs`), the ways
/// given in path order (distinct paths, all of one length), in `O(V log V)`: exactly the
/// pairwise test. First, under a time objective, a way that a way of no more host bytes
/// beats in time is covered (a sweep by host bytes with the least time so far). A way that
/// survives is covered otherwise only by one of no more host bytes and the same time (a
/// faster one would cover it already), which survives too (anything beating that one would
/// beat it); so, per time among the survivors, a sweep in path order asks whether an
/// earlier path has no more host bytes and no fewer KV tokens (a prefix maximum of the
/// tokens over the host bytes, a Fenwick tree).
fn covered_variants(time_objective: bool, ways: &[WayKey]) -> Vec<bool> {
    let n = ways.len();
    let mut covered = vec![false; n];
    if time_objective {
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| ways[i].host);
        let mut fastest = u128::MAX;
        let mut group = 0;
        while group < n {
            let host = ways[order[group]].host;
            let end = order[group..]
                .iter()
                .position(|&i| ways[i].host != host)
                .map_or(n, |k| group + k);
            for &i in &order[group..end] {
                fastest = fastest.min(ways[i].time);
            }
            for &i in &order[group..end] {
                covered[i] = fastest < ways[i].time;
            }
            group = end;
        }
    }
    // Survivors by time (all 0 under a memory objective), each group in path order.
    let mut by_time: std::collections::BTreeMap<u128, Vec<usize>> = Default::default();
    for i in (0..n).filter(|&i| !covered[i]) {
        by_time.entry(ways[i].time).or_default().push(i);
    }
    for group in by_time.values() {
        let mut hosts: Vec<u128> = group.iter().map(|&i| ways[i].host).collect();
        hosts.sort_unstable();
        hosts.dedup();
        // tree[k]: 1 + the most tokens of a path seen so far in its range of host ranks
        // (0: none).
        let mut tree = vec![0u128; hosts.len() + 1];
        for &i in group {
            let rank = hosts.partition_point(|&h| h <= ways[i].host);
            let mut most = 0u128;
            let mut k = rank;
            while k > 0 {
                most = most.max(tree[k]);
                k &= k - 1;
            }
            if most > u128::from(ways[i].tokens) {
                covered[i] = true;
            }
            let mut k = rank;
            while k <= hosts.len() {
                tree[k] = tree[k].max(u128::from(ways[i].tokens) + 1);
                k += k & k.wrapping_neg();
            }
        }
    }
    covered
}
