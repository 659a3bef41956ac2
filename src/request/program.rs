//! The model program: a backend-free dataflow graph of operation nodes over values,
//! weights and per-sequence state (rules 1.2).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ids::{
    AttributeId, ContractVersion, ModelFamilyId, NodeId, OperationId, ProgramValueId, StateId,
    WeightId,
};
use super::tensor::TensorSpec;

/// The program of one model family.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelProgram {
    /// The family this program belongs to.
    pub family_id: ModelFamilyId,
    /// Program inputs (non-empty, unique).
    pub inputs: Vec<ProgramValueId>,
    /// Blocks in execution order; their nodes flattened form the node order.
    pub blocks: Vec<ProgramBlock>,
    /// States, sorted by state id.
    pub states: Vec<StateSpec>,
    /// Weights, sorted by weight id.
    pub weights: Vec<WeightReference>,
    /// Program outputs (non-empty, unique, produced by some node).
    pub outputs: Vec<ProgramValueId>,
}

impl ModelProgram {
    /// All nodes of all blocks, in execution order.
    pub fn nodes(&self) -> impl Iterator<Item = &ProgramNode> {
        self.blocks.iter().flat_map(|block| block.nodes.iter())
    }
}

/// A named group of nodes (a layer, the embedding, the head).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProgramBlock {
    /// Free non-empty name, unique in the program.
    pub id: String,
    /// Nodes in execution order (at least one).
    pub nodes: Vec<ProgramNode>,
}

/// One operation invocation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProgramNode {
    /// Unique node id.
    pub id: NodeId,
    /// The catalog operation this node invokes.
    pub operation_id: OperationId,
    /// The operation contract version the node was written against.
    pub required_version: ContractVersion,
    /// How the node's work scales.
    pub work: WorkSpec,
    /// Consumed values, in slot order.
    pub inputs: Vec<ProgramValueId>,
    /// Produced values, in slot order (each new: single producer).
    pub outputs: Vec<ProgramValueId>,
    /// Attribute values, checked against the operation's attribute schema.
    #[serde(default)]
    pub attributes: BTreeMap<AttributeId, SemanticValue>,
}

/// How a node's work scales with the scheduler step.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum WorkSpec {
    /// Work independent of scheduled tokens.
    Fixed,
    /// Work proportional to the tokens of one activation axis.
    Tokens {
        /// The activation that carries the token axis (an input or output of the node).
        value_id: ProgramValueId,
        /// The axis that scales with scheduled tokens.
        axis: u32,
    },
}

/// An exact rational `numerator / denominator`, reduced by their gcd, denominator > 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Rational {
    /// Signed numerator.
    pub numerator: i64,
    /// Positive denominator.
    pub denominator: u64,
}

impl Rational {
    /// Why this rational is not canonical, if it is not.
    pub fn problem(&self) -> Option<String> {
        if self.denominator == 0 {
            return Some("rational has a zero denominator".to_owned());
        }
        let g = gcd(self.numerator.unsigned_abs(), self.denominator);
        if g != 1 && !(self.numerator == 0 && self.denominator == 1) {
            return Some(format!(
                "rational {}/{} is not reduced (gcd {g})",
                self.numerator, self.denominator
            ));
        }
        None
    }

    /// Compares two rationals exactly.
    pub fn cmp_value(&self, other: &Rational) -> std::cmp::Ordering {
        let left = i128::from(self.numerator) * i128::from(other.denominator);
        let right = i128::from(other.numerator) * i128::from(self.denominator);
        left.cmp(&right)
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The value of a node attribute.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SemanticValue {
    /// A boolean.
    Bool(bool),
    /// A signed integer.
    Integer(i64),
    /// An unsigned integer.
    Unsigned(u64),
    /// An exact rational.
    Rational(Rational),
    /// Non-empty text.
    Text(String),
    /// A non-empty list of signed integers.
    Integers(Vec<i64>),
}

impl SemanticValue {
    /// The kind of this value.
    pub fn kind(&self) -> ValueKind {
        match self {
            Self::Bool(_) => ValueKind::Bool,
            Self::Integer(_) => ValueKind::Integer,
            Self::Unsigned(_) => ValueKind::Unsigned,
            Self::Rational(_) => ValueKind::Rational,
            Self::Text(_) => ValueKind::Text,
            Self::Integers(_) => ValueKind::Integers,
        }
    }

    /// Why this value is malformed (empty text or list, unreduced rational).
    pub fn problem(&self) -> Option<String> {
        match self {
            Self::Text(text) if text.is_empty() => Some("text value is empty".to_owned()),
            Self::Integers(list) if list.is_empty() => Some("integer list is empty".to_owned()),
            Self::Rational(r) => r.problem(),
            _ => None,
        }
    }
}

/// The kind of an attribute value.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ValueKind {
    /// [`SemanticValue::Bool`].
    Bool,
    /// [`SemanticValue::Integer`].
    Integer,
    /// [`SemanticValue::Unsigned`].
    Unsigned,
    /// [`SemanticValue::Rational`].
    Rational,
    /// [`SemanticValue::Text`].
    Text,
    /// [`SemanticValue::Integers`].
    Integers,
}

/// A weight tensor the program reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WeightReference {
    /// The logical weight in the weight schema.
    pub weight_id: WeightId,
    /// The program value that carries it.
    pub value_id: ProgramValueId,
    /// Its logical tensor.
    pub tensor: TensorSpec,
}

/// How long a state lives.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum StateLifetime {
    /// One request.
    Request,
    /// One sequence (a KV cache).
    Sequence,
    /// One scheduler step.
    Step,
}

/// How much memory a state needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum StateCapacityDemand {
    /// The tensor's bytes, once per scope.
    FixedPerScope,
    /// Bytes proportional to the tokens held (a KV cache).
    TokenScaled {
        /// Bytes per token; at least the tensor's byte length.
        bytes_per_token: u64,
        /// Most tokens the state holds.
        maximum_tokens: u64,
    },
}

/// How a state's bytes are initialised.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum StateInitialization {
    /// The first consumer defines every byte.
    None,
    /// Zeroed on each sequence acquisition (sequence-lifetime states only).
    Zero,
}

/// A per-request, per-sequence or per-step state of the program.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StateSpec {
    /// Unique state id.
    pub id: StateId,
    /// The program value that carries it.
    pub value_id: ProgramValueId,
    /// Its tensor (per token for token-scaled states).
    pub tensor: TensorSpec,
    /// How long it lives.
    pub lifetime: StateLifetime,
    /// How much memory it needs.
    pub capacity_demand: StateCapacityDemand,
    /// How its bytes start.
    pub initialization: StateInitialization,
}

impl StateCapacityDemand {
    /// Why this demand does not fit a state tensor of `tensor_bytes` bytes.
    pub fn problem(&self, tensor_bytes: u64) -> Option<String> {
        match *self {
            Self::FixedPerScope if tensor_bytes == 0 => {
                Some("fixed_per_scope state has an empty tensor".to_owned())
            }
            Self::FixedPerScope => None,
            Self::TokenScaled {
                bytes_per_token,
                maximum_tokens,
            } => {
                if bytes_per_token < tensor_bytes {
                    Some(format!(
                        "token_scaled bytes_per_token {bytes_per_token} is below the tensor's {tensor_bytes} bytes"
                    ))
                } else if maximum_tokens == 0 {
                    Some("token_scaled maximum_tokens is zero".to_owned())
                } else if bytes_per_token.checked_mul(maximum_tokens).is_none() {
                    Some("token_scaled bytes_per_token x maximum_tokens overflows u64".to_owned())
                } else {
                    None
                }
            }
        }
    }
}
