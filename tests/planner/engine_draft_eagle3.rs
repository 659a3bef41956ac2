//! vLLM's EAGLE-3 drafters and drafts whose KV cache differs in size from the model's,
//! against hand counts of what vLLM v0.19.0 builds (docs/engines.md, "Speculative
//! decoding"): the head's tensors from the published checkpoint's shapes, the target's
//! auxiliary hidden states in the profile run, the head's KV layer; a draft of another KV
//! size in one group of summed pages (v0.19.0) or refused (v0.10.1); and the refusals, each
//! naming its key.

use crate::engine_draft::{folder, report, term};

/// The published head `yuhuili/EAGLE3-LLaMA3.1-Instruct-8B` (its config.json, shipped with
/// its source in docs/data/engine-log-models/README.md).
const HEAD: &str = "docs/data/engine-log-models/eagle3-llama3.1-instruct-8b";

fn eagle3(model: &str) -> String {
    format!(
        r#"speculative_config={{"method":"eagle3","model":"{model}","num_speculative_tokens":3}}"#
    )
}

/// The head's tensors as vLLM v0.19.0 builds them from the published config (hidden 4,096,
/// 32 heads, 8 KV heads of 128, intermediate 14,336, one layer, draft_vocab_size 32,000),
/// in 2 bytes, by hand: qkv reads 2 x 4,096 and writes (32 + 2 x 8) x 128; o_proj; gate_up
/// and down; three norms (input, post-attention, hidden); fc 3 x 4,096 -> 4,096; the final
/// norm; lm_head 32,000 x 4,096; and draft_id_to_target_id, 32,000 int64.
fn published_head_bytes() -> u64 {
    let layer = 8192 * 6144 + 4096 * 4096 + 3 * 14336 * 4096 + 3 * 4096;
    let fc = 12288 * 4096;
    let lm_head = 32000 * 4096;
    (layer + fc + 4096 + lm_head) * 2 + 32000 * 8
}

#[test]
fn vllm_loads_the_published_eagle3_head_beside_llama_3_1_8b() {
    let llama = folder("llama-3.1-8b");
    let base = report(&llama, "vllm@0.19", &["max_model_len=8192"]).unwrap();
    let head = report(&llama, "vllm@0.19", &["max_model_len=8192", &eagle3(HEAD)]).unwrap();
    // Weights: the head's tensors, and its own rotary cache (2,048 positions x 128 x 2 B:
    // not the model's 131,072).
    let weights = published_head_bytes() + 2048 * 128 * 2;
    assert_eq!(weights, 849_635_328 + 524_288);
    let added = term(&head, "weights") - term(&base, "weights");
    assert_eq!(added, weights);
    // The checkpoint (huggingface.co/yuhuili/EAGLE3-LLaMA3.1-Instruct-8B, pytorch_model.bin,
    // "850 MB", its pickle importing HalfStorage, LongStorage and BoolStorage) holds the
    // same fp16 tensors and d2t (int64), plus t2d (a bool per target token, 128,256, which
    // vLLM skips) and no embedding: 850 MB to three figures.
    let checkpoint = added - 2048 * 128 * 2 + 128_256;
    assert!(
        (849_500_000..850_500_000).contains(&checkpoint),
        "{checkpoint}"
    );
    // The profile run on an H100 (8,192 batched tokens, 1,024 sequences): the sampler
    // (2,018,734,243 B) stays above the model's forward with its three auxiliary hidden
    // states (8,192 x (110,592 + 3 x 8,192)) and above the head's forward (8,192 x (8,192 +
    // 3 x 8,192 + 110,592 + 4 x 8,192)); the proposer's buffers add 8,192 x (4 + 8 + 2 x
    // 8,192) and an int32 arange of 8,192.
    assert_eq!(term(&base, "activation_peak"), 2_018_734_243);
    let buffers = 8192 * (4 + 8 + 2 * 4096 * 2) + 8192 * 4;
    assert_eq!(
        term(&head, "activation_peak") - term(&base, "activation_peak"),
        buffers
    );
    // The KV cache: the head's one layer (8 KV heads of 128) joins the model's 32 in one
    // group of 33 layers of 4,096 bytes per token, pages of 16 tokens.
    let kv = term(&head, "kv_cache");
    assert_eq!(term(&base, "kv_cache") - kv, weights + buffers);
    assert_eq!(head.kv_cache_tokens, kv / (16 * 4096) / 33 * 16);
    assert!(head.budget.iter().any(|t| t.rule.contains("EAGLE-3 head")));
    assert!(head
        .flags
        .iter()
        .any(|f| f.starts_with("--speculative-config '{\"method\":\"eagle3\"")));
    // v0.10.1 builds the same tensors for this head (one layer, no qkv bias, fc always).
    let old = report(&llama, "vllm@0.10", &["max_model_len=8192"]).unwrap();
    let old_head = report(&llama, "vllm@0.10", &["max_model_len=8192", &eagle3(HEAD)]).unwrap();
    assert_eq!(term(&old_head, "weights") - term(&old, "weights"), weights);
}

#[test]
fn the_auxiliary_hidden_states_raise_the_forward_the_head_runs_beside() {
    // With one sequence the sampler is small and the forward sets the peak: the model's
    // forward alone (8,192 x 110,592 B) without the head; with it, the head's forward after
    // the model's, the model's hidden states and its three auxiliary states alive:
    // 8,192 x (8,192 + 3 x 8,192 + 110,592 + 4 x 8,192) B, plus the proposer's buffers
    // (the arange: max(1 + 1, 8,192) int32).
    let llama = folder("llama-3.1-8b");
    let args = ["max_model_len=8192", "max_num_seqs=1"];
    let base = report(&llama, "vllm@0.19", &args).unwrap();
    let head = report(&llama, "vllm@0.19", &[args[0], args[1], &eagle3(HEAD)]).unwrap();
    assert_eq!(term(&base, "activation_peak"), 8192 * 110_592);
    let forward = 8192 * (8192 + 3 * 8192 + 110_592 + 4 * 8192);
    let buffers = 8192 * (4 + 8 + 2 * 4096 * 2) + 8192 * 4;
    assert_eq!(term(&head, "activation_peak"), forward + buffers);
    let rule = &head
        .budget
        .iter()
        .find(|t| t.name == "activation_peak")
        .unwrap()
        .rule;
    assert!(rule.contains("3 auxiliary hidden states"), "{rule}");
}

#[test]
fn a_head_s_own_keys_set_its_tensors_per_rank() {
    // A head on Llama-3.1-8B at tensor parallelism 2 whose config lists four auxiliary
    // layers, gives target_hidden_size, and no draft_vocab_size (so its lm_head spans the
    // 128,256 tokens). On one rank: qkv 8,192 x (16 + 2 x 4) x 128, o_proj 2,048 x 4,096,
    // the MLP 3 x 7,168 x 4,096, three norms 4,096; fc 3 x 4,096 x 4,096 whole (a
    // ReplicatedLinear); the final norm; lm_head 64,128 x 4,096; d2t 128,256 x 8 whole.
    let dir = tempfile::tempdir().unwrap();
    let config = r#"{
      "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
      "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
      "num_key_value_heads": 8, "num_hidden_layers": 1, "max_position_embeddings": 131072,
      "rope_theta": 500000.0, "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0,
      "low_freq_factor": 1.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"},
      "rms_norm_eps": 1e-05, "vocab_size": 128256, "torch_dtype": "bfloat16",
      "target_hidden_size": 4096, "eagle_aux_hidden_state_layer_ids": [1, 10, 20, 29]
    }"#;
    std::fs::write(dir.path().join("config.json"), config).unwrap();
    let llama = folder("llama-3.1-8b");
    let tp = [
        "max_model_len=8192",
        "tensor_parallel_size=2",
        "max_num_seqs=1",
    ];
    let base = report(&llama, "vllm@0.19", &tp).unwrap();
    let spec = eagle3(&dir.path().display().to_string());
    let head = report(&llama, "vllm@0.19", &[tp[0], tp[1], tp[2], &spec]).unwrap();
    let layer = 8192 * 3072 + 2048 * 4096 + 3 * 7168 * 4096 + 3 * 4096;
    let rank = (layer + 12288 * 4096 + 4096 + 64128 * 4096) * 2 + 128_256 * 8;
    // The rotary cache is the model's (the same positions, rotary dim and dtype).
    assert_eq!(term(&head, "weights") - term(&base, "weights"), rank);
    // Four auxiliary states: the head's forward holds 4 x 8,192 B per token of them beside
    // its largest block on one rank (2h + q + 2kv + q + h = 8,192 + 3,072 + 2,048 + 4,096
    // elements, or 2h + 3 x 7,168 + h = 33,792: the MLP's).
    let block = (2 * 4096 + 3 * 7168 + 4096) * 2;
    let forward = 8192 * (8192 + 4 * 8192 + block + 4 * 8192);
    let buffers = 8192 * (4 + 8 + 2 * 4096 * 2) + 8192 * 4;
    assert_eq!(term(&head, "activation_peak"), forward + buffers);
}

#[test]
fn a_draft_of_another_kv_size_shares_one_group_of_summed_pages_in_0_19() {
    // Llama-3.2-1B (16 layers of 2 x 8 x 64 elements, 2,048 bytes per token) beside
    // Llama-3.1-8B (32 layers of 4,096 bytes): vLLM v0.19.0 keeps all 48 full-attention
    // layers in one group (UniformTypeKVCacheSpecs) whose page is 16 tokens x (32 x 4,096 +
    // 16 x 2,048) bytes; every block holds 16 tokens of every layer.
    let llama = folder("llama-3.1-8b");
    let spec = r#"speculative_config={"method":"draft_model","model":"models/llama-3.2-1b","num_speculative_tokens":3}"#;
    let draft = report(&llama, "vllm@0.19", &["max_model_len=8192", spec]).unwrap();
    let page = 16 * (32 * 4096 + 16 * 2048);
    let available = term(&draft, "kv_cache");
    let blocks = available / page;
    assert_eq!(draft.blocks, Some(blocks));
    assert_eq!(draft.kv_cache_tokens, blocks * 16);
    assert_eq!(draft.kv_cache_bytes, blocks * page);
    let concurrency = ((blocks as f64 / 512.0) * 100.0).round() / 100.0;
    assert_eq!(draft.max_concurrency, concurrency);
    assert!(draft
        .log
        .iter()
        .any(|l| l.line.starts_with("GPU KV cache size")
            && l.rule.contains("UniformTypeKVCacheSpecs")));
    // v0.10.1 refuses such layers: vLLM's reason, naming the key.
    let text = report(&llama, "vllm@0.10", &["max_model_len=8192", spec]).unwrap_err();
    assert!(
        text.contains("speculative_config.model")
            && text.contains("NotImplementedError")
            && text.contains("1024 elements"),
        "{text}"
    );
}

/// An EAGLE head for Gemma-2-9B's widths with `heads` query and `kv_heads` KV heads of 128.
fn gemma_head(heads: u64, kv_heads: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        r#"{{
      "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 3584,
      "intermediate_size": 14336, "num_attention_heads": {heads}, "num_key_value_heads": {kv_heads},
      "head_dim": 128, "num_hidden_layers": 1, "max_position_embeddings": 8192,
      "rms_norm_eps": 1e-06, "vocab_size": 256000, "torch_dtype": "bfloat16"
    }}"#
    );
    std::fs::write(dir.path().join("config.json"), config).unwrap();
    dir
}

#[test]
fn a_draft_of_another_kv_size_beside_sliding_layers_grows_its_blocks_in_0_19() {
    // Gemma-2-9B: 21 sliding (window 4,096) and 21 full layers of 2 x 8 x 256 elements,
    // 8,192 bytes per token, pages of 16 tokens 131,072 bytes. An EAGLE head of 4 KV heads
    // of 128 (2,048 bytes per token) pages 32,768 bytes; vLLM v0.19.0 grows its blocks to
    // 64 tokens (unify_kv_cache_spec_page_size). Three layer types (21, 21, 1): 21 is not
    // below 1.5 x 1, so groups of one layer: 43 groups, num_blocks = available / 131,072,
    // tokens = num_blocks // 43 x 16. One request of 4,096 tokens needs 21 x 256 blocks
    // (full), 21 x (256 + 1) (sliding: min(4,095 + 8,192, 4,096) tokens, one more block)
    // and 64 (the head's, of 64 tokens).
    let head = gemma_head(16, 4);
    let gemma = folder("gemma-2-9b");
    let spec = format!(
        r#"speculative_config={{"method":"eagle","model":"{}"}}"#,
        head.path().display()
    );
    let grown = report(&gemma, "vllm@0.19", &["max_model_len=4096", &spec]).unwrap();
    let available = term(&grown, "kv_cache");
    let blocks = available / 131_072;
    assert_eq!(grown.blocks, Some(blocks));
    assert_eq!(grown.kv_cache_tokens, blocks / 43 * 16);
    assert_eq!(grown.kv_cache_bytes, blocks * 131_072);
    let per_request = 21 * 256 + 21 * 257 + 64;
    let concurrency = ((blocks as f64 / per_request as f64) * 100.0).round() / 100.0;
    assert_eq!(grown.max_concurrency, concurrency);
    assert!(grown
        .log
        .iter()
        .any(|l| l.rule.contains("unify_kv_cache_spec_page_size") && l.rule.contains("43 groups")));
    // A head of 3 KV heads (1,536 bytes per token, pages of 24,576 bytes) cannot be grown to
    // 131,072: vLLM's own NotImplementedError, naming the key.
    let head = gemma_head(12, 3);
    let spec = format!(
        r#"speculative_config={{"method":"eagle","model":"{}"}}"#,
        head.path().display()
    );
    let text = report(&gemma, "vllm@0.19", &["max_model_len=4096", &spec]).unwrap_err();
    assert!(
        text.contains("NotImplementedError")
            && text.contains("not divisible by the maximum page size")
            && text.contains("speculative_config.model"),
        "{text}"
    );
}

#[test]
fn eagle3_inputs_vllm_refuses_or_that_are_not_modelled_name_their_key() {
    let llama = folder("llama-3.1-8b");
    // No model.
    let text = report(
        &llama,
        "vllm",
        &[r#"speculative_config={"method":"eagle3"}"#],
    )
    .unwrap_err();
    assert!(
        text.contains("speculative_config.model is missing: method eagle3"),
        "{text}"
    );
    // A target whose auxiliary hidden states vLLM cannot return: its own refusal.
    let gemma = folder("gemma-2-9b");
    for (engine, list) in [("vllm@0.19", "kimi_k25"), ("vllm@0.10", "\"qwen\"]")] {
        let text = report(&gemma, engine, &["max_model_len=4096", &eagle3(HEAD)]).unwrap_err();
        assert!(
            text.contains("speculative_config.method")
                && text.contains("eagle3 is only supported for")
                && text.contains(list)
                && text.contains("gemma2"),
            "{text}"
        );
    }
    // Head configurations that are not a plain llama-format head.
    let bad = |extra: &str| {
        let dir = tempfile::tempdir().unwrap();
        let text = std::fs::read_to_string(format!("{HEAD}/config.json")).unwrap();
        let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let patch: serde_json::Value = serde_json::from_str(extra).unwrap();
        for (k, v) in patch.as_object().unwrap() {
            value[k] = v.clone();
        }
        std::fs::write(dir.path().join("config.json"), value.to_string()).unwrap();
        report(
            &llama,
            "vllm@0.19",
            &[
                "max_model_len=8192",
                &eagle3(&dir.path().display().to_string()),
            ],
        )
        .unwrap_err()
    };
    let text = bad(r#"{"architectures": ["DeepseekV2ForCausalLM"]}"#);
    assert!(
        text.contains("architectures") && text.contains("DeepseekV2ForCausalLM"),
        "{text}"
    );
    let text = bad(r#"{"quantization_config": {"quant_method": "fp8"}}"#);
    assert!(text.contains("quantization_config"), "{text}");
    let text = bad(r#"{"draft_vocab_size": "32000"}"#);
    assert!(
        text.contains("draft_vocab_size") && text.contains("positive integer"),
        "{text}"
    );
    let text = bad(r#"{"eagle_config": {"use_aux_hidden_state": "yes"}}"#);
    assert!(text.contains("eagle_config.use_aux_hidden_state"), "{text}");
    // An unknown method names the modelled ones.
    let text = report(
        &llama,
        "vllm",
        &[r#"speculative_config={"method":"eagle4","model":"x"}"#],
    )
    .unwrap_err();
    assert!(
        text.contains("eagle3") && text.contains("deepseek_mtp"),
        "{text}"
    );
}
