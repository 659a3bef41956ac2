//! jointplan: verified execution plans for ML model graphs.
//!
//! The crate is laid out as the pipeline a request goes through:
//!
//! 1. [`request`]: the plan request (program, catalog, resolutions, policy) and its load-time
//!    validation;
//! 2. [`candidates`]: which providers can serve each node under the storage profiles;
//! 3. [`selection`]: the joint provider/storage-profile selection solver;
//! 4. [`node`]: the per-node checks;
//! 5. [`memory`]: the memory plan;
//! 6. [`plan`]: the execution plan, its build pipeline, hash and verification;
//! 7. [`cli`]: the `jointplan` command line.
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
pub mod selection;
pub mod synth;

pub use error::Error;
