//! Studies of plans in serving terms: the memory report of a plan (weights, KV cache,
//! activations, workspaces, what fits), the largest policy value that still fits a device
//! (`fit`), and Cartesian sweeps over request knobs with their plots (`sweep`).
//!
//! Every function takes JSON-shaped inputs (a [`PlanRequest`](crate::request::PlanRequest)
//! or a [`synth::ModelSource`](crate::synth::ModelSource) and serde-deserializable
//! settings), an explicit thread count, and returns serde-serializable results, so a
//! Python layer can wrap it unchanged.

pub mod error;
pub mod fit;
pub mod plot;
pub mod report;
pub mod results;
pub mod sweep;

pub use error::StudyError;
pub use fit::{fit, FitNext, FitResult, FitSubject, Knob};
pub use report::{pool_holds, ServingReport};
