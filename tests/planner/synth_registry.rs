//! The architecture registry's newer entries on their shipped, published configurations:
//! Gemma 2's sliding-window layers (KV bounded by the window), GeGLU, sandwich norms and tied
//! head; Qwen2's attention biases; Phi-3's fused checkpoint tensors and all-layer window.
//! Every figure is computed by hand from the published `config.json`, not read back from the
//! synthesizer.

use crate::common::shipped::{a100, config};

use jointplan::builder::BuildOptions;
use jointplan::plan::{DynamicResourceDemand, ExecutionPlan};
use jointplan::request::{PlanRequest, SemanticValue, StateCapacityDemand, StorageView};
use jointplan::synth::{synthesize, ModelSource, PolicyPreset, SynthOptions, WeightFormat};

/// `model` in bf16 under the interactive preset (contiguous KV first) at `context` tokens.
fn request(model: &str, layers: Option<u64>, context: u64) -> PlanRequest {
    let mut policy = PolicyPreset::interactive();
    policy.maximum_context_tokens = Some(context);
    let mut options = SynthOptions::new(model);
    options.layers = layers;
    options.weight_format = WeightFormat::DenseBf16;
    synthesize(&config(model), &a100(), &policy, &options).unwrap()
}

pub(crate) fn weight_bytes(request: &PlanRequest) -> u64 {
    request
        .family
        .weight_schema
        .components
        .iter()
        .map(|c| c.physical_bytes().unwrap())
        .sum()
}

/// (bytes per token, maximum tokens) of each KV state, in layer order.
pub(crate) fn kv_demands(request: &PlanRequest) -> Vec<(u64, u64)> {
    let mut states: Vec<(u64, u64, u64)> = request
        .family
        .program
        .states
        .iter()
        .filter_map(|s| {
            let layer: u64 =
                s.id.as_str()
                    .strip_prefix("state.layer.")?
                    .strip_suffix(".kv")?
                    .parse()
                    .ok()?;
            match s.capacity_demand {
                StateCapacityDemand::TokenScaled {
                    bytes_per_token,
                    maximum_tokens,
                } => Some((layer, bytes_per_token, maximum_tokens)),
                StateCapacityDemand::FixedPerScope => None,
            }
        })
        .collect();
    states.sort();
    states.into_iter().map(|(_, b, t)| (b, t)).collect()
}

pub(crate) fn count_operation(request: &PlanRequest, operation: &str) -> usize {
    request
        .family
        .program
        .nodes()
        .filter(|n| n.operation_id.as_str() == format!("operation.{operation}"))
        .count()
}

fn external_names(request: &PlanRequest) -> Vec<String> {
    request
        .family
        .weight_schema
        .components
        .iter()
        .flat_map(|c| c.external_names.iter().cloned())
        .collect()
}

#[test]
fn gemma_2_9b_weights_and_sliding_window_kv_by_hand() {
    let context = 8192;
    let request = request("gemma-2-9b", None, context);
    // Tied head (Gemma 2's default): the 256,000 x 3584 table once. Per layer q and o
    // (16 x 256 = 4096 by 3584), k and v (8 x 256 = 2048 by 3584), GeGLU gate/up/down
    // (3 x 3584 x 14,336) and four norms; final norm 3584.
    let (h, q, kv, i, v) = (3584u64, 4096u64, 2048u64, 14_336u64, 256_000u64);
    let per_layer = 2 * q * h + 2 * kv * h + 3 * h * i + 4 * h;
    assert_eq!(per_layer, 198_195_200);
    let parameters = v * h + 42 * per_layer + h;
    assert_eq!(parameters, 9_241_705_984); // the published 9.24 B
    assert_eq!(weight_bytes(&request), parameters * 2);
    assert!(!external_names(&request).contains(&"lm_head.weight".to_owned()));
    // K and V: 2 x 8 heads x 256 x 2 bytes = 8192 bytes per token per layer.
    let layer_kv = 2 * 8 * 256 * 2;
    let demands = kv_demands(&request);
    assert_eq!(demands.len(), 42);
    for (layer, &(bytes_per_token, maximum_tokens)) in demands.iter().enumerate() {
        assert_eq!(bytes_per_token, layer_kv, "layer {layer}");
        // Even layers slide over 4096 tokens; odd layers attend over the whole context.
        let expected = if layer % 2 == 0 { 4096 } else { context };
        assert_eq!(maximum_tokens, expected, "layer {layer}");
    }
    assert_eq!(demands.iter().map(|d| d.0).sum::<u64>(), 344_064);
    // One sequence at the full 8192-token context: 21 x 8192 x 8192 + 21 x 8192 x 4096,
    // three quarters of the 2,818,572,288 bytes a cache without windows would hold.
    let sequence: u64 = demands.iter().map(|(b, t)| b * t).sum();
    assert_eq!(sequence, 2_113_929_216);
    assert_eq!(344_064 * context, 2_818_572_288);
    assert_eq!(sequence * 4, 344_064 * context * 3);
    // The window is stated on the sliding layers' attention nodes only.
    for node in request.family.program.nodes() {
        if node.operation_id.as_str() != "operation.causal_paged_attention" {
            continue;
        }
        let layer: u64 = node.id.as_str()["node.layer.".len()..]
            .split('.')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let window = node
            .attributes
            .iter()
            .find(|(k, _)| k.as_str() == "sliding_window")
            .map(|(_, v)| v.clone());
        let expected = (layer % 2 == 0).then_some(SemanticValue::Unsigned(4096));
        assert_eq!(window, expected, "{}", node.id);
    }
    // GeGLU: every MLP states its GELU-tanh gate; four norms per layer plus the final one.
    assert_eq!(count_operation(&request, "dense_swiglu"), 42);
    let geglu = request
        .family
        .program
        .nodes()
        .filter(|n| n.operation_id.as_str() == "operation.dense_swiglu")
        .filter(|n| {
            n.attributes.iter().any(|(k, v)| {
                k.as_str() == "gate_activation" && *v == SemanticValue::Text("gelu_tanh".into())
            })
        })
        .count();
    assert_eq!(geglu, 42);
    assert_eq!(count_operation(&request, "rms_norm"), 4 * 42 + 1);
}

#[test]
fn gemma_2_sliding_layers_reserve_their_window_in_the_plan() {
    let context = 8192;
    let plan = ExecutionPlan::build(
        &request("gemma-2-9b", Some(2), context),
        &BuildOptions::default(),
    )
    .unwrap();
    let mut reserved: Vec<(String, u64)> = plan
        .payload
        .memory
        .dynamic_descriptors
        .iter()
        .filter(|d| d.base_resource_id.as_str().starts_with("resource/state/"))
        .map(|d| {
            assert_eq!(d.storage.profile.view, StorageView::Contiguous);
            match d.demand {
                DynamicResourceDemand::Fixed { bytes } => {
                    (d.base_resource_id.as_str().to_owned(), bytes)
                }
                ref other => panic!("{}: {other:?}", d.base_resource_id),
            }
        })
        .collect();
    reserved.sort();
    assert_eq!(reserved.len(), 2, "{reserved:?}");
    // Contiguous caches reserve their maximum per sequence: the window (4096 tokens) for the
    // sliding layer 0, the context (8192 tokens) for the global layer 1, at 8192 B/token.
    assert!(reserved[0].0.contains("layer.0"), "{reserved:?}");
    assert_eq!(reserved[0].1, 8192 * 4096);
    assert!(reserved[1].0.contains("layer.1"), "{reserved:?}");
    assert_eq!(reserved[1].1, 8192 * context);
}

#[test]
fn qwen2_5_7b_attention_biases_and_kv_by_hand() {
    let request = request("qwen2.5-7b", None, 32_768);
    // Untied head. Per layer q and o (3584 x 3584), k and v (4 x 128 = 512 by 3584), their
    // q/k/v biases (3584 + 512 + 512), SwiGLU 3 x 3584 x 18,944 and two norms.
    let (h, kv, i, v) = (3584u64, 512u64, 18_944u64, 152_064u64);
    let per_layer = 2 * h * h + 2 * kv * h + (h + 2 * kv) + 3 * h * i + 2 * h;
    assert_eq!(per_layer, 233_057_792);
    let parameters = 2 * v * h + 28 * per_layer + h;
    assert_eq!(parameters, 7_615_616_512); // the published 7.61 B
    assert_eq!(weight_bytes(&request), parameters * 2);
    assert_eq!(count_operation(&request, "biased_dense_linear"), 3 * 28);
    let names = external_names(&request);
    for which in ["q", "k", "v"] {
        let bias = format!("model.layers.27.self_attn.{which}_proj.bias");
        assert!(names.contains(&bias), "{bias}");
    }
    assert!(!names.contains(&"model.layers.0.self_attn.o_proj.bias".to_owned()));
    // KV: 2 x 4 heads x 128 x 2 bytes per layer; the published 131,072 window is inactive
    // (use_sliding_window false), so every layer keeps the whole context.
    let demands = kv_demands(&request);
    assert_eq!(demands.len(), 28);
    assert!(demands.iter().all(|&d| d == (2048, 32_768)), "{demands:?}");
    assert_eq!(demands.iter().map(|d| d.0).sum::<u64>(), 57_344);
}

#[test]
fn phi_3_mini_fused_tensors_and_window_by_hand() {
    let request = request("phi-3-mini", None, 4096);
    // Untied head. Per layer q, k, v, o (3072 x 3072: 32 KV heads of 96), SwiGLU
    // 3 x 3072 x 8192, two norms.
    let (h, i, v) = (3072u64, 8192u64, 32_064u64);
    let per_layer = 4 * h * h + 3 * h * i + 2 * h;
    let parameters = 2 * v * h + 32 * per_layer + h;
    assert_eq!(parameters, 3_821_079_552); // the published 3.8 B
    assert_eq!(weight_bytes(&request), parameters * 2);
    // The checkpoint's fused tensors are named; the unfused names are not.
    let names = external_names(&request);
    assert!(names.contains(&"model.layers.0.self_attn.qkv_proj.weight".to_owned()));
    assert!(names.contains(&"model.layers.0.mlp.gate_up_proj.weight".to_owned()));
    assert!(!names
        .iter()
        .any(|n| n.ends_with(".k_proj.weight") || n.ends_with(".gate_proj.weight")));
    // KV: 2 x 32 heads x 96 x 2 bytes = 12,288 per token per layer; the published window of
    // 2047 bounds every layer below the 4096-token context.
    let demands = kv_demands(&request);
    assert_eq!(demands.len(), 32);
    assert!(demands.iter().all(|&d| d == (12_288, 2047)), "{demands:?}");
    assert_eq!(demands.iter().map(|d| d.0).sum::<u64>(), 393_216);
}

#[test]
fn gemma_keys_the_registry_reads_are_not_warned_and_soft_capping_is() {
    let source = ModelSource {
        layers: Some(2),
        ..ModelSource::folder("models/gemma-2-9b")
    };
    let synthesized = source.synthesize().unwrap();
    assert_eq!(synthesized.warnings.len(), 1);
    let warning = &synthesized.warnings[0];
    assert!(warning.contains("attn_logit_softcapping"), "{warning}");
    assert!(warning.contains("final_logit_softcapping"), "{warning}");
    assert!(!warning.contains("hidden_activation"), "{warning}");
}
