//! jointplan: verified execution plans for ML model graphs.
//!
//! The crate is laid out as the pipeline a request goes through:
//!
//! 1. [`request`]: the plan request (program, catalog, resolutions, policy) and its load-time
//!    validation;
//! 2. [`plan`]: the execution plan, its build pipeline, hash and verification;
//! 3. [`memory`]: the memory plan.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod candidates;
pub mod canonical;
pub mod cli;
pub mod error;
pub mod memory;
pub mod node;
pub mod plan;
pub mod request;
pub mod synth;

pub use error::Error;
