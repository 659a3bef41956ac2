//! Research on placement policies, on top of the planner: questions asked of plans and
//! requests whose answers come from building plans (or from the solver), never from a formula.
//!
//! Plans in serving terms:
//! - [`report`]: the memory report of a plan (weights, KV cache, activations, workspaces,
//!   what fits);
//! - [`fit`]: the largest context, sequence count or token ceiling whose worst case fits
//!   (the planner as the oracle), and which devices of a directory fit;
//! - [`sweep`], [`results`], [`plot`]: Cartesian grids of request knobs keyed by request
//!   hash, their results files (CSV, JSON lines, resumable) and SVG plots (the plan-region
//!   map among them, and the Pareto plot of tokens/s per device against tokens/s per user);
//! - [`sweep_run`]: a sweep's points synthesized, keyed, planned or placed, in batches;
//! - [`sweep_time`]: a sweep's serving-point columns (TTFT, TPOT, tokens/s) and its
//!   device-set points (placed through a [`sweep_time::Placer`] from the layer above);
//!
//! - [`engine_facts`]: a synthesized request's model and device as a serving engine's
//!   accounting sees them, and the engine's report (`plan --engine`);
//! - [`engine_validation`]: that accounting against published engine startup logs (the
//!   table of docs/engines-validation.md);
//!
//! Comparing and questioning plans:
//! - [`timing`]: plans priced at a serving point, and the time a change of providers costs
//!   (`diff`, `explain --why-not`, `fit --max-tpot-ms`);
//! - [`diff`]: a semantic comparison of two plans of one program (`jointplan diff`);
//! - [`objective_keys`]: the objective's keys of a plan (preferences met, resources per
//!   profile, provider ids), shared by `diff` and `why_not`;
//! - [`explain`]: why each provider of a node was chosen or rejected, the one query that
//!   `jointplan explain` and Python's `explain` print;
//! - [`alternatives`]: per node, the providers the request offers that the plan did not choose;
//! - [`kv_tradeoff`]: a contiguous KV cache the plan chose against the paged one it passed
//!   over: per-sequence reservation and sequences admitted by each;
//! - [`why_not`]: the exact consequence of forcing one provider on one node, re-solved;
//! - [`infeasible`] and [`capacity`]: why a request has no plan: a minimal set of conflicting
//!   facts (a deletion filter with the solver as oracle) and, for capacity, how far each
//!   numeric policy field must move (a search with the planner as oracle).
//!
//! Every function takes JSON-shaped inputs (a [`PlanRequest`](crate::request::PlanRequest),
//! plans, serde-deserializable settings), an explicit thread count (in
//! [`BuildOptions`](crate::builder::BuildOptions)), and returns serde-serializable results,
//! so a Python layer can wrap it unchanged. The report's errors are [`StudyError`], the
//! queries' [`ResearchError`].

pub mod alternatives;
pub mod budget;
pub mod capacity;
pub mod diff;
mod engine_draft;
pub mod engine_facts;
pub mod engine_validation;
pub mod error;
pub mod explain;
pub mod fit;
pub mod infeasible;
pub mod kv_tradeoff;
pub mod objective_keys;
pub mod plot;
pub mod report;
pub mod research_error;
pub mod results;
pub mod sweep;
pub mod sweep_run;
pub mod sweep_time;
pub mod timing;
pub mod why_not;

pub use error::{SequenceShortfall, StudyError};
pub use fit::{fit, FitNext, FitResult, FitSubject, Knob};
pub use report::{pool_holds, ServingReport};
pub use research_error::ResearchError;
