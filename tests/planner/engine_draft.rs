//! vLLM's speculative drafters (`speculative_config` with method `eagle` or `draft_model`)
//! against hand counts of what the V1 engine allocates for them (docs/engines.md,
//! "Speculative decoding"): the drafter's weights beside the model's, its KV layers in the
//! model's KV budget, its buffers in the profile run; and the refusals, each naming its key.

use jointplan::engine::{EngineArgs, EngineChoice, EngineReport};
use jointplan::study::engine_facts::engine_report;
use jointplan::synth::{ModelSource, Synthesized};

/// The shapes of an EAGLE head for Llama-3 8B (`yuhuili/EAGLE-LLaMA3-Instruct-8B`: one llama
/// decoder layer of the target's widths, 2,048 positions).
const EAGLE_HEAD: &str = r#"{
  "architectures": ["LlamaForCausalLM"],
  "hidden_act": "silu",
  "hidden_size": 4096,
  "intermediate_size": 14336,
  "max_position_embeddings": 2048,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 1,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05,
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "float16",
  "vocab_size": 128256
}"#;

pub(crate) fn folder(name: &str) -> Synthesized {
    ModelSource {
        device: Some("models/devices/h100-sxm-80gb.json".into()),
        ..ModelSource::folder(format!("models/{name}"))
    }
    .synthesize()
    .unwrap()
}

pub(crate) fn report(
    model: &Synthesized,
    engine: &str,
    args: &[&str],
) -> Result<EngineReport, String> {
    let choice: EngineChoice = engine.parse().unwrap();
    let args = EngineArgs::parse(args).map_err(|e| e.to_string())?;
    engine_report(&model.request, &model.device, &model.policy, &choice, &args)
        .map_err(|e| e.to_string())
}

pub(crate) fn term(report: &EngineReport, name: &str) -> u64 {
    report
        .budget
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no {name} term"))
        .bytes
}

#[test]
fn vllm_loads_an_eagle_head_beside_the_model() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.json"), EAGLE_HEAD).unwrap();
    let llama = folder("llama-3.1-8b");
    let base = report(&llama, "vllm@0.19", &["max_model_len=8192"]).unwrap();
    let config = format!(
        r#"speculative_config={{"method":"eagle","model":"{}","num_speculative_tokens":3}}"#,
        dir.path().display()
    );
    let eagle = report(&llama, "vllm@0.19", &["max_model_len=8192", &config]).unwrap();
    // Weights: one decoder layer (q and o 4096 x 4096, k and v 1024 x 4096, the MLP
    // 3 x 4096 x 14336, the post-attention norm; layer 0's input norm deleted) and fc
    // (8192 x 4096), in 2 bytes; the embedding and head are the model's. Its own rotary
    // cache: 2,048 positions x 128 x 2 bytes.
    let layer = (2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 4096 * 14336 + 4096) * 2;
    let fc = 8192 * 4096 * 2;
    let rope = 2048 * 128 * 2;
    assert_eq!(
        term(&eagle, "weights") - term(&base, "weights"),
        layer + fc + rope
    );
    // The profile run: on an H100 8,192 batched tokens and 1,024 sequences; the sampler
    // (1.88 GiB) still sets the peak over the head's forward (8,192 x (8,192 + 110,592 +
    // 24,576) bytes = 1.09 GiB); the proposer's buffers add 8,192 x (4 + 8 + 2 x 8,192)
    // and an int32 arange of 8,192.
    let buffers = 8192 * (4 + 8 + 2 * 4096 * 2) + 8192 * 4;
    assert_eq!(
        term(&eagle, "activation_peak") - term(&base, "activation_peak"),
        buffers
    );
    // The KV cache: the head's layer joins the 32 in one group of 33 layers of 4,096 bytes
    // per token (2 x 8 x 128 x 2), pages of 16 tokens.
    let kv = term(&eagle, "kv_cache");
    assert_eq!(term(&base, "kv_cache") - kv, layer + fc + rope + buffers);
    assert_eq!(eagle.kv_cache_tokens, kv / (16 * 4096) / 33 * 16);
    assert!(eagle
        .flags
        .iter()
        .any(|f| f.starts_with("--speculative-config '{\"method\":\"eagle\"")));
    // The method inferred from the name, as vLLM does: a path containing "eagle".
    let named = tempfile::Builder::new()
        .prefix("EAGLE-head-")
        .tempdir()
        .unwrap();
    std::fs::write(named.path().join("config.json"), EAGLE_HEAD).unwrap();
    let inferred = format!(
        r#"speculative_config={{"model":"{}"}}"#,
        named.path().display()
    );
    let inferred = report(&llama, "vllm@0.19", &["max_model_len=8192", &inferred]).unwrap();
    assert_eq!(term(&inferred, "weights"), term(&eagle, "weights"));
}

#[test]
fn the_eagle_record_logs_the_head_s_layer_in_the_kv_cache() {
    // vllm-19996-llama31-8b-eagle-h100 (docs/data/engine-logs.json): 51.63 GiB of KV cache
    // and 410,128 tokens. With the head's layer (33 layers of 4,096 bytes per token, one
    // group, pages of 16 tokens) the logged memory gives the logged tokens; without it
    // (32 layers) 422,944.
    let text = std::fs::read_to_string("docs/data/engine-logs.json").unwrap();
    let data: serde_json::Value = serde_json::from_str(&text).unwrap();
    let record = data["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "vllm-19996-llama31-8b-eagle-h100")
        .unwrap();
    let kv = (record["logged"]["kv_cache_gib"].as_f64().unwrap() * (1u64 << 30) as f64) as u64;
    let tokens = |layers: u64| kv / (16 * 4096) / layers * 16;
    assert_eq!(
        tokens(33),
        record["logged"]["kv_cache_tokens"].as_u64().unwrap()
    );
    assert_eq!(tokens(32), 422_944);
}

#[test]
fn vllm_loads_a_draft_model_with_its_own_embedding_and_head() {
    let big = folder("llama-3.1-70b");
    let base = report(
        &big,
        "vllm@0.19",
        &["max_model_len=8192", "tensor_parallel_size=4"],
    )
    .unwrap();
    let config = r#"speculative_config={"method":"draft_model","model":"models/llama-3.1-8b","num_speculative_tokens":3}"#;
    let draft = report(
        &big,
        "vllm@0.19",
        &["max_model_len=8192", "tensor_parallel_size=4", config],
    )
    .unwrap();
    // Llama-3.1-8B whole (8,030,261,248 parameters in 2 bytes) on each of 4 ranks; its
    // rotary cache is the 70B's (the same 131,072 positions and 128 rotary dims).
    assert_eq!(
        term(&draft, "weights") - term(&base, "weights"),
        16_060_522_496 / 4
    );
    // 80 + 32 layers of 2 x 2 x 128 x 2 = 1,024 bytes per token and rank, one group.
    let kv = term(&draft, "kv_cache");
    assert_eq!(draft.kv_cache_tokens, kv / (16 * 1024) / 112 * 16);
}

#[test]
fn drafters_vllm_would_not_load_as_modelled_are_refused_naming_the_key() {
    let llama = folder("llama-3.1-8b");
    let refusal = |engine: &str, config: &str| {
        report(&llama, engine, &["max_model_len=8192", config]).unwrap_err()
    };
    let text = refusal("vllm", r#"speculative_config={"method":"eagle"}"#);
    assert!(
        text.contains("speculative_config.model is missing"),
        "{text}"
    );
    let text = refusal(
        "vllm",
        r#"speculative_config={"method":"eagle","model":"yuhuili/EAGLE-LLaMA3.1-Instruct-8B"}"#,
    );
    assert!(
        text.contains("speculative_config.model")
            && text.contains("yuhuili/EAGLE-LLaMA3.1-Instruct-8B")
            && text.contains("config.json"),
        "{text}"
    );
    let text = refusal(
        "vllm",
        r#"speculative_config={"method":"draft_model","model":"models/qwen2.5-7b"}"#,
    );
    assert!(
        text.contains("vocabulary (152064)")
            && text.contains("(128256)")
            && text.contains("verify_equal_vocab_size_if_draft_model"),
        "{text}"
    );
    let text = refusal(
        "vllm@0.6",
        r#"speculative_config={"method":"draft_model","model":"models/llama-3.1-8b"}"#,
    );
    assert!(text.contains("V0 engine"), "{text}");
}

#[test]
fn a_float32_model_with_a_drafter_is_refused_naming_both() {
    // vLLM builds the drafter in the target's dtype; a float32 drafter is not modelled.
    let llama = folder("llama-3.1-8b");
    let config = r#"speculative_config={"method":"draft_model","model":"models/llama-3.1-8b","num_speculative_tokens":3}"#;
    let err = report(
        &llama,
        "vllm@0.19",
        &["max_model_len=8192", "dtype=float32", config],
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("dtype=float32") && err.contains("speculative_config"),
        "{err}"
    );
    // Without the drafter the same float32 model is accounted.
    assert!(report(
        &llama,
        "vllm@0.19",
        &["max_model_len=8192", "dtype=float32"]
    )
    .is_ok());
}
