//! vLLM's memory accounting: `gpu_memory_utilization` of the total the driver reports, less
//! the weights, the activation peak of a profiling run at `max_num_batched_tokens`, and the
//! non-torch memory; the rest is KV cache in blocks of `block_size` tokens.
//!
//! Two versions are modelled (sources in docs/engines.md):
//! * `0.10` (the V1 engine; `vllm/v1/worker/gpu_worker.py`, `vllm/v1/core/kv_cache_utils.py`,
//!   `vllm/engine/arg_utils.py` of v0.10.1): chunked prefill always on,
//!   `max_num_batched_tokens` 2048 (8192 on a device of 70 GiB or more whose name lacks
//!   `A100`), `max_num_seqs` 256 (1024 on such a device); KV cache groups for models mixing
//!   sliding and full attention;
//! * `0.6` (the V0 engine; `vllm/worker/worker.py` of v0.6.4): chunked prefill only beyond a
//!   32,768-token `max_model_len`, else `max_num_batched_tokens = max(max_model_len, 2048)`;
//!   every layer counted at full attention; blocks and concurrency logged as
//!   `# GPU blocks: N` and `Maximum concurrency for L tokens per request: X.XXx`.

use std::collections::BTreeMap;

use super::args::{kv_element_bytes, ArgKind, EngineArgs, KnownArg};
use super::facts::{CacheLayer, DeviceFacts, ModelFacts};
use super::report::{BudgetTerm, EngineReport, LogLine};
use super::{gib, grouped, mul, Engine, EngineError, GIB};

/// The modelled versions, the default first.
pub const VERSIONS: [&str; 2] = ["0.10", "0.6"];

const KV_DTYPES: &[&str] = &["auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16", "float16"];

/// vLLM's arguments that change its memory.
pub const ARGS: &[KnownArg] = &[
    KnownArg {
        key: "gpu_memory_utilization",
        kind: ArgKind::Fraction,
        default: "0.9",
    },
    KnownArg {
        key: "max_model_len",
        kind: ArgKind::Count,
        default: "the model's max_position_embeddings (the plan's context when planning)",
    },
    KnownArg {
        key: "max_num_batched_tokens",
        kind: ArgKind::Count,
        default: "0.10: 2048, 8192 on >= 70 GiB non-A100 devices; 0.6: max(max_model_len, 2048), 2048 with chunked prefill",
    },
    KnownArg {
        key: "max_num_seqs",
        kind: ArgKind::Count,
        default: "256 (0.10: 1024 on >= 70 GiB non-A100 devices)",
    },
    KnownArg {
        key: "block_size",
        kind: ArgKind::Count,
        default: "16 (64 for MLA models)",
    },
    KnownArg {
        key: "kv_cache_dtype",
        kind: ArgKind::Word(KV_DTYPES),
        default: "auto (the model's dtype)",
    },
    KnownArg {
        key: "dtype",
        kind: ArgKind::Word(&["auto", "float16", "half", "bfloat16"]),
        default: "auto (the checkpoint's dtype)",
    },
    KnownArg {
        key: "quantization",
        kind: ArgKind::Word(&["fp8"]),
        default: "none (the checkpoint's quantization_config); fp8 quantizes a 16-bit checkpoint's projections at load",
    },
    KnownArg {
        key: "tensor_parallel_size",
        kind: ArgKind::Count,
        default: "1",
    },
    KnownArg {
        key: "enable_chunked_prefill",
        kind: ArgKind::Flag,
        default: "0.10: true; 0.6: true only when max_model_len > 32768",
    },
];

/// The non-torch memory vLLM measures in its profiling run (CUDA context growth, cuBLAS
/// workspaces, NCCL buffers): 0.35 GiB, the figure vLLM logged for Llama-3.1-8B on an
/// RTX 3090 (docs/data/engine-logs.json, record `vllm-10517-llama31-8b-rtx3090-len20000`),
/// the one record this constant is taken from; the other records test it.
pub const NON_TORCH_BYTES: u64 = 350 * GIB / 1000;

/// Bytes per logit element the profiling run's sampler holds at its peak (logits of
/// `min(max_num_seqs, max_num_batched_tokens)` sequences over the vocabulary, their float32
/// copies, the top-k/top-p sort's values and indices, probabilities): 38, fitted on the one
/// record whose activation peak the sampler sets (docs/data/engine-logs.json,
/// `vllm-13882-qwen25-7b-rtx4060-8gb`: 1.42 GiB at 256 sequences x 152,064 logits, less the
/// hidden rows); the other records test it. The same figure is taken for 0.10 (no record of
/// the data set logs a V1 activation split).
pub const SAMPLER_BYTES_PER_LOGIT: u64 = 38;

/// Whether vLLM takes the larger defaults on this device (`arg_utils.py`, v0.10.1:
/// `device_memory >= 70 GiB and "a100" not in device_name`).
fn large_device(device: &DeviceFacts) -> bool {
    device.total_bytes >= 70 * GIB && !device.name.to_lowercase().contains("a100")
}

/// The forward pass's activation peak per token on one rank: the residual and hidden
/// streams (2h) plus the largest block's transient tensors, in the model dtype.
/// Attention: q/k/v projection output, attention output, o-projection output. Dense MLP:
/// gate-up output (2I), activation output (I), down-projection output (h). MoE (fused):
/// per routed expert slot gate-up (2Ie), activation (Ie) and output (h).
pub fn forward_bytes_per_token(model: &ModelFacts, tp: u64) -> Result<u64, EngineError> {
    let tp = tp.max(1);
    let h = model.hidden_size;
    let base = 2 * h;
    let q = model.query_heads.div_ceil(tp) * model.head_dim;
    let kv = model.kv_heads.div_ceil(tp) * model.head_dim;
    let attention = base + (q + 2 * kv) + q + h;
    let dense = if model.has_dense_mlp {
        let i = model.intermediate_size.div_ceil(tp);
        base + 3 * i + h
    } else {
        0
    };
    let moe = match model.moe {
        Some(moe) => {
            let ie = moe.expert_intermediate_size.div_ceil(tp);
            let k = moe.experts_per_token;
            let routed = k
                .checked_mul(3 * ie + h)
                .ok_or_else(|| EngineError::Overflow {
                    what: "MoE activation bytes per token".to_owned(),
                })?;
            base + routed
        }
        None => 0,
    };
    mul(
        attention.max(dense).max(moe),
        model.dtype_bytes,
        "activation bytes per token",
    )
}

struct Resolved {
    utilization: f64,
    max_model_len: u64,
    batched_tokens: u64,
    max_num_seqs: u64,
    block_size: u64,
    kv_dtype: String,
    kv_element_bytes: u64,
    tp: u64,
    chunked: bool,
}

fn resolve(
    v1: bool,
    model: &ModelFacts,
    device: &DeviceFacts,
    args: &EngineArgs,
) -> Result<Resolved, EngineError> {
    let utilization = args.fraction("gpu_memory_utilization").unwrap_or(0.9);
    let max_model_len = args.count("max_model_len").unwrap_or(model.trained_context);
    if max_model_len > model.trained_context {
        return Err(EngineError::Refused {
            engine: Engine::Vllm,
            message: format!(
                "max_model_len {max_model_len} is greater than the derived max_model_len {} (the model's max_position_embeddings); lower --engine-arg max_model_len",
                model.trained_context
            ),
        });
    }
    let large = v1 && large_device(device);
    let chunked = match args.word("enable_chunked_prefill") {
        Some(flag) => flag == "true",
        None => v1 || max_model_len > 32768,
    };
    let batched_tokens = match args.count("max_num_batched_tokens") {
        Some(n) => n,
        None if large => 8192,
        None if chunked => 2048,
        None => max_model_len.max(2048),
    };
    if !chunked && batched_tokens < max_model_len {
        return Err(EngineError::Refused {
            engine: Engine::Vllm,
            message: format!(
                "max_num_batched_tokens ({batched_tokens}) is smaller than max_model_len ({max_model_len}) without chunked prefill; raise max_num_batched_tokens or set enable_chunked_prefill=true"
            ),
        });
    }
    let max_num_seqs = args
        .count("max_num_seqs")
        .unwrap_or(if large { 1024 } else { 256 });
    let block_size = args
        .count("block_size")
        .unwrap_or(if model.latent_attention { 64 } else { 16 });
    let kv_dtype = args.word("kv_cache_dtype").unwrap_or("auto").to_owned();
    let kv_element_bytes = kv_element_bytes(&kv_dtype, model.dtype_bytes);
    let tp = args.count("tensor_parallel_size").unwrap_or(1);
    Ok(Resolved {
        utilization,
        max_model_len,
        batched_tokens,
        max_num_seqs,
        block_size,
        kv_dtype,
        kv_element_bytes,
        tp,
        chunked,
    })
}

/// A KV cache group: layers of one attention kind sharing a block table.
struct Group {
    layers: u64,
    window: Option<u64>,
}

/// vLLM 0.10's KV cache groups (`_get_kv_cache_groups_uniform_page_size`): each attention
/// kind's layers are split into groups of `group_size` layers, the smallest kind's layer
/// count (or the largest's when it is under 1.25 times the smallest).
fn groups(model: &ModelFacts) -> (u64, Vec<Group>) {
    let mut kinds: BTreeMap<Option<u64>, u64> = BTreeMap::new();
    for layer in &model.layers {
        match layer {
            CacheLayer::Full { .. } => *kinds.entry(None).or_default() += 1,
            CacheLayer::Sliding { window, .. } => *kinds.entry(Some(*window)).or_default() += 1,
            CacheLayer::Recurrent { .. } => {}
        }
    }
    let min = kinds.values().copied().min().unwrap_or(1).max(1);
    let max = kinds.values().copied().max().unwrap_or(1);
    let group_size = if kinds.len() == 1 || (max as f64) < (min as f64) * 1.25 {
        max
    } else {
        min
    };
    let mut out = Vec::new();
    for (window, count) in kinds {
        for g in 0..count.div_ceil(group_size) {
            out.push(Group {
                layers: group_size.min(count - g * group_size),
                window,
            });
        }
    }
    (group_size, out)
}

/// The accounting of vLLM `version` (one of [`VERSIONS`]).
pub fn account(
    version: &str,
    model: &ModelFacts,
    device: &DeviceFacts,
    args: &EngineArgs,
) -> Result<EngineReport, EngineError> {
    let v1 = version != "0.6";
    if model.has_recurrent_layers() {
        return Err(EngineError::Unsupported {
            engine: Engine::Vllm,
            feature: "a hybrid model with recurrent (linear-attention) layers (vLLM unifies their state pages with the attention pages)".to_owned(),
        });
    }
    let r = resolve(v1, model, device, args)?;
    let source = if v1 {
        "vLLM v0.10.1 vllm/v1/worker/gpu_worker.py determine_available_memory"
    } else {
        "vLLM v0.6.4 vllm/worker/worker.py determine_num_available_blocks"
    };
    let total = device.total_bytes as f64;
    let requested = total * r.utilization;
    let tp = r.tp.max(1);
    let rope = mul(
        mul(model.trained_context, model.rotary_dim, "rotary cache")?,
        mul(model.dtype_bytes, model.rotary_caches, "rotary cache")?,
        "rotary cache",
    )?;
    let weights = model.weights_bytes / tp + rope;
    let forward = mul(
        r.batched_tokens,
        forward_bytes_per_token(model, tp)?,
        "forward activation peak",
    )?;
    let sampled = r.max_num_seqs.min(r.batched_tokens);
    let sampler = mul(
        mul(sampled, model.vocab_size, "sampler peak")?,
        SAMPLER_BYTES_PER_LOGIT,
        "sampler peak",
    )?
    .saturating_add(mul(
        r.batched_tokens + sampled,
        model.hidden_size * model.dtype_bytes,
        "sampler peak",
    )?);
    let activation = forward.max(sampler);
    let non_torch = NON_TORCH_BYTES;
    let available = requested - weights as f64 - activation as f64 - non_torch as f64;
    let per_token_per_layer: Vec<u64> = model
        .layers
        .iter()
        .map(|l| l.elements_per_token_per_rank(tp) * r.kv_element_bytes)
        .collect();
    let page = per_token_per_layer.iter().copied().max().unwrap_or(0) * r.block_size;
    if page == 0 {
        return Err(EngineError::Facts {
            what: "no layer keeps a KV cache".to_owned(),
        });
    }
    let mut budget = vec![
        BudgetTerm {
            name: "requested".to_owned(),
            bytes: requested as u64,
            rule: format!(
                "total_gpu_memory {} x gpu_memory_utilization {} ({source})",
                device.total_bytes, r.utilization
            ),
        },
        BudgetTerm {
            name: "weights".to_owned(),
            bytes: weights,
            rule: format!(
                "parameters{} + rotary cos/sin cache max_position x rotary_dim x dtype ({rope} B): what `Model loading took` measures",
                if tp > 1 { format!(" / tensor_parallel_size {tp}") } else { String::new() }
            ),
        },
        BudgetTerm {
            name: "activation_peak".to_owned(),
            bytes: activation,
            rule: format!(
                "profile run: max(forward at max_num_batched_tokens {} x {} B/token, sampler at {} sequences x vocab {} x {} B + hidden rows) (docs/engines.md)",
                r.batched_tokens,
                forward_bytes_per_token(model, tp)?,
                sampled,
                model.vocab_size,
                SAMPLER_BYTES_PER_LOGIT
            ),
        },
        BudgetTerm {
            name: "non_torch".to_owned(),
            bytes: non_torch,
            rule: "0.35 GiB, as logged for Llama-3.1-8B on an RTX 3090 (docs/engines.md)".to_owned(),
        },
        BudgetTerm {
            name: "cuda_graph".to_owned(),
            bytes: 0,
            rule: format!(
                "0: vLLM {version} captures CUDA graphs after the KV cache is allocated, outside this budget"
            ),
        },
    ];
    let available_bytes = if available > 0.0 { available as u64 } else { 0 };
    budget.push(BudgetTerm {
        name: "kv_cache".to_owned(),
        bytes: available_bytes,
        rule: "requested - weights - activation_peak - non_torch - cuda_graph".to_owned(),
    });
    let mut log = Vec::new();
    let mut refusal = None;
    let (blocks, tokens, concurrency, kv_bytes);
    if v1 {
        let (group_size, groups) = groups(model);
        let num_blocks = if available > 0.0 {
            (available / page as f64 / group_size as f64).floor() as u64
        } else {
            0
        };
        tokens = num_blocks / groups.len().max(1) as u64 * r.block_size;
        let per_request: u64 = groups
            .iter()
            .map(|g| match g.window {
                None => r.max_model_len.div_ceil(r.block_size),
                Some(w) => {
                    let needed = (w - 1 + r.batched_tokens).min(r.max_model_len);
                    needed.div_ceil(r.block_size) + 1
                }
            })
            .sum();
        let raw = num_blocks as f64 / per_request.max(1) as f64;
        concurrency = (raw * 100.0).round() / 100.0;
        blocks = num_blocks;
        kv_bytes = num_blocks * page * group_size;
        let needed_bytes: u64 = groups
            .iter()
            .map(|g| {
                let tokens = match g.window {
                    None => r.max_model_len,
                    Some(w) => (w - 1 + r.batched_tokens).min(r.max_model_len),
                };
                tokens.div_ceil(r.block_size) * page * g.layers
            })
            .sum();
        log.push(LogLine {
            line: format!("Model loading took {:.4} GiB", weights as f64 / GIB as f64),
            rule: "weights term".to_owned(),
        });
        log.push(LogLine {
            line: format!("Available KV cache memory: {} GiB", gib(available)),
            rule: "requested - weights - activation_peak - non_torch (gpu_worker.py v0.10.1)"
                .to_owned(),
        });
        log.push(LogLine {
            line: format!("GPU KV cache size: {} tokens", grouped(tokens)),
            rule: format!(
                "num_blocks = floor(available / page {page} B / {group_size} layers per group); tokens = num_blocks // {} groups x block_size {} (kv_cache_utils.py v0.10.1)",
                groups.len(),
                r.block_size
            ),
        });
        log.push(LogLine {
            line: format!(
                "Maximum concurrency for {} tokens per request: {:.2}x",
                grouped(r.max_model_len),
                concurrency
            ),
            rule: format!(
                "num_blocks / blocks one request needs ({per_request}: ceil(max_model_len / block_size) per full group, ceil(min(window - 1 + max_num_batched_tokens, max_model_len) / block_size) + 1 per sliding group)"
            ),
        });
        if (available_bytes) < needed_bytes {
            refusal = Some(format!(
                "To serve at least one request with the models's max seq len ({}), ({} GiB KV cache is needed, which is larger than the available KV cache memory ({} GiB). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
                r.max_model_len,
                gib(needed_bytes as f64),
                gib(available)
            ));
        }
    } else {
        let per_token: u64 = per_token_per_layer.iter().sum();
        let block_bytes = per_token * r.block_size;
        let num_blocks = if available > 0.0 {
            (available / block_bytes as f64).floor() as u64
        } else {
            0
        };
        blocks = num_blocks;
        tokens = num_blocks * r.block_size;
        kv_bytes = num_blocks * block_bytes;
        let raw = tokens as f64 / r.max_model_len as f64;
        concurrency = (raw * 100.0).round() / 100.0;
        log.push(LogLine {
            line: format!(
                "Loading model weights took {:.4} GB",
                weights as f64 / GIB as f64
            ),
            rule: "weights term (GiB, labelled GB)".to_owned(),
        });
        log.push(LogLine {
            line: format!(
                "Memory profiling results: total_gpu_memory={}GiB peak_torch_memory={}GiB non_torch_memory={}GiB kv_cache_size={}GiB gpu_memory_utilization={:.2}",
                gib(total),
                gib((weights + activation) as f64),
                gib(non_torch as f64),
                gib(available),
                r.utilization
            ),
            rule: "kv_cache_size = total x utilization - peak_torch (weights + activation peak) - non_torch (worker.py v0.6.4)".to_owned(),
        });
        log.push(LogLine {
            line: format!("# GPU blocks: {num_blocks}"),
            rule: format!(
                "floor(kv_cache_size / (block_size {} x {per_token} B per token over every layer))",
                r.block_size
            ),
        });
        log.push(LogLine {
            line: format!(
                "Maximum concurrency for {} tokens per request: {:.2}x",
                r.max_model_len, concurrency
            ),
            rule: "num_gpu_blocks x block_size / max_model_len (executor_base.py v0.6.4)"
                .to_owned(),
        });
        if tokens < r.max_model_len {
            refusal = Some(format!(
                "The model's max seq len ({}) is larger than the maximum number of tokens that can be stored in KV cache ({tokens}). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
                r.max_model_len
            ));
        }
    }
    if let Some(message) = &refusal {
        log.push(LogLine {
            line: format!("ValueError: {message}"),
            rule: "vLLM refuses to start when one request of max_model_len does not fit".to_owned(),
        });
    }
    let mut used = BTreeMap::new();
    used.insert(
        "gpu_memory_utilization".to_owned(),
        r.utilization.to_string(),
    );
    used.insert("max_model_len".to_owned(), r.max_model_len.to_string());
    used.insert(
        "max_num_batched_tokens".to_owned(),
        r.batched_tokens.to_string(),
    );
    used.insert("max_num_seqs".to_owned(), r.max_num_seqs.to_string());
    used.insert("block_size".to_owned(), r.block_size.to_string());
    used.insert("kv_cache_dtype".to_owned(), r.kv_dtype.clone());
    used.insert("dtype".to_owned(), model.dtype_name.clone());
    used.insert("tensor_parallel_size".to_owned(), tp.to_string());
    used.insert("enable_chunked_prefill".to_owned(), r.chunked.to_string());
    let mut flags = vec![
        format!("--max-model-len {}", r.max_model_len),
        format!("--gpu-memory-utilization {}", r.utilization),
        format!("--max-num-seqs {}", r.max_num_seqs),
        format!("--max-num-batched-tokens {}", r.batched_tokens),
        format!("--kv-cache-dtype {}", r.kv_dtype),
        format!("--block-size {}", r.block_size),
    ];
    if tp > 1 {
        flags.push(format!("--tensor-parallel-size {tp}"));
    }
    Ok(EngineReport {
        name: Engine::Vllm.name().to_owned(),
        version: version.to_owned(),
        kv_cache_bytes: kv_bytes,
        kv_cache_tokens: tokens,
        blocks: Some(blocks),
        max_concurrency: concurrency,
        context_tokens: r.max_model_len,
        budget,
        log,
        args: used,
        flags,
        refusal,
    })
}
