//! The serving model: a closed loop of `C` clients, each sending a request of `I` prompt
//! tokens and `O` output tokens (or lengths drawn around them, [`super::lengths`]) and the
//! next one when it completes, run through a continuous-batching scheduler with chunked
//! prefill, step by step, each step priced by the [`TimeModel`].
//!
//! Scheduling rules (the engine profile's [`Scheduling`]): at most `max_sequences` requests
//! run. Decodes first (vLLM V1's default, which SGLang and TensorRT-LLM follow in
//! aggregated serving): each step first gives every decoding request one token, then fills
//! the remaining scheduled-token budget with prompt chunks of the running requests in
//! arrival order. Prompts first (vLLM V0 without chunked prefill): waiting requests join
//! with their whole prompt while the prompts fit the budget, and a step that admits any
//! runs only those prompts; other steps decode every running request. A request's first
//! output token comes out of the step that ends its prompt. The step's time is the price of
//! its shape (the decoding requests as one segment at their mean context) plus the engine's
//! host time (per step and per sequence of the step). The price
//! is a parameter ([`simulate_steps`]): one device's roofline ([`simulate`]), or a placement
//! across devices (`crate::placement::timing`), so both run the same scheduler.

use serde::Serialize;

use super::engine_profile::{EngineProfile, Scheduling};
use super::lengths::Lengths;
use super::model::{PhaseTime, TimeModel};
use super::work::{Segment, StepShape};
use super::PerfError;

/// What is served: concurrency, prompt and output lengths, the engine and its limits.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServingPoint {
    /// Requests in flight (clients of the closed loop).
    pub concurrency: u64,
    /// Prompt tokens of each request.
    pub input_tokens: u64,
    /// Output tokens of each request (>= 1).
    pub output_tokens: u64,
    /// The engine's command-line spelling.
    pub engine: String,
    /// Most tokens one step schedules (the policy's `maximum_scheduled_tokens`).
    pub scheduled_token_budget: u64,
    /// Most requests running at once (the policy's `maximum_active_sequences`).
    pub maximum_sequences: u64,
    /// Requests simulated (4 x concurrency: the first wave arrives together, later ones as
    /// earlier ones complete), over which the means are taken.
    pub simulated_requests: u64,
    /// How each request's prompt and output lengths are drawn around `input_tokens` and
    /// `output_tokens` (fixed: all equal, and not serialized).
    #[serde(skip_serializing_if = "Lengths::is_fixed")]
    pub lengths: Lengths,
    /// The context the engine runs at (its `max_model_len`: the policy's), where it
    /// decides its scheduling ([`EngineProfile::at_context`]: vLLM V0 turns chunked
    /// prefill on above 32K); `None` when not known (the profile's own rule).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_tokens: Option<u64>,
    /// The engine's `enable_chunked_prefill` when its arguments set it (vLLM V0 schedules
    /// prompts first without chunked prefill, decodes first with it:
    /// [`EngineProfile::for_point`]); `None`: the engine's default at the context.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunked_prefill: Option<bool>,
}

impl ServingPoint {
    /// Checks the point; errors name the flag.
    pub fn validate(&self) -> Result<(), PerfError> {
        let bad = |flag: &str, message: &str| PerfError::ServingPoint {
            flag: flag.to_owned(),
            message: message.to_owned(),
        };
        if self.concurrency == 0 {
            return Err(bad("--concurrency", "must be at least 1"));
        }
        if self.concurrency > 1 << 16 {
            return Err(bad("--concurrency", "must be at most 65536"));
        }
        if self.input_tokens == 0 {
            return Err(bad("--input-tokens", "must be at least 1"));
        }
        if self.output_tokens == 0 {
            return Err(bad("--output-tokens", "must be at least 1"));
        }
        // The simulation runs one step per output token of each request.
        if self.input_tokens.saturating_add(self.output_tokens) > 1 << 21 {
            return Err(bad(
                "--output-tokens",
                "input plus output tokens must be at most 2097152",
            ));
        }
        self.lengths.validate()?;
        let (longest_input, longest_output) =
            self.lengths.longest(self.input_tokens, self.output_tokens);
        if longest_input.saturating_add(longest_output) > 1 << 21 {
            return Err(bad(
                "--lengths",
                "the longest request's input plus output tokens must be at most 2097152",
            ));
        }
        if self.scheduled_token_budget == 0 || self.maximum_sequences == 0 {
            return Err(bad(
                "--concurrency",
                "the policy schedules no tokens or sequences",
            ));
        }
        Ok(())
    }

    /// The point with every request at the distribution's mean lengths (rounded, at least
    /// 1), fixed: what the linear figures (one prompt, the steady decode step) are priced
    /// at. A fixed point is itself.
    pub fn at_mean_lengths(&self) -> ServingPoint {
        if self.lengths.is_fixed() {
            return self.clone();
        }
        let (input, output) = self.lengths.mean(self.input_tokens, self.output_tokens);
        ServingPoint {
            input_tokens: (input.round() as u64).max(1),
            output_tokens: (output.round() as u64).max(1),
            lengths: Lengths::Fixed,
            ..self.clone()
        }
    }
}

/// The predicted latencies and throughputs at a serving point.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServingPrediction {
    /// Mean time to first token over the simulated requests (seconds).
    pub ttft_seconds: f64,
    /// Mean time per output token after the first (seconds).
    pub tpot_seconds: f64,
    /// Output tokens per second of the whole run (all requests' output over the makespan).
    pub output_tokens_per_second: f64,
    /// Output tokens per second of one running request: `1 / tpot`.
    pub output_tokens_per_second_per_user: f64,
    /// Scheduler steps simulated.
    pub steps: u64,
    /// The engine's host time over the run (seconds): every step's, and every sequence's
    /// of every step.
    pub host_seconds: f64,
}

struct Running {
    arrival: f64,
    /// The request's prompt and output tokens.
    input: u64,
    output: u64,
    /// Whether the client sees a token (a listed response of none does not: the benchmark
    /// records its TTFT as 0).
    streamed: bool,
    prefilled: u64,
    generated: u64,
    first_token: f64,
}

/// Simulates `point` on `model` with `engine`: each step priced by the model's roofline.
pub fn simulate(
    model: &TimeModel,
    engine: &EngineProfile,
    point: &ServingPoint,
) -> Result<ServingPrediction, PerfError> {
    simulate_steps(
        |shape, launch| model.step_time(shape, launch).seconds,
        engine,
        point,
    )
}

/// Simulates `point` with `engine`, each step's device time given by `price(shape,
/// launch_factor)` in seconds (the engine's host time per step and per sequence of the
/// step is added here; the launch
/// factor is the engine's decode factor for a step of decodes only, else its prefill
/// factor).
pub fn simulate_steps(
    mut price: impl FnMut(&StepShape, f64) -> f64,
    engine: &EngineProfile,
    point: &ServingPoint,
) -> Result<ServingPrediction, PerfError> {
    point.validate()?;
    let total = point.simulated_requests.max(1);
    let slots = point.maximum_sequences.min(point.concurrency);
    let budget = point.scheduled_token_budget;
    let prompts_first = engine.scheduling == Scheduling::PromptsFirst;
    // Request `k` (in the order the clients send them) has the `k`-th drawn lengths.
    let drawn = point
        .lengths
        .draws(total, point.input_tokens, point.output_tokens);
    let lengths = |k: u64| {
        drawn
            .get(k as usize)
            .copied()
            .unwrap_or((point.input_tokens, point.output_tokens))
    };
    let mut waiting: std::collections::VecDeque<(f64, u64, u64)> =
        std::collections::VecDeque::new();
    let mut issued = 0u64;
    while issued < point.concurrency.min(total) {
        let (input, output) = lengths(issued);
        waiting.push_back((0.0, input, output));
        issued += 1;
    }
    let mut running: Vec<Running> = Vec::new();
    let (mut now, mut steps, mut host_total) = (0.0f64, 0u64, 0.0f64);
    let (mut ttft_sum, mut tpot_sum, mut done, mut tpot_count) = (0.0, 0.0, 0u64, 0u64);
    let mut generated_total = 0u64;
    while done < total {
        // A request reaches the scheduler `request_overhead` after it arrives; with nothing
        // running, time moves on to the first one that does.
        if running.is_empty() {
            if let Some(&(arrival, _, _)) = waiting.front() {
                now = now.max(arrival + engine.request_overhead_seconds);
            }
        }
        // Prompts first: the prompts admitted in one step fit the budget together (the
        // first always joins, as vLLM V0's budget is at least its longest prompt).
        let mut admitted_tokens = 0u64;
        while running.len() < slots as usize {
            let Some(&(arrival, input, output)) = waiting.front() else {
                break;
            };
            if arrival + engine.request_overhead_seconds > now {
                break;
            }
            if prompts_first {
                if admitted_tokens > 0 && admitted_tokens.saturating_add(input) > budget {
                    break;
                }
                admitted_tokens = admitted_tokens.saturating_add(input);
            }
            waiting.pop_front();
            running.push(Running {
                arrival,
                input,
                // A listed response of no tokens still takes its first step.
                output: output.max(1),
                streamed: output > 0,
                prefilled: 0,
                generated: 0,
                first_token: 0.0,
            });
        }
        if running.is_empty() {
            return Err(PerfError::Internal(
                "the serving loop has nothing to run".to_owned(),
            ));
        }
        // Decodes first (one token each, within the budget), then prompt chunks; prompts
        // first: a step with prompts to run has no decodes.
        let prompt_step = prompts_first && running.iter().any(|r| r.prefilled < r.input);
        let mut left = if prompt_step { 0 } else { budget };
        let mut decode_context = 0u64;
        let mut decoding = Vec::new();
        for (i, r) in running.iter().enumerate() {
            if r.prefilled == r.input && r.generated < r.output && left > 0 {
                decoding.push(i);
                decode_context += r.input + r.generated - 1;
                left -= 1;
            }
        }
        let mut segments = Vec::new();
        if !decoding.is_empty() {
            let n = decoding.len() as u64;
            segments.push(Segment {
                sequences: n,
                new_tokens: 1,
                cached: decode_context / n,
            });
        }
        let mut chunks = Vec::new();
        for (i, r) in running.iter().enumerate() {
            if prompt_step {
                // Whole prompts, admitted within the budget above.
                if r.prefilled < r.input {
                    let chunk = r.input - r.prefilled;
                    segments.push(Segment {
                        sequences: 1,
                        new_tokens: chunk,
                        cached: r.prefilled,
                    });
                    chunks.push((i, chunk));
                }
                continue;
            }
            if left == 0 {
                break;
            }
            if r.prefilled < r.input {
                let chunk = (r.input - r.prefilled).min(left);
                left -= chunk;
                segments.push(Segment {
                    sequences: 1,
                    new_tokens: chunk,
                    cached: r.prefilled,
                });
                chunks.push((i, chunk));
            }
        }
        let shape = StepShape { segments };
        let launch = if chunks.is_empty() {
            engine.decode_launch_factor
        } else {
            engine.prefill_launch_factor
        };
        let sequences = (decoding.len() + chunks.len()) as u64;
        let host = engine.host_seconds(sequences);
        now += price(&shape, launch) + host;
        host_total += host;
        steps += 1;
        for &i in &decoding {
            running[i].generated += 1;
            generated_total += 1;
        }
        for &(i, chunk) in &chunks {
            let r = &mut running[i];
            r.prefilled += chunk;
            if r.prefilled == r.input {
                r.generated = 1;
                r.first_token = now;
                generated_total += 1;
            }
        }
        let mut kept = Vec::with_capacity(running.len());
        for r in running.drain(..) {
            if r.prefilled == r.input && r.generated >= r.output {
                if r.streamed {
                    ttft_sum += r.first_token - r.arrival;
                }
                if r.output > 1 {
                    tpot_sum += (now - r.first_token) / (r.output - 1) as f64;
                    tpot_count += 1;
                }
                done += 1;
                if issued < total {
                    let (input, output) = lengths(issued);
                    waiting.push_back((now, input, output));
                    issued += 1;
                }
            } else {
                kept.push(r);
            }
        }
        running = kept;
    }
    let tpot = if tpot_count > 0 {
        tpot_sum / tpot_count as f64
    } else {
        0.0
    };
    Ok(ServingPrediction {
        ttft_seconds: ttft_sum / done as f64,
        tpot_seconds: tpot,
        output_tokens_per_second: generated_total as f64 / now,
        output_tokens_per_second_per_user: if tpot > 0.0 { 1.0 / tpot } else { 0.0 },
        steps,
        host_seconds: host_total,
    })
}

/// The time of one request's prompt alone, in chunks of the budget (each chunk a step).
pub fn prefill_time(model: &TimeModel, engine: &EngineProfile, point: &ServingPoint) -> PhaseTime {
    let mut total = PhaseTime::default();
    let mut done = 0u64;
    while done < point.input_tokens {
        let chunk = (point.input_tokens - done).min(point.scheduled_token_budget.max(1));
        let shape = StepShape {
            segments: vec![Segment {
                sequences: 1,
                new_tokens: chunk,
                cached: done,
            }],
        };
        let t = model.step_time(&shape, engine.prefill_launch_factor);
        total.compute_seconds += t.compute_seconds;
        total.memory_seconds += t.memory_seconds;
        total.overhead_seconds += t.overhead_seconds + engine.host_seconds(1);
        total.seconds += t.seconds + engine.host_seconds(1);
        done += chunk;
    }
    total
}

/// The steady decode step: `min(C, max_sequences)` requests at the mean context of their
/// decode, `I + O / 2`.
pub fn decode_shape(point: &ServingPoint) -> StepShape {
    StepShape::decode(
        point.concurrency.min(point.maximum_sequences),
        point.input_tokens + point.output_tokens / 2,
    )
}

/// The steady decode step's time (with the engine's host time).
pub fn decode_step_time(
    model: &TimeModel,
    engine: &EngineProfile,
    point: &ServingPoint,
) -> PhaseTime {
    let shape = decode_shape(point);
    let host = engine.host_seconds(point.concurrency.min(point.maximum_sequences));
    let mut t = model.step_time(&shape, engine.decode_launch_factor);
    t.overhead_seconds += host;
    t.seconds += host;
    t
}
