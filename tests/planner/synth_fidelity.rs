//! Memory semantics of real engines in synthesized plans: a contiguous KV cache reserves the
//! maximum context of each sequence, a paged one grows by blocks; devices are taken at their
//! word (capabilities, kernel weight formats). Figures are computed by hand from the
//! published configurations.

use crate::common::shipped::{a100, config};
use std::path::Path;

use jointplan::builder::BuildOptions;
use jointplan::check::check_plan;
use jointplan::memory::{memory_report, quantized_bytes, theoretical_maximum_shape};
use jointplan::plan::DynamicResourceDemand;
use jointplan::plan::{AllocationLifetime, ExecutionPlan};
use jointplan::request::{BufferUsage, CapabilityId, StorageView};
use jointplan::synth::{
    synthesize, DeviceDescription, PolicyPreset, SynthError, SynthOptions, WeightFormat,
};

/// llama-3.1-8b, 2 layers, `context` tokens, under the interactive preset (contiguous view
/// first) or the server preset (paged first).
fn plan_llama(contiguous_first: bool, context: u64) -> ExecutionPlan {
    let mut policy = if contiguous_first {
        PolicyPreset::interactive()
    } else {
        PolicyPreset::server()
    };
    policy.maximum_context_tokens = Some(context);
    let mut options = SynthOptions::new("llama-3.1-8b");
    options.layers = Some(2);
    let request = synthesize(&config("llama-3.1-8b"), &a100(), &policy, &options).unwrap();
    ExecutionPlan::build(&request, &BuildOptions::default()).unwrap()
}

/// The KV state descriptors of a plan: (view, per-instance demand).
fn kv_states(plan: &ExecutionPlan) -> Vec<(StorageView, DynamicResourceDemand)> {
    plan.payload
        .memory
        .dynamic_descriptors
        .iter()
        .filter(|d| d.base_resource_id.as_str().starts_with("resource/state/"))
        .map(|d| (d.storage.profile.view, d.demand.clone()))
        .collect()
}

// llama-3.1-8b: one layer's K and V, 8 KV heads x 128 head dim x 2 bytes (f16) each.
const LAYER_KV_BYTES_PER_TOKEN: u64 = 2 * 8 * 128 * 2;

#[test]
fn a_contiguous_kv_cache_reserves_the_maximum_context_per_sequence() {
    let context = 8192;
    let plan = plan_llama(true, context);
    let states = kv_states(&plan);
    assert_eq!(states.len(), 2);
    for (view, demand) in states {
        assert_eq!(view, StorageView::Contiguous);
        // 4096 B/token x 8192 tokens = 32 MiB per sequence per layer, from the first token.
        assert_eq!(
            demand,
            DynamicResourceDemand::Fixed {
                bytes: LAYER_KV_BYTES_PER_TOKEN * context
            }
        );
        assert_eq!(LAYER_KV_BYTES_PER_TOKEN * context, 32 * 1024 * 1024);
    }
    let node = plan
        .payload
        .nodes
        .iter()
        .find(|n| n.id.as_str() == "node.layer.0.attention")
        .unwrap();
    assert!(
        node.provider_resources
            .provider_id
            .as_str()
            .ends_with(".contiguous"),
        "{}",
        node.provider_resources.provider_id
    );
}

#[test]
fn a_paged_kv_cache_grows_by_blocks() {
    let context = 8192;
    let plan = plan_llama(false, context);
    let states = kv_states(&plan);
    assert_eq!(states.len(), 2);
    for (view, demand) in states {
        assert_eq!(view, StorageView::PagedRegions { block_bytes: 65536 });
        assert_eq!(
            demand,
            DynamicResourceDemand::Tokens {
                bytes_per_token: LAYER_KV_BYTES_PER_TOKEN,
                maximum_tokens: context
            }
        );
    }
}

#[test]
fn the_contiguous_reservation_grows_with_context_and_the_paged_minimum_does_not() {
    // The minimum a running sequence holds: contiguous = whole context; paged = one block per
    // layer. At 2048 tokens the contiguous reservation is 8 MiB per layer, at 32768 tokens
    // 128 MiB, while the paged sequence starts from one 64 KiB block whatever the context.
    let mut contiguous = Vec::new();
    let mut paged = Vec::new();
    for context in [2048u64, 32768] {
        contiguous.push(
            plan_llama(true, context)
                .payload
                .memory
                .minimum_sequence_bytes,
        );
        paged.push(
            plan_llama(false, context)
                .payload
                .memory
                .minimum_sequence_bytes,
        );
    }
    assert_eq!(
        contiguous[1] - contiguous[0],
        2 * LAYER_KV_BYTES_PER_TOKEN * (32768 - 2048)
    );
    assert_eq!(paged[0], paged[1]);
    assert!(paged[0] < contiguous[0]);
}

#[test]
fn a_device_without_the_weights_dtype_is_honoured() {
    let mut device = a100();
    let bf16: CapabilityId = serde_json::from_value("capability.dtype.bf16".into()).unwrap();
    assert!(device.capabilities.remove(&bf16));
    let mut options = SynthOptions::new("llama-3.1-8b");
    options.layers = Some(2);
    options.weight_format = WeightFormat::DenseBf16;
    let err = synthesize(
        &config("llama-3.1-8b"),
        &device,
        &PolicyPreset::interactive(),
        &options,
    )
    .unwrap_err();
    assert!(
        matches!(&err, SynthError::Device { field, message, .. }
            if field == "capabilities" && message.contains("capability.dtype.bf16")),
        "{err}"
    );
    // f16 weights still plan on the same device, and the catalog lists no bf16.
    options.weight_format = WeightFormat::DenseF16;
    let request = synthesize(
        &config("llama-3.1-8b"),
        &device,
        &PolicyPreset::interactive(),
        &options,
    )
    .unwrap();
    assert!(!request.catalog.device.capabilities.contains(&bf16));
}

#[test]
fn gptq_kernels_never_accept_dense_weights() {
    let request = synthesize(
        &config("llama-3.1-8b"),
        &a100(),
        &PolicyPreset::interactive(),
        &SynthOptions::new("llama-3.1-8b"),
    )
    .unwrap();
    let mut gptq = 0;
    for provider in request.catalog.providers.values().flatten() {
        if provider.provider_id.as_str().ends_with(".gptq_marlin") {
            gptq += 1;
            assert!(
                provider
                    .accepted_weight_formats
                    .iter()
                    .all(|f| !f.as_str().contains("dense")),
                "{} accepts {:?}",
                provider.provider_id,
                provider.accepted_weight_formats
            );
        }
    }
    assert!(gptq > 0);
}

#[test]
fn device_schema_is_current() {
    let schema = schemars::schema_for!(DeviceDescription);
    let mut text = serde_json::to_string_pretty(&schema).unwrap();
    text.push('\n');
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schema/device.schema.json");
    if std::env::var_os("JOINTPLAN_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let stored = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        stored == text,
        "{} is out of date with DeviceDescription; regenerate it with \
         `JOINTPLAN_BLESS=1 cargo test --test planner synth_fidelity` and commit the result",
        path.display()
    );
    // Every shipped device file has the schema's required fields.
    let value = serde_json::to_value(&schema).unwrap();
    let required = value["required"].as_array().unwrap();
    // Device files only: `models/devices/sets/` holds device sets (docs/placement.md).
    for entry in std::fs::read_dir("models/devices").unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let file: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        for key in required {
            assert!(file.get(key.as_str().unwrap()).is_some(), "{key}");
        }
    }
}

#[test]
fn qwen3_30b_a3b_weights_and_kv_by_hand() {
    let mut options = SynthOptions::new("qwen3-30b-a3b");
    options.weight_format = WeightFormat::DenseBf16;
    let request = synthesize(
        &config("qwen3-30b-a3b"),
        &a100(),
        &PolicyPreset::server(),
        &options,
    )
    .unwrap();
    let (h, layers, vocab, experts, expert_width) = (2048u64, 48u64, 151_936u64, 128u64, 768u64);
    let (q, kv) = (32 * 128u64, 4 * 128u64);
    let attention = q * h + 2 * kv * h + h * q;
    let per_layer = attention + experts * h + experts * 3 * expert_width * h + 2 * h;
    let parameters = 2 * vocab * h + layers * per_layer + h;
    assert_eq!(parameters, 30_532_110_336);
    let weights: u64 = request
        .family
        .weight_schema
        .components
        .iter()
        .map(|c| c.physical_bytes().unwrap())
        .sum();
    assert_eq!(weights, parameters * 2);
    // KV: 2 (K, V) x 4 KV heads x 128 x 2 bytes per layer, 48 layers.
    let per_layer_kv = 2 * 4 * 128 * 2;
    let states: Vec<u64> = request
        .family
        .program
        .states
        .iter()
        .filter_map(|s| match s.capacity_demand {
            jointplan::request::StateCapacityDemand::TokenScaled {
                bytes_per_token,
                maximum_tokens,
            } => {
                // The server preset's 32,768-token context (below the model's 40,960).
                assert_eq!(maximum_tokens, 32_768);
                Some(bytes_per_token)
            }
            jointplan::request::StateCapacityDemand::FixedPerScope => None,
        })
        .collect();
    assert_eq!(states.len(), 48);
    assert!(states.iter().all(|b| *b == per_layer_kv));
    assert_eq!(states.iter().sum::<u64>(), 98_304);
}

#[test]
fn the_family_id_names_the_config_used_and_keys_at_their_built_value_are_not_warned() {
    let source = jointplan::synth::ModelSource {
        config: Some("models/llama-3.2-1b/config.json".into()),
        layers: Some(2),
        ..jointplan::synth::ModelSource::folder("models/llama-3.1-8b")
    };
    let synthesized = source.synthesize().unwrap();
    assert_eq!(
        synthesized.request.family.family_id.as_str(),
        "family.llama-3.2-1b"
    );
    // llama-3.2-1b's config has `attention_bias` and `mlp_bias` at false, the value the
    // synthesizer builds: they cannot change memory or time, so nothing is warned.
    assert!(
        synthesized.warnings.is_empty(),
        "{:?}",
        synthesized.warnings
    );
}

/// llama-3.1-8b with `layers` layers under the server preset (paged KV).
fn plan_llama_layers(layers: u64) -> ExecutionPlan {
    let mut options = SynthOptions::new("llama-3.1-8b");
    options.layers = Some(layers);
    let request = synthesize(
        &config("llama-3.1-8b"),
        &a100(),
        &PolicyPreset::server(),
        &options,
    )
    .unwrap();
    ExecutionPlan::build(&request, &BuildOptions::default()).unwrap()
}

/// Per Activations pool with step members: (pool maximum resident, Σ of its members' bytes
/// at their largest shape, the peak over nodes of the bytes of the values live at that node).
/// The peak is computed here from the nodes' resource lists alone: a value is live from its
/// first to its last user.
fn activation_pools(plan: &ExecutionPlan) -> Vec<(u64, u64, u64)> {
    let memory = &plan.payload.memory;
    let largest = |d: &jointplan::plan::DynamicResourceDescriptor| {
        let shape = theoretical_maximum_shape(&d.demand).unwrap();
        quantized_bytes(&d.demand, shape, &d.storage.profile, d.alignment_bytes).unwrap()
    };
    let mut out = Vec::new();
    for pool in &memory.dynamic_pools {
        if pool.compatibility.usage != BufferUsage::Activations {
            continue;
        }
        let members: Vec<_> = memory
            .dynamic_descriptors
            .iter()
            .filter(|d| d.pool_id == pool.pool_id && d.lifetime == AllocationLifetime::Step)
            .collect();
        if members.is_empty() {
            continue;
        }
        let sum: u64 = members.iter().map(|d| largest(d)).sum();
        let nodes = &plan.payload.nodes;
        let mut peak = 0u64;
        for at in 0..nodes.len() {
            let live: u64 = members
                .iter()
                .filter(|d| {
                    let users: Vec<usize> = (0..nodes.len())
                        .filter(|&i| nodes[i].resources.contains(&d.base_resource_id))
                        .collect();
                    users.first().is_some_and(|&f| f <= at)
                        && users.last().is_some_and(|&l| at <= l)
                })
                .map(|d| largest(d))
                .sum();
            peak = peak.max(live);
        }
        out.push((pool.provisioning.maximum_resident_bytes, sum, peak));
    }
    out
}

#[test]
fn activation_pool_maxima_hold_one_steps_live_values_not_every_layers() {
    let two = plan_llama_layers(2);
    let four = plan_llama_layers(4);
    for plan in [&two, &four] {
        let report = check_plan(plan);
        assert!(report.is_valid(), "{:?}", report.violations);
    }
    let (two_pools, four_pools) = (activation_pools(&two), activation_pools(&four));
    assert_eq!(two_pools.len(), four_pools.len());
    let mut shared = false;
    for ((max2, sum2, peak2), (max4, sum4, peak4)) in two_pools.into_iter().zip(four_pools) {
        // Never below what is live at once, never above the sum over members.
        assert!(peak2 <= max2 && max2 <= sum2, "{peak2} <= {max2} <= {sum2}");
        assert!(peak4 <= max4 && max4 <= sum4, "{peak4} <= {max4} <= {sum4}");
        if sum4 > sum2 {
            // A pool whose members grow with the layers: what a step holds at once does not.
            shared = true;
            assert_eq!(
                max2, max4,
                "a step's live activations do not grow with depth"
            );
            assert!(max4 < sum4);
        }
    }
    assert!(
        shared,
        "the per-layer activations share slots across layers"
    );
}

#[test]
fn the_memory_report_says_when_pools_share_the_dynamic_capacity() {
    let plan = plan_llama_layers(32);
    let report = memory_report(&plan.payload.memory);
    let sum: u64 = report.pools.iter().map(|p| p.maximum_resident_bytes).sum();
    assert_eq!(report.pool_maxima_sum_bytes, sum);
    assert_eq!(
        report.dynamic_capacity_bytes,
        report.usable_capacity_bytes - report.static_bytes
    );
    // Server preset: the paged KV pool alone may take the whole dynamic capacity, so the
    // maxima add up to more than it and the report says they share it.
    assert!(sum > report.dynamic_capacity_bytes);
    assert!(report.pools_share_dynamic_capacity);
    for pool in &report.pools {
        assert!(pool.maximum_resident_bytes <= report.dynamic_capacity_bytes);
    }
}
