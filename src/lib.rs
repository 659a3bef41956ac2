//! jointplan: verified execution plans for ML model graphs.
//!
//! A **plan request** ([`PlanRequest`]) describes a model program, the device's capability
//! catalog (operations and the providers, or kernels, that implement them), how every node
//! binds its values, and the runtime policy. [`build`] validates it, chooses one provider
//! per node and one storage profile per shared resource (an integer program per connected
//! component, checked against an exact frontier search), derives the memory plan, and hashes
//! the canonical plan into its id. [`verify`] rebuilds a stored plan from its request and
//! rejects any difference. Requests can also be synthesized from a Hugging Face model
//! configuration ([`synth::ModelSource`]).
//!
//! ```
//! use std::sync::Arc;
//! use jointplan::selection::MinPenalty;
//! use jointplan::synth::ModelSource;
//! use jointplan::{build, verify, BuildOptions};
//!
//! // A request synthesized from a shipped model folder (two layers keep the example quick).
//! let mut source = ModelSource::folder("models/llama-3.2-1b");
//! source.layers = Some(2);
//! let request = source.synthesize()?.request;
//!
//! // Plan it with the default objective, on one thread.
//! let options = BuildOptions { threads: std::num::NonZeroUsize::new(1), ..Default::default() };
//! let default = build(&request, &options)?;
//! assert!(default.plan.payload.plan_id.starts_with("plan/sha256/"));
//!
//! // The same request under another objective: minimise the storage-profile penalty first.
//! let mut variant_options = options.clone();
//! variant_options.selection.objective = Arc::new(MinPenalty);
//! let variant = build(&request, &variant_options)?;
//! let changed = default.plan.payload.nodes.iter()
//!     .zip(&variant.plan.payload.nodes)
//!     .filter(|(a, b)| a.provider_resources.provider_id != b.provider_resources.provider_id)
//!     .count();
//! println!("{changed} of {} nodes changed provider", default.plan.payload.nodes.len());
//!
//! // A stored plan verifies against its request; a tampered one does not.
//! let stored = serde_json::to_string(&default.plan)?;
//! verify(&request, &stored, &options)?;
//! let tampered = stored.replace("device.cuda.0", "device.cuda.1");
//! assert!(verify(&request, &tampered, &options).is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The crate is laid out as the pipeline a request goes through:
//!
//! 1. [`request`]: the plan request (program, catalog, resolutions, policy) and its load-time
//!    validation;
//! 2. [`candidates`]: which providers can serve each node under the storage profiles;
//! 3. [`selection`]: the joint provider/storage-profile selection solver;
//! 4. [`node`]: the per-node checks;
//! 5. [`memory`]: the memory plan;
//! 6. [`plan`]: the execution plan's data types and hash;
//! 7. [`builder`]: the build pipeline that composes the layers above into a plan;
//! 8. [`verify`]: a stored plan rebuilt from its request and compared;
//! 9. [`study`]: plans in serving terms (the memory report) and research queries on plans
//!    and requests (diff, why-not, why-infeasible);
//! 10. [`render`]: what the layers above computed, for people (summaries, id patterns,
//!     diff, explain and why-infeasible text), shared by the command line and Python.
//!
//! The `jointplan` command line is a binary of this package on top of the library (cargo
//! feature `cli`, on by default); the library itself never depends on it.
//!
//! Every JSON document is read through [`json_input`] (no duplicate keys, no trailing bytes).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod builder;
pub mod candidates;
pub mod canonical;
pub mod check;
pub mod engine;
pub mod error;
pub mod error_kind;
pub mod json_input;
pub mod memory;
pub mod node;
pub mod perf;
pub mod placement;
pub mod plan;
pub mod render;
pub mod request;
pub mod selection;
pub mod study;
pub mod synth;
pub mod verify;

use std::path::Path;

pub use builder::{BuildObserver, BuildOptions, BuildOutcome, BuildStage};
pub use error::{Error, ErrorKind};
pub use plan::ExecutionPlan;
pub use request::PlanRequest;
pub use selection::{Backend, Objective, SelectionProblem, Solution, SolveOptions};

/// Builds the execution plan of `request`: validation, joint selection, node checks, memory
/// plan, hash and the plan's internal validation. Returns the plan and the selection's
/// per-component report (method and check; evidence for people, not part of the hash).
pub fn build(request: &PlanRequest, options: &BuildOptions) -> Result<BuildOutcome, Error> {
    Ok(ExecutionPlan::build_with_report(request, options)?)
}

/// Verifies a stored plan (its JSON text) against its request: the plan must parse strictly,
/// equal the plan the request builds under `options` field by field, and pass the internal
/// checks. Returns the parsed plan.
pub fn verify(
    request: &PlanRequest,
    stored_plan: &str,
    options: &BuildOptions,
) -> Result<ExecutionPlan, Error> {
    Ok(verify::verify_text(request, stored_plan, options)?)
}

/// Checks a stored plan (its JSON text) alone, without its request: every rule of a valid
/// plan that the independent checker ([`check`](mod@check)) re-derives from the plan. Returns
/// every violation found (an empty report: the plan is valid); a plan that does not even
/// parse is an error.
pub fn check(stored_plan: &str) -> Result<check::CheckReport, Error> {
    Ok(verify::check_stored_plan(Path::new("stored plan"), stored_plan)?.1)
}

/// Solves a provider/storage-profile selection problem on its own (what `jointplan solve`
/// does): the certified optimum of `options.objective`.
pub fn solve(
    problem: &SelectionProblem,
    options: &SolveOptions,
) -> Result<Solution, selection::SelectionError> {
    selection::solve(problem, options)
}
