//! A model configuration in the Hugging Face `config.json` style, and the architecture the
//! synthesizer derives from it.
//!
//! The keys are the published ones (`hidden_size`, `num_hidden_layers`, ...); alternative
//! spellings of the mixture-of-experts and hybrid keys used by different model families are
//! all accepted (`n_routed_experts` / `num_local_experts` / `num_experts`, `layer_types` /
//! `full_attention_interval` / `attn_layer_indices` / `attn_layer_period` +
//! `attn_layer_offset`). Unknown keys are kept (they are part of the family's canonical
//! configuration) and otherwise ignored. [`ModelConfig::architecture`] validates the
//! configuration; every error names the key at fault.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::architecture::{
    Architecture, AttentionDims, ExpertDims, FeedForwardKind, GateActivation, GatedDeltaDims,
    LatentAttentionDims, LayerSpec, MixerKind, NormPlacement, QkNorm, RopeScaling,
};
use super::SynthError;

/// A model configuration (`config.json`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelConfig {
    /// Architecture names (e.g. `LlamaForCausalLM`); evidence only.
    #[serde(default)]
    pub architectures: Option<Vec<String>>,
    /// `model_type` (e.g. `llama`, `mixtral`, `deepseek_v3`, `qwen3_next`).
    #[serde(default)]
    pub model_type: Option<String>,
    /// Width of the residual stream.
    #[serde(default)]
    pub hidden_size: Option<u64>,
    /// Decoder layers.
    #[serde(default)]
    pub num_hidden_layers: Option<u64>,
    /// Query heads.
    #[serde(default)]
    pub num_attention_heads: Option<u64>,
    /// Key/value heads (grouped-query attention); defaults to the query heads.
    #[serde(default)]
    pub num_key_value_heads: Option<u64>,
    /// Per-head dimension; defaults to `hidden_size / num_attention_heads`.
    #[serde(default)]
    pub head_dim: Option<u64>,
    /// Feed-forward width of dense layers (and of Mixtral-style experts).
    #[serde(default)]
    pub intermediate_size: Option<u64>,
    /// Vocabulary size.
    #[serde(default)]
    pub vocab_size: Option<u64>,
    /// Longest context the model was trained for.
    #[serde(default)]
    pub max_position_embeddings: Option<u64>,
    /// RoPE base frequency.
    #[serde(default)]
    pub rope_theta: Option<f64>,
    /// RoPE scaling (`{"rope_type": "llama3", "factor": 8.0, ...}`), if any.
    #[serde(default)]
    pub rope_scaling: Option<serde_json::Value>,
    /// Fraction of the head dimension that is rotated (Qwen3-Next: 0.25).
    #[serde(default)]
    pub partial_rotary_factor: Option<f64>,
    /// RMSNorm epsilon.
    #[serde(default)]
    pub rms_norm_eps: Option<f64>,
    /// Checkpoint dtype (`bfloat16`, `float16`, `float32`).
    #[serde(default)]
    pub torch_dtype: Option<String>,
    /// Whether the output head reuses the embedding table.
    #[serde(default)]
    pub tie_word_embeddings: Option<bool>,
    /// Sliding-window size, if any (Mistral-style).
    #[serde(default)]
    pub sliding_window: Option<u64>,
    /// Routed experts (DeepSeek spelling).
    #[serde(default)]
    pub n_routed_experts: Option<u64>,
    /// Routed experts (Mixtral spelling).
    #[serde(default)]
    pub num_local_experts: Option<u64>,
    /// Routed experts (Qwen spelling).
    #[serde(default)]
    pub num_experts: Option<u64>,
    /// Experts each token is routed to.
    #[serde(default)]
    pub num_experts_per_tok: Option<u64>,
    /// Shared experts every token goes through (DeepSeek).
    #[serde(default)]
    pub n_shared_experts: Option<u64>,
    /// Feed-forward width of one routed expert (DeepSeek, Qwen); Mixtral uses
    /// `intermediate_size`.
    #[serde(default)]
    pub moe_intermediate_size: Option<u64>,
    /// Feed-forward width of the shared expert (Qwen); DeepSeek uses
    /// `n_shared_experts * moe_intermediate_size`.
    #[serde(default)]
    pub shared_expert_intermediate_size: Option<u64>,
    /// Leading layers that stay dense (DeepSeek).
    #[serde(default)]
    pub first_k_dense_replace: Option<u64>,
    /// Router scoring function (`softmax`, `sigmoid`).
    #[serde(default)]
    pub scoring_func: Option<String>,
    /// Whether the top-k routing weights are renormalized.
    #[serde(default)]
    pub norm_topk_prob: Option<bool>,
    /// Scale of the routed experts' sum (DeepSeek: 2.5).
    #[serde(default)]
    pub routed_scaling_factor: Option<f64>,
    /// Expert groups for group-limited routing (DeepSeek).
    #[serde(default)]
    pub n_group: Option<u64>,
    /// Groups each token may route into (DeepSeek).
    #[serde(default)]
    pub topk_group: Option<u64>,
    /// Multi-head latent attention: compressed KV rank (DeepSeek).
    #[serde(default)]
    pub kv_lora_rank: Option<u64>,
    /// Multi-head latent attention: compressed query rank (DeepSeek; null = full q_proj).
    #[serde(default)]
    pub q_lora_rank: Option<u64>,
    /// Multi-head latent attention: non-rotary query/key head dimension.
    #[serde(default)]
    pub qk_nope_head_dim: Option<u64>,
    /// Multi-head latent attention: rotary query/key head dimension.
    #[serde(default)]
    pub qk_rope_head_dim: Option<u64>,
    /// Multi-head latent attention: value head dimension.
    #[serde(default)]
    pub v_head_dim: Option<u64>,
    /// Hybrid layer pattern: one entry per layer, `full_attention` or `linear_attention`.
    #[serde(default)]
    pub layer_types: Option<Vec<String>>,
    /// Hybrid layer pattern: every n-th layer (1-based) is full attention (Qwen3-Next).
    #[serde(default)]
    pub full_attention_interval: Option<u64>,
    /// Hybrid layer pattern: the indices of the full-attention layers.
    #[serde(default)]
    pub attn_layer_indices: Option<Vec<u64>>,
    /// Hybrid layer pattern: period of full-attention layers (Jamba).
    #[serde(default)]
    pub attn_layer_period: Option<u64>,
    /// Hybrid layer pattern: offset of full-attention layers within the period (Jamba).
    #[serde(default)]
    pub attn_layer_offset: Option<u64>,
    /// Gated DeltaNet: convolution kernel width.
    #[serde(default)]
    pub linear_conv_kernel_dim: Option<u64>,
    /// Gated DeltaNet: key heads.
    #[serde(default)]
    pub linear_num_key_heads: Option<u64>,
    /// Gated DeltaNet: value heads.
    #[serde(default)]
    pub linear_num_value_heads: Option<u64>,
    /// Gated DeltaNet: key head dimension.
    #[serde(default)]
    pub linear_key_head_dim: Option<u64>,
    /// Gated DeltaNet: value head dimension.
    #[serde(default)]
    pub linear_value_head_dim: Option<u64>,
    /// Whether full attention gates its output with a sigmoid of a second query projection.
    #[serde(default)]
    pub attn_output_gate: Option<bool>,
    /// Every other key, kept verbatim.
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

fn required(value: Option<u64>, key: &str) -> Result<u64, SynthError> {
    match value {
        Some(0) => Err(SynthError::config(key, "must be positive")),
        Some(v) => Ok(v),
        None => Err(SynthError::config(key, "is missing")),
    }
}

fn positive_optional(value: Option<u64>, key: &str) -> Result<Option<u64>, SynthError> {
    match value {
        Some(0) => Err(SynthError::config(key, "must be positive")),
        other => Ok(other),
    }
}

/// A positive integer under an extra (unmodelled) key, if present.
fn extra_positive(config: &ModelConfig, key: &str) -> Result<Option<u64>, SynthError> {
    match config.extra.get(key).filter(|v| !v.is_null()) {
        None => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if n > 0 => Ok(Some(n)),
            _ => Err(SynthError::config(
                key,
                format!("{v} is not a positive integer"),
            )),
        },
    }
}

fn positive_float(value: Option<f64>, key: &str, default: Option<f64>) -> Result<f64, SynthError> {
    match value.or(default) {
        Some(v) if v.is_finite() && v > 0.0 => Ok(v),
        Some(v) => Err(SynthError::config(
            key,
            format!("must be a positive number, got {v}"),
        )),
        None => Err(SynthError::config(key, "is missing")),
    }
}

impl ModelConfig {
    /// Reads a `config.json`; a type error names the key (its JSON path).
    pub fn read(file: &Path) -> Result<Self, SynthError> {
        Ok(crate::request::read_json(file)?)
    }

    /// The decoder's configuration: a multimodal configuration's `text_config` (Llama 4)
    /// merged over its outer keys (the text keys win; `architectures`, `vision_config` and
    /// the rest stay), or the configuration itself when it has none.
    pub fn text_decoder(&self) -> Result<ModelConfig, SynthError> {
        let Some(text) = self.extra.get("text_config").filter(|v| !v.is_null()) else {
            return Ok(self.clone());
        };
        let serde_json::Value::Object(inner) = text else {
            return Err(SynthError::config("text_config", "must be an object"));
        };
        let mut merged = match serde_json::to_value(self) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => {
                return Err(SynthError::Internal(
                    "a configuration does not serialize to an object".to_owned(),
                ))
            }
        };
        merged.remove("text_config");
        merged.retain(|_, v| !v.is_null());
        for (key, value) in inner {
            merged.insert(key.clone(), value.clone());
        }
        serde_json::from_value(serde_json::Value::Object(merged))
            .map_err(|e| SynthError::config("text_config", e.to_string()))
    }

    /// The routed expert count under any of its spellings.
    pub fn routed_experts(&self) -> Option<u64> {
        self.n_routed_experts
            .or(self.num_local_experts)
            .or(self.num_experts)
    }

    /// The key that holds the routed expert count, for error messages and overrides.
    pub fn routed_experts_key(&self) -> &'static str {
        if self.n_routed_experts.is_some() {
            "n_routed_experts"
        } else if self.num_local_experts.is_some() {
            "num_local_experts"
        } else {
            "num_experts"
        }
    }

    /// Validates the configuration and derives its architecture.
    pub fn architecture(&self) -> Result<Architecture, SynthError> {
        let hidden_size = required(self.hidden_size, "hidden_size")?;
        let layer_count = required(self.num_hidden_layers, "num_hidden_layers")?;
        let query_heads = required(self.num_attention_heads, "num_attention_heads")?;
        let key_value_heads = positive_optional(self.num_key_value_heads, "num_key_value_heads")?
            .unwrap_or(query_heads);
        if query_heads % key_value_heads != 0 {
            return Err(SynthError::config(
                "num_key_value_heads",
                format!("{key_value_heads} does not divide num_attention_heads {query_heads}"),
            ));
        }
        let head_dim = match positive_optional(self.head_dim, "head_dim")? {
            Some(d) => d,
            None if hidden_size % query_heads == 0 => hidden_size / query_heads,
            None => {
                return Err(SynthError::config(
                    "head_dim",
                    format!(
                        "is missing and num_attention_heads {query_heads} does not divide hidden_size {hidden_size}"
                    ),
                ))
            }
        };
        let intermediate_size = required(self.intermediate_size, "intermediate_size")?;
        let vocab_size = required(self.vocab_size, "vocab_size")?;
        let max_position_embeddings =
            required(self.max_position_embeddings, "max_position_embeddings")?;
        let rope_theta = positive_float(self.rope_theta, "rope_theta", Some(10000.0))?;
        let rms_norm_eps = positive_float(self.rms_norm_eps, "rms_norm_eps", Some(1e-6))?;
        if rms_norm_eps >= 1.0 {
            return Err(SynthError::config(
                "rms_norm_eps",
                format!("{rms_norm_eps} must be below 1"),
            ));
        }
        let partial = positive_float(
            self.partial_rotary_factor,
            "partial_rotary_factor",
            Some(1.0),
        )?;
        if partial > 1.0 {
            return Err(SynthError::config(
                "partial_rotary_factor",
                format!("{partial} must be at most 1"),
            ));
        }
        let rope_dim = ((head_dim as f64) * partial).round() as u64;
        let rope_scaling = self.rope_scaling_spec(max_position_embeddings, rope_dim)?;
        let (trained_context, trained_context_rule) =
            self.trained_context(max_position_embeddings, rope_scaling.as_ref())?;
        if let Some(dtype) = &self.torch_dtype {
            if !matches!(dtype.as_str(), "bfloat16" | "float16" | "float32") {
                return Err(SynthError::config(
                    "torch_dtype",
                    format!("{dtype:?} is not bfloat16, float16 or float32"),
                ));
            }
        }
        let sliding_window = positive_optional(self.sliding_window, "sliding_window")?;

        let latent = self.latent_dims(query_heads)?;
        let mixers = self.layer_mixers(layer_count)?;
        let gated_delta = if mixers.contains(&MixerKind::GatedDelta) {
            Some(GatedDeltaDims {
                key_heads: required(self.linear_num_key_heads, "linear_num_key_heads")?,
                value_heads: required(self.linear_num_value_heads, "linear_num_value_heads")?,
                key_head_dim: required(self.linear_key_head_dim, "linear_key_head_dim")?,
                value_head_dim: required(self.linear_value_head_dim, "linear_value_head_dim")?,
                conv_kernel: required(self.linear_conv_kernel_dim, "linear_conv_kernel_dim")?,
            })
        } else {
            None
        };
        if let Some(dims) = &gated_delta {
            if dims.value_heads % dims.key_heads != 0 {
                return Err(SynthError::config(
                    "linear_num_key_heads",
                    format!(
                        "{} does not divide linear_num_value_heads {}",
                        dims.key_heads, dims.value_heads
                    ),
                ));
            }
            if dims.conv_kernel < 2 {
                return Err(SynthError::config(
                    "linear_conv_kernel_dim",
                    "must be at least 2 (the state holds kernel - 1 steps)",
                ));
            }
        }
        let experts = self.expert_dims(intermediate_size)?;
        let dense_prefix = match (&experts, self.first_k_dense_replace) {
            (None, Some(_)) => {
                return Err(SynthError::config(
                    "first_k_dense_replace",
                    "is set but the configuration has no routed experts",
                ))
            }
            (_, Some(k)) if k > layer_count => {
                return Err(SynthError::config(
                    "first_k_dense_replace",
                    format!("{k} exceeds num_hidden_layers {layer_count}"),
                ))
            }
            (Some(_), k) => k.unwrap_or(0),
            (None, None) => layer_count,
        };
        let layers: Vec<LayerSpec> = mixers
            .into_iter()
            .enumerate()
            .map(|(i, mixer)| LayerSpec {
                mixer: match (mixer, latent.is_some()) {
                    (MixerKind::Attention, true) => MixerKind::LatentAttention,
                    (m, _) => m,
                },
                feed_forward: if (i as u64) < dense_prefix {
                    FeedForwardKind::Dense
                } else {
                    FeedForwardKind::Routed
                },
                window: None,
            })
            .collect();
        let mtp_layers = super::speculative::mtp_layers(self, &layers, experts.is_some())?;
        Ok(Architecture {
            hidden_size,
            intermediate_size,
            vocab_size,
            max_position_embeddings,
            trained_context,
            trained_context_rule,
            rope_theta,
            rope_scaling,
            rms_norm_eps,
            tie_word_embeddings: self.tie_word_embeddings.unwrap_or(false),
            sliding_window,
            attention: AttentionDims {
                query_heads,
                key_value_heads,
                head_dim,
                rope_dim: rope_dim.max(1),
                // Qwen3-Next's full attention is always gated (and has q/k norms).
                output_gate: self
                    .attn_output_gate
                    .unwrap_or(self.model_type.as_deref() == Some("qwen3_next")),
            },
            latent,
            gated_delta,
            experts,
            layers,
            torch_dtype: self.torch_dtype.clone(),
            attention_bias: false,
            fused_projections: false,
            gate_activation: GateActivation::Silu,
            sandwich_norms: false,
            norm_placement: NormPlacement::Pre,
            qk_norm: QkNorm::None,
            output_bias: false,
            attention_sinks: false,
            expert_biases: false,
            block_sparse_moe: false,
            mtp_layers,
        })
    }

    /// The rope scaling of the configuration. `rope_type` (or the older `type`) names it;
    /// `default` is no scaling; `su` is the old spelling of `longrope`. `longrope` states
    /// per-dimension `short_factor` and `long_factor` lists (one factor per rotated pair:
    /// `rope_dim / 2` each) instead of one `factor`; its factor is the context's stretch,
    /// `max_position_embeddings / original_max_position_embeddings` (the figure its
    /// attention scale is computed from). Every other type needs a positive `factor`.
    fn rope_scaling_spec(
        &self,
        max_position_embeddings: u64,
        rope_dim: u64,
    ) -> Result<Option<RopeScaling>, SynthError> {
        let Some(value) = &self.rope_scaling else {
            return Ok(None);
        };
        if value.is_null() {
            return Ok(None);
        }
        let Some(map) = value.as_object() else {
            return Err(SynthError::config(
                "rope_scaling",
                "must be an object or null",
            ));
        };
        let kind = map
            .get("rope_type")
            .or_else(|| map.get("type"))
            .and_then(|v| v.as_str())
            .ok_or_else(|| SynthError::config("rope_scaling.rope_type", "is missing"))?;
        let kind = match kind {
            "default" => return Ok(None),
            "su" => "longrope",
            other => other,
        };
        let factor = if kind == "longrope" {
            for key in ["short_factor", "long_factor"] {
                let path = format!("rope_scaling.{key}");
                let factors = map.get(key).and_then(|v| v.as_array()).ok_or_else(|| {
                    SynthError::config(&path, "is missing (longrope states per-dimension factors)")
                })?;
                if factors.len() as u64 != rope_dim / 2 {
                    return Err(SynthError::config(
                        &path,
                        format!(
                            "has {} factors; longrope needs one per rotated pair, rope_dim / 2 = {}",
                            factors.len(),
                            rope_dim / 2
                        ),
                    ));
                }
                if let Some(i) = factors
                    .iter()
                    .position(|f| !f.as_f64().is_some_and(|f| f.is_finite() && f > 0.0))
                {
                    return Err(SynthError::config(
                        &format!("{path}[{i}]"),
                        "must be a positive number",
                    ));
                }
            }
            let original = self.original_max_position_embeddings()?;
            match original {
                Some(original) if original > 0 => max_position_embeddings as f64 / original as f64,
                _ => 1.0,
            }
        } else {
            map.get("factor")
                .and_then(|v| v.as_f64())
                .ok_or_else(|| SynthError::config("rope_scaling.factor", "is missing"))?
        };
        if !(factor.is_finite() && factor > 0.0) {
            return Err(SynthError::config(
                "rope_scaling.factor",
                format!("must be positive, got {factor}"),
            ));
        }
        Ok(Some(RopeScaling {
            kind: kind.to_owned(),
            factor,
        }))
    }

    /// `original_max_position_embeddings`, from `rope_scaling` or the top level (Phi-3).
    fn original_max_position_embeddings(&self) -> Result<Option<u64>, SynthError> {
        let in_scaling = self
            .rope_scaling
            .as_ref()
            .and_then(|v| v.get("original_max_position_embeddings"));
        let (value, key) = match in_scaling {
            Some(v) => (Some(v), "rope_scaling.original_max_position_embeddings"),
            None => (
                self.extra.get("original_max_position_embeddings"),
                "original_max_position_embeddings",
            ),
        };
        match value.filter(|v| !v.is_null()) {
            None => Ok(None),
            Some(v) => match v.as_u64() {
                Some(0) | None => Err(SynthError::config(
                    key,
                    format!("{v} is not a positive integer"),
                )),
                Some(n) => Ok(Some(n)),
            },
        }
    }

    /// The longest context the model serves, and the rule that set it, by vLLM's
    /// `_get_and_verify_max_len` (`vllm/config.py`; docs/synth.md, "Trained context"):
    /// the smallest of the position keys engines read (`max_position_embeddings`,
    /// `n_positions`, `max_seq_len`, `seq_length`, `max_target_positions`,
    /// `max_sequence_length`, `max_seq_length`, `seq_len`; `model_max_length` replaces
    /// them), then the rope scaling: `llama3` and `longrope` configurations already state
    /// the extended length (kept); `yarn` is `original_max_position_embeddings` (of
    /// `rope_scaling`; the position key when absent) x `factor`; every other type (`linear`,
    /// `dynamic`) multiplies by its `factor`. Gemma 3's length is already scaled (kept).
    /// A sliding window never shortens it: sliding layers keep their window in their KV
    /// state, the other layers and the position range reach the whole context.
    pub fn trained_context(
        &self,
        max_position_embeddings: u64,
        scaling: Option<&RopeScaling>,
    ) -> Result<(u64, String), SynthError> {
        let mut derived = (
            max_position_embeddings,
            "max_position_embeddings".to_owned(),
        );
        for key in [
            "n_positions",
            "max_seq_len",
            "seq_length",
            "max_target_positions",
            "max_sequence_length",
            "max_seq_length",
            "seq_len",
        ] {
            if let Some(n) = extra_positive(self, key)? {
                if n < derived.0 {
                    derived = (n, key.to_owned());
                }
            }
        }
        if let Some(n) = extra_positive(self, "model_max_length")? {
            derived = (n, "model_max_length".to_owned());
        }
        let (base, key) = derived;
        let Some(scaling) = scaling else {
            return Ok((base, key));
        };
        let gemma3 = self
            .model_type
            .as_deref()
            .is_some_and(|t| t.contains("gemma3"));
        if gemma3 || matches!(scaling.kind.as_str(), "llama3" | "longrope") {
            let why = if gemma3 {
                "gemma3: the length is already scaled".to_owned()
            } else {
                format!("{} rope states the extended length", scaling.kind)
            };
            return Ok((base, format!("{key}; {why}")));
        }
        let (base, key) = match scaling.kind.as_str() {
            "yarn" => match self
                .rope_scaling
                .as_ref()
                .and_then(|v| v.get("original_max_position_embeddings"))
                .filter(|v| !v.is_null())
            {
                Some(v) => (
                    v.as_u64().filter(|n| *n > 0).ok_or_else(|| {
                        SynthError::config(
                            "rope_scaling.original_max_position_embeddings",
                            format!("{v} is not a positive integer"),
                        )
                    })?,
                    "rope_scaling.original_max_position_embeddings".to_owned(),
                ),
                None => (base, key),
            },
            _ => (base, key),
        };
        let scaled = (base as f64 * scaling.factor).floor();
        if !(scaled >= 1.0 && scaled < u64::MAX as f64) {
            return Err(SynthError::config(
                "rope_scaling.factor",
                format!(
                    "{key} {base} x factor {} is not a usable length",
                    scaling.factor
                ),
            ));
        }
        Ok((
            scaled as u64,
            format!("{key} {base} x {} factor {}", scaling.kind, scaling.factor),
        ))
    }

    fn latent_dims(&self, query_heads: u64) -> Result<Option<LatentAttentionDims>, SynthError> {
        let Some(kv_lora_rank) = positive_optional(self.kv_lora_rank, "kv_lora_rank")? else {
            return Ok(None);
        };
        Ok(Some(LatentAttentionDims {
            query_heads,
            kv_lora_rank,
            q_lora_rank: positive_optional(self.q_lora_rank, "q_lora_rank")?,
            qk_nope_head_dim: required(self.qk_nope_head_dim, "qk_nope_head_dim")?,
            qk_rope_head_dim: required(self.qk_rope_head_dim, "qk_rope_head_dim")?,
            v_head_dim: required(self.v_head_dim, "v_head_dim")?,
        }))
    }

    /// The mixer of each layer from whichever layer-pattern key the configuration uses.
    fn layer_mixers(&self, layer_count: u64) -> Result<Vec<MixerKind>, SynthError> {
        let count = usize::try_from(layer_count)
            .map_err(|_| SynthError::config("num_hidden_layers", "is too large"))?;
        if let Some(types) = &self.layer_types {
            if types.len() != count {
                return Err(SynthError::config(
                    "layer_types",
                    format!(
                        "has {} entries for num_hidden_layers {layer_count}",
                        types.len()
                    ),
                ));
            }
            return types
                .iter()
                .enumerate()
                .map(|(i, t)| match t.as_str() {
                    // Which layers slide is the registry's to say (`LayerSpec::window`).
                    "full_attention" | "attention" | "sliding_attention" => {
                        Ok(MixerKind::Attention)
                    }
                    "linear_attention" => Ok(MixerKind::GatedDelta),
                    other => Err(SynthError::config(
                        &format!("layer_types[{i}]"),
                        format!(
                            "{other:?} is not full_attention, sliding_attention or linear_attention"
                        ),
                    )),
                })
                .collect();
        }
        if let Some(indices) = &self.attn_layer_indices {
            let mut mixers = vec![MixerKind::GatedDelta; count];
            for (k, &i) in indices.iter().enumerate() {
                let slot = usize::try_from(i)
                    .ok()
                    .and_then(|i| mixers.get_mut(i))
                    .ok_or_else(|| {
                        SynthError::config(
                            &format!("attn_layer_indices[{k}]"),
                            format!("layer {i} is outside num_hidden_layers {layer_count}"),
                        )
                    })?;
                *slot = MixerKind::Attention;
            }
            return Ok(mixers);
        }
        if let Some(interval) = self.full_attention_interval {
            if interval == 0 {
                return Err(SynthError::config(
                    "full_attention_interval",
                    "must be positive",
                ));
            }
            return Ok((0..layer_count)
                .map(|i| {
                    if (i + 1) % interval == 0 {
                        MixerKind::Attention
                    } else {
                        MixerKind::GatedDelta
                    }
                })
                .collect());
        }
        if let Some(period) = self.attn_layer_period {
            if period == 0 {
                return Err(SynthError::config("attn_layer_period", "must be positive"));
            }
            let offset = self.attn_layer_offset.unwrap_or(0);
            if offset >= period {
                return Err(SynthError::config(
                    "attn_layer_offset",
                    format!("{offset} is not below attn_layer_period {period}"),
                ));
            }
            return Ok((0..layer_count)
                .map(|i| {
                    if i % period == offset {
                        MixerKind::Attention
                    } else {
                        MixerKind::GatedDelta
                    }
                })
                .collect());
        }
        Ok(vec![MixerKind::Attention; count])
    }

    fn expert_dims(&self, intermediate_size: u64) -> Result<Option<ExpertDims>, SynthError> {
        let key = self.routed_experts_key();
        let Some(routed_experts) = positive_optional(self.routed_experts(), key)? else {
            for (value, key) in [
                (self.num_experts_per_tok, "num_experts_per_tok"),
                (self.n_shared_experts, "n_shared_experts"),
                (self.moe_intermediate_size, "moe_intermediate_size"),
            ] {
                if value.is_some_and(|v| v > 0) {
                    return Err(SynthError::config(
                        key,
                        "is set but the configuration has no routed experts (n_routed_experts, num_local_experts or num_experts)",
                    ));
                }
            }
            return Ok(None);
        };
        let experts_per_token = required(self.num_experts_per_tok, "num_experts_per_tok")?;
        if experts_per_token > routed_experts {
            return Err(SynthError::config(
                "num_experts_per_tok",
                format!("{experts_per_token} exceeds {key} {routed_experts}"),
            ));
        }
        let expert_intermediate_size =
            positive_optional(self.moe_intermediate_size, "moe_intermediate_size")?
                .unwrap_or(intermediate_size);
        let shared_intermediate_size = match (
            positive_optional(
                self.shared_expert_intermediate_size,
                "shared_expert_intermediate_size",
            )?,
            self.n_shared_experts,
        ) {
            (Some(size), _) => size,
            (None, Some(n)) => n.checked_mul(expert_intermediate_size).ok_or_else(|| {
                SynthError::config("n_shared_experts", "times moe_intermediate_size overflows")
            })?,
            (None, None) => 0,
        };
        let sigmoid_scoring = match self.scoring_func.as_deref() {
            None | Some("softmax") => false,
            Some("sigmoid") => true,
            Some(other) => {
                return Err(SynthError::config(
                    "scoring_func",
                    format!("{other:?} is not softmax or sigmoid"),
                ))
            }
        };
        let expert_groups = positive_optional(self.n_group, "n_group")?.unwrap_or(1);
        if routed_experts % expert_groups != 0 {
            return Err(SynthError::config(
                "n_group",
                format!("{expert_groups} does not divide {key} {routed_experts}"),
            ));
        }
        let top_k_groups =
            positive_optional(self.topk_group, "topk_group")?.unwrap_or(expert_groups);
        if top_k_groups > expert_groups {
            return Err(SynthError::config(
                "topk_group",
                format!("{top_k_groups} exceeds n_group {expert_groups}"),
            ));
        }
        Ok(Some(ExpertDims {
            routed_experts,
            experts_per_token,
            expert_intermediate_size,
            shared_intermediate_size,
            sigmoid_scoring,
            normalize_top_k: self.norm_topk_prob.unwrap_or(!sigmoid_scoring),
            routed_scaling_factor: positive_float(
                self.routed_scaling_factor,
                "routed_scaling_factor",
                Some(1.0),
            )?,
            expert_groups,
            top_k_groups,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn llama() -> ModelConfig {
        serde_json::from_value(serde_json::json!({
            "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
            "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
            "max_position_embeddings": 131072, "rope_theta": 500000.0, "rms_norm_eps": 1e-5,
            "some_future_key": {"nested": true}
        }))
        .unwrap()
    }

    #[test]
    fn dense_defaults_and_extra_keys() {
        let config = llama();
        assert!(config.extra.contains_key("some_future_key"));
        let arch = config.architecture().unwrap();
        assert_eq!(arch.attention.head_dim, 128);
        assert_eq!(arch.layers.len(), 32);
        assert_eq!(arch.kv_bytes_per_token(2), Some(131_072));
    }

    #[test]
    fn errors_name_the_key() {
        let mut config = llama();
        config.num_key_value_heads = Some(7);
        let err = config.architecture().unwrap_err();
        assert!(
            matches!(&err, SynthError::Config { key, .. } if key == "num_key_value_heads"),
            "{err}"
        );
        let mut config = llama();
        config.vocab_size = None;
        let err = config.architecture().unwrap_err();
        assert!(matches!(&err, SynthError::Config { key, .. } if key == "vocab_size"));
        let mut config = llama();
        config.num_experts_per_tok = Some(2);
        let err = config.architecture().unwrap_err();
        assert!(matches!(&err, SynthError::Config { key, .. } if key == "num_experts_per_tok"));
    }

    #[test]
    fn hybrid_patterns() {
        let mut config = llama();
        config.num_hidden_layers = Some(8);
        config.full_attention_interval = Some(4);
        config.linear_num_key_heads = Some(16);
        config.linear_num_value_heads = Some(32);
        config.linear_key_head_dim = Some(128);
        config.linear_value_head_dim = Some(128);
        config.linear_conv_kernel_dim = Some(4);
        let arch = config.architecture().unwrap();
        let attention: Vec<usize> = arch
            .layers
            .iter()
            .enumerate()
            .filter(|(_, l)| l.mixer == MixerKind::Attention)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(attention, vec![3, 7]);
        config.layer_types = Some(vec!["full_attention".into(); 7]);
        let err = config.architecture().unwrap_err();
        assert!(matches!(&err, SynthError::Config { key, .. } if key == "layer_types"));
    }

    fn trained(value: serde_json::Value) -> (u64, String) {
        let config: ModelConfig = serde_json::from_value(value).unwrap();
        let arch = config.architecture().unwrap();
        (arch.trained_context, arch.trained_context_rule)
    }

    fn with(overrides: serde_json::Value) -> serde_json::Value {
        let mut base = serde_json::to_value(llama()).unwrap();
        for (k, v) in overrides.as_object().unwrap() {
            base[k] = v.clone();
        }
        base
    }

    #[test]
    fn a_sliding_window_never_shortens_the_trained_context() {
        // Phi-3-mini-4k: every layer slides at 2047, the model is trained for 4096.
        let (tokens, rule) = trained(with(serde_json::json!({
            "max_position_embeddings": 4096, "sliding_window": 2047, "rope_scaling": null
        })));
        assert_eq!((tokens, rule.as_str()), (4096, "max_position_embeddings"));
        // Mistral-7B-v0.1: a 4096 window over 32768 positions.
        let (tokens, _) = trained(with(serde_json::json!({
            "max_position_embeddings": 32768, "sliding_window": 4096
        })));
        assert_eq!(tokens, 32768);
    }

    #[test]
    fn rope_scaling_sets_the_trained_context_by_vllms_rule() {
        // Qwen2.5-7B-Instruct with its documented YaRN override: 32768 x 4.
        let (tokens, rule) = trained(with(serde_json::json!({
            "max_position_embeddings": 32768,
            "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                             "original_max_position_embeddings": 32768}
        })));
        assert_eq!(tokens, 131072);
        assert_eq!(
            rule,
            "rope_scaling.original_max_position_embeddings 32768 x yarn factor 4"
        );
        // DeepSeek-V3: yarn from 4096 x 40 (the same as its max_position_embeddings).
        let (tokens, _) = trained(with(serde_json::json!({
            "max_position_embeddings": 163840,
            "rope_scaling": {"type": "yarn", "factor": 40,
                             "original_max_position_embeddings": 4096}
        })));
        assert_eq!(tokens, 163840);
        // linear and dynamic multiply the position key by the factor.
        for kind in ["linear", "dynamic"] {
            let (tokens, rule) = trained(with(serde_json::json!({
                "max_position_embeddings": 4096,
                "rope_scaling": {"type": kind, "factor": 2.0}
            })));
            assert_eq!(tokens, 8192, "{kind}");
            assert_eq!(
                rule,
                format!("max_position_embeddings 4096 x {kind} factor 2")
            );
        }
        // llama3 states the extended length already.
        let (tokens, rule) = trained(with(serde_json::json!({
            "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                             "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
        })));
        assert_eq!(tokens, 131072);
        assert!(
            rule.contains("llama3 rope states the extended length"),
            "{rule}"
        );
        // `default` is no scaling; the smallest position key wins, model_max_length replaces.
        let (tokens, _) = trained(with(serde_json::json!({
            "rope_scaling": {"rope_type": "default"}, "seq_length": 8192
        })));
        assert_eq!(tokens, 8192);
        let (tokens, rule) = trained(with(serde_json::json!({"model_max_length": 200000})));
        assert_eq!((tokens, rule.as_str()), (200000, "model_max_length"));
    }

    #[test]
    fn longrope_plans_with_its_factors_checked() {
        // The Phi-3-128k fixture (`su`, the old spelling): 131072 positions stretched from
        // 4096, 48 short and 48 long factors for a 96-wide head.
        let text = include_str!("../../tests/data/configs/phi-3-128k-longrope.json");
        let config: ModelConfig = serde_json::from_str(text).unwrap();
        let arch = config.architecture().unwrap();
        assert_eq!(arch.trained_context, 131072);
        let scaling = arch.rope_scaling.clone().unwrap();
        assert_eq!((scaling.kind.as_str(), scaling.factor), ("longrope", 32.0));
        assert!(arch.trained_context_rule.contains("longrope"));
        // Phi-3.5-mini spells it `longrope`; a wrong factor count names the key.
        let mut value: serde_json::Value = serde_json::from_str(text).unwrap();
        value["rope_scaling"]["type"] = "longrope".into();
        let config: ModelConfig = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(config.architecture().unwrap().trained_context, 131072);
        value["rope_scaling"]["short_factor"] = serde_json::json!([1.0, 1.0]);
        let config: ModelConfig = serde_json::from_value(value).unwrap();
        let err = config.architecture().unwrap_err();
        assert!(
            matches!(&err, SynthError::Config { key, .. } if key == "rope_scaling.short_factor"),
            "{err}"
        );
    }
}
