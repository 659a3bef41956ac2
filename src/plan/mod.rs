//! The execution plan: its payload, the build pipeline that produces it, its hash and its
//! verification.

mod payload;

pub use payload::*;
