//! Reading an EAGLE-3 drafter for vLLM's accounting (`speculative_config` method
//! `eagle3`): the head's configuration checked and read into the shapes
//! [`crate::engine::vllm_eagle3`] counts, and the target checked against the models vLLM
//! feeds such a head from (docs/engines.md, "Speculative decoding").

use crate::engine::{self, ModelFacts};
use crate::request::PlanRequest;
use crate::synth::ModelConfig;

use super::StudyError;

/// Checks that `config` (read at `given`) is an EAGLE-3 head vLLM builds with
/// `llama_eagle3.py` (`model_type` llama, a llama head architecture, no
/// `speculators_config`, no `quantization_config`) and names its decoder layers'
/// architecture for synthesis (`LlamaForCausalLM`); else refuses, naming the key.
pub(super) fn eagle3_llama_head(config: &mut ModelConfig, given: &str) -> Result<(), StudyError> {
    let refuse = |key: &str, message: String| StudyError::Settings {
        path: format!("--engine-arg speculative_config.model ({given}): {key}"),
        message,
    };
    for key in ["speculators_config", "quantization_config"] {
        if config.extra.get(key).is_some_and(|v| !v.is_null()) {
            return Err(refuse(
                key,
                format!("an EAGLE-3 head with {key} is not modelled (its weights are counted in the model's dtype from a plain llama configuration); give a llama-format head configuration without it"),
            ));
        }
    }
    // vLLM v0.19.0 `registry.py`: these architectures are `Eagle3LlamaForCausalLM`
    // (`LlamaForCausalLM` is renamed `Eagle3LlamaForCausalLM` by `configs/eagle.py`).
    const LLAMA_HEADS: &[&str] = &[
        "LlamaForCausalLM",
        "Eagle3LlamaForCausalLM",
        "LlamaForCausalLMEagle3",
    ];
    if config.model_type.as_deref() != Some("llama") {
        return Err(refuse(
            "model_type",
            format!(
                "{:?}: only llama-type EAGLE-3 heads (vllm/model_executor/models/llama_eagle3.py) are modelled",
                config.model_type
            ),
        ));
    }
    if let Some(archs) = &config.architectures {
        if let Some(other) = archs.iter().find(|a| !LLAMA_HEADS.contains(&a.as_str())) {
            return Err(refuse(
                "architectures",
                format!(
                    "{other} is not one of {}: vLLM builds it with another class than llama_eagle3.py, which is not modelled",
                    LLAMA_HEADS.join(", ")
                ),
            ));
        }
    }
    config.architectures = Some(vec!["LlamaForCausalLM".to_owned()]);
    Ok(())
}

/// An EAGLE-3 head's shapes (vLLM's `llama_eagle3.py`) from its configuration `config`
/// read at `given`, with the widths synthesis derived (`draft`): `draft_vocab_size`
/// (default `vocab_size`), `target_hidden_size`, `eagle_config.use_aux_hidden_state`, a
/// top-level `eagle_aux_hidden_state_layer_ids`, `attention_bias`, `mlp_bias`,
/// `norm_before_fc`; a malformed value is refused, naming the key.
pub(super) fn eagle3_head(
    config: &ModelConfig,
    draft: &ModelFacts,
    given: &str,
) -> Result<engine::vllm_eagle3::Eagle3Head, StudyError> {
    let refuse = |key: &str, message: String| StudyError::Settings {
        path: format!("--engine-arg speculative_config.model ({given}): {key}"),
        message,
    };
    let count = |key: &str| -> Result<Option<u64>, StudyError> {
        match config.extra.get(key) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .filter(|&n| n > 0)
                .map(Some)
                .ok_or_else(|| refuse(key, format!("{v} is not a positive integer"))),
        }
    };
    let flag = |key: &str| -> Result<bool, StudyError> {
        match config.extra.get(key) {
            None | Some(serde_json::Value::Null) => Ok(false),
            Some(v) => v
                .as_bool()
                .ok_or_else(|| refuse(key, format!("{v} is not true or false"))),
        }
    };
    let draft_vocab_size = count("draft_vocab_size")?.unwrap_or(draft.vocab_size);
    let target_hidden = count("target_hidden_size")?.unwrap_or(draft.hidden_size);
    let use_aux = match config.extra.get("eagle_config") {
        None | Some(serde_json::Value::Null) => true,
        Some(serde_json::Value::Object(map)) => match map.get("use_aux_hidden_state") {
            None => true,
            Some(v) => v.as_bool().ok_or_else(|| {
                refuse(
                    "eagle_config.use_aux_hidden_state",
                    format!("{v} is not true or false"),
                )
            })?,
        },
        Some(v) => return Err(refuse("eagle_config", format!("{v} is not an object"))),
    };
    let aux_hidden_states = match config.extra.get("eagle_aux_hidden_state_layer_ids") {
        _ if !use_aux => 0,
        None | Some(serde_json::Value::Null) => 3,
        Some(serde_json::Value::Array(ids)) if !ids.is_empty() => ids.len() as u64,
        Some(v) => {
            return Err(refuse(
                "eagle_aux_hidden_state_layer_ids",
                format!("{v} is not a non-empty list of layer indices"),
            ))
        }
    };
    Ok(engine::vllm_eagle3::Eagle3Head {
        hidden_size: draft.hidden_size,
        query_heads: draft.query_heads,
        kv_heads: draft.kv_heads,
        head_dim: draft.head_dim,
        intermediate_size: draft.intermediate_size,
        layers: draft.layers.len() as u64,
        draft_vocab_size,
        fc_input_size: if use_aux { 3 * target_hidden } else { 0 },
        attention_bias: flag("attention_bias")?,
        mlp_bias: flag("mlp_bias")?,
        norm_before_fc: flag("norm_before_fc")?,
        aux_hidden_states,
    })
}

/// Checks that vLLM `version` can feed an EAGLE-3 head from the model of
/// `request`: its `model_type` must contain one of the names whose auxiliary hidden states
/// vLLM returns (v0.19.0 `vllm/config/speculative.py`; v0.10.1 llama and qwen only), else
/// vLLM's own refusal, naming the key.
pub(super) fn eagle3_target(request: &PlanRequest, version: &str) -> Result<(), StudyError> {
    let model_type = request
        .family
        .canonical_config
        .get("model_type")
        .and_then(|v| v.as_str())
        .unwrap_or_default();
    let supported = match version {
        "0.10" => engine::vllm_eagle3::AUX_TARGETS_010,
        _ => engine::vllm_eagle3::AUX_TARGETS_019,
    };
    if supported.iter().any(|s| model_type.contains(s)) {
        return Ok(());
    }
    Err(StudyError::Settings {
        path: "--engine-arg speculative_config.method".to_owned(),
        message: format!(
            "eagle3 is only supported for {supported:?} models; this model's model_type is {model_type:?} (vLLM refuses it: vllm/config/speculative.py); use method eagle or draft_model"
        ),
    })
}
