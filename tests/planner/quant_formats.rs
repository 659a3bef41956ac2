//! Quantized weight formats against hand counts: a checkpoint's own `quantization_config`
//! (fp8 blocks, compressed-tensors w4a16 / w8a8 / fp8, bitsandbytes nf4, AWQ, GPTQ) and the
//! `--weight-format` names (llama.cpp's Q4_K_M / Q8_0 mixes, fp8, nvfp4). Every expected
//! figure is computed here from the published llama-3.1-8b shapes with its own arithmetic,
//! never by the synthesizer's functions; bad configurations are refused naming the key.

use std::path::{Path, PathBuf};

use crate::common::shipped::{a100, config};
use jointplan::builder::BuildOptions;
use jointplan::plan::ExecutionPlan;
use jointplan::request::PlanRequest;
use jointplan::synth::{
    synthesize, ModelConfig, ModelSource, PolicyPreset, SynthError, SynthOptions, WeightFormat,
};

/// llama-3.1-8b: hidden 4096, 32 layers, 8 KV heads of 128, MLP 14336, vocabulary 128256.
const LAYERS: u64 = 32;
const HIDDEN: u64 = 4096;
const KV: u64 = 1024;
const MLP: u64 = 14336;
const VOCAB: u64 = 128256;

/// One layer's projections as stored by the synthesizer: (out, in, checkpoint tensors);
/// gate and up are one fused weight of two checkpoint tensors.
const PROJECTIONS: [(u64, u64, u64); 6] = [
    (HIDDEN, HIDDEN, 1),  // q
    (KV, HIDDEN, 1),      // k
    (KV, HIDDEN, 1),      // v
    (HIDDEN, HIDDEN, 1),  // o
    (2 * MLP, HIDDEN, 2), // gate + up
    (HIDDEN, MLP, 1),     // down
];

/// Embedding, head and norms (2 per layer + the final one) in bf16.
fn unquantized_bf16() -> u64 {
    (2 * VOCAB * HIDDEN + (2 * LAYERS + 1) * HIDDEN) * 2
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

fn with_quantization(model: &str, quantization: serde_json::Value) -> ModelConfig {
    let mut value = serde_json::to_value(config(model)).unwrap();
    value["quantization_config"] = quantization;
    serde_json::from_value(value).unwrap()
}

fn synth(config: &ModelConfig, layers: Option<u64>) -> Result<PlanRequest, SynthError> {
    let mut options = SynthOptions::new("llama-3.1-8b").with_config_quantization(config)?;
    options.layers = layers;
    synthesize(config, &a100(), &PolicyPreset::interactive(), &options)
}

fn source_for(fixture: &str) -> ModelSource {
    ModelSource {
        config: Some(PathBuf::from(format!(
            "tests/data/quantization/{fixture}/config.json"
        ))),
        device: Some(PathBuf::from("models/devices/a100-80gb.json")),
        layers: Some(2),
        ..ModelSource::default()
    }
}

#[test]
fn quant_fp8_blocks_of_128x128_keep_one_f32_scale_per_block() {
    let config = with_quantization(
        "llama-3.1-8b",
        serde_json::json!({"quant_method": "fp8", "activation_scheme": "dynamic",
                           "fmt": "e4m3", "weight_block_size": [128, 128]}),
    );
    // One byte per value; ceil(out/128) x ceil(in/128) f32 scales per matrix.
    let per_layer: u64 = PROJECTIONS
        .iter()
        .map(|&(o, i, _)| o * i + o.div_ceil(128) * i.div_ceil(128) * 4)
        .sum();
    let expected = LAYERS * per_layer + unquantized_bf16();
    assert_eq!(expected, 9_082_904_576);
    assert_eq!(weight_bytes(&synth(&config, None).unwrap()), expected);
}

#[test]
fn quant_w4a16_groups_of_128_pack_two_values_per_byte_with_bf16_scales() {
    let config = ModelConfig::read(Path::new(
        "tests/data/quantization/Meta-Llama-3.1-8B-Instruct-quantized.w4a16/config.json",
    ))
    .unwrap();
    let per_layer: u64 = PROJECTIONS
        .iter()
        .map(|&(o, i, _)| o * i / 2 + (i / 128) * o * 2)
        .sum();
    let expected = LAYERS * per_layer + unquantized_bf16();
    assert_eq!(expected, 5_700_591_616);
    assert_eq!(weight_bytes(&synth(&config, None).unwrap()), expected);
}

#[test]
fn quant_w8a8_and_fp8_dynamic_keep_an_f32_scale_per_row() {
    let config = ModelConfig::read(Path::new(
        "tests/data/quantization/Meta-Llama-3.1-8B-Instruct-quantized.w8a8/config.json",
    ))
    .unwrap();
    let per_layer: u64 = PROJECTIONS.iter().map(|&(o, i, _)| o * i + o * 4).sum();
    assert_eq!(
        weight_bytes(&synth(&config, None).unwrap()),
        LAYERS * per_layer + unquantized_bf16()
    );
    // Qwen2.5-7B: hidden 3584, 28 layers, 4 KV heads of 128, MLP 18944, vocabulary 152064,
    // biases on q, k and v (bf16, kept dense).
    let qwen = ModelConfig::read(Path::new(
        "tests/data/quantization/Qwen2.5-7B-Instruct-FP8-dynamic/config.json",
    ))
    .unwrap();
    let (h, kv, mlp, vocab, layers) = (3584u64, 512u64, 18944u64, 152064u64, 28u64);
    let shapes = [(h, h), (kv, h), (kv, h), (h, h), (2 * mlp, h), (h, mlp)];
    let quantized: u64 = shapes.iter().map(|&(o, i)| o * i + o * 4).sum();
    let dense = (2 * vocab * h + layers * (2 * h + h + 2 * kv) + h) * 2;
    assert_eq!(
        weight_bytes(&synth(&qwen, None).unwrap()),
        layers * quantized + dense
    );
}

#[test]
fn quant_nf4_blocks_of_64_with_an_f32_absmax() {
    let config = with_quantization(
        "llama-3.1-8b",
        serde_json::json!({"quant_method": "bitsandbytes", "load_in_4bit": true,
                           "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": false,
                           "bnb_4bit_compute_dtype": "bfloat16"}),
    );
    // Per checkpoint tensor of n values: n/2 bytes, ceil(n/64) f32 absmax, a 16-entry map.
    let per_layer: u64 = PROJECTIONS
        .iter()
        .map(|&(o, i, tensors)| {
            let n = o * i / tensors;
            tensors * (n / 2 + n.div_ceil(64) * 4 + 16 * 4)
        })
        .sum();
    let expected = LAYERS * per_layer + unquantized_bf16();
    assert_eq!(expected, 6_027_761_664);
    assert_eq!(weight_bytes(&synth(&config, None).unwrap()), expected);
}

/// llama.cpp's `use_more_bits`, written out again.
fn more_bits(i: u64, n: u64) -> bool {
    i < n / 8 || i >= 7 * n / 8 || (i as i64 - (n / 8) as i64) % 3 == 2
}

#[test]
fn quant_gguf_q4_k_m_follows_llama_cpp_mix() {
    let mut options = SynthOptions::new("llama-3.1-8b");
    options.weight_format = "gguf-q4_k_m".parse().unwrap();
    let request = synthesize(
        &config("llama-3.1-8b"),
        &a100(),
        &PolicyPreset::interactive(),
        &options,
    )
    .unwrap();
    let q4k = |values: u64| values / 256 * 144;
    let q6k = |values: u64| values / 256 * 210;
    let mut expected = q4k(VOCAB * HIDDEN) + q6k(VOCAB * HIDDEN) + (2 * LAYERS + 1) * HIDDEN * 4;
    for layer in 0..LAYERS {
        let wide = more_bits(layer, LAYERS);
        expected += q4k(HIDDEN * HIDDEN) * 2 + q4k(KV * HIDDEN) + q4k(2 * MLP * HIDDEN);
        expected += if wide {
            q6k(KV * HIDDEN)
        } else {
            q4k(KV * HIDDEN)
        };
        expected += if wide {
            q6k(HIDDEN * MLP)
        } else {
            q4k(HIDDEN * MLP)
        };
    }
    // bartowski's Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf is 4,920,739,232 bytes with its
    // metadata and vocabulary; the tensors are these.
    assert_eq!(expected, 4_912_898_048);
    assert_eq!(weight_bytes(&request), expected);

    options.weight_format = "gguf-q8_0".parse().unwrap();
    let request = synthesize(
        &config("llama-3.1-8b"),
        &a100(),
        &PolicyPreset::interactive(),
        &options,
    )
    .unwrap();
    let q8 = |values: u64| values / 32 * 34;
    let matrices = 2 * VOCAB * HIDDEN + LAYERS * PROJECTIONS.iter().map(|p| p.0 * p.1).sum::<u64>();
    assert_eq!(
        weight_bytes(&request),
        q8(matrices) + (2 * LAYERS + 1) * HIDDEN * 4
    );
}

#[test]
fn quant_named_formats_fp8_and_nvfp4() {
    let source = |format: &str| ModelSource {
        folder: Some(PathBuf::from("models/llama-3.1-8b")),
        weight_format: Some(format.to_owned()),
        ..ModelSource::default()
    };
    // fp8 (vLLM's online quantization=fp8): one f32 scale per checkpoint tensor.
    let fp8 = source("fp8").synthesize().unwrap();
    let per_layer: u64 = PROJECTIONS.iter().map(|&(o, i, t)| o * i + 4 * t).sum();
    assert_eq!(
        weight_bytes(&fp8.request),
        LAYERS * per_layer + unquantized_bf16()
    );
    // nvfp4: 16 values in 8 bytes + an fp8 scale, an f32 global scale per tensor.
    let nvfp4 = source("nvfp4").synthesize().unwrap();
    let per_layer: u64 = PROJECTIONS
        .iter()
        .map(|&(o, i, t)| o * i / 2 + o * i / 16 + 4 * t)
        .sum();
    assert_eq!(
        weight_bytes(&nvfp4.request),
        LAYERS * per_layer + unquantized_bf16()
    );
    let err = source("mxfp4").synthesize().unwrap_err().to_string();
    assert!(err.contains("routed experts"), "{err}");
    let err = source("gguf-q3").synthesize().unwrap_err().to_string();
    assert!(
        err.contains("gguf-q4_k_m") && err.contains("awq-int4"),
        "{err}"
    );
}

#[test]
fn quant_published_checkpoints_plan_and_a_flag_overrides_with_a_note() {
    for fixture in [
        "Meta-Llama-3.1-8B-Instruct-quantized.w4a16",
        "Meta-Llama-3.1-8B-Instruct-quantized.w8a8",
        "Qwen2.5-7B-Instruct-FP8-dynamic",
    ] {
        let synthesized = source_for(fixture).synthesize().unwrap();
        assert!(
            synthesized
                .weight_format
                .name()
                .starts_with("config:compressed-tensors"),
            "{fixture}"
        );
        assert!(synthesized
            .warnings
            .iter()
            .all(|w| !w.contains("quantization_config")));
        ExecutionPlan::build(&synthesized.request, &BuildOptions::default())
            .unwrap_or_else(|e| panic!("{fixture}: {e}"));
    }
    let mut source = source_for("Meta-Llama-3.1-8B-Instruct-quantized.w4a16");
    source.weight_format = Some("dense-bf16".to_owned());
    let synthesized = source.synthesize().unwrap();
    assert_eq!(synthesized.weight_format, WeightFormat::DenseBf16);
    assert!(
        synthesized.warnings.iter().any(|w| w.contains(
            "--weight-format dense-bf16 overrides the checkpoint's quantization_config (config:compressed-tensors)"
        )),
        "{:?}",
        synthesized.warnings
    );
}

fn refusal(quantization: serde_json::Value) -> String {
    let config = with_quantization("llama-3.1-8b", quantization);
    synth(&config, Some(2)).unwrap_err().to_string()
}

#[test]
fn quant_bad_configs_are_refused_naming_the_key() {
    let err = refusal(serde_json::json!({"quant_method": "hqq", "nbits": 4}));
    assert!(
        err.contains("quantization_config.quant_method")
            && err.contains("\"hqq\"")
            && err.contains("--weight-format"),
        "{err}"
    );
    let err = refusal(serde_json::json!({"quant_method": "awq", "bits": 3, "group_size": 128}));
    assert!(
        err.contains("quantization_config.bits") && err.contains("4-bit"),
        "{err}"
    );
    let err = refusal(serde_json::json!({"quant_method": "gptq", "bits": "four"}));
    assert!(
        err.contains("quantization_config.bits") && err.contains("expected an integer"),
        "{err}"
    );
    let err = refusal(serde_json::json!({"quant_method": "gptq", "bits": 4, "group_size": 100}));
    assert!(
        err.contains("quantization_config.group_size")
            && err.contains("100 does not divide the input dimension 4096"),
        "{err}"
    );
    let err = refusal(serde_json::json!({"quant_method": "compressed-tensors",
        "config_groups": {"group_0": {"targets": ["Linear"],
            "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 96}}}}));
    assert!(
        err.contains("quantization_config.config_groups.group_0.weights.group_size"),
        "{err}"
    );
    let err = refusal(serde_json::json!({"quant_method": "fp8", "weight_block_size": [128]}));
    assert!(
        err.contains("quantization_config.weight_block_size"),
        "{err}"
    );
    let err = refusal(serde_json::json!({"quant_method": "bitsandbytes"}));
    assert!(err.contains("load_in_4bit"), "{err}");
    let err = refusal(serde_json::json!(["fp8"]));
    assert!(
        err.contains("quantization_config: expected an object"),
        "{err}"
    );
}

#[test]
fn quant_gptq_act_order_and_ignored_modules() {
    // GPTQ 4-bit, groups of 128, act-order, asymmetric: packed values, scales in the
    // checkpoint dtype (bf16 here), packed zero points, two i32 per input row (g_idx and
    // Marlin's sort indices); the down projections kept dense by modules_to_not_convert.
    let config = with_quantization(
        "llama-3.1-8b",
        serde_json::json!({"quant_method": "gptq", "bits": 4, "group_size": 128,
                           "desc_act": true, "sym": false,
                           "modules_to_not_convert": ["mlp.down_proj"]}),
    );
    let per_layer: u64 = PROJECTIONS
        .iter()
        .map(|&(o, i, tensors)| {
            if (o, i) == (HIDDEN, MLP) {
                o * i * 2
            } else {
                // Index pairs per checkpoint tensor (gate and up each have theirs).
                o * i / 2 + (i / 128) * o * 2 + (i / 128) * (o / 2) + tensors * 2 * i * 4
            }
        })
        .sum();
    assert_eq!(
        weight_bytes(&synth(&config, None).unwrap()),
        LAYERS * per_layer + unquantized_bf16()
    );
}

/// The bytes per token of every token-scaled state (the KV caches) of a request.
fn kv_bytes_per_token(request: &PlanRequest) -> Vec<u64> {
    request
        .family
        .program
        .states
        .iter()
        .filter_map(|s| match s.capacity_demand {
            jointplan::request::StateCapacityDemand::TokenScaled {
                bytes_per_token, ..
            } => Some(bytes_per_token),
            jointplan::request::StateCapacityDemand::FixedPerScope => None,
        })
        .collect()
}

#[test]
fn quant_kv_cache_dtype_fp8_and_int8_keep_one_byte_per_element() {
    let source = |model: &str, kv: Option<&str>| ModelSource {
        folder: Some(PathBuf::from(format!("models/{model}"))),
        layers: Some(2),
        kv_cache_dtype: kv.map(str::to_owned),
        ..ModelSource::default()
    };
    // llama-3.1-8b: K and V of 8 heads x 128 per layer; f16 activations by default.
    for (kv, bytes) in [
        (None, 2 * 8 * 128 * 2),
        (Some("auto"), 2 * 8 * 128 * 2),
        (Some("bf16"), 2 * 8 * 128 * 2),
        (Some("fp8"), 2 * 8 * 128),
        (Some("int8"), 2 * 8 * 128),
    ] {
        let synthesized = source("llama-3.1-8b", kv).synthesize().unwrap();
        assert_eq!(
            kv_bytes_per_token(&synthesized.request),
            vec![bytes; 2],
            "{kv:?}"
        );
        ExecutionPlan::build(&synthesized.request, &BuildOptions::default())
            .unwrap_or_else(|e| panic!("{kv:?}: {e}"));
    }
    // `auto` is the request of old, byte for byte.
    let plain = source("llama-3.1-8b", None).synthesize().unwrap().request;
    let auto = source("llama-3.1-8b", Some("auto"))
        .synthesize()
        .unwrap()
        .request;
    assert_eq!(
        plain.to_json_text(false).unwrap(),
        auto.to_json_text(false).unwrap()
    );
    // DeepSeek-V3's latent cache: kv_lora_rank 512 + rope 64 values per token.
    let mut deepseek = source("deepseek-v3", Some("fp8"));
    deepseek.experts = Some(8);
    let request = deepseek.synthesize().unwrap().request;
    assert_eq!(kv_bytes_per_token(&request), vec![512 + 64; 2]);
    // A policy preset file's kv_cache_dtype, and the flag over it.
    let mut preset = serde_json::to_value(PolicyPreset::interactive()).unwrap();
    preset["kv_cache_dtype"] = serde_json::json!("fp8");
    let file = std::env::temp_dir().join(format!("quant-kv-{}.json", std::process::id()));
    std::fs::write(&file, serde_json::to_string(&preset).unwrap()).unwrap();
    let mut from_preset = source("llama-3.1-8b", None);
    from_preset.policy = Some(file.display().to_string());
    let request = from_preset.synthesize().unwrap().request;
    assert_eq!(kv_bytes_per_token(&request), vec![2 * 8 * 128; 2]);
    from_preset.kv_cache_dtype = Some("f16".to_owned());
    let request = from_preset.synthesize().unwrap().request;
    assert_eq!(kv_bytes_per_token(&request), vec![2 * 8 * 128 * 2; 2]);
    std::fs::remove_file(&file).unwrap();
    let err = source("llama-3.1-8b", Some("fp4"))
        .synthesize()
        .unwrap_err();
    assert!(err.to_string().contains("--kv-cache-dtype"), "{err}");
}
