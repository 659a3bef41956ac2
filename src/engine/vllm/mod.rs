//! vLLM's memory accounting: `gpu_memory_utilization` of the total the driver reports, less
//! the weights, the activation peak of a profiling run at `max_num_batched_tokens`, and the
//! non-torch memory; the rest is KV cache in blocks of `block_size` tokens.
//!
//! Three versions are modelled (sources in docs/engines.md):
//! * `0.19` (the default; the V1 engine of v0.19.0): the 0.10 rules for defaults, blocks and
//!   groups; the profile run's peak and the non-torch memory as [`activation`] states them;
//!   the CUDA-graph memory is estimated but not subtracted before the KV cache
//!   (`VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS` defaults to 0, `vllm/envs.py`);
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
use super::{add, gib, grouped, mul, Engine, EngineError, GIB};

pub mod activation;
pub mod draft;
pub mod eagle3;
pub mod mxfp4;
pub mod pipeline;
mod weights;

pub use activation::{forward_bytes_per_token, NON_TORCH_BYTES, SAMPLER_BYTES_PER_LOGIT};
use weights::{float32_facts, weights_term};

/// The modelled versions, the default first.
pub const VERSIONS: [&str; 3] = ["0.19", "0.10", "0.6"];

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
        default: "0.19 and 0.10: 2048, 8192 on >= 70 GiB non-A100 devices; 0.6: max(max_model_len, 2048), 2048 with chunked prefill",
    },
    KnownArg {
        key: "max_num_seqs",
        kind: ArgKind::Count,
        default: "256 (0.19 and 0.10: 1024 on >= 70 GiB non-A100 devices)",
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
        kind: ArgKind::Word(&["auto", "float16", "half", "bfloat16", "float32", "float"]),
        default: "auto (the checkpoint's dtype); 0.19: float32 (float) loads a 16-bit checkpoint in float32",
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
        key: "pipeline_parallel_size",
        kind: ArgKind::Count,
        default: "1 (0.19 and 0.10: each stage holds its share of the decoder layers)",
    },
    KnownArg {
        key: "enable_chunked_prefill",
        kind: ArgKind::Flag,
        default: "0.19 and 0.10: true; 0.6: true only when max_model_len > 32768",
    },
    KnownArg {
        key: "speculative_config",
        kind: ArgKind::SpeculativeConfig(&["deepseek_mtp", "mtp", "eagle", "eagle3", "draft_model"]),
        default: "none; {\"method\":\"deepseek_mtp\",\"num_speculative_tokens\":N} loads the checkpoint's multi-token-prediction layers (their weights and KV cache come from the synthesized request: --speculative mtp); {\"method\":\"eagle\"|\"eagle3\"|\"draft_model\",\"model\":PATH} loads a drafter whose config.json is at PATH (a file, or a folder holding one such as models/<name>): its weights, KV layers and profile-run activation are added (0.10 and 0.19)",
    },
];

/// Whether vLLM takes the larger defaults on this device (`arg_utils.py`, v0.10.1 and
/// v0.19.0: `device_memory >= 70 GiB and "a100" not in device_name`).
fn large_device(device: &DeviceFacts) -> bool {
    device.total_bytes >= 70 * GIB && !device.name.to_lowercase().contains("a100")
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
    pp: u64,
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
    let pp = args.count("pipeline_parallel_size").unwrap_or(1);
    Ok(Resolved {
        utilization,
        max_model_len,
        batched_tokens,
        max_num_seqs,
        block_size,
        kv_dtype,
        kv_element_bytes,
        tp,
        pp,
        chunked,
    })
}

/// A KV cache group: layers of one attention kind sharing a block table.
struct Group {
    layers: u64,
    window: Option<u64>,
    block_size: u64,
}

/// vLLM's KV cache groups (`vllm/v1/core/kv_cache_utils.py`,
/// `_get_kv_cache_groups_uniform_page_size`): each attention kind's layers are split into
/// groups of `group_size` layers, the smallest kind's layer count; v0.19.0 takes the
/// largest's instead when it is under 1.5 times the smallest (its comment: gpt-oss-20b with
/// an EAGLE head, 12 sliding + 13 full layers, padded to 13 + 13), v0.10.1 never does.
fn groups(version: &str, layers: &[CacheLayer], block_size: u64) -> (u64, Vec<Group>) {
    let mut kinds: BTreeMap<Option<u64>, u64> = BTreeMap::new();
    for layer in layers {
        match layer {
            CacheLayer::Full { .. } => *kinds.entry(None).or_default() += 1,
            CacheLayer::Sliding { window, .. } => *kinds.entry(Some(*window)).or_default() += 1,
            CacheLayer::Recurrent { .. } => {}
        }
    }
    let min = kinds.values().copied().min().unwrap_or(1).max(1);
    let max = kinds.values().copied().max().unwrap_or(1);
    let near = version != "0.10" && (max as f64) < (min as f64) * 1.5;
    let group_size = if kinds.len() == 1 || near { max } else { min };
    let mut out = Vec::new();
    for (window, count) in kinds {
        for g in 0..count.div_ceil(group_size) {
            out.push(Group {
                layers: group_size.min(count - g * group_size),
                window,
                block_size,
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
    let float32;
    let model = match args.word("dtype") {
        Some(word @ ("float32" | "float")) => {
            float32 = float32_facts(version, word, model)?;
            &float32
        }
        _ => model,
    };
    let v1 = version != "0.6";
    if model.has_recurrent_layers() {
        return Err(EngineError::Unsupported {
            engine: Engine::Vllm,
            feature: "a hybrid model with recurrent (linear-attention) layers (vLLM unifies their state pages with the attention pages)".to_owned(),
        });
    }
    if matches!(
        args.speculative_method().as_deref(),
        Some("eagle" | "eagle3" | "draft_model")
    ) && model.draft.is_none()
    {
        return Err(EngineError::Facts {
            what: "speculative_config names a drafter, but the model's facts carry none (study::engine_facts::engine_report reads it from speculative_config.model)".to_owned(),
        });
    }
    let r = resolve(v1, model, device, args)?;
    let ranges = if r.pp > 1 {
        let ranges = pipeline::layer_ranges(model.layers.len() as u64, r.pp)?;
        pipeline::check(version, model, args.word("speculative_config").is_some())?;
        Some(ranges)
    } else {
        None
    };
    let (source, tag) = match version {
        "0.19" => (
            "vLLM v0.19.0 vllm/v1/worker/gpu_worker.py determine_available_memory",
            "v0.19.0",
        ),
        "0.6" => (
            "vLLM v0.6.4 vllm/worker/worker.py determine_num_available_blocks",
            "v0.6.4",
        ),
        _ => (
            "vLLM v0.10.1 vllm/v1/worker/gpu_worker.py determine_available_memory",
            "v0.10.1",
        ),
    };
    let total = device.total_bytes as f64;
    let requested = total * r.utilization;
    let tp = r.tp.max(1);
    let rope = mul(
        mul(model.trained_context, model.rotary_dim, "rotary cache")?,
        mul(
            model.rotary_dtype_bytes,
            model.rotary_caches,
            "rotary cache",
        )?,
        "rotary cache",
    )?;
    let (mut weights, mut experts_rule, mxfp4_backend) =
        weights_term(version, model, device, tp, rope)?;
    if let Some(d) = &model.draft {
        draft::check(version, model, d, tp)?;
    }
    // vLLM v0.19.0's MXFP4 TRITON and FlashInfer TRT-LLM experts are monolithic kernels,
    // which hold no fused-MoE workspaces (`oracle/mxfp4.py` `backend_to_kernel_cls` prefers
    // their Monolithic classes).
    let moe_workspaces = !matches!(
        mxfp4_backend,
        Some(mxfp4::Backend::Triton | mxfp4::Backend::FlashInferTrtllm)
    );
    let peak = activation::peak(
        version,
        model,
        tp,
        r.batched_tokens,
        r.max_num_seqs,
        moe_workspaces,
    )?;
    let (mut activation, mut activation_rule) = (peak.bytes, peak.rule.clone());
    // A speculative drafter: its weights, its forward in the profile run and its buffers;
    // its KV layers join the model's below.
    let mut layers = model.layers.clone();
    if let Some(d) = &model.draft {
        let terms = draft::terms(
            version,
            model,
            d,
            tp,
            &peak,
            r.batched_tokens,
            r.max_num_seqs,
        )?;
        weights = super::add(weights, terms.weights, "weights")?;
        experts_rule.push_str(&terms.weights_rule);
        activation = terms.activation;
        activation_rule.push_str(&terms.activation_rule);
        layers.extend(d.model.layers.iter().copied());
    }
    let (non_torch, non_torch_rule) = activation::non_torch(version, tp);
    let non_torch_rule = if r.pp > 1 {
        format!("{non_torch_rule}; taken for every pipeline stage as for a rank without stages (the logs of stage 0 show less, docs/engines.md, \"Pipeline parallelism\")")
    } else {
        non_torch_rule.to_owned()
    };
    // Pipeline stages: the report is stage 0's (what vLLM's `Worker_PP0` logs), the blocks
    // the smallest stage's.
    let stages = match &ranges {
        Some(ranges) => {
            let stages = pipeline::stages(
                model,
                ranges,
                tp,
                rope,
                peak.forward,
                peak.sampler,
                r.batched_tokens,
            )?;
            weights = stages[0].weights;
            activation = stages[0].activation;
            experts_rule = format!(
                " of stage 0 of {} (decoder layers {}..{} of {}, vLLM's get_pp_indices; the token embedding)",
                r.pp,
                stages[0].start,
                stages[0].end,
                model.layers.len()
            );
            activation_rule = format!(
                "stage 0 of {}: the forward pass only (the sampler runs on the last stage): {} B; {activation_rule}",
                r.pp, peak.forward
            );
            stages
        }
        None => Vec::new(),
    };
    let available = requested - weights as f64 - activation as f64 - non_torch as f64;
    let per_token_per_layer: Vec<u64> = layers
        .iter()
        .map(|l| {
            mul(
                l.elements_per_token_per_rank(tp),
                r.kv_element_bytes,
                "KV bytes per token of a layer",
            )
        })
        .collect::<Result<_, _>>()?;
    // A drafter whose layers differ in size from the model's: vLLM v0.19.0's layout of
    // them (`draft::kv_layout`).
    let layout = match &model.draft {
        Some(_) if v1 => draft::kv_layout(&layers, tp, r.kv_element_bytes, r.block_size)?,
        _ => None,
    };
    let page = match &layout {
        Some(l) => l.page,
        None => mul(
            per_token_per_layer.iter().copied().max().unwrap_or(0),
            r.block_size,
            "KV page bytes (block_size tokens of a layer)",
        )?,
    };
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
                "parameters{}{experts_rule} + rotary cos/sin cache max_position x rotary_dim x {} B ({rope} B): what `Model loading took` measures",
                if tp > 1 { format!(" / tensor_parallel_size {tp}") } else { String::new() },
                model.rotary_dtype_bytes
            ),
        },
        BudgetTerm {
            name: "activation_peak".to_owned(),
            bytes: activation,
            rule: activation_rule,
        },
        BudgetTerm {
            name: "non_torch".to_owned(),
            bytes: non_torch,
            rule: non_torch_rule,
        },
        BudgetTerm {
            name: "cuda_graph".to_owned(),
            bytes: 0,
            rule: if version == "0.19" {
                "0: vLLM v0.19.0 estimates the CUDA graphs' memory and logs it, but subtracts it only when VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 (default 0, vllm/envs.py); the graphs are captured after the KV cache, in the 1 - gpu_memory_utilization headroom".to_owned()
            } else {
                format!(
                    "0: vLLM {version} captures CUDA graphs after the KV cache is allocated, outside this budget"
                )
            },
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
        let (group_size, groups) = match &layout {
            Some(l) => (
                l.group_size,
                l.groups
                    .iter()
                    .map(|g| Group {
                        layers: g.layers,
                        window: g.window,
                        block_size: g.block_size,
                    })
                    .collect(),
            ),
            None => groups(version, &layers, r.block_size),
        };
        let blocks_of = |available: f64, layers: u64| {
            if available > 0.0 {
                (available / page as f64 / layers.max(1) as f64).floor() as u64
            } else {
                0
            }
        };
        // Each stage: its available memory, the layers of its largest group, its blocks;
        // the engine takes the smallest block count (`get_kv_cache_configs`).
        let stage_blocks: Vec<(f64, u64, u64)> = match &ranges {
            Some(ranges) => pipeline::stage_group_sizes(&layers, group_size, ranges)
                .into_iter()
                .zip(&stages)
                .map(|(layers, stage)| {
                    let available = requested
                        - stage.weights as f64
                        - stage.activation as f64
                        - non_torch as f64;
                    (available, layers, blocks_of(available, layers))
                })
                .collect(),
            None => Vec::new(),
        };
        let num_blocks = match stage_blocks.iter().map(|s| s.2).min() {
            Some(least) => least,
            None => blocks_of(available, group_size),
        };
        let allocated_layers = stage_blocks.first().map_or(group_size, |s| s.1);
        tokens = num_blocks / groups.len().max(1) as u64 * r.block_size;
        let per_request: u64 = groups
            .iter()
            .map(|g| match g.window {
                None => r.max_model_len.div_ceil(g.block_size),
                Some(w) => {
                    let needed = w
                        .saturating_sub(1)
                        .saturating_add(r.batched_tokens)
                        .min(r.max_model_len);
                    needed.div_ceil(g.block_size).saturating_add(1)
                }
            })
            .fold(0u64, u64::saturating_add);
        let raw = num_blocks as f64 / per_request.max(1) as f64;
        concurrency = (raw * 100.0).round() / 100.0;
        blocks = num_blocks;
        kv_bytes = mul(
            mul(num_blocks, page, "KV cache bytes")?,
            allocated_layers,
            "KV cache bytes",
        )?;
        let mut needed_bytes: u64 = 0;
        for g in &groups {
            let tokens = match g.window {
                None => r.max_model_len,
                Some(w) => w
                    .saturating_sub(1)
                    .saturating_add(r.batched_tokens)
                    .min(r.max_model_len),
            };
            let group = mul(
                mul(
                    tokens.div_ceil(g.block_size),
                    page,
                    "KV bytes one request needs",
                )?,
                g.layers,
                "KV bytes one request needs",
            )?;
            needed_bytes = add(needed_bytes, group, "KV bytes one request needs")?;
        }
        // With stages, each must hold one request of its own layers
        // (`_check_enough_kv_cache_memory` per worker): the first that cannot is reported.
        let mut short_available = available;
        let mut stage_needs = Vec::with_capacity(stage_blocks.len());
        for &(stage_available, layers, _) in &stage_blocks {
            let needs = mul(
                mul(layers, page, "KV bytes one request needs on a stage")?,
                per_request,
                "KV bytes one request needs on a stage",
            )?;
            stage_needs.push((stage_available, needs));
        }
        if let Some(&(stage_available, needs)) = stage_needs
            .iter()
            .find(|(a, needs)| *a < *needs as f64)
            .or(stage_needs.first())
        {
            needed_bytes = needs;
            short_available = stage_available;
        }
        if version == "0.19" {
            if let Some(backend) = mxfp4_backend {
                log.push(LogLine {
                    line: format!("Using '{}' Mxfp4 MoE backend.", backend.name()),
                    rule: "vllm/model_executor/layers/fused_moe/oracle/mxfp4.py select_mxfp4_moe_backend (v0.19.0), by compute capability".to_owned(),
                });
            }
            log.push(LogLine {
                line: format!("Model loading took {} GiB memory", gib(weights as f64)),
                rule: "weights term".to_owned(),
            });
            log.push(LogLine {
                line: format!(
                    "Total non KV cache memory: {}GiB; torch peak memory increase: {}GiB; non-torch forward increase memory: {}GiB; weights memory: {}GiB.",
                    gib((weights + activation + non_torch) as f64),
                    gib(activation as f64),
                    gib(non_torch as f64),
                    gib(weights as f64)
                ),
                rule: "weights + activation_peak + non_torch (vllm/utils/mem_utils.py memory_profiling, v0.19.0; logged at DEBUG)".to_owned(),
            });
        } else {
            log.push(LogLine {
                line: format!("Model loading took {:.4} GiB", weights as f64 / GIB as f64),
                rule: "weights term".to_owned(),
            });
        }
        log.push(LogLine {
            line: format!("Available KV cache memory: {} GiB", gib(available)),
            rule: format!(
                "requested - weights - activation_peak - non_torch (gpu_worker.py {tag})"
            ),
        });
        for (s, (stage, (available, layers, blocks))) in
            stages.iter().zip(&stage_blocks).enumerate()
        {
            log.push(LogLine {
                line: format!(
                    "Stage {s} of {} (decoder layers {}..{}): weights {} GiB, peak activation {} GiB, available KV cache memory {} GiB, {blocks} blocks of {layers} layers",
                    r.pp,
                    stage.start,
                    stage.end,
                    gib(stage.weights as f64),
                    gib(stage.activation as f64),
                    gib(*available)
                ),
                rule: "not a vLLM line: each stage's own layers (get_pp_indices), embedding on the first stage, final norm and lm_head on the last, sampler on the last, intermediate tensors (2 x max_num_batched_tokens x hidden) on all but the first; blocks = floor(available / page / its layers of the largest group) (kv_cache_utils.py get_kv_cache_configs, v0.19.0)".to_owned(),
            });
        }
        log.push(LogLine {
            line: format!("GPU KV cache size: {} tokens", grouped(tokens)),
            rule: match &layout {
                Some(l) => l.rule.clone(),
                None if !stage_blocks.is_empty() => format!(
                    "num_blocks = the smallest of the {} stages' blocks (get_kv_cache_configs: every worker takes the smallest); tokens = num_blocks // {} groups x block_size {} (kv_cache_utils.py {tag})",
                    r.pp,
                    groups.len(),
                    r.block_size
                ),
                None => format!(
                    "num_blocks = floor(available / page {page} B / {group_size} layers per group); tokens = num_blocks // {} groups x block_size {} (kv_cache_utils.py {tag})",
                    groups.len(),
                    r.block_size
                ),
            },
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
        if short_available < needed_bytes as f64 {
            refusal = Some(format!(
                "To serve at least one request with the models's max seq len ({}), ({} GiB KV cache is needed, which is larger than the available KV cache memory ({} GiB). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
                r.max_model_len,
                gib(needed_bytes as f64),
                gib(short_available)
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
    if r.pp > 1 {
        used.insert("pipeline_parallel_size".to_owned(), r.pp.to_string());
    }
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
    if r.pp > 1 {
        flags.push(format!("--pipeline-parallel-size {}", r.pp));
    }
    if model.dtype_bytes == 4 {
        flags.push(format!("--dtype {}", model.dtype_name));
    }
    // The multi-token-prediction layers' weights and KV cache are the request's own (it
    // was synthesized with them); the flag that makes vLLM load them is echoed.
    if let Some(config) = args.word("speculative_config") {
        used.insert("speculative_config".to_owned(), config.to_owned());
        flags.push(format!("--speculative-config '{config}'"));
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
