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

//! ## Module map, by phase
//!
//! | folder | phase | modules |
//! |---|---|---|
//! | `model/` | what is solved and returned | `problem`, `objective`, `solution`, `progress` |
//! | `reduce/` | reductions before the exact solve | `components`, `presolve`, `settled_levels`, `count_levels`, `prefix_dominance`, `optimal_supports`, `dual_bound` |
//! | `exact/` | exact solving of one part | `strategy`, `ilp`, `backend`, `frontier`, `elimination`, `preference`, `propagation`, `preference_groups`, `probing`, `provider_ids`, `part_method` |
//! | `certify/` | certification and oracles | `certificate`, `reference` |
//!
//! `solve` (this folder) orchestrates the phases; `error` is the layer's error type;
//! `instances` generates deterministic test and benchmark instances (cargo feature `testing`,
//! which the command line turns on).

pub(crate) mod certify;
mod error;
pub(crate) mod exact;
#[cfg(feature = "testing")]
pub mod instances;
pub(crate) mod model;
pub(crate) mod reduce;
mod solve;

pub use certify::reference::{brute_force, frontier_solve, FrontierKind, FrontierResult};
pub use error::SelectionError;
pub use exact::backend::Backend;
pub use model::objective::{
    objective_by_name, Level, MaxPreferred, MinPenalty, MinTime, Objective, SeedLex, TimeMetric,
    TimeWeights, Weighted, Weights, MAX_TIME_EXTENT,
};
pub use model::problem::{
    Candidate, ProfileTimes, SelectionNode, SelectionProblem, TimeCosts, UnusableCandidate,
    MAX_TIME_PS,
};
pub use model::progress::{SolveObserver, SolveProgress};
pub use model::solution::{ComponentReport, PresolveReport, Solution, Status, Summary, TimeSums};
pub use solve::{solve, Method, SolveOptions, DEFAULT_DP_STATE_BUDGET};
