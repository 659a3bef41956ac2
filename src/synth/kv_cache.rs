//! The KV cache's element type (`--kv-cache-dtype auto|f16|bf16|fp8|int8`, or a policy
//! preset's `kv_cache_dtype`): what one cached key or value element costs.
//!
//! * `auto`: the activation type of the weight format (today's behaviour and bytes).
//! * `f16`, `bf16`: two bytes.
//! * `fp8`: one byte (e4m3). vLLM keeps one f32 `k_scale` and one `v_scale` per attention
//!   layer (`vllm/attention/layer.py`, v0.10): 8 bytes per layer, held with the layer's
//!   parameters and not in the cache, so the cache's bytes per token are exactly one per
//!   element.
//! * `int8`: one byte with one f32 scale per layer for K and for V, as TensorRT-LLM's INT8
//!   KV cache (`kv_cache_quant_algo: INT8`) keeps them; likewise outside the cache. (vLLM
//!   and SGLang have no int8 KV cache; llama.cpp's `q8_0` cache, 34 bytes per 32 values, is
//!   not this.)

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::request::ElementType;

/// A KV cache element type.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum KvCacheDtype {
    /// The activation type.
    #[default]
    Auto,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    Bf16,
    /// FP8 e4m3, one byte.
    Fp8,
    /// INT8, one byte.
    Int8,
}

impl KvCacheDtype {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::F16 => "f16",
            Self::Bf16 => "bf16",
            Self::Fp8 => "fp8",
            Self::Int8 => "int8",
        }
    }

    /// The cache's element type when activations are `activation`.
    pub fn element_type(self, activation: ElementType) -> ElementType {
        match self {
            Self::Auto => activation,
            Self::F16 => ElementType::F16,
            Self::Bf16 => ElementType::Bf16,
            Self::Fp8 => ElementType::U8,
            Self::Int8 => ElementType::I8,
        }
    }

    /// The dtype of an engine's `kv_cache_dtype` word (vLLM, SGLang and TensorRT-LLM
    /// spellings), if it names one.
    pub fn from_engine_word(word: &str) -> Option<Self> {
        match word {
            "auto" => Some(Self::Auto),
            "fp8" | "fp8_e4m3" | "fp8_e5m2" => Some(Self::Fp8),
            "int8" => Some(Self::Int8),
            "float16" | "fp16" | "f16" | "half" => Some(Self::F16),
            "bfloat16" | "bf16" => Some(Self::Bf16),
            _ => None,
        }
    }
}

impl FromStr for KvCacheDtype {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "auto" => Ok(Self::Auto),
            "f16" => Ok(Self::F16),
            "bf16" => Ok(Self::Bf16),
            "fp8" => Ok(Self::Fp8),
            "int8" => Ok(Self::Int8),
            other => Err(format!(
                "unknown KV cache dtype {other:?} (auto, f16, bf16, fp8, int8)"
            )),
        }
    }
}
