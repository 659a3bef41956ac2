//! What one node of a request costs per unit of work, read from the request alone: the
//! node's operation, its bound tensors (weights in their stored encoding, activations,
//! states) and its attributes. No architecture description is consulted, so any request
//! the planner accepts has a profile.
//!
//! Rules (stated in `docs/performance-model.md`):
//! * a weight of rank >= 2 is a matrix: each row of work multiplies it once, `2 x` its
//!   logical elements FLOPs per row, and its stored bytes (the resolved components'
//!   encodings: dense, group- or block-quantized) are read once per step;
//! * a weight of rank 1 (norm scale, bias) is read once per step, no matrix FLOPs;
//! * a gather (an operation named `*embedding*` or `*gather*`) reads one row of its table
//!   per row of work;
//! * an activation whose shape has the work's token extent is per token, one whose first
//!   axis is the policy's sequence ceiling is per sequence, any other is per step;
//! * a token-scaled state (KV cache, latent cache) is read at the context (capped by the
//!   `sliding_window` attribute) and written for each new token; a fixed per-sequence state
//!   (recurrent state, convolution window) is read and written once per sequence and step;
//! * an expert group node (`group_experts`, `experts_per_token` attributes) touches the
//!   expected distinct experts `g (1 - (1 - k/E)^rows)` of its `g` and does `rows k g / E`
//!   token-expert products; `E` is the `experts` attribute of the router of its layer.

use std::collections::BTreeMap;

use crate::request::{
    BufferUsage, ElementType, NodeId, NodeResolution, PlanRequest, ProgramNode, SemanticValue,
    StateCapacityDemand, WeightEncoding, WorkSpec,
};

use super::PerfError;

/// The arithmetic a node's FLOPs are computed in, the key of a device's peak table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ComputeType {
    /// IEEE single precision.
    Fp32,
    /// bfloat16 / float16 tensor-core math.
    Bf16,
    /// 8-bit floating point.
    Fp8,
    /// 8-bit integer.
    Int8,
    /// 4-bit floating point.
    Fp4,
}

impl ComputeType {
    /// Every type, in table order.
    pub const ALL: [ComputeType; 5] = [Self::Fp32, Self::Bf16, Self::Fp8, Self::Int8, Self::Fp4];

    /// Index in [`ComputeType::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The spelling in device files and calibration files.
    pub fn name(self) -> &'static str {
        match self {
            Self::Fp32 => "fp32",
            Self::Bf16 => "bf16",
            Self::Fp8 => "fp8",
            Self::Int8 => "int8",
            Self::Fp4 => "fp4",
        }
    }

    /// The type a stored encoding computes in: 16-bit floats in bf16, f32 in fp32; fp8
    /// weights (`quantization.fp8.*`) in fp8 and W8A8 int8 (`quantization.int8.*`) in int8
    /// (the engines quantize the activations on the fly and run the 8-bit tensor-core GEMM:
    /// vLLM's `cutlass_w8a8_scaled_mm`), NVFP4 (`quantization.nvidia.nvfp4`) in fp4; other
    /// quantized weights in bf16 (Marlin- and GGUF-class kernels dequantize into 16-bit
    /// math). A device without the type's peak falls back to the next wider type's.
    pub fn of_encoding(encoding: &WeightEncoding) -> ComputeType {
        match encoding {
            WeightEncoding::Dense { element_type }
            | WeightEncoding::DenseAffine { element_type, .. } => Self::of_element(*element_type),
            WeightEncoding::Quantized(_) | WeightEncoding::BlockQuantized(_) => {
                let format = encoding.quantization_format().map_or("", |f| f.as_str());
                if format.starts_with("quantization.fp8.") {
                    Self::Fp8
                } else if format.starts_with("quantization.int8.") {
                    Self::Int8
                } else if format == "quantization.nvidia.nvfp4" {
                    Self::Fp4
                } else {
                    Self::Bf16
                }
            }
        }
    }

    /// The type an activation or state element type computes in.
    pub fn of_element(element: ElementType) -> ComputeType {
        match element {
            ElementType::F32 | ElementType::U32 | ElementType::I32 => Self::Fp32,
            ElementType::I8 | ElementType::U8 | ElementType::Bool => Self::Int8,
            ElementType::F16 | ElementType::Bf16 => Self::Bf16,
        }
    }
}

/// Whose count multiplies a node's matrices: every scheduled token, or one row per
/// sequence (an output head over the last token).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rows {
    /// One row per scheduled token.
    Tokens,
    /// One row per sequence of the step.
    Sequences,
    /// Work independent of the step (`work: fixed`): one row.
    Fixed,
}

/// An expert group: `group` of the layer's `experts`, each token choosing `top_k`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExpertGroup {
    /// Experts in this node's group.
    pub group: u64,
    /// Experts of the layer.
    pub experts: u64,
    /// Experts each token is routed to.
    pub top_k: u64,
}

/// Attention over a token-scaled state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionCost {
    /// Bytes the state holds per cached token (all token-scaled states of the node).
    pub state_bytes_per_token: u64,
    /// FLOPs per (query token, cached token) pair.
    pub flops_per_pair: u64,
    /// The sliding window, if the node attends to the last tokens only.
    pub window: Option<u64>,
    /// Arithmetic of the attention.
    pub compute: ComputeType,
}

/// One node's costs per unit of work.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeProfile {
    /// The node.
    pub node_id: NodeId,
    /// Its costs (equal for nodes that cost the same, e.g. the same node of every layer).
    pub cost: NodeCost,
}

/// What a node costs per unit of work, whatever its id.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeCost {
    /// Its operation id's last part (`dense_linear`, `causal_paged_attention`): the kind
    /// the roofline table groups by.
    pub kind: String,
    /// How rows are counted.
    pub rows: Rows,
    /// Logical elements of the matrix weights (FLOPs are twice this per row).
    pub matrix_elements: u64,
    /// Stored bytes of the matrix weights.
    pub matrix_bytes: u64,
    /// Arithmetic of the matrix products.
    pub matrix_compute: ComputeType,
    /// Logical dimensions of the first matrix weight (the shape calibration entries name).
    pub matrix_dimensions: Option<Vec<u64>>,
    /// Stored bytes of the rank-1 weights.
    pub vector_bytes: u64,
    /// Bytes a gather (an `*embedding*` or `*gather*` operation) reads per row: one row of
    /// its table instead of the whole matrix.
    pub gather_bytes_per_row: u64,
    /// Activation bytes read and written per scheduled token.
    pub activation_bytes_per_token: u64,
    /// Activation bytes per sequence of the step.
    pub activation_bytes_per_sequence: u64,
    /// Activation bytes per step.
    pub activation_bytes_fixed: u64,
    /// Expert routing of the matrices, if the node is an expert group.
    pub experts: Option<ExpertGroup>,
    /// Attention over a cache, if the node reads one.
    pub attention: Option<AttentionCost>,
    /// Bytes of fixed per-sequence states (read and written each step).
    pub recurrent_state_bytes: u64,
    /// FLOPs per token of the recurrent update (0 without recurrent state).
    pub recurrent_flops_per_token: u64,
    /// Kernels one invocation launches.
    pub kernels: u64,
}

fn unsigned(node: &ProgramNode, name: &str) -> Option<u64> {
    match node.attributes.get(name) {
        Some(SemanticValue::Unsigned(v)) => Some(*v),
        Some(SemanticValue::Integer(v)) => u64::try_from(*v).ok(),
        _ => None,
    }
}

fn overflow(node: &NodeId, what: &str) -> PerfError {
    PerfError::Overflow {
        node: node.to_string(),
        what: what.to_owned(),
    }
}

/// The profiles of every node of `request`, in program order.
pub fn profiles(request: &PlanRequest) -> Result<Vec<NodeProfile>, PerfError> {
    let resolutions: BTreeMap<&NodeId, &NodeResolution> = request
        .node_resolutions
        .iter()
        .map(|r| (&r.node_id, r))
        .collect();
    // The routers' expert counts by layer, for the expert groups of the same layer.
    let mut layer_experts: BTreeMap<u64, u64> = BTreeMap::new();
    for node in request.family.program.nodes() {
        if let (Some(experts), None) = (unsigned(node, "experts"), unsigned(node, "group_experts"))
        {
            layer_experts.insert(unsigned(node, "layer_index").unwrap_or(0), experts);
        }
    }
    let sequences = u64::from(request.policy.maximum_active_sequences);
    request
        .family
        .program
        .nodes()
        .map(|node| {
            let resolution = resolutions
                .get(&node.id)
                .ok_or_else(|| PerfError::Request {
                    node: node.id.to_string(),
                    message: "has no node resolution".to_owned(),
                })?;
            profile(request, node, resolution, sequences, &layer_experts)
        })
        .collect()
}

fn profile(
    request: &PlanRequest,
    node: &ProgramNode,
    resolution: &NodeResolution,
    sequence_ceiling: u64,
    layer_experts: &BTreeMap<u64, u64>,
) -> Result<NodeProfile, PerfError> {
    let id = &node.id;
    let kind = node
        .operation_id
        .as_str()
        .rsplit('.')
        .next()
        .unwrap_or(node.operation_id.as_str())
        .to_owned();
    // The token extent of the node's work, as the request sized its tensors.
    let token_extent = match &node.work {
        WorkSpec::Fixed => None,
        WorkSpec::Tokens { value_id, axis } => resolution
            .values
            .iter()
            .find(|v| &v.value_id == value_id)
            .and_then(|v| v.tensor.dimensions.get(*axis as usize).copied())
            .filter(|&t| t > 0),
    };
    let mut p = NodeCost {
        kind,
        rows: if token_extent.is_some() {
            Rows::Tokens
        } else {
            Rows::Fixed
        },
        matrix_elements: 0,
        matrix_bytes: 0,
        matrix_compute: ComputeType::Bf16,
        matrix_dimensions: None,
        vector_bytes: 0,
        gather_bytes_per_row: 0,
        activation_bytes_per_token: 0,
        activation_bytes_per_sequence: 0,
        activation_bytes_fixed: 0,
        experts: None,
        attention: None,
        recurrent_state_bytes: 0,
        recurrent_flops_per_token: 0,
        kernels: 0,
    };
    let states: BTreeMap<_, _> = request
        .family
        .program
        .states
        .iter()
        .map(|s| (&s.value_id, s))
        .collect();
    let mut any_output_per_token = false;
    let mut matrix_types: Vec<ComputeType> = Vec::new();
    let mut states_bound = 0u64;
    let mut fixed_state_elements = 0u64;
    let token_axis = match &node.work {
        WorkSpec::Tokens { axis, .. } => *axis as usize,
        WorkSpec::Fixed => 0,
    };
    for value in &resolution.values {
        let bytes = value
            .tensor
            .byte_len()
            .ok_or_else(|| overflow(id, "a bound tensor's bytes"))?;
        match value.usage {
            BufferUsage::Weights => {
                let stored = match &value.weight {
                    Some(weight) => weight.components.iter().try_fold(0u64, |acc, c| {
                        let elements = c
                            .physical_dimensions
                            .iter()
                            .try_fold(1u64, |a, &d| a.checked_mul(d))?;
                        acc.checked_add(c.encoding.physical_bytes(elements)?)
                    }),
                    None => Some(bytes),
                }
                .ok_or_else(|| overflow(id, "a weight's stored bytes"))?;
                if value.tensor.dimensions.len() >= 2 {
                    let elements = value
                        .tensor
                        .element_count()
                        .ok_or_else(|| overflow(id, "a weight's elements"))?;
                    p.matrix_elements = p
                        .matrix_elements
                        .checked_add(elements)
                        .ok_or_else(|| overflow(id, "matrix elements"))?;
                    p.matrix_bytes = p
                        .matrix_bytes
                        .checked_add(stored)
                        .ok_or_else(|| overflow(id, "matrix bytes"))?;
                    if let Some(c) = value.weight.as_ref().and_then(|w| w.components.first()) {
                        matrix_types.push(ComputeType::of_encoding(&c.encoding));
                    } else {
                        matrix_types.push(ComputeType::of_element(value.tensor.element_type));
                    }
                    p.kernels += 1;
                    if p.matrix_dimensions.is_none() {
                        p.matrix_dimensions = Some(value.tensor.dimensions.clone());
                    }
                } else {
                    p.vector_bytes = p
                        .vector_bytes
                        .checked_add(stored)
                        .ok_or_else(|| overflow(id, "vector weight bytes"))?;
                }
            }
            BufferUsage::State => {
                states_bound += 1;
                let Some(state) = states.get(&value.value_id) else {
                    continue;
                };
                match state.capacity_demand {
                    StateCapacityDemand::TokenScaled {
                        bytes_per_token, ..
                    } => {
                        let elements = bytes_per_token / state.tensor.element_type.byte_size();
                        let attention = p.attention.get_or_insert(AttentionCost {
                            state_bytes_per_token: 0,
                            flops_per_pair: 0,
                            window: unsigned(node, "sliding_window"),
                            compute: ComputeType::of_element(state.tensor.element_type),
                        });
                        attention.state_bytes_per_token = attention
                            .state_bytes_per_token
                            .checked_add(bytes_per_token)
                            .ok_or_else(|| overflow(id, "state bytes per token"))?;
                        attention.flops_per_pair = pair_flops(node, elements)
                            .ok_or_else(|| overflow(id, "attention FLOPs"))?;
                    }
                    StateCapacityDemand::FixedPerScope => {
                        p.recurrent_state_bytes = p
                            .recurrent_state_bytes
                            .checked_add(bytes)
                            .ok_or_else(|| overflow(id, "state bytes"))?;
                        fixed_state_elements = value
                            .tensor
                            .element_count()
                            .and_then(|e| e.checked_add(fixed_state_elements))
                            .ok_or_else(|| overflow(id, "state elements"))?;
                    }
                }
            }
            BufferUsage::Activations => {
                let per_token = token_extent.and_then(|t| {
                    (value.tensor.dimensions.get(token_axis) == Some(&t)).then(|| bytes / t)
                });
                let is_output = value.role == crate::request::ValueRole::Output;
                match per_token {
                    Some(b) => {
                        any_output_per_token |= is_output;
                        p.activation_bytes_per_token += b;
                    }
                    None if value.tensor.dimensions.first() == Some(&sequence_ceiling) => {
                        p.activation_bytes_per_sequence += bytes / sequence_ceiling.max(1);
                    }
                    None => p.activation_bytes_fixed += bytes,
                }
            }
            _ => {}
        }
    }
    // An output head over the last token: the operation says so, or no output scales
    // with the tokens while the node's work does.
    let has_outputs = resolution.values.iter().any(|v| {
        v.role == crate::request::ValueRole::Output && v.usage == BufferUsage::Activations
    });
    if p.rows == Rows::Tokens
        && (p.kind.contains("last_token") || (has_outputs && !any_output_per_token))
    {
        p.rows = Rows::Sequences;
    }
    // A gather reads one row of its table per row of work and multiplies nothing.
    if p.kind.contains("embedding") || p.kind.contains("gather") {
        let table_rows = p
            .matrix_dimensions
            .as_ref()
            .and_then(|d| d.first().copied())
            .filter(|&r| r > 0)
            .unwrap_or(1);
        p.gather_bytes_per_row = p.matrix_bytes / table_rows;
        p.matrix_bytes = 0;
        p.matrix_elements = 0;
    }
    // The widest type among the node's matrices bounds its arithmetic.
    if let Some(t) = matrix_types.iter().min() {
        p.matrix_compute = *t;
    }
    if p.recurrent_state_bytes > 0 {
        p.recurrent_flops_per_token = match recurrent_flops(node) {
            Some(flops) => flops,
            None => fixed_state_elements
                .checked_mul(2)
                .ok_or_else(|| overflow(id, "recurrent FLOPs"))?,
        };
    }
    if let (Some(group), Some(top_k)) = (
        unsigned(node, "group_experts"),
        unsigned(node, "experts_per_token"),
    ) {
        let layer = unsigned(node, "layer_index").unwrap_or(0);
        let experts = layer_experts
            .get(&layer)
            .copied()
            .unwrap_or(group)
            .max(group);
        p.experts = Some(ExpertGroup {
            group,
            experts,
            top_k: top_k.min(experts),
        });
    }
    p.kernels += states_bound;
    p.kernels = p.kernels.max(1);
    Ok(NodeProfile {
        node_id: id.clone(),
        cost: p,
    })
}

/// FLOPs per (query token, cached token) pair: multi-head latent attention in its absorbed
/// form `2 heads (2 kv_lora_rank + qk_rope_head_dim)` (scores over the latent and rope
/// parts, values over the latent); grouped-query attention `4 query_heads head_dim`
/// (scores and values); otherwise `2 x` the cached elements per token.
fn pair_flops(node: &ProgramNode, state_elements_per_token: u64) -> Option<u64> {
    let heads = unsigned(node, "query_heads");
    if let (Some(heads), Some(rank)) = (heads, unsigned(node, "kv_lora_rank")) {
        let rope = unsigned(node, "qk_rope_head_dim").unwrap_or(0);
        return 2u64
            .checked_mul(heads)?
            .checked_mul(rank.checked_mul(2)?.checked_add(rope)?);
    }
    if let (Some(heads), Some(dim)) = (heads, unsigned(node, "head_dim")) {
        return 4u64.checked_mul(heads)?.checked_mul(dim);
    }
    state_elements_per_token.checked_mul(2)
}

/// FLOPs per token of a gated delta rule: `4 value_heads key_head_dim value_head_dim` (the
/// state decay and rank-one update, and the read-out), when the attributes name them;
/// otherwise `2 x` the state's elements.
fn recurrent_flops(node: &ProgramNode) -> Option<u64> {
    let heads = unsigned(node, "value_heads")?;
    let key = unsigned(node, "key_head_dim")?;
    let value = unsigned(node, "value_head_dim")?;
    4u64.checked_mul(heads)?
        .checked_mul(key)?
        .checked_mul(value)
}
