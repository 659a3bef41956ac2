//! Exhaustive enumeration of placements: every option, every pipeline depth, every
//! sequence of device kinds and every split of the layers into contiguous non-empty stages,
//! each evaluated from the problem's definition (`problem.rs`) by summing layer by layer.
//! It shares no code with the solver (`solve.rs`): it certifies the solver's answer on
//! every problem whose placements it can count within its budget, and the differential test
//! (`tests/planner/placement_oracle.rs`) compares the two on random problems.

use super::problem::{Objective, Problem, Solution, StageChoice};

/// The answer of an enumeration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Enumerated {
    /// Every placement was evaluated: the best (`None`: none fits) and how many there were.
    Complete {
        /// The best placement.
        best: Option<Solution>,
        /// Placements evaluated.
        placements: u64,
    },
    /// There are more placements than the budget.
    OverBudget {
        /// Placements counted before giving up (more than the budget).
        placements: u64,
    },
}

/// C(n, k), saturating.
fn choose(n: u64, k: u64) -> u64 {
    let mut result: u128 = 1;
    for i in 0..k {
        result = result * u128::from(n - i) / u128::from(i + 1);
        if result > u128::from(u64::MAX) {
            return u64::MAX;
        }
    }
    result as u64
}

/// How many placements the enumeration would evaluate (saturating).
pub fn count(problem: &Problem) -> u64 {
    let n = u64::from(problem.layer_count);
    let mut total: u64 = 0;
    for option in &problem.options {
        let groups: u64 = problem
            .kinds
            .iter()
            .map(|k| u64::from(k.groups_of(option.degree)))
            .sum();
        for p in 1..=n.min(groups) {
            if problem.pipeline_stages.is_some_and(|s| u64::from(s) != p) {
                continue;
            }
            let kinds_sequences = (problem.kinds.len() as u64).saturating_pow(p as u32);
            let splits = choose(n - 1, p - 1);
            // Each stage's offload: at most (n + 1) choices of layers and of KV layers.
            let ways = ways_bound(problem, n).saturating_pow(p as u32);
            total =
                total.saturating_add(kinds_sequences.saturating_mul(splits).saturating_mul(ways));
        }
    }
    total
}

/// An upper bound of a stage's ways to offload (with a host tier): `(n + 1)` choices of
/// streamed layers when whole-layer offload is on, and of host-KV layers when KV offload
/// is on (`n x sequences + 1` with the sequence grain).
fn ways_bound(problem: &Problem, n: u64) -> u64 {
    if problem.host_bytes.is_none() {
        return 1;
    }
    let layers = if problem.layer_offload { n + 1 } else { 1 };
    let kv = match (problem.kv_offload, problem.kv_sequence_grain) {
        (false, _) => 1,
        (true, false) => n + 1,
        (true, true) => n.saturating_mul(problem.sequences.max(1)).saturating_add(1),
    };
    layers.saturating_mul(kv)
}

/// Every placement of `problem` evaluated, when there are at most `budget` of them.
pub fn enumerate(problem: &Problem, budget: u64) -> Enumerated {
    let placements = count(problem);
    if placements > budget {
        return Enumerated::OverBudget { placements };
    }
    let mut best: Option<Solution> = None;
    let n = problem.layer_count;
    for (index, option) in problem.options.iter().enumerate() {
        if option.layers.len() != n as usize || n == 0 {
            continue;
        }
        let groups: u32 = problem
            .kinds
            .iter()
            .map(|k| k.groups_of(option.degree))
            .sum();
        for p in 1..=n.min(groups) {
            if problem.pipeline_stages.is_some_and(|s| s != p) {
                continue;
            }
            let mut kinds = vec![0u32; p as usize];
            loop {
                let mut cuts = (1..p).collect::<Vec<u32>>();
                loop {
                    for s in evaluate(problem, index, &kinds, &cuts) {
                        if best
                            .as_ref()
                            .is_none_or(|b| better(problem.objective, &s, b))
                        {
                            best = Some(s);
                        }
                    }
                    if !next_cuts(&mut cuts, n) {
                        break;
                    }
                }
                if !next_kinds(&mut kinds, problem.kinds.len() as u32) {
                    break;
                }
            }
        }
    }
    Enumerated::Complete { best, placements }
}

/// Whether `a` is better than `b`: the objective's three figures in its order (fewer
/// devices, fewer offloaded bytes, more KV tokens), then the smaller option index, then the
/// stages' `(end layer, kind)` sequence compared element by element (a prefix first).
fn better(objective: Objective, a: &Solution, b: &Solution) -> bool {
    use std::cmp::Ordering;
    let devices = a.devices.cmp(&b.devices);
    let offloaded = a.offloaded_bytes.cmp(&b.offloaded_bytes);
    let tokens = b.kv_tokens.cmp(&a.kv_tokens);
    let tpot = a.tpot_ns.unwrap_or(0).cmp(&b.tpot_ns.unwrap_or(0));
    let ttft = a.ttft_ns.unwrap_or(0).cmp(&b.ttft_ns.unwrap_or(0));
    // Tokens per second per device at the fixed batch: C / (TPOT x devices); the larger
    // has the smaller product.
    let per_device = (u128::from(a.tpot_ns.unwrap_or(0)) * u128::from(a.devices))
        .cmp(&(u128::from(b.tpot_ns.unwrap_or(0)) * u128::from(b.devices)));
    let figures = match objective {
        Objective::FewestDevices => vec![devices, offloaded, tokens],
        Objective::MostKvTokens => vec![tokens, devices, offloaded],
        Objective::LeastOffloaded => vec![offloaded, devices, tokens],
        Objective::MinTpot => vec![tpot, devices, offloaded, tokens],
        Objective::MinTtft => vec![ttft, devices, offloaded, tokens],
        Objective::MaxThroughput => vec![per_device, devices, offloaded, tokens],
    };
    for order in figures {
        if order != Ordering::Equal {
            return order == Ordering::Less;
        }
    }
    if a.option != b.option {
        return a.option < b.option;
    }
    for (x, y) in a.stages.iter().zip(&b.stages) {
        let (x, y) = (
            (
                x.end_layer,
                x.kind,
                x.offloaded_layers,
                x.kv_offloaded_layers,
                x.kv_offloaded_sequences,
            ),
            (
                y.end_layer,
                y.kind,
                y.offloaded_layers,
                y.kv_offloaded_layers,
                y.kv_offloaded_sequences,
            ),
        );
        if x != y {
            return x < y;
        }
    }
    a.stages.len() < b.stages.len()
}

/// The next strictly increasing sequence of cut points in `1..n`.
fn next_cuts(cuts: &mut [u32], n: u32) -> bool {
    let k = cuts.len();
    for i in (0..k).rev() {
        let ceiling = n - (k - i) as u32;
        if cuts[i] < ceiling {
            cuts[i] += 1;
            for j in i + 1..k {
                cuts[j] = cuts[j - 1] + 1;
            }
            return true;
        }
    }
    false
}

/// The next sequence of kinds, counting in base `kinds`.
fn next_kinds(sequence: &mut [u32], kinds: u32) -> bool {
    for digit in sequence.iter_mut().rev() {
        if *digit + 1 < kinds {
            *digit += 1;
            return true;
        }
        *digit = 0;
    }
    false
}

/// One way a stage fits, evaluated from the definition.
#[derive(Clone, Copy, Debug)]
struct Way {
    layers: u32,
    kv_layers: u32,
    kv_sequences: u64,
    units: u128,
    host: u128,
    tokens: Option<u128>,
    decode: u128,
    prefill: u128,
}

/// What a stage holds with its first `l` layers' weights, its first `x` layers' KV and
/// `s` sequences' KV of the layer after them on the host: `(device bytes, units it may
/// offload, device KV bytes per token, device KV bytes)`, summed layer by layer.
fn held(
    problem: &Problem,
    index: usize,
    range: (usize, usize),
    extra: u128,
    l: usize,
    (x, s): (usize, u128),
) -> (u128, u128, u128, u128) {
    let option = &problem.options[index];
    let sequences = u128::from(problem.sequences);
    let mut bytes = extra;
    let mut units = 0u128;
    let mut per_token = 0u128;
    let mut kv = 0u128;
    let mut weights_staging = 0u128;
    let mut kv_staging = 0u128;
    for (i, layer) in option.layers[range.0..range.1].iter().enumerate() {
        if i < l {
            weights_staging = weights_staging.max(u128::from(layer.weight_bytes));
        } else {
            bytes += u128::from(layer.weight_bytes);
            units += u128::from(layer.units);
        }
        if i < x {
            kv_staging = kv_staging.max(u128::from(layer.kv_sequence_bytes) * sequences);
        } else if i == x && s > 0 {
            // `s` sequences on the host, the others on the device with the layer's tokens.
            kv_staging = kv_staging.max(u128::from(layer.kv_sequence_bytes) * s);
            kv += u128::from(layer.kv_sequence_bytes) * (sequences - s);
            per_token += u128::from(layer.kv_token_bytes);
        } else {
            kv += u128::from(layer.kv_sequence_bytes) * sequences;
            per_token += u128::from(layer.kv_token_bytes);
        }
    }
    (
        bytes + weights_staging + kv_staging + kv,
        units,
        per_token,
        kv,
    )
}

/// Every minimal way the stage fits: `(l, q, e)` (`q` the KV units on the host: `x` whole
/// layers, or with the sequence grain `x` layers and `s` sequences of the next) such that
/// the stage fits and lowering any one of them by one does not (e is then the fewest for
/// its `l` and `q`). Every `(l, q)` of the grain is tried.
fn stage_ways(
    problem: &Problem,
    index: usize,
    kind: usize,
    range: (usize, usize),
    extra: u128,
) -> Vec<Way> {
    let option = &problem.options[index];
    let usable = u128::from(problem.kinds[kind].usable_bytes);
    let unit = u128::from(option.unit_bytes);
    let host = problem.host_bytes.is_some();
    let len = range.1 - range.0;
    let max_l = if host && problem.layer_offload {
        len
    } else {
        0
    };
    let max_x = if host && problem.kv_offload { len } else { 0 };
    let sequences = u128::from(problem.sequences);
    // The KV on the host is `q` units in layer order: whole layers by layer, single
    // sequences of a layer with the sequence grain (`q = x x sequences + s`).
    let per_layer = if problem.kv_sequence_grain {
        sequences.max(1)
    } else {
        1
    };
    let split = |q: u128| ((q / per_layer) as usize, q % per_layer);
    let fits = |l: usize, q: u128, e: u128| {
        let (bytes, units, _, _) = held(problem, index, range, extra, l, split(q));
        e <= units && bytes <= usable + e * unit
    };
    let mut ways = Vec::new();
    for l in 0..=max_l {
        for q in 0..=(max_x as u128 * per_layer) {
            let (x, s) = split(q);
            let (bytes, units, _, _) = held(problem, index, range, extra, l, (x, s));
            // The fewest units: none, or (with a host tier) by stepping from an estimate.
            let mut e: u128 = 0;
            let mut found = bytes <= usable;
            if !found && host && unit > 0 {
                e = ((bytes - usable) / unit).min(units);
                while e <= units {
                    if bytes <= usable + e * unit {
                        found = true;
                        break;
                    }
                    e += 1;
                }
                while found && e > 0 && bytes <= usable + (e - 1) * unit {
                    e -= 1;
                }
            }
            if !found {
                continue;
            }
            // Minimal: one streamed layer fewer, or one unit of KV fewer, does not fit.
            if (l > 0 && fits(l - 1, q, e)) || (q > 0 && fits(l, q - 1, e)) {
                continue;
            }
            let (bytes, _, per_token, kv) = held(problem, index, range, extra, l, (x, s));
            let mut freed = e * unit;
            for (i, layer) in option.layers[range.0..range.1].iter().enumerate() {
                if i < l {
                    freed += u128::from(layer.weight_bytes);
                }
                if i < x {
                    freed += u128::from(layer.kv_sequence_bytes) * sequences;
                } else if i == x {
                    freed += u128::from(layer.kv_sequence_bytes) * s;
                }
            }
            let room = usable + e * unit - (bytes - kv);
            let mut tokens = (per_token > 0).then(|| room / per_token);
            if x > 0 || s > 0 {
                let worst = u128::from(problem.kv_worst_case_tokens);
                tokens = Some(tokens.map_or(worst, |t| t.min(worst)));
            }
            let (mut decode, mut prefill) = (0u128, 0u128);
            if let Some(times) = &option.time {
                let on = &times.kinds[kind];
                for i in range.0..range.1 {
                    decode += u128::from(on.layers[i].decode);
                    prefill += u128::from(on.layers[i].prefill);
                    if i - range.0 < l {
                        if let Some(t) = on.layer_from_host.get(i) {
                            decode += u128::from(t.decode);
                            prefill += u128::from(t.prefill);
                        }
                    }
                    if i - range.0 < x {
                        if let Some(t) = on.kv_from_host.get(i) {
                            decode += u128::from(t.decode);
                            prefill += u128::from(t.prefill);
                        }
                    } else if i - range.0 == x && s > 0 {
                        if let Some(t) = on.kv_from_host.get(i) {
                            decode += u128::from(t.decode) * s / sequences;
                            prefill += u128::from(t.prefill) * s / sequences;
                        }
                    }
                }
                decode += e * u128::from(on.unit.decode);
                prefill += e * u128::from(on.unit.prefill);
            }
            ways.push(Way {
                layers: l as u32,
                kv_layers: x as u32,
                kv_sequences: u64::try_from(s).unwrap_or(u64::MAX),
                units: e,
                host: freed * u128::from(option.degree),
                tokens,
                decode,
                prefill,
            });
        }
    }
    ways
}

/// Every placement of one option, kind sequence and split, evaluated from the definition
/// (each stage's every minimal way to offload); empty when none fits.
fn evaluate(problem: &Problem, index: usize, kinds: &[u32], cuts: &[u32]) -> Vec<Solution> {
    let option = &problem.options[index];
    let p = kinds.len();
    for (kind, capacity) in problem.kinds.iter().enumerate() {
        let used = kinds.iter().filter(|k| **k as usize == kind).count() as u64;
        if used > u64::from(capacity.groups_of(option.degree)) {
            return Vec::new();
        }
    }
    let mut bounds = vec![0u32];
    bounds.extend_from_slice(cuts);
    bounds.push(problem.layer_count);
    let mut per_stage: Vec<Vec<Way>> = Vec::with_capacity(p);
    for s in 0..p {
        let mut extra = u128::from(option.device_bytes);
        if s == 0 {
            extra += u128::from(option.first_bytes);
        }
        if s + 1 == p {
            extra += u128::from(option.last_bytes);
        }
        if p > 1 {
            extra += u128::from(option.pipeline_bytes);
        }
        let range = (bounds[s] as usize, bounds[s + 1] as usize);
        let mut ways = stage_ways(problem, index, kinds[s] as usize, range, extra);
        if let Some(times) = &option.time {
            let on = &times.kinds[kinds[s] as usize];
            for way in &mut ways {
                if s == 0 {
                    way.decode += u128::from(on.first.decode);
                    way.prefill += u128::from(on.first.prefill);
                }
                if s + 1 == p {
                    way.decode += u128::from(on.last.decode);
                    way.prefill += u128::from(on.last.prefill);
                }
                if s > 0 {
                    way.decode += u128::from(times.boundary.decode);
                    way.prefill += u128::from(times.boundary.prefill);
                }
            }
        }
        if ways.is_empty() {
            return Vec::new();
        }
        per_stage.push(ways);
    }
    // Every combination of the stages' ways.
    let mut pick = vec![0usize; p];
    let mut out = Vec::new();
    loop {
        if let Some(s) = combine(problem, index, kinds, &bounds, &per_stage, &pick) {
            out.push(s);
        }
        let mut i = p;
        loop {
            if i == 0 {
                return out;
            }
            i -= 1;
            pick[i] += 1;
            if pick[i] < per_stage[i].len() {
                break;
            }
            pick[i] = 0;
        }
    }
}

/// One combination of the stages' ways as a solution; `None` when the host cannot hold it.
fn combine(
    problem: &Problem,
    index: usize,
    kinds: &[u32],
    bounds: &[u32],
    per_stage: &[Vec<Way>],
    pick: &[usize],
) -> Option<Solution> {
    let option = &problem.options[index];
    let mut host_total: u128 = 0;
    let mut tokens_min: Option<u128> = None;
    let (mut decode_total, mut prefill_total) = (0u128, 0u128);
    let mut stages = Vec::with_capacity(pick.len());
    for (s, &w) in pick.iter().enumerate() {
        let way = per_stage[s][w];
        host_total += way.host;
        if let Some(t) = way.tokens {
            tokens_min = Some(tokens_min.map_or(t, |m| m.min(t)));
        }
        decode_total += way.decode;
        prefill_total += way.prefill;
        stages.push(StageChoice {
            end_layer: bounds[s + 1],
            kind: kinds[s],
            offloaded_units: u64::try_from(way.units).ok()?,
            offloaded_layers: way.layers,
            kv_offloaded_layers: way.kv_layers,
            kv_offloaded_sequences: way.kv_sequences,
        });
    }
    if let Some(host) = problem.host_bytes {
        if host_total > u128::from(host) {
            return None;
        }
    }
    let (tpot_ns, ttft_ns) = match (&option.time, problem.fixed_time) {
        (Some(_), Some(fixed)) => (
            Some(u64::try_from(decode_total + u128::from(fixed.decode)).ok()?),
            Some(u64::try_from(prefill_total + u128::from(fixed.prefill)).ok()?),
        ),
        _ => (None, None),
    };
    Some(Solution {
        option: index as u32,
        stages,
        devices: u64::from(option.degree) * pick.len() as u64,
        offloaded_bytes: u64::try_from(host_total).ok()?,
        kv_tokens: tokens_min.map_or(u64::MAX, |t| u64::try_from(t).unwrap_or(u64::MAX - 1)),
        tpot_ns,
        ttft_ns,
    })
}
