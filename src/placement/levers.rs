//! Why no placement fits, as levers with exact amounts: the fewest devices to add to one
//! kind of the set, the least host offload (expert groups, streamed layers, host KV and the
//! host memory they take), the longest context and the most sequences that fit, and the
//! largest smaller weight format that fits. Each amount is found by solving the placement
//! problem with the lever moved (the solver as the oracle), so it is exact under the same
//! rules.

use serde::{Deserialize, Serialize};

use crate::builder::BuildOptions;
use crate::synth::{ModelSource, PolicyPreset};

use super::device_set::DeviceSet;
use super::model::ModelFacts;
use super::options::Settings;
use super::options::{layer_state, Formed};
use super::problem::{Objective, Problem};
use super::solve::solve;

/// The most devices the more-devices lever adds to one kind.
pub const MAX_ADDED_DEVICES: u32 = 64;

/// One way to make the model fit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "lever")]
pub enum Lever {
    /// Add devices of one kind (to its first domain).
    MoreDevices {
        /// The device file.
        device_file: String,
        /// Devices to add.
        added: u32,
        /// Devices the placement then uses.
        devices_used: u64,
    },
    /// Offload to host memory: the least-offloaded placement with unlimited host memory.
    Offload {
        /// Expert-group shards moved to the host, over every device.
        units: u64,
        /// Layers whose weights are streamed from the host (per device group, summed over
        /// the stages).
        #[serde(default)]
        layers: u64,
        /// Layers whose KV cache lives on the host, whole (summed over the stages; a layer
        /// of which the sequence grain keeps some sequences there counts in `kv_bytes`
        /// only).
        #[serde(default)]
        kv_layers: u64,
        /// Host bytes of the expert groups.
        #[serde(default)]
        expert_bytes: u64,
        /// Host bytes of the streamed layers' weights.
        #[serde(default)]
        layer_bytes: u64,
        /// Host bytes of the KV cache.
        #[serde(default)]
        kv_bytes: u64,
        /// Host bytes they take.
        host_bytes: u64,
        /// Devices the placement then uses.
        #[serde(default)]
        devices_used: u64,
    },
    /// Fewer sequences at once.
    FewerSequences {
        /// The most sequences that fit.
        sequences: u64,
    },
    /// A smaller weight format.
    SmallerFormat {
        /// The format's name.
        weight_format: String,
        /// Its weight bytes (the single-device plan's).
        weight_bytes: u64,
        /// Devices the placement then uses.
        devices_used: u64,
    },
    /// A shorter context.
    ShorterContext {
        /// The longest context (tokens) that fits.
        context_tokens: u64,
    },
}

impl Lever {
    /// The lever in words.
    pub fn text(&self) -> String {
        match self {
            Lever::MoreDevices {
                device_file,
                added,
                devices_used,
            } => format!(
                "add {added} device(s) of {device_file} (the placement then uses {devices_used})"
            ),
            Lever::Offload {
                units,
                layers,
                kv_layers,
                expert_bytes,
                layer_bytes,
                kv_bytes,
                host_bytes,
                devices_used,
            } => {
                let mut parts = Vec::new();
                if *units > 0 {
                    parts.push(format!("{units} expert-group shards, {expert_bytes} bytes"));
                }
                if *layers > 0 {
                    parts.push(format!(
                        "the weights of {layers} layer(s) streamed, {layer_bytes} bytes"
                    ));
                }
                if *kv_layers > 0 {
                    parts.push(format!(
                        "the KV cache of {kv_layers} layer(s), {kv_bytes} bytes"
                    ));
                }
                format!(
                    "--host-offload with at least {host_bytes} bytes of host memory ({}; the placement then uses {devices_used} device(s))",
                    parts.join(", ")
                )
            }
            Lever::FewerSequences { sequences } => {
                format!("at most {sequences} sequence(s) at once")
            }
            Lever::SmallerFormat {
                weight_format,
                weight_bytes,
                devices_used,
            } => format!(
                "--weight-format {weight_format} ({weight_bytes} bytes of weights; the placement then uses {devices_used} device(s))"
            ),
            Lever::ShorterContext { context_tokens } => {
                format!("a context of at most {context_tokens} tokens")
            }
        }
    }
}

fn groups_with(set: &DeviceSet, kind: usize, added: u32, degree: u32) -> u32 {
    set.kinds[kind]
        .per_domain
        .iter()
        .enumerate()
        .map(|(i, (_, n))| {
            let n = if i == 0 { n.saturating_add(added) } else { *n };
            n / degree.max(1)
        })
        .sum()
}

/// The problem with the policy's context capped at `context` tokens (`None`: an option's
/// state cannot be recomputed).
fn at_context(formed: &Formed, facts: &ModelFacts, context: u64) -> Option<Problem> {
    let mut problem = formed.problem.clone();
    problem.kv_worst_case_tokens = problem
        .sequences
        .saturating_mul(context.min(facts.context_tokens));
    for option in &mut problem.options {
        for (layer, cost) in option.layers.iter_mut().enumerate() {
            let (sequence, token) =
                layer_state(facts, layer as u32, option.degree, Some(context)).ok()?;
            cost.kv_sequence_bytes = sequence;
            cost.kv_token_bytes = token;
        }
    }
    Some(problem)
}

/// The offload lever of a least-offloaded `solution`: what each stage moves, in devices'
/// shares summed over the group.
fn offload_lever(problem: &Problem, solution: &super::problem::Solution) -> Lever {
    let option = &problem.options[solution.option as usize];
    let t = u64::from(option.degree);
    let (mut units, mut layers, mut kv_layers) = (0u64, 0u64, 0u64);
    let (mut layer_bytes, mut kv_bytes) = (0u64, 0u64);
    let mut start = 0usize;
    for stage in &solution.stages {
        units = units.saturating_add(stage.offloaded_units.saturating_mul(t));
        layers += u64::from(stage.offloaded_layers);
        kv_layers += u64::from(stage.kv_offloaded_layers);
        for (i, layer) in option.layers[start..stage.end_layer as usize]
            .iter()
            .enumerate()
        {
            if i < stage.offloaded_layers as usize {
                layer_bytes = layer_bytes.saturating_add(layer.weight_bytes.saturating_mul(t));
            }
            // Whole layers' KV, then (the sequence grain) some sequences' of the next.
            let on_host = match i.cmp(&(stage.kv_offloaded_layers as usize)) {
                std::cmp::Ordering::Less => problem.sequences,
                std::cmp::Ordering::Equal => stage.kv_offloaded_sequences,
                std::cmp::Ordering::Greater => 0,
            };
            kv_bytes = kv_bytes.saturating_add(
                layer
                    .kv_sequence_bytes
                    .saturating_mul(on_host)
                    .saturating_mul(t),
            );
        }
        start = stage.end_layer as usize;
    }
    Lever::Offload {
        units,
        layers,
        kv_layers,
        expert_bytes: units.saturating_mul(option.unit_bytes),
        layer_bytes,
        kv_bytes,
        host_bytes: solution.offloaded_bytes,
        devices_used: solution.devices,
    }
}

/// Weight formats the smaller-format lever tries, largest first: GGUF q8_0 (8.5 bits per
/// weight), fp8 and int8 (8), GGUF q4_K (4.5), GPTQ int4 (4 plus a scale per group).
pub const SMALLER_FORMATS: [&str; 5] = ["gguf-q8_0", "fp8", "int8", "gguf-q4k", "gptq-int4"];

/// The levers that make an infeasible problem fit.
pub fn levers(formed: &Formed, facts: &ModelFacts, set: &DeviceSet) -> Vec<Lever> {
    let mut found = Vec::new();
    for (kind, description) in set.kinds.iter().enumerate() {
        for added in 1..=MAX_ADDED_DEVICES {
            let mut problem = formed.problem.clone();
            problem.objective = Objective::FewestDevices;
            for (degree, groups) in &mut problem.kinds[kind].groups {
                *groups = groups_with(set, kind, added, *degree);
            }
            if let Some(solution) = solve(&problem) {
                found.push(Lever::MoreDevices {
                    device_file: description.file.display().to_string(),
                    added,
                    devices_used: solution.devices,
                });
                break;
            }
        }
    }
    let mut problem = formed.problem.clone();
    problem.objective = Objective::LeastOffloaded;
    problem.host_bytes = Some(u64::MAX);
    problem.layer_offload = true;
    problem.kv_offload = true;
    if let Some(solution) = solve(&problem) {
        found.push(offload_lever(&problem, &solution));
    }
    // The most sequences with the policy's activations and workspaces: feasibility only
    // grows as they drop (the KV cache is sequences x bytes per sequence). A lower bound of
    // the most that fit (activations may shrink with the sequences); `place` refines it by
    // synthesizing the model at each probe.
    let fits_sequences = |sequences: u64| {
        let mut p = formed.problem.clone();
        p.sequences = sequences;
        p.kv_worst_case_tokens = sequences.saturating_mul(facts.context_tokens);
        solve(&p).is_some()
    };
    if formed.problem.sequences > 1 && fits_sequences(1) {
        let (mut low, mut high) = (1u64, formed.problem.sequences);
        while high - low > 1 {
            let middle = low + (high - low) / 2;
            if fits_sequences(middle) {
                low = middle;
            } else {
                high = middle;
            }
        }
        found.push(Lever::FewerSequences { sequences: low });
    }
    // The longest context: feasibility only grows as the context shrinks (every state's
    // bytes are non-decreasing in its tokens), so bisect.
    let fits =
        |context: u64| at_context(formed, facts, context).is_some_and(|p| solve(&p).is_some());
    if facts.context_tokens > 1 && fits(1) {
        let (mut low, mut high) = (1u64, facts.context_tokens);
        while high - low > 1 {
            let middle = low + (high - low) / 2;
            if fits(middle) {
                low = middle;
            } else {
                high = middle;
            }
        }
        found.push(Lever::ShorterContext {
            context_tokens: low,
        });
    }
    found
}

/// Whether the model places on `set` under the fewest-devices objective with `preset`.
pub fn places_with(
    source: &ModelSource,
    set: &DeviceSet,
    settings: &Settings,
    options: &BuildOptions,
    preset: &PolicyPreset,
) -> bool {
    let first = &set.kinds[0];
    let fewest = Settings {
        objective: Objective::FewestDevices,
        serving: None,
        why_not: None,
        ..settings.clone()
    };
    ModelFacts::gather(source, &first.description, &first.file, options, preset)
        .ok()
        .and_then(|facts| super::options::form(&facts, set, preset, &fewest).ok())
        .is_some_and(|formed| solve(&formed.problem).is_some())
}

/// The most sequences that place, from `fits` (which the problem with the policy's
/// activations and workspaces places, so the model synthesized at it places too: they only
/// shrink with fewer sequences) up to the policy's (which does not): a bisection in which
/// every probe synthesizes and plans the model at that many sequences, so the amount is
/// exact.
pub fn most_sequences(
    source: &ModelSource,
    set: &DeviceSet,
    settings: &Settings,
    options: &BuildOptions,
    preset: &PolicyPreset,
    fits: u64,
) -> u64 {
    let (mut low, mut high) = (fits, u64::from(preset.maximum_active_sequences));
    while high > low + 1 {
        let middle = low + (high - low) / 2;
        let at = u32::try_from(middle).map(|m| preset.with_sequence_ceiling(m));
        if at.is_ok_and(|at| places_with(source, set, settings, options, &at)) {
            low = middle;
        } else {
            high = middle;
        }
    }
    low
}
