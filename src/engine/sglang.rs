//! SGLang's memory accounting (v0.4.6; `python/sglang/srt/model_executor/model_runner.py`
//! `profile_max_num_token`, `python/sglang/srt/server_args.py`): the KV pool gets what is
//! left after the weights of `mem_fraction_static` of the memory free at startup,
//! `max_total_num_tokens = (free_after_weights - free_at_start x (1 - mem_fraction_static))
//! / cell_size`, the cell being one token over every layer.

use std::collections::BTreeMap;

use super::args::{kv_element_bytes, ArgKind, EngineArgs, KnownArg};
use super::facts::{DeviceFacts, ModelFacts};
use super::report::{BudgetTerm, EngineReport, LogLine};
use super::vllm::NON_TORCH_BYTES;
use super::{gib, Engine, EngineError};

/// The modelled version.
pub const VERSION: &str = "0.4.6";

/// SGLang's arguments that change its memory.
pub const ARGS: &[KnownArg] = &[
    KnownArg {
        key: "mem_fraction_static",
        kind: ArgKind::Fraction,
        default: "0.88 (tp 1), 0.87 (tp 2-3), 0.85 (tp 4-7), 0.81 (tp 8-15), 0.79 (tp >= 16)",
    },
    KnownArg {
        key: "context_length",
        kind: ArgKind::Count,
        default: "the model's max_position_embeddings (the plan's context when planning)",
    },
    KnownArg {
        key: "max_total_tokens",
        kind: ArgKind::Count,
        default: "none (the profiled figure)",
    },
    KnownArg {
        key: "page_size",
        kind: ArgKind::Count,
        default: "1",
    },
    KnownArg {
        key: "kv_cache_dtype",
        kind: ArgKind::Word(&["auto", "fp8_e4m3", "fp8_e5m2", "bf16", "bfloat16"]),
        default: "auto (the model's dtype)",
    },
    KnownArg {
        key: "tp_size",
        kind: ArgKind::Count,
        default: "1",
    },
];

/// The default `mem_fraction_static` for `tp` ranks (`server_args.py`, v0.4.6).
fn default_fraction(tp: u64) -> f64 {
    match tp {
        0 | 1 => 0.88,
        2..=3 => 0.87,
        4..=7 => 0.85,
        8..=15 => 0.81,
        _ => 0.79,
    }
}

/// The accounting of SGLang.
pub fn account(
    model: &ModelFacts,
    device: &DeviceFacts,
    args: &EngineArgs,
) -> Result<EngineReport, EngineError> {
    if model.has_recurrent_layers() {
        return Err(EngineError::Unsupported {
            engine: Engine::Sglang,
            feature: "a hybrid model with recurrent layers (SGLang's separate state pool)"
                .to_owned(),
        });
    }
    let tp = args.count("tp_size").unwrap_or(1).max(1);
    let fraction = args
        .fraction("mem_fraction_static")
        .unwrap_or(default_fraction(tp));
    let context = args
        .count("context_length")
        .unwrap_or(model.trained_context);
    let page = args.count("page_size").unwrap_or(1);
    let kv_dtype = args.word("kv_cache_dtype").unwrap_or("auto").to_owned();
    let element = kv_element_bytes(&kv_dtype, model.dtype_bytes);
    let cell = model.kv_bytes_per_token(tp, element)?;
    if cell == 0 {
        return Err(EngineError::Facts {
            what: "no layer keeps a KV cache".to_owned(),
        });
    }
    let free_at_start = device
        .free_at_start_bytes
        .unwrap_or(device.total_bytes.saturating_sub(NON_TORCH_BYTES))
        as f64;
    // The rotary cos/sin cache is a float32 buffer of the model (max_position x rotary_dim x
    // 4 bytes), counted in SGLang's `mem usage` at load.
    let rope = super::mul(
        super::mul(model.trained_context, model.rotary_dim, "rotary cache")?,
        4 * model.rotary_caches,
        "rotary cache",
    )?;
    let weights = model.weights_bytes / tp + rope;
    let free_after_weights = free_at_start - weights as f64;
    let rest = free_after_weights - free_at_start * (1.0 - fraction);
    let mut tokens = if rest > 0.0 {
        (rest / cell as f64).floor() as u64
    } else {
        0
    };
    if let Some(cap) = args.count("max_total_tokens") {
        tokens = tokens.min(cap);
    }
    tokens = tokens / page * page;
    let kv_bytes = tokens * cell;
    let max_requests_pool = (tokens as f64 / context as f64 * 512.0) as u64;
    let max_running = (tokens / 2).min(max_requests_pool.clamp(2048, 4096));
    let concurrency = ((tokens as f64 / context as f64) * 100.0).round() / 100.0;
    let budget = vec![
        BudgetTerm {
            name: "free_at_start".to_owned(),
            bytes: free_at_start as u64,
            rule: match device.free_at_start_bytes {
                Some(_) => "the free memory SGLang logged at startup (`Load weight begin. avail mem`)".to_owned(),
                None => format!(
                    "total {} - CUDA context (0.35 GiB, the figure vLLM logged as non-torch memory; docs/engines.md)",
                    device.total_bytes
                ),
            },
        },
        BudgetTerm {
            name: "weights".to_owned(),
            bytes: weights,
            rule: format!(
                "parameters{} + rotary cos/sin cache max_position x rotary_dim x 4 bytes ({rope} B)",
                if tp > 1 { format!(" / tp_size {tp}") } else { String::new() }
            ),
        },
        BudgetTerm {
            name: "reserved".to_owned(),
            bytes: (free_at_start * (1.0 - fraction)) as u64,
            rule: format!("free_at_start x (1 - mem_fraction_static {fraction}): activations, CUDA graphs"),
        },
        BudgetTerm {
            name: "kv_cache".to_owned(),
            bytes: kv_bytes,
            rule: format!(
                "max_total_num_tokens x cell {cell} B (model_runner.py profile_max_num_token, v0.4.6)"
            ),
        },
    ];
    let half = kv_bytes / 2;
    let log = vec![
        LogLine {
            line: format!(
                "Load weight end. type={}, dtype={}, avail mem={} GB, mem usage={} GB.",
                "model",
                model.dtype_name,
                gib(free_after_weights),
                gib(weights as f64)
            ),
            rule: "free_at_start - weights".to_owned(),
        },
        LogLine {
            line: if model.latent_attention {
                format!(
                    "KV Cache is allocated. #tokens: {tokens}, KV size: {} GB",
                    gib(kv_bytes as f64)
                )
            } else {
                format!(
                    "KV Cache is allocated. #tokens: {tokens}, K size: {} GB, V size: {} GB",
                    gib(half as f64),
                    gib(half as f64)
                )
            },
            rule: format!(
                "floor((free_after_weights - free_at_start x (1 - {fraction})) / cell {cell} B), rounded down to page_size {page}"
            ),
        },
        LogLine {
            line: format!(
                "max_total_num_tokens={tokens}, max_running_requests={max_running}, context_len={context}"
            ),
            rule: "max_running_requests = min(tokens / 2, clamp(tokens / context_len x 512, 2048, 4096)) (model_runner.py v0.4.6)".to_owned(),
        },
    ];
    let refusal = (tokens < context).then(|| {
        format!(
            "max_total_num_tokens {tokens} is below context_len {context}: one request of the full context does not fit; raise mem_fraction_static or lower context_length"
        )
    });
    let mut used = BTreeMap::new();
    used.insert("mem_fraction_static".to_owned(), fraction.to_string());
    used.insert("context_length".to_owned(), context.to_string());
    used.insert("page_size".to_owned(), page.to_string());
    used.insert("kv_cache_dtype".to_owned(), kv_dtype.clone());
    used.insert("tp_size".to_owned(), tp.to_string());
    let flags = vec![
        format!("--context-length {context}"),
        format!("--mem-fraction-static {fraction}"),
        format!("--max-running-requests {max_running}"),
        format!("--kv-cache-dtype {kv_dtype}"),
        format!("--tp-size {tp}"),
    ];
    Ok(EngineReport {
        name: Engine::Sglang.name().to_owned(),
        version: VERSION.to_owned(),
        kv_cache_bytes: kv_bytes,
        kv_cache_tokens: tokens,
        blocks: None,
        max_concurrency: concurrency,
        context_tokens: context,
        budget,
        log,
        args: used,
        flags,
        refusal,
    })
}
