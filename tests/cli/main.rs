//! Tests of the `jointplan` command line, run as a process.
//!
//! One test binary per area keeps the build to a few links; each module below was a test
//! file of its own before.
#![allow(clippy::result_large_err)]

mod backend;
mod commands;
mod hash;
mod plan_model;
mod selection_cli;
