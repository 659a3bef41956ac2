//! Weight schemas, resolved weight bindings and the execution weight plan (rules 1.2).
//!
//! Adaptation: the reference describes a logical weight's physical layout as a recursive
//! tree whose leaves reference component ids; the planner only ever asks that tree for the
//! components a logical weight uses, so jointplan stores that list directly
//! (`WeightTensorSpec::components`).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ids::{
    ContractVersion, MaterializerId, QuantizationFormatId, Sha256Hex, WeightFormatId, WeightId,
    WeightLayoutId,
};
use super::tensor::ElementType;

/// The weights of a model family: format, layout, physical components and logical tensors.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WeightSchema {
    /// The checkpoint format (e.g. `weight-format.safetensors.dense`).
    pub format_id: WeightFormatId,
    /// The checkpoint layout.
    pub layout_id: WeightLayoutId,
    /// Schema version (major ≠ 0).
    pub version: ContractVersion,
    /// Physical components, sorted by id.
    pub components: Vec<WeightComponentSpec>,
    /// Logical tensors, sorted by id.
    pub tensors: Vec<WeightTensorSpec>,
}

/// What a weight component holds.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum WeightComponentRole {
    /// Plain values.
    Values,
    /// Packed quantized values.
    PackedValues,
    /// Quantization scales.
    Scales,
    /// Quantization zero points.
    ZeroPoints,
    /// Gather indices.
    Indices,
    /// An axis permutation.
    Permutation,
    /// A codebook.
    Codebook,
    /// Opaque metadata.
    Metadata,
}

/// How a quantized component packs its values.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum QuantizationPacking {
    /// Values in order.
    Linear,
    /// Interleaved for vector loads.
    Interleaved,
    /// Tiled for tensor cores.
    Tiled,
}

/// A group-quantization scheme (GPTQ-style).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuantizationSpec {
    /// The quantization format.
    pub format_id: QuantizationFormatId,
    /// 1..=8 bits per weight.
    pub bits_per_weight: u8,
    /// Values per scale group (a power of two).
    pub group_size: u32,
    /// Packing order.
    pub packing: QuantizationPacking,
    /// Scale element type (f16, bf16 or f32).
    pub scale_type: ElementType,
    /// Zero-point element type (u8, u32, i8 or i32), if any.
    pub zero_point_type: Option<ElementType>,
}

/// A block-quantization scheme (GGUF-style).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BlockQuantizationSpec {
    /// The quantization format.
    pub format_id: QuantizationFormatId,
    /// Logical values per block (e.g. 256).
    pub logical_values_per_block: u32,
    /// Stored bytes per block (e.g. 144 for q4_k).
    pub bytes_per_block: u32,
}

/// How a component's bytes encode values.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum WeightEncoding {
    /// Plain elements.
    Dense {
        /// Element type.
        element_type: ElementType,
    },
    /// Elements with an affine transform.
    DenseAffine {
        /// Element type.
        element_type: ElementType,
        /// Scale, as text (opaque to the planner).
        scale: String,
        /// Bias, as text (opaque to the planner).
        bias: String,
    },
    /// Group-quantized bytes (one byte per stored element).
    Quantized(QuantizationSpec),
    /// Block-quantized bytes (`bytes_per_block` per stored element, i.e. per block).
    BlockQuantized(BlockQuantizationSpec),
}

impl WeightEncoding {
    /// The element type of the stored bytes: the dense type, else `u8`.
    pub fn physical_element_type(&self) -> ElementType {
        match self {
            Self::Dense { element_type } | Self::DenseAffine { element_type, .. } => *element_type,
            Self::Quantized(_) | Self::BlockQuantized(_) => ElementType::U8,
        }
    }

    /// The quantization format, for quantized encodings.
    pub fn quantization_format(&self) -> Option<&QuantizationFormatId> {
        match self {
            Self::Quantized(spec) => Some(&spec.format_id),
            Self::BlockQuantized(spec) => Some(&spec.format_id),
            _ => None,
        }
    }

    /// Stored bytes for `elements` stored elements, `None` on overflow.
    pub fn physical_bytes(&self, elements: u64) -> Option<u64> {
        match self {
            Self::Dense { element_type } | Self::DenseAffine { element_type, .. } => {
                elements.checked_mul(element_type.byte_size())
            }
            Self::Quantized(_) => Some(elements),
            Self::BlockQuantized(spec) => elements.checked_mul(u64::from(spec.bytes_per_block)),
        }
    }
}

/// One physical component of the checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WeightComponentSpec {
    /// Unique component id.
    pub id: WeightId,
    /// What it holds.
    pub role: WeightComponentRole,
    /// Tensor names in the checkpoint files.
    pub external_names: Vec<String>,
    /// Stored extents.
    pub dimensions: Vec<u64>,
    /// How the bytes encode values.
    pub encoding: WeightEncoding,
    /// Whether the checkpoint must contain it.
    pub required: bool,
}

impl WeightComponentSpec {
    /// Stored bytes of this component, `None` on overflow.
    pub fn physical_bytes(&self) -> Option<u64> {
        let elements = self
            .dimensions
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))?;
        self.encoding.physical_bytes(elements)
    }
}

/// A logical weight tensor and the components that store it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WeightTensorSpec {
    /// Unique logical weight id.
    pub id: WeightId,
    /// Logical extents.
    pub dimensions: Vec<u64>,
    /// Logical element type.
    pub logical_element_type: ElementType,
    /// Ids of the physical components (sorted, unique) that store it.
    pub components: Vec<WeightId>,
    /// Whether the model needs it.
    pub required: bool,
}

impl WeightSchema {
    /// The component with this id.
    pub fn component(&self, id: &WeightId) -> Option<&WeightComponentSpec> {
        self.components
            .binary_search_by(|c| c.id.cmp(id))
            .ok()
            .map(|i| &self.components[i])
    }

    /// The logical tensor with this id.
    pub fn tensor(&self, id: &WeightId) -> Option<&WeightTensorSpec> {
        self.tensors
            .binary_search_by(|t| t.id.cmp(id))
            .ok()
            .map(|i| &self.tensors[i])
    }

    /// Quantization formats of every component.
    pub fn quantization_formats(&self) -> std::collections::BTreeSet<QuantizationFormatId> {
        self.components
            .iter()
            .filter_map(|c| c.encoding.quantization_format().cloned())
            .collect()
    }

    /// The resolved binding of one logical weight, as a provider must receive it
    /// (`ResolvedWeightBinding::from_schema` in the reference).
    pub fn resolved_binding(&self, weight_id: &WeightId) -> Option<ResolvedWeightBinding> {
        let tensor = self.tensor(weight_id)?;
        let mut components = Vec::with_capacity(tensor.components.len());
        for id in &tensor.components {
            let spec = self.component(id)?;
            components.push(ResolvedWeightComponent {
                component_id: spec.id.clone(),
                role: spec.role,
                physical_dimensions: spec.dimensions.clone(),
                encoding: spec.encoding.clone(),
            });
        }
        components.sort_by(|a, b| a.component_id.cmp(&b.component_id));
        Some(ResolvedWeightBinding {
            weight_id: weight_id.clone(),
            format_id: self.format_id.clone(),
            layout_id: self.layout_id.clone(),
            schema_version: self.version,
            components,
        })
    }
}

/// The weight a weights-usage binding carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolvedWeightBinding {
    /// The logical weight.
    pub weight_id: WeightId,
    /// The weight format.
    pub format_id: WeightFormatId,
    /// The weight layout.
    pub layout_id: WeightLayoutId,
    /// The schema version.
    pub schema_version: ContractVersion,
    /// Its physical components, sorted by component id.
    pub components: Vec<ResolvedWeightComponent>,
}

impl ResolvedWeightBinding {
    /// Quantization formats of its quantized components.
    pub fn quantization_formats(&self) -> std::collections::BTreeSet<QuantizationFormatId> {
        self.components
            .iter()
            .filter_map(|c| c.encoding.quantization_format().cloned())
            .collect()
    }
}

/// One physical component of a resolved weight.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolvedWeightComponent {
    /// The schema component.
    pub component_id: WeightId,
    /// What it holds.
    pub role: WeightComponentRole,
    /// Stored extents.
    pub physical_dimensions: Vec<u64>,
    /// How the bytes encode values.
    pub encoding: WeightEncoding,
}

/// The weights providers consume, as produced by a trusted materializer from the family's
/// source schema. The default is the identity materializer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecutionWeightPlan {
    /// Canonical sha256 of the family's source weight schema.
    pub source_schema_fingerprint: Sha256Hex,
    /// The materializer.
    pub materializer_id: MaterializerId,
    /// Its version.
    pub materializer_version: ContractVersion,
    /// Its implementation fingerprint.
    pub materializer_implementation_fingerprint: Sha256Hex,
    /// For each execution component, the source components it is made from.
    pub component_sources: BTreeMap<WeightId, Vec<WeightId>>,
    /// The execution schema.
    pub schema: WeightSchema,
}

/// A weight materializer the catalog trusts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WeightMaterializerDescriptor {
    /// Materializer id.
    pub id: MaterializerId,
    /// Its version.
    pub version: ContractVersion,
    /// Its implementation fingerprint.
    pub implementation_fingerprint: Sha256Hex,
}

/// The identity materializer's id.
pub const IDENTITY_MATERIALIZER_ID: &str = "weight-materializer.identity";
/// The identity materializer's contract tag.
pub const IDENTITY_MATERIALIZER_CONTRACT: &str = "execution-weight-plan.identity.v1";
