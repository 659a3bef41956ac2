//! The architecture registry: the `model_type`s the synthesizer builds, keyed by the
//! configuration's `model_type` and checked against its `architectures`, each stating what
//! the synthesized program models. An unknown or missing `model_type`, or an `architectures`
//! entry that does not belong to it, is bad input naming the key and the supported types.
//! [`ArchitectureEntry::specialize`] applies what the entry knows and `config.json` does not
//! say (Qwen2's attention biases, Phi-3's fused checkpoint tensors, Gemma's GeGLU, sandwich
//! norms, tied head and sliding-window layers) to the validated architecture.

use super::architecture::{Architecture, GateActivation, MixerKind, NormPlacement, QkNorm};
use super::config::ModelConfig;
use super::SynthError;

/// Which attention layers use the configuration's `sliding_window`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlidingLayers {
    /// None: the architecture has no sliding-window attention.
    Never,
    /// Every attention layer, when `sliding_window` is set (Mistral, Phi-3).
    AllWhenSet,
    /// Layers from `max_window_layers` on, only when `use_sliding_window` is true (Qwen).
    WhenEnabled,
    /// Even layers (0, 2, ...) slide, odd ones attend globally (Gemma 2).
    Alternating,
    /// Every layer but each `sliding_window_pattern`-th (default 6) slides (Gemma 3).
    Pattern,
}

/// What one supported architecture builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArchitectureEntry {
    /// The configuration's `model_type`.
    pub model_type: &'static str,
    /// The `architectures` class names that belong to it.
    pub classes: &'static [&'static str],
    /// Attention kind as built.
    pub attention: &'static str,
    /// Feed-forward kind as built.
    pub mlp: &'static str,
    /// Norm kind as built.
    pub norm: &'static str,
    /// Which layers slide (a layer-wise `layer_types` list overrides this).
    pub sliding: SlidingLayers,
    /// Whether the q/k/v projections carry biases.
    pub attention_bias: bool,
    /// Whether the checkpoint fuses q/k/v and gate/up into one tensor each.
    pub fused_projections: bool,
    /// The MLP gate when `hidden_activation` / `hidden_act` is absent.
    pub gate: GateActivation,
    /// Whether attention and MLP outputs are normalised before the residual adds.
    pub sandwich_norms: bool,
    /// `tie_word_embeddings` when the configuration does not say.
    pub tied_by_default: bool,
    /// Where the norms sit.
    pub norm_placement: NormPlacement,
    /// The q/k norm built (`PerHead` only when `use_qk_norm` is true).
    pub qk_norm: QkNorm,
    /// Whether `o_proj` carries a bias.
    pub output_bias: bool,
    /// Whether attention has per-head sink logits.
    pub attention_sinks: bool,
    /// Whether the router and routed experts carry biases.
    pub expert_biases: bool,
    /// Router scoring when `scoring_func` is absent (`Some(true)`: sigmoid, as GLM-4.5's
    /// code fixes it; `None`: the configuration's `scoring_func`, softmax by default).
    pub sigmoid_router: Option<bool>,
    /// Architecture-specific keys this entry reads or states as arithmetic only in its
    /// description (kept off the unmodelled-keys warning).
    pub reads: &'static [&'static str],
    /// Llama 4's layout: MoE layers every `interleave_moe_layer_step` (or as `moe_layers`
    /// lists), dense layers of `intermediate_size_mlp`, a shared expert of the expert
    /// width in every MoE layer, and chunked local attention (`attention_chunk_size`) on
    /// the RoPE layers while the NoPE layers (`no_rope_layers` 0) attend globally.
    pub interleaved_moe: bool,
    /// Whether the checkpoint names its mixture `block_sparse_moe` with experts' `w1`,
    /// `w3`, `w2` (PhiMoE).
    pub block_sparse_moe: bool,
}

/// The configuration keys outside [`ModelConfig`]'s typed fields that the registry reads;
/// they are not reported as unmodelled.
pub const REGISTRY_KEYS: &[&str] = &[
    "hidden_act",
    "hidden_activation",
    "max_window_layers",
    "sliding_window_pattern",
    "use_qk_norm",
    "use_sliding_window",
];

const fn entry(model_type: &'static str, classes: &'static [&'static str]) -> ArchitectureEntry {
    ArchitectureEntry {
        model_type,
        classes,
        attention: "GQA, no biases",
        mlp: "SwiGLU",
        norm: "RMSNorm",
        sliding: SlidingLayers::Never,
        attention_bias: false,
        fused_projections: false,
        gate: GateActivation::Silu,
        sandwich_norms: false,
        tied_by_default: false,
        norm_placement: NormPlacement::Pre,
        qk_norm: QkNorm::None,
        output_bias: false,
        attention_sinks: false,
        expert_biases: false,
        sigmoid_router: None,
        reads: &[],
        interleaved_moe: false,
        block_sparse_moe: false,
    }
}

const GEMMA: ArchitectureEntry = ArchitectureEntry {
    attention: "GQA, no biases, sliding-window and global layers (attention logit soft-capping and query_pre_attn_scalar are kernel arithmetic, not built)",
    mlp: "GeGLU (GELU-tanh gate)",
    norm: "RMSNorm (1 + w), sandwich: input, post-attention, pre- and post-feed-forward; embeddings scaled by sqrt(hidden) (arithmetic, not built); final logit soft-capping not built",
    sliding: SlidingLayers::Alternating,
    gate: GateActivation::GeluTanh,
    sandwich_norms: true,
    tied_by_default: true,
    ..entry("gemma2", &["Gemma2ForCausalLM"])
};

/// Every supported architecture, by `model_type`.
pub const REGISTRY: &[ArchitectureEntry] = &[
    ArchitectureEntry {
        attention: "MLA (latent cache kv_lora_rank + qk_rope_head_dim)",
        mlp: "routed experts (sigmoid, grouped top-k) + shared experts; first_k_dense_replace dense layers; the multi-token-prediction layers (num_nextn_predict_layers) with --speculative mtp",
        reads: &["num_nextn_predict_layers"],
        ..entry("deepseek_v3", &["DeepseekV3ForCausalLM"])
    },
    ArchitectureEntry {
        attention: "MLA (latent cache kv_lora_rank + qk_rope_head_dim); q_lora_rank null: one full q_proj",
        mlp: "routed experts (softmax, greedy top-k) + shared experts; first_k_dense_replace dense layers",
        ..entry("deepseek_v2", &["DeepseekV2ForCausalLM"])
    },
    GEMMA,
    ArchitectureEntry {
        model_type: "gemma3_text",
        classes: &["Gemma3ForCausalLM"],
        attention: "GQA, no biases, five sliding-window layers per global one (sliding_window_pattern); the per-head q/k RMSNorm and the local RoPE base are not built",
        sliding: SlidingLayers::Pattern,
        ..GEMMA
    },
    ArchitectureEntry {
        attention: "GQA with q/k/v biases, partial rotary (partial_rotary_factor); per-head q/k RMSNorm when use_qk_norm",
        mlp: "routed SwiGLU experts (sigmoid, top-k) + shared experts; first_k_dense_replace dense layers (the router's e_score_correction_bias, n_routed_experts per MoE layer, is not built); the multi-token-prediction layers (num_nextn_predict_layers) with --speculative mtp",
        attention_bias: true,
        qk_norm: QkNorm::PerHead,
        sigmoid_router: Some(true),
        reads: &["num_nextn_predict_layers"],
        ..entry("glm4_moe", &["Glm4MoeForCausalLM"])
    },
    ArchitectureEntry {
        attention: "GQA with q/k/v/o biases and one learned sink logit per query head; sliding-window and full layers (layer_types)",
        mlp: "routed experts (softmax top-k) with router and expert biases; the clamped SwiGLU (swiglu_limit, alpha 1.702) is kernel arithmetic",
        sliding: SlidingLayers::AllWhenSet,
        attention_bias: true,
        output_bias: true,
        attention_sinks: true,
        expert_biases: true,
        reads: &["swiglu_limit", "initial_context_length"],
        ..entry("gpt_oss", &["GptOssForCausalLM"])
    },
    ArchitectureEntry {
        sliding: SlidingLayers::AllWhenSet,
        ..entry("llama", &["LlamaForCausalLM"])
    },
    ArchitectureEntry {
        attention: "GQA, no biases; chunked local attention on the RoPE layers (each holds at most attention_chunk_size tokens, stated on the node as its window), global attention on the NoPE layers (no_rope_layers 0, every 4th by default); the weightless L2 q/k norm and the attention temperature tuning are arithmetic",
        mlp: "routed SwiGLU experts (sigmoid top-k, not renormalised) + a shared expert of the expert width in every MoE layer (interleave_moe_layer_step, moe_layers); dense layers of intermediate_size_mlp",
        sigmoid_router: Some(true),
        interleaved_moe: true,
        reads: &[
            "attention_chunk_size",
            "attn_scale",
            "attn_temperature_tuning",
            "floor_scale",
            "interleave_moe_layer_step",
            "intermediate_size_mlp",
            "moe_layers",
            "no_rope_layer_interval",
            "no_rope_layers",
        ],
        ..entry(
            "llama4_text",
            &["Llama4ForConditionalGeneration", "Llama4ForCausalLM"],
        )
    },
    ArchitectureEntry {
        sliding: SlidingLayers::AllWhenSet,
        ..entry("mistral", &["MistralForCausalLM"])
    },
    ArchitectureEntry {
        mlp: "routed SwiGLU experts (softmax top-k), no shared expert",
        sliding: SlidingLayers::AllWhenSet,
        ..entry("mixtral", &["MixtralForCausalLM"])
    },
    ArchitectureEntry {
        attention: "GQA, no biases; RMSNorm of the whole q and k projections",
        norm: "RMSNorm after each sublayer (post_attention_layernorm, post_feedforward_layernorm), none before",
        norm_placement: NormPlacement::Post,
        qk_norm: QkNorm::Projection,
        ..entry("olmo2", &["Olmo2ForCausalLM"])
    },
    ArchitectureEntry {
        attention: "GQA, fused qkv_proj checkpoint tensor split by rows, no biases",
        mlp: "SwiGLU, fused gate_up_proj checkpoint tensor",
        sliding: SlidingLayers::AllWhenSet,
        fused_projections: true,
        ..entry("phi3", &["Phi3ForCausalLM"])
    },
    ArchitectureEntry {
        attention: "GQA with q/k/v/o biases",
        mlp: "routed SwiGLU experts (softmax top-2, sparsemixer routing is router arithmetic), checkpoint names block_sparse_moe.gate and experts' w1/w3/w2",
        norm: "LayerNorm with weight and bias (input, post-attention, final); the lm_head bias (vocab_size values) is not built",
        sliding: SlidingLayers::AllWhenSet,
        attention_bias: true,
        output_bias: true,
        norm_placement: NormPlacement::PreLayerNorm,
        block_sparse_moe: true,
        // longrope's original length, read with the rope scaling (`max_position_embeddings
        // / original_max_position_embeddings` is its stretch).
        reads: &["original_max_position_embeddings"],
        ..entry("phimoe", &["PhiMoEForCausalLM"])
    },
    ArchitectureEntry {
        attention: "GQA, q/k/v biases",
        sliding: SlidingLayers::WhenEnabled,
        attention_bias: true,
        ..entry("qwen2", &["Qwen2ForCausalLM"])
    },
    ArchitectureEntry {
        attention: "GQA, q/k/v biases",
        mlp: "routed SwiGLU experts (softmax top-k) + shared expert (its sigmoid gate, hidden_size weights per layer, is not built)",
        sliding: SlidingLayers::WhenEnabled,
        attention_bias: true,
        ..entry("qwen2_moe", &["Qwen2MoeForCausalLM"])
    },
    ArchitectureEntry {
        attention: "GQA, no biases (the per-head q/k RMSNorm is not built: 2 x head_dim weights per layer missing)",
        sliding: SlidingLayers::WhenEnabled,
        ..entry("qwen3", &["Qwen3ForCausalLM"])
    },
    ArchitectureEntry {
        attention: "GQA, no biases (the per-head q/k RMSNorm is not built: 2 x head_dim weights per layer missing)",
        mlp: "routed SwiGLU experts (softmax top-k)",
        sliding: SlidingLayers::WhenEnabled,
        ..entry("qwen3_moe", &["Qwen3MoeForCausalLM"])
    },
    ArchitectureEntry {
        attention: "hybrid: gated DeltaNet linear-recurrent layers and gated GQA full-attention layers",
        mlp: "routed SwiGLU experts + shared expert",
        ..entry("qwen3_next", &["Qwen3NextForCausalLM"])
    },
];

fn extra_bool(config: &ModelConfig, key: &str) -> Result<Option<bool>, SynthError> {
    match config.extra.get(key) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(SynthError::config(key, format!("{other} is not a boolean"))),
    }
}

fn extra_count(config: &ModelConfig, key: &str) -> Result<Option<u64>, SynthError> {
    match config.extra.get(key) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) => Ok(Some(n)),
            None => Err(SynthError::config(
                key,
                format!("{v} is not a non-negative integer"),
            )),
        },
    }
}

impl ArchitectureEntry {
    /// Applies what this architecture builds to `arch`, validated from `config`: the MLP
    /// gate (`hidden_activation`, else `hidden_act`, else the entry's), biases, fused
    /// tensors, sandwich norms, the tied head default and each layer's sliding window.
    pub fn specialize(
        &self,
        config: &ModelConfig,
        mut arch: Architecture,
    ) -> Result<Architecture, SynthError> {
        arch.gate_activation = self.gate;
        for key in ["hidden_activation", "hidden_act"] {
            let Some(value) = config.extra.get(key).filter(|v| !v.is_null()) else {
                continue;
            };
            arch.gate_activation = match value.as_str() {
                Some("silu" | "swish") => GateActivation::Silu,
                Some("gelu_pytorch_tanh" | "gelu_tanh" | "gelu_new" | "gelu") => {
                    GateActivation::GeluTanh
                }
                _ => {
                    return Err(SynthError::config(
                        key,
                        format!("{value} is not silu or gelu_pytorch_tanh"),
                    ))
                }
            };
            break;
        }
        arch.attention_bias = self.attention_bias;
        arch.fused_projections = self.fused_projections;
        arch.sandwich_norms = self.sandwich_norms;
        arch.norm_placement = self.norm_placement;
        arch.output_bias = self.output_bias;
        arch.attention_sinks = self.attention_sinks;
        arch.expert_biases = self.expert_biases;
        arch.block_sparse_moe = self.block_sparse_moe;
        arch.qk_norm = match self.qk_norm {
            QkNorm::PerHead if !extra_bool(config, "use_qk_norm")?.unwrap_or(false) => QkNorm::None,
            other => other,
        };
        if let (Some(sigmoid), Some(experts), None) = (
            self.sigmoid_router,
            arch.experts.as_mut(),
            &config.scoring_func,
        ) {
            experts.sigmoid_scoring = sigmoid;
            experts.normalize_top_k = config.norm_topk_prob.unwrap_or(!sigmoid);
        }
        arch.tie_word_embeddings = config.tie_word_embeddings.unwrap_or(self.tied_by_default);
        if self.interleaved_moe {
            interleave_moe(config, &mut arch)?;
        }
        let sliding = self.sliding_layers(config, arch.layers.len())?;
        match (arch.sliding_window, sliding) {
            (Some(window), Some(sliding)) => {
                for (layer, slides) in arch.layers.iter_mut().zip(sliding) {
                    if slides && layer.mixer == MixerKind::Attention {
                        layer.window = Some(window);
                    }
                }
            }
            (None, Some(sliding)) if sliding.contains(&true) => {
                return Err(SynthError::config(
                    "sliding_window",
                    format!(
                        "is missing but {} has sliding-window layers",
                        self.model_type
                    ),
                ));
            }
            _ => {}
        }
        Ok(arch)
    }

    /// Which of `count` layers slide (`None`: none can).
    fn sliding_layers(
        &self,
        config: &ModelConfig,
        count: usize,
    ) -> Result<Option<Vec<bool>>, SynthError> {
        if self.sliding == SlidingLayers::Never {
            return Ok(None);
        }
        if let Some(types) = &config.layer_types {
            return Ok(Some(
                types.iter().map(|t| t == "sliding_attention").collect(),
            ));
        }
        let layers = 0..count as u64;
        Ok(match self.sliding {
            SlidingLayers::Never => None,
            SlidingLayers::AllWhenSet => config
                .sliding_window
                .map(|_| layers.map(|_| true).collect()),
            SlidingLayers::WhenEnabled => {
                if extra_bool(config, "use_sliding_window")?.unwrap_or(false) {
                    let from = extra_count(config, "max_window_layers")?.unwrap_or(0);
                    Some(layers.map(|i| i >= from).collect())
                } else {
                    None
                }
            }
            SlidingLayers::Alternating => Some(layers.map(|i| i % 2 == 0).collect()),
            SlidingLayers::Pattern => {
                let pattern = extra_count(config, "sliding_window_pattern")?.unwrap_or(6);
                if pattern == 0 {
                    return Err(SynthError::config(
                        "sliding_window_pattern",
                        "must be positive",
                    ));
                }
                Some(layers.map(|i| (i + 1) % pattern != 0).collect())
            }
        })
    }
}

/// A list of non-negative integers under `key`, if present.
fn extra_counts(config: &ModelConfig, key: &str) -> Result<Option<Vec<u64>>, SynthError> {
    match config.extra.get(key) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_u64().ok_or_else(|| {
                    SynthError::config(
                        &format!("{key}[{i}]"),
                        format!("{v} is not a non-negative integer"),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(other) => Err(SynthError::config(key, format!("{other} is not a list"))),
    }
}

/// Llama 4's layer layout ([`ArchitectureEntry::interleaved_moe`]) applied to `arch`.
fn interleave_moe(config: &ModelConfig, arch: &mut Architecture) -> Result<(), SynthError> {
    use super::architecture::FeedForwardKind;
    let step = extra_count(config, "interleave_moe_layer_step")?.unwrap_or(1);
    if step == 0 {
        return Err(SynthError::config(
            "interleave_moe_layer_step",
            "must be positive",
        ));
    }
    let moe_layers = extra_counts(config, "moe_layers")?;
    if let Some(width) = extra_count(config, "intermediate_size_mlp")? {
        if width == 0 {
            return Err(SynthError::config(
                "intermediate_size_mlp",
                "must be positive",
            ));
        }
        arch.intermediate_size = width;
    }
    let has_experts = arch.experts.is_some();
    if let Some(experts) = arch.experts.as_mut() {
        experts.shared_intermediate_size = experts.expert_intermediate_size;
    }
    // `no_rope_layers[i]` is 1 for a RoPE (chunked local) layer and 0 for a NoPE (global)
    // one; absent or empty, every `no_rope_layer_interval`-th layer (default 4) is NoPE.
    let rope_flags = extra_counts(config, "no_rope_layers")?.filter(|l| !l.is_empty());
    let interval = extra_count(config, "no_rope_layer_interval")?.unwrap_or(4);
    if interval == 0 {
        return Err(SynthError::config(
            "no_rope_layer_interval",
            "must be positive",
        ));
    }
    let chunk = extra_count(config, "attention_chunk_size")?;
    if chunk == Some(0) {
        return Err(SynthError::config(
            "attention_chunk_size",
            "must be positive",
        ));
    }
    for (i, layer) in arch.layers.iter_mut().enumerate() {
        let index = i as u64;
        let moe = match &moe_layers {
            Some(list) => list.contains(&index),
            None => (index + 1) % step == 0,
        };
        layer.feed_forward = if moe && has_experts {
            FeedForwardKind::Routed
        } else {
            FeedForwardKind::Dense
        };
        let rope = match &rope_flags {
            Some(flags) => flags.get(i).copied().unwrap_or(1) != 0,
            None => (index + 1) % interval != 0,
        };
        if rope && layer.mixer == MixerKind::Attention {
            layer.window = chunk;
        }
    }
    Ok(())
}

/// The supported `model_type`s, comma-separated, for error messages.
pub fn supported_types() -> String {
    REGISTRY
        .iter()
        .map(|e| e.model_type)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The registry entry of `config`: its `model_type` must be supported and every
/// `architectures` class must belong to it.
pub fn entry_of(config: &ModelConfig) -> Result<&'static ArchitectureEntry, SynthError> {
    let model_type = config.model_type.as_deref().ok_or_else(|| {
        SynthError::config(
            "model_type",
            format!("is missing; supported model types: {}", supported_types()),
        )
    })?;
    let entry = REGISTRY
        .iter()
        .find(|e| e.model_type == model_type)
        .ok_or_else(|| {
            SynthError::config(
                "model_type",
                format!(
                    "{model_type:?} is not a supported architecture; supported model types: {}",
                    supported_types()
                ),
            )
        })?;
    for class in config.architectures.iter().flatten() {
        if !entry.classes.contains(&class.as_str()) {
            return Err(SynthError::config(
                "architectures",
                format!(
                    "{class:?} is not a {model_type} class (expected one of {:?})",
                    entry.classes
                ),
            ));
        }
    }
    Ok(entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(value: serde_json::Value) -> ModelConfig {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn unknown_missing_and_mismatched_types_are_rejected() {
        let bert = config(serde_json::json!({"model_type": "bert"}));
        let err = entry_of(&bert).unwrap_err().to_string();
        assert!(
            err.contains("model_type") && err.contains("llama, llama4_text, mistral"),
            "{err}"
        );
        let err = entry_of(&config(serde_json::json!({})))
            .unwrap_err()
            .to_string();
        assert!(err.contains("model_type: is missing"), "{err}");
        let mixed = config(serde_json::json!({
            "model_type": "llama", "architectures": ["BertModel"]
        }));
        let err = entry_of(&mixed).unwrap_err().to_string();
        assert!(err.contains("architectures"), "{err}");
        let llama = config(serde_json::json!({
            "model_type": "llama", "architectures": ["LlamaForCausalLM"]
        }));
        assert_eq!(entry_of(&llama).unwrap().model_type, "llama");
    }
}
