//! The placement plan: a solution written out device by device (its stage, rank, layers,
//! the shard of every tensor it holds, its memory items and capacity check), the host's
//! offloaded shards, and the canonical SHA-256 of it all as the placement id.

use serde::{Deserialize, Serialize};

use super::device_set::DeviceSet;
use super::model::{Home, ModelFacts};
use super::options::Formed;
use super::problem::{ExpertSplit, Objective, Solution};
use super::PlacementError;

/// One tensor of the model: what its shards must add up to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorTotal {
    /// Weight id.
    pub id: String,
    /// Physical bytes.
    pub bytes: u64,
    /// Its layer (`null`: the embedding, on the first stage, or a last-stage tensor).
    pub layer: Option<u32>,
    /// `first`, `layer` or `last`.
    pub home: String,
    /// How it splits block-rounded, when it does (absent: an even split, or held whole).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<TensorBlocks>,
}

/// A tensor split block-rounded over the ranks (vLLM's gpt-oss mxfp4 loader,
/// docs/placement.md "Quantized shards"): `count` blocks along its split axis of `bytes`
/// bytes each (every component's share), each rank a buffer of `⌈count / parts⌉` blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorBlocks {
    /// Blocks along the split axis.
    pub count: u64,
    /// Bytes of one block.
    pub bytes: u64,
}

/// One part of a tensor held by a device or the host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardRecord {
    /// Weight id.
    pub tensor: String,
    /// Which part.
    pub part: u64,
    /// Parts the tensor is split into.
    pub parts: u64,
    /// Physical bytes of the part.
    pub bytes: u64,
    /// Bytes it takes in a weight arena (components aligned to 256 bytes).
    pub arena_bytes: u64,
    /// Bytes of the part every part holds whole (a per-tensor scale; absent: none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replicated_bytes: u64,
    /// Under a block-rounded split, the blocks of the tensor the part holds; `bytes` is the
    /// padded buffer of `⌈count / parts⌉` blocks, zeros past them (absent: an even split).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<u64>,
}

/// A device's memory, item by item (docs/placement.md says which rule each follows).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryItems {
    /// Σ arena bytes of its shards.
    pub weights: u64,
    /// KV cache and sequence state: sequences x bytes of one sequence.
    pub kv_cache: u64,
    /// Activations (the single-device plan's, at the ceilings).
    pub activations: u64,
    /// Workspaces (the single-device plan's, at the ceilings).
    pub workspaces: u64,
    /// Tensor-parallel all-reduce buffers and the activations received between stages.
    pub communication: u64,
    /// Staging buffers of host offload: the largest streamed layer's weights plus the
    /// largest host-resident layer's KV cache (sequences x its bytes per sequence).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub staging: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One layer's KV cache kept in host memory for a device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostKv {
    /// The layer.
    pub layer: u32,
    /// Its KV bytes of one sequence (the device's share).
    pub sequence_bytes: u64,
    /// The sequences whose KV of the layer is on the host, when not all (the sequence
    /// grain: the others stay on the device).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequences: Option<u64>,
}

/// One device of the placement.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacedDevice {
    /// Device id in the set (`gpu.N`).
    pub id: String,
    /// Its description's name.
    pub name: String,
    /// Its domain.
    pub domain: String,
    /// Its stage.
    pub stage: u32,
    /// Its rank in the stage's tensor-parallel group.
    pub rank: u32,
    /// Usable bytes (the policy's share less its reserve).
    pub usable_bytes: u64,
    /// KV bytes of one sequence on it (a layer whose KV is partly on the host counted
    /// whole).
    pub kv_sequence_bytes: u64,
    /// KV bytes one token adds on it.
    pub kv_token_bytes: u64,
    /// Its memory items.
    pub items: MemoryItems,
    /// Σ items.
    pub total_bytes: u64,
    /// usable - total (negative: over capacity; a valid placement has none).
    pub headroom_bytes: i128,
    /// The shards it holds.
    pub shards: Vec<ShardRecord>,
    /// Layers whose weights (its shares) live in host memory and are streamed to it in
    /// every step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub streamed_layers: Vec<u32>,
    /// Layers whose KV cache (its share) lives in host memory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_kv: Vec<HostKv>,
}

/// One stage.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacedStage {
    /// Its first layer.
    pub first_layer: u32,
    /// One past its last layer.
    pub end_layer: u32,
    /// Its devices (ids), by rank.
    pub devices: Vec<String>,
    /// Offload units (routed expert groups) each device moved to the host.
    pub offloaded_units: u64,
    /// Its first layers whose weights each device streams from the host.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub offloaded_layers: u32,
    /// Its first layers whose KV cache each device keeps on the host.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub kv_offloaded_layers: u32,
    /// Sequences of its next layer whose KV cache each device keeps on the host (the
    /// sequence grain).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub kv_offloaded_sequences: u64,
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

/// The host tier.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacedHost {
    /// Its memory (`null`: offload off).
    pub memory_bytes: Option<u64>,
    /// Σ arena bytes of the shards it holds plus its KV bytes.
    pub offloaded_bytes: u64,
    /// The shards it holds.
    pub shards: Vec<ShardRecord>,
    /// KV-cache bytes it holds: Σ over devices of sequences x their host KV bytes per
    /// sequence.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub kv_bytes: u64,
}

/// Everything the placement id hashes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacementPayload {
    /// Family id.
    pub model: String,
    /// Weight format.
    pub weight_format: String,
    /// Policy id.
    pub policy: String,
    /// Sequences whose KV cache the placement provisions at the context: the policy's
    /// requirement (`minimum_sequences`, 1 when absent) or, with a serving point, enough for
    /// its requests (docs/placement.md, "Per-device memory").
    pub sequences: u64,
    /// The policy's context.
    pub context_tokens: u64,
    /// The rule of every device's usable bytes when a serving engine's budget replaces the
    /// policy's share and reserve (`--engine`; absent: the policy's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<String>,
    /// The device set's name.
    pub device_set: String,
    /// The objective.
    pub objective: Objective,
    /// Tensor-parallel degree.
    pub tensor_parallel: u32,
    /// Pipeline stages.
    pub pipeline_parallel: u32,
    /// How routed experts split.
    pub expert_split: ExpertSplit,
    /// Decoder layers.
    pub layer_count: u32,
    /// Every tensor of the model.
    pub tensors: Vec<TensorTotal>,
    /// The stages, in pipeline order.
    pub stages: Vec<PlacedStage>,
    /// The devices used, by stage and rank.
    pub devices: Vec<PlacedDevice>,
    /// The host.
    pub host: PlacedHost,
    /// Devices used.
    pub devices_used: u64,
    /// KV tokens that fit (`null`: unbounded).
    pub kv_tokens_that_fit: Option<u64>,
    /// The plan of the whole model on one roomy device of the set's first kind, whose
    /// figures the placement reads.
    pub single_device_plan: String,
}

/// A placement plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacementPlan {
    /// `placement/sha256/<hex>`: the canonical SHA-256 of the payload.
    pub placement_id: String,
    /// The payload.
    pub payload: PlacementPayload,
    /// The problem the placement solves and its solution, kept so that a question about
    /// the stored placement (`explain PLACEMENT.json --why-not tp=4`) is answered by the
    /// same query as at `plan` time; not hashed (the placement id is the payload's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solved: Option<Solved>,
}

impl PlacementPlan {
    /// The plan as compact JSON text (its serde form, as `-o PLACEMENT.json` holds it up to
    /// layout): one instance of the serializer, in the library, shared by every caller.
    pub fn to_json_text(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }

    /// A placement plan from JSON text (the inverse of [`PlacementPlan::to_json_text`],
    /// whatever the layout).
    pub fn from_json_text(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// A placement problem and its optimal solution.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Solved {
    /// The problem.
    pub problem: super::problem::Problem,
    /// Its optimum (the placement of the payload).
    pub solution: Solution,
}

/// The set's devices as `(id, kind, domain)`, in set order.
pub fn device_list(set: &DeviceSet) -> Vec<(String, usize, String)> {
    let mut list = Vec::new();
    for (k, kind) in set.kinds.iter().enumerate() {
        for (domain, count) in &kind.per_domain {
            for _ in 0..*count {
                list.push((format!("gpu.{}", list.len()), k, domain.clone()));
            }
        }
    }
    list
}

fn internal(message: String) -> PlacementError {
    PlacementError::Internal(message)
}

fn add(a: u64, b: u64) -> Result<u64, PlacementError> {
    a.checked_add(b)
        .ok_or_else(|| internal("bytes overflow".to_owned()))
}

/// Writes `solution` out.
pub fn record(
    facts: &ModelFacts,
    set: &DeviceSet,
    formed: &Formed,
    solution: &Solution,
) -> Result<PlacementPlan, PlacementError> {
    let problem = &formed.problem;
    let option = &problem.options[solution.option as usize];
    let detail = &formed.details[solution.option as usize];
    let degree = option.degree as usize;
    let several = solution.stages.len() > 1;
    let mut free = device_list(set);
    let mut stages = Vec::new();
    let mut devices = Vec::new();
    let mut host_shards = Vec::new();
    let mut host_kv_bytes = 0u64;
    let mut start = 0u32;
    let last_stage = solution.stages.len() - 1;
    for (s, stage) in solution.stages.iter().enumerate() {
        let kind = stage.kind as usize;
        // The first domain with `degree` free devices of the kind.
        let domain = set.kinds[kind]
            .per_domain
            .iter()
            .map(|(d, _)| d.clone())
            .find(|d| {
                free.iter()
                    .filter(|(_, k, dd)| *k == kind && dd == d)
                    .count()
                    >= degree
            })
            .ok_or_else(|| internal(format!("stage {s}: no group of {degree} free devices")))?;
        let mut group = Vec::with_capacity(degree);
        free.retain(|entry| {
            if group.len() < degree && entry.1 == kind && entry.2 == domain {
                group.push(entry.clone());
                false
            } else {
                true
            }
        });
        let usable = formed.usable[kind];
        let streamed_end = start + stage.offloaded_layers;
        let kv_end = start + stage.kv_offloaded_layers;
        for (rank, (id, _, domain)) in group.iter().enumerate() {
            let mut shards = Vec::new();
            let mut offloaded = 0u64;
            let mut decided: std::collections::BTreeMap<(u32, u64), bool> = Default::default();
            // Per streamed layer, the bytes of this device's shares (its staging need).
            let mut streamed: std::collections::BTreeMap<u32, u64> = Default::default();
            for (index, tensor) in facts.tensors.iter().enumerate() {
                let here = match tensor.home {
                    Home::First => s == 0,
                    Home::Last => s == last_stage,
                    Home::Layer(l) => l >= start && l < stage.end_layer,
                };
                let share = &detail.shares[index][rank];
                let Some(part) = share.part.filter(|_| here) else {
                    continue;
                };
                let shard = ShardRecord {
                    tensor: tensor.id.clone(),
                    part,
                    parts: share.parts,
                    bytes: share.part_bytes,
                    arena_bytes: share.arena_bytes,
                    replicated_bytes: share.replicated_bytes,
                    blocks: share.blocks.map(|b| b.held),
                };
                // The stage's first `offloaded_layers` layers are streamed: their shares
                // live on the host.
                if let Home::Layer(l) = tensor.home {
                    if l < streamed_end {
                        let held = streamed.entry(l).or_insert(0);
                        *held = add(*held, shard.arena_bytes)?;
                        host_shards.push(shard);
                        continue;
                    }
                }
                // The first `offloaded_units` expert groups this device holds (of the
                // layers it does not stream) go to the host.
                let to_host = match detail.unit_of[index] {
                    Some(unit) if option.unit_bytes > 0 => {
                        *decided.entry(unit).or_insert_with(|| {
                            offloaded += 1;
                            offloaded <= stage.offloaded_units
                        })
                    }
                    _ => false,
                };
                if to_host {
                    host_shards.push(shard);
                } else {
                    shards.push(shard);
                }
            }
            let mut weights = 0u64;
            for shard in &shards {
                weights = add(weights, shard.arena_bytes)?;
            }
            let mut kv_sequence = 0u64;
            let mut kv_token = 0u64;
            let mut host_kv = Vec::new();
            let mut kv_staging = 0u64;
            // Bytes of the device's KV that sit on the host (the sequence grain's partial
            // layer): its KV cache is `sequences x kv_sequence` less these.
            let mut partial_on_host = 0u64;
            for l in start..stage.end_layer {
                let layer = &option.layers[l as usize];
                let partial = l == kv_end && stage.kv_offloaded_sequences > 0;
                if l < kv_end || partial {
                    let on_host = if partial {
                        stage.kv_offloaded_sequences
                    } else {
                        formed.problem.sequences
                    };
                    host_kv.push(HostKv {
                        layer: l,
                        sequence_bytes: layer.kv_sequence_bytes,
                        sequences: partial.then_some(on_host),
                    });
                    let all = layer
                        .kv_sequence_bytes
                        .checked_mul(on_host)
                        .ok_or_else(|| internal("KV bytes overflow".to_owned()))?;
                    kv_staging = kv_staging.max(all);
                    host_kv_bytes = add(host_kv_bytes, all)?;
                    if partial {
                        partial_on_host = all;
                    }
                }
                if l >= kv_end {
                    kv_sequence = add(kv_sequence, layer.kv_sequence_bytes)?;
                    kv_token = add(kv_token, layer.kv_token_bytes)?;
                }
            }
            let staging = add(streamed.values().copied().max().unwrap_or(0), kv_staging)?;
            let kv_cache = kv_sequence
                .checked_mul(formed.problem.sequences)
                .and_then(|b| b.checked_sub(partial_on_host))
                .ok_or_else(|| internal("KV bytes overflow".to_owned()))?;
            let all_reduce = option
                .device_bytes
                .saturating_sub(facts.activation_bytes + facts.workspace_bytes);
            let communication = add(all_reduce, if several { option.pipeline_bytes } else { 0 })?;
            let items = MemoryItems {
                weights,
                kv_cache,
                activations: facts.activation_bytes,
                workspaces: facts.workspace_bytes,
                communication,
                staging,
            };
            let total = [
                items.weights,
                items.kv_cache,
                items.activations,
                items.workspaces,
                items.communication,
                items.staging,
            ]
            .into_iter()
            .try_fold(0u64, |a, b| a.checked_add(b))
            .ok_or_else(|| internal("bytes overflow".to_owned()))?;
            devices.push(PlacedDevice {
                id: id.clone(),
                name: set.kinds[kind].description.name.clone(),
                domain: domain.clone(),
                stage: s as u32,
                rank: rank as u32,
                usable_bytes: usable,
                kv_sequence_bytes: kv_sequence,
                kv_token_bytes: kv_token,
                items,
                total_bytes: total,
                headroom_bytes: i128::from(usable) - i128::from(total),
                shards,
                streamed_layers: streamed.keys().copied().collect(),
                host_kv,
            });
        }
        stages.push(PlacedStage {
            first_layer: start,
            end_layer: stage.end_layer,
            devices: group.into_iter().map(|(id, ..)| id).collect(),
            offloaded_units: stage.offloaded_units,
            offloaded_layers: stage.offloaded_layers,
            kv_offloaded_layers: stage.kv_offloaded_layers,
            kv_offloaded_sequences: stage.kv_offloaded_sequences,
        });
        start = stage.end_layer;
    }
    let mut offloaded_bytes = host_kv_bytes;
    for shard in &host_shards {
        offloaded_bytes = add(offloaded_bytes, shard.arena_bytes)?;
    }
    if offloaded_bytes != solution.offloaded_bytes {
        return Err(internal(format!(
            "the host's shards take {offloaded_bytes} bytes, the solver counted {}",
            solution.offloaded_bytes
        )));
    }
    // A device with KV on the host serves exactly the policy's worst case.
    let worst = problem.kv_worst_case_tokens;
    let tokens = devices
        .iter()
        .filter(|d| d.kv_token_bytes > 0 || !d.host_kv.is_empty())
        .map(|d| {
            let non_kv = d.total_bytes - d.items.kv_cache;
            let fit = (d.usable_bytes - non_kv)
                .checked_div(d.kv_token_bytes)
                .unwrap_or(u64::MAX);
            if d.host_kv.is_empty() {
                fit
            } else {
                fit.min(worst)
            }
        })
        .min();
    if tokens.unwrap_or(u64::MAX) != solution.kv_tokens {
        return Err(internal(format!(
            "the devices hold {tokens:?} KV tokens, the solver counted {}",
            solution.kv_tokens
        )));
    }
    let tensors = facts
        .tensors
        .iter()
        .zip(&detail.shares)
        .map(|(t, shares)| TensorTotal {
            id: t.id.clone(),
            bytes: t.bytes,
            layer: match t.home {
                Home::Layer(l) => Some(l),
                _ => None,
            },
            home: match t.home {
                Home::First => "first",
                Home::Layer(_) => "layer",
                Home::Last => "last",
            }
            .to_owned(),
            blocks: shares.first().and_then(|s| s.blocks).map(|b| TensorBlocks {
                count: b.count,
                bytes: b.block_bytes,
            }),
        })
        .collect();
    let payload = PlacementPayload {
        model: facts.family.clone(),
        weight_format: facts.format.name().to_owned(),
        policy: facts.policy.clone(),
        sequences: formed.problem.sequences,
        context_tokens: facts.context_tokens,
        budget: formed.budget_rule.clone(),
        device_set: set.name.clone(),
        objective: problem.objective,
        tensor_parallel: option.degree,
        pipeline_parallel: solution.stages.len() as u32,
        expert_split: option.split,
        layer_count: facts.layer_count,
        tensors,
        stages,
        devices,
        host: PlacedHost {
            memory_bytes: problem.host_bytes,
            offloaded_bytes,
            shards: host_shards,
            kv_bytes: host_kv_bytes,
        },
        devices_used: solution.devices,
        kv_tokens_that_fit: tokens,
        single_device_plan: facts
            .plan_id()
            .ok_or_else(|| {
                internal(
                    "the single-device plan is not sealed: `ModelFacts::seal` it first".to_owned(),
                )
            })?
            .to_owned(),
    };
    let digest = crate::canonical::canonical_fingerprint("placement", &payload)
        .map_err(|e| internal(format!("cannot hash the placement: {e}")))?;
    Ok(PlacementPlan {
        placement_id: format!("placement/sha256/{digest}"),
        payload,
        solved: Some(Solved {
            problem: problem.clone(),
            solution: solution.clone(),
        }),
    })
}
