//! The engines' memory accounting (`jointplan::engine`) against hand computations of each
//! engine's rule (docs/engines.md), and the validation table of docs/engines-validation.md recomputed
//! from docs/data/engine-logs.json and compared with the committed one.

use std::path::Path;

use jointplan::engine::{self, CacheLayer, DeviceFacts, EngineArgs, EngineChoice, ModelFacts, GIB};
use jointplan::study::engine_facts::model_facts;
use jointplan::study::engine_validation::validation_table;
use jointplan::synth::ModelSource;

fn facts(folder: &str) -> ModelFacts {
    let request = ModelSource::folder(format!("models/{folder}"))
        .synthesize()
        .unwrap()
        .request;
    model_facts(&request).unwrap()
}

fn device(total_gib: f64) -> DeviceFacts {
    DeviceFacts {
        name: "NVIDIA GeForce RTX 3090".to_owned(),
        total_bytes: (total_gib * GIB as f64).round() as u64,
        total_source: "test".to_owned(),
        free_at_start_bytes: None,
        compute_capability: Some(86),
    }
}

fn account(
    engine: &str,
    model: &ModelFacts,
    device: &DeviceFacts,
    args: &[&str],
) -> engine::EngineReport {
    let choice: EngineChoice = engine.parse().unwrap();
    engine::account(&choice, model, device, &EngineArgs::parse(args).unwrap()).unwrap()
}

#[test]
fn llama_facts_are_the_published_shapes() {
    let llama = facts("llama-3.1-8b");
    // 8,030,261,248 parameters in 2 bytes; the embedding 128,256 x 4,096 x 2.
    assert_eq!(llama.weights_bytes, 16_060_522_496);
    assert_eq!(llama.embedding_bytes, 128_256 * 4096 * 2);
    assert_eq!(
        llama.kv_bytes_per_token(1, 2).unwrap(),
        32 * 2 * 8 * 128 * 2
    );
    assert_eq!(
        llama.kv_bytes_per_token(2, 2).unwrap(),
        32 * 2 * 4 * 128 * 2
    );
    assert_eq!(
        engine::vllm_forward_bytes_per_token(&llama, 1).unwrap(),
        2 * (3 * 4096 + 3 * 14336)
    );
}

#[test]
fn vllm_v0_follows_its_budget_and_block_rule() {
    let llama = facts("llama-3.1-8b");
    let dev = device(23.58);
    let report = account(
        "vllm@0.6",
        &llama,
        &dev,
        &["gpu_memory_utilization=0.9", "max_model_len=20000"],
    );
    // By hand: the budget is total x 0.9; the weights are the parameters plus the rotary
    // cache (131,072 positions x 128 dims x 2 bytes); without chunked prefill the profile run
    // takes max_model_len tokens, each holding 2 x (3h + 3I) bytes at the MLP's peak; the
    // sampler (256 x 128,256 logits x 38 B + hidden rows) is smaller.
    let requested = dev.total_bytes as f64 * 0.9;
    let weights = 16_060_522_496u64 + 131_072 * 128 * 2;
    let activation = 20_000u64 * 2 * (3 * 4096 + 3 * 14336);
    let sampler = 256u64 * 128_256 * 38 + (20_000 + 256) * 4096 * 2;
    assert!(sampler < activation);
    let non_torch = 350 * GIB / 1000;
    let available = requested - (weights + activation + non_torch) as f64;
    let blocks = (available / (16.0 * 131_072.0)).floor() as u64;
    assert_eq!(report.blocks, Some(blocks));
    assert_eq!(report.kv_cache_tokens, blocks * 16);
    assert_eq!(
        report.max_concurrency,
        ((blocks * 16) as f64 / 20_000.0 * 100.0).round() / 100.0
    );
    assert!(report
        .log
        .iter()
        .any(|l| l.line == format!("# GPU blocks: {blocks}")));
    assert!(report.refusal.is_none());
    // Raising max_model_len raises the profile run's tokens: fewer blocks, and the engine
    // refuses once one request no longer fits.
    let longer = account(
        "vllm@0.6",
        &llama,
        &dev,
        &["gpu_memory_utilization=0.9", "max_model_len=29000"],
    );
    assert!(longer.kv_cache_tokens < 29_000);
    assert!(longer
        .refusal
        .as_deref()
        .unwrap()
        .contains("max seq len (29000)"));
}

#[test]
fn vllm_v1_groups_sliding_and_full_layers() {
    // gemma-2-9b: 21 full and 21 sliding layers (window 4096): group size 21, two groups; the
    // logged tokens are num_blocks // 2 x 16.
    let gemma = facts("gemma-2-9b");
    let full = gemma
        .layers
        .iter()
        .filter(|l| matches!(l, CacheLayer::Full { .. }))
        .count();
    assert_eq!(full, 21);
    let dev = device(79.0);
    let report = account("vllm", &gemma, &dev, &["max_model_len=8192"]);
    let page = 16 * 2 * 8 * 256 * 2u64;
    let kv = report
        .budget
        .iter()
        .find(|t| t.name == "kv_cache")
        .unwrap()
        .bytes;
    let blocks = kv / page / 21;
    assert_eq!(report.blocks, Some(blocks));
    assert_eq!(report.kv_cache_tokens, blocks / 2 * 16);
    // One request: 8192 / 16 = 512 blocks for the full group, and for the sliding group
    // ceil(min(4096 - 1 + max_num_batched_tokens, 8192) / 16) + 1.
    let batched: u64 = report.args["max_num_batched_tokens"].parse().unwrap();
    let sliding = (4095 + batched).min(8192).div_ceil(16) + 1;
    assert_eq!(
        report.max_concurrency,
        ((blocks as f64 / (512 + sliding) as f64) * 100.0).round() / 100.0
    );
    // gemma-3-1b: 4 full and 22 sliding layers: group size 4, 1 + 6 groups.
    let small = facts("gemma-3-1b");
    let report = account("vllm", &small, &dev, &["max_model_len=8192"]);
    assert_eq!(report.kv_cache_tokens, report.blocks.unwrap() / 7 * 16);
}

#[test]
fn sglang_and_trtllm_and_llama_cpp_follow_their_rules() {
    let llama = facts("llama-3.1-8b");
    let mut dev = device(79.0);
    dev.free_at_start_bytes = Some((78.81 * GIB as f64).round() as u64);
    let report = account("sglang", &llama, &dev, &["context_length=131072"]);
    let free = dev.free_at_start_bytes.unwrap() as f64;
    // The weights SGLang counts: the parameters and the float32 rotary cache.
    let weights = 16_060_522_496.0 + (131_072 * 128 * 4) as f64;
    let rest = free - weights - free * (1.0 - 0.88);
    assert_eq!(report.kv_cache_tokens, (rest / 131_072.0).floor() as u64);
    let trt = account("trtllm", &llama, &device(79.0), &["max_seq_len=8192"]);
    assert_eq!(trt.kv_cache_tokens % 64, 0);
    assert_eq!(trt.kv_cache_bytes, trt.kv_cache_tokens * 131_072);
    let cpp = account("llama.cpp", &llama, &device(23.58), &["ctx_size=500"]);
    // 500 tokens padded to 512 cells: 512 x 32 layers x 2 x 1024 elements x 2 bytes = 64 MiB.
    assert_eq!(cpp.kv_cache_tokens, 512);
    assert_eq!(cpp.kv_cache_bytes, 64 << 20);
    let q8 = account(
        "llama.cpp",
        &llama,
        &device(23.58),
        &["ctx_size=512", "cache_type_k=q8_0", "cache_type_v=q8_0"],
    );
    assert_eq!(q8.kv_cache_bytes, (64u64 << 20) / 2 / 32 * 34);
}

#[test]
fn fp8_kv_halves_the_bytes_per_token() {
    let llama = facts("llama-3.1-8b");
    let dev = device(79.0);
    let auto = account("vllm", &llama, &dev, &["max_model_len=8192"]);
    let fp8 = account(
        "vllm",
        &llama,
        &dev,
        &["max_model_len=8192", "kv_cache_dtype=fp8"],
    );
    let blocks = auto.blocks.unwrap();
    assert!((fp8.blocks.unwrap() as i64 - 2 * blocks as i64).abs() <= 1);
    assert!(fp8.flags.iter().any(|f| f == "--kv-cache-dtype fp8"));
}

#[test]
fn hybrid_recurrent_models_are_refused_naming_the_feature() {
    let next = facts("qwen3-next-80b-a3b");
    let choice: EngineChoice = "vllm".parse().unwrap();
    let err = engine::account(&choice, &next, &device(79.0), &EngineArgs::default()).unwrap_err();
    assert!(err.to_string().contains("recurrent"), "{err}");
}

const BEGIN: &str = "<!-- engine-table: cargo run --example engine_table -->\n";
const END: &str = "<!-- /engine-table -->";

#[test]
fn the_validation_table_of_docs_engines_validation_md_is_current_and_meets_the_kv_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let data = std::fs::read_to_string(root.join("docs/data/engine-logs.json")).unwrap();
    let table = validation_table(&data, root).unwrap();
    let doc = std::fs::read_to_string(root.join("docs/engines-validation.md")).unwrap();
    let start = doc
        .find(BEGIN)
        .expect("docs/engines-validation.md has the table's markers")
        + BEGIN.len();
    let end = doc[start..].find(END).unwrap() + start;
    assert_eq!(
        &doc[start..end],
        table.markdown(),
        "docs/engines-validation.md's table is stale: paste `cargo run --example engine_table` between its markers"
    );
    // Issue 37: at least 12 published logs predicted; KV cache tokens within 3% on every
    // test record; weights within 1% on every vLLM 0.19 test record (the one V0 record
    // beyond it, -1.15%, is explained in docs/engines-validation.md).
    assert!(table.rows.len() >= 12, "{} rows", table.rows.len());
    for row in table.rows.iter().filter(|r| !r.fit) {
        if let Some(error) = row.kv_error() {
            assert!(error.abs() <= 3.0, "{}: {error:+.2}%", row.id);
        }
        if row.engine == "vllm@0.19" {
            assert!(
                row.weights_error().abs() <= 1.0,
                "{}: weights {:+.2}%",
                row.id,
                row.weights_error()
            );
        }
        // llama.cpp's buffers: the model and KV buffers follow from the GGUF type mix and
        // the cell rule, to the logged two decimals of a MiB.
        if row.engine.starts_with("llama.cpp") {
            let mib = |gib: f64| gib * 1024.0;
            assert!(
                (mib(row.weights_predicted_gib) - mib(row.weights_logged_gib)).abs() < 0.01,
                "{}: model buffer {:?}",
                row.id,
                (row.weights_logged_gib, row.weights_predicted_gib)
            );
            let (logged, predicted) = row.kv_gib.expect("a llama.cpp row logs its KV buffer");
            assert!((mib(predicted) - mib(logged)).abs() < 0.01, "{}", row.id);
        }
    }
    // Every engine family is either in the table or has each of its records listed with why.
    for engine in ["sglang", "llama.cpp"] {
        assert!(
            table.rows.iter().any(|r| r.engine.starts_with(engine)),
            "no {engine} row"
        );
    }
    assert!(table
        .skipped
        .iter()
        .filter(|(id, _)| id.starts_with("trtllm"))
        .all(|(_, why)| !why.is_empty()));
}

#[test]
fn vllm_echoes_an_mtp_speculative_config_and_refuses_other_methods() {
    let llama = facts("llama-3.1-8b");
    let config = r#"speculative_config={"method":"deepseek_mtp","num_speculative_tokens":1}"#;
    let report = account("vllm", &llama, &device(79.19), &[config]);
    assert!(
        report.flags.iter().any(|f| f
            == r#"--speculative-config '{"method":"deepseek_mtp","num_speculative_tokens":1}'"#),
        "{:?}",
        report.flags
    );
    let eagle = EngineArgs::parse(&[r#"speculative_config={"method":"eagle"}"#]).unwrap();
    let choice: EngineChoice = "vllm".parse().unwrap();
    assert!(engine::account(&choice, &llama, &device(79.19), &eagle).is_err());
}

#[test]
fn the_v0_19_constants_are_the_medians_of_the_fit_half() {
    // The fit half: the vllm-llmd records at even positions of their sorted ids; the
    // constants of vLLM 0.19 are the medians of what those records logged (the sampler's
    // bytes per logit once the structural terms are taken off; the non-torch memory on one
    // GPU and with tensor parallelism), rounded as the engine module states them.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("docs/data/engine-logs.json")).unwrap();
    let data: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut ids: Vec<&str> = data["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .filter(|id| id.starts_with("vllm-llmd-"))
        .collect();
    ids.sort_unstable();
    let table = validation_table(&text, root).unwrap();
    for row in table.rows.iter().filter(|r| r.engine == "vllm@0.19") {
        match ids.iter().position(|id| *id == row.id) {
            Some(position) => assert_eq!(row.fit, position % 2 == 0, "{}", row.id),
            // A v0.19 record from elsewhere (the A100 blog's) only tests.
            None => assert!(!row.fit, "{}", row.id),
        }
    }
    let fit = table.fit_019().unwrap();
    use engine::vllm_activation as rules;
    assert_eq!(
        rules::SAMPLER_019_EXTRA_MILLIBYTES_PER_LOGIT,
        (fit.sampler_extra_per_logit * 100.0).round() as u64 * 10
    );
    assert_eq!(
        rules::NON_TORCH_019_TP1_BYTES,
        (fit.non_torch_tp1_gib * 100.0).round() as u64 * 10 * GIB / 1000
    );
    assert_eq!(
        rules::NON_TORCH_019_TP_BYTES,
        (fit.non_torch_tp_gib * 100.0).round() as u64 * 10 * GIB / 1000
    );
}

#[test]
fn vllm_v0_19_follows_its_budget_and_block_rule() {
    // By hand, Llama-3.1-8B on an H100 (79.19 GiB as the driver reports it) at
    // gpu_memory_utilization 0.95: the defaults on a >= 70 GiB non-A100 device are 8192
    // batched tokens and 1024 sequences; the sampler sets the peak (hidden states
    // 8192 x 4096 x 2 B, and 1024 x 128,256 logits x (2 + 12.86) B), not the forward
    // (8192 x 110,592 B); non-torch 0.25 GiB; blocks of 16 tokens over 32 layers of
    // 2 x 8 x 128 x 2 B.
    let llama = facts("llama-3.1-8b");
    let mut dev = device(79.19);
    dev.name = "NVIDIA H100 80GB HBM3".to_owned();
    let report = account(
        "vllm@0.19",
        &llama,
        &dev,
        &["gpu_memory_utilization=0.95", "max_model_len=8192"],
    );
    let requested = dev.total_bytes as f64 * 0.95;
    let weights = 16_060_522_496u64 + 131_072 * 128 * 2;
    let forward = 8192u64 * 110_592;
    let sampler = 8192u64 * 4096 * 2 + 1024 * 128_256 * 14_860 / 1000;
    assert!(forward < sampler);
    let non_torch = 250 * GIB / 1000;
    let available = requested - (weights + sampler + non_torch) as f64;
    let blocks = (available / (16.0 * 32.0 * 2.0 * 8.0 * 128.0 * 2.0)).floor() as u64;
    assert_eq!(report.blocks, Some(blocks));
    assert_eq!(report.kv_cache_tokens, blocks * 16);
    assert_eq!(
        report.max_concurrency,
        ((blocks as f64 / 512.0) * 100.0).round() / 100.0
    );
    assert_eq!(report.args["max_num_batched_tokens"], "8192");
    assert_eq!(report.args["max_num_seqs"], "1024");
    let cuda_graph = report
        .budget
        .iter()
        .find(|t| t.name == "cuda_graph")
        .unwrap();
    assert_eq!(cuda_graph.bytes, 0);
    assert!(cuda_graph
        .rule
        .contains("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"));
    // An A100 keeps the smaller defaults; a tensor-parallel rank adds the NCCL figure.
    let mut a100 = dev.clone();
    a100.name = "NVIDIA A100-SXM4-80GB".to_owned();
    let small = account("vllm@0.19", &llama, &a100, &["max_model_len=8192"]);
    assert_eq!(small.args["max_num_batched_tokens"], "2048");
    let tp2 = account(
        "vllm@0.19",
        &llama,
        &dev,
        &["max_model_len=8192", "tensor_parallel_size=2"],
    );
    let non_torch_tp2 = tp2.budget.iter().find(|t| t.name == "non_torch").unwrap();
    assert_eq!(non_torch_tp2.bytes, 2070 * GIB / 1000);
    // A mixture of experts adds its fused-MoE workspaces beside the sampler:
    // Qwen3-30B-A3B, 8 x (max(768, 2048) + max(1536, 2048)) + 2048 elements per token.
    let qwen = facts("qwen3-30b-a3b");
    assert_eq!(
        engine::vllm_activation::moe_workspace_bytes_per_token(&qwen, 1).unwrap(),
        (8 * (2048 + 2048) + 2048) * 2
    );
}

#[test]
fn the_fitted_constants_are_their_records_figures() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let data: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("docs/data/engine-logs.json")).unwrap(),
    )
    .unwrap();
    let record = |id: &str| {
        data["records"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .unwrap()
            .clone()
    };
    let non_torch = record("vllm-10517-llama31-8b-rtx3090-len20000")["logged"]["non_torch_gib"]
        .as_f64()
        .unwrap();
    assert_eq!(
        engine::vllm_non_torch_bytes(),
        (non_torch * 1000.0).round() as u64 * GIB / 1000
    );
    // The sampler's bytes per logit: the logged activation peak of a 4096-token profile run
    // of Qwen2.5-7B (256 sequences x 152,064 logits), less the hidden rows it holds.
    let act = record("vllm-13882-qwen25-7b-rtx4060-8gb")["logged"]["activation_peak_gib"]
        .as_f64()
        .unwrap();
    let qwen = facts("qwen2.5-7b");
    let hidden_rows = (4096 + 256) * qwen.hidden_size * 2;
    let forward = 4096 * engine::vllm_forward_bytes_per_token(&qwen, 1).unwrap();
    let peak = act * GIB as f64;
    assert!(
        (forward as f64) < peak,
        "the sampler, not the forward pass, sets this peak"
    );
    let fitted = ((peak - hidden_rows as f64) / (256.0 * 152_064.0)).round() as u64;
    assert_eq!(engine::vllm_sampler_bytes_per_logit(), fitted);
}

#[test]
fn rope_scaling_that_extends_the_context_extends_the_engine_context() {
    use jointplan::synth::ModelConfig;
    let mut config = ModelConfig::read(Path::new("models/qwen2.5-7b/config.json")).unwrap();
    config.max_position_embeddings = Some(32_768);
    config.rope_scaling = Some(serde_json::json!({
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32_768
    }));
    let arch = config.architecture().unwrap();
    assert_eq!(arch.trained_context, 131_072);
    // llama3 scaling: the configuration already states the extended length.
    let llama = ModelConfig::read(Path::new("models/llama-3.1-8b/config.json")).unwrap();
    assert_eq!(llama.architecture().unwrap().trained_context, 131_072);
}

#[test]
fn vllm_v0_19_accounts_every_shipped_folder_on_an_h100() {
    // `plan MODEL --engine vllm@0.19` on h100-sxm-80gb: every shipped folder gets the
    // engine's accounting (the budget from the driver's 79.19 GiB, its log lines), or the
    // engine's refusal naming its lever (weights larger than the budget), or, for hybrid
    // recurrent models, the feature that is not modelled.
    use jointplan::study::engine_facts::engine_report;
    use jointplan::synth::DeviceDescription;
    let file = Path::new("models/devices/h100-sxm-80gb.json");
    let h100 = DeviceDescription::read(file).unwrap();
    assert_eq!(
        h100.driver_memory_bytes,
        Some((79.19 * GIB as f64).round() as u64)
    );
    let choice: EngineChoice = "vllm@0.19".parse().unwrap();
    let mut folders: Vec<_> = std::fs::read_dir("models")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("config.json").exists())
        .collect();
    folders.sort();
    assert!(folders.len() >= 12, "{folders:?}");
    for folder in folders {
        let synthesized = ModelSource::folder(&folder)
            .synthesize_on(&h100, file)
            .unwrap();
        let result = engine_report(
            &synthesized.request,
            &synthesized.device,
            &synthesized.policy,
            &choice,
            &EngineArgs::default(),
        );
        match result {
            Ok(report) => {
                let requested = report
                    .budget
                    .iter()
                    .find(|t| t.name == "requested")
                    .unwrap();
                assert_eq!(
                    requested.bytes,
                    (h100.driver_memory_bytes.unwrap() as f64 * 0.9) as u64,
                    "{folder:?}"
                );
                match &report.refusal {
                    Some(refusal) => assert!(
                        refusal.contains("gpu_memory_utilization")
                            && refusal.contains("max_model_len"),
                        "{folder:?}: {refusal}"
                    ),
                    None => {
                        assert!(
                            report.kv_cache_tokens >= report.context_tokens,
                            "{folder:?}"
                        );
                        assert!(report
                            .log
                            .iter()
                            .any(|l| l.line.starts_with("GPU KV cache size: ")));
                    }
                }
            }
            Err(err) => {
                let text = err.to_string();
                assert!(
                    synthesized.request.family.canonical_config["model_type"] == "qwen3_next"
                        && text.contains("recurrent"),
                    "{folder:?}: {text}"
                );
            }
        }
    }
}

#[test]
fn vllm_v0_19_allocates_gpt_oss_mxfp4_experts_as_its_backend_pads_them() {
    // gpt-oss-20b's configuration: 24 layers of 32 routed experts, hidden 2880, expert
    // intermediate 2880, biases on the experts; the rest bf16. Stored per expert (MXFP4:
    // two values a byte, one scale byte per 32): gate-up 5760 x 2880 / 2 + 5760 x 90 +
    // 5760 x 2 (bias), down 2880 x 2880 / 2 + 2880 x 90 + 2880 x 2.
    let oss = facts("gpt-oss-20b");
    let experts = oss.mxfp4_experts.expect("gpt-oss-20b's experts are MXFP4");
    assert_eq!(
        (experts.layers, experts.experts, experts.hidden_size),
        (24, 32, 2880)
    );
    assert_eq!((experts.intermediate_size, experts.bias), (2880, true));
    let stored_per_expert =
        5760 * 2880 / 2 + 5760 * 90 + 5760 * 2 + 2880 * 2880 / 2 + 2880 * 90 + 2880 * 2;
    assert_eq!(experts.stored_bytes, 24 * 32 * stored_per_expert);
    let rest = oss.weights_bytes - experts.stored_bytes;
    // vLLM's gpt_oss.py builds the YaRN cos/sin cache in float32: 4096 x 32 positions x 64.
    assert_eq!(oss.rotary_dtype_bytes, 4);
    let rope = 131_072u64 * 64 * 4;
    let weights = |device: &DeviceFacts, args: &[&str]| {
        let report = account("vllm@0.19", &oss, device, args);
        let term = report.budget.iter().find(|t| t.name == "weights").unwrap();
        (term.bytes, report)
    };
    let mut h100 = device(79.19);
    h100.name = "NVIDIA H100 80GB HBM3".to_owned();
    h100.compute_capability = Some(90);
    // Hopper, TRITON, tensor parallelism 2 (by hand, as in the unit test of the rule):
    // intermediate 1440 -> 1472; packed (1440 -> 1472) x 2944 and (736 -> 768) x 2880; the
    // scales kept (2944 x 90 + 2880 x 46) and swizzled (3072 x 90 + 3072 x 46); float32
    // biases (2944 + 2880) x 4.
    let tp2_per_expert = 1472 * 2944
        + 768 * 2880
        + 2944 * 90
        + 2880 * 46
        + 3072 * 90
        + 3072 * 46
        + (2944 + 2880) * 4;
    let (tp2, report) = weights(&h100, &["max_model_len=8192", "tensor_parallel_size=2"]);
    assert_eq!(tp2, rest / 2 + 24 * 32 * tp2_per_expert + rope);
    assert!(report
        .log
        .iter()
        .any(|l| l.line == "Using 'TRITON' Mxfp4 MoE backend."));
    // 6.99 GiB against the 7.01 logged (the table's row).
    assert_eq!(engine::gib(tp2 as f64), "6.99");
    // One H100: 13.63 GiB, where the failed-startup log of the same sweep at tensor
    // parallelism 1 (docs/engines.md) logged `Model loading took 13.64 GiB`.
    let tp1_per_expert = 1472 * 5760
        + 1472 * 2880
        + 5760 * 90
        + 2880 * 90
        + 5888 * 90
        + 3072 * 90
        + (5760 + 2880) * 4;
    let (tp1, _) = weights(&h100, &["max_model_len=8192"]);
    assert_eq!(tp1, rest + 24 * 32 * tp1_per_expert + rope);
    assert_eq!(engine::gib(tp1 as f64), "13.63");
    // Ampere (an A100, capability 8.0), MARLIN: hidden 2880 -> 3072, intermediate
    // 2880 -> 2944, bf16 biases: 13.70 GiB against the 13.72 logged (the table's row).
    let mut a100 = device(79.25);
    a100.name = "NVIDIA A100-SXM4-80GB".to_owned();
    a100.compute_capability = Some(80);
    let marlin_per_expert = 5888 * 1536 + 5888 * 96 + 5888 * 2 + 3072 * 1472 + 3072 * 92 + 3072 * 2;
    let (a100_weights, _) = weights(&a100, &["max_model_len=8192"]);
    assert_eq!(a100_weights, rest + 24 * 32 * marlin_per_expert + rope);
    assert_eq!(engine::gib(a100_weights as f64), "13.70");
    // A device that states no compute capability keeps the stored bytes, and says why; a
    // GPU below 8.0 is refused as vLLM refuses it; vLLM 0.10 keeps the stored bytes.
    let mut unknown = h100.clone();
    unknown.compute_capability = None;
    let (stored, report) = weights(&unknown, &["max_model_len=8192"]);
    assert_eq!(stored, oss.weights_bytes + rope);
    let rule = &report
        .budget
        .iter()
        .find(|t| t.name == "weights")
        .unwrap()
        .rule;
    assert!(rule.contains("no CUDA compute capability"), "{rule}");
    let mut turing = h100.clone();
    turing.compute_capability = Some(75);
    let choice: EngineChoice = "vllm@0.19".parse().unwrap();
    let err = engine::account(&choice, &oss, &turing, &EngineArgs::default()).unwrap_err();
    assert!(err.to_string().contains("minimum capability 80"), "{err}");
    let (v010, _) = {
        let report = account("vllm@0.10", &oss, &h100, &["max_model_len=8192"]);
        let term = report.budget.iter().find(|t| t.name == "weights").unwrap();
        (term.bytes, report)
    };
    assert_eq!(v010, oss.weights_bytes + rope);
    // A model without MXFP4 experts is untouched (Qwen3-30B-A3B's bf16 experts).
    assert!(facts("qwen3-30b-a3b").mxfp4_experts.is_none());
}
