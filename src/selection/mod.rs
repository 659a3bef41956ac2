//! Joint provider/storage-profile selection.
//!
//! The planner (or `jointplan solve`) hands a [`SelectionProblem`] to
//! [`solve`]: every node picks one provider candidate, and every resource a
//! chosen candidate touches gets the lowest-rank profile that all chosen
//! candidates touching it accept. The default objective is the exact
//! lexicographic `seed-lex` of `docs/selection-problem.md`; other variants are
//! behind the [`Objective`] trait.
//!
//! Method: connected components of the node–resource incidence graph
//! (`components`), exact presolve (`presolve`), a hierarchical integer
//! program per part (`ilp`), checked by the exact closure frontier
//! (`frontier`) within a state budget, and an independent re-check of
//! every answer (`certificate`). See `docs/solver.md`.
//!
//! ```
//! use jointplan::selection::{solve, SelectionProblem, SolveOptions};
//! let problem = SelectionProblem::from_json_str(r#"{
//!   "profiles": ["contiguous", "paged-16"],
//!   "nodes": [
//!     {"id": "a", "preferred": "flash", "candidates": [
//!       {"provider": "flash", "accepts": {"kv": ["contiguous"]}},
//!       {"provider": "paged", "accepts": {"kv": ["paged-16"]}}]},
//!     {"id": "b", "candidates": [
//!       {"provider": "paged", "accepts": {"kv": ["paged-16"]}}]}
//!   ]}"#).unwrap();
//! let solution = solve(&problem, &SolveOptions::default()).unwrap();
//! assert_eq!(solution.choices["a"], "paged");
//! assert_eq!(solution.profiles["kv"], "paged-16");
//! ```

pub(crate) mod backend;
pub(crate) mod certificate;
pub(crate) mod components;
mod count_levels;
mod dual_bound;
mod elimination;
mod error;
pub(crate) mod frontier;
pub(crate) mod ilp;
pub mod instances;
mod objective;
mod optimal_supports;
mod part_method;
mod preference;
mod preference_groups;
mod prefix_dominance;
pub(crate) mod presolve;
mod probing;
mod problem;
mod progress;
mod propagation;
mod provider_ids;
mod reference;
mod settled_levels;
mod solution;
mod solve;
mod strategy;

pub use backend::Backend;
pub use error::SelectionError;
pub use objective::{
    objective_by_name, Level, MaxPreferred, MinPenalty, MinTime, Objective, SeedLex, TimeMetric,
    TimeWeights, Weighted, Weights, MAX_TIME_EXTENT,
};
pub use problem::{
    Candidate, ProfileTimes, SelectionNode, SelectionProblem, TimeCosts, UnusableCandidate,
    MAX_TIME_PS,
};
pub use progress::{SolveObserver, SolveProgress};
pub use reference::{brute_force, frontier_solve, FrontierKind, FrontierResult};
pub use solution::{ComponentReport, PresolveReport, Solution, Status, Summary, TimeSums};
pub use solve::{solve, Method, SolveOptions, DEFAULT_DP_STATE_BUDGET};
