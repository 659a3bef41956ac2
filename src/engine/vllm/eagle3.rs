//! An EAGLE-3 drafter in vLLM's V1 engine (`speculative_config` method `eagle3`): the head's
//! tensors as vLLM builds them, and the target's auxiliary hidden states it reads. Rules
//! (docs/engines.md, "Speculative decoding"; read in the released wheels `vllm-0.19.0`
//! and `vllm-0.10.1`):
//!
//! * `vllm/model_executor/models/llama_eagle3.py` (`Eagle3LlamaForCausalLM`, the class of
//!   both `LlamaForCausalLM` heads, renamed `Eagle3LlamaForCausalLM` by
//!   `vllm/transformers_utils/configs/eagle.py`, and `LlamaForCausalLMEagle3`): decoder
//!   layers whose first `qkv_proj` reads `2 x hidden_size` (the token's embedding and the
//!   fused hidden state, concatenated), each with an extra `hidden_norm`; `fc` from
//!   `3 x target_hidden_size` (or `3 x hidden_size`) to `hidden_size`, a `ReplicatedLinear`
//!   (every rank holds it whole); the final `norm`; its own `lm_head` over
//!   `draft_vocab_size` rows (a `ParallelLMHead`, rows padded to 64 and split over the
//!   ranks); `draft_id_to_target_id`, an int64 parameter of `draft_vocab_size` (the
//!   checkpoint's `d2t`; its `t2d` is skipped at load). The embedding is the target's
//!   (`vllm/v1/spec_decode/eagle.py` `_maybe_share_embeddings`: a head whose checkpoint has
//!   no `embed_tokens`, or one equal to the target's, is given the target's; v0.10.1 shares
//!   it whenever the shapes agree). v0.10.1 builds exactly one decoder layer, without a qkv
//!   bias, and always an `fc`;
//! * the target: with `use_aux_hidden_state` (the default), the model's forward returns the
//!   hidden states after three layers (`(2, L // 2, L - 3)`,
//!   `SupportsEagle3.get_eagle3_default_aux_hidden_state_layers`, or the head config's
//!   `eagle_aux_hidden_state_layer_ids`), each `max_num_batched_tokens x hidden` in the
//!   model dtype, alive to the end of the forward and through the drafter's dummy run
//!   (`gpu_model_runner.py` `_dummy_run` keeps `outputs`).

use serde::{Deserialize, Serialize};

use super::super::{add, mul, EngineError};

/// The target `model_type`s whose auxiliary hidden states vLLM v0.19.0 can return
/// (`aux_hidden_states_supported`, `vllm/config/speculative.py`); a `model_type` containing
/// one of these is accepted.
pub const AUX_TARGETS_019: &[&str] = &[
    "llama",
    "qwen",
    "minicpm",
    "gpt_oss",
    "hunyuan_vl",
    "hunyuan_v1_dense",
    "afmoe",
    "nemotron_h",
    "deepseek_v2",
    "deepseek_v3",
    "kimi_k2",
    "kimi_k25",
];

/// The same list in vLLM v0.10.1 (`eagle3_target_supported`, `vllm/config/__init__.py`).
pub const AUX_TARGETS_010: &[&str] = &["llama", "qwen"];

/// An EAGLE-3 head's shapes, read from its `config.json`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Eagle3Head {
    /// `hidden_size`.
    pub hidden_size: u64,
    /// `num_attention_heads`.
    pub query_heads: u64,
    /// `num_key_value_heads`.
    pub kv_heads: u64,
    /// `head_dim` (default `hidden_size / num_attention_heads`).
    pub head_dim: u64,
    /// `intermediate_size`.
    pub intermediate_size: u64,
    /// `num_hidden_layers`.
    pub layers: u64,
    /// `draft_vocab_size` (default `vocab_size`): the rows of its `lm_head`.
    pub draft_vocab_size: u64,
    /// `fc`'s input width, `3 x target_hidden_size` (or `3 x hidden_size`); 0 when the
    /// head's `eagle_config.use_aux_hidden_state` is false (no `fc`, no auxiliary states).
    pub fc_input_size: u64,
    /// `attention_bias`: a bias on qkv (v0.19.0 only) and on o_proj.
    pub attention_bias: bool,
    /// `mlp_bias`: biases on gate_up and down.
    pub mlp_bias: bool,
    /// `norm_before_fc`: an RMSNorm over `fc`'s input (v0.19.0).
    pub norm_before_fc: bool,
    /// The target layers whose hidden states the head reads (3, or as many as the head's
    /// `eagle_aux_hidden_state_layer_ids` lists); 0 without `fc`.
    pub aux_hidden_states: u64,
}

/// The head's weights on one rank.
pub struct HeadWeights {
    /// Bytes on one of the ranks.
    pub bytes: u64,
    /// How they were counted.
    pub rule: String,
}

/// The head's weights on one of `tp` ranks under vLLM `version` ("0.19" or "0.10"), in
/// `dtype_bytes` per element (the model's dtype: vLLM builds the draft in the target's).
pub fn weights(
    version: &str,
    head: &Eagle3Head,
    dtype_bytes: u64,
    tp: u64,
) -> Result<HeadWeights, EngineError> {
    let tp = tp.max(1);
    let v019 = version == "0.19";
    let h = head.hidden_size;
    let layers = if v019 { head.layers } else { 1 };
    let q = head.query_heads.div_ceil(tp) * head.head_dim;
    let kv = head.kv_heads.div_ceil(tp) * head.head_dim;
    let qkv_out = q + 2 * kv;
    let i = head.intermediate_size.div_ceil(tp);
    let qkv_bias = v019 && head.attention_bias;
    // Per layer, on one rank: qkv (the first reads 2h), o_proj, gate_up, down, and three
    // norms (input, post-attention, hidden) held whole.
    let layer = |input: u64| -> Result<u64, EngineError> {
        let mut e = mul(input, qkv_out, "EAGLE-3 qkv")?;
        e = add(e, mul(q, h, "EAGLE-3 o_proj")?, "EAGLE-3 layer")?;
        e = add(e, mul(3 * i, h, "EAGLE-3 MLP")?, "EAGLE-3 layer")?;
        e = add(e, 3 * h, "EAGLE-3 layer")?;
        if qkv_bias {
            e = add(e, qkv_out, "EAGLE-3 layer")?;
        }
        if head.attention_bias {
            e = add(e, h, "EAGLE-3 layer")?;
        }
        if head.mlp_bias {
            e = add(e, 2 * i + h, "EAGLE-3 layer")?;
        }
        Ok(e)
    };
    let mut decoder = layer(2 * h)?;
    for _ in 1..layers {
        decoder = add(decoder, layer(h)?, "EAGLE-3 layers")?;
    }
    let fc_input = if v019 || head.fc_input_size > 0 {
        head.fc_input_size
    } else {
        3 * h
    };
    let mut fc = mul(fc_input, h, "EAGLE-3 fc")?;
    if v019 && head.norm_before_fc && fc_input > 0 {
        fc = add(fc, fc_input, "EAGLE-3 fc")?;
    }
    let lm_rows = head.draft_vocab_size.div_ceil(64) * 64 / tp;
    let lm_head = mul(lm_rows, h, "EAGLE-3 lm_head")?;
    let elements = add(
        add(add(decoder, fc, "EAGLE-3")?, h, "EAGLE-3")?,
        lm_head,
        "EAGLE-3",
    )?;
    let d2t = mul(head.draft_vocab_size, 8, "EAGLE-3 d2t")?;
    let bytes = add(
        mul(elements, dtype_bytes, "EAGLE-3 weights")?,
        d2t,
        "EAGLE-3",
    )?;
    let rank = if tp > 1 {
        format!(" on one of {tp} ranks")
    } else {
        String::new()
    };
    Ok(HeadWeights {
        bytes,
        rule: format!(
            "an EAGLE-3 head{rank}: {layers} decoder layer(s) ({decoder} elements: the first qkv_proj reads 2 x {h}, each with input, post-attention and hidden norms) + fc {fc_input} x {h} (replicated) + norm {h} + its own lm_head {lm_rows} x {h} (draft_vocab_size {} padded to 64{}), in {dtype_bytes} B, + draft_id_to_target_id {} x 8 B ({d2t} B); the embedding is the model's (vLLM {} llama_eagle3.py, v1/spec_decode/eagle.py load_model)",
            head.draft_vocab_size,
            if tp > 1 { format!(", / {tp}") } else { String::new() },
            head.draft_vocab_size,
            if v019 { "v0.19.0" } else { "v0.10.1" },
        ),
    })
}
