//! TensorRT-LLM's memory accounting (v0.12 C++ runtime; `cpp/tensorrt_llm/batch_manager/
//! kvCacheManager.cpp` `calculateMaxNumBlocks`, `tensorrt_llm/llmapi/llm_args.py`
//! `KvCacheConfig`): after the engine (weights) and its runtime buffers are allocated, the
//! paged KV cache takes `free_gpu_memory_fraction` (0.9) of the memory still free, in blocks
//! of `tokens_per_block` tokens.

use std::collections::BTreeMap;

use super::args::{kv_element_bytes, ArgKind, EngineArgs, KnownArg};
use super::facts::{DeviceFacts, ModelFacts};
use super::report::{BudgetTerm, EngineReport, LogLine};
use super::vllm::{forward_bytes_per_token, NON_TORCH_BYTES};
use super::{gib, mul, Engine, EngineError};

/// The modelled version.
pub const VERSION: &str = "0.12";

/// TensorRT-LLM's arguments that change its memory.
pub const ARGS: &[KnownArg] = &[
    KnownArg {
        key: "free_gpu_memory_fraction",
        kind: ArgKind::Fraction,
        default: "0.9",
    },
    KnownArg {
        key: "tokens_per_block",
        kind: ArgKind::Count,
        default: "64",
    },
    KnownArg {
        key: "max_num_tokens",
        kind: ArgKind::Count,
        default: "8192",
    },
    KnownArg {
        key: "max_seq_len",
        kind: ArgKind::Count,
        default: "the model's max_position_embeddings (the plan's context when planning)",
    },
    KnownArg {
        key: "max_tokens_in_paged_kv_cache",
        kind: ArgKind::Count,
        default: "none (the fraction decides)",
    },
    KnownArg {
        key: "kv_cache_dtype",
        kind: ArgKind::Word(&["auto", "fp8", "int8", "float16", "bfloat16"]),
        default: "auto (the model's dtype)",
    },
    KnownArg {
        key: "tp_size",
        kind: ArgKind::Count,
        default: "1",
    },
];

/// The accounting of TensorRT-LLM.
pub fn account(
    model: &ModelFacts,
    device: &DeviceFacts,
    args: &EngineArgs,
) -> Result<EngineReport, EngineError> {
    if model.has_recurrent_layers() {
        return Err(EngineError::Unsupported {
            engine: Engine::Trtllm,
            feature: "a hybrid model with recurrent layers".to_owned(),
        });
    }
    let tp = args.count("tp_size").unwrap_or(1).max(1);
    let fraction = args.fraction("free_gpu_memory_fraction").unwrap_or(0.9);
    let block = args.count("tokens_per_block").unwrap_or(64);
    let max_num_tokens = args.count("max_num_tokens").unwrap_or(8192);
    let context = args.count("max_seq_len").unwrap_or(model.trained_context);
    let kv_dtype = args.word("kv_cache_dtype").unwrap_or("auto").to_owned();
    let per_token = model.kv_bytes_per_token(tp, kv_element_bytes(&kv_dtype, model.dtype_bytes))?;
    if per_token == 0 {
        return Err(EngineError::Facts {
            what: "no layer keeps a KV cache".to_owned(),
        });
    }
    let weights = model.weights_bytes / tp;
    let runtime = mul(
        max_num_tokens,
        forward_bytes_per_token(model, tp)?,
        "runtime activation buffers",
    )?;
    let free = device
        .total_bytes
        .saturating_sub(NON_TORCH_BYTES)
        .saturating_sub(weights)
        .saturating_sub(runtime);
    let kv_budget = (free as f64 * fraction) as u64;
    let block_bytes = mul(per_token, block, "KV block bytes")?;
    let mut blocks = kv_budget / block_bytes;
    if let Some(cap) = args.count("max_tokens_in_paged_kv_cache") {
        blocks = blocks.min(cap.div_ceil(block));
    }
    let tokens = blocks * block;
    let kv_bytes = blocks * block_bytes;
    let concurrency = ((tokens as f64 / context as f64) * 100.0).round() / 100.0;
    let budget = vec![
        BudgetTerm {
            name: "weights".to_owned(),
            bytes: weights,
            rule: "the engine's weights (parameters, per rank)".to_owned(),
        },
        BudgetTerm {
            name: "runtime_buffers".to_owned(),
            bytes: runtime,
            rule: format!(
                "activations at max_num_tokens {max_num_tokens} x {} B/token (the forward-pass rule of docs/engines.md)",
                forward_bytes_per_token(model, tp)?
            ),
        },
        BudgetTerm {
            name: "cuda_context".to_owned(),
            bytes: NON_TORCH_BYTES,
            rule: "0.35 GiB, the figure vLLM logged as non-torch memory (docs/engines.md)"
                .to_owned(),
        },
        BudgetTerm {
            name: "kv_cache".to_owned(),
            bytes: kv_bytes,
            rule: format!(
                "free x free_gpu_memory_fraction {fraction}, whole blocks of {block} tokens (kvCacheManager.cpp v0.12)"
            ),
        },
    ];
    let log = vec![
        LogLine {
            line: format!(
                "[TensorRT-LLM][INFO] Memory usage when calculating max tokens in paged kv cache: total: {} GiB, available: {} GiB",
                gib(device.total_bytes as f64),
                gib(free as f64)
            ),
            rule: "available = total - CUDA context - weights - runtime buffers".to_owned(),
        },
        LogLine {
            line: format!("[TensorRT-LLM][INFO] Number of blocks in KV cache primary pool: {blocks}"),
            rule: format!("floor(available x {fraction} / ({block} tokens x {per_token} B))"),
        },
        LogLine {
            line: format!(
                "[TensorRT-LLM][INFO] Allocated {} GiB for max tokens in paged KV cache ({tokens}).",
                gib(kv_bytes as f64)
            ),
            rule: "blocks x tokens_per_block".to_owned(),
        },
    ];
    let refusal = (tokens < context.min(max_num_tokens)).then(|| {
        format!(
            "the paged KV cache holds {tokens} tokens, fewer than one request of {} tokens; raise free_gpu_memory_fraction or lower max_num_tokens",
            context.min(max_num_tokens)
        )
    });
    let mut used = BTreeMap::new();
    used.insert("free_gpu_memory_fraction".to_owned(), fraction.to_string());
    used.insert("tokens_per_block".to_owned(), block.to_string());
    used.insert("max_num_tokens".to_owned(), max_num_tokens.to_string());
    used.insert("max_seq_len".to_owned(), context.to_string());
    used.insert("kv_cache_dtype".to_owned(), kv_dtype.clone());
    used.insert("tp_size".to_owned(), tp.to_string());
    let flags = vec![
        format!("--max_seq_len {context}"),
        format!("--max_num_tokens {max_num_tokens}"),
        format!("--kv_cache_free_gpu_memory_fraction {fraction}"),
        format!("--tokens_per_block {block}"),
        format!("--tp_size {tp}"),
    ];
    Ok(EngineReport {
        name: Engine::Trtllm.name().to_owned(),
        version: VERSION.to_owned(),
        kv_cache_bytes: kv_bytes,
        kv_cache_tokens: tokens,
        blocks: Some(blocks),
        max_concurrency: concurrency,
        context_tokens: context,
        budget,
        log,
        args: used,
        flags,
        refusal,
    })
}
