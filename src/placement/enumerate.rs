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
            total = total.saturating_add(kinds_sequences.saturating_mul(splits));
        }
    }
    total
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
                    if let Some(s) = evaluate(problem, index, &kinds, &cuts) {
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
        if (x.end_layer, x.kind) != (y.end_layer, y.kind) {
            return (x.end_layer, x.kind) < (y.end_layer, y.kind);
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

/// One placement, evaluated from the definition; `None` when it does not fit.
fn evaluate(problem: &Problem, index: usize, kinds: &[u32], cuts: &[u32]) -> Option<Solution> {
    let option = &problem.options[index];
    let p = kinds.len();
    for (kind, capacity) in problem.kinds.iter().enumerate() {
        let used = kinds.iter().filter(|k| **k as usize == kind).count() as u64;
        if used > u64::from(capacity.groups_of(option.degree)) {
            return None;
        }
    }
    let mut bounds = vec![0u32];
    bounds.extend_from_slice(cuts);
    bounds.push(problem.layer_count);
    let mut stages = Vec::new();
    let mut host_total: u128 = 0;
    let mut tokens_min = u64::MAX;
    // The times, from the definition: each stage's layers one by one on its kind, its
    // extra nodes, its offloaded units' transfers; then the sends and the fixed time.
    let mut decode_total: u128 = 0;
    let mut prefill_total: u128 = 0;
    for s in 0..p {
        let usable = u128::from(problem.kinds[kinds[s] as usize].usable_bytes);
        let mut held: u128 = u128::from(option.device_bytes);
        let mut per_token: u128 = 0;
        let mut kv: u128 = 0;
        let mut units: u128 = 0;
        for layer in &option.layers[bounds[s] as usize..bounds[s + 1] as usize] {
            held += u128::from(layer.weight_bytes);
            kv += u128::from(layer.kv_sequence_bytes) * u128::from(problem.sequences);
            per_token += u128::from(layer.kv_token_bytes);
            units += u128::from(layer.units);
        }
        if s == 0 {
            held += u128::from(option.first_bytes);
        }
        if s + 1 == p {
            held += u128::from(option.last_bytes);
        }
        if p > 1 {
            held += u128::from(option.pipeline_bytes);
        }
        // The fewest units whose removal lets the stage fit.
        let mut offloaded: u128 = 0;
        while held + kv > usable + offloaded * u128::from(option.unit_bytes) {
            if problem.host_bytes.is_none() || option.unit_bytes == 0 || offloaded == units {
                return None;
            }
            let short = held + kv - usable - offloaded * u128::from(option.unit_bytes);
            // Jump close to the answer, then step: the loop checks the definition.
            offloaded += (short / u128::from(option.unit_bytes))
                .max(1)
                .min(units - offloaded);
        }
        let freed = offloaded * u128::from(option.unit_bytes);
        host_total += freed * u128::from(option.degree);
        if let Some(times) = &option.time {
            let on = &times.kinds[kinds[s] as usize];
            for l in bounds[s]..bounds[s + 1] {
                decode_total += u128::from(on.layers[l as usize].decode);
                prefill_total += u128::from(on.layers[l as usize].prefill);
            }
            decode_total += offloaded * u128::from(on.unit.decode);
            prefill_total += offloaded * u128::from(on.unit.prefill);
            if s == 0 {
                decode_total += u128::from(on.first.decode);
                prefill_total += u128::from(on.first.prefill);
            }
            if s + 1 == p {
                decode_total += u128::from(on.last.decode);
                prefill_total += u128::from(on.last.prefill);
            }
            if s > 0 {
                decode_total += u128::from(times.boundary.decode);
                prefill_total += u128::from(times.boundary.prefill);
            }
        }
        if per_token > 0 {
            let tokens = (usable + freed - held) / per_token;
            tokens_min = tokens_min.min(u64::try_from(tokens).unwrap_or(u64::MAX - 1));
        }
        stages.push(StageChoice {
            end_layer: bounds[s + 1],
            kind: kinds[s],
            offloaded_units: u64::try_from(offloaded).ok()?,
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
        devices: u64::from(option.degree) * p as u64,
        offloaded_bytes: u64::try_from(host_total).ok()?,
        kv_tokens: tokens_min,
        tpot_ns,
        ttft_ns,
    })
}
