//! The wiring between a synthesized request and the engines' accounting
//! ([`crate::engine`]): the plain numbers an engine needs, read from the request's model
//! configuration (its family's canonical config, re-derived into the architecture the
//! synthesizer built) and weight schema, and from the device file.

use crate::engine::{
    self, CacheLayer, DeviceFacts, EngineArgs, EngineChoice, EngineReport, ModelFacts, MoeFacts,
    Mxfp4Experts,
};
use crate::request::PlanRequest;
use crate::synth::architecture::{FeedForwardKind, MixerKind};
use crate::synth::kv_cache::KvCacheDtype;
use crate::synth::quantization::MXFP4_FORMAT_ID;
use crate::synth::{
    registry, DeviceDescription, ModelConfig, ModelSource, PolicyPreset, SynthError,
};

use super::StudyError;

/// The key each engine spells its context limit with.
/// The argument (as the engine spells it) that sets the longest request the engine serves:
/// `max_model_len`, `context_length`, `max_seq_len`, `ctx_size`.
pub fn context_key(choice: &EngineChoice) -> &'static str {
    match choice.engine {
        engine::Engine::Vllm => "max_model_len",
        engine::Engine::Sglang => "context_length",
        engine::Engine::Trtllm => "max_seq_len",
        engine::Engine::LlamaCpp => "ctx_size",
    }
}

/// The model's facts as an engine sees them, from a synthesized request: the parameters'
/// bytes are the weight schema's components (the format the request was synthesized in),
/// the shapes and cache layers those of the architecture its configuration specifies.
pub fn model_facts(request: &PlanRequest) -> Result<ModelFacts, StudyError> {
    let config: ModelConfig = serde_json::from_value(request.family.canonical_config.clone())
        .map_err(|e| {
            StudyError::Synth(SynthError::config(
                "family.canonical_config",
                format!("is not a model configuration: {e}"),
            ))
        })?;
    let arch = registry::entry_of(&config)?.specialize(&config, config.architecture()?)?;
    let mut weights_bytes = 0u64;
    let mut embedding_bytes = 0u64;
    // The routed experts' components (`weight.layer.N.experts.E...`): their bytes, whether
    // any is MXFP4, whether they have biases.
    let (mut expert_bytes, mut expert_mxfp4, mut expert_bias) = (0u64, false, false);
    // Where each component sits, for an engine that splits the model into pipeline stages:
    // a decoder layer (`model.layers.N.`), the final norm, the head; the embedding above.
    let mut layer_weights_bytes = vec![0u64; arch.layers.len()];
    let (mut head_bytes, mut final_norm_bytes) = (0u64, 0u64);
    let mut quantization = None;
    let overflow = |what: &str| StudyError::Overflow {
        what: what.to_owned(),
    };
    for component in &request.family.weight_schema.components {
        let bytes = component
            .physical_bytes()
            .ok_or_else(|| StudyError::Overflow {
                what: format!("bytes of weight component {}", component.id),
            })?;
        weights_bytes = weights_bytes
            .checked_add(bytes)
            .ok_or_else(|| StudyError::Overflow {
                what: "weights bytes".to_owned(),
            })?;
        let id = component.id.as_str();
        if id.contains(".experts.") {
            expert_bytes += bytes;
            expert_bias |= id.ends_with(".bias:values");
            expert_mxfp4 |= component
                .encoding
                .quantization_format()
                .is_some_and(|f| f.as_str() == MXFP4_FORMAT_ID);
        }
        if quantization.is_none() {
            quantization = component
                .encoding
                .quantization_format()
                .map(|f| f.as_str().to_owned());
        }
        let names = &component.external_names;
        if names.iter().any(|n| n.starts_with("model.embed_tokens")) {
            embedding_bytes += bytes;
        } else if names.iter().any(|n| n.starts_with("lm_head")) {
            head_bytes = head_bytes
                .checked_add(bytes)
                .ok_or_else(|| overflow("head bytes"))?;
        } else if names.iter().any(|n| n.starts_with("model.norm")) {
            final_norm_bytes = final_norm_bytes
                .checked_add(bytes)
                .ok_or_else(|| overflow("final norm bytes"))?;
        } else if let Some(layer) = names.iter().find_map(|n| decoder_layer_of(n)) {
            // A layer beyond the decoder's (multi-token-prediction layers) is left out:
            // the bytes then do not add up, which pipeline parallelism refuses.
            if let Some(slot) = layer_weights_bytes.get_mut(layer) {
                *slot = slot
                    .checked_add(bytes)
                    .ok_or_else(|| overflow("layer bytes"))?;
            }
        }
    }
    let a = arch.attention;
    // The multi-token-prediction layers' caches too, when the request built them.
    let layers = arch
        .cache_layers()
        .map(|layer| match (layer.mixer, layer.window) {
            (MixerKind::Attention, None) => CacheLayer::Full {
                elements_per_token: 2 * a.key_value_heads * a.head_dim,
                heads: a.key_value_heads,
            },
            (MixerKind::Attention, Some(window)) => CacheLayer::Sliding {
                elements_per_token: 2 * a.key_value_heads * a.head_dim,
                heads: a.key_value_heads,
                window,
            },
            (MixerKind::LatentAttention, _) => {
                let latent = arch
                    .latent
                    .map_or(0, |l| l.kv_lora_rank + l.qk_rope_head_dim);
                CacheLayer::Full {
                    elements_per_token: latent,
                    heads: 1,
                }
            }
            (MixerKind::GatedDelta, _) => {
                let state = arch.gated_delta.map_or(0, |d| {
                    2 * (d.value_heads * d.key_head_dim * d.value_head_dim
                        + d.conv_features() * d.conv_kernel.saturating_sub(1))
                });
                CacheLayer::Recurrent { state_bytes: state }
            }
        })
        .collect();
    let moe = arch.experts.map(|e| MoeFacts {
        experts: e.routed_experts,
        experts_per_token: e.experts_per_token,
        expert_intermediate_size: e.expert_intermediate_size,
        shared_intermediate_size: e.shared_intermediate_size,
    });
    let mxfp4_experts = match arch.experts {
        Some(e) if expert_mxfp4 => Some(Mxfp4Experts {
            layers: arch
                .layers
                .iter()
                .filter(|l| l.feed_forward == FeedForwardKind::Routed)
                .count() as u64,
            experts: e.routed_experts,
            hidden_size: arch.hidden_size,
            intermediate_size: e.expert_intermediate_size,
            bias: expert_bias,
            stored_bytes: expert_bytes,
        }),
        _ => None,
    };
    let rotary_caches = if config.model_type.as_deref() == Some("gemma3_text") {
        2
    } else {
        1
    };
    Ok(ModelFacts {
        weights_bytes,
        embedding_bytes,
        dtype_bytes: 2,
        dtype_name: arch
            .torch_dtype
            .clone()
            .unwrap_or_else(|| "float16".to_owned()),
        hidden_size: arch.hidden_size,
        intermediate_size: arch.intermediate_size,
        has_dense_mlp: arch
            .layers
            .iter()
            .any(|l| l.feed_forward == FeedForwardKind::Dense),
        moe,
        query_heads: a.query_heads,
        kv_heads: a.key_value_heads,
        head_dim: a.head_dim,
        rotary_dim: a.rope_dim,
        rotary_caches,
        // vLLM's gpt_oss.py builds its rotary cache in float32 (v0.19.0).
        rotary_dtype_bytes: if config.model_type.as_deref() == Some("gpt_oss") {
            4
        } else {
            2
        },
        mxfp4_experts,
        vocab_size: arch.vocab_size,
        // The engines derive it as the synthesizer does (vLLM's `_get_and_verify_max_len`).
        trained_context: arch.trained_context,
        latent_attention: arch.latent.is_some(),
        layers,
        draft: None,
        layer_weights_bytes,
        head_bytes,
        final_norm_bytes,
        tied_embeddings: arch.tie_word_embeddings,
        quantization,
    })
}

/// The decoder layer a checkpoint tensor name belongs to (`model.layers.7.mlp...` -> 7).
fn decoder_layer_of(name: &str) -> Option<usize> {
    let rest = name.strip_prefix("model.layers.")?;
    rest.split('.').next()?.parse().ok()
}

/// The drafter a vLLM `speculative_config` names (method `eagle` or `draft_model`), read
/// from the configuration at its `model` key (a `config.json`, or a folder holding one such
/// as a shipped `models/<name>`), synthesized on `device` in the format of its own
/// `quantization_config` (else 16-bit, the model's dtype): an EAGLE head adds its decoder
/// layers (without layer 0's input norm, which vLLM's `llama_eagle.py` deletes) and its `fc`
/// (`2h x h`, no bias) and shares the model's embedding and head; a draft model adds all its
/// parameters. A draft whose vocabulary differs from the model's is refused, as vLLM refuses
/// it.
fn draft_facts(
    model: &ModelFacts,
    method: &str,
    args: &EngineArgs,
    device: &DeviceDescription,
    policy: &PolicyPreset,
) -> Result<engine::DraftFacts, StudyError> {
    let key = "--engine-arg speculative_config.model".to_owned();
    let settings = |message: String| StudyError::Settings {
        path: key.clone(),
        message,
    };
    let given = args
        .speculative_model()
        .ok_or_else(|| settings(format!("method {method} needs the draft's configuration")))?;
    let path = std::path::PathBuf::from(&given);
    let file = if path.is_dir() {
        path.join("config.json")
    } else {
        path
    };
    if !file.is_file() {
        return Err(settings(format!(
            "{given}: no draft configuration there; give the draft's config.json (a file, or a folder holding one such as models/<name>): a Hugging Face id is not fetched, download its config.json"
        )));
    }
    let mut config = ModelConfig::read(&file)?;
    if method == "eagle3" {
        super::engine_draft::eagle3_llama_head(&mut config, &given)?;
    }
    let options =
        crate::synth::SynthOptions::new("speculative-draft").with_config_quantization(&config)?;
    let draft_request = crate::synth::synthesize(&config, device, policy, &options)?;
    let mut draft = model_facts(&draft_request)?;
    draft.dtype_bytes = model.dtype_bytes;
    if draft.vocab_size != model.vocab_size && method == "draft_model" {
        return Err(settings(format!(
            "{given}: the draft's vocabulary ({}) is not the model's ({}); vLLM refuses such a drafter (\"Target and draft model should have the same vocabulary size\", vllm/config/speculative.py verify_equal_vocab_size_if_draft_model)",
            draft.vocab_size, model.vocab_size
        )));
    }
    if draft.vocab_size != model.vocab_size && method == "eagle" {
        return Err(settings(format!(
            "{given}: the EAGLE head's vocabulary ({}) is not the model's ({}): a head that keeps its own embedding is not modelled (vLLM shares the model's embedding and head with a head of the model's vocabulary)",
            draft.vocab_size, model.vocab_size
        )));
    }
    let eagle3 = if method == "eagle3" {
        Some(super::engine_draft::eagle3_head(&config, &draft, &given)?)
    } else {
        None
    };
    let (weights_bytes, weights_rule) = if let Some(head) = &eagle3 {
        let w = engine::vllm_eagle3::weights("0.19", head, model.dtype_bytes, 1)?;
        (w.bytes, w.rule)
    } else if method == "eagle" {
        let mut layers = 0u64;
        for component in &draft_request.family.weight_schema.components {
            let in_layers = component.external_names.iter().any(|n| {
                n.starts_with("model.layers.") && !n.starts_with("model.layers.0.input_layernorm")
            });
            if in_layers {
                let bytes = component
                    .physical_bytes()
                    .ok_or_else(|| StudyError::Overflow {
                        what: format!("bytes of draft weight component {}", component.id),
                    })?;
                layers = layers
                    .checked_add(bytes)
                    .ok_or_else(|| StudyError::Overflow {
                        what: "draft weights".to_owned(),
                    })?;
            }
        }
        let overflow = || StudyError::Overflow {
            what: "draft weights".to_owned(),
        };
        let fc = draft
            .hidden_size
            .checked_mul(draft.hidden_size)
            .and_then(|b| b.checked_mul(2 * model.dtype_bytes))
            .ok_or_else(overflow)?;
        (
            layers.checked_add(fc).ok_or_else(overflow)?,
            format!(
                "an EAGLE head: its decoder layers ({layers} B, without layer 0's input norm) + fc 2 x {h} x {h} x {} B ({fc} B); the embedding and head are the model's (vllm/model_executor/models/llama_eagle.py, vllm/v1/spec_decode/eagle.py load_model)",
                model.dtype_bytes,
                h = draft.hidden_size
            ),
        )
    } else {
        (
            draft.weights_bytes,
            "a draft model: all its parameters (vllm/v1/spec_decode/draft_model.py)".to_owned(),
        )
    };
    Ok(engine::DraftFacts {
        method: method.to_owned(),
        source: file.display().to_string(),
        weights_bytes,
        weights_rule,
        model: draft,
        eagle3,
    })
}

/// The device as an engine sees it: the driver's total when the file states it
/// (`driver_memory_bytes`), else the file's `total_memory_bytes`.
pub fn device_facts(device: &DeviceDescription) -> DeviceFacts {
    let (total_bytes, total_source) = match device.driver_memory_bytes {
        Some(bytes) => (bytes, "driver_memory_bytes of the device file"),
        None => (
            device.total_memory_bytes,
            "total_memory_bytes of the device file (it states no driver_memory_bytes)",
        ),
    };
    DeviceFacts {
        name: device.name.clone(),
        total_bytes,
        total_source: total_source.to_owned(),
        free_at_start_bytes: None,
        compute_capability: compute_capability(&device.runtime),
    }
}

/// The CUDA compute capability of a device file's runtime (`cuda-12.4/sm_90` -> 90), as vLLM
/// compares it; `None` for another runtime (`metal-3.1/apple8`) or no `sm_` part.
pub fn compute_capability(runtime: &str) -> Option<u32> {
    let (toolkit, target) = runtime.split_once('/')?;
    if !toolkit.starts_with("cuda") {
        return None;
    }
    target.strip_prefix("sm_")?.parse().ok()
}

/// The accounting of `choice` for the model of `request` on `device` under `args`; the
/// engine's context limit, when `args` does not set it, is the context `policy` plans for
/// the model (its ceiling, or the model's trained context), so the flags reproduce the plan.
pub fn engine_report(
    request: &PlanRequest,
    device: &DeviceDescription,
    policy: &PolicyPreset,
    choice: &EngineChoice,
    args: &EngineArgs,
) -> Result<EngineReport, StudyError> {
    let mut model = model_facts(request)?;
    let mut args = args.clone();
    args.check(choice.engine)?;
    if choice.engine == engine::Engine::Vllm {
        if let Some(method) = args.speculative_method() {
            if method == "eagle3" {
                super::engine_draft::eagle3_target(request, &choice.version)?;
            }
            if matches!(method.as_str(), "eagle" | "eagle3" | "draft_model") {
                model.draft = Some(Box::new(draft_facts(
                    &model, &method, &args, device, policy,
                )?));
            }
        }
    }
    let key = context_key(choice);
    if !args.given().contains_key(key) {
        let context = policy.context_tokens(model.trained_context);
        args.set(key, &context.to_string());
    }
    Ok(engine::account(
        choice,
        &model,
        &device_facts(device),
        &args,
    )?)
}

/// `request` with its policy's budget set by the engine's rule ([`super::budget::engine_budget`]
/// of `report`, the engine's accounting on `device`), resealed: the plan then holds its own
/// weights, activations and KV cache to what the engine would budget. The capacity is kept
/// within the device's memory as the request states it.
pub fn with_engine_budget(
    request: &PlanRequest,
    device: &DeviceDescription,
    report: &EngineReport,
) -> Result<(PlanRequest, super::budget::Budget), StudyError> {
    let mut budget = super::budget::engine_budget(report, device_facts(device).total_bytes);
    budget.capacity_bytes = budget
        .capacity_bytes
        .min(request.catalog.device.total_memory_bytes);
    if budget.reserve_bytes >= budget.capacity_bytes {
        return Err(StudyError::Settings {
            path: "--engine".to_owned(),
            message: format!(
                "{}: the engine's reserve {} is not below its capacity {} on this device ({})",
                report.name, budget.reserve_bytes, budget.capacity_bytes, budget.rule
            ),
        });
    }
    let mut request = request.clone();
    request.policy.memory_capacity_bytes = budget.capacity_bytes;
    request.policy.memory_reserve_bytes = budget.reserve_bytes;
    crate::request::seal::seal(&mut request).map_err(|e| StudyError::Settings {
        path: "--engine".to_owned(),
        message: format!("the request with the engine's budget does not seal: {e}"),
    })?;
    Ok((request, budget))
}

/// What naming an engine does to a synthesized request (`plan MODEL --engine E`, a sweep
/// point with `engine`): the engine's accounting, and the request with its budget set by
/// the engine's rule ([`with_engine_budget`]).
#[derive(Clone, Debug)]
pub struct EngineApplied {
    /// The request, resealed with the engine's capacity and reserve.
    pub request: PlanRequest,
    /// The engine's accounting (its log lines and budget terms).
    pub report: EngineReport,
    /// The budget the engine's rule gave the plan.
    pub budget: super::budget::Budget,
}

/// Applies `choice` (with `args`) to `request`, synthesized for `device` under `policy`:
/// the engine's accounting ([`engine_report`]) and the request held to the engine's budget
/// ([`with_engine_budget`]). The one rule `plan --engine` and a sweep's `engine` knob share.
pub fn apply_engine(
    request: &PlanRequest,
    device: &DeviceDescription,
    policy: &PolicyPreset,
    choice: &EngineChoice,
    args: &EngineArgs,
) -> Result<EngineApplied, StudyError> {
    let report = engine_report(request, device, policy, choice, args)?;
    let (request, budget) = with_engine_budget(request, device, &report)?;
    Ok(EngineApplied {
        request,
        report,
        budget,
    })
}

/// The time profile (`crate::perf::engine_profile`) of an engine as `--engine` spells it
/// (`NAME[@VERSION]`): the version's own when it has one (`vllm@0.6`, the V0 engine's
/// scheduler and host time), else the engine's (`vllm@0.19` and `vllm@0.10` are `vllm`).
/// `None` when no profile has the name.
pub fn time_profile_name(engine: &str) -> Option<&'static str> {
    crate::perf::engine_profile(engine).map(|p| p.name)
}

/// Every spelling an engine value takes, for messages: each engine by name, then its
/// modelled versions (`vllm, vllm@0.19, vllm@0.10, vllm@0.6, sglang, ...`).
pub fn accepted_engines() -> String {
    engine::Engine::ALL
        .iter()
        .flat_map(|e| {
            std::iter::once(e.name().to_owned()).chain(
                e.versions()
                    .iter()
                    .map(move |v| format!("{}@{v}", e.name())),
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `source` with what a serving engine's arguments say about the model (`plan MODEL
/// --engine E --engine-arg ...`): `dtype` and `quantization` set the weight format,
/// `kv_cache_dtype` the KV cache dtype (the engine's own spelling), a `speculative_config`
/// with an MTP method the checkpoint's multi-token-prediction layers, where the source
/// leaves them open; a choice of the source that disagrees with an argument is refused,
/// naming both.
pub fn source_with_engine_args(
    source: &ModelSource,
    args: &EngineArgs,
) -> Result<ModelSource, SynthError> {
    let mut source = source.clone();
    let format = crate::synth::quantization::format_of_engine_args(
        args.word("dtype"),
        args.word("quantization"),
    )?;
    let conflict = |option: &str, given: &str, arg: &str| SynthError::Option {
        option: option.to_owned(),
        message: format!("{given} disagrees with --engine-arg {arg}; give one of the two"),
    };
    match (&source.weight_format, format) {
        (Some(given), Some(format)) if given != format => {
            return Err(conflict(
                "weight-format",
                given,
                &format!("dtype/quantization ({format})"),
            ))
        }
        (None, Some(format)) => source.weight_format = Some(format.to_owned()),
        _ => {}
    }
    if let Some(word) = args.word("kv_cache_dtype") {
        let kv = KvCacheDtype::from_engine_word(word).map(KvCacheDtype::name);
        match (&source.kv_cache_dtype, kv) {
            (Some(given), Some(kv)) if given != kv => {
                return Err(conflict(
                    "kv-cache-dtype",
                    given,
                    &format!("kv_cache_dtype={word}"),
                ))
            }
            (None, Some(kv)) => source.kv_cache_dtype = Some(kv.to_owned()),
            _ => {}
        }
    }
    // vLLM's speculative_config with an MTP method loads the checkpoint's
    // multi-token-prediction layers: the request is synthesized with them.
    if matches!(
        args.speculative_method().as_deref(),
        Some("deepseek_mtp" | "mtp")
    ) {
        match source.speculative.as_deref() {
            Some("none") => {
                return Err(conflict(
                    "speculative",
                    "none",
                    "speculative_config (an MTP method)",
                ))
            }
            Some(_) => {}
            None => source.speculative = Some("mtp".to_owned()),
        }
    }
    Ok(source)
}

#[cfg(test)]
mod tests {
    use super::compute_capability;

    #[test]
    fn the_compute_capability_is_the_cuda_runtime_target() {
        assert_eq!(compute_capability("cuda-12.4/sm_90"), Some(90));
        assert_eq!(compute_capability("cuda-12.8/sm_100"), Some(100));
        assert_eq!(compute_capability("cuda-12.4/sm_89"), Some(89));
        assert_eq!(compute_capability("metal-3.1/apple8"), None);
        assert_eq!(compute_capability("cuda-12.4"), None);
    }
}
