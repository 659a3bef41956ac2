//! Request length distributions in the serving simulation (`perf::lengths`): a degenerate
//! distribution simulates exactly as fixed lengths, the draws stay in the benchmark's range
//! with the stated mean, they are the same every time, and a run of one client follows
//! each request's own lengths (an oracle that adds up the requests one by one).

use jointplan::perf::serving::{simulate_steps, ServingPoint};
use jointplan::perf::work::StepShape;
use jointplan::perf::{engine_profile, Lengths};

fn point(concurrency: u64, input: u64, output: u64, lengths: Lengths) -> ServingPoint {
    ServingPoint {
        concurrency,
        input_tokens: input,
        output_tokens: output,
        engine: "sglang".to_owned(),
        scheduled_token_budget: 2048,
        maximum_sequences: 256,
        simulated_requests: concurrency * 4,
        lengths,
        context_tokens: None,
        chunked_prefill: None,
    }
}

fn sglang(range_ratio: f64) -> Lengths {
    Lengths::SglangRandom {
        range_ratio,
        seed: 1,
    }
}

/// A step's price that depends on everything the shape holds: its tokens, sequences and
/// the context read (seconds).
fn price(shape: &StepShape, launch: f64) -> f64 {
    let context: u64 = shape
        .segments
        .iter()
        .map(|s| s.sequences * (s.cached + s.new_tokens))
        .sum();
    1e-3 * launch + 2e-6 * shape.tokens() as f64 + 1e-8 * context as f64
}

fn simulate(p: &ServingPoint) -> jointplan::perf::ServingPrediction {
    let engine = engine_profile(&p.engine).unwrap();
    simulate_steps(price, &engine, p).unwrap()
}

#[test]
fn a_degenerate_distribution_simulates_exactly_as_fixed_lengths() {
    for (c, i, o) in [(1, 300, 40), (16, 1000, 200), (64, 700, 129)] {
        let fixed = simulate(&point(c, i, o, Lengths::Fixed));
        for lengths in [
            Lengths::SglangRandom {
                range_ratio: 1.0,
                seed: 1,
            },
            Lengths::VllmRandom { range_ratio: 0.0 },
            Lengths::Listed {
                requests: vec![(i, o); 3],
                source: "all equal".to_owned(),
            },
        ] {
            let name = lengths.name();
            assert_eq!(simulate(&point(c, i, o, lengths)), fixed, "{name} at C {c}");
        }
    }
}

#[test]
fn draws_stay_in_range_with_the_stated_mean() {
    let n = 20_000u64;
    for (lengths, nominal, low, high) in [
        (sglang(0.0), 1000, 1, 1000),
        (sglang(0.5), 1001, 500, 1001),
        (Lengths::VllmRandom { range_ratio: 0.3 }, 128, 89, 167),
    ] {
        let (mean_in, mean_out) = lengths.mean(nominal, nominal);
        let stated = (low + high) as f64 / 2.0;
        assert_eq!((mean_in, mean_out), (stated, stated), "{lengths:?}");
        // A uniform integer of [low, high] has variance ((high - low + 1)^2 - 1) / 12: the
        // mean of n draws lies within 5 standard errors of it but for a 1 in 10^6 chance
        // (and the draws are fixed, so this never flakes).
        let span = (high - low + 1) as f64;
        let tolerance = 5.0 * ((span * span - 1.0) / 12.0 / n as f64).sqrt();
        let (mut sum_in, mut sum_out) = (0u64, 0u64);
        for (i, o) in lengths.draws(n, nominal, nominal) {
            assert!((low..=high).contains(&i), "{lengths:?}: prompt {i}");
            assert!((low..=high).contains(&o), "{lengths:?}: output {o}");
            sum_in += i;
            sum_out += o;
        }
        for (what, sum) in [("prompts", sum_in), ("outputs", sum_out)] {
            let mean = sum as f64 / n as f64;
            assert!(
                (mean - stated).abs() <= tolerance,
                "{lengths:?} {what}: mean {mean}, stated {stated} +- {tolerance}"
            );
        }
    }
}

#[test]
fn draws_and_simulations_are_the_same_every_time() {
    let lengths = sglang(0.0);
    let first = lengths.draws(1000, 1000, 1000);
    assert_eq!(first, lengths.draws(1000, 1000, 1000));
    // A shorter run's prompts are the longer run's first ones (the outputs follow all the
    // prompts, as SGLang draws them).
    let ten = lengths.draws(10, 1000, 1000);
    assert!(ten.iter().zip(&first).all(|(a, b)| a.0 == b.0));
    // The prompts and outputs of a request are not the same draw.
    assert!(first.iter().filter(|(i, o)| i == o).count() < 10);
    let p = point(16, 1000, 1000, lengths);
    let (a, b) = (simulate(&p), simulate(&p));
    assert_eq!(a.ttft_seconds.to_bits(), b.ttft_seconds.to_bits());
    assert_eq!(a.tpot_seconds.to_bits(), b.tpot_seconds.to_bits());
    assert_eq!(a.steps, b.steps);
    // And the random lengths do change the run.
    assert_ne!(a, simulate(&point(16, 1000, 1000, Lengths::Fixed)));
}

#[test]
fn one_client_runs_each_request_at_its_own_lengths() {
    // Oracle: one client, a constant price per step (prompt chunk `p`, decode `d`): request
    // k takes ceil(I_k / budget) prompt steps, then O_k - 1 decode steps; the next arrives
    // when it completes. Summed request by request, independently of the scheduler.
    let engine = engine_profile("sglang").unwrap();
    let (p, d) = (0.004, 0.001);
    let constant = |shape: &StepShape, _: f64| {
        if shape
            .segments
            .iter()
            .any(|s| s.sequences == 1 && s.new_tokens > 1)
        {
            p
        } else {
            d
        }
    };
    let lengths = Lengths::VllmRandom { range_ratio: 0.9 };
    let serving = ServingPoint {
        scheduled_token_budget: 256,
        ..point(1, 1000, 60, lengths.clone())
    };
    let got = simulate_steps(constant, &engine, &serving).unwrap();
    let h = engine.step_overhead_seconds;
    let (mut ttft, mut tpot, mut counted) = (0.0, 0.0, 0u32);
    for (i, o) in lengths.draws(serving.simulated_requests, 1000, 60) {
        // A one-token prompt chunk is priced as a decode step by `constant`.
        let chunk = |tokens: u64| if tokens > 1 { p } else { d };
        let full = i / 256;
        let mut prompt = full as f64 * chunk(256);
        if i % 256 > 0 {
            prompt += chunk(i % 256);
        }
        let steps = i.div_ceil(256);
        ttft += engine.request_overhead_seconds + prompt + steps as f64 * h;
        if o > 1 {
            tpot += d + h;
            counted += 1;
        }
    }
    let n = serving.simulated_requests as f64;
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
    assert!(
        close(got.ttft_seconds, ttft / n),
        "{} vs {}",
        got.ttft_seconds,
        ttft / n
    );
    assert!(
        close(got.tpot_seconds, tpot / f64::from(counted)),
        "{} vs {}",
        got.tpot_seconds,
        tpot / f64::from(counted)
    );
}

#[test]
fn bad_ratios_name_the_flag_and_the_benchmark_domain() {
    for (spec, needle) in [
        ("sglang:1.5", "within [0, 1]"),
        ("vllm:1", "within [0, 1)"),
        ("vllm:-0.5", "within [0, 1)"),
        ("sglang:NaN", "within [0, 1]"),
        ("gamma:2", "expected fixed, sglang[:R[:SEED]] or vllm[:R]"),
    ] {
        let e = Lengths::parse(spec).unwrap_err().to_string();
        assert!(
            e.starts_with("--lengths: ") && e.contains(needle),
            "{spec}: {e}"
        );
    }
    let mut p = point(4, 100, 10, sglang(2.0));
    assert!(p
        .validate()
        .unwrap_err()
        .to_string()
        .starts_with("--lengths"));
    p.lengths = Lengths::Listed {
        requests: Vec::new(),
        source: String::new(),
    };
    assert!(p.validate().is_err());
    // vLLM's range reaches past the nominal lengths: the longest request is held to the
    // simulation's limit, naming --lengths (the nominal one alone is within it).
    p = point(4, 1_500_000, 1000, Lengths::VllmRandom { range_ratio: 0.5 });
    let e = p.validate().unwrap_err().to_string();
    assert!(e.starts_with("--lengths: the longest request"), "{e}");
    p.lengths = Lengths::Fixed;
    assert!(p.validate().is_ok());
}

#[test]
fn sglang_draws_are_the_lengths_the_benchmark_sent() {
    // Oracle: the totals SGLang's bench_serving printed for its random dataset at
    // --random-input-len 1000 / 8000 --random-output-len 1000 and its default ratio and
    // seed, for 10, 80, 320 and 500 prompts (docs/data/serving-measurements.json: the
    // sglcookbook Llama-3.1-70B records' notes, "Total input tokens" and "Total generated
    // tokens").
    for (input, prompts, total_in, total_out) in [
        (1000, 10, 6101, 4220),
        (1000, 80, 39668, 40805),
        (8000, 10, 41941, 4220),
        (8000, 80, 300020, 41669),
        (8000, 320, 1273893, 170000),
        (1000, 500, 249831, 252662),
    ] {
        let drawn = sglang(0.0).draws(prompts, input, 1000);
        let sum_in: u64 = drawn.iter().map(|d| d.0).sum();
        let sum_out: u64 = drawn.iter().map(|d| d.1).sum();
        assert_eq!(
            (sum_in, sum_out),
            (total_in, total_out),
            "{input} x {prompts}"
        );
    }
}
