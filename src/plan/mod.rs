//! The execution plan: its payload, the build pipeline that produces it, its hash and its
//! verification.

pub mod build;
pub mod error;
pub mod hash;
pub mod internal;
mod payload;
pub mod retention;
pub mod verify;

pub use payload::*;
