//! Plan time against node count (DeepSeek-V3's configuration with layers and routed
//! experts varied: about 1k and 5k nodes; the 1k-100k table with peak memory and every
//! command beside its floor is `benches/scale.rs`), and the 70B-class request's
//! full plan against its floor (parse + canonical hash of the request).
//!
//! ```text
//! cargo bench --locked --bench scaling
//! ```

use std::hint::black_box;
use std::path::Path;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use jointplan::builder::BuildOptions;
use jointplan::canonical::canonical_fingerprint;
use jointplan::plan::ExecutionPlan;
use jointplan::request::{PlanRequest, WireLimits};
use jointplan::synth::{synthesize, DeviceDescription, ModelFolder, PolicyPreset, SynthOptions};

fn models() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models")
}

fn deepseek(layers: u64, experts: u64) -> PlanRequest {
    let folder = ModelFolder::read(&models().join("deepseek-v3")).expect("deepseek-v3 folder");
    let device =
        DeviceDescription::read(&models().join("devices/m3-ultra-512gb.json")).expect("device");
    let mut options = SynthOptions::new("deepseek-v3");
    options.layers = Some(layers);
    options.experts = Some(experts);
    options.wire_limits = Some(WireLimits {
        maximum_resource_rows: 1 << 20,
        maximum_plan_json_bytes: 1 << 40,
    });
    synthesize(&folder.config, &device, &PolicyPreset::server(), &options).expect("synthesizes")
}

fn plan_time_against_nodes(c: &mut Criterion) {
    let mut group = c.benchmark_group("plan_by_nodes");
    group.sample_size(10);
    for (layers, experts) in [(7, 240), (20, 240)] {
        let request = deepseek(layers, experts);
        let nodes = request.node_resolutions.len();
        group.bench_with_input(
            BenchmarkId::from_parameter(nodes),
            &request,
            |b, request| {
                b.iter(|| ExecutionPlan::build(black_box(request), &BuildOptions::default()))
            },
        );
    }
    group.finish();
}

fn seventy_b_against_floor(c: &mut Criterion) {
    let folder = ModelFolder::read(&models().join("llama-3.1-70b")).expect("70B folder");
    let device =
        DeviceDescription::read(&folder.default_device().expect("device")).expect("device");
    let policy = PolicyPreset::resolve(&folder.default_policy().expect("policy")).expect("policy");
    let mut options = SynthOptions::new("llama-3.1-70b");
    if let Some(defaults) = &folder.defaults {
        options.weight_format = defaults.weight_format.parse().expect("format");
    }
    options.wire_limits = folder.default_wire_limits();
    let request = synthesize(&folder.config, &device, &policy, &options).expect("synthesizes");
    let text = serde_json::to_string(&request).expect("serializes");
    let mut group = c.benchmark_group("llama_70b");
    group.sample_size(10);
    group.bench_function("floor_parse_and_hash", |b| {
        b.iter(|| {
            let parsed: PlanRequest = serde_json::from_str(black_box(&text)).expect("parses");
            canonical_fingerprint("request", &parsed).expect("hashes")
        })
    });
    group.bench_function("parse_and_plan", |b| {
        b.iter(|| {
            let parsed: PlanRequest = serde_json::from_str(black_box(&text)).expect("parses");
            ExecutionPlan::build(&parsed, &BuildOptions::default()).expect("plans")
        })
    });
    group.finish();
}

criterion_group!(benches, plan_time_against_nodes, seventy_b_against_floor);
criterion_main!(benches);
