//! Research on placement policies, on top of the planner: questions asked of plans and
//! requests whose answers come from building plans, never from a formula.
//!
//! - [`diff`]: a semantic comparison of two plans of one program (`jointplan diff`);
//! - [`objective_keys`]: the objective's keys of a plan (preferences met, resources per
//!   profile, provider ids), shared by `diff` and `why_not`;
//! - [`alternatives`]: per node, the providers the request offers that the plan did not choose;
//! - [`why_not`]: the exact consequence of forcing one provider on one node, re-solved;
//! - [`infeasible`]: why a request has no plan: a minimal set of conflicting facts (a deletion
//!   filter with the solver as oracle) and, for capacity, how far each numeric policy field
//!   must move (a search with the planner as oracle).
//!
//! Everything here takes typed inputs and returns typed results with its own error type
//! ([`ResearchError`]); the command line only prints them.

pub mod alternatives;
pub mod capacity;
pub mod diff;
pub mod infeasible;
pub mod objective_keys;
pub mod research_error;
pub mod why_not;

pub use research_error::ResearchError;
