//! The parallel options of a model on a device set, and the placement problem they form:
//! for each tensor-parallel degree the set's domains allow (and each way of splitting
//! routed experts), what every device of a stage holds of every tensor and every layer's
//! state; or why the option is impossible (a tensor whose split the weight format's blocks
//! do not divide, heads that do not divide).

use std::collections::BTreeMap;

use crate::request::WeightEncoding;
use crate::synth::architecture::MixerKind;
use crate::synth::PolicyPreset;

use super::device_set::DeviceSet;
use super::model::{layout_of, names_key, ModelFacts, Rule};
use super::problem::{ExpertSplit, KindCapacity, LayerCost, Objective, ParallelOption, Problem};
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
    /// Whether offload to host memory is allowed: routed expert groups, whole layers'
    /// weights and layers' KV cache, chosen by the solver.
    pub host_offload: bool,
    /// Host memory (overrides the set's host tier).
    pub host_memory: Option<u64>,
    /// The objective.
    pub objective: Objective,
    /// The serving point to time the placement at (needed by the time objectives).
    pub serving: Option<super::timing::Serving>,
    /// A policy preset replacing the model's (`--context`, `--sequences`,
    /// `--scheduled-tokens` set on it).
    pub policy: Option<PolicyPreset>,
    /// An alternative whose cost to report against the placement (`--why-not`).
    pub why_not: Option<super::alternative::Alternative>,
}

/// One tensor's share on one rank of a group of `degree`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Share {
    /// The part held (`None`: this rank holds nothing of it).
    pub part: Option<u64>,
    /// Parts the tensor is split into.
    pub parts: u64,
    /// Physical bytes of one part.
    pub part_bytes: u64,
    /// Bytes of one part as a weight arena lays it out (components aligned).
    pub arena_bytes: u64,
    /// Bytes of `part_bytes` every part holds whole (a per-tensor scale, or per-channel
    /// scales under a split of the input axis): the parts add up to the tensor plus
    /// `parts - 1` copies of them.
    pub replicated_bytes: u64,
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
}

type ShardCache = BTreeMap<String, Result<(u64, u64, u64), String>>;

/// The physical, arena and replicated bytes of one part of a tensor with `axis` divided by
/// `divisor`, in the format and class of the tensor, when the part keeps the tensor's
/// encodings. Each component of the part is laid out as the single-device plan lays out the
/// tensor; a component whose dimensions the split leaves unchanged (a per-tensor scale, or
/// per-channel scales when the input axis is split) is held whole by every part, as vLLM's
/// linear layers load it; every other component must split exactly (`divisor` parts add up
/// to it). A block-quantized format (fp8 128x128 blocks with one f32 scale each) needs each
/// shard boundary on a block boundary: the part's extent along the split axis must be a
/// multiple of the block, else the engine refuses the degree (vLLM's
/// `Fp8LinearMethod.create_weights`, docs/placement.md "Quantized shards").
fn part_bytes(
    facts: &ModelFacts,
    tensor: usize,
    axis: usize,
    divisor: u64,
    cache: &mut ShardCache,
) -> Result<(u64, u64, u64), String> {
    let t = &facts.tensors[tensor];
    let key = format!(
        "{:?} {:?} {:?} {axis} {divisor}",
        t.dims,
        t.class,
        names_key(&t.names)
    );
    if let Some(hit) = cache.get(&key) {
        return hit.clone();
    }
    let answer = (|| {
        let extent = *t.dims.get(axis).ok_or("no such axis")?;
        if divisor == 0 || extent % divisor != 0 {
            return Err(format!(
                "{}: dimension {axis} ({extent}) does not divide by {divisor}",
                t.id
            ));
        }
        let mut dims = t.dims.clone();
        dims[axis] = extent / divisor;
        if let Some(block) = block_along(facts.format, &t.components, t.dims.len(), axis) {
            if dims[axis] % block != 0 {
                return Err(format!(
                    "{}: a part of {} along dimension {axis} does not end on a {block}-value \
                     block of the {} format (the engine refuses a shard boundary inside a block)",
                    t.id,
                    dims[axis],
                    facts.format.name()
                ));
            }
        }
        let components =
            layout_of(facts.format, &t.id, &dims, t.class, &t.names).ok_or_else(|| {
                format!(
                    "{}: a part of {} along dimension {axis} is not a whole number of the {} \
                     format's blocks (no layout of the part {dims:?})",
                    t.id,
                    dims[axis],
                    facts.format.name()
                )
            })?;
        let same_encodings = components.len() == t.components.len()
            && components
                .iter()
                .zip(&t.components)
                .all(|((_, a), (_, b))| encoding_kind(a) == encoding_kind(b));
        if !same_encodings {
            return Err(format!(
                "{}: a part {dims:?} does not keep the {} format's blocks",
                t.id,
                facts.format.name()
            ));
        }
        let bytes_of = |d: &[u64], e: &WeightEncoding| {
            d.iter()
                .try_fold(1u64, |a, &x| a.checked_mul(x))
                .and_then(|n| e.physical_bytes(n))
        };
        let (mut physical, mut replicated) = (0u64, 0u64);
        for ((part_dims, encoding), (whole_dims, _)) in components.iter().zip(&t.components) {
            let part = bytes_of(part_dims, encoding).ok_or("bytes overflow")?;
            physical = physical.checked_add(part).ok_or("bytes overflow")?;
            if part_dims == whole_dims {
                replicated = replicated.checked_add(part).ok_or("bytes overflow")?;
                continue;
            }
            let whole = bytes_of(whole_dims, encoding).ok_or("bytes overflow")?;
            if part.checked_mul(divisor) != Some(whole) {
                return Err(format!(
                    "{}: {divisor} parts {part_dims:?} of its component {whole_dims:?} \
                     ({part} bytes each) do not add up to its {whole} bytes",
                    t.id
                ));
            }
        }
        let split = physical - replicated;
        if split
            .checked_mul(divisor)
            .and_then(|b| b.checked_add(replicated))
            != Some(t.bytes)
        {
            return Err(format!(
                "{}: {divisor} parts of {physical} bytes ({replicated} held by every part) \
                 do not add up to its {} bytes",
                t.id, t.bytes
            ));
        }
        let arena = ModelFacts::arena_bytes(&components).ok_or("bytes overflow")?;
        Ok((physical, arena, replicated))
    })();
    cache.insert(key, answer.clone());
    answer
}

/// The block (values along `axis`) of a block-quantized weight format's scale grid: the
/// scales component has the tensor's rank and one entry per `block x block` tile.
fn block_along(
    format: crate::synth::WeightFormat,
    components: &[(Vec<u64>, WeightEncoding)],
    rank: usize,
    axis: usize,
) -> Option<u64> {
    let crate::synth::WeightFormat::Quantized(scheme) = format else {
        return None;
    };
    let crate::synth::quantization::Granularity::Block(rows, columns) = scheme.granularity else {
        return None;
    };
    // Only a tensor the scheme quantized carries the block grid (a dense head does not).
    let quantized = components
        .iter()
        .any(|(_, e)| matches!(e, WeightEncoding::BlockQuantized(_)));
    if !quantized || rank < 2 {
        return None;
    }
    if axis == rank - 1 {
        Some(columns)
    } else if axis == rank - 2 {
        Some(rows)
    } else {
        None
    }
}

fn encoding_kind(encoding: &WeightEncoding) -> String {
    format!("{encoding:?}")
}

/// Every rank's share of tensor `index` at `degree` under `split`.
fn shares_of(
    facts: &ModelFacts,
    index: usize,
    degree: u32,
    split: ExpertSplit,
    groups_in_layer: u64,
    cache: &mut ShardCache,
) -> Result<Vec<Share>, String> {
    let t = &facts.tensors[index];
    let d = u64::from(degree);
    let whole = ModelFacts::arena_bytes(&t.components).ok_or("bytes overflow")?;
    let all = |share: Share| Ok(vec![share; degree as usize]);
    let replicated = Share {
        part: Some(0),
        parts: 1,
        part_bytes: t.bytes,
        arena_bytes: whole,
        replicated_bytes: 0,
    };
    if degree == 1 {
        return all(replicated);
    }
    let split_by =
        |axis: usize, parts: u64, cache: &mut ShardCache| -> Result<Vec<Share>, String> {
            let (physical, arena, replicated) = part_bytes(facts, index, axis, parts, cache)?;
            Ok((0..d)
                .map(|rank| Share {
                    part: Some(rank * parts / d),
                    parts,
                    part_bytes: physical,
                    arena_bytes: arena,
                    replicated_bytes: replicated,
                })
                .collect())
        };
    match t.rule {
        Rule::Replicate => all(replicated),
        Rule::Split { axis } => split_by(axis, d, cache),
        Rule::KvHeads { axis, heads } => {
            if heads >= d {
                if heads % d != 0 {
                    return Err(format!("{heads} KV heads do not divide by {degree}"));
                }
                split_by(axis, d, cache)
            } else {
                if d % heads != 0 {
                    return Err(format!(
                        "{degree} ranks are not a multiple of the {heads} KV heads"
                    ));
                }
                split_by(axis, heads, cache)
            }
        }
        Rule::Expert { axis, group } => match split {
            ExpertSplit::Tensor => match axis {
                Some(axis) => split_by(axis, d, cache),
                None => all(replicated),
            },
            ExpertSplit::Expert => {
                if groups_in_layer % d != 0 {
                    return Err(format!(
                        "{groups_in_layer} expert groups per layer do not divide by {degree}"
                    ));
                }
                let owner = group / (groups_in_layer / d);
                Ok((0..d)
                    .map(|rank| Share {
                        part: (rank == owner).then_some(0),
                        ..replicated.clone()
                    })
                    .collect())
            }
        },
    }
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

/// The placement problem of `facts` on `set` under `settings` and the policy `preset`.
pub fn form(
    facts: &ModelFacts,
    set: &DeviceSet,
    preset: &PolicyPreset,
    settings: &Settings,
) -> Result<Formed, PlacementError> {
    let mut usable = Vec::with_capacity(set.kinds.len());
    for kind in &set.kinds {
        let policy = preset
            .runtime_policy(&kind.description)
            .map_err(|e| PlacementError::Synth(Box::new(e)))?;
        usable.push(
            policy
                .memory_capacity_bytes
                .saturating_sub(policy.memory_reserve_bytes),
        );
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
    let mut cache = ShardCache::new();
    for degree in degrees {
        if set
            .kinds
            .iter()
            .enumerate()
            .all(|(k, _)| set.groups(k, degree) == 0)
        {
            continue;
        }
        let splits: &[ExpertSplit] = if has_experts && degree > 1 {
            &[ExpertSplit::Tensor, ExpertSplit::Expert]
        } else {
            &[ExpertSplit::Tensor]
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
    let mut problem = Problem {
        layer_count: facts.layer_count,
        options,
        kinds,
        sequences: facts.sequences,
        layer_offload: host_bytes.is_some(),
        kv_offload: host_bytes.is_some(),
        kv_worst_case_tokens: facts.sequences.saturating_mul(facts.context_tokens),
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
    })
}
