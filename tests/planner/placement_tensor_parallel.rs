//! Tensor parallelism of every shipped tensor: gpt-oss-20b (attention sinks, the o
//! projection's and the router's biases, the routed experts' biases) places at degrees 2
//! and 4 with tensor- and expert-split experts, in bf16 and in its checkpoint's mxfp4 (at
//! 4 the experts' intermediate blocks split block-rounded, placement_uneven.rs); each
//! placement is the exhaustive enumeration's, passes the checker, and every device holds
//! the weight bytes of a hand count made here from the config's numbers; Qwen3-Next's gated
//! DeltaNet states split by `t` (counted from its config); and every shipped model folder
//! places at degree 2 or is refused for a divisibility reason, never for a tensor or state
//! without a rule.

use std::path::Path;
use std::time::Instant;

use jointplan::placement::check::check;
use jointplan::placement::enumerate::{enumerate, Enumerated};
use jointplan::placement::model::ModelFacts;
use jointplan::placement::options::{form, Settings};
use jointplan::placement::problem::ExpertSplit;
use jointplan::placement::record::record;
use jointplan::placement::solve::solve;
use jointplan::placement::{place, DeviceSet, PlacementError};
use jointplan::synth::{ModelSource, PolicyPreset};
use jointplan::BuildOptions;

fn settings(tensor_parallel: Option<u32>) -> Settings {
    Settings {
        tensor_parallel,
        ..Settings::default()
    }
}

fn a100(count: u32) -> DeviceSet {
    DeviceSet::uniform(Path::new("models/devices/a100-80gb.json"), count, None).unwrap()
}

/// Bytes of `n` in a weight arena: each component rounded up to 256 bytes.
fn arena(n: u64) -> u64 {
    n.div_ceil(256) * 256
}

/// A 16-bit tensor of `elements`.
fn half(elements: u64) -> u64 {
    arena(elements * 2)
}

/// An expert matrix of `elements` (its last axis a multiple of 32): 16-bit, or mxfp4's
/// packed blocks (32 values in 16 bytes) and one scale byte per block, two components.
fn expert_matrix(elements: u64, mxfp4: bool) -> u64 {
    if mxfp4 {
        let blocks = elements / 32;
        arena(blocks * 16) + arena(blocks)
    } else {
        half(elements)
    }
}

/// gpt-oss's numbers, read from its config.
struct GptOss {
    hidden: u64,
    heads: u64,
    kv_heads: u64,
    head_dim: u64,
    intermediate: u64,
    experts: u64,
    vocab: u64,
}

impl GptOss {
    fn read() -> Self {
        let text = std::fs::read_to_string("models/gpt-oss-20b/config.json").unwrap();
        let c: serde_json::Value = serde_json::from_str(&text).unwrap();
        let n = |key: &str| c[key].as_u64().unwrap();
        Self {
            hidden: n("hidden_size"),
            heads: n("num_attention_heads"),
            kv_heads: n("num_key_value_heads"),
            head_dim: n("head_dim"),
            intermediate: n("intermediate_size"),
            experts: n("num_local_experts"),
            vocab: n("vocab_size"),
        }
    }

    /// Weight bytes of one rank of `t` holding `layers` layers, the embedding, the final
    /// norm and the head (one stage), as vLLM shards them: q/k/v and their biases by heads,
    /// o by its input with its bias whole, sinks by heads, the router and its bias whole,
    /// the norms whole; experts split by their intermediate axis with the down bias whole
    /// on every rank, or `experts / t` whole experts per rank. In mxfp4 a rank's share of
    /// the intermediate axis is vLLM's `⌈(I / 32) / t⌉` blocks of 32 (23 blocks, 736
    /// columns, at `t = 4`), loaded into the buffers the A100's MXFP4 backend allocates
    /// (vLLM v0.19.0 picks MARLIN on compute capability 8.0: the rank's intermediate size
    /// `I / t`, or `I` under expert parallelism, rounded up to 128 and the hidden size to
    /// 256; packed values and one e8m0 scale per 32, bf16 biases), the padding appended to
    /// the loaded part.
    fn rank_bytes(&self, layers: u64, t: u64, split: ExpertSplit, mxfp4: bool) -> u64 {
        let (h, i, e) = (self.hidden, self.intermediate, self.experts);
        let per_rank = if mxfp4 {
            (i / 32).div_ceil(t) * 32
        } else {
            i / t
        };
        let up = |n: u64, m: u64| n.div_ceil(m) * m;
        // Marlin's buffers of one expert: (padded intermediate of the rank, padded hidden).
        let marlin = |rank_i: u64| (up(rank_i, 128), up(h, 256));
        // A matrix of `rows x columns` values as loaded, with the padding up to
        // `padded_rows x padded_columns` (mxfp4: 17 bytes per 32 values).
        let matrix = |loaded: u64, padded: u64| {
            if mxfp4 && t > 1 {
                expert_matrix(loaded, true) + (padded - loaded) / 32 * 17
            } else {
                expert_matrix(loaded, mxfp4)
            }
        };
        let bias = |loaded: u64, padded: u64| {
            if mxfp4 && t > 1 {
                half(loaded) + (padded - loaded) * 2
            } else {
                half(loaded)
            }
        };
        let q = self.heads * self.head_dim;
        let kv = self.kv_heads * self.head_dim;
        assert!(self.kv_heads >= t);
        let attention = half(q / t * h)
            + half(q / t)
            + 2 * (half(kv / t * h) + half(kv / t))
            + half(h * q / t)
            + half(h)
            + half(self.heads / t);
        let norms = 2 * half(h);
        let router = half(e * h) + half(e);
        let experts = match split {
            ExpertSplit::Tensor => {
                let (pi, ph) = marlin(i / t);
                e * (matrix(2 * per_rank * h, 2 * pi * ph)
                    + matrix(h * per_rank, ph * pi)
                    + bias(2 * per_rank, 2 * pi)
                    + bias(h, ph))
            }
            ExpertSplit::Expert => {
                let (pi, ph) = marlin(i);
                e / t
                    * (matrix(2 * i * h, 2 * pi * ph)
                        + matrix(h * i, ph * pi)
                        + bias(2 * i, 2 * pi)
                        + bias(h, ph))
            }
        };
        let ends = 2 * half(self.vocab / t * h) + half(h);
        layers * (attention + norms + router + experts) + ends
    }
}

#[test]
fn gpt_oss_places_at_two_and_four_with_both_expert_splits() {
    let model = GptOss::read();
    let layers = 2u64;
    let options = BuildOptions::default();
    for format in ["dense-bf16", "mxfp4"] {
        let mut source = ModelSource::folder("models/gpt-oss-20b");
        source.layers = Some(layers);
        source.weight_format = Some(format.to_owned());
        let preset = source.policy_preset().unwrap();
        let set = a100(4);
        let kind = &set.kinds[0];
        let facts = ModelFacts::gather(&source, &kind.description, &kind.file, &options, &preset)
            .and_then(|facts| facts.seal(&options))
            .unwrap();
        for t in [2u32, 4] {
            let set = a100(t);
            let formed = form(&facts, &set, &preset, &settings(Some(t))).unwrap();
            for split in [ExpertSplit::Tensor, ExpertSplit::Expert] {
                // mxfp4 at 4 ranks too: a rank's 720 intermediate columns of the down
                // projection are 22.5 blocks of 32, split block-rounded (23, 23, 23, 21).
                assert_eq!(formed.rejected, vec![], "{format} t={t}");
                let index = formed
                    .problem
                    .options
                    .iter()
                    .position(|o| o.degree == t && o.split == split)
                    .unwrap();
                let mut one = formed.clone();
                one.problem.options = vec![formed.problem.options[index].clone()];
                one.details = vec![formed.details[index].clone()];
                let solution = solve(&one.problem).unwrap();
                // The differential: the exhaustive enumeration finds the same placement.
                match enumerate(&one.problem, 1_000_000) {
                    Enumerated::Complete { best, .. } => {
                        assert_eq!(best.as_ref(), Some(&solution), "{format} t={t} {split:?}")
                    }
                    Enumerated::OverBudget { placements } => {
                        panic!("{placements} placements: over the budget")
                    }
                }
                let plan = record(&facts, &set, &one, &solution).unwrap();
                assert_eq!(check(&plan), vec![], "{format} t={t} {split:?}");
                let p = &plan.payload;
                assert_eq!((p.tensor_parallel, p.pipeline_parallel), (t, 1));
                let expected = model.rank_bytes(layers, u64::from(t), split, format == "mxfp4");
                for device in &p.devices {
                    assert_eq!(
                        device.items.weights, expected,
                        "{format} t={t} {split:?} {}",
                        device.id
                    );
                }
                // The rules, shard by shard on rank 1.
                let shard = |name: &str| {
                    p.devices[1]
                        .shards
                        .iter()
                        .find(|s| s.tensor == format!("weight.layer.0.{name}"))
                        .map(|s| (s.part, s.parts))
                };
                let d = u64::from(t);
                assert_eq!(shard("sinks"), Some((1, d)));
                assert_eq!(shard("o_proj.bias"), Some((0, 1)));
                assert_eq!(shard("router.bias"), Some((0, 1)));
                match split {
                    ExpertSplit::Tensor => {
                        assert_eq!(shard("experts.0.gate_up.bias"), Some((1, d)));
                        assert_eq!(shard("experts.0.down.bias"), Some((0, 1)));
                    }
                    ExpertSplit::Expert => {
                        // Rank 1 owns the second range of experts, whole.
                        let first = model.experts / d;
                        assert_eq!(shard("experts.0.down.bias"), None);
                        assert_eq!(shard(&format!("experts.{first}.down.bias")), Some((0, 1)));
                        assert_eq!(
                            shard(&format!("experts.{first}.gate_up.bias")),
                            Some((0, 1))
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn the_hand_count_gives_the_figures_docs_quote() {
    // docs/placement-measurements.md, "gpt-oss in mxfp4 at tensor parallel 2 and 4": `plan
    // models/gpt-oss-20b` (24 layers, mxfp4) on 2 and 4 A100s places with expert-split
    // experts at these bytes per device (the experts in the buffers vLLM's MARLIN backend
    // allocates); the count above is checked against placements of 2 layers.
    let model = GptOss::read();
    assert_eq!(
        model.rank_bytes(24, 2, ExpertSplit::Expert, true),
        7_342_153_472
    );
    assert_eq!(
        model.rank_bytes(24, 4, ExpertSplit::Expert, true),
        3_673_509_632
    );
    assert_eq!(
        model.rank_bytes(24, 2, ExpertSplit::Tensor, true),
        7_585_701_632
    );
    // Tensor-split experts at 4 ranks: every rank loads 23 blocks (the last 21) into
    // Marlin's buffer of 768 intermediate columns by 3,072 hidden rows.
    assert_eq!(
        model.rank_bytes(24, 4, ExpertSplit::Tensor, true),
        3_797_765_888
    );
}

/// Whether a refusal reason is a divisibility one (heads, dimensions, blocks, groups).
fn divisibility(reason: &str) -> bool {
    reason.contains("divide") || reason.contains("blocks") || reason.contains("multiple of")
}

#[test]
fn every_shipped_folder_places_at_two_or_names_a_divisibility_reason() {
    // Cheap stand-ins of every folder with a config (request-file folders, `devices` and
    // `policies` have none): 4 layers (every layer kind of the shipped models: DeepSeek's
    // dense first layers and a MoE one, Qwen3-Next's linear and full attention), 8 routed
    // experts, the smallest policy: one sequence of one token, one scheduled token.
    let started = Instant::now();
    let mut folders: Vec<_> = std::fs::read_dir("models")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("config.json").is_file())
        .collect();
    folders.sort();
    assert!(folders.len() >= 19, "{folders:?}");
    let mut placed = 0;
    for folder in &folders {
        let text = std::fs::read_to_string(folder.join("config.json")).unwrap();
        let config: serde_json::Value = serde_json::from_str(&text).unwrap();
        let text_config = config.get("text_config").unwrap_or(&config);
        let routed = ["num_local_experts", "n_routed_experts", "num_experts"]
            .iter()
            .any(|k| text_config.get(*k).and_then(|v| v.as_u64()).unwrap_or(0) > 0);
        let mut source = ModelSource::folder(folder.clone());
        source.layers = Some(4);
        source.experts = routed.then_some(8);
        let preset: PolicyPreset = source.policy_preset().unwrap();
        let mut preset = preset.with_sequence_ceiling(1).with_token_ceiling(1);
        preset.maximum_context_tokens = Some(1);
        let mut pinned = settings(Some(2));
        pinned.policy = Some(preset);
        let name = folder.display();
        match place(&source, &a100(2), &pinned, &BuildOptions::default(), 0) {
            Ok(p) => {
                assert!(p.violations.is_empty(), "{name}: {:?}", p.violations);
                assert_eq!(p.plan.payload.tensor_parallel, 2, "{name}");
                for r in &p.rejected {
                    assert!(divisibility(&r.reason), "{name}: {}", r.reason);
                }
                placed += 1;
            }
            Err(PlacementError::Infeasible(message)) => {
                let why = message.lines().next().unwrap_or_default();
                let reasons: Vec<&str> = why
                    .split("; ")
                    .filter_map(|part| part.split_once("is impossible: ").map(|(_, r)| r))
                    .collect();
                assert!(!reasons.is_empty(), "{name}: {message}");
                for reason in &reasons {
                    assert!(divisibility(reason), "{name}: {reason}");
                }
                eprintln!("{name}: refused: {}", reasons.join("; "));
            }
            Err(other) => panic!("{name}: {other}"),
        }
    }
    eprintln!(
        "{placed} of {} folders placed at tensor parallel 2 in {:.1} s",
        folders.len(),
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn gated_delta_state_splits_by_channels_and_heads() {
    // Qwen3-Next's first 3 layers are gated DeltaNet: per sequence a convolution window of
    // (2 x key + value features) x (kernel - 1) activations and a recurrent state of value
    // heads x key dim x value dim f32; vLLM gives each rank 1/t of both.
    let text = std::fs::read_to_string("models/qwen3-next-80b-a3b/config.json").unwrap();
    let c: serde_json::Value = serde_json::from_str(&text).unwrap();
    let n = |key: &str| c[key].as_u64().unwrap();
    let (key_heads, value_heads) = (n("linear_num_key_heads"), n("linear_num_value_heads"));
    let (key_dim, value_dim) = (n("linear_key_head_dim"), n("linear_value_head_dim"));
    let conv =
        (2 * key_heads * key_dim + value_heads * value_dim) * (n("linear_conv_kernel_dim") - 1) * 2;
    let delta = value_heads * key_dim * value_dim * 4;
    let mut source = ModelSource::folder("models/qwen3-next-80b-a3b");
    source.layers = Some(3);
    source.experts = Some(8);
    let preset = source.policy_preset().unwrap();
    let set = a100(2);
    let kind = &set.kinds[0];
    let facts = ModelFacts::gather(
        &source,
        &kind.description,
        &kind.file,
        &BuildOptions::default(),
        &preset,
    )
    .unwrap();
    for layer in 0..3u32 {
        let states: Vec<_> = facts.states.iter().filter(|s| s.layer == layer).collect();
        let mut logical: Vec<u64> = states.iter().map(|s| s.fixed_bytes).collect();
        logical.sort();
        assert_eq!(logical, vec![conv, delta], "layer {layer}");
        for t in [2u64, 4] {
            let expected: u64 = states
                .iter()
                .map(|s| s.profile.quantize(s.fixed_bytes / t, s.alignment).unwrap())
                .sum();
            let (sequence, per_token) =
                jointplan::placement::options::layer_state(&facts, layer, t as u32, None).unwrap();
            assert_eq!((sequence, per_token), (expected, 0), "layer {layer} t={t}");
        }
    }
    let formed = form(&facts, &set, &preset, &settings(Some(2))).unwrap();
    assert!(formed.rejected.is_empty(), "{:?}", formed.rejected);
}
