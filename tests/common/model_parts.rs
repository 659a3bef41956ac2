//! Parts of the shipped example models shared with the request generator: the Qwen3-small
//! decoder shape, the CUDA device, the embedding, head, feed-forward and attention nodes,
//! the attention kernels and the reusable-execution policy.
#![allow(dead_code)]

use jointplan::request::*;
use serde_json::json;

use super::model_fixtures::*;
use super::operations::*;

/// The dimensions of a Qwen3-style dense decoder.
pub struct DecoderShape {
    /// Hidden size (model width).
    pub hidden: u64,
    /// Query heads.
    pub heads: u64,
    /// Key/value heads.
    pub kv_heads: u64,
    /// Head dimension.
    pub head_dim: u64,
    /// Feed-forward intermediate size.
    pub intermediate: u64,
    /// Vocabulary size.
    pub vocab: u64,
    /// Tokens scheduled per step (activation rows).
    pub tokens: u64,
    /// Maximum context tokens (KV-cache capacity).
    pub context: u64,
}

pub const QWEN3_SMALL: DecoderShape = DecoderShape {
    hidden: 1024,
    heads: 16,
    kv_heads: 8,
    head_dim: 128,
    intermediate: 3072,
    vocab: 151_936,
    tokens: 16,
    context: 32_768,
};

pub fn cuda_device(ops: &[&str]) -> Device {
    let mut capabilities: Vec<String> = ops.iter().map(|op| cap(op)).collect();
    capabilities.push("capability.device.reusable_execution.v1".to_owned());
    let caps: Vec<&str> = capabilities.iter().map(String::as_str).collect();
    device("device.cuda.0", DeviceClass::Accelerator, 24 * GIB, &caps)
}

pub fn embedding_and_head_weights(b: &mut RequestBuilder, s: &DecoderShape) {
    b.program_input(
        "value.input.token_ids",
        tensor(&[s.tokens], ElementType::U32),
    );
    b.dense_weight(
        "weight.embed_tokens",
        "value.weight.embed_tokens",
        &[s.vocab, s.hidden],
        F16,
        "model.embed_tokens.weight",
    );
    b.dense_weight(
        "weight.final_norm",
        "value.weight.final_norm",
        &[s.hidden],
        F16,
        "model.norm.weight",
    );
    b.dense_weight(
        "weight.lm_head",
        "value.weight.lm_head",
        &[s.vocab, s.hidden],
        F16,
        "lm_head.weight",
    );
}

pub fn embedding_node(b: &mut RequestBuilder, s: &DecoderShape, embed: &ProviderDescriptor) {
    b.node(
        "block.embedding",
        "node.embedding",
        "operation.token_embedding",
        attrs(&[
            ("hidden_size", unsigned(s.hidden)),
            ("vocab_size", unsigned(s.vocab)),
        ]),
        Some("value.input.token_ids"),
        &["value.input.token_ids", "value.weight.embed_tokens"],
        &[(
            "value.hidden.embedding",
            activation(s.tokens, s.hidden),
            Placement::Own,
        )],
        None,
        vec![estimate(embed, None, None, None)],
    );
}

pub fn head_nodes(
    b: &mut RequestBuilder,
    s: &DecoderShape,
    last: &'static str,
    norm: &ProviderDescriptor,
    linear: &ProviderDescriptor,
) {
    b.node(
        "block.head",
        "node.final_norm",
        "operation.rms_norm",
        attrs(&[("epsilon", epsilon())]),
        Some(last),
        &[last, "value.weight.final_norm"],
        &[(
            "value.output.final_hidden",
            activation(s.tokens, s.hidden),
            Placement::Own,
        )],
        None,
        vec![estimate(norm, None, None, None)],
    );
    b.node(
        "block.head",
        "node.logits",
        "operation.dense_linear",
        attrs(&[
            ("in_features", unsigned(s.hidden)),
            ("out_features", unsigned(s.vocab)),
        ]),
        Some("value.output.final_hidden"),
        &["value.output.final_hidden", "value.weight.lm_head"],
        &[(
            "value.output.logits",
            activation(s.tokens, s.vocab),
            Placement::Own,
        )],
        None,
        vec![estimate(
            linear,
            Some(scratch_tokens(s.vocab * 4)),
            None,
            None,
        )],
    );
    b.program_output("value.output.logits");
}

/// The post-attention norm, SwiGLU feed-forward and in-place residual add of layer `i`,
/// reading the mixer output `value.layer.{i}.attention`.
pub fn feed_forward_nodes(
    b: &mut RequestBuilder,
    s: &DecoderShape,
    i: usize,
    norm: &ProviderDescriptor,
    swiglu: &ProviderDescriptor,
    residual: &ProviderDescriptor,
) {
    let mixed: &'static str = leak(format!("value.layer.{i}.attention"));
    feed_forward_from(b, s, i, mixed, true, &[norm, swiglu, residual]);
}

/// The post-attention norm, SwiGLU feed-forward and residual add of layer `i` reading
/// `mixed`; the residual writes `value.layer.{i}.output` in place of `mixed` when
/// `in_place`, else on its own resource. `providers` are the norm, SwiGLU and residual ones.
pub fn feed_forward_from(
    b: &mut RequestBuilder,
    s: &DecoderShape,
    i: usize,
    mixed: &'static str,
    in_place: bool,
    providers: &[&ProviderDescriptor; 3],
) {
    let [norm, swiglu, residual] = *providers;
    let l = |name: &str| format!("value.weight.layer.{i}.{name}");
    let w = |name: &str| format!("weight.layer.{i}.{name}");
    let hf = |name: &str| format!("model.layers.{i}.{name}.weight");
    b.dense_weight(
        &w("post_attention_norm"),
        &l("post_attention_norm"),
        &[s.hidden],
        F16,
        &hf("post_attention_layernorm"),
    );
    b.dense_weight(
        &w("mlp.gate_up"),
        &l("mlp.gate_up"),
        &[2, s.intermediate, s.hidden],
        F16,
        &hf("mlp.gate_up_proj"),
    );
    b.dense_weight(
        &w("mlp.down"),
        &l("mlp.down"),
        &[s.hidden, s.intermediate],
        F16,
        &hf("mlp.down_proj"),
    );
    let normed: &'static str = leak(format!("value.layer.{i}.post_attention_norm"));
    let mlp: &'static str = leak(format!("value.layer.{i}.mlp"));
    let out: &'static str = leak(format!("value.layer.{i}.output"));
    let block = format!("block.layer.{i}");
    b.node(
        &block,
        &format!("node.layer.{i}.post_attention_norm"),
        "operation.rms_norm",
        attrs(&[("epsilon", epsilon())]),
        Some(mixed),
        &[mixed, &l("post_attention_norm")],
        &[(normed, activation(s.tokens, s.hidden), Placement::Own)],
        None,
        vec![estimate(norm, None, None, None)],
    );
    b.node(
        &block,
        &format!("node.layer.{i}.feed_forward"),
        "operation.dense_swiglu",
        attrs(&[
            ("hidden_size", unsigned(s.hidden)),
            ("intermediate_size", unsigned(s.intermediate)),
        ]),
        Some(normed),
        &[normed, &l("mlp.gate_up"), &l("mlp.down")],
        &[(mlp, activation(s.tokens, s.hidden), Placement::Own)],
        None,
        vec![estimate(
            swiglu,
            Some(scratch_tokens(2 * s.intermediate * 2)),
            None,
            None,
        )],
    );
    b.node(
        &block,
        &format!("node.layer.{i}.residual"),
        "operation.residual_add",
        attrs(&[]),
        Some(mixed),
        &[mixed, mlp],
        &[(
            out,
            activation(s.tokens, s.hidden),
            if in_place {
                Placement::InPlaceOf(mixed)
            } else {
                Placement::Own
            },
        )],
        None,
        vec![estimate(residual, None, None, None)],
    );
}

pub fn leak(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

/// Bytes of one token's K and V of one layer: `[2, kv_heads, head_dim]` f16.
pub fn kv_bytes(s: &DecoderShape) -> u64 {
    2 * s.kv_heads * s.head_dim * 2
}

/// Where a layer's token-scaled KV state lives.
pub struct KvPlacement {
    /// Its resource (shared by several layers or its own).
    pub resource: String,
    /// Its offset in the resource.
    pub offset_bytes: u64,
    /// Bytes per token of the whole token slot (every layer sharing the resource).
    pub bytes_per_token: u64,
}

/// The paged causal attention of layer `i` reading `hidden_in`: its KV state at `kv`, its
/// weights, and a node whose candidates are `providers` (each with its scratch bytes per
/// token), preferring `preferred`. Writes `value.layer.{i}.attention`.
pub fn attention_layer(
    b: &mut RequestBuilder,
    s: &DecoderShape,
    i: usize,
    hidden_in: &'static str,
    kv: &KvPlacement,
    preferred: Option<&str>,
    providers: &[(&ProviderDescriptor, u64)],
) {
    let (q_features, kv_features) = (s.heads * s.head_dim, s.kv_heads * s.head_dim);
    b.state(
        &format!("state.layer.{i}.kv"),
        &format!("value.state.layer.{i}.kv"),
        tensor(&[2, s.kv_heads, s.head_dim], F16),
        StateLifetime::Sequence,
        StateCapacityDemand::TokenScaled {
            bytes_per_token: kv.bytes_per_token,
            maximum_tokens: s.context,
        },
        StateInitialization::None,
        &kv.resource,
        kv.offset_bytes,
    );
    let l = |name: &str| format!("value.weight.layer.{i}.{name}");
    let w = |name: &str| format!("weight.layer.{i}.{name}");
    let hf = |name: &str| format!("model.layers.{i}.{name}.weight");
    b.dense_weight(
        &w("input_norm"),
        &l("input_norm"),
        &[s.hidden],
        F16,
        &hf("input_layernorm"),
    );
    b.dense_weight(
        &w("attention.q_proj"),
        &l("attention.q_proj"),
        &[q_features, s.hidden],
        F16,
        &hf("self_attn.q_proj"),
    );
    b.dense_weight(
        &w("attention.k_proj"),
        &l("attention.k_proj"),
        &[kv_features, s.hidden],
        F16,
        &hf("self_attn.k_proj"),
    );
    b.dense_weight(
        &w("attention.v_proj"),
        &l("attention.v_proj"),
        &[kv_features, s.hidden],
        F16,
        &hf("self_attn.v_proj"),
    );
    b.dense_weight(
        &w("attention.o_proj"),
        &l("attention.o_proj"),
        &[s.hidden, q_features],
        F16,
        &hf("self_attn.o_proj"),
    );
    b.dense_weight(
        &w("attention.q_norm"),
        &l("attention.q_norm"),
        &[s.head_dim],
        F16,
        &hf("self_attn.q_norm"),
    );
    b.dense_weight(
        &w("attention.k_norm"),
        &l("attention.k_norm"),
        &[s.head_dim],
        F16,
        &hf("self_attn.k_norm"),
    );
    let names = [
        hidden_in.to_owned(),
        l("input_norm"),
        l("attention.q_proj"),
        l("attention.k_proj"),
        l("attention.v_proj"),
        l("attention.o_proj"),
        l("attention.q_norm"),
        l("attention.k_norm"),
        format!("value.state.layer.{i}.kv"),
    ];
    let inputs: Vec<&str> = names.iter().map(String::as_str).collect();
    let attention_workspaces = |p: &ProviderDescriptor, scratch_per_token: u64| {
        estimate(
            p,
            Some(workspace(
                WorkspaceSizeFormula::Affine {
                    fixed_bytes: MIB,
                    bytes_per_sequence: 0,
                    bytes_per_token: scratch_per_token,
                },
                WorkspaceScope::Invocation,
            )),
            Some(workspace(
                WorkspaceSizeFormula::ActualSequences {
                    bytes_per_sequence: 256,
                },
                WorkspaceScope::Invocation,
            )),
            None,
        )
    };
    b.node(
        &format!("block.layer.{i}"),
        &format!("node.layer.{i}.attention"),
        "operation.causal_paged_attention",
        attrs(&[
            ("hidden_size", unsigned(s.hidden)),
            ("query_heads", unsigned(s.heads)),
            ("key_value_heads", unsigned(s.kv_heads)),
            ("head_dim", unsigned(s.head_dim)),
            ("query_features", unsigned(q_features)),
            ("query_projection_features", unsigned(q_features)),
            ("kv_features", unsigned(kv_features)),
            ("rope_dim", unsigned(s.head_dim)),
            ("maximum_context_tokens", unsigned(s.context)),
            ("layer_index", unsigned(i as u64)),
            (
                "rope_theta",
                SemanticValue::Rational(rational(1_000_000, 1)),
            ),
            ("rope_interleaved", SemanticValue::Bool(false)),
            ("output_gate", SemanticValue::Bool(false)),
            ("causal", SemanticValue::Bool(true)),
            ("epsilon", epsilon()),
        ]),
        Some(hidden_in),
        &inputs,
        &[(
            leak(format!("value.layer.{i}.attention")),
            activation(s.tokens, s.hidden),
            Placement::Own,
        )],
        preferred,
        providers
            .iter()
            .map(|(p, scratch)| attention_workspaces(p, *scratch))
            .collect(),
    );
}

/// The paged attention kernel's provider id.
pub const PAGED: &str = "provider.cuda.causal_paged_attention.f16";
/// The flash attention kernel's provider id.
pub const FLASH: &str = "provider.cuda.causal_paged_attention.f16.flash";

/// The operations of a Qwen3-style dense decoder (its CUDA device offers their
/// capabilities).
pub const DECODER_OPERATIONS: [&str; 6] = [
    "token_embedding",
    "rms_norm",
    "dense_linear",
    "dense_swiglu",
    "residual_add",
    "causal_paged_attention",
];

/// The paged attention kernel on `device`: reads the KV cache (input 8) only as
/// `fixed_block(65536)+paged(65536)`.
pub fn paged_attention_kernel(op: &OperationDescriptor, device: &DeviceId) -> ProviderDescriptor {
    provider(
        op,
        PAGED,
        device,
        "resource-estimator.cuda.causal_paged_attention.f16",
        &[(ValueRole::Input, 8, vec![paged_64k()])],
    )
}

/// The flash attention kernel on `device`: reads the KV cache (input 8) only as
/// linear+contiguous.
pub fn flash_attention_kernel(op: &OperationDescriptor, device: &DeviceId) -> ProviderDescriptor {
    provider(
        op,
        FLASH,
        device,
        "resource-estimator.cuda.causal_paged_attention.f16.flash",
        &[(ValueRole::Input, 8, vec![LINEAR])],
    )
}

/// The Hugging Face style configuration of a Qwen3 dense decoder of `layers` layers.
pub fn qwen3_config(s: &DecoderShape, layers: usize) -> serde_json::Value {
    json!({
        "architectures": ["Qwen3ForCausalLM"],
        "head_dim": s.head_dim, "hidden_size": s.hidden, "intermediate_size": s.intermediate,
        "max_position_embeddings": s.context, "num_attention_heads": s.heads,
        "num_hidden_layers": layers, "num_key_value_heads": s.kv_heads, "rms_norm_eps": 1e-6,
        "rope_theta": 1_000_000, "vocab_size": s.vocab
    })
}

/// Reusable execution with two lanes and uniform-query buckets of 1, 2 and 4 sequences and
/// tokens (those of at most `maximum_sequences` sequences).
pub fn uniform_query_reusable(maximum_sequences: u32) -> ReusableExecutionPolicy {
    ReusableExecutionPolicy {
        maximum_reusable_lanes: 2,
        buckets: [(1u32, 1u64), (2, 2), (4, 4)]
            .into_iter()
            .filter(|(sequences, _)| *sequences <= maximum_sequences)
            .map(|(sequences, tokens)| ReusableExecutionBucket {
                bucket_id: String::new(),
                class_id: id("uniform-query"),
                capacity: BucketCapacity {
                    maximum_sequences: sequences,
                    maximum_tokens: tokens,
                    maximum_pages: 1,
                },
            })
            .collect(),
    }
}

/// The single-provider operations of a dense decoder layer stack.
pub struct DenseProviders {
    /// Token embedding.
    pub embed: ProviderDescriptor,
    /// RMS norm.
    pub norm: ProviderDescriptor,
    /// Dense linear (logits).
    pub linear: ProviderDescriptor,
    /// SwiGLU feed-forward.
    pub swiglu: ProviderDescriptor,
    /// Residual add.
    pub residual: ProviderDescriptor,
}

/// Adds the embedding, norm, linear, SwiGLU and residual operations, one CUDA provider each.
pub fn dense_providers(b: &mut RequestBuilder) -> DenseProviders {
    DenseProviders {
        embed: simple(b, op_token_embedding()),
        norm: simple(b, op_rms_norm()),
        linear: simple(b, op_dense_linear()),
        swiglu: simple(b, op_dense_swiglu()),
        residual: simple(b, op_residual_add()),
    }
}

/// The linear-attention dimensions of a Qwen3.5-style gated-delta layer.
pub struct DeltaShape {
    /// Key heads.
    pub key_heads: u64,
    /// Value heads.
    pub value_heads: u64,
    /// Key head dimension.
    pub key_dim: u64,
    /// Value head dimension.
    pub value_dim: u64,
    /// Causal convolution taps.
    pub kernel: u64,
}

impl DeltaShape {
    /// Channels of the causal convolution: Q, K and V features.
    pub fn conv_channels(&self) -> u64 {
        self.key_heads * self.key_dim * 2 + self.value_heads * self.value_dim
    }
}

/// The gated-delta linear attention of layer `i` reading `hidden_in`: its zero-initialised,
/// sequence-lifetime convolution and recurrent states (`resource/state/layer.{i}.conv`,
/// `.delta`), its weights, and a node served by `delta` (preferred when `preferred`).
/// Writes `value.layer.{i}.attention`.
pub fn gated_delta_layer(
    b: &mut RequestBuilder,
    s: &DecoderShape,
    d: &DeltaShape,
    i: usize,
    hidden_in: &'static str,
    delta: &ProviderDescriptor,
    preferred: bool,
) {
    let (key_heads, value_heads, key_dim, value_dim, kernel) =
        (d.key_heads, d.value_heads, d.key_dim, d.value_dim, d.kernel);
    let conv_channels = d.conv_channels();
    let value_features = value_heads * value_dim;
    b.state(
        &format!("state.layer.{i}.conv"),
        &format!("value.state.layer.{i}.conv"),
        tensor(&[conv_channels, kernel - 1], F16),
        StateLifetime::Sequence,
        StateCapacityDemand::FixedPerScope,
        StateInitialization::Zero,
        &format!("resource/state/layer.{i}.conv"),
        0,
    );
    b.state(
        &format!("state.layer.{i}.delta"),
        &format!("value.state.layer.{i}.delta"),
        tensor(&[value_heads, key_dim, value_dim], F32),
        StateLifetime::Sequence,
        StateCapacityDemand::FixedPerScope,
        StateInitialization::Zero,
        &format!("resource/state/layer.{i}.delta"),
        0,
    );
    let l = |name: &str| format!("value.weight.layer.{i}.{name}");
    let w = |name: &str| format!("weight.layer.{i}.{name}");
    let hf = |name: &str| format!("model.layers.{i}.{name}");
    b.dense_weight(
        &w("input_norm"),
        &l("input_norm"),
        &[s.hidden],
        F16,
        &hf("input_layernorm.weight"),
    );
    b.dense_weight(
        &w("linear_attn.in_proj_qkv"),
        &l("linear_attn.in_proj_qkv"),
        &[conv_channels, s.hidden],
        F16,
        &hf("linear_attn.in_proj_qkv.weight"),
    );
    b.dense_weight(
        &w("linear_attn.in_proj_z"),
        &l("linear_attn.in_proj_z"),
        &[value_features, s.hidden],
        F16,
        &hf("linear_attn.in_proj_z.weight"),
    );
    b.dense_weight(
        &w("linear_attn.in_proj_b"),
        &l("linear_attn.in_proj_b"),
        &[value_heads, s.hidden],
        F16,
        &hf("linear_attn.in_proj_b.weight"),
    );
    b.dense_weight(
        &w("linear_attn.in_proj_a"),
        &l("linear_attn.in_proj_a"),
        &[value_heads, s.hidden],
        F16,
        &hf("linear_attn.in_proj_a.weight"),
    );
    b.dense_weight(
        &w("linear_attn.conv1d"),
        &l("linear_attn.conv1d"),
        &[conv_channels, kernel],
        F16,
        &hf("linear_attn.conv1d.weight"),
    );
    b.dense_weight(
        &w("linear_attn.dt_bias"),
        &l("linear_attn.dt_bias"),
        &[value_heads],
        F16,
        &hf("linear_attn.dt_bias"),
    );
    b.dense_weight(
        &w("linear_attn.a_log"),
        &l("linear_attn.a_log"),
        &[value_heads],
        F32,
        &hf("linear_attn.A_log"),
    );
    b.dense_weight(
        &w("linear_attn.norm"),
        &l("linear_attn.norm"),
        &[value_dim],
        F16,
        &hf("linear_attn.norm.weight"),
    );
    b.dense_weight(
        &w("linear_attn.out_proj"),
        &l("linear_attn.out_proj"),
        &[s.hidden, value_features],
        F16,
        &hf("linear_attn.out_proj.weight"),
    );
    let names = [
        hidden_in.to_owned(),
        l("input_norm"),
        l("linear_attn.in_proj_qkv"),
        l("linear_attn.in_proj_z"),
        l("linear_attn.in_proj_b"),
        l("linear_attn.in_proj_a"),
        l("linear_attn.conv1d"),
        l("linear_attn.dt_bias"),
        l("linear_attn.a_log"),
        l("linear_attn.norm"),
        l("linear_attn.out_proj"),
        format!("value.state.layer.{i}.conv"),
        format!("value.state.layer.{i}.delta"),
    ];
    let inputs: Vec<&str> = names.iter().map(String::as_str).collect();
    b.node(
        &format!("block.layer.{i}"),
        &format!("node.layer.{i}.attention"),
        "operation.gated_delta_recurrent_attention",
        attrs(&[
            ("hidden_size", unsigned(s.hidden)),
            ("key_heads", unsigned(key_heads)),
            ("value_heads", unsigned(value_heads)),
            ("key_head_dim", unsigned(key_dim)),
            ("value_head_dim", unsigned(value_dim)),
            ("conv_kernel", unsigned(kernel)),
            ("layer_index", unsigned(i as u64)),
            ("epsilon", epsilon()),
        ]),
        Some(hidden_in),
        &inputs,
        &[(
            leak(format!("value.layer.{i}.attention")),
            activation(s.tokens, s.hidden),
            Placement::Own,
        )],
        preferred.then_some(delta.provider_id.as_str()),
        vec![estimate(
            delta,
            Some(workspace(
                WorkspaceSizeFormula::Affine {
                    fixed_bytes: 2 * MIB,
                    bytes_per_sequence: 0,
                    bytes_per_token: conv_channels * 4,
                },
                WorkspaceScope::Invocation,
            )),
            None,
            None,
        )],
    );
}
