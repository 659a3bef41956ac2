//! The performance model against hand-written oracles: FLOPs and bytes of Llama-3.1-8B's
//! decode step and prefill computed from its published hyper-parameters (no code shared with
//! `jointplan::perf`), the expected distinct experts of Qwen3-30B-A3B, Gemma-2's sliding
//! window, and monotonicity properties of step time and the serving model.

use std::path::Path;
use std::sync::OnceLock;

use jointplan::perf::model::TimeModel;
use jointplan::perf::profile::{profiles, NodeProfile};
use jointplan::perf::work::{work, StepShape, Work};
use jointplan::perf::{self, Calibration, ServingPoint};
use jointplan::request::{PlanRequest, ProviderId};
use jointplan::synth::{DeviceDescription, ModelSource};
use proptest::prelude::*;

fn synthesize(model: &str) -> PlanRequest {
    ModelSource::folder(Path::new("models").join(model))
        .synthesize()
        .unwrap()
        .request
}

fn device(file: &str) -> DeviceDescription {
    DeviceDescription::read(&Path::new("models/devices").join(file)).unwrap()
}

/// The sum of every node's work in one step.
fn step_work(profiles: &[NodeProfile], shape: &StepShape) -> Work {
    let mut total = Work::default();
    for p in profiles {
        let w = work(&p.cost, shape);
        for (t, f) in total.flops.iter_mut().zip(w.flops) {
            *t += f;
        }
        total.bytes += w.bytes;
    }
    total
}

fn close(actual: f64, expected: f64, tolerance: f64, what: &str) {
    let error = (actual - expected).abs() / expected;
    assert!(
        error <= tolerance,
        "{what}: {actual:.4e} vs oracle {expected:.4e} ({:.3}% off, tolerance {:.3}%)",
        error * 100.0,
        tolerance * 100.0
    );
}

// Llama-3.1-8B (models/llama-3.1-8b/config.json), written out by hand.
const HIDDEN: f64 = 4096.0;
const LAYERS: f64 = 32.0;
const HEADS: f64 = 32.0;
const KV_HEADS: f64 = 8.0;
const HEAD_DIM: f64 = 128.0;
const FFN: f64 = 14336.0;
const VOCAB: f64 = 128256.0;

/// Parameters multiplied per token (every projection and the head; the embedding is a
/// gather).
fn matmul_params() -> f64 {
    let attention = HIDDEN * HEADS * HEAD_DIM * 2.0 + HIDDEN * KV_HEADS * HEAD_DIM * 2.0;
    let mlp = 3.0 * HIDDEN * FFN;
    LAYERS * (attention + mlp) + VOCAB * HIDDEN
}

/// KV bytes per cached token over all layers (f16 keys and values).
fn kv_bytes_per_token() -> f64 {
    LAYERS * 2.0 * KV_HEADS * HEAD_DIM * 2.0
}

#[test]
fn llama_decode_step_bytes_are_weights_plus_kv_and_flops_twice_the_params() {
    let request = synthesize("llama-3.1-8b");
    let profiles = profiles(&request).unwrap();
    for (batch, context) in [(1u64, 1024u64), (8, 4096), (64, 2048)] {
        let (b, c) = (batch as f64, context as f64);
        let w = step_work(&profiles, &StepShape::decode(batch, context));
        // Weights read once (f16), the embedding rows gathered, the KV cache read at the
        // context and the new token's KV written; activations are a fraction of a percent.
        let weights = 2.0 * matmul_params() + 2.0 * HIDDEN * (2.0 * LAYERS + 1.0);
        let bytes =
            weights + b * 2.0 * HIDDEN + b * c * kv_bytes_per_token() + b * kv_bytes_per_token();
        // Activations (about 5.5 MB per token over the 32 layers) are the rest: 2%.
        close(
            w.bytes,
            bytes,
            0.02,
            &format!("decode bytes b={batch} c={context}"),
        );
        // 2 x params per token, plus 4 x heads x head_dim per (query, key) pair.
        let flops = 2.0 * b * matmul_params() + b * c * LAYERS * 4.0 * HEADS * HEAD_DIM;
        close(
            w.total_flops(),
            flops,
            0.01,
            &format!("decode FLOPs b={batch} c={context}"),
        );
    }
}

#[test]
fn llama_prefill_flops_count_causal_pairs() {
    let request = synthesize("llama-3.1-8b");
    let profiles = profiles(&request).unwrap();
    for tokens in [128u64, 2048, 8192] {
        let t = tokens as f64;
        let w = step_work(&profiles, &StepShape::prefill(tokens));
        // Projections for every token; the head for the last token only; causal attention
        // over t (t + 1) / 2 pairs.
        let params_per_token = matmul_params() - VOCAB * HIDDEN;
        let flops = 2.0 * t * params_per_token
            + 2.0 * VOCAB * HIDDEN
            + t * (t + 1.0) / 2.0 * LAYERS * 4.0 * HEADS * HEAD_DIM;
        close(
            w.total_flops(),
            flops,
            0.01,
            &format!("prefill FLOPs t={tokens}"),
        );
    }
}

#[test]
fn moe_expert_bytes_follow_the_expected_distinct_experts() {
    let request = synthesize("qwen3-30b-a3b");
    let profiles = profiles(&request).unwrap();
    let experts: Vec<&NodeProfile> = profiles
        .iter()
        .filter(|p| p.cost.experts.is_some())
        .collect();
    assert!(!experts.is_empty());
    let all: f64 = experts.iter().map(|p| p.cost.matrix_bytes as f64).sum();
    for batch in [1u64, 4, 32, 256] {
        let shape = StepShape::decode(batch, 1);
        let read: f64 = experts.iter().map(|p| work(&p.cost, &shape).bytes).sum();
        // Oracle: 128 experts, 8 per token: E (1 - (1 - k/E)^b) of 128 touched.
        let touched = 1.0 - (1.0 - 8.0 / 128.0f64).powi(batch as i32);
        let activations: f64 = experts
            .iter()
            .map(|p| {
                let c = &p.cost;
                batch as f64 * c.activation_bytes_per_token as f64 + c.vector_bytes as f64
            })
            .sum();
        close(
            read - activations,
            all * touched,
            1e-9,
            &format!("expert bytes b={batch}"),
        );
    }
}

#[test]
fn a_sliding_window_caps_the_cache_read() {
    let request = synthesize("gemma-2-9b");
    let profiles = profiles(&request).unwrap();
    let windowed: Vec<&NodeProfile> = profiles
        .iter()
        .filter(|p| p.cost.attention.is_some_and(|a| a.window.is_some()))
        .collect();
    let global: Vec<&NodeProfile> = profiles
        .iter()
        .filter(|p| p.cost.attention.is_some_and(|a| a.window.is_none()))
        .collect();
    assert!(!windowed.is_empty() && !global.is_empty());
    let p = windowed[0];
    let a = p.cost.attention.unwrap();
    let window = a.window.unwrap();
    let at = |context: u64| work(&p.cost, &StepShape::decode(1, context)).bytes;
    // Beyond the window the read stops growing; below it, it grows a token's bytes a token.
    assert_eq!(at(window + 10), at(window + 5000));
    assert_eq!(at(window) - at(window - 1), a.state_bytes_per_token as f64);
    let g = global[0];
    let global_at = |context: u64| work(&g.cost, &StepShape::decode(1, context)).bytes;
    assert!(global_at(window + 5000) > global_at(window + 10));
}

/// Llama-3.1-8B on the H100 with every node in the dense class (built once).
fn llama_model() -> &'static TimeModel {
    static MODEL: OnceLock<TimeModel> = OnceLock::new();
    MODEL.get_or_init(|| {
        let request = synthesize("llama-3.1-8b");
        let dense = ProviderId::new("provider.cuda.any.dense").unwrap();
        let d = device("h100-sxm-80gb.json");
        perf::time_model(&request, |_| Some(&dense), &d, Calibration::default()).unwrap()
    })
}

#[test]
fn a_single_decode_step_is_memory_bound_at_the_bandwidth() {
    let model = llama_model();
    let t = model.step_time(&StepShape::decode(1, 1024), 0.0);
    // Oracle: about 16.1 GB of weights and KV at 0.8 x 3.35 TB/s (the dense class) times
    // the device's fitted memory factor.
    let bytes = 2.0 * matmul_params() + 1024.0 * kv_bytes_per_token();
    let factor = perf::efficiency::device_memory_factor("NVIDIA H100 80GB HBM3");
    let expected = bytes / (0.8 * factor * 3350e9);
    assert!(t.memory_seconds > t.compute_seconds);
    // The KV and activations are read by the attention and fused classes (other
    // efficiencies): within 2%.
    close(t.seconds, expected, 0.02, "decode step seconds");
}

#[test]
fn a_calibrated_kernel_replaces_the_roofline() {
    let request = synthesize("llama-3.1-8b");
    let dense = ProviderId::new("provider.cuda.any.dense").unwrap();
    let d = device("h100-sxm-80gb.json");
    let entry = perf::CalibrationEntry {
        operation: "dense_swiglu".to_owned(),
        device: d.name.clone(),
        dtype: "bf16".to_owned(),
        weight_dimensions: None,
        tokens: 1,
        seconds: 0.001,
    };
    let calibration = Calibration::from_entries(Path::new("c.json"), vec![entry]).unwrap();
    let plain = perf::time_model(&request, |_| Some(&dense), &d, Calibration::default()).unwrap();
    let calibrated = perf::time_model(&request, |_| Some(&dense), &d, calibration).unwrap();
    let shape = StepShape::decode(1, 1024);
    let swiglu = |m: &TimeModel| {
        let group = m
            .groups
            .iter()
            .find(|g| g.cost.kind == "dense_swiglu")
            .unwrap();
        (
            m.node_time(group, &shape, 1.0).seconds,
            group.nodes.len() as f64,
        )
    };
    let (measured, n) = swiglu(&calibrated);
    assert_eq!(measured, 0.001);
    let (modelled, _) = swiglu(&plain);
    let difference =
        calibrated.step_time(&shape, 1.0).seconds - plain.step_time(&shape, 1.0).seconds;
    close(difference, n * (0.001 - modelled), 1e-9, "calibrated step");
}

fn point(concurrency: u64, input: u64, output: u64) -> ServingPoint {
    ServingPoint {
        concurrency,
        input_tokens: input,
        output_tokens: output,
        engine: "vllm".to_owned(),
        scheduled_token_budget: 8192,
        maximum_sequences: 256,
        simulated_requests: concurrency * 4,
        lengths: jointplan::perf::Lengths::Fixed,
        context_tokens: None,
        chunked_prefill: None,
    }
}

#[test]
fn one_request_alone_takes_its_prefill_then_one_step_per_token() {
    let model = llama_model();
    let engine = perf::engine_profile("vllm").unwrap();
    let p = perf::predict(model, &point(1, 512, 64)).unwrap();
    // Oracle: alone, TTFT is the prompt's one step; every later token one decode step at a
    // context between 513 and 575 (the step time is linear in the context).
    let prefill = model
        .step_time(&StepShape::prefill(512), engine.prefill_launch_factor)
        .seconds
        + engine.step_overhead_seconds
        + engine.request_overhead_seconds;
    close(p.ttft_seconds, prefill, 1e-9, "ttft alone");
    let mut decode = 0.0;
    for generated in 1..64u64 {
        decode += model
            .step_time(
                &StepShape::decode(1, 512 + generated),
                engine.decode_launch_factor,
            )
            .seconds
            + engine.step_overhead_seconds;
    }
    close(p.tpot_seconds, decode / 63.0, 1e-3, "tpot alone");
    close(
        p.output_tokens_per_second_per_user,
        1.0 / p.tpot_seconds,
        1e-12,
        "per user",
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn step_time_grows_with_batch_context_and_tokens(
        batch in 1u64..512, context in 1u64..65536, tokens in 1u64..16384,
    ) {
        let model = llama_model();
        let t = |shape: StepShape| model.step_time(&shape, 1.0).seconds;
        prop_assert!(t(StepShape::decode(batch + 1, context)) >= t(StepShape::decode(batch, context)));
        prop_assert!(t(StepShape::decode(batch, context + 1)) >= t(StepShape::decode(batch, context)));
        prop_assert!(t(StepShape::prefill(tokens + 1)) >= t(StepShape::prefill(tokens)));
    }

    #[test]
    fn more_concurrency_means_slower_tokens_and_more_throughput(
        concurrency in 1u64..48, input in 16u64..2048, output in 2u64..64,
    ) {
        let model = llama_model();
        let low = perf::predict(model, &point(concurrency, input, output)).unwrap();
        let high = perf::predict(model, &point(concurrency * 2, input, output)).unwrap();
        prop_assert!(high.tpot_seconds >= low.tpot_seconds * (1.0 - 1e-9));
        prop_assert!(high.output_tokens_per_second >= low.output_tokens_per_second * (1.0 - 1e-9));
    }
}
