//! The independent checker of a placement plan: the partition's rules re-derived from the
//! plan alone, sharing no code with the solver or the code that writes the plan. Every
//! violation names its rule and the JSON path of the culprit.
//!
//! Rules:
//! 1. `stages`: the stages' layer ranges are non-empty, contiguous, start at layer 0 and
//!    end at the last layer (every layer on exactly one stage), one stage per pipeline
//!    stage, `tensor_parallel` devices per stage;
//! 2. `devices`: every device is in exactly one stage, at the stage and rank it says;
//! 3. `home`: a device holds only shards of its stage's layers (the embedding on the first
//!    stage, the final norm and head on the last), none of a layer it streams; the layers
//!    it streams and those whose KV it keeps on the host are its stage's first ones, as
//!    many as the stage says, then (the sequence grain) the next layer with the stage's
//!    `kv_offloaded_sequences`, fewer than the policy's sequences;
//! 4. `shards`: the parts of every tensor (on devices and the host) are exactly `0..parts`,
//!    every holder of a part holds the same bytes, and the parts add up to the tensor
//!    (bytes every part holds whole, a per-tensor scale, counted once); a tensor split
//!    block-rounded (`blocks`) instead has `count x bytes` its bytes, every part a buffer
//!    of `⌈count / parts⌉` blocks holding at most that many of the tensor's blocks, the
//!    runs contiguous from part 0 (vLLM's loader bounds), and its parts' blocks add up to
//!    `count`; a buffer an engine's kernel backend pads (`padding_bytes`) holds its bytes
//!    less the padding of the tensor, and every part of a tensor is padded alike;
//! 5. `items`: a device's weights are the sum of its shards, its KV cache is sequences x
//!    its bytes per sequence less a partly offloaded layer's host sequences, its staging
//!    the largest streamed layer's host bytes over the group's ranks plus the largest host
//!    KV layer's bytes (its host sequences x its bytes per sequence), its total the sum of
//!    its items, its headroom usable - total;
//! 6. `capacity`: every device within its usable bytes;
//! 7. `host`: the host's bytes are the sum of its shards plus its KV bytes (every
//!    device's host KV layers, their host sequences x their bytes per sequence), within its
//!    memory (none without a host tier);
//! 8. `totals`: devices used and KV tokens that fit follow from the devices (a device with
//!    KV on the host serves at most sequences x context tokens);
//! 9. `id`: the placement id is the canonical SHA-256 of the payload.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::record::{PlacementPlan, ShardRecord};

/// One broken rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// The rule.
    pub rule: String,
    /// JSON path of the culprit.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

struct Report(Vec<Violation>);

/// Per part of a tensor, the (bytes, bytes held whole, blocks held) each holder records.
type Holders = BTreeMap<u64, Vec<(u64, u64, Option<u64>)>>;

impl Report {
    fn add(&mut self, rule: &str, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(Violation {
            rule: rule.to_owned(),
            path: path.into(),
            message: message.into(),
        });
    }
}

/// Every violation of `plan` (empty: the plan is valid).
pub fn check(plan: &PlacementPlan) -> Vec<Violation> {
    let mut report = Report(Vec::new());
    let p = &plan.payload;
    // 1. stages
    let mut next = 0u32;
    if p.stages.len() != p.pipeline_parallel as usize {
        report.add(
            "stages",
            ".payload.stages",
            format!(
                "{} stages, pipeline_parallel {}",
                p.stages.len(),
                p.pipeline_parallel
            ),
        );
    }
    let mut stage_of_layer: BTreeMap<u32, usize> = BTreeMap::new();
    for (s, stage) in p.stages.iter().enumerate() {
        let path = format!(".payload.stages[{s}]");
        if stage.first_layer != next || stage.end_layer <= stage.first_layer {
            report.add(
                "stages",
                &path,
                format!(
                    "layers {}..{} do not continue from layer {next}",
                    stage.first_layer, stage.end_layer
                ),
            );
        }
        for layer in stage.first_layer..stage.end_layer {
            stage_of_layer.insert(layer, s);
        }
        next = stage.end_layer;
        if stage.devices.len() != p.tensor_parallel as usize {
            report.add(
                "stages",
                format!("{path}.devices"),
                format!(
                    "{} devices, tensor_parallel {}",
                    stage.devices.len(),
                    p.tensor_parallel
                ),
            );
        }
    }
    if next != p.layer_count {
        report.add(
            "stages",
            ".payload.stages",
            format!(
                "the stages end at layer {next}, the model has {}",
                p.layer_count
            ),
        );
    }
    // 2. devices
    let mut seen = BTreeSet::new();
    for (i, device) in p.devices.iter().enumerate() {
        let path = format!(".payload.devices[{i}]");
        if !seen.insert(device.id.as_str()) {
            report.add("devices", &path, format!("{} is listed twice", device.id));
        }
        let listed = p
            .stages
            .get(device.stage as usize)
            .and_then(|s| s.devices.get(device.rank as usize));
        if listed != Some(&device.id) {
            report.add(
                "devices",
                &path,
                format!(
                    "{} says stage {} rank {}, the stage lists {listed:?} there",
                    device.id, device.stage, device.rank
                ),
            );
        }
    }
    let in_stages: usize = p.stages.iter().map(|s| s.devices.len()).sum();
    if in_stages != p.devices.len() {
        report.add(
            "devices",
            ".payload.devices",
            format!("{} devices, the stages list {in_stages}", p.devices.len()),
        );
    }
    // 3-4. home and shards
    let tensors: BTreeMap<&str, (usize, &super::record::TensorTotal)> = p
        .tensors
        .iter()
        .enumerate()
        .map(|(i, t)| (t.id.as_str(), (i, t)))
        .collect();
    let last = p.stages.len().saturating_sub(1);
    // tensor -> part -> (bytes of each holder)
    let mut parts: BTreeMap<&str, (u64, Holders)> = BTreeMap::new();
    // tensor -> the padding bytes of its parts' buffers
    let mut padding: BTreeMap<&str, BTreeSet<u64>> = BTreeMap::new();
    let mut note = |report: &mut Report, path: &str, shard: &ShardRecord| -> bool {
        let Some((_, total)) = tensors.get(shard.tensor.as_str()) else {
            report.add(
                "shards",
                path,
                format!("{} is not a tensor of the model", shard.tensor),
            );
            return false;
        };
        let entry = parts
            .entry(total.id.as_str())
            .or_insert((shard.parts, BTreeMap::new()));
        if entry.0 != shard.parts || shard.part >= shard.parts {
            report.add(
                "shards",
                path,
                format!(
                    "part {} of {} of {}, other shards say {} parts",
                    shard.part, shard.parts, shard.tensor, entry.0
                ),
            );
        }
        // A buffer the engine's kernel backend pads holds `bytes - padding_bytes` of the
        // tensor; every part of a tensor is padded alike (one buffer shape per rank).
        let Some(loaded) = shard.bytes.checked_sub(shard.padding_bytes) else {
            report.add(
                "shards",
                path,
                format!(
                    "{}: {} bytes of padding in a buffer of {}",
                    shard.tensor, shard.padding_bytes, shard.bytes
                ),
            );
            return false;
        };
        padding
            .entry(total.id.as_str())
            .or_default()
            .insert(shard.padding_bytes);
        entry
            .1
            .entry(shard.part)
            .or_default()
            .push((loaded, shard.replicated_bytes, shard.blocks));
        true
    };
    for (i, device) in p.devices.iter().enumerate() {
        let mut held = BTreeSet::new();
        for (j, shard) in device.shards.iter().enumerate() {
            let path = format!(".payload.devices[{i}].shards[{j}]");
            if !note(&mut report, &path, shard) {
                continue;
            }
            if !held.insert((shard.tensor.as_str(), shard.part)) {
                report.add("shards", &path, "the device holds this part twice");
            }
            let Some((_, total)) = tensors.get(shard.tensor.as_str()) else {
                continue;
            };
            let stage = device.stage as usize;
            let home_ok = match (total.home.as_str(), total.layer) {
                ("first", _) => stage == 0,
                ("last", _) => stage == last,
                (_, Some(layer)) => stage_of_layer.get(&layer) == Some(&stage),
                _ => false,
            };
            if !home_ok {
                report.add(
                    "home",
                    &path,
                    format!(
                        "{} ({} {:?}) is not on stage {stage}",
                        shard.tensor, total.home, total.layer
                    ),
                );
            }
        }
    }
    for (j, shard) in p.host.shards.iter().enumerate() {
        note(&mut report, &format!(".payload.host.shards[{j}]"), shard);
    }
    // Streamed layers and host KV: the stage's first layers, none of them held.
    let layer_of = |tensor: &str| tensors.get(tensor).and_then(|(_, t)| t.layer);
    for (i, device) in p.devices.iter().enumerate() {
        let path = format!(".payload.devices[{i}]");
        let Some(stage) = p.stages.get(device.stage as usize) else {
            continue;
        };
        let streamed: Vec<u32> =
            (stage.first_layer..stage.first_layer.saturating_add(stage.offloaded_layers)).collect();
        if device.streamed_layers != streamed {
            report.add(
                "home",
                format!("{path}.streamed_layers"),
                format!(
                    "{:?}, its stage streams its first {} layer(s) {streamed:?}",
                    device.streamed_layers, stage.offloaded_layers
                ),
            );
        }
        let kv: Vec<(u32, Option<u64>)> = device
            .host_kv
            .iter()
            .map(|h| (h.layer, h.sequences))
            .collect();
        let whole_end = stage.first_layer.saturating_add(stage.kv_offloaded_layers);
        let mut expected: Vec<(u32, Option<u64>)> =
            (stage.first_layer..whole_end).map(|l| (l, None)).collect();
        if stage.kv_offloaded_sequences > 0 {
            expected.push((whole_end, Some(stage.kv_offloaded_sequences)));
        }
        if kv != expected {
            report.add(
                "home",
                format!("{path}.host_kv"),
                format!(
                    "layers {kv:?}, its stage keeps the KV of its first {} layer(s) and {} sequence(s) of the next on the host: {expected:?}",
                    stage.kv_offloaded_layers, stage.kv_offloaded_sequences
                ),
            );
        }
        if stage.kv_offloaded_sequences >= p.sequences.max(1) {
            report.add(
                "stages",
                format!(".payload.stages[{}].kv_offloaded_sequences", device.stage),
                format!(
                    "{} sequences of a layer, the policy has {} (all of them: a whole layer)",
                    stage.kv_offloaded_sequences, p.sequences
                ),
            );
        }
        if streamed.last().is_some_and(|l| *l >= stage.end_layer)
            || expected.last().is_some_and(|(l, _)| *l >= stage.end_layer)
        {
            report.add(
                "stages",
                format!(".payload.stages[{}]", device.stage),
                "offloads more layers than it holds",
            );
        }
        for (j, shard) in device.shards.iter().enumerate() {
            if layer_of(&shard.tensor).is_some_and(|l| device.streamed_layers.contains(&l)) {
                report.add(
                    "home",
                    format!("{path}.shards[{j}]"),
                    format!("{}: its layer is streamed from the host", shard.tensor),
                );
            }
        }
    }
    for (id, (index, total)) in &tensors {
        let path = format!(".payload.tensors[{index}]");
        let Some((count, held)) = parts.get(id) else {
            report.add("shards", &path, format!("{id}: no device or host holds it"));
            continue;
        };
        if let Some(padded) = padding.get(id).filter(|p| p.len() > 1) {
            report.add(
                "shards",
                &path,
                format!("{id}: its parts' buffers are padded differently: {padded:?} bytes"),
            );
        }
        let expected: BTreeSet<u64> = (0..*count).collect();
        let present: BTreeSet<u64> = held.keys().copied().collect();
        if expected != present {
            report.add(
                "shards",
                &path,
                format!("{id}: parts {present:?} held, {count} expected"),
            );
        }
        if let Some(blocks) = total.blocks {
            block_rounded(&mut report, &path, id, total.bytes, blocks, *count, held);
            continue;
        }
        // Bytes every part holds whole (a per-tensor scale) count once.
        let mut sum: u128 = 0;
        let mut replicated: BTreeSet<u64> = BTreeSet::new();
        for (part, bytes) in held {
            if bytes.iter().any(|b| *b != bytes[0]) {
                report.add(
                    "shards",
                    &path,
                    format!("{id}: holders of part {part} differ: {bytes:?}"),
                );
            }
            let (part_bytes, copy, blocks) = bytes[0];
            if blocks.is_some() {
                report.add(
                    "shards",
                    &path,
                    format!(
                        "{id}: part {part} records blocks, the tensor is not split block-rounded"
                    ),
                );
            }
            replicated.insert(copy);
            sum += u128::from(part_bytes.saturating_sub(copy));
        }
        if replicated.len() > 1 {
            report.add(
                "shards",
                &path,
                format!("{id}: its parts disagree on the bytes each holds whole: {replicated:?}"),
            );
        }
        sum += u128::from(replicated.iter().next().copied().unwrap_or(0));
        if sum != u128::from(total.bytes) {
            report.add(
                "shards",
                &path,
                format!(
                    "{id}: its parts add up to {sum} bytes, the tensor has {}",
                    total.bytes
                ),
            );
        }
    }
    // 5-6. items and capacity
    for (i, device) in p.devices.iter().enumerate() {
        let path = format!(".payload.devices[{i}]");
        let shards: u128 = device
            .shards
            .iter()
            .map(|s| u128::from(s.arena_bytes))
            .sum();
        if shards != u128::from(device.items.weights) {
            report.add(
                "items",
                format!("{path}.items.weights"),
                format!("{} bytes, its shards take {shards}", device.items.weights),
            );
        }
        // A layer whose KV is partly on the host: those sequences' bytes are not here.
        let partial: u128 = device
            .host_kv
            .iter()
            .filter_map(|h| {
                h.sequences
                    .map(|s| u128::from(s) * u128::from(h.sequence_bytes))
            })
            .sum();
        let kv = (u128::from(device.kv_sequence_bytes) * u128::from(p.sequences))
            .saturating_sub(partial);
        if kv != u128::from(device.items.kv_cache) {
            report.add(
                "items",
                format!("{path}.items.kv_cache"),
                format!(
                    "{} bytes, {} sequences x {} bytes less {partial} on the host are {kv}",
                    device.items.kv_cache, p.sequences, device.kv_sequence_bytes
                ),
            );
        }
        // Staging: the largest streamed layer's share (its host shards over the group's
        // ranks) plus the largest host KV layer's bytes for every sequence.
        let ranks = u128::from(p.tensor_parallel.max(1));
        let weights_staging = device
            .streamed_layers
            .iter()
            .map(|layer| {
                p.host
                    .shards
                    .iter()
                    .filter(|s| {
                        tensors.get(s.tensor.as_str()).and_then(|(_, t)| t.layer) == Some(*layer)
                    })
                    .map(|s| u128::from(s.arena_bytes))
                    .sum::<u128>()
                    / ranks
            })
            .max()
            .unwrap_or(0);
        let kv_staging = device
            .host_kv
            .iter()
            .map(|h| u128::from(h.sequence_bytes) * u128::from(h.sequences.unwrap_or(p.sequences)))
            .max()
            .unwrap_or(0);
        if weights_staging + kv_staging != u128::from(device.items.staging) {
            report.add(
                "items",
                format!("{path}.items.staging"),
                format!(
                    "{} bytes, the largest streamed layer takes {weights_staging} and the largest host KV layer {kv_staging}",
                    device.items.staging
                ),
            );
        }
        let i = &device.items;
        let total = u128::from(i.weights)
            + u128::from(i.kv_cache)
            + u128::from(i.activations)
            + u128::from(i.workspaces)
            + u128::from(i.communication)
            + u128::from(i.staging);
        if total != u128::from(device.total_bytes) {
            report.add(
                "items",
                format!("{path}.total_bytes"),
                format!("{} bytes, its items add up to {total}", device.total_bytes),
            );
        }
        if device.headroom_bytes != i128::from(device.usable_bytes) - i128::from(device.total_bytes)
        {
            report.add(
                "items",
                format!("{path}.headroom_bytes"),
                "is not usable - total",
            );
        }
        if total > u128::from(device.usable_bytes) {
            report.add(
                "capacity",
                &path,
                format!(
                    "{} holds {total} bytes, {} are usable",
                    device.id, device.usable_bytes
                ),
            );
        }
    }
    // 7. host
    let kv_host: u128 = p
        .devices
        .iter()
        .flat_map(|d| d.host_kv.iter())
        .map(|h| u128::from(h.sequence_bytes) * u128::from(h.sequences.unwrap_or(p.sequences)))
        .sum();
    if kv_host != u128::from(p.host.kv_bytes) {
        report.add(
            "host",
            ".payload.host.kv_bytes",
            format!(
                "{} bytes, the devices' host KV takes {kv_host}",
                p.host.kv_bytes
            ),
        );
    }
    let host: u128 = p
        .host
        .shards
        .iter()
        .map(|s| u128::from(s.arena_bytes))
        .sum::<u128>()
        + kv_host;
    if host != u128::from(p.host.offloaded_bytes) {
        report.add(
            "host",
            ".payload.host.offloaded_bytes",
            format!(
                "{} bytes, its shards and KV take {host}",
                p.host.offloaded_bytes
            ),
        );
    }
    match p.host.memory_bytes {
        None if !p.host.shards.is_empty() || kv_host > 0 => report.add(
            "host",
            ".payload.host.shards",
            "shards on the host without a host tier",
        ),
        Some(memory) if host > u128::from(memory) => report.add(
            "host",
            ".payload.host",
            format!("{host} bytes offloaded, the host has {memory}"),
        ),
        _ => {}
    }
    // 8. totals
    if p.devices_used != p.devices.len() as u64 {
        report.add(
            "totals",
            ".payload.devices_used",
            format!(
                "{} devices used, {} listed",
                p.devices_used,
                p.devices.len()
            ),
        );
    }
    let mut tokens: Option<u128> = None;
    let worst = u128::from(p.sequences) * u128::from(p.context_tokens);
    for device in &p.devices {
        if device.kv_token_bytes == 0 && device.host_kv.is_empty() {
            continue;
        }
        let room = i128::from(device.usable_bytes) - i128::from(device.total_bytes)
            + i128::from(device.items.kv_cache);
        let mut fit = u128::try_from(room.max(0))
            .unwrap_or(0)
            .checked_div(u128::from(device.kv_token_bytes))
            .unwrap_or(u128::from(u64::MAX));
        if !device.host_kv.is_empty() {
            fit = fit.min(worst);
        }
        tokens = Some(tokens.map_or(fit, |t| t.min(fit)));
    }
    if tokens != p.kv_tokens_that_fit.map(u128::from) {
        report.add(
            "totals",
            ".payload.kv_tokens_that_fit",
            format!("{:?}, the devices hold {tokens:?}", p.kv_tokens_that_fit),
        );
    }
    // 9. id
    match crate::canonical::canonical_fingerprint("placement", &plan.payload) {
        Ok(digest) if plan.placement_id == format!("placement/sha256/{digest}") => {}
        Ok(digest) => report.add(
            "id",
            ".placement_id",
            format!(
                "{}, the payload hashes to placement/sha256/{digest}",
                plan.placement_id
            ),
        ),
        Err(e) => report.add("id", ".payload", format!("cannot be hashed: {e}")),
    }
    report.0
}

/// The `shards` rule for a tensor split block-rounded into `parts` parts of `blocks.count`
/// blocks of `blocks.bytes` bytes: the blocks are the tensor's bytes; every part is a
/// buffer of `⌈count / parts⌉` blocks (the padded size) with none held whole, holding
/// `min(⌈count / parts⌉, count - part x ⌈count / parts⌉)` of the tensor's blocks (at most
/// the padded size, contiguous runs from part 0); and the parts' blocks add up to `count`.
fn block_rounded(
    report: &mut Report,
    path: &str,
    id: &str,
    tensor_bytes: u64,
    blocks: super::record::TensorBlocks,
    parts: u64,
    held: &Holders,
) {
    if u128::from(blocks.count) * u128::from(blocks.bytes) != u128::from(tensor_bytes) {
        report.add(
            "shards",
            path,
            format!(
                "{id}: {} blocks of {} bytes, the tensor has {tensor_bytes} bytes",
                blocks.count, blocks.bytes
            ),
        );
    }
    let Some(run) = blocks.count.checked_div(parts) else {
        return;
    };
    let run = if blocks.count % parts == 0 {
        run
    } else {
        run + 1
    };
    let padded = u128::from(run) * u128::from(blocks.bytes);
    let mut sum: u128 = 0;
    for (part, holders) in held {
        if holders.iter().any(|h| *h != holders[0]) {
            report.add(
                "shards",
                path,
                format!("{id}: holders of part {part} differ: {holders:?}"),
            );
        }
        let (bytes, copy, real) = holders[0];
        let Some(real) = real else {
            report.add(
                "shards",
                path,
                format!("{id}: part {part} records no blocks, the tensor is split block-rounded"),
            );
            continue;
        };
        sum += u128::from(real);
        if u128::from(bytes) != padded || copy != 0 {
            report.add(
                "shards",
                path,
                format!(
                    "{id}: part {part} is a buffer of {bytes} bytes ({copy} held whole), the \
                     padded size is {run} blocks of {} bytes, {padded}",
                    blocks.bytes
                ),
            );
        }
        let expected = blocks
            .count
            .saturating_sub(part.saturating_mul(run))
            .min(run);
        if real > run {
            report.add(
                "shards",
                path,
                format!("{id}: part {part} holds {real} blocks, more than the padded {run}"),
            );
        } else if real != expected {
            report.add(
                "shards",
                path,
                format!(
                    "{id}: part {part} holds {real} blocks, the contiguous runs of {run} give it \
                     {expected}"
                ),
            );
        }
    }
    if sum != u128::from(blocks.count) {
        report.add(
            "shards",
            path,
            format!(
                "{id}: its parts hold {sum} blocks, the tensor has {}",
                blocks.count
            ),
        );
    }
}
