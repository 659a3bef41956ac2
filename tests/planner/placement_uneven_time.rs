//! The time of a tensor-parallel layer whose routed experts sit in uneven or padded buffers
//! (docs/placement.md, "Time across devices"): a step waits for its slowest rank, and every
//! rank runs the fused MoE over its whole buffer, so each routed expert node takes the
//! buffer's share of the expert on one rank, not `1 / t`. Here gpt-oss-20b (2 layers) at
//! tensor parallel 4 with tensor-split experts, one client (the decode step alone), and the
//! share counted by hand from vLLM's rules:
//!
//! * mxfp4 on H100 (TRITON: the rank's 720 columns rounded up to 64, 768; hidden 2880):
//!   `768 x 2880 / (2880 x 2880)`;
//! * mxfp4 on A100 (MARLIN: 768 columns, hidden rounded up to 256, 3072):
//!   `768 x 3072 / (2880 x 2880)`;
//! * mxfp4 on a device with no CUDA capability (no vLLM MXFP4 backend: the loader's run of
//!   `⌈90 / 4⌉ = 23` blocks, the fullest rank's): `23 / 90`;
//! * bf16 (an even split, unchanged): `1 / 4`.
//!
//! The expected layer time is summed here from the single-device time model's node times
//! (the roofline the performance model owns) with those shares and the layer's two
//! all-reduces, and compared with the placement problem's per-layer time.

use std::path::{Path, PathBuf};

use jointplan::perf::communication::{all_reduce, LinkClass, LinkFigures};
use jointplan::perf::model::TimeModel;
use jointplan::perf::{engine_profile, serving, Calibration, Lengths, ServingPoint};
use jointplan::placement::model::ModelFacts;
use jointplan::placement::options::{form, Settings};
use jointplan::placement::problem::ExpertSplit;
use jointplan::placement::timing::Serving;
use jointplan::placement::DeviceSet;
use jointplan::synth::ModelSource;
use jointplan::BuildOptions;

const NVLINK: u64 = 450_000_000_000;

/// A set of 4 devices of `device` on one NVLink domain, written to `dir`.
fn set_of(device: &str, dir: &Path) -> DeviceSet {
    let file: PathBuf = std::env::current_dir().unwrap().join(device);
    let text = serde_json::json!({
        "name": "4 on NVLink",
        "devices": [{"file": file, "count": 4, "domain": "nvl"}],
        "domains": [{"id": "nvl", "link": {"kind": "nvlink", "bandwidth_bytes_per_second": NVLINK}}]
    });
    let path = dir.join("set.json");
    std::fs::write(&path, text.to_string()).unwrap();
    DeviceSet::read(&path).unwrap()
}

/// Layer 0's decode time on one rank at tensor parallel 4 (ns) from the placement
/// problem, and the same summed by hand with each expert node at `expert_share` of the
/// whole expert.
fn layer_time(format: &str, device: &str, expert_share: f64) -> (u64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let set = set_of(device, dir.path());
    let mut source = ModelSource::folder("models/gpt-oss-20b");
    source.layers = Some(2);
    source.weight_format = Some(format.to_owned());
    let preset = source.policy_preset().unwrap();
    let options = BuildOptions::default();
    let kind = &set.kinds[0];
    let facts =
        ModelFacts::gather(&source, &kind.description, &kind.file, &options, &preset).unwrap();
    let serving_point = Serving {
        concurrency: 1,
        input_tokens: 128,
        output_tokens: 64,
        engine: "vllm".to_owned(),
        simulated_requests: None,
        lengths: Lengths::default(),
        chunked_prefill: None,
    };
    let settings = Settings {
        tensor_parallel: Some(4),
        pipeline_parallel: Some(1),
        expert_split: Some(ExpertSplit::Tensor),
        serving: Some(serving_point),
        ..Settings::default()
    };
    let formed = form(&facts, &set, &preset, &settings).unwrap();
    assert_eq!(formed.rejected, vec![], "{format} on {device}");
    let option = &formed.problem.options[0];
    assert_eq!((option.degree, option.split), (4, ExpertSplit::Tensor));
    let actual = option.time.as_ref().unwrap().kinds[0].layers[0].decode;

    // By hand: the decode step of one request at the mean context, every node of layer 0
    // on one rank of 4 (FLOPs and bytes over 4, attention's KV over min(4, 8 KV heads);
    // an expert node's at `expert_share`), the bound side plus its launches; two
    // all-reduces of one token's hidden state.
    let engine = engine_profile("vllm").unwrap();
    let point = ServingPoint {
        concurrency: 1,
        input_tokens: 128,
        output_tokens: 64,
        engine: "vllm".to_owned(),
        scheduled_token_budget: facts.scheduled_tokens,
        maximum_sequences: facts.sequences,
        simulated_requests: 4,
        lengths: Lengths::default(),
        context_tokens: None,
        chunked_prefill: None,
    };
    let shape = serving::decode_shape(&point.at_mean_lengths());
    let model = TimeModel::new(
        &facts.request,
        |id| facts.providers.get(id),
        &kind.description.name,
        kind.description.performance.as_ref().unwrap(),
        Calibration::default(),
    )
    .unwrap();
    let mut seconds = 0.0;
    let mut experts = 0;
    for group in &model.groups {
        let here = group
            .nodes
            .iter()
            .filter(|n| n.as_str().starts_with("node.layer.0."))
            .count();
        if here == 0 {
            continue;
        }
        let t = model.node_time(group, &shape, engine.decode_launch_factor);
        let share = if group.cost.experts.is_some() {
            experts += here;
            expert_share
        } else {
            0.25
        };
        let node = (t.compute_seconds * share).max(t.memory_seconds * share) + t.overhead_seconds;
        seconds += here as f64 * node;
    }
    assert_eq!(experts, 32, "gpt-oss-20b: 32 routed expert nodes per layer");
    let link = LinkFigures {
        class: LinkClass::Nvlink,
        bandwidth_bytes_per_second: NVLINK as f64,
    };
    let hidden_bytes = shape.tokens() * 2880 * facts.activation_element_bytes;
    seconds += 2.0 * all_reduce(&link, 4, hidden_bytes).seconds;
    (actual, seconds * 1e9)
}

fn assert_close(actual: u64, expected: f64, what: &str) {
    assert!(
        (actual as f64 - expected).abs() <= 1.0,
        "{what}: {actual} ns, by hand {expected:.1} ns"
    );
}

#[test]
fn padded_and_uneven_expert_buffers_time_their_fullest_rank() {
    let (i, h) = (2880.0, 2880.0);
    let h100 = "models/devices/h100-sxm-80gb.json";
    let (actual, expected) = layer_time("mxfp4", h100, 768.0 * h / (i * h));
    assert_close(actual, expected, "mxfp4 on H100 (TRITON)");
    // Not the even split's time: the experts' work is 768 / 720 of an even share.
    let (_, even) = layer_time("mxfp4", h100, 0.25);
    assert!(expected > even + 1.0, "{expected} vs {even}");

    let a100 = "models/devices/a100-80gb.json";
    let (actual, expected) = layer_time("mxfp4", a100, 768.0 * 3072.0 / (i * h));
    assert_close(actual, expected, "mxfp4 on A100 (MARLIN)");

    // No CUDA capability, no backend: the loader's buffer, 23 of the 90 blocks.
    let m2 = "models/devices/m2-ultra-128gb.json";
    let (actual, expected) = layer_time("mxfp4", m2, 23.0 / 90.0);
    assert_close(
        actual,
        expected,
        "mxfp4 without a backend (the loader's run)",
    );
}

#[test]
fn an_even_split_keeps_a_quarter_of_each_expert() {
    let (actual, expected) = layer_time("dense-bf16", "models/devices/h100-sxm-80gb.json", 0.25);
    assert_close(actual, expected, "bf16 on H100");
}
