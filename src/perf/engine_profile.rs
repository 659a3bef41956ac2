//! Engine time profiles: what a serving engine adds to the kernels' time, keyed by the
//! engine's command-line spelling (`vllm`, `sglang`, `trtllm`, `llama.cpp`).
//!
//! Every engine runs continuous batching with chunked prefill (decodes first, then prompt
//! chunks up to the scheduled-token budget); they differ in the host time each step costs
//! that the device does not overlap, and in how much of the per-kernel launch cost CUDA
//! graphs remove from decode steps. The figures and their sources are in
//! `docs/performance-model.md#engines`.

/// An engine's time profile.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EngineProfile {
    /// The command-line spelling.
    pub name: &'static str,
    /// Host time per scheduler step not overlapped with the device (seconds): scheduling,
    /// input preparation, sampling and output processing.
    pub step_overhead_seconds: f64,
    /// Fraction of the device's per-kernel launch overhead a decode step pays (decode steps
    /// replay captured CUDA graphs; 1 = every kernel launched from the host).
    pub decode_launch_factor: f64,
    /// Fraction of the launch overhead a step with prompt tokens pays (eager launches).
    pub prefill_launch_factor: f64,
    /// Time from a request's arrival until the scheduler can run it (HTTP, tokenization,
    /// queueing into the engine), counted in its TTFT.
    pub request_overhead_seconds: f64,
}

/// vLLM's request overhead (HTTP, tokenization, queueing into the engine): fitted on the
/// fit half of the single-device validation table (`examples/perf_validation.rs` prints
/// the fit, and `tests/planner/perf_validation.rs` checks this constant against it).
pub const VLLM_REQUEST_OVERHEAD_SECONDS: f64 = 0.0131;

/// SGLang's request overhead: the HTTP server and tokenizer manager, the request's
/// broadcast to the tensor-parallel schedulers and the first token's way back through the
/// detokenizer process (docs/performance-model.md, "Engines"). Fitted with
/// [`SGLANG_PREFILL_LAUNCH_FACTOR`] on the SGLang points of the multi-GPU table's fit half
/// (`examples/placement_validation.rs` prints the fit, `tests/planner/multi_gpu_validation.rs`
/// checks this constant against it).
pub const SGLANG_REQUEST_OVERHEAD_SECONDS: f64 = 0.072;

/// The share of the device's per-kernel launch time a kernel of an SGLang step with
/// prompt tokens costs: SGLang replays CUDA graphs for decode batches only and launches a
/// prompt's kernels eagerly. The prior, 1 (every kernel launched from the host at the
/// device's launch time): the fit (with [`SGLANG_REQUEST_OVERHEAD_SECONDS`]) keeps it
/// while its rows do not determine the factor, and says so.
pub const SGLANG_PREFILL_LAUNCH_FACTOR: f64 = 1.0;

/// vLLM's host time per scheduler step not overlapped with the device: fitted on the fit
/// half of the validation table jointly with the devices' memory factors
/// (`examples/perf_validation.rs` prints the fit, `tests/planner/perf_validation.rs`
/// checks this constant against it).
pub const VLLM_STEP_OVERHEAD_SECONDS: f64 = 0.0;

/// The share of the device's per-kernel launch time a kernel of a vLLM decode step costs
/// (CUDA-graph replay: the graph node's launch, the ramp-up and tail of a kernel too small
/// to fill the device): fitted on the fit half of the validation table jointly with the
/// host time per step and the devices' memory factors (`examples/perf_validation.rs`
/// prints the fit, `tests/planner/perf_validation.rs` checks this constant against it).
/// SGLang replays CUDA graphs of the same kernel families and takes the same figure.
pub const VLLM_DECODE_LAUNCH_FACTOR: f64 = 1.05;

/// The profiles, by name.
pub const ENGINES: &[EngineProfile] = &[
    EngineProfile {
        name: "vllm",
        step_overhead_seconds: VLLM_STEP_OVERHEAD_SECONDS,
        decode_launch_factor: VLLM_DECODE_LAUNCH_FACTOR,
        prefill_launch_factor: 1.0,
        request_overhead_seconds: VLLM_REQUEST_OVERHEAD_SECONDS,
    },
    EngineProfile {
        name: "sglang",
        step_overhead_seconds: 0.001,
        decode_launch_factor: VLLM_DECODE_LAUNCH_FACTOR,
        prefill_launch_factor: SGLANG_PREFILL_LAUNCH_FACTOR,
        request_overhead_seconds: SGLANG_REQUEST_OVERHEAD_SECONDS,
    },
    EngineProfile {
        name: "trtllm",
        step_overhead_seconds: 0.0005,
        decode_launch_factor: 0.25,
        prefill_launch_factor: 1.0,
        request_overhead_seconds: 0.0,
    },
    EngineProfile {
        name: "llama.cpp",
        step_overhead_seconds: 0.0005,
        decode_launch_factor: 0.5,
        prefill_launch_factor: 1.0,
        request_overhead_seconds: 0.0,
    },
];

/// The engine a serving point uses when none is named.
pub const DEFAULT_ENGINE: &str = "vllm";

/// The profile of the engine spelled `name` on the command line.
pub fn engine_profile(name: &str) -> Option<EngineProfile> {
    ENGINES.iter().find(|e| e.name == name).copied()
}

/// The spellings, for messages.
pub fn engine_names() -> String {
    ENGINES
        .iter()
        .map(|e| e.name)
        .collect::<Vec<_>>()
        .join(", ")
}
