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
    /// KV bytes of one sequence on it.
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
}

/// The host tier.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacedHost {
    /// Its memory (`null`: offload off).
    pub memory_bytes: Option<u64>,
    /// Σ arena bytes of the shards it holds.
    pub offloaded_bytes: u64,
    /// The shards it holds.
    pub shards: Vec<ShardRecord>,
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
    /// Sequences the policy admits.
    pub sequences: u64,
    /// The policy's context.
    pub context_tokens: u64,
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
        for (rank, (id, _, domain)) in group.iter().enumerate() {
            let mut shards = Vec::new();
            let mut offloaded = 0u64;
            let mut decided: std::collections::BTreeMap<(u32, u64), bool> = Default::default();
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
                };
                // The first `offloaded_units` expert groups this device holds go to the host.
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
            let layers = &option.layers[start as usize..stage.end_layer as usize];
            let mut kv_sequence = 0u64;
            let mut kv_token = 0u64;
            for layer in layers {
                kv_sequence = add(kv_sequence, layer.kv_sequence_bytes)?;
                kv_token = add(kv_token, layer.kv_token_bytes)?;
            }
            let kv_cache = kv_sequence
                .checked_mul(facts.sequences)
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
            };
            let total = [
                items.weights,
                items.kv_cache,
                items.activations,
                items.workspaces,
                items.communication,
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
            });
        }
        stages.push(PlacedStage {
            first_layer: start,
            end_layer: stage.end_layer,
            devices: group.into_iter().map(|(id, ..)| id).collect(),
            offloaded_units: stage.offloaded_units,
        });
        start = stage.end_layer;
    }
    let mut offloaded_bytes = 0u64;
    for shard in &host_shards {
        offloaded_bytes = add(offloaded_bytes, shard.arena_bytes)?;
    }
    if offloaded_bytes != solution.offloaded_bytes {
        return Err(internal(format!(
            "the host's shards take {offloaded_bytes} bytes, the solver counted {}",
            solution.offloaded_bytes
        )));
    }
    let tokens = devices
        .iter()
        .filter(|d| d.kv_token_bytes > 0)
        .map(|d| {
            let non_kv = d.total_bytes - d.items.kv_cache;
            (d.usable_bytes - non_kv) / d.kv_token_bytes
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
        .map(|t| TensorTotal {
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
        })
        .collect();
    let payload = PlacementPayload {
        model: facts.family.clone(),
        weight_format: facts.format.name().to_owned(),
        policy: facts.policy.clone(),
        sequences: facts.sequences,
        context_tokens: facts.context_tokens,
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
        },
        devices_used: solution.devices,
        kv_tokens_that_fit: tokens,
        single_device_plan: facts.plan_id.clone(),
    };
    let digest = crate::canonical::canonical_fingerprint("placement", &payload)
        .map_err(|e| internal(format!("cannot hash the placement: {e}")))?;
    Ok(PlacementPlan {
        placement_id: format!("placement/sha256/{digest}"),
        payload,
    })
}
