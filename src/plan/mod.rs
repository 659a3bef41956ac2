//! The execution plan's data types: the payload (per-node decisions and evidence), the
//! memory plan it carries, and the canonical hash that names it. No planning logic lives
//! here: the builder ([`crate::builder`]) produces these types, the checker and `verify`
//! read them.

pub mod hash;
mod memory_plan;
mod payload;
mod settings;

pub use memory_plan::*;
pub use payload::*;
pub use settings::*;
