//! Library tests of the planner: request loading and validation, node rules, memory plan, build, verify, tampering, synthesized models and golden plans.
//!
//! One test binary per area keeps the build to a few links; each module below was a test
//! file of its own before.
#![allow(clippy::result_large_err)]

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod build_evidence;
mod build_rules;
mod build_stages;
mod checker;
mod checker_mutants;
mod engine_draft;
mod engine_draft_eagle3;
mod engine_pipeline;
mod engine_rules;
mod every_folder;
mod fuzz;
mod golden_models;
mod input_rules;
mod invocation_phases;
mod layering;
mod memory_errors;
mod memory_plan;
mod memory_scale;
mod memory_validate;
mod multi_gpu_validation;
mod perf_model;
mod perf_validation;
mod placement_bound;
mod placement_models;
mod placement_offload;
mod placement_oracle;
mod placement_quantized;
mod placement_serving;
mod placement_tensor_parallel;
mod placement_uneven;
mod placement_uneven_time;
mod plan_file;
mod policy_agreement;
mod quant_formats;
mod recorded_settings;
mod request_fuzz;
mod request_lengths;
mod request_props;
mod request_schema;
mod request_validation;
mod research_queries;
mod stored_check;
mod study;
mod sweep_engine;
mod sweep_rows;
mod synth_archs;
mod synth_fidelity;
mod synth_memory;
mod synth_models;
mod synth_registry;
mod synth_shipped;
mod tamper;
mod time_objective;
mod v0_scheduler;
