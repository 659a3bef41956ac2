//! The shipped `gemma3_text` and `qwen2_moe` configurations (`models/gemma-3-1b`,
//! `models/qwen1.5-moe-a2.7b`) planned in full from their folders, with parameter counts,
//! weight bytes, KV bytes per token and the contiguous KV reservation of one sequence
//! computed by hand from the published `config.json` values, not read back from the
//! synthesizer.

use jointplan::builder::BuildOptions;
use jointplan::plan::{AllocationLifetime, DynamicResourceDemand, ExecutionPlan};
use jointplan::request::{BufferUsage, PlanRequest, StorageView};
use jointplan::synth::ModelSource;

use crate::synth_registry::{count_operation as operations, kv_demands, weight_bytes};

/// The folder's own defaults (device, policy, weight format, wire limits), every layer.
fn synthesized(model: &str) -> PlanRequest {
    ModelSource::folder(format!("models/{model}"))
        .synthesize()
        .unwrap_or_else(|e| panic!("{model} synthesizes: {e}"))
        .request
}

/// Σ of the plan's per-sequence KV reservations (contiguous caches reserve a fixed maximum).
fn contiguous_reservation(plan: &ExecutionPlan) -> u64 {
    plan.payload
        .memory
        .dynamic_descriptors
        .iter()
        .filter(|d| d.usage == BufferUsage::State && d.lifetime == AllocationLifetime::Sequence)
        .map(|d| {
            assert_eq!(d.storage.profile.view, StorageView::Contiguous);
            match d.demand {
                DynamicResourceDemand::Fixed { bytes } => bytes,
                ref other => panic!("{}: {other:?}", d.base_resource_id),
            }
        })
        .sum()
}

#[test]
fn gemma_3_1b_plans_with_its_sliding_layers_by_hand() {
    let request = synthesized("gemma-3-1b");
    // Tied head. Per layer q and o (4 x 256 = 1024 by 1152), k and v (1 x 256 by 1152),
    // GeGLU 3 x 1152 x 6912 and four norms; the final norm. The per-head q/k norms
    // (2 x 256 per layer) are not built.
    let (h, q, kv, i, v) = (1152u64, 1024u64, 256u64, 6912u64, 262_144u64);
    let per_layer = 2 * q * h + 2 * kv * h + 3 * h * i + 4 * h;
    assert_eq!(per_layer, 26_841_600);
    let parameters = v * h + 26 * per_layer + h;
    assert_eq!(parameters, 999_872_640);
    assert_eq!(parameters + 26 * 2 * 256, 999_885_952); // the published count
    assert_eq!(weight_bytes(&request), parameters * 2);
    assert_eq!(operations(&request, "rms_norm"), 4 * 26 + 1);
    // KV: 2 x 1 head x 256 x 2 bytes = 1024 per token per layer; every 6th layer (5, 11,
    // 17, 23) is global over the 32,768-token context, the others slide over 512 tokens.
    let demands = kv_demands(&request);
    assert_eq!(demands.len(), 26);
    for (layer, &(bytes_per_token, maximum_tokens)) in demands.iter().enumerate() {
        assert_eq!(bytes_per_token, 1024, "layer {layer}");
        let global = (layer + 1) % 6 == 0;
        assert_eq!(
            maximum_tokens,
            if global { 32_768 } else { 512 },
            "layer {layer}"
        );
    }
    assert_eq!(demands.iter().map(|d| d.0).sum::<u64>(), 26_624);
    let plan = ExecutionPlan::build(&request, &BuildOptions::default()).unwrap();
    assert_eq!(plan.payload.memory.static_bytes, 1_999_745_280);
    // Interactive: contiguous caches, 4 global x 1024 x 32,768 + 22 sliding x 1024 x 512.
    assert_eq!(contiguous_reservation(&plan), 145_752_064);
    assert_eq!(4 * 1024 * 32_768 + 22 * 1024 * 512, 145_752_064);
}

#[test]
fn qwen1_5_moe_a2_7b_plans_with_its_shared_expert_by_hand() {
    let request = synthesized("qwen1.5-moe-a2.7b");
    // Untied head. Per layer q, k, v, o (16 heads of 128: 2048 by 2048) with q/k/v biases,
    // 60 routed SwiGLU experts (3 x 2048 x 1408), the router (60 x 2048), one shared SwiGLU
    // expert (3 x 2048 x 5632) and two norms; the final norm. The shared expert's sigmoid gate
    // (2048 per layer) is not built.
    let (h, e, i, s, v) = (2048u64, 60u64, 1408u64, 5632u64, 151_936u64);
    let per_layer = 4 * h * h + 3 * h + e * 3 * h * i + e * h + 3 * h * s + 2 * h;
    assert_eq!(per_layer, 570_558_464);
    let parameters = 2 * v * h + 24 * per_layer + h;
    assert_eq!(parameters, 14_315_735_040);
    assert_eq!(parameters + 24 * h, 14_315_784_192); // the published 14.3 B
    assert_eq!(weight_bytes(&request), parameters * 2);
    assert_eq!(operations(&request, "biased_dense_linear"), 3 * 24);
    assert_eq!(operations(&request, "routed_expert_swiglu"), 60 * 24);
    // KV: 2 x 16 heads x 128 x 2 bytes = 8192 per token per layer over the whole 8192-token
    // context (use_sliding_window is false).
    let demands = kv_demands(&request);
    assert_eq!(demands.len(), 24);
    assert!(demands.iter().all(|&d| d == (8192, 8192)), "{demands:?}");
    assert_eq!(demands.iter().map(|d| d.0).sum::<u64>(), 196_608);
    let plan = ExecutionPlan::build(&request, &BuildOptions::default()).unwrap();
    assert_eq!(plan.payload.memory.static_bytes, 28_631_470_080);
    assert_eq!(contiguous_reservation(&plan), 196_608 * 8192);
}
