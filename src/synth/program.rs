//! The program builder: values, weights, states and nodes, with the resource layout every
//! value gets as it is created.
//!
//! Resource layout:
//! * weights live in a few arenas, one per block group and physical element type
//!   (`resource/weights/layer.3.f16`, `resource/weights/layer.3.u8`, ...), each component at
//!   an offset aligned to [`WEIGHT_ALIGNMENT`] (a multiple of every provider's value
//!   alignment);
//! * every activation gets its own resource (`resource/activation/...`), sized for the
//!   policy's token ceiling; values written in place (residual adds, expert accumulation,
//!   attention over its query, per-head norms) reuse the resource of the input they alias;
//! * every state gets its own resource (`resource/state/layer.{i}.kv`, ...).

use std::collections::{BTreeMap, BTreeSet};

use crate::request::align_up;
use crate::request::{
    AttributeId, BufferUsage, ContractVersion, ElementType, ModelFamilyId, ModelProgram, NodeId,
    ProgramBlock, ProgramNode, ProgramValueId, Rational, ResolvedWeightBinding, ResourceId,
    SemanticValue, StateCapacityDemand, StateId, StateInitialization, StateLifetime, StateSpec,
    StorageComponent, TensorLayout, TensorSpec, ValueStorage, WeightComponentSpec, WeightId,
    WeightLayoutId, WeightReference, WeightSchema, WeightTensorSpec, WorkSpec,
};

use super::operation::Operation;
use super::weights::{weight_layout, WeightClass, WeightPlan};
use super::{portable, SynthError};

/// Alignment of every weight component offset in its arena.
pub const WEIGHT_ALIGNMENT: u64 = 256;

/// How one value is bound wherever it appears.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValueInfo {
    /// Its tensor.
    pub tensor: TensorSpec,
    /// Its usage.
    pub usage: BufferUsage,
    /// Its storage.
    pub storage: ValueStorage,
    /// Its resolved weight, for weight values.
    pub weight: Option<ResolvedWeightBinding>,
}

/// A built program with everything the resolutions need.
pub struct ProgramParts {
    /// The program.
    pub program: ModelProgram,
    /// The source weight schema.
    pub schema: WeightSchema,
    /// Every value's binding facts.
    pub values: BTreeMap<ProgramValueId, ValueInfo>,
    /// The operation of each node, in execution order.
    pub operations: Vec<Operation>,
    /// KV bytes per token of each attention node's cache, by node index.
    pub kv_bytes_per_token: BTreeMap<usize, u64>,
}

/// Builds a program value by value.
pub struct ProgramBuilder {
    family_id: ModelFamilyId,
    plan: WeightPlan,
    blocks: Vec<ProgramBlock>,
    values: BTreeMap<ProgramValueId, ValueInfo>,
    weights: Vec<WeightReference>,
    components: Vec<WeightComponentSpec>,
    tensors: Vec<WeightTensorSpec>,
    states: Vec<StateSpec>,
    inputs: Vec<ProgramValueId>,
    operations: Vec<Operation>,
    kv_bytes_per_token: BTreeMap<usize, u64>,
    arenas: BTreeMap<String, u64>,
}

/// An attribute value built from a plain number or flag.
pub enum Attr {
    /// Unsigned integer.
    U(u64),
    /// Exact rational from a decimal.
    R(f64),
    /// Flag.
    B(bool),
    /// Text.
    S(String),
}

/// The exact rational of a decimal configuration value (denominators up to 10^12).
pub fn rational(value: f64, what: &str) -> Result<Rational, SynthError> {
    let mut denominator: u64 = 1;
    for _ in 0..=12 {
        let scaled = value * denominator as f64;
        let rounded = scaled.round();
        // Exact up to floating-point representation error of `scaled`, not a relative tolerance
        // (which would accept any real number once the denominator is large enough).
        let tolerance = (scaled.abs() * 4.0 * f64::EPSILON).max(1e-9);
        if (scaled - rounded).abs() <= tolerance && rounded.abs() < 9.0e18 {
            let numerator = rounded as i64;
            let g = gcd(numerator.unsigned_abs(), denominator).max(1);
            return Ok(Rational {
                numerator: numerator / g as i64,
                denominator: denominator / g,
            });
        }
        denominator *= 10;
    }
    Err(SynthError::config(
        what,
        format!("{value} has no exact decimal form with at most 12 digits"),
    ))
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn dtype_name(t: ElementType) -> &'static str {
    match t {
        ElementType::Bool => "bool",
        ElementType::U8 => "u8",
        ElementType::U32 => "u32",
        ElementType::I8 => "i8",
        ElementType::I32 => "i32",
        ElementType::F16 => "f16",
        ElementType::Bf16 => "bf16",
        ElementType::F32 => "f32",
    }
}

fn contiguous(dimensions: Vec<u64>, element_type: ElementType) -> TensorSpec {
    TensorSpec {
        dimensions,
        element_type,
        layout: TensorLayout::Contiguous,
    }
}

fn bytes_of(tensor: &TensorSpec, what: &str) -> Result<u64, SynthError> {
    tensor
        .byte_len()
        .ok_or_else(|| SynthError::overflow(&format!("bytes of {what}")))
}

impl ProgramBuilder {
    /// A builder for `family_id` with weights stored as `plan` says.
    pub fn new(family_id: ModelFamilyId, plan: WeightPlan) -> Self {
        Self {
            family_id,
            plan,
            blocks: Vec::new(),
            values: BTreeMap::new(),
            weights: Vec::new(),
            components: Vec::new(),
            tensors: Vec::new(),
            states: Vec::new(),
            inputs: Vec::new(),
            operations: Vec::new(),
            kv_bytes_per_token: BTreeMap::new(),
            arenas: BTreeMap::new(),
        }
    }

    /// Starts a block; the nodes that follow belong to it.
    pub fn block(&mut self, id: &str) {
        self.blocks.push(ProgramBlock {
            id: id.to_owned(),
            nodes: Vec::new(),
        });
    }

    fn insert(
        &mut self,
        id: ProgramValueId,
        info: ValueInfo,
    ) -> Result<ProgramValueId, SynthError> {
        if self.values.insert(id.clone(), info).is_some() {
            return Err(SynthError::Internal(format!("value {id} is defined twice")));
        }
        Ok(id)
    }

    fn single(
        resource: ResourceId,
        offset: u64,
        tensor: &TensorSpec,
        what: &str,
    ) -> Result<ValueStorage, SynthError> {
        Ok(ValueStorage {
            components: vec![StorageComponent {
                component_id: None,
                resource_id: resource,
                offset_bytes: offset,
                length_bytes: bytes_of(tensor, what)?,
                element_type: tensor.element_type,
            }],
        })
    }

    /// A program input activation with its own resource `resource/input/{name}`.
    pub fn program_input(
        &mut self,
        name: &str,
        dims: Vec<u64>,
        dtype: ElementType,
    ) -> Result<ProgramValueId, SynthError> {
        let id: ProgramValueId = portable(format!("value.input.{name}"));
        let tensor = contiguous(dims, dtype);
        let storage = Self::single(
            portable(format!("resource/input/{name}")),
            0,
            &tensor,
            id.as_str(),
        )?;
        self.inputs.push(id.clone());
        self.insert(
            id,
            ValueInfo {
                tensor,
                usage: BufferUsage::Activations,
                storage,
                weight: None,
            },
        )
    }

    /// An activation `value.{name}` with its own resource `resource/activation/{name}`.
    pub fn activation(
        &mut self,
        name: &str,
        dims: Vec<u64>,
        dtype: ElementType,
    ) -> Result<ProgramValueId, SynthError> {
        let id: ProgramValueId = portable(format!("value.{name}"));
        let tensor = contiguous(dims, dtype);
        let storage = Self::single(
            portable(format!("resource/activation/{name}")),
            0,
            &tensor,
            id.as_str(),
        )?;
        self.insert(
            id,
            ValueInfo {
                tensor,
                usage: BufferUsage::Activations,
                storage,
                weight: None,
            },
        )
    }

    /// An activation `value.{name}` written in place over `of` (same tensor and storage).
    pub fn in_place(
        &mut self,
        name: &str,
        of: &ProgramValueId,
    ) -> Result<ProgramValueId, SynthError> {
        let base = self
            .values
            .get(of)
            .cloned()
            .ok_or_else(|| SynthError::Internal(format!("value {of} is not defined")))?;
        self.insert(portable(format!("value.{name}")), base)
    }

    /// A weight `weight.{name}` (value `value.weight.{name}`) of logical `dims`, stored in
    /// the arenas of `group`.
    pub fn weight(
        &mut self,
        name: &str,
        group: &str,
        dims: Vec<u64>,
        class: WeightClass,
        external_names: &[String],
    ) -> Result<ProgramValueId, SynthError> {
        let weight_id: WeightId = portable(format!("weight.{name}"));
        let value_id: ProgramValueId = portable(format!("value.weight.{name}"));
        let layout = weight_layout(&self.plan, &weight_id, &dims, class, external_names)?;
        let tensor = contiguous(dims.clone(), layout.logical_element_type);
        let mut storage = Vec::with_capacity(layout.components.len());
        let mut resolved = Vec::with_capacity(layout.components.len());
        for spec in &layout.components {
            let element_type = spec.encoding.physical_element_type();
            let arena = format!("resource/weights/{group}.{}", dtype_name(element_type));
            let length = spec
                .physical_bytes()
                .ok_or_else(|| SynthError::overflow(&format!("bytes of {}", spec.id)))?;
            let cursor = self.arenas.entry(arena.clone()).or_insert(0);
            let offset = *cursor;
            *cursor = offset
                .checked_add(length)
                .and_then(|end| align_up(end, WEIGHT_ALIGNMENT))
                .ok_or_else(|| SynthError::overflow(&format!("weight arena {arena}")))?;
            storage.push(StorageComponent {
                component_id: Some(spec.id.clone()),
                resource_id: portable(arena),
                offset_bytes: offset,
                length_bytes: length,
                element_type,
            });
            resolved.push(crate::request::ResolvedWeightComponent {
                component_id: spec.id.clone(),
                role: spec.role,
                physical_dimensions: spec.dimensions.clone(),
                encoding: spec.encoding.clone(),
            });
        }
        storage.sort();
        resolved.sort_by(|a, b| a.component_id.cmp(&b.component_id));
        let component_ids: Vec<WeightId> =
            resolved.iter().map(|c| c.component_id.clone()).collect();
        self.components.extend(layout.components);
        self.tensors.push(WeightTensorSpec {
            id: weight_id.clone(),
            dimensions: dims,
            logical_element_type: layout.logical_element_type,
            components: component_ids,
            required: true,
        });
        self.weights.push(WeightReference {
            weight_id: weight_id.clone(),
            value_id: value_id.clone(),
            tensor: tensor.clone(),
        });
        let binding = ResolvedWeightBinding {
            weight_id,
            format_id: portable(self.plan.format.format_id().to_owned()),
            layout_id: WeightLayoutId::new("weight-layout.pending")
                .map_err(SynthError::Internal)?,
            schema_version: ContractVersion::new(1, 0),
            components: resolved,
        };
        self.insert(
            value_id,
            ValueInfo {
                tensor,
                usage: BufferUsage::Weights,
                storage: ValueStorage {
                    components: storage,
                },
                weight: Some(binding),
            },
        )
    }

    /// A sequence state `state.{name}` (value `value.state.{name}`, resource
    /// `resource/state/{name}`).
    pub fn state(
        &mut self,
        name: &str,
        dims: Vec<u64>,
        dtype: ElementType,
        capacity_demand: StateCapacityDemand,
        initialization: StateInitialization,
    ) -> Result<ProgramValueId, SynthError> {
        let id: ProgramValueId = portable(format!("value.state.{name}"));
        let tensor = contiguous(dims, dtype);
        let bytes = bytes_of(&tensor, id.as_str())?;
        if let Some(problem) = capacity_demand.problem(bytes) {
            return Err(SynthError::Internal(format!("state {name}: {problem}")));
        }
        let storage = Self::single(
            portable(format!("resource/state/{name}")),
            0,
            &tensor,
            id.as_str(),
        )?;
        self.states.push(StateSpec {
            id: portable::<StateId>(format!("state.{name}")),
            value_id: id.clone(),
            tensor: tensor.clone(),
            lifetime: StateLifetime::Sequence,
            capacity_demand,
            initialization,
        });
        self.insert(
            id,
            ValueInfo {
                tensor,
                usage: BufferUsage::State,
                storage,
                weight: None,
            },
        )
    }

    /// Records that the next node's cache holds `bytes` per token (for its estimator).
    pub fn note_kv_bytes_per_token(&mut self, bytes: u64) {
        self.kv_bytes_per_token.insert(self.operations.len(), bytes);
    }

    /// A node `node.{name}` of `op` whose work scales with axis 0 of its first input.
    pub fn node(
        &mut self,
        name: &str,
        op: Operation,
        inputs: Vec<ProgramValueId>,
        outputs: Vec<ProgramValueId>,
        attributes: Vec<(&str, Attr)>,
    ) -> Result<(), SynthError> {
        let work_value = inputs
            .first()
            .cloned()
            .ok_or_else(|| SynthError::Internal(format!("node {name} has no input")))?;
        let mut attrs = BTreeMap::new();
        for (key, value) in attributes {
            let value = match value {
                Attr::U(v) => SemanticValue::Unsigned(v),
                Attr::R(v) => SemanticValue::Rational(rational(v, key)?),
                Attr::B(v) => SemanticValue::Bool(v),
                Attr::S(v) => SemanticValue::Text(v),
            };
            attrs.insert(portable::<AttributeId>(key.to_owned()), value);
        }
        let node = ProgramNode {
            id: portable::<NodeId>(format!("node.{name}")),
            operation_id: op.id(),
            required_version: op.version(),
            work: WorkSpec::Tokens {
                value_id: work_value,
                axis: 0,
            },
            inputs,
            outputs,
            attributes: attrs,
        };
        let block = self
            .blocks
            .last_mut()
            .ok_or_else(|| SynthError::Internal("node before the first block".to_owned()))?;
        block.nodes.push(node);
        self.operations.push(op);
        Ok(())
    }

    /// Finishes the program with `outputs`, under weight layout `layout_id`.
    pub fn finish(
        mut self,
        outputs: Vec<ProgramValueId>,
        layout_id: WeightLayoutId,
    ) -> Result<ProgramParts, SynthError> {
        self.weights.sort_by(|a, b| a.weight_id.cmp(&b.weight_id));
        self.states.sort_by(|a, b| a.id.cmp(&b.id));
        self.components.sort_by(|a, b| a.id.cmp(&b.id));
        self.tensors.sort_by(|a, b| a.id.cmp(&b.id));
        let unique: BTreeSet<&WeightId> = self.components.iter().map(|c| &c.id).collect();
        if unique.len() != self.components.len() {
            return Err(SynthError::Internal(
                "duplicate weight component id".to_owned(),
            ));
        }
        for info in self.values.values_mut() {
            if let Some(binding) = info.weight.as_mut() {
                binding.layout_id = layout_id.clone();
            }
        }
        let schema = WeightSchema {
            format_id: portable(self.plan.format.format_id().to_owned()),
            layout_id,
            version: ContractVersion::new(1, 0),
            components: self.components,
            tensors: self.tensors,
        };
        let program = ModelProgram {
            family_id: self.family_id,
            inputs: self.inputs,
            blocks: self.blocks,
            states: self.states,
            weights: self.weights,
            outputs,
        };
        Ok(ProgramParts {
            program,
            schema,
            values: self.values,
            operations: self.operations,
            kv_bytes_per_token: self.kv_bytes_per_token,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_become_reduced_rationals() {
        let r = rational(1e-5, "rms_norm_eps").unwrap();
        assert_eq!((r.numerator, r.denominator), (1, 100000));
        let r = rational(500000.0, "rope_theta").unwrap();
        assert_eq!((r.numerator, r.denominator), (500000, 1));
        let r = rational(0.25, "partial_rotary_factor").unwrap();
        assert_eq!((r.numerator, r.denominator), (1, 4));
        assert!(r.problem().is_none());
        assert!(rational(std::f64::consts::PI, "x").is_err());
    }
}
