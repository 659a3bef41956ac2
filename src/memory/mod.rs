//! The memory plan (domain.md section 4): value demands, workspaces, static allocations,
//! dynamic descriptors, pools with lifetime reuse, and the capacity check.

mod plan;

pub use plan::*;
