//! Weight formats: how one logical weight becomes physical components in a chosen format.
//!
//! * `dense-f16` / `dense-bf16`: one `values` component per weight
//!   (`weight-format.safetensors.dense`).
//! * `gptq-int4`: every projection matrix `[.., out, in]` with `in` a multiple of 128 is
//!   stored as `packed_values` `[.., out, in/2]` bytes (two 4-bit values per byte, Marlin
//!   tiling, groups of 128) plus f16 `scales` `[.., in/128, out]`; embeddings, norms,
//!   routers and the head stay dense f16, as in the usual GPTQ checkpoints
//!   (`weight-format.safetensors.gptq-marlin-int4`).
//! * `gguf-q4k`: projection matrices and the embedding are q4_k blocks (144 bytes per 256
//!   values), the head q6_k (210 bytes per 256 values), matrices whose input axis is not a
//!   multiple of 256 fall back to q8_0 (34 bytes per 32 values), norms are f32: a uniform
//!   q4_k file (`weight-format.gguf.native-block`).
//! * `gguf-q4_k_m`, `gguf-q5_k_m`, `gguf-q8_0`: llama.cpp's per-tensor type mixes
//!   ([`super::gguf`]).
//! * `fp8`, `int8`, `awq-int4`, `mxfp4`, `nvfp4` and a checkpoint's own
//!   `quantization_config`: quantized projections ([`super::quantization`]).

use std::str::FromStr;

use crate::request::{
    BlockQuantizationSpec, ElementType, QuantizationPacking, QuantizationSpec, WeightComponentRole,
    WeightComponentSpec, WeightEncoding, WeightId,
};

use super::gguf::{self, GgufMix, GgufModel, TensorRole};
use super::quantization::{self, Pattern, Scheme};
use super::{portable, SynthError};

/// The dense safetensors weight format.
pub const SAFETENSORS_DENSE_FORMAT: &str = "weight-format.safetensors.dense";
/// The GPTQ int4 (Marlin) weight format.
pub const GPTQ_FORMAT: &str = "weight-format.safetensors.gptq-marlin-int4";
/// The GGUF block weight format.
pub const GGUF_FORMAT: &str = "weight-format.gguf.native-block";
/// GPTQ int4 symmetric quantization (Marlin tiling).
pub const GPTQ_QUANTIZATION: &str = "quantization.marlin.gptq-int4-symmetric";
/// GGUF q4_k.
pub const Q4K_QUANTIZATION: &str = "quantization.gguf.q4-k";
/// GGUF q6_k.
pub const Q6K_QUANTIZATION: &str = "quantization.gguf.q6-k";
/// GGUF q8_0.
pub const Q8_0_QUANTIZATION: &str = "quantization.gguf.q8-0";
/// GPTQ group size.
pub const GPTQ_GROUP_SIZE: u64 = 128;

/// Every `--weight-format` name.
pub const FORMAT_NAMES: &str = "dense-f16, dense-bf16, gptq-int4, gguf-q4k, gguf-q4_k_m, gguf-q5_k_m, gguf-q8_0, fp8, int8, awq-int4, mxfp4, nvfp4";

/// The weight format of a synthesized checkpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum WeightFormat {
    /// Dense f16.
    #[default]
    DenseF16,
    /// Dense bf16 (activations in bf16 too).
    DenseBf16,
    /// GPTQ int4 with f16 scales.
    GptqInt4,
    /// GGUF q4_k blocks.
    GgufQ4k,
    /// A GGUF per-tensor type mix.
    Gguf(GgufMix),
    /// Quantized safetensors projections (a named format or the checkpoint's own config).
    Quantized(Scheme),
}

impl WeightFormat {
    /// The command-line name (`config:<method>` for a checkpoint's own quantization).
    pub fn name(self) -> &'static str {
        match self {
            Self::DenseF16 => "dense-f16",
            Self::DenseBf16 => "dense-bf16",
            Self::GptqInt4 => "gptq-int4",
            Self::GgufQ4k => "gguf-q4k",
            Self::Gguf(mix) => mix.name(),
            Self::Quantized(scheme) => scheme.origin.name(),
        }
    }

    /// The schema's weight format id.
    pub fn format_id(self) -> &'static str {
        match self {
            Self::DenseF16 | Self::DenseBf16 => SAFETENSORS_DENSE_FORMAT,
            Self::GptqInt4 => GPTQ_FORMAT,
            Self::GgufQ4k | Self::Gguf(_) => GGUF_FORMAT,
            Self::Quantized(scheme) => scheme.format_id(),
        }
    }

    /// The layout id suffix (`dense.packed_gate_up`, `gptq_marlin`, `gguf.native`).
    pub fn layout_suffix(self) -> &'static str {
        match self {
            Self::DenseF16 | Self::DenseBf16 => "dense.packed_gate_up",
            Self::GptqInt4 => "gptq_marlin",
            Self::GgufQ4k => "gguf.native",
            Self::Gguf(mix) => mix.layout_suffix(),
            Self::Quantized(scheme) => scheme.layout_suffix(),
        }
    }

    /// The element type of activations, KV caches and dense weights.
    pub fn activation_type(self) -> ElementType {
        match self {
            Self::DenseBf16 => ElementType::Bf16,
            Self::Quantized(scheme) => scheme.dense_type,
            _ => ElementType::F16,
        }
    }

    /// Whether the format is one of the four of the first releases, whose requests keep
    /// their bytes (their catalogs list the same providers as before).
    pub fn is_legacy(self) -> bool {
        matches!(
            self,
            Self::DenseF16 | Self::DenseBf16 | Self::GptqInt4 | Self::GgufQ4k
        )
    }

    /// The quantization format ids the format's quantized components use.
    pub fn quantization_ids(self) -> Vec<String> {
        match self {
            Self::DenseF16 | Self::DenseBf16 => Vec::new(),
            Self::GptqInt4 => vec![GPTQ_QUANTIZATION.to_owned()],
            Self::GgufQ4k => [Q4K_QUANTIZATION, Q6K_QUANTIZATION, Q8_0_QUANTIZATION]
                .map(str::to_owned)
                .to_vec(),
            Self::Gguf(mix) => mix
                .types()
                .iter()
                .filter_map(|t| t.quantization_id())
                .map(str::to_owned)
                .collect(),
            Self::Quantized(scheme) => vec![scheme.quantization_id()],
        }
    }
}

impl FromStr for WeightFormat {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "dense-f16" => Ok(Self::DenseF16),
            "dense-bf16" => Ok(Self::DenseBf16),
            "gptq-int4" => Ok(Self::GptqInt4),
            "gguf-q4k" => Ok(Self::GgufQ4k),
            other => {
                if let Ok(mix) = other.parse::<GgufMix>() {
                    Ok(Self::Gguf(mix))
                } else if let Some(scheme) = Scheme::from_flag(other) {
                    Ok(Self::Quantized(scheme))
                } else {
                    Err(format!("unknown weight format {other:?} ({FORMAT_NAMES})"))
                }
            }
        }
    }
}

/// The format and what its rules read beside a weight's shape: the modules a
/// configuration keeps unquantized, the key that sets its group size, and the model facts
/// llama.cpp's mixes read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WeightPlan {
    /// The format.
    pub format: WeightFormat,
    /// Module-name patterns kept in the checkpoint dtype.
    pub keep_dense: Vec<Pattern>,
    /// The JSON path (or flag) that sets the group size, for errors.
    pub group_key: String,
    /// The model facts of a GGUF mix.
    pub gguf: Option<GgufModel>,
}

impl WeightPlan {
    /// A plan of `format` with no exclusions.
    pub fn of(format: WeightFormat) -> Self {
        Self {
            format,
            keep_dense: Vec::new(),
            group_key: format!("--weight-format {}", format.name()),
            gguf: None,
        }
    }
}

/// What a weight is, which decides how a format stores it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightClass {
    /// A projection matrix `[.., out, in]` (quantizable).
    Projection,
    /// The embedding table.
    Embedding,
    /// The output head.
    Head,
    /// A normalization vector (and other small per-channel vectors).
    Norm,
    /// Anything else kept dense in the activation type (routers, conv kernels).
    Plain,
}

/// The logical element type and the physical components of one weight.
pub struct WeightLayout {
    /// Logical element type of the tensor.
    pub logical_element_type: ElementType,
    /// Physical components, sorted by id.
    pub components: Vec<WeightComponentSpec>,
}

fn component(
    weight: &WeightId,
    suffix: &str,
    role: WeightComponentRole,
    external_names: &[String],
    external_suffix: &str,
    dimensions: Vec<u64>,
    encoding: WeightEncoding,
) -> WeightComponentSpec {
    WeightComponentSpec {
        id: portable(format!("{weight}:{suffix}")),
        role,
        external_names: external_names
            .iter()
            // A bias or sink tensor's checkpoint name is complete (`q_proj.bias`,
            // gpt-oss's `gate_up_proj_bias` and `self_attn.sinks`): no suffix.
            .map(|n| {
                if n.ends_with(".bias") || n.ends_with("_bias") || n.ends_with(".sinks") {
                    n.clone()
                } else {
                    format!("{n}{external_suffix}")
                }
            })
            .collect(),
        dimensions,
        encoding,
        required: true,
    }
}

fn with_last(dims: &[u64], last: u64) -> Vec<u64> {
    let mut d = dims.to_vec();
    if let Some(l) = d.last_mut() {
        *l = last;
    }
    d
}

/// The components of weight `weight` of `dims` and `class` under `plan`.
pub fn weight_layout(
    plan: &WeightPlan,
    weight: &WeightId,
    dims: &[u64],
    class: WeightClass,
    external_names: &[String],
) -> Result<WeightLayout, SynthError> {
    let format = plan.format;
    let dense_type = format.activation_type();
    let input = *dims
        .last()
        .ok_or_else(|| SynthError::Internal(format!("weight {weight} has no dimensions")))?;
    let dense = |element_type: ElementType| WeightLayout {
        logical_element_type: element_type,
        components: vec![component(
            weight,
            "values",
            WeightComponentRole::Values,
            external_names,
            ".weight",
            dims.to_vec(),
            WeightEncoding::Dense { element_type },
        )],
    };
    let block = |format_id: &str, values: u32, bytes: u32| WeightLayout {
        logical_element_type: ElementType::F16,
        components: vec![component(
            weight,
            "blocks",
            WeightComponentRole::PackedValues,
            external_names,
            ".weight",
            with_last(dims, input / u64::from(values)),
            WeightEncoding::BlockQuantized(BlockQuantizationSpec {
                format_id: portable(format_id.to_owned()),
                logical_values_per_block: values,
                bytes_per_block: bytes,
            }),
        )],
    };
    Ok(match (format, class) {
        (WeightFormat::GptqInt4, WeightClass::Projection) if input % GPTQ_GROUP_SIZE == 0 => {
            let rank = dims.len();
            let mut scale_dims = dims.to_vec();
            scale_dims[rank - 1] = dims[rank - 2];
            scale_dims[rank - 2] = input / GPTQ_GROUP_SIZE;
            WeightLayout {
                logical_element_type: ElementType::F16,
                components: vec![
                    component(
                        weight,
                        "packed",
                        WeightComponentRole::PackedValues,
                        external_names,
                        ".qweight",
                        with_last(dims, input / 2),
                        WeightEncoding::Quantized(QuantizationSpec {
                            format_id: portable(GPTQ_QUANTIZATION.to_owned()),
                            bits_per_weight: 4,
                            group_size: GPTQ_GROUP_SIZE as u32,
                            packing: QuantizationPacking::Tiled,
                            scale_type: ElementType::F16,
                            zero_point_type: None,
                        }),
                    ),
                    component(
                        weight,
                        "scales",
                        WeightComponentRole::Scales,
                        external_names,
                        ".scales",
                        scale_dims,
                        WeightEncoding::Dense {
                            element_type: ElementType::F16,
                        },
                    ),
                ],
            }
        }
        (WeightFormat::GgufQ4k, WeightClass::Head) if input % 256 == 0 => {
            block(Q6K_QUANTIZATION, 256, 210)
        }
        (
            WeightFormat::GgufQ4k,
            WeightClass::Projection | WeightClass::Embedding | WeightClass::Head,
        ) => {
            if input % 256 == 0 {
                block(Q4K_QUANTIZATION, 256, 144)
            } else if input % 32 == 0 {
                block(Q8_0_QUANTIZATION, 32, 34)
            } else {
                dense(ElementType::F16)
            }
        }
        (WeightFormat::GgufQ4k, WeightClass::Norm) => dense(ElementType::F32),
        (WeightFormat::Gguf(mix), _) => {
            let model = plan.gguf.as_ref().ok_or_else(|| {
                SynthError::Internal(format!("GGUF mix without model facts for {weight}"))
            })?;
            let name = external_names.first().map_or("", String::as_str);
            let role = match class {
                WeightClass::Embedding => TensorRole::TokenEmbedding,
                WeightClass::Head => TensorRole::Output,
                WeightClass::Projection => TensorRole::of_projection(name),
                WeightClass::Norm => TensorRole::Kept,
                // The router (`ffn_gate_inp`) and conv kernels stay F32 as convert_hf_to_gguf.py
                // writes them;
                // the other plain weights (MLA's kv_b, which the latent attention kernel
                // reads dense) stay in 16 bits.
                WeightClass::Plain if name.ends_with(".gate") || name.ends_with("conv1d") => {
                    TensorRole::Kept
                }
                WeightClass::Plain => return Ok(dense(ElementType::F16)),
            };
            let chosen = gguf::tensor_type(mix, model, role, gguf::layer_of(name), input);
            match (chosen.block(), chosen.quantization_id()) {
                (Some((values, bytes)), Some(id)) => block(id, values, bytes),
                _ if chosen == gguf::GgufType::F16 => dense(ElementType::F16),
                _ => dense(ElementType::F32),
            }
        }
        (WeightFormat::Quantized(scheme), WeightClass::Projection | WeightClass::Head)
            if quantized_here(plan, scheme, class, external_names) =>
        {
            WeightLayout {
                logical_element_type: scheme.dense_type,
                components: quantization::projection_components(
                    scheme,
                    weight,
                    dims,
                    external_names,
                    &plan.group_key,
                )?,
            }
        }
        _ => dense(dense_type),
    })
}

/// Whether a projection (or the head) is quantized under `scheme`: projections unless a
/// pattern keeps them dense (or, for experts-only schemes, unless they are not routed
/// experts); the head only when the configuration quantizes it.
fn quantized_here(
    plan: &WeightPlan,
    scheme: Scheme,
    class: WeightClass,
    external_names: &[String],
) -> bool {
    let kept = external_names
        .iter()
        .any(|n| plan.keep_dense.iter().any(|p| p.matches(n)));
    match class {
        WeightClass::Head => scheme.quantize_head && !kept,
        _ if scheme.experts_only => !kept && external_names.iter().all(|n| n.contains(".experts.")),
        _ => !kept,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        vec!["model.layers.0.self_attn.q_proj".to_owned()]
    }

    #[test]
    fn gptq_packs_two_values_per_byte_with_group_scales() {
        let id: WeightId = portable("weight.layer.0.q_proj".to_owned());
        let layout = weight_layout(
            &WeightPlan::of(WeightFormat::GptqInt4),
            &id,
            &[4096, 4096],
            WeightClass::Projection,
            &names(),
        )
        .unwrap();
        let bytes: u64 = layout
            .components
            .iter()
            .map(|c| c.physical_bytes().unwrap())
            .sum();
        assert_eq!(bytes, 4096 * 4096 / 2 + 4096 / 128 * 4096 * 2);
        assert_eq!(
            layout.components[0].external_names,
            vec!["model.layers.0.self_attn.q_proj.qweight"]
        );
    }

    #[test]
    fn q4k_is_144_bytes_per_256_values() {
        let id: WeightId = portable("weight.layer.0.q_proj".to_owned());
        let layout = weight_layout(
            &WeightPlan::of(WeightFormat::GgufQ4k),
            &id,
            &[4096, 4096],
            WeightClass::Projection,
            &names(),
        )
        .unwrap();
        assert_eq!(
            layout.components[0].physical_bytes(),
            Some(4096 * 4096 / 256 * 144)
        );
        let norm = weight_layout(
            &WeightPlan::of(WeightFormat::GgufQ4k),
            &id,
            &[4096],
            WeightClass::Norm,
            &names(),
        )
        .unwrap();
        assert_eq!(norm.logical_element_type, ElementType::F32);
        assert!("gguf-q5".parse::<WeightFormat>().is_err());
    }
}
