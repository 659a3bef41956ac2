//! The execution plan: its payload, the build pipeline that produces it, its hash and its
//! verification.

pub mod hash;
mod payload;

pub use payload::*;
