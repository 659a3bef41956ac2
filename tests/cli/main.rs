//! Tests of the `jointplan` command line, run as a process.
//!
//! One test binary per area keeps the build to a few links; each module below was a test
//! file of its own before.
#![allow(clippy::result_large_err)]

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod backend;
mod commands;
mod count_links;
mod docs_transcripts;
mod engine_cli;
mod engine_pipeline_cli;
mod fuzz_exit_codes;
mod golden_synthesized;
mod hash;
mod memory_fidelity;
mod output_rules;
mod performance_cli;
mod placement_cli;
mod placement_engine;
mod plan_model;
mod process;
mod research;
mod research_loop;
mod selection_cli;
mod solve_progress;
mod strict_input;
mod study_cli;
mod summary_grouping;
mod sweep_engine;
mod sweep_loop;
mod sweep_shard;
mod sweep_time;
mod time_loop;
