//! Element types, buffer usages, access modes and tensor layouts (rules 1.1, 1.5).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The element type of a tensor or storage component.
///
/// The derived order is the declaration order, which the reference uses in sets.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ElementType {
    /// One byte per element.
    Bool,
    /// Unsigned 8-bit.
    U8,
    /// Unsigned 32-bit.
    U32,
    /// Signed 8-bit.
    I8,
    /// Signed 32-bit.
    I32,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    Bf16,
    /// IEEE single precision.
    F32,
}

impl ElementType {
    /// Bytes per element.
    pub const fn byte_size(self) -> u64 {
        match self {
            Self::Bool | Self::U8 | Self::I8 => 1,
            Self::F16 | Self::Bf16 => 2,
            Self::U32 | Self::I32 | Self::F32 => 4,
        }
    }
}

/// What a buffer holds. Ordered by declaration.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum BufferUsage {
    /// Immutable model memory.
    Weights,
    /// Transient values between nodes.
    Activations,
    /// Model semantic state (KV cache, recurrent state).
    State,
    /// Provider workspace spanning operations.
    Persistent,
    /// Small request-shaped control data written in a wave preamble.
    Binding,
    /// Per-invocation provider scratch.
    Scratch,
    /// Host transfer staging (never produced by the planner).
    Transfer,
}

/// How a binding touches its tensor.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum TensorAccess {
    /// Reads only.
    Read,
    /// Writes only.
    Write,
    /// Reads and writes (an in-place state update).
    ReadWrite,
}

impl TensorAccess {
    /// The access may read.
    pub fn reads(self) -> bool {
        matches!(self, Self::Read | Self::ReadWrite)
    }

    /// The access may write.
    pub fn writes(self) -> bool {
        matches!(self, Self::Write | Self::ReadWrite)
    }

    /// The union of two accesses.
    pub fn union(self, other: TensorAccess) -> TensorAccess {
        match (
            self.reads() || other.reads(),
            self.writes() || other.writes(),
        ) {
            (true, true) => Self::ReadWrite,
            (false, _) => Self::Write,
            (true, false) => Self::Read,
        }
    }
}

/// Whether a binding is an input or an output of its node. `input < output`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ValueRole {
    /// Consumed by the node.
    Input,
    /// Produced by the node.
    Output,
}

/// Padding of a blocked layout.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum BlockPadding {
    /// Every extent is divisible by its block.
    Exact,
    /// Extents are rounded up to their blocks and zero filled.
    ZeroFill {
        /// Each extent rounded up to its block, permuted by the axis order.
        physical_dimensions: Vec<u64>,
    },
}

/// The byte layout of a concrete tensor.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum TensorLayout {
    /// Row-major, dense.
    Contiguous,
    /// One byte stride per axis.
    Strided {
        /// Non-zero byte stride per axis.
        byte_strides: Vec<u64>,
    },
    /// Tiled storage.
    Blocked {
        /// Block extent per axis (non-zero).
        block: Vec<u64>,
        /// A permutation of `0..rank`.
        axis_order: Vec<u32>,
        /// How partial blocks are stored.
        padding: BlockPadding,
    },
}

/// A tensor: dimensions, element type and layout. Used for program tensors and resolved
/// bindings alike.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct TensorSpec {
    /// Extent of each axis.
    pub dimensions: Vec<u64>,
    /// Element type.
    pub element_type: ElementType,
    /// Byte layout.
    pub layout: TensorLayout,
}

impl TensorSpec {
    /// Number of elements, or `None` on overflow.
    pub fn element_count(&self) -> Option<u64> {
        self.dimensions
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
    }

    /// Dense byte length: elements times element size, or `None` on overflow.
    pub fn byte_len(&self) -> Option<u64> {
        self.element_count()?
            .checked_mul(self.element_type.byte_size())
    }

    /// The fewest bytes a storage component must hold for this tensor, `None` on overflow.
    ///
    /// Contiguous: dense bytes. Blocked: element size times the storage extents (logical for
    /// exact padding, physical for zero fill). Strided: element size plus the sum of
    /// `(extent - 1) * stride`.
    pub fn minimum_storage_bytes(&self) -> Option<u64> {
        let elem = self.element_type.byte_size();
        match &self.layout {
            TensorLayout::Contiguous => self.byte_len(),
            TensorLayout::Blocked { padding, .. } => {
                let dims = match padding {
                    BlockPadding::Exact => &self.dimensions,
                    BlockPadding::ZeroFill {
                        physical_dimensions,
                    } => physical_dimensions,
                };
                dims.iter().try_fold(elem, |acc, &d| acc.checked_mul(d))
            }
            TensorLayout::Strided { byte_strides } => self
                .dimensions
                .iter()
                .zip(byte_strides)
                .try_fold(elem, |acc, (&extent, &stride)| {
                    acc.checked_add(extent.checked_sub(1)?.checked_mul(stride)?)
                }),
        }
    }

    /// Why this tensor is malformed, if it is (zero extents, layout rank mismatch, bad
    /// permutation or padding, byte overflow).
    pub fn problem(&self) -> Option<String> {
        let rank = self.dimensions.len();
        if let Some(axis) = self.dimensions.iter().position(|&d| d == 0) {
            return Some(format!("dimension {axis} is zero"));
        }
        match &self.layout {
            TensorLayout::Contiguous => {}
            TensorLayout::Strided { byte_strides } => {
                if byte_strides.len() != rank {
                    return Some(format!(
                        "strided layout has {} strides for rank {rank}",
                        byte_strides.len()
                    ));
                }
                if byte_strides.contains(&0) {
                    return Some("strided layout has a zero stride".to_owned());
                }
            }
            TensorLayout::Blocked {
                block,
                axis_order,
                padding,
            } => {
                if block.len() != rank || axis_order.len() != rank {
                    return Some(format!(
                        "blocked layout has {} blocks and {} axes for rank {rank}",
                        block.len(),
                        axis_order.len()
                    ));
                }
                if block.contains(&0) {
                    return Some("blocked layout has a zero block".to_owned());
                }
                let mut seen = vec![false; rank];
                for &axis in axis_order {
                    match seen.get_mut(axis as usize) {
                        Some(slot) if !*slot => *slot = true,
                        _ => {
                            return Some(format!("axis order {axis_order:?} is not a permutation"))
                        }
                    }
                }
                match padding {
                    BlockPadding::Exact => {
                        if let Some(axis) = (0..rank).find(|&a| self.dimensions[a] % block[a] != 0)
                        {
                            return Some(format!(
                                "exact blocked layout: extent {} of axis {axis} is not a multiple of block {}",
                                self.dimensions[axis], block[axis]
                            ));
                        }
                    }
                    BlockPadding::ZeroFill {
                        physical_dimensions,
                    } => {
                        let mut expected = Vec::with_capacity(rank);
                        for &axis in axis_order {
                            let a = axis as usize;
                            let rounded =
                                self.dimensions[a].div_ceil(block[a]).checked_mul(block[a]);
                            match rounded {
                                Some(r) => expected.push(r),
                                None => return Some("zero-fill extent overflows".to_owned()),
                            }
                        }
                        if &expected != physical_dimensions {
                            return Some(format!(
                                "zero-fill physical dimensions {physical_dimensions:?} differ from the rounded-up extents {expected:?}"
                            ));
                        }
                        if (0..rank).all(|a| self.dimensions[a] % block[a] == 0) {
                            return Some("zero-fill layout pads no axis (use exact)".to_owned());
                        }
                    }
                }
            }
        }
        if self.minimum_storage_bytes().is_none() || self.byte_len().is_none() {
            return Some("byte size overflows u64".to_owned());
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_bytes_by_layout() {
        let contiguous = TensorSpec {
            dimensions: vec![4, 8],
            element_type: ElementType::F16,
            layout: TensorLayout::Contiguous,
        };
        assert_eq!(contiguous.minimum_storage_bytes(), Some(64));
        let strided = TensorSpec {
            layout: TensorLayout::Strided {
                byte_strides: vec![32, 2],
            },
            ..contiguous.clone()
        };
        assert_eq!(strided.minimum_storage_bytes(), Some(2 + 3 * 32 + 7 * 2));
        let padded = TensorSpec {
            dimensions: vec![3, 8],
            layout: TensorLayout::Blocked {
                block: vec![2, 8],
                axis_order: vec![0, 1],
                padding: BlockPadding::ZeroFill {
                    physical_dimensions: vec![4, 8],
                },
            },
            ..contiguous
        };
        assert_eq!(padded.problem(), None);
        assert_eq!(padded.minimum_storage_bytes(), Some(64));
    }

    #[test]
    fn access_union() {
        assert_eq!(
            TensorAccess::Read.union(TensorAccess::Write),
            TensorAccess::ReadWrite
        );
        assert_eq!(
            TensorAccess::Read.union(TensorAccess::Read),
            TensorAccess::Read
        );
        assert_eq!(
            TensorAccess::Write.union(TensorAccess::Write),
            TensorAccess::Write
        );
    }
}
