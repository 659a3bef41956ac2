//! The parallel options of a model on a device set, and the placement problem they form:
//! for each tensor-parallel degree the set's domains allow (and each way of splitting
//! routed experts), what every device of a stage holds of every tensor and every layer's
//! state; or why the option is impossible (a tensor whose split the weight format's blocks
//! do not divide, heads that do not divide).

use std::collections::BTreeMap;

use crate::synth::architecture::MixerKind;
use crate::synth::PolicyPreset;

use super::device_set::DeviceSet;
use super::model::{ModelFacts, Rule};
use super::problem::{ExpertSplit, KindCapacity, LayerCost, Objective, ParallelOption, Problem};
use super::shares::{shares_of, ShardCache};
pub use super::shares::{BlockShare, Share};
use super::PlacementError;

/// Bytes of vLLM's custom all-reduce buffers on each rank of a tensor-parallel group of
/// 2, 4, 6 or 8 devices: `meta` (8 MiB plus a small header), `buffer` (8 MiB) and
/// `rank_data` (8 MiB) (`vllm/distributed/device_communicators/custom_all_reduce.py`,
/// `CustomAllreduce`, `max_size = 8192 * 1024`).
pub const ALL_REDUCE_BUFFER_BYTES: u64 = 3 * 8192 * 1024;

/// The degrees vLLM's custom all-reduce serves (`_SUPPORTED_WORLD_SIZES`).
const ALL_REDUCE_DEGREES: [u32; 4] = [2, 4, 6, 8];

/// The choices of a placement beside the model and the set. The default is the command
/// line's: no pinned degree, no host offload, fewest devices, no serving point, the
/// model's own policy, no alternative.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// A pinned tensor-parallel degree.
    pub tensor_parallel: Option<u32>,
    /// A pinned pipeline depth.
    pub pipeline_parallel: Option<u32>,
    /// A pinned split of routed experts under `t > 1` (otherwise the solver tries both).
    pub expert_split: Option<ExpertSplit>,
    /// Whether offload to host memory is allowed: routed expert groups, whole layers'
    /// weights and layers' KV cache, chosen by the solver.
    pub host_offload: bool,
    /// Host memory (overrides the set's host tier).
    pub host_memory: Option<u64>,
    /// With host offload, whether a stage's last host-KV layer keeps only the fewest
    /// sequences that fit on the host (`--kv-offload-grain sequence`) instead of all.
    pub kv_sequence_grain: bool,
    /// The objective.
    pub objective: Objective,
    /// The serving point to time the placement at (needed by the time objectives).
    pub serving: Option<super::timing::Serving>,
    /// A policy preset replacing the model's (`--context`, `--sequences`,
    /// `--scheduled-tokens` set on it).
    pub policy: Option<PolicyPreset>,
    /// An alternative whose cost to report against the placement (`--why-not`).
    pub why_not: Option<super::alternative::Alternative>,
    /// The memory budget every device is held to in place of the policy's share and
    /// reserve: a serving engine's rule (`--engine`; `crate::study::budget::engine_budget`),
    /// for a set of one device kind.
    pub budget: Option<crate::study::budget::Budget>,
}

/// What one option means tensor by tensor: the detail the placement record needs.
#[derive(Clone, Debug)]
pub struct OptionDetail {
    /// Per tensor (the model's order), per rank.
    pub shares: Vec<Vec<Share>>,
    /// Per tensor, the expert group it belongs to (offload units).
    pub unit_of: Vec<Option<(u32, u64)>>,
}

/// An option the model cannot take, and why.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Rejected {
    /// Tensor-parallel degree.
    pub degree: u32,
    /// Expert split.
    pub split: ExpertSplit,
    /// Why.
    pub reason: String,
}

/// The problem of a model on a set, with each option's detail and the rejected options.
#[derive(Clone, Debug)]
pub struct Formed {
    /// The problem.
    pub problem: Problem,
    /// Per option of the problem, its detail.
    pub details: Vec<OptionDetail>,
    /// Options the model cannot take.
    pub rejected: Vec<Rejected>,
    /// Usable bytes per kind.
    pub usable: Vec<u64>,
    /// Notes on what the problem restricts (pinned depth of a tied head).
    pub notes: Vec<String>,
    /// The times by part, with a serving point.
    pub timing: Option<super::timing::Timing>,
    /// The rule of the devices' usable bytes when a serving engine's budget replaces the
    /// policy's ([`Settings::budget`]).
    pub budget_rule: Option<String>,
}

/// KV bytes of one sequence and per token on one rank of `degree`, for layer `layer`, at
/// the policy's context or, with `context`, at a shorter one (a state's tokens become
/// `min(its maximum, context)`: a sliding window stays binding).
pub fn layer_state(
    facts: &ModelFacts,
    layer: u32,
    degree: u32,
    context: Option<u64>,
) -> Result<(u64, u64), String> {
    let d = u64::from(degree);
    let mut sequence = 0u64;
    let mut per_token = 0u64;
    for state in facts.states.iter().filter(|s| s.layer == layer) {
        let token = match state.mixer {
            _ if degree == 1 || state.bytes_per_token == 0 => state.bytes_per_token,
            MixerKind::LatentAttention => state.bytes_per_token,
            MixerKind::Attention => {
                let heads = facts.architecture.attention.key_value_heads;
                let held = if heads >= d { heads / d } else { 1 };
                if heads == 0 || state.bytes_per_token % heads != 0 {
                    return Err(format!(
                        "{}: bytes per token do not divide by heads",
                        state.id
                    ));
                }
                state.bytes_per_token / heads * held
            }
            MixerKind::GatedDelta => {
                return Err(format!(
                    "{}: a gated DeltaNet state that grows with the tokens has no \
                     tensor-parallel rule (its states are per sequence)",
                    state.id
                ))
            }
        };
        let tokens = context.map_or(state.maximum_tokens, |c| c.min(state.maximum_tokens));
        let seq = if state.bytes_per_token == 0 {
            // Not token-scaled (a recurrent state): the plan's bytes, whatever the context;
            // under `t > 1` a gated DeltaNet layer's convolution and recurrent states split
            // by channels and heads (vLLM's `gated_delta_net_state_shape`: `conv_dim / t`
            // channels, `value_heads / t` heads).
            if degree == 1 {
                state.sequence_bytes
            } else if state.mixer == MixerKind::GatedDelta {
                if state.fixed_bytes % d != 0 {
                    return Err(format!(
                        "{}: its {} bytes do not divide by {degree}",
                        state.id, state.fixed_bytes
                    ));
                }
                state
                    .profile
                    .quantize(state.fixed_bytes / d, state.alignment)
                    .ok_or("bytes overflow")?
            } else {
                return Err(format!(
                    "{}: a per-sequence state of a {:?} layer has no tensor-parallel rule",
                    state.id, state.mixer
                ));
            }
        } else if degree == 1 && context.is_none() {
            state.sequence_bytes
        } else {
            let logical = token.checked_mul(tokens).ok_or("bytes overflow")?;
            state
                .profile
                .quantize(logical, state.alignment)
                .ok_or("bytes overflow")?
        };
        sequence = sequence.checked_add(seq).ok_or("bytes overflow")?;
        per_token = per_token.checked_add(token).ok_or("bytes overflow")?;
    }
    Ok((sequence, per_token))
}

/// The option `(degree, split)`: its costs and detail, or why it is impossible.
fn option_of(
    facts: &ModelFacts,
    degree: u32,
    split: ExpertSplit,
    cache: &mut ShardCache,
) -> Result<(ParallelOption, OptionDetail), String> {
    let d = u64::from(degree);
    let query_heads = facts
        .architecture
        .latent
        .map_or(facts.architecture.attention.query_heads, |l| l.query_heads);
    if query_heads % d != 0 {
        return Err(format!(
            "{query_heads} query heads do not divide by {degree}"
        ));
    }
    if let Some(delta) = facts.architecture.gated_delta {
        // vLLM's gated DeltaNet splits its key and value heads (`num_k_heads // tp_size`).
        for (heads, what) in [(delta.key_heads, "key"), (delta.value_heads, "value")] {
            if heads % d != 0 {
                return Err(format!(
                    "{heads} gated DeltaNet {what} heads do not divide by {degree}"
                ));
            }
        }
    }
    let n = facts.layer_count as usize;
    let mut groups_in_layer = vec![0u64; n];
    for t in &facts.tensors {
        if let (super::model::Home::Layer(l), Rule::Expert { group, .. }) = (t.home, t.rule) {
            groups_in_layer[l as usize] = groups_in_layer[l as usize].max(group + 1);
        }
    }
    let overflow = || "bytes overflow".to_owned();
    let mut layers: Vec<LayerCost> = Vec::with_capacity(n);
    for (layer, &groups) in groups_in_layer.iter().enumerate() {
        let (kv_sequence_bytes, kv_token_bytes) = layer_state(facts, layer as u32, degree, None)?;
        let units = match split {
            ExpertSplit::Tensor => groups,
            ExpertSplit::Expert => groups / d,
        };
        layers.push(LayerCost {
            weight_bytes: 0,
            kv_sequence_bytes,
            kv_token_bytes,
            units,
        });
    }
    let mut shares = Vec::with_capacity(facts.tensors.len());
    let mut unit_of = Vec::with_capacity(facts.tensors.len());
    let (mut first, mut last) = (0u64, 0u64);
    let mut rank_bytes: Vec<Vec<u64>> = vec![vec![0; degree as usize]; n];
    let mut unit_sizes: BTreeMap<(u32, u64), u64> = BTreeMap::new();
    for (index, t) in facts.tensors.iter().enumerate() {
        let layer_groups = match t.home {
            super::model::Home::Layer(l) => groups_in_layer[l as usize],
            _ => 0,
        };
        let share = shares_of(facts, index, degree, split, layer_groups, cache)?;
        let unit = match (t.home, t.rule) {
            (super::model::Home::Layer(l), Rule::Expert { group, .. }) => Some((l, group)),
            _ => None,
        };
        if let Some(key) = unit {
            let held = share
                .iter()
                .find(|s| s.part.is_some())
                .map_or(0, |s| s.arena_bytes);
            let size = unit_sizes.entry(key).or_insert(0);
            *size = size.checked_add(held).ok_or_else(overflow)?;
        }
        match t.home {
            super::model::Home::Layer(l) => {
                for (rank, s) in share.iter().enumerate() {
                    if s.part.is_some() {
                        let slot = &mut rank_bytes[l as usize][rank];
                        *slot = slot.checked_add(s.arena_bytes).ok_or_else(overflow)?;
                    }
                }
            }
            super::model::Home::First => {
                first = first
                    .checked_add(share[0].arena_bytes)
                    .ok_or_else(overflow)?
            }
            super::model::Home::Last => {
                last = last
                    .checked_add(share[0].arena_bytes)
                    .ok_or_else(overflow)?
            }
        }
        shares.push(share);
        unit_of.push(unit);
    }
    for (layer, ranks) in rank_bytes.iter().enumerate() {
        let most = ranks.iter().copied().max().unwrap_or(0);
        if ranks.iter().any(|b| *b != most) {
            return Err(format!(
                "layer {layer}: its ranks would hold different bytes ({ranks:?})"
            ));
        }
        layers[layer].weight_bytes = most;
    }
    let mut sizes = unit_sizes.values().copied();
    let unit_bytes = match sizes.next() {
        Some(first_size) if sizes.all(|s| s == first_size) => first_size,
        _ => 0,
    };
    if unit_bytes == 0 {
        for layer in &mut layers {
            layer.units = 0;
        }
    }
    let all_reduce = if ALL_REDUCE_DEGREES.contains(&degree) {
        ALL_REDUCE_BUFFER_BYTES
    } else {
        0
    };
    let device_bytes = facts
        .activation_bytes
        .checked_add(facts.workspace_bytes)
        .and_then(|b| b.checked_add(all_reduce))
        .ok_or_else(overflow)?;
    let pipeline_bytes = 2u64
        .checked_mul(facts.scheduled_tokens)
        .and_then(|b| b.checked_mul(facts.architecture.hidden_size))
        .and_then(|b| b.checked_mul(facts.activation_element_bytes))
        .ok_or_else(overflow)?;
    Ok((
        ParallelOption {
            degree,
            split,
            layers,
            first_bytes: first,
            last_bytes: last,
            device_bytes,
            pipeline_bytes,
            unit_bytes,
            time: None,
        },
        OptionDetail { shares, unit_of },
    ))
}

/// Sequences whose KV cache a placement provisions at the policy's context: the policy's
/// requirement ([`ModelFacts::required_sequences`], one request of the maximum length unless
/// the preset asks for more) and, with a serving point, enough for its `C` requests at their
/// longest lengths, `ceil(C x (I + O) / context)` sequences of the context (exact for
/// full-attention layers, whose KV grows with every token; more than enough for sliding
/// ones), at most `C`.
pub fn required_sequences(facts: &ModelFacts, serving: Option<&super::timing::Serving>) -> u64 {
    let Some(serving) = serving else {
        return facts.required_sequences;
    };
    let (input, output) = serving
        .lengths
        .longest(serving.input_tokens, serving.output_tokens);
    let tokens = u128::from(serving.concurrency) * u128::from(input.saturating_add(output));
    let context = u128::from(facts.context_tokens.max(1));
    let need = u64::try_from(tokens.div_ceil(context)).unwrap_or(u64::MAX);
    facts.required_sequences.max(need.min(serving.concurrency))
}

/// The placement problem of `facts` on `set` under `settings` and the policy `preset`.
pub fn form(
    facts: &ModelFacts,
    set: &DeviceSet,
    preset: &PolicyPreset,
    settings: &Settings,
) -> Result<Formed, PlacementError> {
    if settings.budget.is_some() && set.kinds.len() > 1 {
        return Err(PlacementError::Usage(format!(
            "--engine: a serving engine's memory budget is modelled for one device kind, and the set {} has {}",
            set.name,
            set.kinds.len()
        )));
    }
    let mut usable = Vec::with_capacity(set.kinds.len());
    for kind in &set.kinds {
        let policy = preset
            .runtime_policy(&kind.description)
            .map_err(|e| PlacementError::Synth(Box::new(e)))?;
        usable.push(match &settings.budget {
            Some(budget) => budget.usable_bytes(),
            None => policy
                .memory_capacity_bytes
                .saturating_sub(policy.memory_reserve_bytes),
        });
    }
    let largest_domain = set
        .kinds
        .iter()
        .flat_map(|k| k.per_domain.iter().map(|(_, n)| *n))
        .max()
        .unwrap_or(1);
    let degrees: Vec<u32> = match settings.tensor_parallel {
        Some(0) => return Err(PlacementError::Usage("--tensor-parallel 0: give at least 1".into())),
        Some(t) if t > largest_domain => {
            return Err(PlacementError::Usage(format!(
                "--tensor-parallel {t}: no domain of the set holds {t} devices of one kind (the largest holds {largest_domain})"
            )))
        }
        Some(t) => vec![t],
        None => (1..=largest_domain).collect(),
    };
    let has_experts = facts
        .tensors
        .iter()
        .any(|t| matches!(t.rule, Rule::Expert { .. }));
    if let (Some(split), false) = (settings.expert_split, has_experts) {
        return Err(PlacementError::Usage(format!(
            "--expert-split {}: the model has no routed experts to split; drop the flag",
            split.name()
        )));
    }
    let mut notes = Vec::new();
    let tied = facts.architecture.tie_word_embeddings
        && !facts.tensors.iter().any(|t| t.id == "weight.lm_head");
    let mut pipeline_stages = settings.pipeline_parallel;
    if pipeline_stages == Some(0) {
        return Err(PlacementError::Usage(
            "--pipeline-parallel 0: give at least 1".into(),
        ));
    }
    if tied {
        if pipeline_stages.is_some_and(|p| p > 1) {
            return Err(PlacementError::Usage(
                "--pipeline-parallel: the model ties its head to its embedding, and a tied head on a later stage is not modelled; give --pipeline-parallel 1".into(),
            ));
        }
        pipeline_stages = Some(1);
        notes.push("the head is tied to the embedding: one pipeline stage (a tied head on a later stage is not modelled)".to_owned());
    }
    let mut options = Vec::new();
    let mut details = Vec::new();
    let mut rejected = Vec::new();
    let mut cache = ShardCache::default();
    for degree in degrees {
        if set
            .kinds
            .iter()
            .enumerate()
            .all(|(k, _)| set.groups(k, degree) == 0)
        {
            continue;
        }
        let splits: &[ExpertSplit] = match settings.expert_split {
            _ if !has_experts || degree == 1 => &[ExpertSplit::Tensor],
            Some(ExpertSplit::Tensor) => &[ExpertSplit::Tensor],
            Some(ExpertSplit::Expert) => &[ExpertSplit::Expert],
            None => &[ExpertSplit::Tensor, ExpertSplit::Expert],
        };
        for &split in splits {
            match option_of(facts, degree, split, &mut cache) {
                Ok((option, detail)) => {
                    options.push(option);
                    details.push(detail);
                }
                Err(reason) => rejected.push(Rejected {
                    degree,
                    split,
                    reason,
                }),
            }
        }
    }
    let kinds = set
        .kinds
        .iter()
        .enumerate()
        .map(|(k, _)| KindCapacity {
            usable_bytes: usable[k],
            groups: options
                .iter()
                .map(|o| (o.degree, set.groups(k, o.degree)))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect(),
        })
        .collect();
    let host_bytes = if settings.host_offload {
        Some(
            settings
                .host_memory
                .or(set.host_memory_bytes)
                .ok_or_else(|| {
                    PlacementError::Usage(
                        "--host-offload: the set has no host tier; give --host-memory BYTES".into(),
                    )
                })?,
        )
    } else {
        None
    };
    let sequences = required_sequences(facts, settings.serving.as_ref());
    let mut problem = Problem {
        layer_count: facts.layer_count,
        options,
        kinds,
        sequences,
        layer_offload: host_bytes.is_some(),
        kv_offload: host_bytes.is_some(),
        kv_sequence_grain: host_bytes.is_some() && settings.kv_sequence_grain,
        kv_worst_case_tokens: sequences.saturating_mul(facts.context_tokens),
        host_bytes,
        pipeline_stages,
        objective: settings.objective,
        fixed_time: None,
    };
    let timing = match &settings.serving {
        Some(serving) => Some(super::timing::attach(&mut problem, facts, set, serving)?),
        None if settings.objective.is_time() => {
            return Err(PlacementError::Usage(format!(
                "--placement-objective {}: a time objective needs a serving point: give --concurrency, --input-tokens and --output-tokens",
                settings.objective.name()
            )))
        }
        None => None,
    };
    Ok(Formed {
        problem,
        details,
        rejected,
        usable,
        notes,
        timing,
        budget_rule: settings.budget.as_ref().map(|b| b.rule.clone()),
    })
}
