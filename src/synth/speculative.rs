//! Speculative decoding with the checkpoint's own multi-token-prediction (MTP) layers
//! (`--speculative mtp`): DeepSeek-V3 ships `num_nextn_predict_layers` extra decoder
//! layers that engines load only when asked to draft tokens with them (vLLM's
//! `--speculative-config '{"method":"deepseek_mtp","num_speculative_tokens":1}'`), so a
//! plan builds them only on request, and the plans of every other request keep their bytes.
//!
//! What one MTP module owns follows vLLM's `vllm/model_executor/models/deepseek_mtp.py`
//! (`DeepSeekMultiTokenPredictorLayer`): two RMSNorms `enorm` (of the next token's
//! embedding) and `hnorm` (of the main model's final hidden state), the projection
//! `eh_proj` `[hidden, 2 x hidden]` of the two concatenated, one decoder layer of the main
//! model's kind (`mtp_block`: DeepSeek-V3's is latent attention with a mixture of experts),
//! and the `shared_head` norm. The embedding table and the head are the main model's: vLLM
//! shares them with the target model when the draft does not own them
//! (`vllm/v1/worker/gpu/spec_decode/eagle/utils.py` `load_eagle_model`), although the
//! checkpoint repeats them under the MTP layer's name. The layer's KV cache is allocated
//! beside the main model's, one more layer of the same kind.

use std::str::FromStr;

use super::architecture::{FeedForwardKind, LayerSpec};
use super::config::ModelConfig;
use super::SynthError;

/// The key under which a synthesized family's configuration records the opt-in, so that
/// every reader of the family (the engines' accounting) re-derives the same architecture.
pub const CONFIG_KEY: &str = "speculative";

/// The `model_type`s whose MTP layers are built: their engines' MTP modules follow
/// DeepSeek's (vLLM's `deepseek_mtp.py`, and `glm4_moe_mtp.py` which repeats it).
pub const MTP_MODEL_TYPES: &[&str] = &["deepseek_v3", "glm4_moe"];

/// Which speculative-decoding weights a plan loads beside the model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Speculative {
    /// None (the default: plans as before).
    #[default]
    None,
    /// The checkpoint's multi-token-prediction layers (`num_nextn_predict_layers`).
    Mtp,
}

impl FromStr for Speculative {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "none" => Ok(Self::None),
            "mtp" => Ok(Self::Mtp),
            other => Err(format!(
                "{other:?} is not none or mtp (the checkpoint's multi-token-prediction layers)"
            )),
        }
    }
}

/// The configuration's `num_nextn_predict_layers` (0 when absent).
fn nextn_layers(config: &ModelConfig) -> Result<u64, SynthError> {
    match config.extra.get("num_nextn_predict_layers") {
        None | Some(serde_json::Value::Null) => Ok(0),
        Some(v) => v.as_u64().ok_or_else(|| {
            SynthError::config(
                "num_nextn_predict_layers",
                format!("{v} is not a non-negative integer"),
            )
        }),
    }
}

/// Records `speculative` in the effective configuration `config` (under [`CONFIG_KEY`]);
/// MTP needs a model type of [`MTP_MODEL_TYPES`] with `num_nextn_predict_layers` >= 1.
pub fn record(config: &mut ModelConfig, speculative: Speculative) -> Result<(), SynthError> {
    if speculative == Speculative::None {
        return Ok(());
    }
    let model_type = config.model_type.clone().unwrap_or_default();
    let option = |message: String| SynthError::Option {
        option: "speculative".to_owned(),
        message,
    };
    if !MTP_MODEL_TYPES.contains(&model_type.as_str()) {
        return Err(option(format!(
            "mtp builds the multi-token-prediction layers of {} models; this configuration's model_type is {model_type:?}",
            MTP_MODEL_TYPES.join(" and ")
        )));
    }
    if nextn_layers(config)? == 0 {
        return Err(option(
            "mtp needs num_nextn_predict_layers >= 1 in the configuration (the checkpoint ships no MTP layer)"
                .to_owned(),
        ));
    }
    config
        .extra
        .insert(CONFIG_KEY.to_owned(), serde_json::json!("mtp"));
    Ok(())
}

/// The MTP layers the configuration asks for (recorded by [`record`]): one per
/// `num_nextn_predict_layers`, each of the last main layer's token mixer with the routed
/// experts when the model has them (DeepSeek-V3's MTP block is a MoE layer: its index is
/// past `first_k_dense_replace`); none when the configuration does not ask.
pub fn mtp_layers(
    config: &ModelConfig,
    main: &[LayerSpec],
    has_experts: bool,
) -> Result<Vec<LayerSpec>, SynthError> {
    match config.extra.get(CONFIG_KEY) {
        None | Some(serde_json::Value::Null) => return Ok(Vec::new()),
        Some(serde_json::Value::String(s)) if s == "mtp" => {}
        Some(other) => {
            return Err(SynthError::config(
                CONFIG_KEY,
                format!("{other} is not \"mtp\" (the opt-in --speculative mtp records)"),
            ))
        }
    }
    let count = nextn_layers(config)?;
    let last = main
        .last()
        .ok_or_else(|| SynthError::config("num_hidden_layers", "must be positive"))?;
    let layer = LayerSpec {
        mixer: last.mixer,
        feed_forward: if has_experts {
            FeedForwardKind::Routed
        } else {
            last.feed_forward
        },
        window: None,
    };
    Ok((0..count).map(|_| layer).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(value: serde_json::Value) -> ModelConfig {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn mtp_is_recorded_only_where_the_checkpoint_has_it() {
        let mut v3 = config(serde_json::json!({
            "model_type": "deepseek_v3", "num_nextn_predict_layers": 1
        }));
        record(&mut v3, Speculative::Mtp).unwrap();
        assert_eq!(v3.extra.get(CONFIG_KEY), Some(&serde_json::json!("mtp")));
        let mut none = config(serde_json::json!({"model_type": "deepseek_v3"}));
        let err = record(&mut none, Speculative::Mtp).unwrap_err().to_string();
        assert!(err.contains("num_nextn_predict_layers"), "{err}");
        let mut llama = config(serde_json::json!({"model_type": "llama"}));
        let err = record(&mut llama, Speculative::Mtp)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--speculative") && err.contains("deepseek_v3"),
            "{err}"
        );
        record(&mut llama, Speculative::None).unwrap();
        assert!(!llama.extra.contains_key(CONFIG_KEY));
        assert!("eagle".parse::<Speculative>().is_err());
        let bad = config(serde_json::json!({"model_type": "deepseek_v3", "speculative": 3}));
        let err = mtp_layers(&bad, &[], true).unwrap_err().to_string();
        assert!(err.contains("speculative"), "{err}");
    }
}
