//! Every shipped model (`models/*/config.json`) on every shipped device synthesizes, plans
//! and verifies (with a small `--layers` override, llama-3.2-1b in full); memory figures
//! against hand-computed ones; the wire limits fail with typed errors naming the limit.

use std::path::{Path, PathBuf};

use crate::common::verify_tree as verify;
use jointplan::builder::error::PlanError;
use jointplan::builder::BuildOptions;
use jointplan::memory::MemoryError;
use jointplan::plan::ExecutionPlan;
use jointplan::request::{PlanRequest, StateCapacityDemand, WireLimits};
use jointplan::synth::{
    synthesize, DeviceDescription, ModelFolder, PolicyPreset, SynthOptions, WeightFormat,
};
use jointplan::verify::VerifyError;

fn models() -> Vec<ModelFolder> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("models")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("config.json").is_file())
        .collect();
    found.sort();
    found
        .iter()
        .map(|p| ModelFolder::read(p).unwrap())
        .collect()
}

fn devices() -> Vec<(String, DeviceDescription)> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("models/devices")
        .unwrap()
        .map(|e| e.unwrap().path())
        // Device files only: `models/devices/sets/` holds device sets.
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    found.sort();
    found
        .iter()
        .map(|p| (p.display().to_string(), DeviceDescription::read(p).unwrap()))
        .collect()
}

/// The folder's defaults with `layers` (and, for mixtures of experts, 8 experts).
fn request_of(
    folder: &ModelFolder,
    device: &DeviceDescription,
    layers: Option<u64>,
) -> PlanRequest {
    let mut options = SynthOptions::new(&folder.name);
    options.layers = layers;
    if layers.is_some() && folder.config.routed_experts().is_some() {
        options.experts = Some(8);
    }
    options.wire_limits = folder.default_wire_limits();
    let defaults = folder.defaults.as_ref().unwrap();
    options.weight_format = defaults.weight_format.parse::<WeightFormat>().unwrap();
    let policy = PolicyPreset::resolve(&folder.default_policy().unwrap()).unwrap();
    synthesize(&folder.config, device, &policy, &options)
        .unwrap_or_else(|e| panic!("{} synthesizes: {e}", folder.name))
}

fn plans_and_verifies(label: &str, request: &PlanRequest) -> ExecutionPlan {
    let plan = ExecutionPlan::build(request, &BuildOptions::default())
        .unwrap_or_else(|e| panic!("{label} plans: {e}"));
    let stored = plan.to_json_tree().unwrap();
    verify(request, &stored, &BuildOptions::default())
        .unwrap_or_else(|e| panic!("{label} verifies: {e}"));
    plan
}

#[test]
fn every_model_on_every_device_plans_and_verifies() {
    let devices = devices();
    let folders = models();
    assert!(folders.len() >= 6, "{} model folders", folders.len());
    for folder in &folders {
        for (device_file, device) in &devices {
            let request = request_of(folder, device, Some(2));
            let label = format!("{} (2 layers) on {device_file}", folder.name);
            let plan = plans_and_verifies(&label, &request);
            assert!(plan.payload.nodes.len() >= 7, "{label}");
        }
    }
}

#[test]
fn llama_3_2_1b_in_full_plans_and_verifies() {
    let folder = ModelFolder::read(Path::new("models/llama-3.2-1b")).unwrap();
    let device = DeviceDescription::read(&folder.default_device().unwrap()).unwrap();
    let request = request_of(&folder, &device, None);
    let plan = plans_and_verifies("llama-3.2-1b", &request);
    // 16 layers x 10 nodes + embedding, final norm, logits.
    assert_eq!(plan.payload.nodes.len(), 163);
    // Tied embeddings: the token table once. Per layer q, o (h x h), k, v (kv x h),
    // gate/up/down (h x i) and two norms; final norm h; f16 = 2 bytes.
    let (h, i, v, kv) = (2048u64, 8192u64, 128_256u64, 512u64);
    let per_layer = 2 * h * h + 2 * kv * h + 3 * h * i + 2 * h;
    assert_eq!(per_layer, 60_821_504);
    let parameters = v * h + 16 * per_layer + h;
    assert_eq!(parameters, 1_235_814_400);
    let weights: u64 = request
        .family
        .weight_schema
        .components
        .iter()
        .map(|c| c.physical_bytes().unwrap())
        .sum();
    assert_eq!(weights, parameters * 2);
}

#[test]
fn llama_70b_kv_bytes_per_token() {
    let folder = ModelFolder::read(Path::new("models/llama-3.1-70b")).unwrap();
    let device = DeviceDescription::read(Path::new("models/devices/a100-80gb.json")).unwrap();
    let mut options = SynthOptions::new("llama-3.1-70b");
    options.layers = Some(4);
    let request = synthesize(
        &folder.config,
        &device,
        &PolicyPreset::interactive(),
        &options,
    )
    .unwrap();
    let kv: u64 = request
        .family
        .program
        .states
        .iter()
        .filter_map(|s| match s.capacity_demand {
            StateCapacityDemand::TokenScaled {
                bytes_per_token, ..
            } => Some(bytes_per_token),
            StateCapacityDemand::FixedPerScope => None,
        })
        .sum();
    // K and V x 4 layers x 8 KV heads x 128 head dim x 2 bytes; all 80 layers: 327,680.
    assert_eq!(kv, 2 * 4 * 8 * 128 * 2);
    assert_eq!(kv / 4 * 80, 327_680);
}

fn small_request(wire_limits: Option<WireLimits>) -> PlanRequest {
    let folder = ModelFolder::read(Path::new("models/llama-3.2-1b")).unwrap();
    let device = DeviceDescription::read(&folder.default_device().unwrap()).unwrap();
    let mut options = SynthOptions::new("llama-3.2-1b");
    options.layers = Some(1);
    options.wire_limits = wire_limits;
    synthesize(
        &folder.config,
        &device,
        &PolicyPreset::interactive(),
        &options,
    )
    .unwrap()
}

#[test]
fn a_plan_over_a_lowered_wire_limit_fails_naming_limit_and_value() {
    let reference = small_request(None);
    let plan = ExecutionPlan::build(&reference, &BuildOptions::default()).unwrap();
    let bytes = plan.json_bytes().unwrap();
    let mut written = Vec::new();
    plan.write_json(&mut written).unwrap();
    assert_eq!(bytes, written.len() as u64);
    let rows = plan.payload.memory.static_allocations.len()
        + plan.payload.memory.dynamic_descriptors.len();

    let lowered = WireLimits {
        maximum_plan_json_bytes: bytes - 1,
        ..WireLimits::REFERENCE
    };
    let request = small_request(Some(lowered));
    let error = ExecutionPlan::build(&request, &BuildOptions::default()).unwrap_err();
    match &error {
        PlanError::PlanJsonTooLarge { measured, limit } => {
            assert_eq!((*measured, *limit), (bytes, bytes - 1));
        }
        other => panic!("expected PlanJsonTooLarge, got {other}"),
    }
    let text = error.to_string();
    assert!(text.contains("maximum_plan_json_bytes"), "{text}");
    assert!(text.contains(&bytes.to_string()), "{text}");
    assert_eq!(error.kind(), jointplan::ErrorKind::Infeasible);
    // Exactly at the limit plans.
    let at_limit = WireLimits {
        maximum_plan_json_bytes: bytes,
        ..WireLimits::REFERENCE
    };
    ExecutionPlan::build(&small_request(Some(at_limit)), &BuildOptions::default()).unwrap();

    // Verification rebuilds under the request's limits.
    let stored = plan.to_json_tree().unwrap();
    let error = verify(&request, &stored, &BuildOptions::default()).unwrap_err();
    assert!(
        matches!(
            &error,
            VerifyError::Rebuild(inner) if matches!(**inner, PlanError::PlanJsonTooLarge { .. })
        ),
        "{error}"
    );

    let lowered_rows = WireLimits {
        maximum_resource_rows: rows as u64 - 1,
        ..WireLimits::REFERENCE
    };
    let error = ExecutionPlan::build(&small_request(Some(lowered_rows)), &BuildOptions::default())
        .unwrap_err();
    match &error {
        PlanError::Memory(MemoryError::TooManyRows {
            rows: measured,
            limit,
            ..
        }) => assert_eq!((*measured, *limit), (rows, rows - 1)),
        other => panic!("expected TooManyRows, got {other}"),
    }
    assert!(
        error.to_string().contains("maximum_resource_rows"),
        "{error}"
    );
}

#[test]
fn absent_wire_limits_keep_the_policy_fingerprint() {
    let request = small_request(None);
    let text = serde_json::to_string(&request.policy).unwrap();
    assert!(!text.contains("wire_limits"), "{text}");
    let raised = small_request(Some(WireLimits {
        maximum_resource_rows: 1 << 20,
        maximum_plan_json_bytes: 1 << 30,
    }));
    assert_ne!(
        jointplan::request::fingerprints::policy_fingerprint(&request.policy).unwrap(),
        jointplan::request::fingerprints::policy_fingerprint(&raised.policy).unwrap()
    );
}
