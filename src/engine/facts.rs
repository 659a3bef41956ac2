//! The plain numbers an engine's accounting needs: the model's weights, shapes and cache
//! layers, and the device's memory as the driver reports it.

use serde::{Deserialize, Serialize};

use super::{mul, EngineError};

/// What one decoder layer keeps per sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheLayer {
    /// Attention over the whole context: `elements_per_token` cache elements per token
    /// (`2 x kv_heads x head_dim` for K and V; `kv_lora_rank + qk_rope_head_dim` for MLA).
    Full {
        /// Cache elements per token (all heads, before tensor parallelism).
        elements_per_token: u64,
        /// Key/value heads the elements are split over (tensor parallelism shards them; 1
        /// for a latent cache, which every rank holds whole).
        heads: u64,
    },
    /// Attention over the last `window` tokens.
    Sliding {
        /// Cache elements per token.
        elements_per_token: u64,
        /// Key/value heads.
        heads: u64,
        /// The window.
        window: u64,
    },
    /// A recurrent (linear-attention, state-space) layer: a fixed state per sequence.
    Recurrent {
        /// State bytes per sequence.
        state_bytes: u64,
    },
}

impl CacheLayer {
    /// Cache elements per token held on one of `tp` ranks (heads split, at least one head).
    pub fn elements_per_token_per_rank(&self, tp: u64) -> u64 {
        match *self {
            Self::Full {
                elements_per_token,
                heads,
            }
            | Self::Sliding {
                elements_per_token,
                heads,
                ..
            } => {
                let heads = heads.max(1);
                let per_head = elements_per_token / heads;
                per_head * heads.div_ceil(tp.max(1))
            }
            Self::Recurrent { .. } => 0,
        }
    }
}

/// Mixture-of-experts shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoeFacts {
    /// Routed experts.
    pub experts: u64,
    /// Experts per token.
    pub experts_per_token: u64,
    /// Width of one routed expert.
    pub expert_intermediate_size: u64,
    /// Width of the shared expert (0: none).
    pub shared_intermediate_size: u64,
}

/// Routed experts stored in MXFP4 (gpt-oss), whose bytes an engine may allocate differently
/// from the checkpoint's (vLLM pads them for its kernels: `engine::vllm` `mxfp4`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mxfp4Experts {
    /// Layers whose routed experts are MXFP4.
    pub layers: u64,
    /// Routed experts per layer.
    pub experts: u64,
    /// The experts' input width (the hidden size).
    pub hidden_size: u64,
    /// One expert's intermediate width (before tensor parallelism).
    pub intermediate_size: u64,
    /// Whether the experts have biases (gpt-oss: gate-up and down biases).
    pub bias: bool,
    /// Their bytes as stored (packed values, scales, biases of every such layer): the part of
    /// [`ModelFacts::weights_bytes`] an engine's own allocation replaces.
    pub stored_bytes: u64,
}

/// A speculative-decoding drafter vLLM loads beside the model (`speculative_config` naming a
/// draft `model`: an EAGLE head or a smaller model), as its accounting sees it: the weights
/// it adds, the KV cache layers it adds to the model's, and its shapes for the profile run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DraftFacts {
    /// The speculative method (`eagle`, `eagle3`, `draft_model`).
    pub method: String,
    /// Where the draft's configuration was read (for the rules printed).
    pub source: String,
    /// Bytes the drafter adds to the weights (before tensor parallelism): an EAGLE head's
    /// decoder layers and its `fc` (the target's embedding and head are shared), or a draft
    /// model's whole parameters.
    pub weights_bytes: u64,
    /// How `weights_bytes` was counted.
    pub weights_rule: String,
    /// The draft's own facts: its layers (their KV cache joins the model's), widths and
    /// vocabulary (its forward pass in the profile run).
    pub model: ModelFacts,
    /// An EAGLE-3 head's shapes (method `eagle3`), from which vLLM's engine module counts
    /// its weights per rank and the target's auxiliary hidden states.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eagle3: Option<super::vllm::eagle3::Eagle3Head>,
}

/// A model as an engine's accounting sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelFacts {
    /// Bytes of the parameters as stored on the device (all tensors, one copy).
    pub weights_bytes: u64,
    /// Bytes of the token embedding table (llama.cpp keeps it on the host).
    pub embedding_bytes: u64,
    /// Bytes of one activation element (2 for f16/bf16).
    pub dtype_bytes: u64,
    /// The checkpoint's dtype name (`bfloat16`, `float16`), for the logs.
    pub dtype_name: String,
    /// Width of the residual stream.
    pub hidden_size: u64,
    /// Dense MLP width of the widest dense layer (0: every layer routed).
    pub intermediate_size: u64,
    /// Whether any layer has a dense MLP.
    pub has_dense_mlp: bool,
    /// Experts, for mixtures of experts.
    pub moe: Option<MoeFacts>,
    /// Query heads.
    pub query_heads: u64,
    /// Key/value heads of grouped attention.
    pub kv_heads: u64,
    /// Head dimension.
    pub head_dim: u64,
    /// Rotated dimensions per head (0: no rotary embedding).
    pub rotary_dim: u64,
    /// Distinct rotary caches the model builds (Gemma 3: local and global bases, 2).
    pub rotary_caches: u64,
    /// Bytes of one element of vLLM's rotary cos/sin cache: the model dtype's, or 4 where
    /// vLLM's model file builds it in float32 (gpt-oss: `get_rope(..., dtype=torch.float32)`,
    /// `vllm/model_executor/models/gpt_oss.py`, v0.19.0).
    pub rotary_dtype_bytes: u64,
    /// Routed experts stored in MXFP4, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mxfp4_experts: Option<Mxfp4Experts>,
    /// Vocabulary size.
    pub vocab_size: u64,
    /// Longest context the model was trained for (`max_position_embeddings`, scaled by a
    /// rope factor that extends it).
    pub trained_context: u64,
    /// Whether attention keeps a compressed latent cache (MLA), which engines page in
    /// larger blocks.
    pub latent_attention: bool,
    /// Decoder layers, in order.
    pub layers: Vec<CacheLayer>,
    /// A speculative-decoding drafter loaded beside the model, if the engine's arguments name
    /// one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft: Option<Box<DraftFacts>>,
    /// Bytes of each decoder layer's parameters as stored, in order (what a pipeline stage
    /// holds of them); empty when not known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layer_weights_bytes: Vec<u64>,
    /// Bytes of the output head (`lm_head`) as stored; 0 when it is tied to the embedding.
    #[serde(default)]
    pub head_bytes: u64,
    /// Bytes of the final norm (`model.norm`).
    #[serde(default)]
    pub final_norm_bytes: u64,
    /// Whether the head is tied to the token embedding.
    #[serde(default)]
    pub tied_embeddings: bool,
    /// The quantization format of the checkpoint's quantized weights, if any (`None`: every
    /// weight dense in the checkpoint's 16-bit type).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantization: Option<String>,
}

impl ModelFacts {
    /// Checks the facts an accounting divides by.
    pub fn check(&self) -> Result<(), EngineError> {
        let zero = |what: &str| EngineError::Facts {
            what: format!("{what} is 0"),
        };
        if self.dtype_bytes == 0 {
            return Err(zero("dtype_bytes"));
        }
        if self.hidden_size == 0 {
            return Err(zero("hidden_size"));
        }
        if self.layers.is_empty() {
            return Err(zero("layers"));
        }
        Ok(())
    }

    /// Cache bytes one token adds on one of `tp` ranks, over every attention layer, at
    /// `element_bytes` per element.
    pub fn kv_bytes_per_token(&self, tp: u64, element_bytes: u64) -> Result<u64, EngineError> {
        let mut total = 0u64;
        for layer in &self.layers {
            let bytes = mul(
                layer.elements_per_token_per_rank(tp),
                element_bytes,
                "KV bytes per token",
            )?;
            total = super::add(total, bytes, "KV bytes per token")?;
        }
        Ok(total)
    }

    /// The facts as vLLM holds the model when told `dtype=float32` (`float`): every weight
    /// and the rotary cache at 4 bytes per element, activations and the KV cache (`auto`) in
    /// float32. For a checkpoint whose weights are all dense in 16 bits (checked by the
    /// caller: [`ModelFacts::quantization`] is `None`), each byte count doubles.
    pub fn as_float32(&self) -> Result<Self, EngineError> {
        let factor = match self.dtype_bytes {
            2 => 2,
            4 => 1,
            other => {
                return Err(EngineError::Facts {
                    what: format!("a {other}-byte dtype has no float32 rule"),
                })
            }
        };
        let double = |bytes: u64, what: &str| mul(bytes, factor, what);
        let mut out = self.clone();
        out.weights_bytes = double(self.weights_bytes, "float32 weights")?;
        out.embedding_bytes = double(self.embedding_bytes, "float32 embedding")?;
        out.head_bytes = double(self.head_bytes, "float32 head")?;
        out.final_norm_bytes = double(self.final_norm_bytes, "float32 final norm")?;
        out.layer_weights_bytes = self
            .layer_weights_bytes
            .iter()
            .map(|&b| double(b, "float32 layer weights"))
            .collect::<Result<_, _>>()?;
        out.dtype_bytes = 4;
        out.dtype_name = "float32".to_owned();
        out.rotary_dtype_bytes = 4;
        Ok(out)
    }

    /// Whether some layer keeps a recurrent state.
    pub fn has_recurrent_layers(&self) -> bool {
        self.layers
            .iter()
            .any(|l| matches!(l, CacheLayer::Recurrent { .. }))
    }
}

/// A device as an engine sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceFacts {
    /// The name the driver reports (vLLM's defaults depend on it: `A100` in the name keeps
    /// the smaller defaults).
    pub name: String,
    /// Total memory as the driver reports it (`torch.cuda.mem_get_info()[1]`,
    /// `cudaMemGetInfo`): what the engines budget from.
    pub total_bytes: u64,
    /// Where `total_bytes` comes from (`driver_memory_bytes` of the device file, or its
    /// `total_memory_bytes` when the file has no driver figure).
    pub total_source: String,
    /// The CUDA compute capability as vLLM compares it (`90` for 9.0), from the device
    /// file's runtime (`cuda-12.4/sm_90`); `None` for a device that states none. vLLM picks
    /// its MXFP4 kernels by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_capability: Option<u32>,
    /// Memory free when the engine starts, when it is known (an engine's own log of it):
    /// SGLang budgets from it. `None`: the total less the CUDA context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_at_start_bytes: Option<u64>,
}
