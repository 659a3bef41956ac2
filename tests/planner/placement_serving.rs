//! A placement's serving point is simulated like one device's: the closed loop of
//! `perf::serving` with each step priced on the placement (`placement::step_price`). Two
//! code paths price a placement (the objective's linear estimate from per-slot figures, the
//! simulation from the step pricer); at one client and two output tokens the simulation
//! runs exactly one prompt and one decode step of the linear estimate's shapes, so the two
//! must agree there, across stages, ranks, sends and host transfers. With many clients in
//! flight, queueing makes the simulated TTFT exceed one prompt alone.

use std::path::Path;

use jointplan::placement::prediction::Prediction;
use jointplan::placement::problem::Objective;
use jointplan::placement::timing::Serving;
use jointplan::placement::{place, DeviceSet, Placed, Settings};
use jointplan::synth::ModelSource;
use jointplan::BuildOptions;

fn settings(
    tensor_parallel: Option<u32>,
    pipeline_parallel: Option<u32>,
    host_offload: bool,
    serving: Serving,
) -> Settings {
    Settings {
        tensor_parallel,
        pipeline_parallel,
        expert_split: None,
        host_offload,
        host_memory: None,
        kv_sequence_grain: false,
        objective: Objective::FewestDevices,
        serving: Some(serving),
        policy: None,
        why_not: None,
        budget: None,
    }
}

fn serving(concurrency: u64, input_tokens: u64, output_tokens: u64) -> Serving {
    Serving {
        concurrency,
        input_tokens,
        output_tokens,
        engine: "vllm".to_owned(),
        simulated_requests: None,
        lengths: jointplan::perf::Lengths::Fixed,
        chunked_prefill: None,
    }
}

fn placed(source: &ModelSource, set: &DeviceSet, settings: &Settings) -> Placed {
    let placed = place(source, set, settings, &BuildOptions::default(), 1_000_000).unwrap();
    assert!(placed.violations.is_empty(), "{:?}", placed.violations);
    placed
}

fn set(file: &str) -> DeviceSet {
    DeviceSet::read(Path::new(file)).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

fn performance(placed: &Placed) -> &Prediction {
    placed.performance.as_ref().expect("a serving point")
}

/// The simulation at one client and two output tokens against the linear estimate.
fn agrees_with_the_linear_estimate(what: &str, p: &Prediction) {
    let linear = &p.linear_estimate;
    assert!(
        close(p.ttft_seconds, linear.ttft.seconds),
        "{what}: simulated TTFT {} against one prompt alone {}",
        p.ttft_seconds,
        linear.ttft.seconds
    );
    assert!(
        close(p.tpot_seconds, linear.tpot.seconds),
        "{what}: simulated TPOT {} against the decode step {}",
        p.tpot_seconds,
        linear.tpot.seconds
    );
    // Four requests, one after another: a prompt step and a decode step each.
    assert_eq!(p.simulated_steps, 8, "{what}");
}

#[test]
fn at_one_client_the_simulation_is_the_linear_estimate_across_stages_and_ranks() {
    let mut source = ModelSource::folder("models/llama-3.1-8b");
    source.layers = Some(2);
    let placed = placed(
        &source,
        &set("models/devices/sets/a100-80gb-x4.json"),
        &settings(Some(2), Some(2), false, serving(1, 300, 2)),
    );
    let payload = &placed.plan.payload;
    assert_eq!((payload.tensor_parallel, payload.pipeline_parallel), (2, 2));
    let p = performance(&placed);
    // All four parts a placement adds are priced.
    let run = &p.simulated_time.device;
    assert!(
        run.all_reduce_seconds > 0.0 && run.send_seconds > 0.0,
        "{run:?}"
    );
    agrees_with_the_linear_estimate("tp 2 pp 2", p);
}

#[test]
fn at_one_client_the_simulation_is_the_linear_estimate_with_host_offload() {
    // llama-3.1-70b, 8 layers in bf16 under the server policy with its 64 sequences of
    // 32768 tokens required (8.6 GB of KV cache per layer) is beyond one H100 without its
    // host tier.
    let mut source = ModelSource::folder("models/llama-3.1-70b");
    source.layers = Some(8);
    source.weight_format = Some("dense-bf16".to_owned());
    let required = Settings {
        policy: Some(crate::common::requiring_the_ceiling(&source)),
        ..settings(None, None, true, serving(1, 512, 2))
    };
    let placed = placed(
        &source,
        &set("models/devices/sets/h100-sxm-80gb-x1.json"),
        &required,
    );
    assert!(placed.plan.payload.host.offloaded_bytes > 0);
    let p = performance(&placed);
    assert!(p.simulated_time.device.host_transfer_seconds > 0.0);
    agrees_with_the_linear_estimate("host offload", p);
}

#[test]
fn at_one_client_the_simulation_is_the_linear_estimate_with_kv_by_sequence() {
    // The same model with the KV offloaded by sequence: the last host-KV layer streams the
    // share of its sequences on the host, in the simulation and in the linear estimate.
    let mut source = ModelSource::folder("models/llama-3.1-70b");
    source.layers = Some(8);
    source.weight_format = Some("dense-bf16".to_owned());
    let settings = Settings {
        kv_sequence_grain: true,
        policy: Some(crate::common::requiring_the_ceiling(&source)),
        ..settings(None, None, true, serving(1, 512, 2))
    };
    let placed = placed(
        &source,
        &set("models/devices/sets/h100-sxm-80gb-x1.json"),
        &settings,
    );
    let stage = &placed.plan.payload.stages[0];
    assert!(stage.kv_offloaded_sequences > 0, "{stage:?}");
    let p = performance(&placed);
    assert!(p.simulated_time.device.host_transfer_seconds > 0.0);
    agrees_with_the_linear_estimate("KV by sequence", p);
}

#[test]
fn queueing_makes_the_simulated_ttft_exceed_one_prompt_alone() {
    let mut source = ModelSource::folder("models/llama-3.1-8b");
    source.layers = Some(2);
    let placed = placed(
        &source,
        &set("models/devices/sets/a100-80gb-x2.json"),
        &settings(Some(2), Some(1), false, serving(32, 2048, 16)),
    );
    let p = performance(&placed);
    let alone = p.linear_estimate.ttft.seconds;
    // 32 prompts of 2048 tokens arrive together and share a budget of the policy's
    // scheduled tokens per step: the mean request waits for the prompts before it.
    assert!(
        p.ttft_seconds > 2.0 * alone,
        "simulated TTFT {} against one prompt alone {alone}",
        p.ttft_seconds
    );
    assert!(close(
        p.output_tokens_per_second_per_device * placed.plan.payload.devices_used as f64,
        p.output_tokens_per_second
    ));
    assert!(p.rules.iter().any(|r| r.contains("closed loop")));
    assert!(p
        .linear_estimate
        .rules
        .iter()
        .all(|r| r.contains("linear estimate")));
}

#[test]
fn a_placement_simulates_the_requests_at_their_drawn_lengths() {
    let mut source = ModelSource::folder("models/llama-3.1-8b");
    source.layers = Some(2);
    let devices = set("models/devices/sets/a100-80gb-x2.json");
    let at = |lengths: jointplan::perf::Lengths| {
        let mut s = serving(16, 1000, 64);
        s.lengths = lengths;
        placed(&source, &devices, &settings(Some(2), Some(1), false, s))
    };
    let fixed = at(jointplan::perf::Lengths::Fixed);
    // Every request listed at the nominal lengths: the same run, the same figures.
    let listed = at(jointplan::perf::Lengths::Listed {
        requests: vec![(1000, 64)],
        source: "one entry".to_owned(),
    });
    let (f, l) = (performance(&fixed), performance(&listed));
    assert_eq!(
        (f.ttft_seconds, f.tpot_seconds, f.simulated_steps),
        (l.ttft_seconds, l.tpot_seconds, l.simulated_steps)
    );
    assert_eq!(f.linear_estimate, l.linear_estimate);
    // SGLang's random lengths (prompts of 1..1000 tokens, mean about 500): shorter prompts,
    // a shorter prompt alone in the linear estimate, the rule said, the point serialized.
    let random = at(jointplan::perf::Lengths::SglangRandom {
        range_ratio: 0.0,
        seed: 1,
    });
    let r = performance(&random);
    assert!(r.linear_estimate.ttft.seconds < f.linear_estimate.ttft.seconds);
    assert!(r.ttft_seconds < f.ttft_seconds);
    assert!(r
        .rules
        .iter()
        .any(|rule| rule.starts_with("lengths = SGLang")));
    assert!(!f.rules.iter().any(|rule| rule.starts_with("lengths")));
    let json = serde_json::to_value(&r.serving_point).unwrap();
    assert_eq!(json["lengths"]["kind"], "sglang-random");
    assert!(serde_json::to_value(&f.serving_point)
        .unwrap()
        .get("lengths")
        .is_none());
}
