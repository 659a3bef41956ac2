//! The architecture registry: the `model_type`s the synthesizer builds, keyed by the
//! configuration's `model_type` and checked against its `architectures`, each stating what
//! the synthesized program models. An unknown or missing `model_type`, or an `architectures`
//! entry that does not belong to it, is bad input naming the key and the supported types.

use super::config::ModelConfig;
use super::SynthError;

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
}

/// Every supported architecture, by `model_type`.
pub const REGISTRY: &[ArchitectureEntry] = &[
    ArchitectureEntry {
        model_type: "deepseek_v3",
        classes: &["DeepseekV3ForCausalLM"],
        attention: "MLA (latent cache kv_lora_rank + qk_rope_head_dim)",
        mlp: "routed experts (sigmoid, grouped top-k) + shared experts; first_k_dense_replace dense layers",
        norm: "RMSNorm",
    },
    ArchitectureEntry {
        model_type: "llama",
        classes: &["LlamaForCausalLM"],
        attention: "GQA, no biases",
        mlp: "SwiGLU",
        norm: "RMSNorm",
    },
    ArchitectureEntry {
        model_type: "mistral",
        classes: &["MistralForCausalLM"],
        attention: "GQA, no biases",
        mlp: "SwiGLU",
        norm: "RMSNorm",
    },
    ArchitectureEntry {
        model_type: "mixtral",
        classes: &["MixtralForCausalLM"],
        attention: "GQA, no biases",
        mlp: "routed SwiGLU experts (softmax top-k), no shared expert",
        norm: "RMSNorm",
    },
    ArchitectureEntry {
        model_type: "qwen3",
        classes: &["Qwen3ForCausalLM"],
        attention: "GQA, no biases (the per-head q/k RMSNorm is not built: 2 x head_dim weights per layer missing)",
        mlp: "SwiGLU",
        norm: "RMSNorm",
    },
    ArchitectureEntry {
        model_type: "qwen3_moe",
        classes: &["Qwen3MoeForCausalLM"],
        attention: "GQA, no biases (the per-head q/k RMSNorm is not built: 2 x head_dim weights per layer missing)",
        mlp: "routed SwiGLU experts (softmax top-k)",
        norm: "RMSNorm",
    },
    ArchitectureEntry {
        model_type: "qwen3_next",
        classes: &["Qwen3NextForCausalLM"],
        attention: "hybrid: gated DeltaNet linear-recurrent layers and gated GQA full-attention layers",
        mlp: "routed SwiGLU experts + shared expert",
        norm: "RMSNorm",
    },
];

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
            err.contains("model_type") && err.contains("llama, mistral"),
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
