//! How the validation examples run a vLLM V0 record (`vllm@0.6`, docs/performance-model.md,
//! "Engines"): which records are V0 runs, and the server settings they ran at (V0's
//! defaults at the server's `--max-model-len`).

use jointplan::perf::engine_profile::VLLM_V0_CHUNKED_PREFILL_ABOVE;
use serde_json::Value;

/// How a vLLM V0 run was configured: the record's engine version is 0.5.x (its scripts pin
/// `vllm/vllm-openai:v0.5.4`), or its result file streams tokens in chunks (multi-step
/// scheduling, vLLM 0.6.0 or later, run in September 2024 when every release was the V0
/// engine).
pub struct V0Run {
    /// The server's `--max-model-len`: the `len` of the result file's name.
    pub max_model_len: u64,
    /// A multi-step run (`--num-scheduler-steps` > 1): its host time is amortized over the
    /// steps, which the profile does not model; not a fit row.
    pub multi_step: bool,
}

/// vLLM V0's default `max_num_seqs` (`EngineArgs`, `vllm/engine/arg_utils.py`, v0.5.4).
pub const MAX_NUM_SEQS: u64 = 256;
/// vLLM 0.5.4's `max_num_batched_tokens` with chunked prefill (`SchedulerConfig`,
/// `vllm/config.py`, v0.5.4: "the values that have the best balance between ITL and TTFT
/// on A100").
pub const CHUNKED_BUDGET: u64 = 512;

/// The record's V0 run, `None` when the record is not one.
pub fn v0_run(record: &Value) -> Option<V0Run> {
    let version = record.get("engine_version")?.as_str()?;
    if record.get("engine")?.as_str()? != "vllm" {
        return None;
    }
    let multi_step = version.contains("multi-step");
    if !(version.starts_with("0.5") || multi_step) {
        return None;
    }
    let source = record.get("source")?.as_str()?;
    let len = source.rsplit("_len").next()?.strip_suffix(".json")?;
    Some(V0Run {
        max_model_len: len.parse().ok()?,
        multi_step,
    })
}

/// V0's scheduled-token budget at a context of `context` tokens: whole prompts up to
/// `max(max_model_len, 2048)` tokens a step, or 512-token chunks where the context turns
/// chunked prefill on.
pub fn budget(context: u64) -> u64 {
    if context > VLLM_V0_CHUNKED_PREFILL_ABOVE {
        CHUNKED_BUDGET
    } else {
        context.max(2048)
    }
}
