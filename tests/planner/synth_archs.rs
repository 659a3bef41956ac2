//! The architectures engines serve today beyond the first registry (`deepseek_v2`,
//! `gpt_oss`, `glm4_moe`, `olmo2`, `phimoe`, `llama4` text), each from its shipped folder:
//! parameter counts and KV bytes per token computed by hand from the published
//! `config.json` values (not read back from the synthesizer) and checked against the
//! total the model card publishes.

use jointplan::request::{PlanRequest, SemanticValue};
use jointplan::synth::ModelSource;

use crate::synth_registry::{count_operation as operations, kv_demands, weight_bytes};

/// The folder's own defaults (device, policy, wire limits), every layer, bf16 weights
/// (2 bytes per parameter, so weight bytes / 2 is the parameter count built).
fn synthesized(model: &str) -> PlanRequest {
    ModelSource {
        weight_format: Some("dense-bf16".to_owned()),
        ..ModelSource::folder(format!("models/{model}"))
    }
    .synthesize()
    .unwrap_or_else(|e| panic!("{model} synthesizes: {e}"))
    .request
}

/// Attribute `key` of node `node`.
fn attribute(request: &PlanRequest, node: &str, key: &str) -> Option<SemanticValue> {
    let node = request
        .family
        .program
        .nodes()
        .find(|n| n.id.as_str() == node)?;
    node.attributes
        .iter()
        .find(|(k, _)| k.as_str() == key)
        .map(|(_, v)| v.clone())
}

/// The built parameter count of a bf16 request.
fn parameters(request: &PlanRequest) -> u64 {
    let bytes = weight_bytes(request);
    assert_eq!(bytes % 2, 0);
    bytes / 2
}

#[test]
fn deepseek_v2_lite_by_hand() {
    let request = synthesized("deepseek-v2-lite");
    // Untied head, vocabulary 102,400 x 2048. MLA without q_lora: q_proj 16 x (128 + 64)
    // by 2048; kv_a_proj (512 + 64) by 2048; kv_a_layernorm 512; kv_b_proj 16 x (128 + 128)
    // by 512; o_proj 2048 by 16 x 128.
    let (h, v) = (2048u64, 102_400u64);
    let attention = 16 * 192 * h + 576 * h + 512 + 16 * 256 * 512 + h * 16 * 128;
    assert_eq!(attention, 13_763_072);
    let norms = 2 * h;
    // Layer 0 dense (SwiGLU 10,944); layers 1..26: router 64 x 2048, 64 experts of
    // 3 x 2048 x 1408 and 2 shared experts (one SwiGLU of width 2 x 1408).
    let dense = 3 * h * 10_944;
    let moe = 64 * h + 64 * 3 * h * 1408 + 3 * h * 2 * 1408;
    assert_eq!(moe, 571_080_704);
    let total = 2 * v * h + (attention + norms + dense) + 26 * (attention + norms + moe) + h;
    assert_eq!(total, 15_706_484_224); // the model card's 15.7B
    assert_eq!(parameters(&request), total);
    assert_eq!(operations(&request, "causal_paged_latent_attention"), 27);
    assert_eq!(operations(&request, "routed_expert_swiglu"), 26 * 64);
    // The latent cache: (kv_lora_rank + qk_rope_head_dim) x 2 bytes per token per layer.
    let per_layer = (512 + 64) * 2;
    let total_kv: u64 = request
        .family
        .program
        .states
        .iter()
        .map(|s| match s.capacity_demand {
            jointplan::request::StateCapacityDemand::TokenScaled {
                bytes_per_token, ..
            } => bytes_per_token,
            jointplan::request::StateCapacityDemand::FixedPerScope => 0,
        })
        .sum();
    assert_eq!(total_kv, 27 * per_layer);
    assert_eq!(total_kv, 31_104);
    assert!(kv_demands(&request).is_empty(), "MLA holds no K/V states");
}

/// Σ bytes per token of the token-scaled states, and the (bytes per token, maximum tokens)
/// of each K/V state in layer order.
fn kv_total(request: &PlanRequest) -> u64 {
    kv_demands(request).iter().map(|d| d.0).sum()
}

#[test]
fn gpt_oss_20b_by_hand() {
    let request = synthesized("gpt-oss-20b");
    // Untied head, vocabulary 201,088 x 2880. Attention: 64 query heads and 8 KV heads of
    // 64; q (4096 x 2880), k and v (512 x 2880), o (2880 x 4096), all four with biases,
    // and 64 sink logits.
    let (h, v, q, kv) = (2880u64, 201_088u64, 4096u64, 512u64);
    let attention = 2 * q * h + 2 * kv * h + (q + 2 * kv + h) + 64;
    assert_eq!(attention, 26_550_144);
    // MoE: router 32 x 2880 + 32 biases; 32 experts, each gate/up 2 x 2880 x 2880 with
    // 2 x 2880 biases and down 2880 x 2880 with 2880 biases. Two norms.
    let moe = 32 * h + 32 + 32 * (3 * h * h + 2 * h + h);
    let per_layer = attention + moe + 2 * h;
    assert_eq!(per_layer, 823_186_976);
    let total = 2 * v * h + 24 * per_layer + h;
    assert_eq!(total, 20_914_757_184); // the model card's 21B (20.91B in its table)
    assert_eq!(parameters(&request), total);
    assert_eq!(operations(&request, "causal_paged_sink_attention"), 24);
    assert_eq!(operations(&request, "biased_moe_router"), 24);
    assert_eq!(operations(&request, "biased_routed_expert_swiglu"), 24 * 32);
    assert_eq!(operations(&request, "biased_dense_linear"), 4 * 24);
    // KV: 2 x 8 heads x 64 x 2 bytes = 2048 per token per layer; even layers slide over
    // 128 tokens, odd ones hold the server preset's 32,768-token context.
    let demands = kv_demands(&request);
    assert_eq!(demands.len(), 24);
    for (layer, &(bytes, tokens)) in demands.iter().enumerate() {
        assert_eq!(bytes, 2048, "layer {layer}");
        assert_eq!(
            tokens,
            if layer % 2 == 0 { 128 } else { 32_768 },
            "layer {layer}"
        );
    }
    assert_eq!(kv_total(&request), 49_152);
    let sequence: u64 = demands.iter().map(|(b, t)| b * t).sum();
    assert_eq!(sequence, 12 * 2048 * 128 + 12 * 2048 * 32_768);
}

#[test]
fn gpt_oss_120b_by_hand() {
    // The gpt-oss-20b shapes with 36 layers of 128 experts (models/gpt-oss-120b/README.md).
    let (h, v, q, kv) = (2880u64, 201_088u64, 4096u64, 512u64);
    let attention = 2 * q * h + 2 * kv * h + (q + 2 * kv + h) + 64;
    // One expert: gate/up 2 x 2880 x 2880 and down 2880 x 2880, with 3 x 2880 biases.
    let expert_weights = 3 * h * h;
    let expert_biases = 3 * h;
    let moe = 128 * h + 128 + 128 * (expert_weights + expert_biases);
    let per_layer = attention + moe + 2 * h;
    assert_eq!(per_layer, 3_213_080_192);
    let total = 2 * v * h + 36 * per_layer + h;
    assert_eq!(total, 116_829_156_672); // the model card's 117B (116.8B)
    let active =
        v * h + h + 36 * (attention + 128 * h + 128 + 4 * (expert_weights + expert_biases) + 2 * h);
    assert_eq!(active, 5_132_849_472); // the model card's 5.1B active (head, not embedding)
    let bf16 = synthesized("gpt-oss-120b");
    assert_eq!(parameters(&bf16), total);
    assert_eq!(operations(&bf16, "biased_routed_expert_swiglu"), 36 * 128);
    assert_eq!(operations(&bf16, "causal_paged_sink_attention"), 36);
    // The folder's own format: the checkpoint's mxfp4 experts (32 values in 16 bytes and
    // one e8m0 scale byte: 17 bytes per 32), bf16 biases; every other weight bf16.
    let expert_bytes = expert_weights / 32 * 17 + expert_biases * 2;
    assert_eq!(expert_bytes, 13_236_480);
    let experts = 36 * 128 * expert_bytes;
    let rest = (total - 36 * 128 * (expert_weights + expert_biases)) * 2;
    assert_eq!(experts + rest, 65_248_815_744); // 60.77 GiB: the card's 60.8 GiB checkpoint
    let folder = ModelSource::folder("models/gpt-oss-120b")
        .synthesize()
        .unwrap();
    assert_eq!(folder.weight_format.name(), "config:mxfp4");
    assert_eq!(weight_bytes(&folder.request), experts + rest);
    // KV as gpt-oss-20b's, per layer; 18 sliding layers of 128 tokens, 18 at the server
    // preset's 32,768-token context.
    let demands = kv_demands(&folder.request);
    assert_eq!(demands.len(), 36);
    for (layer, &(bytes, tokens)) in demands.iter().enumerate() {
        assert_eq!(bytes, 2048, "layer {layer}");
        let expected = if layer % 2 == 0 { 128 } else { 32_768 };
        assert_eq!(tokens, expected, "layer {layer}");
    }
}

#[test]
fn glm_4_5_air_by_hand() {
    let request = synthesized("glm-4.5-air");
    // Untied head, vocabulary 151,552 x 4096. Attention: 96 query heads and 8 KV heads of
    // 128 (q 12,288 x 4096, k and v 1024 x 4096, o 4096 x 12,288), q/k/v biases; use_qk_norm
    // is false. Layer 0 dense (SwiGLU 10,944); layers 1..45: router 128 x 4096, 128 experts
    // of 3 x 4096 x 1408 and one shared expert of 1408. Two norms per layer.
    let (h, v, q, kv) = (4096u64, 151_552u64, 12_288u64, 1024u64);
    let attention = 2 * q * h + 2 * kv * h + q + 2 * kv;
    assert_eq!(attention, 109_066_240);
    let dense = 3 * h * 10_944;
    let moe = 128 * h + 128 * 3 * h * 1408 + 3 * h * 1408;
    let total = 2 * v * h + (attention + 2 * h + dense) + 45 * (attention + 2 * h + moe) + h;
    assert_eq!(total, 106_852_245_504);
    // The model card's 106B total leaves out the multi-token-prediction layer
    // (num_nextn_predict_layers); the router's e_score_correction_bias (128 per MoE layer)
    // is not built.
    assert_eq!(parameters(&request), total);
    assert_eq!(operations(&request, "routed_expert_swiglu"), 45 * 128);
    assert_eq!(operations(&request, "head_rms_norm"), 0);
    // Sigmoid router (GLM's code fixes it), renormalised top-8.
    assert_eq!(
        attribute(&request, "node.layer.1.router", "scoring"),
        Some(SemanticValue::Text("sigmoid".to_owned()))
    );
    // Partial rotary: 64 of 128 dimensions; KV 2 x 8 x 128 x 2 = 4096 per token per layer.
    assert_eq!(
        attribute(&request, "node.layer.0.attention", "rope_dim"),
        Some(SemanticValue::Unsigned(64))
    );
    assert_eq!(kv_total(&request), 46 * 4096);
    assert_eq!(kv_total(&request), 188_416);
}

#[test]
fn olmo_2_7b_by_hand() {
    let request = synthesized("olmo-2-7b");
    // Untied head, vocabulary 100,352 x 4096. Per layer q, k, v, o (4096 x 4096), the
    // q and k norms over the whole projections (4096 each), SwiGLU 3 x 4096 x 11,008, and
    // the two post-norms; the final norm.
    let (h, v, i) = (4096u64, 100_352u64, 11_008u64);
    let per_layer = 4 * h * h + 2 * h + 3 * h * i + 2 * h;
    assert_eq!(per_layer, 202_391_552);
    let total = 2 * v * h + 32 * per_layer + h;
    assert_eq!(total, 7_298_617_344); // the model card's 7.30B (7B)
    assert_eq!(parameters(&request), total);
    // Post-norm: per layer q_norm, k_norm and the two output norms, plus the final norm;
    // no input norm.
    assert_eq!(operations(&request, "rms_norm"), 4 * 32 + 1);
    let names: Vec<String> = request
        .family
        .weight_schema
        .components
        .iter()
        .flat_map(|c| c.external_names.iter().cloned())
        .collect();
    assert!(names.contains(&"model.layers.0.post_feedforward_layernorm.weight".to_owned()));
    assert!(names.contains(&"model.layers.0.self_attn.q_norm.weight".to_owned()));
    assert!(!names.iter().any(|n| n.contains("input_layernorm")));
    // KV: 2 x 32 heads x 128 x 2 bytes = 16,384 per token per layer.
    assert_eq!(kv_total(&request), 32 * 16_384);
    assert_eq!(kv_total(&request), 524_288);
}

#[test]
fn llama_4_scout_text_decoder_by_hand() {
    let request = synthesized("llama-4-scout");
    // The text decoder of `text_config` only: the vision encoder and projector
    // (vision_config) are not built. Untied head, vocabulary 202,048 x 5120. Attention: 40
    // query heads and 8 KV heads of 128 (q and o 5120 x 5120, k and v 1024 x 5120). Every
    // layer MoE (interleave_moe_layer_step 1): router 16 x 5120, 16 experts of
    // 3 x 5120 x 8192 and a shared expert of the same width. Two norms per layer.
    let (h, v) = (5120u64, 202_048u64);
    let attention = 2 * h * h + 2 * 1024 * h;
    let moe = 16 * h + 16 * 3 * h * 8192 + 3 * h * 8192;
    let per_layer = attention + moe + 2 * h;
    assert_eq!(per_layer, 2_202_101_760);
    let total = 2 * v * h + 48 * per_layer + h;
    // 107.77B of the model card's 109B total; the rest is the vision encoder.
    assert_eq!(total, 107_769_861_120);
    assert_eq!(parameters(&request), total);
    assert_eq!(operations(&request, "routed_expert_swiglu"), 48 * 16);
    assert_eq!(operations(&request, "dense_swiglu"), 48); // the shared experts
                                                          // KV: 2 x 8 x 128 x 2 = 4096 bytes per token per layer. The RoPE layers attend within
                                                          // 8192-token chunks, so they hold at most 8192 tokens; every 4th layer (NoPE) attends
                                                          // globally over the server preset's 32,768-token context.
    let demands = kv_demands(&request);
    assert_eq!(demands.len(), 48);
    for (layer, &(bytes, tokens)) in demands.iter().enumerate() {
        assert_eq!(bytes, 4096, "layer {layer}");
        let global = (layer + 1) % 4 == 0;
        assert_eq!(tokens, if global { 32_768 } else { 8192 }, "layer {layer}");
    }
    assert_eq!(kv_total(&request), 196_608);
    let sequence: u64 = demands.iter().map(|(b, t)| b * t).sum();
    assert_eq!(sequence, 12 * 4096 * 32_768 + 36 * 4096 * 8192);
}

#[test]
fn phi_3_5_moe_by_hand() {
    let request = synthesized("phi-3.5-moe");
    // Untied head, vocabulary 32,064 x 4096. Attention: 32 query heads and 8 KV heads of
    // 128 (q and o 4096 x 4096, k and v 1024 x 4096), biases on q, k, v and o. Two
    // LayerNorms per layer (weight and bias). MoE: router 16 x 4096 (no bias), 16 experts
    // of 3 x 4096 x 6400, no shared expert. The final LayerNorm (weight and bias).
    let (h, v, kv) = (4096u64, 32_064u64, 1024u64);
    let attention = 2 * h * h + 2 * kv * h + (h + 2 * kv + h);
    assert_eq!(attention, 41_953_280);
    let moe = 16 * h + 16 * 3 * h * 6400;
    assert_eq!(moe, 1_258_356_736);
    let per_layer = attention + 2 * (2 * h) + moe;
    assert_eq!(per_layer, 1_300_326_400);
    let total = 2 * v * h + 32 * per_layer + 2 * h;
    // The model card's 41.9B; the head's bias (lm_head_bias: 32,064 values) is not built.
    assert_eq!(total, 41_873_121_280);
    assert_eq!(parameters(&request), total);
    // bf16: 2 bytes per parameter.
    assert_eq!(weight_bytes(&request), 83_746_242_560);
    assert_eq!(operations(&request, "layer_norm"), 2 * 32 + 1);
    assert_eq!(operations(&request, "rms_norm"), 0);
    assert_eq!(operations(&request, "routed_expert_swiglu"), 32 * 16);
    assert_eq!(operations(&request, "biased_dense_linear"), 4 * 32);
    // The checkpoint's names: block_sparse_moe with w1 (gate), w3 (up), w2 (down).
    let names: Vec<String> = request
        .family
        .weight_schema
        .components
        .iter()
        .flat_map(|c| c.external_names.iter().cloned())
        .collect();
    for name in [
        "model.layers.0.block_sparse_moe.gate.weight",
        "model.layers.0.block_sparse_moe.experts.15.w1.weight",
        "model.layers.0.block_sparse_moe.experts.15.w3.weight",
        "model.layers.31.block_sparse_moe.experts.0.w2.weight",
        "model.layers.0.input_layernorm.bias",
        "model.layers.0.self_attn.o_proj.bias",
        "model.norm.bias",
    ] {
        assert!(names.iter().any(|n| n == name), "{name} not in the schema");
    }
    // KV: 2 x 8 heads x 128 x 2 bytes = 4096 per token per layer. Every layer slides
    // (sliding_window 131,072), which bounds nothing at the server preset's 32,768 tokens.
    let demands = kv_demands(&request);
    assert_eq!(demands.len(), 32);
    for (layer, &(bytes, tokens)) in demands.iter().enumerate() {
        assert_eq!((bytes, tokens), (4096, 32_768), "layer {layer}");
    }
    assert_eq!(kv_total(&request), 131_072);
    // LongRoPE: 64 short and 64 long factors (head_dim 128 / 2, checked by the config
    // reader), its stretch 131,072 / 4,096 the attention's scaling factor.
    assert_eq!(
        attribute(&request, "node.layer.0.attention", "rope_scaling"),
        Some(SemanticValue::Text("longrope".to_owned()))
    );
    assert!(attribute(&request, "node.layer.0.attention", "rope_scaling_factor").is_some());
}

#[test]
fn deepseek_v3_mtp_layer_by_hand() {
    // The first four layers (three dense, one MoE) with every routed expert, in bf16, with
    // and without the multi-token-prediction layer.
    let source = |speculative: Option<&str>| ModelSource {
        layers: Some(4),
        weight_format: Some("dense-bf16".to_owned()),
        speculative: speculative.map(str::to_owned),
        ..ModelSource::folder("models/deepseek-v3")
    };
    let plain = source(None).synthesize().unwrap().request;
    let mtp = source(Some("mtp")).synthesize().unwrap().request;
    assert_eq!(source(Some("none")).synthesize().unwrap().request, plain);
    // What the MTP module owns (vLLM's deepseek_mtp.py): enorm and hnorm (7168 each),
    // eh_proj 7168 x 14,336, one decoder layer and the shared_head norm; the embedding and
    // the head are the main model's. The decoder layer: MLA (q_a 1536 x 7168, its norm
    // 1536, q_b 128 x 192 x 1536, kv_a (512 + 64) x 7168, its norm 512, kv_b 128 x 256 x
    // 512, o 7168 x 128 x 128), two norms, router 256 x 7168, 256 experts of 3 x 7168 x
    // 2048 and one shared expert of 2048 (the router's correction bias is not built).
    let h = 7168u64;
    let attention =
        1536 * h + 1536 + 128 * 192 * 1536 + 576 * h + 512 + 128 * 256 * 512 + h * 128 * 128;
    assert_eq!(attention, 187_107_328);
    let moe = 256 * h + 256 * 3 * h * 2048 + 3 * h * 2048;
    assert_eq!(moe, 11_320_164_352);
    let own = 2 * h + h * 2 * h + (attention + 2 * h + moe) + h;
    assert_eq!(own, 11_610_067_968); // parameters; 23,220,135,936 bytes in bf16
    assert_eq!(parameters(&mtp) - parameters(&plain), own);
    assert_eq!(weight_bytes(&mtp) - weight_bytes(&plain), 23_220_135_936);
    // One more latent cache: (512 + 64) x 2 bytes per token, in layer 4 (the checkpoint's
    // layer num_hidden_layers).
    let latent = |request: &PlanRequest| -> Vec<String> {
        request
            .family
            .program
            .states
            .iter()
            .map(|s| s.id.as_str().to_owned())
            .filter(|id| id.ends_with(".latent_kv"))
            .collect()
    };
    assert_eq!(latent(&plain).len(), 4);
    assert_eq!(latent(&mtp).len(), 5);
    assert!(latent(&mtp).contains(&"state.layer.4.latent_kv".to_owned()));
    assert_eq!(operations(&mtp, "last_token_dense_linear"), 2);
    assert_eq!(operations(&mtp, "token_embedding"), 2);
    // The engines count its cache too.
    let facts = |r: &PlanRequest| jointplan::study::engine_facts::model_facts(r).unwrap();
    assert_eq!(facts(&mtp).layers.len(), facts(&plain).layers.len() + 1);
    assert_eq!(
        facts(&mtp).weights_bytes - facts(&plain).weights_bytes,
        23_220_135_936
    );
    // GLM-4.5-Air's MTP module (vLLM's glm4_moe_mtp.py repeats DeepSeek's): a GQA layer
    // with q/k/v biases (109,066,240, as in glm_4_5_air_by_hand) and a MoE of 128 experts
    // of 1408 with one shared expert, two norms, enorm, hnorm, the shared_head norm and
    // eh_proj 4096 x 8192.
    let glm = |speculative: Option<&str>| {
        ModelSource {
            layers: Some(2),
            weight_format: Some("dense-bf16".to_owned()),
            speculative: speculative.map(str::to_owned),
            ..ModelSource::folder("models/glm-4.5-air")
        }
        .synthesize()
        .unwrap()
        .request
    };
    let h = 4096u64;
    let moe = 128 * h + 128 * 3 * h * 1408 + 3 * h * 1408;
    let own = 109_066_240 + 2 * h + moe + 3 * h + h * 2 * h;
    assert_eq!(own, 2_375_059_456);
    assert_eq!(parameters(&glm(Some("mtp"))) - parameters(&glm(None)), own);
    // Refused where the checkpoint has no MTP layer.
    let err = ModelSource {
        layers: Some(1),
        speculative: Some("mtp".to_owned()),
        ..ModelSource::folder("models/llama-3.2-1b")
    }
    .synthesize()
    .unwrap_err()
    .to_string();
    assert!(err.contains("--speculative"), "{err}");
}

/// The keys of a warning line (`...: key, key, key`).
fn warned_keys(warning: &str) -> Vec<String> {
    warning
        .rsplit_once(": ")
        .map(|(_, keys)| keys.split(", ").map(str::to_owned).collect())
        .unwrap_or_default()
}

#[test]
fn shipped_folders_warn_only_about_keys_that_could_matter() {
    let mut folders: Vec<std::path::PathBuf> = std::fs::read_dir("models")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("config.json").is_file())
        .collect();
    folders.sort();
    assert!(folders.len() >= 18, "{folders:?}");
    for folder in &folders {
        let config = jointplan::synth::ModelConfig::read(&folder.join("config.json")).unwrap();
        let moe = config.text_decoder().unwrap().routed_experts().is_some();
        let synthesized = ModelSource {
            layers: Some(1),
            experts: moe.then_some(8),
            ..ModelSource::folder(folder)
        }
        .synthesize()
        .unwrap_or_else(|e| panic!("{} synthesizes: {e}", folder.display()));
        assert!(
            synthesized.warnings.len() <= 1,
            "{:?}",
            synthesized.warnings
        );
        for warning in &synthesized.warnings {
            for key in warned_keys(warning) {
                assert!(
                    !jointplan::synth::config_keys::HARMLESS_KEYS.contains(&key.as_str()),
                    "{}: {key} warned: {warning}",
                    folder.display()
                );
            }
        }
    }
    // Llama: every key either built or harmless.
    let llama = ModelSource {
        layers: Some(1),
        ..ModelSource::folder("models/llama-3.1-8b")
    }
    .synthesize()
    .unwrap();
    assert!(llama.warnings.is_empty(), "{:?}", llama.warnings);
    // Llama 4: the vision encoder is not built, and says so.
    let scout = ModelSource {
        layers: Some(1),
        experts: Some(8),
        ..ModelSource::folder("models/llama-4-scout")
    }
    .synthesize()
    .unwrap();
    assert_eq!(warned_keys(&scout.warnings.concat()), vec!["vision_config"]);
}
