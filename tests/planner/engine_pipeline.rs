//! vLLM 0.19's `dtype=float32` and `pipeline_parallel_size` (docs/engines.md, "vLLM"):
//! Llama-3.1-8B's figures counted by hand from its shapes against the engine module, and
//! the refusals.

use jointplan::engine::{
    self, DeviceFacts, EngineArgs, EngineChoice, EngineError, ModelFacts, GIB,
};
use jointplan::study::engine_facts::model_facts;
use jointplan::synth::ModelSource;

fn facts(folder: &str, format: Option<&str>) -> ModelFacts {
    let mut source = ModelSource::folder(format!("models/{folder}"));
    source.weight_format = format.map(str::to_owned);
    model_facts(&source.synthesize().unwrap().request).unwrap()
}

/// An H100 as vLLM v0.19.0 logged it (79.19 GiB).
fn h100() -> DeviceFacts {
    DeviceFacts {
        name: "NVIDIA H100 80GB HBM3".to_owned(),
        total_bytes: (79.19 * GIB as f64).round() as u64,
        total_source: "test".to_owned(),
        free_at_start_bytes: None,
        compute_capability: Some(90),
    }
}

fn account(
    engine: &str,
    model: &ModelFacts,
    args: &[&str],
) -> Result<engine::EngineReport, EngineError> {
    let choice: EngineChoice = engine.parse().unwrap();
    engine::account(&choice, model, &h100(), &EngineArgs::parse(args).unwrap())
}

fn term(report: &engine::EngineReport, name: &str) -> u64 {
    report
        .budget
        .iter()
        .find(|t| t.name == name)
        .map(|t| t.bytes)
        .unwrap()
}

// Llama-3.1-8B's shapes: h 4,096, I 14,336, 32 layers, 8 KV heads of 128, vocabulary
// 128,256, 131,072 positions.
const H: u64 = 4096;
const I: u64 = 14336;
const VOCAB: u64 = 128_256;
/// One decoder layer: q, k, v, o (4,096 x (4,096 + 1,024 + 1,024 + 4,096)), gate, up,
/// down (3 x 4,096 x 14,336) and two norms, in 2 bytes.
const LAYER: u64 = (H * (H + 1024 + 1024 + H) + 3 * H * I + 2 * H) * 2;
const EMBEDDING: u64 = VOCAB * H * 2;

#[test]
fn llama_facts_split_into_layers_embedding_norm_and_head() {
    let llama = facts("llama-3.1-8b", Some("dense-bf16"));
    assert_eq!(llama.layer_weights_bytes, vec![LAYER; 32]);
    assert_eq!(LAYER, 436_224_000);
    assert_eq!(
        (llama.embedding_bytes, llama.head_bytes),
        (EMBEDDING, EMBEDDING)
    );
    assert_eq!(llama.final_norm_bytes, H * 2);
    assert!(!llama.tied_embeddings && llama.quantization.is_none());
    assert_eq!(
        32 * LAYER + 2 * EMBEDDING + H * 2,
        llama.weights_bytes,
        "the parts are the whole"
    );
}

#[test]
fn float32_loads_llama_at_four_bytes_by_hand() {
    let llama = facts("llama-3.1-8b", Some("dense-bf16"));
    let base = ["gpu_memory_utilization=0.95", "max_model_len=8192"];
    let report = account("vllm", &llama, &[&base[..], &["dtype=float32"]].concat()).unwrap();
    // Weights: 8,030,261,248 parameters x 4 B + the rotary cache 131,072 x 128 x 4 B:
    // 29.98 GiB, what vLLM v0.19.0 logged (`Model loading took 29.98 GiB memory`).
    let weights = 8_030_261_248u64 * 4 + 131_072 * 128 * 4;
    assert_eq!(term(&report, "weights"), weights);
    assert_eq!(format!("{:.2}", weights as f64 / GIB as f64), "29.98");
    // The profile run at 8,192 tokens and 1,024 sequences (an H100's defaults), float32:
    // forward 3h + 3I elements per token (docs/engines.md); sampler: the hidden states, and per logit
    // the float32 logits plus 12.86 bytes less the 4 of a float32 copy they do not need.
    let forward = 8192 * (3 * H + 3 * I) * 4;
    let sampler = 8192 * H * 4 + 1024 * VOCAB * (4_000 + 12_860 - 4_000) / 1000;
    assert_eq!(term(&report, "activation_peak"), forward.max(sampler));
    assert_eq!(forward.max(sampler), sampler);
    // KV cache `auto` in float32: a block of 16 tokens over 32 layers x 2 x 8 x 128 x 4 B.
    let requested = (h100().total_bytes as f64 * 0.95) as u64;
    assert_eq!(term(&report, "requested"), requested);
    let non_torch = 250 * GIB / 1000;
    let available = h100().total_bytes as f64 * 0.95 - (weights + sampler + non_torch) as f64;
    let page = 16 * 2 * 8 * 128 * 4;
    let blocks = (available / page as f64 / 32.0).floor() as u64;
    assert_eq!(report.blocks, Some(blocks));
    assert_eq!(report.kv_cache_tokens, blocks * 16);
    assert_eq!(report.args["dtype"], "float32");
    assert!(report.flags.iter().any(|f| f == "--dtype float32"));
    // `float` is vLLM's other spelling of the same dtype.
    let alias = account("vllm", &llama, &[&base[..], &["dtype=float"]].concat()).unwrap();
    assert_eq!(alias.kv_cache_tokens, report.kv_cache_tokens);
}

#[test]
fn float32_refuses_quantized_weights_and_unmodelled_versions() {
    let fp8 = facts("llama-3.1-8b", Some("fp8"));
    let err = account("vllm", &fp8, &["dtype=float32"])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("dtype=float32")
            && err.contains("quantized")
            && err.contains("vllm/config/vllm.py"),
        "{err}"
    );
    let llama = facts("llama-3.1-8b", Some("dense-bf16"));
    let err = account("vllm@0.10", &llama, &["dtype=float32"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("dtype=float32 under vLLM 0.10"), "{err}");
    let err = EngineArgs::parse(&["dtype=float64"])
        .unwrap()
        .check(engine::Engine::Vllm)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("dtype=float64") && err.contains("float32"),
        "{err}"
    );
}

#[test]
fn pipeline_stages_hold_their_layers_and_the_smallest_stage_sets_the_blocks() {
    let llama = facts("llama-3.1-8b", Some("dense-bf16"));
    let args = [
        "gpu_memory_utilization=0.95",
        "max_model_len=8192",
        "pipeline_parallel_size=2",
    ];
    let report = account("vllm", &llama, &args).unwrap();
    let rope = 131_072 * 128 * 2;
    // Stage 0: layers 0..16 and the embedding; stage 1: layers 16..32, the final norm and
    // the head. Both 7.51 GiB, what the log's Worker_PP0 printed.
    let stage0 = 16 * LAYER + EMBEDDING + rope;
    let stage1 = 16 * LAYER + EMBEDDING + H * 2 + rope;
    assert_eq!(term(&report, "weights"), stage0);
    assert_eq!(format!("{:.2}", stage0 as f64 / GIB as f64), "7.51");
    // Stage 0's peak is the forward pass (the sampler runs on the last stage); the last
    // stage's the sampler, plus the received hidden states and residual it keeps.
    let forward = 8192 * (3 * H + 3 * I) * 2;
    let sampler = 8192 * H * 2 + 1024 * VOCAB * (2_000 + 12_860) / 1000;
    assert_eq!(term(&report, "activation_peak"), forward);
    let last_peak = sampler + 2 * 8192 * H * 2;
    let non_torch = (250 * GIB / 1000) as f64;
    let requested = h100().total_bytes as f64 * 0.95;
    let page = 16 * 2 * 8 * 128 * 2;
    let blocks = |available: f64| (available / page as f64 / 16.0).floor() as u64;
    let b0 = blocks(requested - (stage0 + forward) as f64 - non_torch);
    let b1 = blocks(requested - (stage1 + last_peak) as f64 - non_torch);
    assert!(b1 < b0);
    assert_eq!(report.blocks, Some(b1));
    assert_eq!(report.kv_cache_tokens, b1 * 16);
    assert_eq!(
        report.max_concurrency,
        ((b1 as f64 / 512.0) * 100.0).round() / 100.0
    );
    assert!(report
        .flags
        .iter()
        .any(|f| f == "--pipeline-parallel-size 2"));
    // Three stages split 32 layers 11, 11, 10 (get_pp_indices: the remainder on the stages
    // before the last).
    let three = account("vllm", &llama, &["pipeline_parallel_size=3"]).unwrap();
    let stages: Vec<&str> = three
        .log
        .iter()
        .map(|l| l.line.as_str())
        .filter(|l| l.starts_with("Stage "))
        .collect();
    assert_eq!(stages.len(), 3);
    for (line, range) in stages.iter().zip(["0..11", "11..22", "22..32"]) {
        assert!(line.contains(&format!("decoder layers {range})")), "{line}");
    }
    // With tensor parallelism too: each stage's layers over 2 ranks, the tensor-parallel
    // non-torch memory.
    let both = account(
        "vllm",
        &llama,
        &["pipeline_parallel_size=2", "tensor_parallel_size=2"],
    )
    .unwrap();
    assert_eq!(term(&both, "weights"), (16 * LAYER + EMBEDDING) / 2 + rope);
    assert_eq!(term(&both, "non_torch"), 2070 * GIB / 1000);
}

#[test]
fn pipeline_parallelism_refuses_what_it_does_not_model() {
    let llama = facts("llama-3.1-8b", Some("dense-bf16"));
    let err = account("vllm", &llama, &["pipeline_parallel_size=33"])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("pipeline_parallel_size=33") && err.contains("32 decoder layers"),
        "{err}"
    );
    let err = EngineArgs::parse(&["pipeline_parallel_size=0"])
        .unwrap()
        .check(engine::Engine::Vllm)
        .unwrap_err()
        .to_string();
    assert!(err.contains("pipeline_parallel_size=0"), "{err}");
    // A tied head (Llama-3.2-1B): vLLM's model files place it differently.
    let tied = facts("llama-3.2-1b", None);
    let err = account("vllm", &tied, &["pipeline_parallel_size=2"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("tied"), "{err}");
    let err = account("vllm@0.6", &llama, &["pipeline_parallel_size=2"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("vLLM 0.6"), "{err}");
    // vLLM 0.10 groups each stage's own layers: the same for one attention kind.
    let v010 = account("vllm@0.10", &llama, &["pipeline_parallel_size=2"]).unwrap();
    assert!(v010.kv_cache_tokens > 0);
    // ... but not for a model mixing sliding and full attention (gpt-oss-20b in bf16), which
    // 0.19 groups over the whole model.
    let mixed = facts("gpt-oss-20b", Some("dense-bf16"));
    let err = account("vllm@0.10", &mixed, &["pipeline_parallel_size=2"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("mixing attention kinds"), "{err}");
    let v019 = account("vllm", &mixed, &["pipeline_parallel_size=2"]).unwrap();
    assert!(v019.kv_cache_tokens > 0);
}
