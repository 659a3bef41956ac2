//! The shipped example models (`models/*/request.json`), built in Rust and sealed.
//!
//! Shapes follow the Qwen3 / Qwen3.5 families of rules 7: f16 activations
//! `[tokens, hidden_size]`, token ids `u32`, safetensors dense weights, a CUDA device with
//! linear and 64 KiB paged storage, and the standard operation contracts.
#![allow(dead_code)]

use jointplan::request::*;
use serde_json::json;

use super::model_fixtures::*;
use super::model_parts::*;
use super::operations::*;

/// `models/tiny`: token embedding, RMS norm and the logits projection of a 64-wide toy
/// model (vocabulary 256) on the reference device.
pub fn tiny() -> PlanRequest {
    let (hidden, vocab, tokens) = (64u64, 256u64, 16u64);
    let capabilities: Vec<String> = ["token_embedding", "rms_norm", "dense_linear"]
        .iter()
        .map(|op| cap(op))
        .collect();
    let caps: Vec<&str> = capabilities.iter().map(String::as_str).collect();
    let device = device(
        "device.reference.0",
        DeviceClass::Reference,
        64 * MIB,
        &caps,
    );
    let mut b = RequestBuilder::new(
        "family.tiny.dense",
        json!({"hidden_size": hidden, "vocab_size": vocab, "rms_norm_eps": 1e-6, "tie_word_embeddings": false}),
        "weight-format.safetensors.dense",
        "weight-layout.dense",
        device,
        policy("runtime-policy.tiny", 32 * MIB, MIB, 4, 512),
    );
    let embed = simple(&mut b, op_token_embedding());
    let norm = simple(&mut b, op_rms_norm());
    let linear = simple(&mut b, op_dense_linear());
    b.program_input("value.input.token_ids", tensor(&[tokens], ElementType::U32));
    b.dense_weight(
        "weight.embed_tokens",
        "value.weight.embed_tokens",
        &[vocab, hidden],
        F16,
        "model.embed_tokens.weight",
    );
    b.dense_weight(
        "weight.final_norm",
        "value.weight.final_norm",
        &[hidden],
        F16,
        "model.norm.weight",
    );
    b.dense_weight(
        "weight.lm_head",
        "value.weight.lm_head",
        &[vocab, hidden],
        F16,
        "lm_head.weight",
    );
    b.node(
        "block.embedding",
        "node.embedding",
        "operation.token_embedding",
        attrs(&[
            ("hidden_size", unsigned(hidden)),
            ("vocab_size", unsigned(vocab)),
        ]),
        Some("value.input.token_ids"),
        &["value.input.token_ids", "value.weight.embed_tokens"],
        &[(
            "value.hidden.embedding",
            activation(tokens, hidden),
            Placement::Own,
        )],
        None,
        vec![estimate(&embed, None, None, None)],
    );
    b.node(
        "block.head",
        "node.final_norm",
        "operation.rms_norm",
        attrs(&[("epsilon", epsilon())]),
        Some("value.hidden.embedding"),
        &["value.hidden.embedding", "value.weight.final_norm"],
        &[(
            "value.output.final_hidden",
            activation(tokens, hidden),
            Placement::Own,
        )],
        None,
        vec![estimate(&norm, None, None, None)],
    );
    b.node(
        "block.head",
        "node.logits",
        "operation.dense_linear",
        attrs(&[
            ("in_features", unsigned(hidden)),
            ("out_features", unsigned(vocab)),
        ]),
        Some("value.output.final_hidden"),
        &["value.output.final_hidden", "value.weight.lm_head"],
        &[(
            "value.output.logits",
            activation(tokens, vocab),
            Placement::Own,
        )],
        Some("provider.reference.dense_linear.f16"),
        vec![estimate(&linear, None, None, None)],
    );
    b.program_output("value.output.logits");
    b.finish()
}

/// `models/decoder-2layer`: a two-layer Qwen3-style decoder whose layers keep their
/// token-scaled KV states side by side in one paged KV-cache resource. Layer 0 prefers the
/// paged attention kernel; layer 1 prefers a flash kernel that only reads a contiguous KV
/// cache, so it loses to the storage conflict on `resource/state/kv-cache` and falls back,
/// with `storage_incompatible` evidence.
pub fn decoder_2layer() -> PlanRequest {
    let s = &QWEN3_SMALL;
    let device = cuda_device(&DECODER_OPERATIONS);
    let device_id = device.id.clone();
    let mut policy = policy("runtime-policy.cuda.decoder", 22 * GIB, GIB, 8, 2048);
    policy.reusable_execution = Some(uniform_query_reusable(policy.maximum_active_sequences));
    let mut b = RequestBuilder::new(
        "family.qwen3.dense",
        qwen3_config(s, 2),
        "weight-format.safetensors.dense",
        "weight-layout.qwen3.dense.packed_gate_up",
        device,
        policy,
    );
    let dense = dense_providers(&mut b);
    let attention_op = op_causal_paged_attention();
    let paged_attention = paged_attention_kernel(&attention_op, &device_id);
    let flash_attention = flash_attention_kernel(&attention_op, &device_id);
    b.add_operation(
        attention_op,
        vec![paged_attention.clone(), flash_attention.clone()],
    );

    embedding_and_head_weights(&mut b, s);
    embedding_node(&mut b, s, &dense.embed);
    // Both layers' K and V of one token sit side by side in one token slot of the shared
    // cache.
    let kv = |i: usize| KvPlacement {
        resource: "resource/state/kv-cache".to_owned(),
        offset_bytes: i as u64 * kv_bytes(s),
        bytes_per_token: 2 * kv_bytes(s),
    };
    for i in 0..2usize {
        let hidden_in: &'static str = if i == 0 {
            "value.hidden.embedding"
        } else {
            leak(format!("value.layer.{}.output", i - 1))
        };
        let preferred = if i == 0 { PAGED } else { FLASH };
        attention_layer(
            &mut b,
            s,
            i,
            hidden_in,
            &kv(i),
            Some(preferred),
            &[
                (&paged_attention, s.heads * 64),
                (&flash_attention, s.heads * 128),
            ],
        );
        feed_forward_nodes(&mut b, s, i, &dense.norm, &dense.swiglu, &dense.residual);
    }
    head_nodes(
        &mut b,
        s,
        "value.layer.1.output",
        &dense.norm,
        &dense.linear,
    );
    b.finish()
}

/// `models/hybrid-block`: one Qwen3.5-style hybrid layer: a gated-delta linear attention
/// with a zero-initialised, sequence-lifetime convolution and recurrent state, then the
/// SwiGLU feed-forward whose residual add writes in place of its input (may_alias).
pub fn hybrid_block() -> PlanRequest {
    let s = &QWEN3_SMALL;
    let d = DeltaShape {
        key_heads: 16,
        value_heads: 16,
        key_dim: 128,
        value_dim: 128,
        kernel: 4,
    };
    let ops = [
        "token_embedding",
        "rms_norm",
        "dense_linear",
        "dense_swiglu",
        "residual_add",
        "gated_delta_recurrent_attention",
    ];
    let device = cuda_device(&ops);
    let mut b = RequestBuilder::new(
        "family.qwen3_5.hybrid",
        json!({
            "architectures": ["Qwen3_5ForCausalLM"],
            "hidden_size": s.hidden, "intermediate_size": s.intermediate,
            "layer_types": ["linear_attention"], "linear_conv_kernel_dim": d.kernel,
            "linear_key_head_dim": d.key_dim, "linear_num_key_heads": d.key_heads,
            "linear_num_value_heads": d.value_heads, "linear_value_head_dim": d.value_dim,
            "num_hidden_layers": 1, "rms_norm_eps": 1e-6, "vocab_size": s.vocab
        }),
        "weight-format.safetensors.dense",
        "weight-layout.qwen3_5.dense_hybrid.packed_gate_up",
        device,
        policy("runtime-policy.cuda.hybrid", 22 * GIB, GIB, 8, 2048),
    );
    let dense = dense_providers(&mut b);
    let delta = simple(&mut b, op_gated_delta());
    embedding_and_head_weights(&mut b, s);
    embedding_node(&mut b, s, &dense.embed);
    gated_delta_layer(&mut b, s, &d, 0, "value.hidden.embedding", &delta, true);
    feed_forward_nodes(&mut b, s, 0, &dense.norm, &dense.swiglu, &dense.residual);
    head_nodes(
        &mut b,
        s,
        "value.layer.0.output",
        &dense.norm,
        &dense.linear,
    );
    b.finish()
}

/// Every shipped model, by folder name.
pub fn shipped_models() -> Vec<(&'static str, PlanRequest)> {
    vec![
        ("tiny", tiny()),
        ("decoder-2layer", decoder_2layer()),
        ("hybrid-block", hybrid_block()),
    ]
}
