//! llama.cpp's memory accounting (b5000-era `llama-server`; `src/llama-model.cpp`
//! `load_tensors`, `src/llama-kv-cache-unified.cpp`, `src/llama-context.cpp`,
//! `common/common.h`): the model buffer holds the offloaded tensors (the token embedding
//! stays on the host), the KV buffer `n_ctx` cells of every offloaded layer's K and V in
//! `cache_type_k` / `cache_type_v`, sliding layers `min(n_ctx, window + n_ubatch)` cells, and
//! the compute buffer the graph of one micro-batch of `n_ubatch` tokens.

use std::collections::BTreeMap;

use super::args::{ArgKind, EngineArgs, KnownArg};
use super::facts::{CacheLayer, DeviceFacts, ModelFacts};
use super::report::{BudgetTerm, EngineReport, LogLine};
use super::{mul, Engine, EngineError, MIB};

/// The modelled version.
pub const VERSION: &str = "b5000";

const CACHE_TYPES: &[&str] = &["f16", "bf16", "f32", "q8_0", "q4_0"];

/// llama.cpp's arguments that change its memory.
pub const ARGS: &[KnownArg] = &[
    KnownArg {
        key: "ctx_size",
        kind: ArgKind::CountOrZero,
        default: "4096 (0: the model's training context)",
    },
    KnownArg {
        key: "n_gpu_layers",
        kind: ArgKind::CountOrZero,
        default: "every layer (as -ngl 999)",
    },
    KnownArg {
        key: "cache_type_k",
        kind: ArgKind::Word(CACHE_TYPES),
        default: "f16",
    },
    KnownArg {
        key: "cache_type_v",
        kind: ArgKind::Word(CACHE_TYPES),
        default: "f16",
    },
    KnownArg {
        key: "ubatch_size",
        kind: ArgKind::Count,
        default: "512",
    },
    KnownArg {
        key: "flash_attn",
        kind: ArgKind::Flag,
        default: "false",
    },
    KnownArg {
        key: "parallel",
        kind: ArgKind::Count,
        default: "1",
    },
];

/// Bytes of `n` cache elements of `kind` (`q8_0`: 34 bytes per 32, `q4_0`: 18 per 32, as
/// ggml's block types; `ggml/src/ggml.c` type traits).
fn cache_bytes(kind: &str, n: u64) -> u64 {
    match kind {
        "f32" => n * 4,
        "q8_0" => n.div_ceil(32) * 34,
        "q4_0" => n.div_ceil(32) * 18,
        _ => n * 2,
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.2}", bytes as f64 / MIB as f64)
}

/// The accounting of llama.cpp.
pub fn account(
    model: &ModelFacts,
    device: &DeviceFacts,
    args: &EngineArgs,
) -> Result<EngineReport, EngineError> {
    let layers = model.layers.len() as u64;
    let requested = match args.count("ctx_size") {
        Some(0) => model.trained_context,
        Some(n) => n,
        None => 4096,
    };
    let n_ctx = requested.div_ceil(256) * 256;
    let ngl = args.count("n_gpu_layers").unwrap_or(999).min(layers + 1);
    let offloaded = ngl.min(layers);
    let k_type = args.word("cache_type_k").unwrap_or("f16").to_owned();
    let v_type = args.word("cache_type_v").unwrap_or("f16").to_owned();
    let ubatch = args.count("ubatch_size").unwrap_or(512);
    let flash = args.word("flash_attn") == Some("true");
    let parallel = args.count("parallel").unwrap_or(1);
    let mut k_bytes = 0u64;
    let mut v_bytes = 0u64;
    for layer in model.layers.iter().take(offloaded as usize) {
        let (elements, cells) = match *layer {
            CacheLayer::Full {
                elements_per_token, ..
            } => (elements_per_token, n_ctx),
            CacheLayer::Sliding {
                elements_per_token,
                window,
                ..
            } => (
                elements_per_token,
                n_ctx.min((window * parallel + ubatch).div_ceil(256) * 256),
            ),
            CacheLayer::Recurrent { state_bytes } => {
                k_bytes = k_bytes.saturating_add(state_bytes.saturating_mul(parallel));
                continue;
            }
        };
        let half = mul(elements / 2, cells, "KV elements")?;
        k_bytes = k_bytes.saturating_add(cache_bytes(&k_type, half));
        v_bytes = v_bytes.saturating_add(cache_bytes(&v_type, half));
    }
    let kv = k_bytes.saturating_add(v_bytes);
    let per_layer = model.weights_bytes.saturating_sub(model.embedding_bytes) / layers.max(1);
    let host_embedding = model.embedding_bytes;
    let model_buffer = if ngl > layers {
        model.weights_bytes.saturating_sub(host_embedding)
    } else {
        per_layer * offloaded
    };
    let attention_scores = if flash { 0 } else { n_ctx * model.query_heads };
    let compute = mul(
        mul(ubatch, 4, "compute buffer")?,
        model
            .vocab_size
            .max(attention_scores + model.hidden_size + 2 * model.intermediate_size),
        "compute buffer",
    )?;
    let budget = vec![
        BudgetTerm {
            name: "model_buffer".to_owned(),
            bytes: model_buffer,
            rule: format!(
                "the tensors of {offloaded} offloaded layers{} (token embedding on the host)",
                if ngl > layers { " and the output layer" } else { "" }
            ),
        },
        BudgetTerm {
            name: "kv_buffer".to_owned(),
            bytes: kv,
            rule: format!(
                "n_ctx {n_ctx} cells (ctx_size {requested} padded to 256) x K+V elements per layer, K {k_type}, V {v_type}; sliding layers min(n_ctx, window x parallel + n_ubatch)"
            ),
        },
        BudgetTerm {
            name: "compute_buffer".to_owned(),
            bytes: compute,
            rule: format!(
                "n_ubatch {ubatch} x 4 B x max(vocab, {}hidden + 2 x intermediate): the graph's largest f32 tensors (an estimate, docs/engines.md)",
                if flash { "" } else { "n_ctx x heads + " }
            ),
        },
    ];
    let total_gpu = model_buffer.saturating_add(kv).saturating_add(compute);
    let log = vec![
        LogLine {
            line: format!("load_tensors: CUDA0 model buffer size = {} MiB", mib(model_buffer)),
            rule: "model_buffer".to_owned(),
        },
        LogLine {
            line: format!(
                "llama_kv_cache_unified: CUDA0 KV buffer size = {} MiB",
                mib(kv)
            ),
            rule: "kv_buffer".to_owned(),
        },
        LogLine {
            line: format!(
                "llama_kv_cache_unified: size = {} MiB ({n_ctx} cells, {offloaded} layers, {parallel} seqs), K ({k_type}): {} MiB, V ({v_type}): {} MiB",
                mib(kv),
                mib(k_bytes),
                mib(v_bytes)
            ),
            rule: "kv_buffer split into K and V".to_owned(),
        },
        LogLine {
            line: format!("llama_context: CUDA0 compute buffer size = {} MiB", mib(compute)),
            rule: "compute_buffer".to_owned(),
        },
    ];
    let refusal = (total_gpu > device.total_bytes).then(|| {
        format!(
            "cudaMalloc failed: the model, KV and compute buffers take {} MiB of the device's {} MiB; lower n_gpu_layers or ctx_size",
            mib(total_gpu),
            mib(device.total_bytes)
        )
    });
    let mut used = BTreeMap::new();
    used.insert("ctx_size".to_owned(), n_ctx.to_string());
    used.insert("n_gpu_layers".to_owned(), ngl.to_string());
    used.insert("cache_type_k".to_owned(), k_type.clone());
    used.insert("cache_type_v".to_owned(), v_type.clone());
    used.insert("ubatch_size".to_owned(), ubatch.to_string());
    used.insert("flash_attn".to_owned(), flash.to_string());
    used.insert("parallel".to_owned(), parallel.to_string());
    let mut flags = vec![
        format!("-c {n_ctx}"),
        format!("-ngl {ngl}"),
        format!("-ctk {k_type}"),
        format!("-ctv {v_type}"),
        format!("-ub {ubatch}"),
        format!("-np {parallel}"),
    ];
    if flash {
        flags.push("-fa".to_owned());
    }
    Ok(EngineReport {
        name: Engine::LlamaCpp.name().to_owned(),
        version: VERSION.to_owned(),
        kv_cache_bytes: kv,
        kv_cache_tokens: n_ctx,
        blocks: None,
        max_concurrency: parallel as f64,
        context_tokens: n_ctx,
        budget,
        log,
        args: used,
        flags,
        refusal,
    })
}
