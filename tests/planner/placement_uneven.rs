//! vLLM's block-rounded uneven split of gpt-oss's mxfp4 routed experts at tensor parallel
//! 4 and 8 (docs/placement.md, "Quantized shards"): the intermediate axis holds 90 blocks
//! of 32 columns; at 4 each rank allocates a buffer of ⌈90 / 4⌉ = 23 blocks, ranks 0-2
//! hold 23 of the tensor's blocks and rank 3 the last 21 (at 8: 12 each, the last 6). The bytes of every expert shard are counted here
//! by hand from the config's numbers; the placement is the exhaustive enumeration's and
//! passes the checker, which rejects a tampered split (blocks that do not add up, a part
//! past the padded size, runs out of vLLM's order, a part without its blocks, a buffer of
//! another size). Squeezed so that it must offload, the uneven option's placement under
//! each memory objective is the exhaustive enumeration's and passes the checker with
//! padded expert shards on the host.

use std::path::Path;

use jointplan::placement::check::check;
use jointplan::placement::enumerate::{enumerate, Enumerated};
use jointplan::placement::model::ModelFacts;
use jointplan::placement::options::form;
use jointplan::placement::problem::{ExpertSplit, Objective};
use jointplan::placement::record::record;
use jointplan::placement::solve::solve;
use jointplan::placement::{place, DeviceSet, PlacementError, PlacementPlan, Settings};
use jointplan::synth::ModelSource;
use jointplan::BuildOptions;

fn a100(count: u32) -> DeviceSet {
    DeviceSet::uniform(Path::new("models/devices/a100-80gb.json"), count, None).unwrap()
}

fn gpt_oss(layers: u64) -> ModelSource {
    let mut source = ModelSource::folder("models/gpt-oss-20b");
    source.layers = Some(layers);
    source
}

fn pinned(t: u32, split: ExpertSplit) -> Settings {
    Settings {
        tensor_parallel: Some(t),
        expert_split: Some(split),
        ..Settings::default()
    }
}

/// The config's hidden and intermediate sizes.
fn sizes() -> (u64, u64) {
    let text = std::fs::read_to_string("models/gpt-oss-20b/config.json").unwrap();
    let c: serde_json::Value = serde_json::from_str(&text).unwrap();
    let n = |key: &str| c[key].as_u64().unwrap();
    (n("hidden_size"), n("intermediate_size"))
}

fn placed_at(t: u32) -> PlacementPlan {
    let placed = place(
        &gpt_oss(2),
        &a100(t),
        &pinned(t, ExpertSplit::Tensor),
        &BuildOptions::default(),
        1_000_000,
    )
    .unwrap();
    assert_eq!(placed.violations, vec![]);
    // The differential: the exhaustive enumeration evaluated every placement and agrees.
    assert_eq!(placed.certificate.method, "exhaustive");
    placed.plan
}

/// The shard of `tensor` on each device, by rank: (part, parts, bytes, blocks).
fn shards(plan: &PlacementPlan, tensor: &str) -> Vec<(u64, u64, u64, Option<u64>)> {
    plan.payload
        .devices
        .iter()
        .map(|d| {
            let s = d.shards.iter().find(|s| s.tensor == tensor).unwrap();
            (s.part, s.parts, s.bytes, s.blocks)
        })
        .collect()
}

#[test]
fn experts_split_block_rounded_into_padded_buffers_counted_by_hand() {
    let (hidden, intermediate) = sizes();
    // 2880 columns are 90 blocks of 32. Over 4 ranks, runs of 23 (4 x 23 = 92 >= 90 >
    // 4 x 22); over 8, runs of 12 (96 >= 90 > 88): the last rank holds what is left.
    let blocks = intermediate / 32;
    assert_eq!(blocks, 90);
    // The A100 (compute capability 8.0) takes vLLM v0.19.0's MARLIN backend, whose buffers
    // round the rank's intermediate size `2880 / t` up to 128 and the hidden size to 256:
    // at 4, 720 -> 768 columns (24 blocks); at 8, 360 -> 384 (12 blocks); 2880 -> 3072 rows.
    let up = |n: u64, m: u64| n.div_ceil(m) * m;
    let padded_hidden = up(hidden, 256);
    assert_eq!(padded_hidden, 3072);
    let cases: [(u32, u64, u64, &[u64]); 2] = [
        (4, 23, 768, &[23, 23, 23, 21]),
        (8, 12, 384, &[12, 12, 12, 12, 12, 12, 12, 6]),
    ];
    for (t, run, columns, held) in cases {
        assert_eq!(up(intermediate / u64::from(t), 128), columns);
        assert_eq!(held.iter().sum::<u64>(), blocks);
        let plan = placed_at(t);
        let p = &plan.payload;
        assert_eq!(
            (p.tensor_parallel, p.expert_split),
            (t, ExpertSplit::Tensor)
        );
        // mxfp4: a block of 32 values is 16 bytes of e2m1 values and one e8m0 scale byte.
        let mxfp4_block = 16 + 1;
        // As loaded: down, hidden rows x `run` blocks of its 2880 input columns; gate_up,
        // gate and up, `run` x 32 rows each, of hidden / 32 blocks; gate_up's bias, gate
        // and up, `run` x 32 16-bit values each.
        let loaded = [
            hidden * run * mxfp4_block,
            2 * run * 32 * (hidden / 32) * mxfp4_block,
            2 * run * 32 * 2,
        ];
        // Marlin's buffers: the same at `columns` x `padded_hidden`.
        let buffer = [
            padded_hidden * (columns / 32) * mxfp4_block,
            2 * columns * (padded_hidden / 32) * mxfp4_block,
            2 * columns * 2,
        ];
        if t == 4 {
            assert_eq!(loaded, [1_126_080, 2_252_160, 2_944]);
            assert_eq!(buffer, [1_253_376, 2_506_752, 3_072]);
        }
        for (k, name) in ["down", "gate_up", "gate_up.bias"].into_iter().enumerate() {
            let tensor = format!("weight.layer.1.experts.31.{name}");
            let d = u64::from(t);
            let expected: Vec<_> = (0..d)
                .map(|rank| (rank, d, buffer[k], Some(held[rank as usize])))
                .collect();
            assert_eq!(shards(&plan, &tensor), expected, "{tensor} t={t}");
            let total = p.tensors.iter().find(|x| x.id == tensor).unwrap();
            let blocks_of = total.blocks.unwrap();
            assert_eq!(blocks_of.count, blocks, "{tensor}");
            // The tensor is its 90 blocks; every rank loads a run of `run` of them into
            // the backend's buffer, the rest of which is padding.
            assert_eq!(blocks_of.count * blocks_of.bytes, total.bytes, "{tensor}");
            assert_eq!(run * blocks_of.bytes, loaded[k], "{tensor}");
            for s in p.devices.iter().flat_map(|d| &d.shards) {
                if s.tensor == tensor {
                    assert_eq!(s.padding_bytes, buffer[k] - loaded[k], "{tensor}");
                }
            }
        }
        // The down projection's bias is whole on every rank (not split, no blocks), in
        // Marlin's buffer of the padded hidden size.
        let bias = shards(&plan, "weight.layer.0.experts.0.down.bias");
        assert_eq!(bias, vec![(0, 1, padded_hidden * 2, None); t as usize]);
        // Every other tensor splits evenly, as before: no blocks recorded, no padding.
        assert!(p.devices[0]
            .shards
            .iter()
            .any(|s| s.tensor.ends_with("down") && s.padding_bytes > 0));
        for device in &p.devices {
            for s in &device.shards {
                let expert = s.tensor.contains(".experts.");
                assert_eq!(
                    s.blocks.is_some(),
                    expert && !s.tensor.ends_with("down.bias"),
                    "{}",
                    s.tensor
                );
                // Only the experts' buffers pad (at 8, gate_up's bias needs none: its
                // 384 columns are the run of 12 blocks).
                assert!(s.padding_bytes == 0 || expert, "{}", s.tensor);
            }
        }
    }
}

/// The last rank's buffer of layer 1's expert 31 `down` at 4 ranks of `device` (tensor-split
/// experts): its bytes and padding.
fn down_buffer_on(device: &str) -> (u64, u64) {
    let set = DeviceSet::uniform(Path::new(device), 4, None).unwrap();
    let placed = place(
        &gpt_oss(2),
        &set,
        &pinned(4, ExpertSplit::Tensor),
        &BuildOptions::default(),
        1_000_000,
    )
    .unwrap();
    assert_eq!(placed.violations, vec![], "{device}");
    let s = placed.plan.payload.devices[3]
        .shards
        .iter()
        .find(|s| s.tensor == "weight.layer.1.experts.31.down")
        .unwrap()
        .clone();
    (s.bytes, s.padding_bytes)
}

#[test]
fn each_gpu_generation_pads_as_its_backend_does() {
    // The down projection of one expert at 4 ranks, as loaded: 2880 rows x 23 blocks x 17.
    let loaded = 2880 * 23 * 17;
    // H100 (9.0): TRITON rounds 720 columns up to 64 (768), keeps the hidden size, and
    // swizzles: packed bytes (768 / 2 -> 384 rounded to 64) x (2880 rounded to 64); the
    // checkpoint-layout scales (2880 x 24) kept beside the swizzled ones, (2880 -> 3072
    // rows, rounded to 256) x (24 columns, rounded to 2).
    let triton = 384 * 2880 + 2880 * 24 + 3072 * 24;
    assert_eq!(triton, 1_248_768);
    assert_eq!(
        down_buffer_on("models/devices/h100-sxm-80gb.json"),
        (triton, triton - loaded)
    );
    // B200 (10.0): FlashInfer TRT-LLM rounds both sizes to 256: 720 -> 768, 2880 -> 3072.
    let trtllm = 3072 * 24 * 17;
    assert_eq!(
        down_buffer_on("models/devices/b200-180gb.json"),
        (trtllm, trtllm - loaded)
    );
    // An Apple M2 Ultra states no CUDA capability: no vLLM MXFP4 backend, the loader's
    // buffer of 23 blocks.
    assert_eq!(
        down_buffer_on("models/devices/m2-ultra-128gb.json"),
        (loaded, 0)
    );
}

#[test]
fn the_checker_rejects_a_tampered_uneven_split() {
    let plan = placed_at(4);
    let tensor = "weight.layer.0.experts.5.down";
    let shards_rule = |plan: &PlacementPlan| -> Vec<String> {
        check(plan)
            .into_iter()
            .filter(|v| v.rule == "shards")
            .map(|v| v.message)
            .collect()
    };
    assert_eq!(shards_rule(&plan), Vec::<String>::new());
    let tamper = |edit: &dyn Fn(u32, &mut jointplan::placement::record::ShardRecord)| {
        let mut plan = plan.clone();
        for device in &mut plan.payload.devices {
            let rank = device.rank;
            for s in device.shards.iter_mut().filter(|s| s.tensor == tensor) {
                edit(rank, s);
            }
        }
        shards_rule(&plan)
    };
    let expect = |found: Vec<String>, phrase: &str| {
        assert!(
            found
                .iter()
                .any(|m| m.contains(tensor) && m.contains(phrase)),
            "{phrase}: {found:?}"
        );
    };
    // The last rank claims a 22nd block: 91 blocks, not the tensor's 90.
    expect(
        tamper(&|rank, s| {
            if rank == 3 {
                s.blocks = Some(22);
            }
        }),
        "hold 91 blocks, the tensor has 90",
    );
    // One block moved from the last rank to the first: 90 blocks, but 24 is past the
    // padded 23.
    let moved = tamper(&|rank, s| match rank {
        0 => s.blocks = Some(24),
        3 => s.blocks = Some(20),
        _ => {}
    });
    expect(moved.clone(), "more than the padded 23");
    expect(
        moved,
        "part 3 holds 20 blocks, the contiguous runs of 23 give it 21",
    );
    // The short run first: 90 blocks, each at most 23, but not vLLM's contiguous runs.
    expect(
        tamper(&|rank, s| match rank {
            0 => s.blocks = Some(21),
            3 => s.blocks = Some(23),
            _ => {}
        }),
        "part 0 holds 21 blocks, the contiguous runs of 23 give it 23",
    );
    // A buffer one block short of the padded size.
    expect(
        tamper(&|rank, s| {
            if rank == 3 {
                s.bytes -= 2880 * 17;
            }
        }),
        "the padded size is 23 blocks",
    );
    // The padding of Marlin's buffer claimed as the rank's blocks: the loaded part is
    // then the whole buffer, 24 blocks, past the padded run; and the ranks' buffers no
    // longer pad alike.
    let unpadded = tamper(&|rank, s| {
        if rank == 3 {
            s.padding_bytes = 0;
        }
    });
    expect(unpadded.clone(), "the padded size is 23 blocks");
    expect(unpadded, "its parts' buffers are padded differently");
    // More padding than the buffer holds.
    expect(
        tamper(&|rank, s| {
            if rank == 2 {
                s.padding_bytes = s.bytes + 1;
            }
        }),
        "bytes of padding in a buffer of",
    );
    // A part that records no blocks.
    expect(
        tamper(&|rank, s| {
            if rank == 1 {
                s.blocks = None;
            }
        }),
        "part 1 records no blocks",
    );
    // Blocks on an evenly split tensor.
    let mut even = plan.clone();
    let q = even.payload.devices[0]
        .shards
        .iter_mut()
        .find(|s| s.tensor == "weight.layer.0.q_proj")
        .unwrap();
    q.blocks = Some(1);
    assert!(
        shards_rule(&even)
            .iter()
            .any(|m| m.contains("weight.layer.0.q_proj") && m.contains("not split block-rounded")),
        "{:?}",
        shards_rule(&even)
    );
}

#[test]
fn expert_parallelism_stays_the_cheaper_choice_and_a_pin_on_a_dense_model_is_refused() {
    // Unpinned, both splits are options at 4 ranks; expert parallelism holds fewer bytes
    // (no padding, no copy of each expert's down bias on every rank), so it leaves more
    // room for KV tokens and the fewest-devices objective picks it.
    let settings = Settings {
        tensor_parallel: Some(4),
        ..Settings::default()
    };
    let placed = place(
        &gpt_oss(2),
        &a100(4),
        &settings,
        &BuildOptions::default(),
        1_000_000,
    )
    .unwrap();
    assert_eq!(placed.rejected, vec![]);
    assert_eq!(placed.plan.payload.expert_split, ExpertSplit::Expert);
    let tensor = placed_at(4);
    assert!(tensor.payload.devices[0].items.weights > placed.plan.payload.devices[0].items.weights);
    // A dense model has no experts to split.
    let mut llama = ModelSource::folder("models/llama-3.1-8b");
    llama.layers = Some(1);
    let refused = place(
        &llama,
        &a100(2),
        &Settings {
            tensor_parallel: Some(2),
            expert_split: Some(ExpertSplit::Expert),
            ..Settings::default()
        },
        &BuildOptions::default(),
        1_000_000,
    );
    match refused {
        Err(e @ PlacementError::Usage(_)) => {
            assert!(e.is_bad_input());
            assert!(e.to_string().contains("--expert-split expert"), "{e}");
            assert!(e.to_string().contains("no routed experts"), "{e}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn offloaded_uneven_experts_match_the_enumeration_and_pass_the_checker() {
    // The uneven option with the devices squeezed so that each memory objective must move
    // expert groups (padded shards), layers or KV to the host: the solver's answer is the
    // exhaustive enumeration's, and the written placement passes the checker (its host
    // shards are padded buffers with their blocks, the staging their largest layer's).
    let options = BuildOptions::default();
    let source = gpt_oss(2);
    let preset = source.policy_preset().unwrap();
    let set =
        DeviceSet::uniform(Path::new("models/devices/a100-80gb.json"), 4, Some(1 << 40)).unwrap();
    let kind = &set.kinds[0];
    let facts = ModelFacts::gather(&source, &kind.description, &kind.file, &options, &preset)
        .and_then(|facts| facts.seal(&options))
        .unwrap();
    let settings = Settings {
        host_offload: true,
        ..pinned(4, ExpertSplit::Tensor)
    };
    let formed = form(&facts, &set, &preset, &settings).unwrap();
    assert_eq!(formed.problem.options.len(), 1);
    let roomy = solve(&formed.problem).unwrap();
    let plan = record(&facts, &set, &formed, &roomy).unwrap();
    let total = plan.payload.devices[0].total_bytes;
    let unit = formed.problem.options[0].unit_bytes;
    assert!(unit > 0);
    let mut moved = 0;
    for objective in [
        Objective::FewestDevices,
        Objective::MostKvTokens,
        Objective::LeastOffloaded,
    ] {
        let mut squeezed = formed.clone();
        let usable = total - 5 * unit / 2;
        squeezed.problem.kinds[0].usable_bytes = usable;
        squeezed.usable = vec![usable];
        squeezed.problem.objective = objective;
        let solution = solve(&squeezed.problem).unwrap();
        match enumerate(&squeezed.problem, 1_000_000) {
            Enumerated::Complete { best, .. } => {
                assert_eq!(best.as_ref(), Some(&solution), "{objective:?}")
            }
            Enumerated::OverBudget { placements } => panic!("{placements} placements"),
        }
        assert!(solution.offloaded_bytes > 0, "{objective:?}");
        let plan = record(&facts, &set, &squeezed, &solution).unwrap();
        assert_eq!(check(&plan), vec![], "{objective:?}");
        let host_blocks = plan
            .payload
            .host
            .shards
            .iter()
            .filter(|s| s.blocks.is_some())
            .count();
        moved += host_blocks;
    }
    // At least one objective moves expert groups: padded shards on the host.
    assert!(moved > 0);
}
