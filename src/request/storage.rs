//! Dynamic storage profiles, requirements and contracts (rules 1.8).

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ids::Sha256Hex;

/// How an allocator hands out bytes. Ordered: linear arena first, then fixed-block arenas by
/// block size.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum StorageAllocator {
    /// One linear arena.
    LinearArena,
    /// Fixed-size blocks.
    FixedBlockArena {
        /// Block size in bytes (a power of two).
        block_bytes: u64,
    },
}

/// How a kernel sees the allocated bytes. Ordered: contiguous before paged.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum StorageView {
    /// One contiguous range.
    Contiguous,
    /// Pages of equal size (a paged KV cache).
    PagedRegions {
        /// Page size in bytes (equal to the allocator block).
        block_bytes: u64,
    },
}

/// A storage profile: allocator plus view.
///
/// Legal pairs: linear + contiguous; fixed-block (power of two) + contiguous; fixed-block(b) +
/// paged(b). The total order is allocator, then view; it orders every set of profiles.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct StorageProfile {
    /// The allocator.
    pub allocator: StorageAllocator,
    /// The view.
    pub view: StorageView,
}

impl StorageProfile {
    /// Linear arena, contiguous view: the profile of every static allocation.
    pub const STATIC_CONTIGUOUS: StorageProfile = StorageProfile {
        allocator: StorageAllocator::LinearArena,
        view: StorageView::Contiguous,
    };

    /// Why this allocator/view pair is illegal, if it is.
    pub fn problem(&self) -> Option<String> {
        match (self.allocator, self.view) {
            (StorageAllocator::LinearArena, StorageView::Contiguous) => None,
            (StorageAllocator::LinearArena, StorageView::PagedRegions { .. }) => {
                Some("a linear arena cannot offer a paged view".to_owned())
            }
            (StorageAllocator::FixedBlockArena { block_bytes }, view) => {
                if !block_bytes.is_power_of_two() {
                    return Some(format!("block size {block_bytes} is not a power of two"));
                }
                match view {
                    StorageView::PagedRegions { block_bytes: page } if page != block_bytes => Some(
                        format!("paged view of {page} bytes on a {block_bytes}-byte block arena"),
                    ),
                    _ => None,
                }
            }
        }
    }

    /// Bytes rounded up to the physical quantum of this profile: the alignment, and for a
    /// fixed-block arena also the block size. `None` on overflow.
    pub fn quantize(&self, bytes: u64, alignment: u64) -> Option<u64> {
        let aligned = align_up(bytes, alignment)?;
        match self.allocator {
            StorageAllocator::LinearArena => Some(aligned),
            StorageAllocator::FixedBlockArena { block_bytes } => align_up(aligned, block_bytes),
        }
    }
}

/// `value` rounded up to a multiple of `alignment` (non-zero), `None` on overflow.
pub fn align_up(value: u64, alignment: u64) -> Option<u64> {
    if alignment == 0 {
        return None;
    }
    let remainder = value % alignment;
    if remainder == 0 {
        Some(value)
    } else {
        value.checked_add(alignment - remainder)
    }
}

impl fmt::Display for StorageProfile {
    /// A short label: `linear+contiguous`, `fixed_block(65536)+contiguous`,
    /// `fixed_block(65536)+paged(65536)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.allocator {
            StorageAllocator::LinearArena => f.write_str("linear")?,
            StorageAllocator::FixedBlockArena { block_bytes } => {
                write!(f, "fixed_block({block_bytes})")?
            }
        }
        match self.view {
            StorageView::Contiguous => f.write_str("+contiguous"),
            StorageView::PagedRegions { block_bytes } => write!(f, "+paged({block_bytes})"),
        }
    }
}

/// The profiles one binding slot or workspace accepts (sorted, unique, non-empty).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StorageRequirement {
    /// Accepted profiles.
    pub accepted_profiles: Vec<StorageProfile>,
}

impl StorageRequirement {
    /// Whether `profile` is accepted.
    pub fn accepts(&self, profile: &StorageProfile) -> bool {
        self.accepted_profiles.binary_search(profile).is_ok()
    }

    /// Why this requirement is malformed, if it is.
    pub fn problem(&self) -> Option<String> {
        if self.accepted_profiles.is_empty() {
            return Some("accepts no storage profile".to_owned());
        }
        if let Some(p) = self.accepted_profiles.iter().find_map(|p| p.problem()) {
            return Some(p);
        }
        if self.accepted_profiles.windows(2).any(|w| w[0] >= w[1]) {
            return Some("accepted profiles are not sorted and unique".to_owned());
        }
        None
    }
}

/// The storage chosen for one planned resource, and how its bytes are interpreted.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StorageContract {
    /// The chosen profile.
    pub profile: StorageProfile,
    /// Fingerprint of the logical layout(s) of the bytes.
    pub logical_layout_fingerprint: Sha256Hex,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_order_and_legality() {
        let linear = StorageProfile::STATIC_CONTIGUOUS;
        let block = StorageProfile {
            allocator: StorageAllocator::FixedBlockArena { block_bytes: 4096 },
            view: StorageView::Contiguous,
        };
        let paged = StorageProfile {
            allocator: StorageAllocator::FixedBlockArena { block_bytes: 4096 },
            view: StorageView::PagedRegions { block_bytes: 4096 },
        };
        assert!(linear < block && block < paged);
        assert!(paged.problem().is_none());
        let bad = StorageProfile {
            allocator: StorageAllocator::LinearArena,
            view: StorageView::PagedRegions { block_bytes: 4096 },
        };
        assert!(bad.problem().is_some());
        assert_eq!(paged.to_string(), "fixed_block(4096)+paged(4096)");
        // rules 7: tokens{1, 4097} on 4096-byte blocks: minimum 4096.
        assert_eq!(block.quantize(1, 16), Some(4096));
        assert_eq!(block.quantize(4097, 16), Some(8192));
    }
}
