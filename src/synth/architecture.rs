//! The architecture the synthesizer builds a program from: per layer a token mixer and a
//! feed-forward kind, and the dimensions of each, validated and derived from a model
//! configuration by [`super::ModelConfig::architecture`].

/// The kind of token mixer of one layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum MixerKind {
    /// Grouped-query softmax attention with a KV cache.
    Attention,
    /// Multi-head latent attention with a compressed KV cache.
    LatentAttention,
    /// Gated DeltaNet linear attention with convolution and recurrent states.
    GatedDelta,
}

/// The kind of feed-forward block of one layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum FeedForwardKind {
    /// A dense SwiGLU MLP of `intermediate_size`.
    Dense,
    /// A router, optional shared expert and routed experts.
    Routed,
}

/// One decoder layer of the architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerSpec {
    /// Token mixer.
    pub mixer: MixerKind,
    /// Feed-forward block.
    pub feed_forward: FeedForwardKind,
    /// Sliding attention window of this layer (its KV state holds at most this many
    /// tokens); `None`: full attention. Set by the architecture registry.
    pub window: Option<u64>,
}

/// The gate nonlinearity of a gated MLP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateActivation {
    /// SiLU (SwiGLU: Llama, Qwen, Phi-3, Mistral).
    Silu,
    /// GELU, tanh approximation (GeGLU: Gemma).
    GeluTanh,
}

/// Where a layer's norms sit and which norm it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NormPlacement {
    /// An RMSNorm before each sublayer (Llama, Qwen, Mistral, DeepSeek, ...).
    Pre,
    /// An RMSNorm after each sublayer, on its output before the residual add, and none
    /// before it (OLMo 2: `post_attention_layernorm`, `post_feedforward_layernorm`).
    Post,
    /// A LayerNorm with weight and bias before each sublayer and at the end (PhiMoE).
    PreLayerNorm,
}

/// Normalisation of queries and keys before attention.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QkNorm {
    /// None built (or one whose weights the registry entry states as not built).
    None,
    /// An RMSNorm of each head, `head_dim` weights each for q and k (GLM-4.5 with
    /// `use_qk_norm`; Qwen3-Next builds it with its gated attention).
    PerHead,
    /// An RMSNorm over the whole q and k projections (OLMo 2: `q_features` and
    /// `kv_features` weights).
    Projection,
}

/// Grouped-query attention dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionDims {
    /// Query heads.
    pub query_heads: u64,
    /// Key/value heads.
    pub key_value_heads: u64,
    /// Head dimension.
    pub head_dim: u64,
    /// Rotated dimensions per head.
    pub rope_dim: u64,
    /// Whether the output is gated (doubling the query projection).
    pub output_gate: bool,
}

/// Multi-head latent attention dimensions (DeepSeek-V2/V3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LatentAttentionDims {
    /// Query heads.
    pub query_heads: u64,
    /// Compressed KV rank.
    pub kv_lora_rank: u64,
    /// Compressed query rank (`None`: a full query projection).
    pub q_lora_rank: Option<u64>,
    /// Non-rotary query/key head dimension.
    pub qk_nope_head_dim: u64,
    /// Rotary query/key head dimension.
    pub qk_rope_head_dim: u64,
    /// Value head dimension.
    pub v_head_dim: u64,
}

/// Gated DeltaNet dimensions (Qwen3-Next linear attention).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GatedDeltaDims {
    /// Key heads.
    pub key_heads: u64,
    /// Value heads.
    pub value_heads: u64,
    /// Key head dimension.
    pub key_head_dim: u64,
    /// Value head dimension.
    pub value_head_dim: u64,
    /// Convolution kernel width.
    pub conv_kernel: u64,
}

impl GatedDeltaDims {
    /// Key features (`key_heads * key_head_dim`).
    pub fn key_features(&self) -> u64 {
        self.key_heads * self.key_head_dim
    }
    /// Value features (`value_heads * value_head_dim`).
    pub fn value_features(&self) -> u64 {
        self.value_heads * self.value_head_dim
    }
    /// Channels of the causal convolution (q, k and v: `2 * key + value` features).
    pub fn conv_features(&self) -> u64 {
        2 * self.key_features() + self.value_features()
    }
}

/// Mixture-of-experts dimensions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExpertDims {
    /// Routed experts per layer.
    pub routed_experts: u64,
    /// Experts per token.
    pub experts_per_token: u64,
    /// Width of one routed expert.
    pub expert_intermediate_size: u64,
    /// Width of the shared expert (0: none).
    pub shared_intermediate_size: u64,
    /// Sigmoid (true) or softmax (false) router scores.
    pub sigmoid_scoring: bool,
    /// Whether the top-k weights are renormalized.
    pub normalize_top_k: bool,
    /// Scale of the routed sum.
    pub routed_scaling_factor: f64,
    /// Expert groups for group-limited routing (1: none).
    pub expert_groups: u64,
    /// Groups a token may route into.
    pub top_k_groups: u64,
}

/// RoPE scaling, reduced to what kernels need.
#[derive(Clone, Debug, PartialEq)]
pub struct RopeScaling {
    /// `rope_type` (`llama3`, `yarn`, `linear`, `dynamic`, `longrope`; the legacy `su` is
    /// read as `longrope`).
    pub kind: String,
    /// Scaling factor (`longrope`: `max_position_embeddings /
    /// original_max_position_embeddings`, the factor its attention scale is computed from).
    pub factor: f64,
}

/// The validated architecture of a configuration: everything the program needs.
#[derive(Clone, Debug, PartialEq)]
pub struct Architecture {
    /// Width of the residual stream.
    pub hidden_size: u64,
    /// Dense feed-forward width.
    pub intermediate_size: u64,
    /// Vocabulary size.
    pub vocab_size: u64,
    /// `max_position_embeddings` as the configuration states it.
    pub max_position_embeddings: u64,
    /// The longest context the model serves: the configuration's position keys and rope
    /// scaling by vLLM's rule (`ModelConfig::trained_context`), never a sliding window.
    pub trained_context: u64,
    /// Which keys and which rule set [`Self::trained_context`] (printed with it).
    pub trained_context_rule: String,
    /// RoPE base.
    pub rope_theta: f64,
    /// RoPE scaling, if any.
    pub rope_scaling: Option<RopeScaling>,
    /// RMSNorm epsilon.
    pub rms_norm_eps: f64,
    /// Whether the head reuses the embedding.
    pub tie_word_embeddings: bool,
    /// Sliding window, if any.
    pub sliding_window: Option<u64>,
    /// Grouped-query attention dims (for `Attention` layers).
    pub attention: AttentionDims,
    /// Latent attention dims, for MLA models.
    pub latent: Option<LatentAttentionDims>,
    /// Gated DeltaNet dims, for hybrids.
    pub gated_delta: Option<GatedDeltaDims>,
    /// Expert dims, for mixtures of experts.
    pub experts: Option<ExpertDims>,
    /// The layers, in order.
    pub layers: Vec<LayerSpec>,
    /// The checkpoint dtype named by the configuration.
    pub torch_dtype: Option<String>,
    /// Whether the query, key and value projections carry biases (Qwen2).
    pub attention_bias: bool,
    /// Whether the checkpoint stores q/k/v as one `qkv_proj` and gate/up as one
    /// `gate_up_proj` (Phi-3); the program splits them by rows.
    pub fused_projections: bool,
    /// The MLP's gate nonlinearity.
    pub gate_activation: GateActivation,
    /// Whether attention and MLP outputs are normalised before their residual adds
    /// (Gemma 2/3: four norms per layer).
    pub sandwich_norms: bool,
    /// Where the norms sit (pre, post, LayerNorm with bias).
    pub norm_placement: NormPlacement,
    /// How queries and keys are normalised.
    pub qk_norm: QkNorm,
    /// Whether the attention output projection carries a bias (gpt-oss, PhiMoE).
    pub output_bias: bool,
    /// Whether attention has one learned sink logit per query head (gpt-oss).
    pub attention_sinks: bool,
    /// Whether the router and the routed experts carry biases (gpt-oss).
    pub expert_biases: bool,
    /// Whether the checkpoint names the mixture `block_sparse_moe` with experts' `w1`
    /// (gate), `w3` (up) and `w2` (down) (PhiMoE); otherwise `mlp` with `gate_proj`,
    /// `up_proj` and `down_proj`.
    pub block_sparse_moe: bool,
    /// The multi-token-prediction modules built after the main layers (DeepSeek-V3's MTP,
    /// built only on request: `--speculative mtp`); empty otherwise. Each is one decoder
    /// layer of this kind with its own input norms and projection ([`crate::synth`]'s
    /// `speculative` option).
    pub mtp_layers: Vec<LayerSpec>,
}

impl Architecture {
    /// Every layer that holds per-sequence state, in order: the main layers, then the
    /// multi-token-prediction layers (whose KV cache an engine allocates beside the main
    /// model's when it loads them).
    pub fn cache_layers(&self) -> impl Iterator<Item = &LayerSpec> {
        self.layers.iter().chain(&self.mtp_layers)
    }

    /// Bytes of KV cache per token over all layers at `element_bytes` per element: grouped
    /// attention layers hold K and V (`2 * kv_heads * head_dim`), latent layers the
    /// compressed latent plus the rotary key (`kv_lora_rank + qk_rope_head_dim`), recurrent
    /// layers nothing per token.
    pub fn kv_bytes_per_token(&self, element_bytes: u64) -> Option<u64> {
        self.cache_layers().try_fold(0u64, |acc, layer| {
            let per_layer = match layer.mixer {
                MixerKind::Attention => 2u64
                    .checked_mul(self.attention.key_value_heads)?
                    .checked_mul(self.attention.head_dim)?
                    .checked_mul(element_bytes)?,
                MixerKind::LatentAttention => {
                    let latent = self.latent?;
                    (latent.kv_lora_rank + latent.qk_rope_head_dim).checked_mul(element_bytes)?
                }
                MixerKind::GatedDelta => 0,
            };
            acc.checked_add(per_layer)
        })
    }
}
