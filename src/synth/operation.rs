//! The operations a synthesized program uses and their contracts: each operation's input,
//! weight, state and output slots, attributes, workspace presence, descriptor (what the
//! capability catalog declares) and the kernel variants its providers implement.
//!
//! The providers of these operations are built in [`super::catalog`].

use super::kv_cache::KvCacheDtype;
use super::weights::WeightFormat;
use crate::request::{
    AliasPolicy, AttributeConstraint, AttributeId, AttributeSpec, CapabilityId, ContractVersion,
    DimensionConstraint, ElementType, LayoutConstraint, OperationDescriptor, OperationId,
    OracleSpec, Presence, ProviderRequirement, Rational, ResourceRequirements, TensorAccess,
    TensorContract, ValueKind,
};

use super::portable;

/// An operation of the synthesized programs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    /// Token ids to embeddings.
    TokenEmbedding,
    /// RMSNorm over the hidden axis.
    RmsNorm,
    /// RMSNorm of each head of a projection, in place (Qwen q/k norms).
    HeadRmsNorm,
    /// `x · Wᵀ`.
    DenseLinear,
    /// `x · Wᵀ + b` (Qwen2's query/key/value projections carry biases).
    BiasedDenseLinear,
    /// SwiGLU MLP with packed gate/up and down projections.
    DenseSwiglu,
    /// Causal grouped-query attention over a paged or contiguous KV cache.
    CausalPagedAttention,
    /// Causal multi-head latent attention over a compressed KV cache (DeepSeek MLA).
    CausalPagedLatentAttention,
    /// Gated DeltaNet linear attention with convolution and recurrent states.
    GatedDeltaRecurrentAttention,
    /// Mixture-of-experts router: top-k weights and indices per token.
    MoeRouter,
    /// A group of routed SwiGLU experts accumulating into the residual stream in place.
    RoutedExpertSwiglu,
    /// Residual add, in place over the residual stream.
    ResidualAdd,
    /// Output head over the last token of each sequence.
    LastTokenDenseLinear,
    /// LayerNorm with weight and bias over the hidden axis (PhiMoE).
    LayerNorm,
    /// Causal grouped-query attention with one learned sink logit per query head, whose
    /// softmax mass takes part in normalisation (gpt-oss).
    CausalPagedSinkAttention,
    /// Mixture-of-experts router with a bias on the expert scores (gpt-oss).
    BiasedMoeRouter,
    /// A group of routed SwiGLU experts with gate/up and down biases (gpt-oss).
    BiasedRoutedExpertSwiglu,
}

/// How a slot is bound: what the synthesizer puts there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotKind {
    /// A transient activation.
    Activation,
    /// A weight.
    Weight,
    /// A state (KV cache, recurrent state).
    State,
}

/// The kernel family of a provider; it decides formats, determinism and storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kernel {
    /// Dense f16/bf16 kernel.
    Dense,
    /// GPTQ int4 (Marlin) kernel.
    Gptq,
    /// GGUF block-quantized kernel.
    Gguf,
    /// Fused elementwise / normalization kernel.
    Fused,
    /// Attention over a paged KV cache.
    Paged,
    /// Attention over a contiguous KV cache.
    Contiguous,
    /// Chunked recurrent kernel reading any weight format.
    Chunked,
    /// Slow reference kernel: dense only, not replay-equivalent.
    Reference,
    /// FP8 scaled GEMM (CUTLASS `scaled_mm` class): fp8 weights, dynamically quantized
    /// fp8 activations.
    Fp8,
    /// INT8 scaled GEMM (W8A8).
    Int8,
    /// Marlin-class mixed-precision GEMM: int4/int8 weight-only groups (GPTQ, AWQ,
    /// compressed-tensors), dequantized in registers.
    Marlin,
    /// A dequantizing GEMM: bitsandbytes blocks expanded to 16 bits before the product.
    Dequant,
    /// MXFP4 fused-MoE kernel (routed experts).
    Mxfp4,
    /// NVFP4 block-scaled GEMM.
    Nvfp4,
}

/// The quantized kernel of a weight format (the one that reads its packed values), with
/// its variant name; `None` for the dense formats.
pub fn format_kernel(format: WeightFormat) -> Option<(&'static str, Kernel)> {
    use super::quantization::Method;
    match format {
        WeightFormat::DenseF16 | WeightFormat::DenseBf16 => None,
        WeightFormat::GptqInt4 => Some(("gptq_marlin", Kernel::Gptq)),
        WeightFormat::GgufQ4k | WeightFormat::Gguf(_) => Some(("gguf_mmq", Kernel::Gguf)),
        WeightFormat::Quantized(scheme) => Some(match scheme.method {
            Method::Fp8 => ("fp8", Kernel::Fp8),
            Method::Int8 => ("int8", Kernel::Int8),
            Method::IntWeightOnly => ("marlin", Kernel::Marlin),
            Method::Bnb4 | Method::Bnb8 => ("dequant", Kernel::Dequant),
            Method::Mxfp4 => ("mxfp4", Kernel::Mxfp4),
            Method::Nvfp4 => ("nvfp4", Kernel::Nvfp4),
        }),
    }
}

const ACTIVATION_TYPES: &[ElementType] = &[ElementType::F16, ElementType::Bf16];
const NORM_TYPES: &[ElementType] = &[ElementType::F16, ElementType::Bf16, ElementType::F32];

enum Dim {
    Exact(u64),
    Sym(&'static str),
}

struct Slot {
    dims: Vec<Dim>,
    types: &'static [ElementType],
    kind: SlotKind,
    access: TensorAccess,
    alias: AliasPolicy,
}

fn input(kind: SlotKind, types: &'static [ElementType], dims: Vec<Dim>) -> Slot {
    Slot {
        dims,
        types,
        kind,
        access: TensorAccess::Read,
        alias: AliasPolicy::NoAlias,
    }
}

fn act(dims: Vec<Dim>) -> Slot {
    input(SlotKind::Activation, ACTIVATION_TYPES, dims)
}

fn weight(dims: Vec<Dim>) -> Slot {
    input(SlotKind::Weight, ACTIVATION_TYPES, dims)
}

fn norm_weight(dims: Vec<Dim>) -> Slot {
    input(SlotKind::Weight, NORM_TYPES, dims)
}

fn state(types: &'static [ElementType], dims: Vec<Dim>) -> Slot {
    Slot {
        access: TensorAccess::ReadWrite,
        ..input(SlotKind::State, types, dims)
    }
}

fn output(types: &'static [ElementType], dims: Vec<Dim>, alias: AliasPolicy) -> Slot {
    Slot {
        dims,
        types,
        kind: SlotKind::Activation,
        access: TensorAccess::Write,
        alias,
    }
}

use Dim::{Exact, Sym};

const T: Dim = Sym("tokens");
const H: Dim = Sym("hidden_size");

enum Attr {
    Unsigned,
    Positive,
    Rational,
    Bool,
    True,
    Text(&'static [&'static str]),
}

impl Operation {
    /// Every operation, in id order (the catalog's tests walk them all).
    #[cfg(test)]
    pub const ALL: [Operation; 17] = [
        Self::BiasedDenseLinear,
        Self::BiasedMoeRouter,
        Self::BiasedRoutedExpertSwiglu,
        Self::CausalPagedAttention,
        Self::CausalPagedLatentAttention,
        Self::CausalPagedSinkAttention,
        Self::DenseLinear,
        Self::DenseSwiglu,
        Self::GatedDeltaRecurrentAttention,
        Self::HeadRmsNorm,
        Self::LastTokenDenseLinear,
        Self::LayerNorm,
        Self::MoeRouter,
        Self::ResidualAdd,
        Self::RmsNorm,
        Self::RoutedExpertSwiglu,
        Self::TokenEmbedding,
    ];

    /// The operation's short name (`causal_paged_attention`).
    pub fn name(self) -> &'static str {
        match self {
            Self::TokenEmbedding => "token_embedding",
            Self::RmsNorm => "rms_norm",
            Self::HeadRmsNorm => "head_rms_norm",
            Self::DenseLinear => "dense_linear",
            Self::BiasedDenseLinear => "biased_dense_linear",
            Self::DenseSwiglu => "dense_swiglu",
            Self::CausalPagedAttention => "causal_paged_attention",
            Self::CausalPagedLatentAttention => "causal_paged_latent_attention",
            Self::GatedDeltaRecurrentAttention => "gated_delta_recurrent_attention",
            Self::MoeRouter => "moe_router",
            Self::RoutedExpertSwiglu => "routed_expert_swiglu",
            Self::ResidualAdd => "residual_add",
            Self::LastTokenDenseLinear => "last_token_dense_linear",
            Self::LayerNorm => "layer_norm",
            Self::CausalPagedSinkAttention => "causal_paged_sink_attention",
            Self::BiasedMoeRouter => "biased_moe_router",
            Self::BiasedRoutedExpertSwiglu => "biased_routed_expert_swiglu",
        }
    }

    /// `operation.{name}`.
    pub fn id(self) -> OperationId {
        portable(format!("operation.{}", self.name()))
    }

    /// The contract version (attention 2.0, gated delta 4.0, the others 1.0).
    pub fn version(self) -> ContractVersion {
        match self {
            Self::CausalPagedAttention | Self::CausalPagedSinkAttention => {
                ContractVersion::new(2, 0)
            }
            Self::GatedDeltaRecurrentAttention => ContractVersion::new(4, 0),
            _ => ContractVersion::new(1, 0),
        }
    }

    /// `capability.operation.{name}`, required of every provider.
    pub fn capability(self) -> CapabilityId {
        portable(format!("capability.operation.{}", self.name()))
    }

    /// This operation's slots with `extra` weight inputs inserted at input `position`.
    fn with_weights(self, position: usize, extra: Vec<Slot>) -> (Vec<Slot>, Vec<Slot>) {
        let (mut inputs, outputs) = self.slots();
        inputs.splice(position..position, extra);
        (inputs, outputs)
    }

    fn slots(self) -> (Vec<Slot>, Vec<Slot>) {
        let may0 = AliasPolicy::MayAlias { tensor_index: 0 };
        let no = AliasPolicy::NoAlias;
        match self {
            Self::TokenEmbedding => (
                vec![
                    input(SlotKind::Activation, &[ElementType::U32], vec![T]),
                    weight(vec![Sym("vocab_size"), H]),
                ],
                vec![output(ACTIVATION_TYPES, vec![T, H], no)],
            ),
            Self::RmsNorm => (
                vec![act(vec![T, H]), norm_weight(vec![H])],
                vec![output(ACTIVATION_TYPES, vec![T, H], no)],
            ),
            Self::LayerNorm => (
                vec![act(vec![T, H]), norm_weight(vec![H]), norm_weight(vec![H])],
                vec![output(ACTIVATION_TYPES, vec![T, H], no)],
            ),
            Self::HeadRmsNorm => (
                vec![
                    act(vec![T, Sym("features")]),
                    norm_weight(vec![Sym("head_dim")]),
                ],
                vec![output(ACTIVATION_TYPES, vec![T, Sym("features")], may0)],
            ),
            Self::DenseLinear => (
                vec![
                    act(vec![T, Sym("in_features")]),
                    weight(vec![Sym("out_features"), Sym("in_features")]),
                ],
                vec![output(ACTIVATION_TYPES, vec![T, Sym("out_features")], no)],
            ),
            Self::DenseSwiglu => (
                vec![
                    act(vec![T, H]),
                    weight(vec![Exact(2), Sym("intermediate_size"), H]),
                    weight(vec![H, Sym("intermediate_size")]),
                ],
                vec![output(ACTIVATION_TYPES, vec![T, H], no)],
            ),
            Self::CausalPagedAttention => (
                vec![
                    act(vec![T, Sym("query_projection_features")]),
                    act(vec![T, Sym("kv_features")]),
                    act(vec![T, Sym("kv_features")]),
                    state(
                        ACTIVATION_TYPES,
                        vec![Exact(2), Sym("key_value_heads"), Sym("head_dim")],
                    ),
                ],
                vec![output(
                    ACTIVATION_TYPES,
                    vec![T, Sym("query_features")],
                    may0,
                )],
            ),
            Self::CausalPagedLatentAttention => (
                vec![
                    act(vec![T, Sym("query_projection_features")]),
                    act(vec![T, Sym("latent_features")]),
                    norm_weight(vec![Sym("kv_lora_rank")]),
                    weight(vec![Sym("kv_b_features"), Sym("kv_lora_rank")]),
                    state(ACTIVATION_TYPES, vec![Sym("latent_features")]),
                ],
                vec![output(ACTIVATION_TYPES, vec![T, Sym("value_features")], no)],
            ),
            Self::GatedDeltaRecurrentAttention => (
                vec![
                    act(vec![T, H]),
                    weight(vec![Sym("qkvz_features"), H]),
                    weight(vec![Sym("ba_features"), H]),
                    weight(vec![Sym("conv_features"), Sym("conv_kernel")]),
                    norm_weight(vec![Sym("value_heads")]),
                    norm_weight(vec![Sym("value_heads")]),
                    norm_weight(vec![Sym("value_head_dim")]),
                    weight(vec![H, Sym("value_features")]),
                    state(
                        NORM_TYPES,
                        vec![Sym("conv_features"), Sym("conv_state_length")],
                    ),
                    state(
                        &[ElementType::F32],
                        vec![
                            Sym("value_heads"),
                            Sym("key_head_dim"),
                            Sym("value_head_dim"),
                        ],
                    ),
                ],
                vec![output(ACTIVATION_TYPES, vec![T, H], no)],
            ),
            // The variants: a biased linear, router or expert group is its plain form with
            // its bias vectors last; sink attention is attention with one sink per query head
            // before its KV state.
            Self::BiasedDenseLinear => {
                Self::DenseLinear.with_weights(2, vec![norm_weight(vec![Sym("out_features")])])
            }
            Self::BiasedMoeRouter => {
                Self::MoeRouter.with_weights(2, vec![norm_weight(vec![Sym("experts")])])
            }
            Self::BiasedRoutedExpertSwiglu => Self::RoutedExpertSwiglu.with_weights(
                6,
                vec![
                    norm_weight(vec![
                        Sym("group_experts"),
                        Exact(2),
                        Sym("intermediate_size"),
                    ]),
                    norm_weight(vec![Sym("group_experts"), H]),
                ],
            ),
            Self::CausalPagedSinkAttention => Self::CausalPagedAttention
                .with_weights(3, vec![norm_weight(vec![Sym("query_heads")])]),
            Self::MoeRouter => (
                vec![act(vec![T, H]), weight(vec![Sym("experts"), H])],
                vec![
                    output(&[ElementType::F32], vec![T, Sym("experts_per_token")], no),
                    output(&[ElementType::I32], vec![T, Sym("experts_per_token")], no),
                ],
            ),
            Self::RoutedExpertSwiglu => (
                vec![
                    act(vec![T, H]),
                    act(vec![T, H]),
                    input(
                        SlotKind::Activation,
                        &[ElementType::F32],
                        vec![T, Sym("experts_per_token")],
                    ),
                    input(
                        SlotKind::Activation,
                        &[ElementType::I32],
                        vec![T, Sym("experts_per_token")],
                    ),
                    weight(vec![
                        Sym("group_experts"),
                        Exact(2),
                        Sym("intermediate_size"),
                        H,
                    ]),
                    weight(vec![Sym("group_experts"), H, Sym("intermediate_size")]),
                ],
                vec![output(ACTIVATION_TYPES, vec![T, H], may0)],
            ),
            Self::ResidualAdd => (
                vec![act(vec![T, H]), act(vec![T, H])],
                vec![output(ACTIVATION_TYPES, vec![T, H], may0)],
            ),
            Self::LastTokenDenseLinear => (
                vec![act(vec![T, H]), weight(vec![Sym("vocab_size"), H])],
                vec![output(
                    &[ElementType::F16, ElementType::F32],
                    vec![Sym("sequences"), Sym("vocab_size")],
                    no,
                )],
            ),
        }
    }

    /// The kind of each input slot then each output slot.
    pub fn slot_kinds(self) -> Vec<SlotKind> {
        let (inputs, outputs) = self.slots();
        inputs.iter().chain(&outputs).map(|s| s.kind).collect()
    }

    fn attributes(self) -> Vec<(&'static str, Attr, bool)> {
        use Attr::*;
        let mut attrs = match self {
            Self::TokenEmbedding => vec![
                ("vocab_size", Positive, true),
                ("hidden_size", Positive, true),
            ],
            Self::RmsNorm | Self::LayerNorm => {
                vec![("hidden_size", Positive, true), ("epsilon", Rational, true)]
            }
            Self::HeadRmsNorm => vec![
                ("heads", Positive, true),
                ("head_dim", Positive, true),
                ("epsilon", Rational, true),
            ],
            Self::DenseLinear | Self::BiasedDenseLinear => vec![
                ("in_features", Positive, true),
                ("out_features", Positive, true),
            ],
            Self::DenseSwiglu => vec![
                ("hidden_size", Positive, true),
                ("intermediate_size", Positive, true),
                // Absent: SiLU (SwiGLU); `gelu_tanh`: GeGLU (Gemma).
                ("gate_activation", Text(&["gelu_tanh", "silu"]), false),
            ],
            Self::CausalPagedAttention | Self::CausalPagedSinkAttention => vec![
                ("hidden_size", Positive, true),
                ("query_heads", Positive, true),
                ("key_value_heads", Positive, true),
                ("head_dim", Positive, true),
                ("query_features", Positive, true),
                ("query_projection_features", Positive, true),
                ("kv_features", Positive, true),
                ("rope_dim", Positive, true),
                ("rope_theta", Rational, true),
                ("rope_interleaved", Bool, true),
                (
                    "rope_scaling",
                    Text(&["dynamic", "linear", "llama3", "none", "yarn"]),
                    true,
                ),
                ("rope_scaling_factor", Rational, false),
                ("sliding_window", Positive, false),
                ("maximum_context_tokens", Positive, true),
                ("output_gate", Bool, true),
                ("causal", True, true),
            ],
            Self::CausalPagedLatentAttention => vec![
                ("query_heads", Positive, true),
                ("kv_lora_rank", Positive, true),
                ("qk_nope_head_dim", Positive, true),
                ("qk_rope_head_dim", Positive, true),
                ("v_head_dim", Positive, true),
                ("rope_theta", Rational, true),
                (
                    "rope_scaling",
                    Text(&["dynamic", "linear", "llama3", "none", "yarn"]),
                    true,
                ),
                ("rope_scaling_factor", Rational, false),
                ("maximum_context_tokens", Positive, true),
                ("epsilon", Rational, true),
                ("causal", True, true),
            ],
            Self::GatedDeltaRecurrentAttention => vec![
                ("hidden_size", Positive, true),
                ("key_heads", Positive, true),
                ("value_heads", Positive, true),
                ("key_head_dim", Positive, true),
                ("value_head_dim", Positive, true),
                ("conv_kernel", Positive, true),
                ("epsilon", Rational, true),
            ],
            Self::MoeRouter | Self::BiasedMoeRouter => vec![
                ("experts", Positive, true),
                ("experts_per_token", Positive, true),
                ("scoring", Text(&["sigmoid", "softmax"]), true),
                ("normalize_top_k", Bool, true),
                ("routed_scaling_factor", Rational, true),
                ("expert_groups", Positive, true),
                ("top_k_groups", Positive, true),
            ],
            Self::RoutedExpertSwiglu | Self::BiasedRoutedExpertSwiglu => vec![
                ("first_expert", Unsigned, true),
                ("group_experts", Positive, true),
                ("hidden_size", Positive, true),
                ("intermediate_size", Positive, true),
                ("experts_per_token", Positive, true),
            ],
            Self::ResidualAdd => vec![("hidden_size", Positive, true)],
            Self::LastTokenDenseLinear => vec![
                ("hidden_size", Positive, true),
                ("vocab_size", Positive, true),
            ],
        };
        if matches!(
            self,
            Self::CausalPagedAttention
                | Self::CausalPagedLatentAttention
                | Self::CausalPagedSinkAttention
                | Self::GatedDeltaRecurrentAttention
                | Self::MoeRouter
                | Self::BiasedMoeRouter
                | Self::RoutedExpertSwiglu
                | Self::BiasedRoutedExpertSwiglu
        ) {
            attrs.push(("layer_index", Unsigned, true));
        }
        attrs
    }

    fn presence(self) -> (Presence, Presence, Presence) {
        use Presence::*;
        match self {
            Self::TokenEmbedding
            | Self::DenseLinear
            | Self::BiasedDenseLinear
            | Self::MoeRouter
            | Self::BiasedMoeRouter => (Optional, Forbidden, Forbidden),
            Self::RmsNorm | Self::HeadRmsNorm | Self::ResidualAdd | Self::LayerNorm => {
                (Forbidden, Forbidden, Forbidden)
            }
            Self::DenseSwiglu | Self::RoutedExpertSwiglu | Self::BiasedRoutedExpertSwiglu => {
                (Required, Forbidden, Forbidden)
            }
            Self::CausalPagedAttention
            | Self::CausalPagedLatentAttention
            | Self::CausalPagedSinkAttention => (Required, Required, Forbidden),
            Self::GatedDeltaRecurrentAttention => (Required, Optional, Forbidden),
            Self::LastTokenDenseLinear => (Optional, Forbidden, Optional),
        }
    }

    /// The descriptor with a KV cache of `kv_cache`: an attention operation's state slot
    /// also accepts the one-byte type of an fp8 (`u8`) or int8 (`i8`) cache. `auto`,
    /// `f16` and `bf16` leave the descriptor as [`Operation::descriptor`] (and the
    /// catalogs' bytes as they were).
    pub fn descriptor_for(
        self,
        kv_cache: KvCacheDtype,
        rope_kinds: &[&str],
    ) -> OperationDescriptor {
        let mut descriptor = self.descriptor_admitting(rope_kinds);
        let extra = match kv_cache {
            KvCacheDtype::Fp8 => ElementType::U8,
            KvCacheDtype::Int8 => ElementType::I8,
            _ => return descriptor,
        };
        if matches!(
            self,
            Self::CausalPagedAttention | Self::CausalPagedLatentAttention
        ) {
            for slot in descriptor
                .inputs
                .iter_mut()
                .filter(|c| c.access == TensorAccess::ReadWrite)
            {
                slot.element_types.insert(extra);
            }
        }
        descriptor
    }

    /// The operation descriptor.
    #[cfg(test)]
    pub fn descriptor(self) -> OperationDescriptor {
        self.descriptor_admitting(&[])
    }

    /// The operation descriptor whose `rope_scaling` choices also admit `rope_kinds`
    /// (`longrope`): a kind is admitted only in the catalogs of models that use it, so the
    /// catalogs (and plans) of every other model keep their bytes.
    pub fn descriptor_admitting(self, rope_kinds: &[&str]) -> OperationDescriptor {
        let (inputs, outputs) = self.slots();
        let contract = |slot: &Slot| TensorContract {
            dimensions: slot
                .dims
                .iter()
                .map(|d| match d {
                    Exact(n) => DimensionConstraint::Exact(*n),
                    Sym(s) => DimensionConstraint::Symbol((*s).to_owned()),
                })
                .collect(),
            element_types: slot.types.iter().copied().collect(),
            layouts: vec![LayoutConstraint::Contiguous],
            access: slot.access,
            alias: slot.alias,
        };
        let attributes = self
            .attributes()
            .into_iter()
            .map(|(name, attr, required)| {
                let (value_kind, constraint) = match attr {
                    Attr::Unsigned => (ValueKind::Unsigned, AttributeConstraint::None),
                    Attr::Positive => (
                        ValueKind::Unsigned,
                        AttributeConstraint::UnsignedRange {
                            minimum: 1,
                            maximum: u64::MAX,
                        },
                    ),
                    Attr::Rational => (
                        ValueKind::Rational,
                        AttributeConstraint::RationalRange {
                            minimum: Rational {
                                numerator: 0,
                                denominator: 1,
                            },
                            maximum: Rational {
                                numerator: i64::MAX,
                                denominator: 1,
                            },
                        },
                    ),
                    Attr::Bool => (ValueKind::Bool, AttributeConstraint::None),
                    Attr::True => (ValueKind::Bool, AttributeConstraint::BoolEquals(true)),
                    Attr::Text(choices) => {
                        let mut choices: std::collections::BTreeSet<String> =
                            choices.iter().map(|c| (*c).to_owned()).collect();
                        if name == "rope_scaling" {
                            choices.extend(rope_kinds.iter().map(|k| (*k).to_owned()));
                        }
                        (ValueKind::Text, AttributeConstraint::TextChoices(choices))
                    }
                };
                (
                    portable::<AttributeId>(name.to_owned()),
                    AttributeSpec {
                        value_kind,
                        required,
                        constraint,
                    },
                )
            })
            .collect();
        let (scratch, binding, persistent) = self.presence();
        OperationDescriptor {
            id: self.id(),
            version: self.version(),
            inputs: inputs.iter().map(contract).collect(),
            outputs: outputs.iter().map(contract).collect(),
            attributes,
            resources: ResourceRequirements {
                minimum_value_alignment_bytes: 16,
                scratch,
                binding,
                persistent,
            },
            oracle: match self {
                Self::TokenEmbedding => OracleSpec::Exact,
                _ => OracleSpec::RelativeTolerance(Rational {
                    numerator: 1,
                    denominator: 1000,
                }),
            },
            provider: ProviderRequirement {
                minimum_version: self.version(),
                required_capabilities: [self.capability()].into(),
            },
        }
    }

    /// The provider variants of this operation, preferred first.
    pub fn variants(self) -> &'static [(&'static str, Kernel)] {
        use Kernel::*;
        match self {
            Self::TokenEmbedding => &[
                ("gather", Dense),
                ("gguf_gather", Gguf),
                ("reference", Reference),
            ],
            Self::RmsNorm | Self::HeadRmsNorm | Self::LayerNorm => {
                &[("fused", Fused), ("reference", Reference)]
            }
            Self::ResidualAdd => &[("inplace", Fused), ("reference", Reference)],
            Self::MoeRouter | Self::BiasedMoeRouter => &[("topk", Fused), ("reference", Reference)],
            Self::DenseLinear
            | Self::BiasedDenseLinear
            | Self::DenseSwiglu
            | Self::RoutedExpertSwiglu
            | Self::BiasedRoutedExpertSwiglu => &[
                ("dense", Dense),
                ("gptq_marlin", Gptq),
                ("gguf_mmq", Gguf),
                ("reference", Reference),
            ],
            Self::LastTokenDenseLinear => &[
                ("dense", Dense),
                ("gguf_mmq", Gguf),
                ("reference", Reference),
            ],
            Self::CausalPagedAttention
            | Self::CausalPagedLatentAttention
            | Self::CausalPagedSinkAttention => &[
                ("paged", Paged),
                ("contiguous", Contiguous),
                ("reference", Reference),
            ],
            Self::GatedDeltaRecurrentAttention => &[("chunked", Chunked), ("reference", Reference)],
        }
    }

    /// The providers of this operation for weights in `format`: [`Operation::variants`]
    /// for the four original formats (their catalogs keep their bytes); for the others, the
    /// matrix operations offer the dense kernel, the format's quantized kernel and the
    /// reference, and the rest as before (a GGUF mix also keeps the GGUF gather).
    pub fn variants_for(self, format: WeightFormat) -> Vec<(&'static str, Kernel)> {
        use Kernel::*;
        let all = self.variants();
        if format.is_legacy() {
            return all.to_vec();
        }
        let matrix = matches!(
            self,
            Self::DenseLinear
                | Self::BiasedDenseLinear
                | Self::DenseSwiglu
                | Self::RoutedExpertSwiglu
                | Self::BiasedRoutedExpertSwiglu
                | Self::LastTokenDenseLinear
        );
        match format_kernel(format) {
            Some(quantized) if matrix => {
                vec![("dense", Dense), quantized, ("reference", Reference)]
            }
            _ => all.to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contracts_follow_the_operation_rules() {
        for op in Operation::ALL {
            let d = op.descriptor();
            assert!(!d.outputs.is_empty(), "{}", op.name());
            assert!(d
                .inputs
                .iter()
                .all(|c| c.alias == AliasPolicy::NoAlias && c.access.reads()));
            assert!(d.outputs.iter().all(|c| c.access.writes()));
            assert_eq!(op.slot_kinds().len(), d.inputs.len() + d.outputs.len());
            assert!((2..=4).contains(&op.variants().len()), "{}", op.name());
        }
        let attention = Operation::CausalPagedAttention.descriptor();
        assert_eq!(attention.inputs[3].access, TensorAccess::ReadWrite);
        assert_eq!(
            attention.outputs[0].alias,
            AliasPolicy::MayAlias { tensor_index: 0 }
        );
        assert_eq!(Operation::ALL.iter().map(|o| o.id()).collect::<Vec<_>>(), {
            let mut ids: Vec<_> = Operation::ALL.iter().map(|o| o.id()).collect();
            ids.sort();
            ids
        });
    }
}
