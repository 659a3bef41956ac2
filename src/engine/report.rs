//! What an engine's accounting produces: its budget, its KV cache, the lines it would log
//! and the flags that reproduce it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One term of an engine's budget (bytes), and the rule it follows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetTerm {
    /// What it is (`requested`, `weights`, `activation_peak`, `non_torch`, ...).
    pub name: String,
    /// Bytes.
    pub bytes: u64,
    /// The rule, with the engine file and version it follows.
    pub rule: String,
}

/// A line the engine would log, and the rule it follows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLine {
    /// The line, worded as the engine words it.
    pub line: String,
    /// The rule that produces its figures.
    pub rule: String,
}

/// An engine's memory accounting for one model on one device (`engine` of `plan --json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EngineReport {
    /// The engine (`vllm`, `sglang`, `trtllm`, `llama.cpp`).
    pub name: String,
    /// The version whose rules are followed.
    pub version: String,
    /// Bytes of KV cache the engine allocates (per device).
    pub kv_cache_bytes: u64,
    /// Tokens of KV cache (vLLM's "GPU KV cache size", SGLang's `max_total_num_tokens`,
    /// TensorRT-LLM's max tokens in the paged cache, llama.cpp's `n_ctx`).
    pub kv_cache_tokens: u64,
    /// KV blocks (vLLM's `num_gpu_blocks`, TensorRT-LLM's blocks; `null` where the engine
    /// does not count blocks).
    pub blocks: Option<u64>,
    /// Requests of `max_model_len` tokens the cache holds at once (vLLM's "Maximum
    /// concurrency", two decimals; others: tokens / context).
    pub max_concurrency: f64,
    /// The context each request may reach (`max_model_len`, `context_len`, `n_ctx`).
    pub context_tokens: u64,
    /// The budget's terms, in the order the engine subtracts them.
    pub budget: Vec<BudgetTerm>,
    /// The lines the engine would log.
    pub log: Vec<LogLine>,
    /// Every argument the accounting used, as the engine spells it, with its value (given
    /// or the engine's default).
    pub args: BTreeMap<String, String>,
    /// The engine's command-line flags that reproduce this accounting.
    pub flags: Vec<String>,
    /// Why the engine would refuse to start with these arguments (in its words, with the
    /// lever), if it would.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
}
