//! vLLM V0's scheduling (`vllm@0.6`): prompts first, whole, within the budget, and a step
//! with prompts runs no decodes; the host time is per step plus per sequence of the step.
//! Each run is worked out by hand below from the rule alone (every step priced at a fixed
//! device time), and the decodes-first scheduler of the same point is shown to differ.

use jointplan::perf::engine_profile::{Scheduling, VLLM_V0_CHUNKED_PREFILL_ABOVE};
use jointplan::perf::serving::simulate_steps;
use jointplan::perf::{engine_profile, EngineProfile, Lengths, ServingPoint};

const DEVICE: f64 = 1e-3;

fn v0(step: f64, sequence: f64) -> EngineProfile {
    EngineProfile {
        step_overhead_seconds: step,
        sequence_overhead_seconds: sequence,
        request_overhead_seconds: 0.0,
        ..engine_profile("vllm@0.6").expect("vLLM V0 has a profile")
    }
}

fn point(concurrency: u64, budget: u64, requests: u64) -> ServingPoint {
    ServingPoint {
        concurrency,
        input_tokens: 10,
        output_tokens: 3,
        engine: "vllm@0.6".to_owned(),
        scheduled_token_budget: budget,
        maximum_sequences: concurrency,
        simulated_requests: requests,
        lengths: Lengths::Fixed,
        context_tokens: Some(4096),
        chunked_prefill: None,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[test]
fn prompts_that_fit_the_budget_run_together_then_every_request_decodes() {
    // Two clients, prompts of 10 tokens, a budget of 2048: step 1 runs both prompts (two
    // sequences: 1 + 0.5 + 2 x 0.1 = 1.7 ms) and gives both their first token; steps 2
    // and 3 decode both (1.7 ms each). The next two requests arrive at 5.1 ms and repeat.
    let served = simulate_steps(|_, _| DEVICE, &v0(0.5e-3, 0.1e-3), &point(2, 2048, 4)).unwrap();
    assert_eq!(served.steps, 6);
    assert!(close(served.ttft_seconds, 1.7e-3), "{served:?}");
    assert!(close(served.tpot_seconds, 1.7e-3), "{served:?}");
    assert!(close(served.host_seconds, 6.0 * 0.7e-3), "{served:?}");
}

#[test]
fn an_admitted_prompt_stalls_the_running_decodes() {
    // A budget of 15 holds one prompt of 10, not two: step 1 runs A's prompt alone (1 +
    // 0.5 + 0.1 = 1.6 ms, A's first token at 1.6); step 2 runs B's prompt alone and A
    // does not decode (3.2: B's first token); steps 3 and 4 decode both (1.7 ms each:
    // 4.9, 6.6). TTFT (1.6 + 3.2) / 2 = 2.4 ms; TPOT of A (6.6 - 1.6) / 2 = 2.5 ms and of
    // B (6.6 - 3.2) / 2 = 1.7 ms, mean 2.1 ms.
    let engine = v0(0.5e-3, 0.1e-3);
    assert_eq!(engine.scheduling, Scheduling::PromptsFirst);
    let served = simulate_steps(|_, _| DEVICE, &engine, &point(2, 15, 2)).unwrap();
    assert_eq!(served.steps, 4);
    assert!(close(served.ttft_seconds, 2.4e-3), "{served:?}");
    assert!(close(served.tpot_seconds, 2.1e-3), "{served:?}");
    // Decodes first at the same point: step 1 runs A's prompt and 5 tokens of B's (two
    // sequences, 1.7 ms), step 2 A's first decode and B's last 5 prompt tokens (3.4: B's
    // first token), step 3 decodes both (5.1: A's last token), step 4 B alone (1.6 ms:
    // 6.7). TTFT (1.7 + 3.4) / 2 = 2.55 ms; TPOT of A (5.1 - 1.7) / 2 = 1.7 ms and of B
    // (6.7 - 3.4) / 2 = 1.65 ms, mean 1.675 ms.
    let decodes_first = EngineProfile {
        scheduling: Scheduling::DecodesFirst,
        ..engine
    };
    let served = simulate_steps(|_, _| DEVICE, &decodes_first, &point(2, 15, 2)).unwrap();
    assert_eq!(served.steps, 4);
    assert!(close(served.ttft_seconds, 2.55e-3), "{served:?}");
    assert!(close(served.tpot_seconds, 1.675e-3), "{served:?}");
}

#[test]
fn the_v0_profile_follows_its_version_and_context() {
    let v0 = engine_profile("vllm@0.6").unwrap();
    assert_eq!(v0.name, "vllm@0.6");
    assert_eq!(v0.scheduling, Scheduling::PromptsFirst);
    assert!(v0.sequence_overhead_seconds > 0.0);
    // Above 32K of context vLLM V0 turns chunked prefill on: decodes first.
    let long = v0.at_context(Some(VLLM_V0_CHUNKED_PREFILL_ABOVE + 1));
    assert_eq!(long.scheduling, Scheduling::DecodesFirst);
    let at_limit = v0.at_context(Some(VLLM_V0_CHUNKED_PREFILL_ABOVE));
    assert_eq!(at_limit.scheduling, Scheduling::PromptsFirst);
    assert_eq!(v0.at_context(None).scheduling, Scheduling::PromptsFirst);
    // The V1 versions take vLLM's own profile, which the context does not change.
    for spelling in ["vllm", "vllm@0.19", "vllm@0.10"] {
        let v1 = engine_profile(spelling).unwrap();
        assert_eq!(v1.name, "vllm", "{spelling}");
        assert_eq!(v1.scheduling, Scheduling::DecodesFirst);
        assert_eq!(v1.at_context(Some(1 << 20)), v1);
        assert_eq!(v1.rule(), None);
    }
    assert!(v0.rule().is_some_and(|r| r.contains("prompts first")));
}

/// vLLM V0's host time differs on one device (its own process) and on several (a
/// distributed executor broadcasting each step's inputs): `on_devices` picks the pair, and
/// the serving simulation of the same point pays the pair it is given.
#[test]
fn the_v0_host_time_follows_the_device_count() {
    use jointplan::perf::engine_profile::{
        VLLM_V0_DISTRIBUTED_SEQUENCE_OVERHEAD_SECONDS, VLLM_V0_DISTRIBUTED_STEP_OVERHEAD_SECONDS,
        VLLM_V0_SEQUENCE_OVERHEAD_SECONDS, VLLM_V0_STEP_OVERHEAD_SECONDS,
    };
    let v0 = engine_profile("vllm@0.6").unwrap();
    let one = v0.on_devices(1);
    assert_eq!(one, v0);
    assert_eq!(one.step_overhead_seconds, VLLM_V0_STEP_OVERHEAD_SECONDS);
    assert_eq!(
        one.sequence_overhead_seconds,
        VLLM_V0_SEQUENCE_OVERHEAD_SECONDS
    );
    for devices in [2, 4, 8] {
        let several = v0.on_devices(devices);
        assert_eq!(
            several.step_overhead_seconds,
            VLLM_V0_DISTRIBUTED_STEP_OVERHEAD_SECONDS
        );
        assert_eq!(
            several.sequence_overhead_seconds,
            VLLM_V0_DISTRIBUTED_SEQUENCE_OVERHEAD_SECONDS
        );
        // Applied once: the profile on several devices stays so.
        assert_eq!(several.on_devices(1), several);
        assert_eq!(several.scheduling, v0.scheduling);
        assert_eq!(
            several.request_overhead_seconds,
            v0.request_overhead_seconds
        );
    }
    // A step of 4 sequences: the step's host time and four sequences'.
    assert!(
        (v0.on_devices(4).host_seconds(4)
            - (VLLM_V0_DISTRIBUTED_STEP_OVERHEAD_SECONDS
                + 4.0 * VLLM_V0_DISTRIBUTED_SEQUENCE_OVERHEAD_SECONDS))
            .abs()
            < 1e-15
    );
    // The other engines run the same host path on any count.
    for name in ["vllm", "sglang", "trtllm", "llama.cpp"] {
        let e = engine_profile(name).unwrap();
        assert_eq!(e.on_devices(8), e, "{name}");
    }
    // On the same point, the simulation on several devices is slower by exactly the host
    // time difference of its steps (every step is priced at the same device time).
    let p = point(4, 64, 4);
    let steps_and_time = |engine: &EngineProfile| {
        let s = simulate_steps(|_, _| DEVICE, engine, &p).unwrap();
        (s.steps, s.host_seconds)
    };
    let (steps_one, host_one) = steps_and_time(&v0.on_devices(1));
    let (steps_several, host_several) = steps_and_time(&v0.on_devices(2));
    assert_eq!(steps_one, steps_several);
    // Both runs pay `a x steps + b x sequences scheduled` with the same steps and
    // sequences, so the ratio of their host times lies between the two pairs' ratios.
    let ratio = host_several / host_one;
    let per_step = VLLM_V0_DISTRIBUTED_STEP_OVERHEAD_SECONDS / VLLM_V0_STEP_OVERHEAD_SECONDS;
    let per_sequence =
        VLLM_V0_DISTRIBUTED_SEQUENCE_OVERHEAD_SECONDS / VLLM_V0_SEQUENCE_OVERHEAD_SECONDS;
    let (low, high) = (per_step.min(per_sequence), per_step.max(per_sequence));
    assert!(
        ratio >= low - 1e-9 && ratio <= high + 1e-9,
        "{ratio} outside [{low}, {high}]"
    );
}
