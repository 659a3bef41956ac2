//! Which configuration keys outside [`super::ModelConfig`]'s typed fields can change memory
//! or time, and so are worth a warning when the synthesizer does not model them.
//!
//! Three classes:
//! * keys that change neither memory nor time (token ids, training-only settings,
//!   bookkeeping such as `transformers_version`): ignored silently;
//! * keys whose value the synthesizer already builds when they hold their usual value
//!   (`attention_bias` equal to what the registry entry builds, `moe_layer_freq` 1,
//!   `mlp_only_layers` empty, ...): silent at that value, warned at any other;
//! * every other key: warned by name, since an unknown key could matter.

use super::config::ModelConfig;
use super::registry::{ArchitectureEntry, REGISTRY_KEYS};

/// Keys that change neither the memory nor the time of a plan: token ids, loss and
/// initialisation settings used only in training, dropout (off at inference), and
/// bookkeeping. Each is read by no engine when sizing memory or scheduling work.
pub const HARMLESS_KEYS: &[&str] = &[
    // Token ids: which id means what, not how many there are (`vocab_size` says that).
    "bos_token_id",
    "eos_token_id",
    "pad_token_id",
    "sep_token_id",
    "decoder_start_token_id",
    "boi_token_index",
    "eoi_token_index",
    "image_token_index",
    // Bookkeeping and loader hints.
    "transformers_version",
    "auto_map",
    "_name_or_path",
    "_attn_implementation_autoset",
    "model_type",
    "architectures",
    "torch_dtype",
    "use_cache",
    "tokenizer_class",
    "for_llm_compressor",
    "pretraining_tp",
    "ep_size",
    // Training only: initialisation, dropout, auxiliary losses, router noise.
    "initializer_range",
    "initializer_factor",
    "attention_dropout",
    "hidden_dropout",
    "embd_pdrop",
    "resid_pdrop",
    "projector_dropout",
    "router_aux_loss_coef",
    "aux_loss_alpha",
    "seq_aux",
    "output_router_logits",
    "router_jitter_noise",
    "input_jitter_noise",
    "z_loss_coef",
];

/// Keys whose usual value is what the synthesizer builds: silent at that value.
fn at_built_value(entry: &ArchitectureEntry, key: &str, value: &serde_json::Value) -> bool {
    use serde_json::Value;
    match key {
        // Whether q/k/v carry biases: silent when it says what the entry builds.
        "attention_bias" => value.as_bool() == Some(entry.attention_bias),
        "mlp_bias" => value == &Value::Bool(false),
        // Every layer has experts (or the first_k_dense_replace prefix is dense).
        "moe_layer_freq" | "decoder_sparse_step" => value.as_u64() == Some(1),
        "mlp_only_layers" => value.as_array().is_some_and(Vec::is_empty),
        // The top-k method and router arithmetic do not change memory; the scoring
        // function does and is typed (`scoring_func`).
        "topk_method" => matches!(value.as_str(), Some("greedy" | "noaux_tc")),
        _ => false,
    }
}

/// The configuration keys of `config` that could change memory or time and that the
/// synthesizer does not model, in key order.
pub fn unmodelled_keys(entry: &ArchitectureEntry, config: &ModelConfig) -> Vec<String> {
    config
        .extra
        .iter()
        .filter(|(key, value)| {
            let key = key.as_str();
            !(REGISTRY_KEYS.contains(&key)
                || entry.reads.contains(&key)
                || HARMLESS_KEYS.contains(&key)
                // gpt-oss repeats num_experts_per_tok under this name.
                || (key == "experts_per_token"
                    && value.as_u64().is_some()
                    && value.as_u64() == config.num_experts_per_tok)
                || at_built_value(entry, key, value))
        })
        .map(|(key, _)| key.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::registry::entry_of;

    fn config(value: serde_json::Value) -> ModelConfig {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn harmless_keys_are_silent_and_others_are_named() {
        let llama = config(serde_json::json!({
            "model_type": "llama", "bos_token_id": 1, "eos_token_id": [2, 3],
            "transformers_version": "4.43.0", "initializer_range": 0.02, "use_cache": true,
            "attention_bias": false, "mlp_bias": false, "hidden_act": "silu",
            "some_future_memory_knob": 4
        }));
        let entry = entry_of(&llama).unwrap();
        assert_eq!(
            unmodelled_keys(entry, &llama),
            vec!["some_future_memory_knob"]
        );
        // A bias the entry does not build could matter: named.
        let biased = config(serde_json::json!({
            "model_type": "llama", "attention_bias": true, "mlp_bias": true
        }));
        assert_eq!(
            unmodelled_keys(entry_of(&biased).unwrap(), &biased),
            vec!["attention_bias", "mlp_bias"]
        );
        // Qwen2 builds q/k/v biases: `attention_bias: true` says what is built.
        let qwen = config(serde_json::json!({"model_type": "qwen2", "attention_bias": true}));
        assert!(unmodelled_keys(entry_of(&qwen).unwrap(), &qwen).is_empty());
        let sparse = config(serde_json::json!({
            "model_type": "qwen3_moe", "decoder_sparse_step": 2, "mlp_only_layers": [0]
        }));
        assert_eq!(
            unmodelled_keys(entry_of(&sparse).unwrap(), &sparse),
            vec!["decoder_sparse_step", "mlp_only_layers"]
        );
    }
}
