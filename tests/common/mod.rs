//! Test support shared by the integration-test binaries (`tests/planner`, `tests/selection`,
//! `tests/cli`): request and plan fixtures, generated models and selection instances.
//!
//! Each binary loads this module whole; a binary uses only part of it, hence
//! `allow(dead_code)`.
#![allow(dead_code)]

#[macro_use]
pub mod build_fixture;
pub mod fuzz;
pub mod golden;
pub mod memory_fixture;
pub mod model_fixtures;
pub mod model_parts;
pub mod models;
pub mod operations;
pub mod request_fixture;
pub mod request_generator;
pub mod selection_instances;
pub mod shipped;

/// `verify` of a stored plan held as a JSON tree (tests build and tamper with trees; the
/// library reads stored plans as text).
pub fn verify_tree(
    request: &jointplan::request::PlanRequest,
    stored: &serde_json::Value,
    options: &jointplan::builder::BuildOptions,
) -> Result<jointplan::plan::ExecutionPlan, jointplan::verify::VerifyError> {
    jointplan::verify::verify_text(request, &stored.to_string(), options)
}

/// `source`'s policy with its sequence ceiling required (`minimum_sequences` =
/// `maximum_active_sequences`): a placement then provisions KV cache for every sequence at
/// the context, the memory pressure the placement tests of offload and levers need (a
/// placement provisions the policy's requirement, one sequence by default).
pub fn requiring_the_ceiling(
    source: &jointplan::synth::ModelSource,
) -> jointplan::synth::PolicyPreset {
    let mut preset = source.policy_preset().expect("the model's policy preset");
    preset.minimum_sequences = Some(preset.maximum_active_sequences);
    preset
}
