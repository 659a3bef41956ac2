//! Tests of the selection solver: integer program, exact frontiers and brute force on generated instances (and the HiGHS backend with the `highs` feature).
//!
//! One test binary per area keeps the build to a few links; each module below was a test
//! file of its own before.
#![allow(clippy::result_large_err)]

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod check_decision;
mod conflict_core;
mod elimination;
mod enumeration;
mod limits;
mod no_preferences;
mod objective_oracle;
mod optimal_supports;
mod prefix_dominance;
mod progress_events;
mod reduced_costs;
mod selection_highs;
mod selection_props;
mod settled_levels;
mod time_oracle;
