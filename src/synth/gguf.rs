//! GGUF per-tensor type mixes (`Q4_K_M`, `Q5_K_M`, `Q8_0`): which GGML block type each
//! tensor of a model gets, following llama.cpp's `llama_tensor_get_type` and
//! `tensor_type_fallback` (`src/llama-quant.cpp`, ggml-org/llama.cpp commit
//! `007dbbf3fd17eefe9b47fee45f48f7ba5e62b714`).
//!
//! The rules this module applies (the others concern the IQ/Q2/Q3 mixes):
//!
//! * The output head (and the token embedding when it is tied to the head) is `Q6_K`, or
//!   `Q8_0` if its row length is not a multiple of the default type's block, or if the mix
//!   is `Q8_0`.
//! * Attention-V-like tensors (`attn_v`, a fused `attn_qkv`, MLA's `attn_kv_b`) are `Q6_K`
//!   in `Q4_K_M` and `Q5_K_M` when `use_more_bits(i, n)` holds for their ordinal among the
//!   model's attention layers; in a model of 80 layers (llama.cpp's `LLM_TYPE_70B`) a
//!   `Q4_K` one becomes `Q5_K`; with exactly 8 experts (Mixtral) they are `Q8_0`.
//! * `attn_k` is `Q8_0` with exactly 8 experts; `attn_output` is `Q5_K` in `Q4_K_M` with
//!   exactly 8 experts.
//! * `ffn_down` (dense, routed and shared experts) is `Q6_K` in `Q4_K_M` and `Q5_K_M` when
//!   `use_more_bits(layer, layers)` holds.
//! * `use_more_bits(i, n) = i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2` (integer division).
//! * Everything else 2-D or larger takes the mix's default type (`Q4_K`, `Q5_K`, `Q8_0`).
//! * A row length that is not a multiple of the chosen type's block falls back:
//!   `Q4_K` → `Q5_0`, `Q5_K` → `Q5_1`, `Q6_K` → `Q8_0`; if still not a multiple of 32, `F16`.
//! * Norms, biases (1-D) and the MoE router (`ffn_gate_inp`) are never quantized: they stay
//!   `F32` as `convert_hf_to_gguf.py` writes them.

use std::str::FromStr;

/// A GGUF type mix (llama.cpp's `--ftype`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GgufMix {
    /// `Q4_K_M`: default `Q4_K`.
    Q4KM,
    /// `Q5_K_M`: default `Q5_K`.
    Q5KM,
    /// `Q8_0`: every quantizable tensor `Q8_0`.
    Q8_0,
}

impl GgufMix {
    /// The command-line name (`gguf-q4_k_m`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Self::Q4KM => "gguf-q4_k_m",
            Self::Q5KM => "gguf-q5_k_m",
            Self::Q8_0 => "gguf-q8_0",
        }
    }

    /// The layout id suffix.
    pub fn layout_suffix(self) -> &'static str {
        match self {
            Self::Q4KM => "gguf.q4_k_m",
            Self::Q5KM => "gguf.q5_k_m",
            Self::Q8_0 => "gguf.q8_0",
        }
    }

    fn default_type(self) -> GgufType {
        match self {
            Self::Q4KM => GgufType::Q4K,
            Self::Q5KM => GgufType::Q5K,
            Self::Q8_0 => GgufType::Q8_0,
        }
    }

    /// Every block type a tensor of this mix can get (for the kernels that read it).
    pub fn types(self) -> &'static [GgufType] {
        match self {
            Self::Q4KM => &[
                GgufType::Q4K,
                GgufType::Q5K,
                GgufType::Q6K,
                GgufType::Q8_0,
                GgufType::Q5_0,
                GgufType::Q5_1,
            ],
            Self::Q5KM => &[GgufType::Q5K, GgufType::Q6K, GgufType::Q8_0, GgufType::Q5_1],
            Self::Q8_0 => &[GgufType::Q8_0],
        }
    }
}

impl FromStr for GgufMix {
    type Err = ();
    fn from_str(text: &str) -> Result<Self, ()> {
        match text {
            "gguf-q4_k_m" => Ok(Self::Q4KM),
            "gguf-q5_k_m" => Ok(Self::Q5KM),
            "gguf-q8_0" => Ok(Self::Q8_0),
            _ => Err(()),
        }
    }
}

/// A GGML tensor type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GgufType {
    /// 32-bit float.
    F32,
    /// 16-bit float.
    F16,
    /// `Q4_K`: 144 bytes per 256 values.
    Q4K,
    /// `Q5_K`: 176 bytes per 256 values.
    Q5K,
    /// `Q6_K`: 210 bytes per 256 values.
    Q6K,
    /// `Q8_0`: 34 bytes per 32 values.
    Q8_0,
    /// `Q5_0`: 22 bytes per 32 values.
    Q5_0,
    /// `Q5_1`: 24 bytes per 32 values.
    Q5_1,
}

impl GgufType {
    /// `(values per block, bytes per block)` (ggml's `type_traits` table); `None` for the
    /// float types.
    pub fn block(self) -> Option<(u32, u32)> {
        match self {
            Self::F32 | Self::F16 => None,
            Self::Q4K => Some((256, 144)),
            Self::Q5K => Some((256, 176)),
            Self::Q6K => Some((256, 210)),
            Self::Q8_0 => Some((32, 34)),
            Self::Q5_0 => Some((32, 22)),
            Self::Q5_1 => Some((32, 24)),
        }
    }

    /// The quantization format id of a block type (`quantization.gguf.q4-k`, ...).
    pub fn quantization_id(self) -> Option<&'static str> {
        match self {
            Self::F32 | Self::F16 => None,
            Self::Q4K => Some(super::weights::Q4K_QUANTIZATION),
            Self::Q5K => Some("quantization.gguf.q5-k"),
            Self::Q6K => Some(super::weights::Q6K_QUANTIZATION),
            Self::Q8_0 => Some(super::weights::Q8_0_QUANTIZATION),
            Self::Q5_0 => Some("quantization.gguf.q5-0"),
            Self::Q5_1 => Some("quantization.gguf.q5-1"),
        }
    }
}

/// llama.cpp's tensor categories (`tensor_get_category`), as the synthesizer's checkpoint
/// names map onto them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorRole {
    /// `token_embd`.
    TokenEmbedding,
    /// `output`.
    Output,
    /// `attn_v`, `attn_qkv`, `attn_kv_b` (`category_is_attn_v`).
    AttentionV,
    /// `attn_k`.
    AttentionK,
    /// `attn_output`.
    AttentionOutput,
    /// `ffn_down`, `ffn_down_exps`, `ffn_down_shexp`.
    FeedForwardDown,
    /// Any other quantizable matrix.
    Other,
    /// Never quantized (norms, biases, the router): F32.
    Kept,
}

impl TensorRole {
    /// The role of a projection from its Hugging Face module name.
    pub fn of_projection(hf_name: &str) -> Self {
        let last = hf_name.rsplit('.').next().unwrap_or(hf_name);
        match last {
            "v_proj" | "qkv_proj" | "kv_b_proj" => Self::AttentionV,
            "k_proj" => Self::AttentionK,
            "o_proj" => Self::AttentionOutput,
            "down_proj" => Self::FeedForwardDown,
            _ => Self::Other,
        }
    }
}

/// What the mix rules read of the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GgufModel {
    /// Decoder layers (`n_layer`).
    pub layers: u64,
    /// The layers with an attention-V-like tensor, in order (their ordinal is
    /// `i_attention_wv`; their count `n_attention_wv`).
    pub attention_layers: Vec<u64>,
    /// Routed experts (`n_expert`; 0 for a dense model).
    pub experts: u64,
    /// Whether the head is the embedding table.
    pub tied: bool,
}

/// `use_more_bits` of llama-quant.cpp.
pub fn use_more_bits(i: u64, n: u64) -> bool {
    let (i, n) = (i as i64, n as i64);
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

fn fallback(chosen: GgufType, columns: u64) -> GgufType {
    let fits = |t: GgufType| t.block().is_none_or(|(v, _)| columns % u64::from(v) == 0);
    if fits(chosen) {
        return chosen;
    }
    let next = match chosen {
        GgufType::Q4K => GgufType::Q5_0,
        GgufType::Q5K => GgufType::Q5_1,
        GgufType::Q6K => GgufType::Q8_0,
        other => other,
    };
    if fits(next) {
        next
    } else {
        GgufType::F16
    }
}

/// The type of one tensor of `columns` values per row (its input axis) in `mix`.
pub fn tensor_type(
    mix: GgufMix,
    model: &GgufModel,
    role: TensorRole,
    layer: Option<u64>,
    columns: u64,
) -> GgufType {
    let default = mix.default_type();
    let eight_experts = model.experts == 8;
    let more_bits_mix = matches!(mix, GgufMix::Q4KM | GgufMix::Q5KM);
    let chosen = match role {
        TensorRole::Kept => return GgufType::F32,
        TensorRole::Output => output_type(mix, columns),
        TensorRole::TokenEmbedding if model.tied => output_type(mix, columns),
        TensorRole::TokenEmbedding | TensorRole::Other => default,
        TensorRole::AttentionV => {
            let ordinal = layer
                .and_then(|l| model.attention_layers.iter().position(|&a| a == l))
                .unwrap_or(0) as u64;
            let n = model.attention_layers.len() as u64;
            let mut t = if more_bits_mix && use_more_bits(ordinal, n) {
                GgufType::Q6K
            } else {
                default
            };
            if model.layers == 80 && t == GgufType::Q4K {
                t = GgufType::Q5K;
            }
            if eight_experts {
                t = GgufType::Q8_0;
            }
            t
        }
        TensorRole::AttentionK if eight_experts => GgufType::Q8_0,
        TensorRole::AttentionK => default,
        TensorRole::AttentionOutput if eight_experts && mix == GgufMix::Q4KM => GgufType::Q5K,
        TensorRole::AttentionOutput => default,
        TensorRole::FeedForwardDown => {
            if more_bits_mix && use_more_bits(layer.unwrap_or(0), model.layers) {
                GgufType::Q6K
            } else {
                default
            }
        }
    };
    match role {
        TensorRole::Output => chosen,
        TensorRole::TokenEmbedding if model.tied => chosen,
        _ => fallback(chosen, columns),
    }
}

/// The head's type: `Q8_0` when its rows do not fill the default type's blocks or the mix is
/// `Q8_0`, else `Q6_K`.
fn output_type(mix: GgufMix, columns: u64) -> GgufType {
    let block = mix.default_type().block().map_or(1, |(v, _)| u64::from(v));
    if columns % block != 0 || mix == GgufMix::Q8_0 {
        fallback(GgufType::Q8_0, columns)
    } else {
        GgufType::Q6K
    }
}

/// The layer index of a Hugging Face module name (`model.layers.{i}.`), if any.
pub fn layer_of(hf_name: &str) -> Option<u64> {
    let rest = hf_name.strip_prefix("model.layers.")?;
    rest.split('.').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(layers: u64) -> GgufModel {
        GgufModel {
            layers,
            attention_layers: (0..layers).collect(),
            experts: 0,
            tied: false,
        }
    }

    #[test]
    fn use_more_bits_matches_the_formula_on_32_layers() {
        // n = 32: n/8 = 4, 7n/8 = 28; i in 0..4, 28..32, and i = 6, 9, ..., 27.
        let chosen: Vec<u64> = (0..32).filter(|&i| use_more_bits(i, 32)).collect();
        assert_eq!(
            chosen,
            vec![0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]
        );
    }

    #[test]
    fn q4_k_m_rules() {
        let m = model(32);
        let t = |role, layer| tensor_type(GgufMix::Q4KM, &m, role, Some(layer), 4096);
        assert_eq!(t(TensorRole::AttentionV, 0), GgufType::Q6K);
        assert_eq!(t(TensorRole::AttentionV, 4), GgufType::Q4K);
        assert_eq!(t(TensorRole::FeedForwardDown, 6), GgufType::Q6K);
        assert_eq!(t(TensorRole::FeedForwardDown, 7), GgufType::Q4K);
        assert_eq!(t(TensorRole::Other, 7), GgufType::Q4K);
        assert_eq!(
            tensor_type(GgufMix::Q4KM, &m, TensorRole::Output, None, 4096),
            GgufType::Q6K
        );
        // 14336-wide rows are 56 blocks of 256; 18944 = 74 x 256; 4000 is not: Q5_0.
        assert_eq!(
            tensor_type(GgufMix::Q4KM, &m, TensorRole::Other, Some(7), 4000),
            GgufType::Q5_0
        );
        let mixtral = GgufModel {
            experts: 8,
            ..model(32)
        };
        let t = |role| tensor_type(GgufMix::Q4KM, &mixtral, role, Some(5), 4096);
        assert_eq!(t(TensorRole::AttentionV), GgufType::Q8_0);
        assert_eq!(t(TensorRole::AttentionK), GgufType::Q8_0);
        assert_eq!(t(TensorRole::AttentionOutput), GgufType::Q5K);
        let seventy = model(80);
        assert_eq!(
            tensor_type(
                GgufMix::Q4KM,
                &seventy,
                TensorRole::AttentionV,
                Some(11),
                8192
            ),
            GgufType::Q5K
        );
        assert_eq!(layer_of("model.layers.12.mlp.down_proj"), Some(12));
        assert_eq!(
            TensorRole::of_projection("model.layers.3.self_attn.qkv_proj"),
            TensorRole::AttentionV
        );
    }
}
