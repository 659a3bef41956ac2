//! Placement of quantized models across devices: a tensor-parallel shard of a quantized
//! tensor holds its share of the packed values plus its share of the scales; a scale the
//! split leaves whole (fp8's per-tensor scale, one per fused checkpoint tensor) is held by
//! every rank and counted once when the parts add up; a block-quantized format refuses a
//! shard boundary inside a block. Every expected figure is a hand count from the published
//! Llama-3.1 shapes, never the placement's own functions.

use std::path::{Path, PathBuf};

use jointplan::placement::check::check;
use jointplan::placement::{place, DeviceSet, Placed, Settings};
use jointplan::synth::{ModelSource, PolicyPreset};
use jointplan::BuildOptions;

fn settings(tensor_parallel: Option<u32>, policy: Option<PolicyPreset>) -> Settings {
    Settings {
        tensor_parallel,
        policy,
        ..Settings::default()
    }
}

fn h100(count: u32) -> DeviceSet {
    DeviceSet::uniform(Path::new("models/devices/h100-sxm-80gb.json"), count, None).unwrap()
}

fn placed(source: &ModelSource, set: &DeviceSet, settings: &Settings) -> Placed {
    let placed = place(source, set, settings, &BuildOptions::default(), 1_000_000).unwrap();
    assert!(placed.violations.is_empty(), "{:?}", placed.violations);
    assert!(check(&placed.plan).is_empty());
    placed
}

/// (bytes, replicated bytes) of rank 0's part of `tensor`, and the tensor's parts.
fn shard(placed: &Placed, tensor: &str) -> (u64, u64, u64) {
    let device = &placed.plan.payload.devices[0];
    let s = device
        .shards
        .iter()
        .find(|s| s.tensor == tensor)
        .unwrap_or_else(|| panic!("{tensor} not on device 0"));
    (s.bytes, s.replicated_bytes, s.parts)
}

/// The parts of every tensor add up to it, with whole-held bytes counted once.
fn parts_add_up(placed: &Placed) {
    let p = &placed.plan.payload;
    for total in &p.tensors {
        let mut parts = std::collections::BTreeMap::new();
        for s in p.devices.iter().flat_map(|d| &d.shards) {
            if s.tensor == total.id {
                parts.insert(s.part, (s.bytes, s.replicated_bytes));
            }
        }
        let replicated = parts.values().next().map_or(0, |p| p.1);
        let sum: u64 = parts.values().map(|(b, r)| b - r).sum::<u64>() + replicated;
        assert_eq!(sum, total.bytes, "{}", total.id);
    }
}

/// Llama-3.1-70B: hidden 8192, 64 query heads and 8 KV heads of 128, MLP 28672.
const HIDDEN: u64 = 8192;
const KV: u64 = 1024;
const MLP: u64 = 28672;

#[test]
fn fp8_layer_shards_are_hand_counted_at_tp_2_and_4() {
    // vLLM's online fp8: one byte per value and one f32 scale per checkpoint tensor,
    // held whole by every rank (gate and up fuse two tensors: two scales).
    let mut source = ModelSource::folder("models/llama-3.1-70b");
    source.layers = Some(2);
    source.weight_format = Some("fp8".to_owned());
    for d in [2u64, 4] {
        let placed = placed(&source, &h100(d as u32), &settings(Some(d as u32), None));
        // (tensor, payload of the whole tensor, scale bytes held whole)
        let expected = [
            ("q_proj", HIDDEN * HIDDEN, 4),
            ("k_proj", KV * HIDDEN, 4),
            ("v_proj", KV * HIDDEN, 4),
            ("o_proj", HIDDEN * HIDDEN, 4),
            ("feed_forward.gate_up", 2 * MLP * HIDDEN, 8),
            ("feed_forward.down", HIDDEN * MLP, 4),
        ];
        let mut layer = 0u64;
        for (name, payload, scales) in expected {
            let id = format!("weight.layer.0.{name}");
            let (bytes, replicated, parts) = shard(&placed, &id);
            assert_eq!(parts, d, "{id} at tp {d}");
            assert_eq!(bytes, payload / d + scales, "{id} at tp {d}");
            assert_eq!(replicated, scales, "{id} at tp {d}");
            layer += bytes;
        }
        // Two bf16 norms of the hidden size, replicated whole.
        for norm in ["input_norm", "post_attention_norm"] {
            let id = format!("weight.layer.0.{norm}");
            let (bytes, replicated, parts) = shard(&placed, &id);
            assert_eq!((bytes, replicated, parts), (HIDDEN * 2, 0, 1), "{id}");
            layer += bytes;
        }
        // (64 + 8 + 8 + 64 + 448 + 224) MiB of fp8 values over the degree, 28 bytes of
        // scales on every rank, 32 KiB of norms.
        let hand = match d {
            2 => 427_819_008 + 28 + 32_768,
            4 => 213_909_504 + 28 + 32_768,
            _ => unreachable!(),
        };
        assert_eq!(layer, hand, "layer 0 on rank 0 at tp {d}");
        parts_add_up(&placed);
        // The checker counts the whole-held scale once: parts that claim none of it add up
        // to 4 bytes per extra rank too many, and parts that disagree are named.
        let q = "weight.layer.0.q_proj";
        let shards_rule = |plan: &jointplan::placement::PlacementPlan| -> Vec<String> {
            check(plan)
                .into_iter()
                .filter(|v| v.rule == "shards")
                .map(|v| v.message)
                .collect()
        };
        let mut none_whole = placed.plan.clone();
        for device in &mut none_whole.payload.devices {
            for s in device.shards.iter_mut().filter(|s| s.tensor == q) {
                s.replicated_bytes = 0;
            }
        }
        let found = shards_rule(&none_whole);
        let sum = (HIDDEN * HIDDEN / d + 4) * d;
        assert!(
            found
                .iter()
                .any(|m| m.contains(q) && m.contains(&format!("add up to {sum} bytes"))),
            "{found:?}"
        );
        let mut disagree = placed.plan.clone();
        let s = disagree.payload.devices[0]
            .shards
            .iter_mut()
            .find(|s| s.tensor == q)
            .unwrap();
        s.replicated_bytes = 0;
        let found = shards_rule(&disagree);
        assert!(
            found
                .iter()
                .any(|m| m.contains(q) && m.contains("disagree")),
            "{found:?}"
        );
    }
}

/// A llama-3.1-8b config with fp8 blocks of `block x block` (f32 scale per block).
fn block_fp8_source(block: u64) -> (ModelSource, PathBuf) {
    let text = std::fs::read_to_string("models/llama-3.1-8b/config.json").unwrap();
    let mut config: serde_json::Value = serde_json::from_str(&text).unwrap();
    config["quantization_config"] = serde_json::json!({
        "quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3",
        "weight_block_size": [block, block]
    });
    let dir = std::env::temp_dir().join(format!(
        "jointplan-placement-fp8-block-{block}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("config.json");
    std::fs::write(&file, serde_json::to_string(&config).unwrap()).unwrap();
    let source = ModelSource {
        config: Some(file),
        device: Some(PathBuf::from("models/devices/h100-sxm-80gb.json")),
        layers: Some(2),
        ..ModelSource::default()
    };
    (source, dir)
}

#[test]
fn fp8_block_shards_carry_their_blocks_scales() {
    // llama-3.1-8b: hidden 4096, 8 KV heads of 128, MLP 14336; 128x128 blocks.
    let (source, dir) = block_fp8_source(128);
    for d in [2u64, 4] {
        let placed = placed(&source, &h100(d as u32), &settings(Some(d as u32), None));
        // (tensor, out, in, split axis is the output)
        for (name, out, input, rows) in [
            ("q_proj", 4096u64, 4096u64, true),
            ("k_proj", 1024, 4096, true),
            ("o_proj", 4096, 4096, false),
            ("feed_forward.gate_up", 2 * 14336, 4096, true),
            ("feed_forward.down", 4096, 14336, false),
        ] {
            let id = format!("weight.layer.1.{name}");
            let (o, i) = if rows {
                (out / d, input)
            } else {
                (out, input / d)
            };
            // Its share of the payload plus its share of the scale grid.
            let expected = o * i + (o / 128) * (i / 128) * 4;
            assert_eq!(shard(&placed, &id), (expected, 0, d), "{id} at tp {d}");
        }
        parts_add_up(&placed);
    }
    // 256x256 blocks: at tp 8 a K/V projection's part is 128 rows, inside a block.
    let (source, dir256) = block_fp8_source(256);
    let refused = place(
        &source,
        &h100(8),
        &settings(Some(8), None),
        &BuildOptions::default(),
        1_000_000,
    );
    let Err(err) = refused else {
        panic!("a shard boundary inside a block is refused")
    };
    let err = err.to_string();
    assert!(
        err.contains("k_proj") && err.contains("256-value block"),
        "{err}"
    );
    std::fs::remove_dir_all(dir).unwrap();
    std::fs::remove_dir_all(dir256).unwrap();
}

#[test]
fn fp8_70b_places_on_two_h100() {
    // 80 fp8 layers are 68.45 GB: one H100 holds 74.8 GB usable, not the layers and a
    // context's KV cache; two at tensor parallel 2 hold 16 sequences of 8192 tokens.
    let mut source = ModelSource::folder("models/llama-3.1-70b");
    source.weight_format = Some("fp8".to_owned());
    let mut policy = PolicyPreset::server().with_sequence_ceiling(16);
    policy.maximum_context_tokens = Some(8192);
    policy.minimum_sequences = Some(16);
    let placed = placed(&source, &h100(2), &settings(None, Some(policy)));
    let p = &placed.plan.payload;
    assert_eq!(p.devices_used, 2);
    assert_eq!(p.devices.len(), 2);
    // 16 sequences x 8192 tokens x 80 layers x (K and V of 8 heads of 128 in bf16) / 2.
    assert_eq!(p.devices[0].items.kv_cache, 16 * 8192 * 80 * 2 * KV * 2 / 2);
    parts_add_up(&placed);
}

#[test]
fn int8_channel_scales_split_with_rows_and_stay_whole_across_columns() {
    // W8A8 int8: one byte per value, one f32 scale per output row. A column-parallel
    // layer splits the rows and their scales; a row-parallel one (o_proj, down) splits
    // the input and every rank holds all the row scales.
    let mut source = ModelSource::folder("models/llama-3.1-70b");
    source.layers = Some(2);
    source.weight_format = Some("int8".to_owned());
    let d = 2u64;
    let placed = placed(&source, &h100(2), &settings(Some(2), None));
    for (name, out, input, rows) in [
        ("q_proj", HIDDEN, HIDDEN, true),
        ("feed_forward.gate_up", 2 * MLP, HIDDEN, true),
        ("o_proj", HIDDEN, HIDDEN, false),
        ("feed_forward.down", HIDDEN, MLP, false),
    ] {
        let id = format!("weight.layer.0.{name}");
        let expected = if rows {
            (out / d * input + out / d * 4, 0, d)
        } else {
            (out * input / d + out * 4, out * 4, d)
        };
        assert_eq!(shard(&placed, &id), expected, "{id}");
    }
    parts_add_up(&placed);
}
