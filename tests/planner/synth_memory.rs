//! Memory arithmetic of synthesized requests, checked against hand-computed figures.

use crate::common::shipped::{a100, config};

use jointplan::request::{fingerprints, PlanRequest, StateCapacityDemand};
use jointplan::synth::{synthesize, PolicyPreset, SynthError, SynthOptions, WeightFormat};

fn kv_bytes_per_token(request: &PlanRequest) -> u64 {
    request
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
        .sum()
}

fn weight_bytes(request: &PlanRequest) -> u64 {
    request
        .family
        .weight_schema
        .components
        .iter()
        .map(|c| c.physical_bytes().unwrap())
        .sum()
}

#[test]
fn llama_8b_f16_kv_and_weights() {
    let request = synthesize(
        &config("llama-3.1-8b"),
        &a100(),
        &PolicyPreset::interactive(),
        &SynthOptions::new("llama-3.1-8b"),
    )
    .unwrap();
    // 2 (K and V) x 32 layers x 8 KV heads x 128 head dim x 2 bytes.
    assert_eq!(kv_bytes_per_token(&request), 2 * 32 * 8 * 128 * 2);
    assert_eq!(kv_bytes_per_token(&request), 131_072);
    let (h, i, v, kv) = (4096u64, 14336u64, 128256u64, 1024u64);
    let per_layer = h * h + 2 * kv * h + h * h + 3 * h * i + 2 * h;
    let total = 2 * v * h + 32 * per_layer + h;
    assert_eq!(weight_bytes(&request), total * 2);
    // 32 layers x 10 nodes + embedding, final norm, logits.
    assert_eq!(request.node_resolutions.len(), 323);
}

#[test]
fn deepseek_v3_latent_kv_per_token() {
    let mut options = SynthOptions::new("deepseek-v3");
    options.layers = Some(4);
    options.experts = Some(16);
    let request = synthesize(
        &config("deepseek-v3"),
        &a100(),
        &PolicyPreset::server(),
        &options,
    )
    .unwrap();
    // (kv_lora_rank 512 + qk_rope_head_dim 64) x 2 bytes per layer.
    assert_eq!(kv_bytes_per_token(&request), 4 * 576 * 2);
}

#[test]
fn gptq_and_gguf_formats_shrink_weights() {
    let config = config("llama-3.2-1b");
    let mut options = SynthOptions::new("llama-3.2-1b");
    let dense = synthesize(&config, &a100(), &PolicyPreset::server(), &options).unwrap();
    options.weight_format = WeightFormat::GptqInt4;
    let gptq = synthesize(&config, &a100(), &PolicyPreset::server(), &options).unwrap();
    options.weight_format = WeightFormat::GgufQ4k;
    let gguf = synthesize(&config, &a100(), &PolicyPreset::server(), &options).unwrap();
    assert!(weight_bytes(&gptq) < weight_bytes(&dense) / 2);
    assert!(weight_bytes(&gguf) < weight_bytes(&dense) / 2);
}

#[test]
fn fingerprints_and_bindings_are_the_planners() {
    let config = config("llama-3.2-1b");
    let mut options = SynthOptions::new("llama-3.2-1b");
    options.layers = Some(2);
    options.weight_format = WeightFormat::GptqInt4;
    let request = synthesize(&config, &a100(), &PolicyPreset::interactive(), &options).unwrap();
    let family_fp = fingerprints::family_fingerprint(&request.family).unwrap();
    for (node, resolution) in request
        .family
        .program
        .nodes()
        .zip(&request.node_resolutions)
    {
        let op = &request.catalog.operations[&node.operation_id];
        for candidate in &resolution.provider_resource_candidates {
            let expected = fingerprints::node_estimator_input_fingerprint(
                &family_fp,
                op,
                &fingerprints::operation_fingerprint(op).unwrap(),
                node,
                resolution,
                &candidate.provider_id,
            )
            .unwrap();
            assert_eq!(
                candidate.estimator_input_fingerprint, expected,
                "{}",
                node.id
            );
            assert_eq!(
                candidate.estimate_fingerprint,
                fingerprints::estimate_fingerprint(candidate).unwrap()
            );
        }
        for binding in &resolution.values {
            if let Some(weight) = &binding.weight {
                assert_eq!(
                    Some(weight.clone()),
                    request
                        .family
                        .weight_schema
                        .resolved_binding(&weight.weight_id)
                );
            }
        }
    }
    for (op_id, row) in &request.catalog.providers {
        let fp = fingerprints::operation_fingerprint(&request.catalog.operations[op_id]).unwrap();
        for p in row {
            assert_eq!(p.operation_fingerprint, fp);
            assert_eq!(
                p.execution_semantics.contract_fingerprint,
                p.execution_semantics.expected_fingerprint()
            );
        }
    }
}

#[test]
fn synthesis_is_deterministic() {
    let mut options = SynthOptions::new("qwen3-next-80b-a3b");
    options.layers = Some(4);
    options.experts = Some(8);
    let config = config("qwen3-next-80b-a3b");
    let run = || {
        serde_json::to_vec(
            &synthesize(&config, &a100(), &PolicyPreset::interactive(), &options).unwrap(),
        )
        .unwrap()
    };
    assert_eq!(run(), run());
}

#[test]
fn a_bad_layer_override_names_the_option() {
    let mut options = SynthOptions::new("llama-3.2-1b");
    options.layers = Some(99);
    let err = synthesize(
        &config("llama-3.2-1b"),
        &a100(),
        &PolicyPreset::server(),
        &options,
    )
    .unwrap_err();
    assert!(
        matches!(err, SynthError::Option { ref option, .. } if option == "layers"),
        "{err}"
    );
}
