//! Engine time profiles: what a serving engine adds to the kernels' time, keyed by the
//! engine's command-line spelling (`vllm`, `sglang`, `trtllm`, `llama.cpp`).
//!
//! Every engine runs continuous batching; most with chunked prefill (decodes first, then
//! prompt chunks up to the scheduled-token budget), vLLM's V0 engine (`vllm@0.6`) with its
//! default scheduler (waiting prompts first and whole, a prompt step without decodes)
//! unless the context or its `enable_chunked_prefill` turns chunked prefill on. They differ in that rule, in the host time
//! each step and each sequence of a step cost that the device does not overlap, and in how
//! much of the per-kernel launch cost CUDA graphs remove from decode steps. The figures and
//! their sources are in `docs/performance-model.md#engines`.

/// How an engine's scheduler forms a step from its running and waiting requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheduling {
    /// Every decoding request gets one token, then prompt chunks of the running requests
    /// fill the rest of the scheduled-token budget in arrival order (vLLM V1, vLLM V0 with
    /// chunked prefill, SGLang, TensorRT-LLM's in-flight batching).
    DecodesFirst,
    /// vLLM V0's default scheduler without chunked prefill (`Scheduler._schedule_default`,
    /// `vllm/core/scheduler.py`, v0.5.4 to v0.7): waiting requests are admitted in arrival
    /// order, each prompt whole, while their prompt tokens fit the budget and the running
    /// requests stay within the sequence limit; a step that admits prompts runs only them
    /// ("Don't schedule decodes if prefills are scheduled"), any other step decodes one
    /// token of every running request.
    PromptsFirst,
}

/// The host time of a step the device does not overlap, for an engine whose host path
/// differs between one device and several ([`EngineProfile::several_devices_host`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HostTime {
    /// Host time per scheduler step (seconds).
    pub step_overhead_seconds: f64,
    /// Host time per sequence of a step (seconds).
    pub sequence_overhead_seconds: f64,
}

/// An engine's time profile.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EngineProfile {
    /// The command-line spelling (`NAME` or `NAME@VERSION` for a version with a profile of
    /// its own).
    pub name: &'static str,
    /// How a step is formed.
    pub scheduling: Scheduling,
    /// The context above which the engine turns chunked prefill on by itself, so that
    /// [`Scheduling::PromptsFirst`] becomes [`Scheduling::DecodesFirst`]
    /// ([`EngineProfile::at_context`]); `None` when the rule does not change.
    pub chunked_prefill_above_context: Option<u64>,
    /// Host time per scheduler step not overlapped with the device (seconds): scheduling,
    /// input preparation, sampling and output processing; on one device when
    /// [`EngineProfile::several_devices_host`] differs.
    pub step_overhead_seconds: f64,
    /// Host time per sequence of a step not overlapped with the device (seconds): the
    /// per-sequence part of scheduling, input preparation and output processing (vLLM V0's
    /// Python loops over its sequence groups).
    pub sequence_overhead_seconds: f64,
    /// The host time on several devices when the engine's host path differs there
    /// ([`EngineProfile::on_devices`]): vLLM V0 runs one device in its own process
    /// (`GPUExecutor`) and several through a distributed executor whose driver broadcasts
    /// every step's inputs to the other ranks (`LocalOrDistributedWorkerBase.execute_model`,
    /// `broadcast_tensor_dict`, `vllm/worker/worker_base.py`, v0.5.4). `None`: the same on
    /// any number of devices.
    pub several_devices_host: Option<HostTime>,
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
pub const VLLM_REQUEST_OVERHEAD_SECONDS: f64 = 0.0119;

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
pub const VLLM_STEP_OVERHEAD_SECONDS: f64 = 0.0002;

/// The share of the device's per-kernel launch time a kernel of a vLLM decode step costs
/// (CUDA-graph replay: the graph node's launch, the ramp-up and tail of a kernel too small
/// to fill the device): fitted on the fit half of the validation table jointly with the
/// host time per step and the devices' memory factors (`examples/perf_validation.rs`
/// prints the fit, `tests/planner/perf_validation.rs` checks this constant against it).
/// SGLang replays CUDA graphs of the same kernel families and takes the same figure.
pub const VLLM_DECODE_LAUNCH_FACTOR: f64 = 0.45;

/// vLLM V0's host time per scheduler step on one device (`vllm@0.6`, the engine of v0.5.4
/// to v0.7): fitted with [`VLLM_V0_SEQUENCE_OVERHEAD_SECONDS`] on the one-device vLLM
/// 0.5.4 points of the single-device table's fit half (`examples/perf_validation.rs`
/// prints the fit, `tests/planner/perf_validation.rs` checks this constant against it).
pub const VLLM_V0_STEP_OVERHEAD_SECONDS: f64 = 0.001;

/// vLLM V0's host time per sequence of a step on one device: fitted with
/// [`VLLM_V0_STEP_OVERHEAD_SECONDS`] (the same fit).
pub const VLLM_V0_SEQUENCE_OVERHEAD_SECONDS: f64 = 0.000_055;

/// vLLM V0's host time per scheduler step on several devices: fitted with
/// [`VLLM_V0_DISTRIBUTED_SEQUENCE_OVERHEAD_SECONDS`] on the vLLM 0.5.4 points of the
/// multi-GPU table's fit half (`examples/placement_validation.rs` prints the fit,
/// `tests/planner/multi_gpu_validation.rs` checks this constant against it).
pub const VLLM_V0_DISTRIBUTED_STEP_OVERHEAD_SECONDS: f64 = 0.003_25;

/// vLLM V0's host time per sequence of a step on several devices: fitted with
/// [`VLLM_V0_DISTRIBUTED_STEP_OVERHEAD_SECONDS`] (the same fit).
pub const VLLM_V0_DISTRIBUTED_SEQUENCE_OVERHEAD_SECONDS: f64 = 0.000_175;

/// The context above which vLLM V0 turns chunked prefill on by itself
/// (`EngineArgs.create_engine_config`, `vllm/engine/arg_utils.py`, v0.5.4 to v0.6.x: a
/// `max_model_len` above 32K on a GPU).
pub const VLLM_V0_CHUNKED_PREFILL_ABOVE: u64 = 32_768;

/// The profiles, by name.
pub const ENGINES: &[EngineProfile] = &[
    EngineProfile {
        name: "vllm",
        scheduling: Scheduling::DecodesFirst,
        chunked_prefill_above_context: None,
        sequence_overhead_seconds: 0.0,
        several_devices_host: None,
        step_overhead_seconds: VLLM_STEP_OVERHEAD_SECONDS,
        decode_launch_factor: VLLM_DECODE_LAUNCH_FACTOR,
        prefill_launch_factor: 1.0,
        request_overhead_seconds: VLLM_REQUEST_OVERHEAD_SECONDS,
    },
    EngineProfile {
        name: "vllm@0.6",
        scheduling: Scheduling::PromptsFirst,
        chunked_prefill_above_context: Some(VLLM_V0_CHUNKED_PREFILL_ABOVE),
        step_overhead_seconds: VLLM_V0_STEP_OVERHEAD_SECONDS,
        sequence_overhead_seconds: VLLM_V0_SEQUENCE_OVERHEAD_SECONDS,
        several_devices_host: Some(HostTime {
            step_overhead_seconds: VLLM_V0_DISTRIBUTED_STEP_OVERHEAD_SECONDS,
            sequence_overhead_seconds: VLLM_V0_DISTRIBUTED_SEQUENCE_OVERHEAD_SECONDS,
        }),
        decode_launch_factor: VLLM_DECODE_LAUNCH_FACTOR,
        prefill_launch_factor: 1.0,
        request_overhead_seconds: VLLM_REQUEST_OVERHEAD_SECONDS,
    },
    EngineProfile {
        name: "sglang",
        scheduling: Scheduling::DecodesFirst,
        chunked_prefill_above_context: None,
        sequence_overhead_seconds: 0.0,
        several_devices_host: None,
        step_overhead_seconds: 0.001,
        decode_launch_factor: VLLM_DECODE_LAUNCH_FACTOR,
        prefill_launch_factor: SGLANG_PREFILL_LAUNCH_FACTOR,
        request_overhead_seconds: SGLANG_REQUEST_OVERHEAD_SECONDS,
    },
    EngineProfile {
        name: "trtllm",
        scheduling: Scheduling::DecodesFirst,
        chunked_prefill_above_context: None,
        sequence_overhead_seconds: 0.0,
        several_devices_host: None,
        step_overhead_seconds: 0.0005,
        decode_launch_factor: 0.25,
        prefill_launch_factor: 1.0,
        request_overhead_seconds: 0.0,
    },
    EngineProfile {
        name: "llama.cpp",
        scheduling: Scheduling::DecodesFirst,
        chunked_prefill_above_context: None,
        sequence_overhead_seconds: 0.0,
        several_devices_host: None,
        step_overhead_seconds: 0.0005,
        decode_launch_factor: 0.5,
        prefill_launch_factor: 1.0,
        request_overhead_seconds: 0.0,
    },
];

/// The engine a serving point uses when none is named.
pub const DEFAULT_ENGINE: &str = "vllm";

/// The profile of the engine spelled `name` on the command line: `NAME@VERSION` takes the
/// version's own profile when it has one (`vllm@0.6`), else the engine's (`vllm@0.19` is
/// `vllm`).
pub fn engine_profile(name: &str) -> Option<EngineProfile> {
    ENGINES
        .iter()
        .find(|e| e.name == name)
        .or_else(|| {
            let base = name.split('@').next().unwrap_or(name);
            ENGINES.iter().find(|e| e.name == base)
        })
        .copied()
}

impl EngineProfile {
    /// The profile as it runs at a context of `context_tokens` (the engine's
    /// `max_model_len`): prompts first becomes decodes first above the context where the
    /// engine turns chunked prefill on by itself. An unknown context (`None`) keeps the
    /// profile's rule.
    pub fn at_context(self, context_tokens: Option<u64>) -> EngineProfile {
        match (self.chunked_prefill_above_context, context_tokens) {
            (Some(limit), Some(context)) if context > limit => EngineProfile {
                scheduling: Scheduling::DecodesFirst,
                ..self
            },
            _ => self,
        }
    }

    /// The profile with the engine's `enable_chunked_prefill` set (`None`: unchanged): an
    /// engine whose scheduling depends on chunked prefill (vLLM V0, the profiles with
    /// [`EngineProfile::chunked_prefill_above_context`]) schedules decodes first with it
    /// and prompts first without it, whatever the context; the others always schedule
    /// decodes first.
    pub fn with_chunked_prefill(self, chunked_prefill: Option<bool>) -> EngineProfile {
        match (self.chunked_prefill_above_context, chunked_prefill) {
            (Some(_), Some(true)) => EngineProfile {
                scheduling: Scheduling::DecodesFirst,
                ..self
            },
            (Some(_), Some(false)) => EngineProfile {
                scheduling: Scheduling::PromptsFirst,
                ..self
            },
            _ => self,
        }
    }

    /// The profile as it runs at `point`: at its context ([`EngineProfile::at_context`]),
    /// then with its `enable_chunked_prefill` when given
    /// ([`EngineProfile::with_chunked_prefill`]), which overrides the context's rule.
    pub fn for_point(self, point: &super::ServingPoint) -> EngineProfile {
        self.at_context(point.context_tokens)
            .with_chunked_prefill(point.chunked_prefill)
    }

    /// The profile as it runs on `devices` devices (the engine's tensor x pipeline
    /// parallel ranks): [`EngineProfile::several_devices_host`] replaces the host time on
    /// more than one.
    pub fn on_devices(self, devices: u64) -> EngineProfile {
        match self.several_devices_host {
            Some(host) if devices > 1 => EngineProfile {
                step_overhead_seconds: host.step_overhead_seconds,
                sequence_overhead_seconds: host.sequence_overhead_seconds,
                several_devices_host: None,
                ..self
            },
            _ => self,
        }
    }

    /// The rule the serving figures follow when it is not the default one (decodes first,
    /// host time per step), for the figures' list of rules.
    pub fn rule(&self) -> Option<&'static str> {
        match self.scheduling {
            Scheduling::DecodesFirst if self.sequence_overhead_seconds == 0.0 => None,
            Scheduling::DecodesFirst => Some(
                "engine vllm@0.6 (vLLM V0) with chunked prefill (its `enable_chunked_prefill`, on by default above a 32,768-token context): decodes first; the engine's host time is per step plus per sequence of the step, one pair on one device and one on several (the distributed executor broadcasts each step's inputs to the other ranks; fitted on the single-device and the multi-GPU validation tables)",
            ),
            Scheduling::PromptsFirst => Some(
                "engine vllm@0.6 (vLLM V0 without chunked prefill, its default up to a 32,768-token context): prompts first, not decodes first: waiting requests join with their whole prompt while the prompts fit the budget, and a step with prompts runs no decodes; the engine's host time is per step plus per sequence of the step, one pair on one device and one on several (the distributed executor broadcasts each step's inputs to the other ranks; fitted on the single-device and the multi-GPU validation tables)",
            ),
        }
    }

    /// The host time of a step of `sequences` sequences (seconds).
    pub fn host_seconds(&self, sequences: u64) -> f64 {
        self.step_overhead_seconds + self.sequence_overhead_seconds * sequences as f64
    }
}

/// The spellings, for messages.
pub fn engine_names() -> String {
    ENGINES
        .iter()
        .map(|e| e.name)
        .collect::<Vec<_>>()
        .join(", ")
}
