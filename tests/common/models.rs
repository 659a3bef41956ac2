//! The shipped example models (`models/*/request.json`), built in Rust and sealed.
//!
//! Shapes follow the Qwen3 / Qwen3.5 families of domain.md section 7: f16 activations
//! `[tokens, hidden_size]`, token ids `u32`, safetensors dense weights, a CUDA device with
//! linear and 64 KiB paged storage, and the standard operation contracts.
#![allow(dead_code)]

use jointplan::request::*;
use serde_json::json;

use super::model_fixtures::*;

const F16: ElementType = ElementType::F16;
const F32: ElementType = ElementType::F32;
const NO: AliasPolicy = AliasPolicy::NoAlias;
const MAY0: AliasPolicy = AliasPolicy::MayAlias { tensor_index: 0 };
const ABSENT: [Presence; 3] = [Presence::Forbidden; 3];
const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

fn cap(op: &str) -> String {
    format!("capability.operation.{op}.f16")
}

fn unsigned(n: u64) -> SemanticValue {
    SemanticValue::Unsigned(n)
}

fn op_token_embedding() -> OperationDescriptor {
    operation(
        "operation.token_embedding",
        ContractVersion::new(1, 0),
        vec![
            input(&["tokens"], ElementType::U32),
            input(&["vocab_size", "hidden_size"], F16),
        ],
        vec![output(&["tokens", "hidden_size"], F16, NO)],
        schema(&[
            (
                "hidden_size",
                ValueKind::Unsigned,
                AttributeConstraint::None,
            ),
            ("vocab_size", ValueKind::Unsigned, AttributeConstraint::None),
        ]),
        ABSENT,
        &cap("token_embedding"),
    )
}

fn op_rms_norm() -> OperationDescriptor {
    operation(
        "operation.rms_norm",
        ContractVersion::new(1, 0),
        vec![
            input(&["tokens", "hidden_size"], F16),
            input(&["hidden_size"], F16),
        ],
        vec![output(&["tokens", "hidden_size"], F16, NO)],
        schema(&[(
            "epsilon",
            ValueKind::Rational,
            AttributeConstraint::RationalRange {
                minimum: rational(0, 1),
                maximum: rational(1, 100),
            },
        )]),
        ABSENT,
        &cap("rms_norm"),
    )
}

fn op_dense_linear() -> OperationDescriptor {
    operation(
        "operation.dense_linear",
        ContractVersion::new(1, 0),
        vec![
            input(&["rows", "in_features"], F16),
            input(&["out_features", "in_features"], F16),
        ],
        vec![output(&["rows", "out_features"], F16, NO)],
        schema(&[
            (
                "in_features",
                ValueKind::Unsigned,
                AttributeConstraint::None,
            ),
            (
                "out_features",
                ValueKind::Unsigned,
                AttributeConstraint::None,
            ),
        ]),
        [Presence::Optional, Presence::Forbidden, Presence::Forbidden],
        &cap("dense_linear"),
    )
}

fn op_dense_swiglu() -> OperationDescriptor {
    operation(
        "operation.dense_swiglu",
        ContractVersion::new(1, 0),
        vec![
            input(&["tokens", "hidden_size"], F16),
            input(&["2", "intermediate_size", "hidden_size"], F16),
            input(&["hidden_size", "intermediate_size"], F16),
        ],
        vec![output(&["tokens", "hidden_size"], F16, NO)],
        schema(&[
            (
                "hidden_size",
                ValueKind::Unsigned,
                AttributeConstraint::None,
            ),
            (
                "intermediate_size",
                ValueKind::Unsigned,
                AttributeConstraint::None,
            ),
        ]),
        [Presence::Required, Presence::Forbidden, Presence::Forbidden],
        &cap("dense_swiglu"),
    )
}

fn op_residual_add() -> OperationDescriptor {
    operation(
        "operation.residual_add",
        ContractVersion::new(1, 0),
        vec![
            input(&["tokens", "hidden_size"], F16),
            input(&["tokens", "hidden_size"], F16),
        ],
        vec![output(&["tokens", "hidden_size"], F16, MAY0)],
        AttributeSchema::new(),
        ABSENT,
        &cap("residual_add"),
    )
}

fn op_causal_paged_attention() -> OperationDescriptor {
    let u = |name: &'static str| (name, ValueKind::Unsigned, AttributeConstraint::None);
    operation(
        "operation.causal_paged_attention",
        ContractVersion::new(2, 0),
        vec![
            input(&["tokens", "hidden_size"], F16),
            input(&["hidden_size"], F16),
            input(&["query_projection_features", "hidden_size"], F16),
            input(&["kv_features", "hidden_size"], F16),
            input(&["kv_features", "hidden_size"], F16),
            input(&["hidden_size", "query_features"], F16),
            input(&["head_dim"], F16),
            input(&["head_dim"], F16),
            slot(
                &["2", "key_value_heads", "head_dim"],
                F16,
                TensorAccess::ReadWrite,
                NO,
            ),
        ],
        vec![output(&["tokens", "hidden_size"], F16, MAY0)],
        schema(&[
            u("hidden_size"),
            u("query_heads"),
            u("key_value_heads"),
            u("head_dim"),
            u("query_features"),
            u("query_projection_features"),
            u("kv_features"),
            u("rope_dim"),
            u("maximum_context_tokens"),
            u("layer_index"),
            (
                "rope_theta",
                ValueKind::Rational,
                AttributeConstraint::RationalRange {
                    minimum: rational(1, 1),
                    maximum: rational(1_000_000_000, 1),
                },
            ),
            (
                "rope_interleaved",
                ValueKind::Bool,
                AttributeConstraint::None,
            ),
            ("output_gate", ValueKind::Bool, AttributeConstraint::None),
            (
                "causal",
                ValueKind::Bool,
                AttributeConstraint::BoolEquals(true),
            ),
            ("epsilon", ValueKind::Rational, AttributeConstraint::None),
        ]),
        [Presence::Required, Presence::Required, Presence::Forbidden],
        &cap("causal_paged_attention"),
    )
}

fn op_gated_delta() -> OperationDescriptor {
    let u = |name: &'static str| (name, ValueKind::Unsigned, AttributeConstraint::None);
    operation(
        "operation.gated_delta_recurrent_attention",
        ContractVersion::new(4, 0),
        vec![
            input(&["tokens", "hidden_size"], F16),
            input(&["hidden_size"], F16),
            input(&["conv_channels", "hidden_size"], F16),
            input(&["value_features", "hidden_size"], F16),
            input(&["value_heads", "hidden_size"], F16),
            input(&["value_heads", "hidden_size"], F16),
            input(&["conv_channels", "conv_kernel"], F16),
            input(&["value_heads"], F16),
            input(&["value_heads"], F32),
            input(&["value_head_dim"], F16),
            input(&["hidden_size", "value_features"], F16),
            slot(
                &["conv_channels", "conv_history"],
                F16,
                TensorAccess::ReadWrite,
                NO,
            ),
            slot(
                &["value_heads", "key_head_dim", "value_head_dim"],
                F32,
                TensorAccess::ReadWrite,
                NO,
            ),
        ],
        vec![output(&["tokens", "hidden_size"], F16, MAY0)],
        schema(&[
            u("hidden_size"),
            u("key_heads"),
            u("value_heads"),
            u("key_head_dim"),
            u("value_head_dim"),
            u("conv_kernel"),
            u("layer_index"),
            ("epsilon", ValueKind::Rational, AttributeConstraint::None),
        ]),
        [Presence::Required, Presence::Optional, Presence::Forbidden],
        &cap("gated_delta_recurrent_attention"),
    )
}

fn cuda_provider(op: &OperationDescriptor, device: &DeviceId, suffix: &str) -> ProviderDescriptor {
    let short = op.id.as_str().trim_start_matches("operation.");
    let runtime = if device.as_str().contains("cuda") {
        "cuda"
    } else {
        "reference"
    };
    provider(
        op,
        &format!("provider.{runtime}.{short}.f16{suffix}"),
        device,
        &format!("resource-estimator.{runtime}.{short}.f16{suffix}"),
        &[],
    )
}

fn simple(builder: &mut RequestBuilder, op: OperationDescriptor) -> ProviderDescriptor {
    let provider = cuda_provider(&op, &builder.catalog.device.id.clone(), "");
    builder.add_operation(op, vec![provider.clone()]);
    provider
}

fn scratch_tokens(bytes_per_token: u64) -> WorkspaceRequirement {
    workspace(
        WorkspaceSizeFormula::Tokens { bytes_per_token },
        WorkspaceScope::Invocation,
    )
}

fn activation(tokens: u64, width: u64) -> TensorSpec {
    tensor(&[tokens, width], F16)
}

fn epsilon() -> SemanticValue {
    SemanticValue::Rational(rational(1, 1_000_000))
}

/// `models/tiny`: token embedding, RMS norm and the logits projection of a 64-wide toy
/// model (vocabulary 256) on the reference device.
pub fn tiny() -> PlanRequest {
    let (hidden, vocab, tokens) = (64u64, 256u64, 16u64);
    let capabilities: Vec<String> = ["token_embedding", "rms_norm", "dense_linear"]
        .iter()
        .map(|op| cap(op))
        .collect();
    let caps: Vec<&str> = capabilities.iter().map(String::as_str).collect();
    let device = device(
        "device.reference.0",
        DeviceClass::Reference,
        64 * MIB,
        &caps,
    );
    let mut b = RequestBuilder::new(
        "family.tiny.dense",
        json!({"hidden_size": hidden, "vocab_size": vocab, "rms_norm_eps": 1e-6, "tie_word_embeddings": false}),
        "weight-format.safetensors.dense",
        "weight-layout.dense",
        device,
        policy("runtime-policy.tiny", 32 * MIB, MIB, 4, 512),
    );
    let embed = simple(&mut b, op_token_embedding());
    let norm = simple(&mut b, op_rms_norm());
    let linear = simple(&mut b, op_dense_linear());
    b.program_input("value.input.token_ids", tensor(&[tokens], ElementType::U32));
    b.dense_weight(
        "weight.embed_tokens",
        "value.weight.embed_tokens",
        &[vocab, hidden],
        F16,
        "model.embed_tokens.weight",
    );
    b.dense_weight(
        "weight.final_norm",
        "value.weight.final_norm",
        &[hidden],
        F16,
        "model.norm.weight",
    );
    b.dense_weight(
        "weight.lm_head",
        "value.weight.lm_head",
        &[vocab, hidden],
        F16,
        "lm_head.weight",
    );
    b.node(
        "block.embedding",
        "node.embedding",
        "operation.token_embedding",
        attrs(&[
            ("hidden_size", unsigned(hidden)),
            ("vocab_size", unsigned(vocab)),
        ]),
        Some("value.input.token_ids"),
        &["value.input.token_ids", "value.weight.embed_tokens"],
        &[(
            "value.hidden.embedding",
            activation(tokens, hidden),
            Placement::Own,
        )],
        None,
        vec![estimate(&embed, None, None, None)],
    );
    b.node(
        "block.head",
        "node.final_norm",
        "operation.rms_norm",
        attrs(&[("epsilon", epsilon())]),
        Some("value.hidden.embedding"),
        &["value.hidden.embedding", "value.weight.final_norm"],
        &[(
            "value.output.final_hidden",
            activation(tokens, hidden),
            Placement::Own,
        )],
        None,
        vec![estimate(&norm, None, None, None)],
    );
    b.node(
        "block.head",
        "node.logits",
        "operation.dense_linear",
        attrs(&[
            ("in_features", unsigned(hidden)),
            ("out_features", unsigned(vocab)),
        ]),
        Some("value.output.final_hidden"),
        &["value.output.final_hidden", "value.weight.lm_head"],
        &[(
            "value.output.logits",
            activation(tokens, vocab),
            Placement::Own,
        )],
        Some("provider.reference.dense_linear.f16"),
        vec![estimate(&linear, None, None, None)],
    );
    b.program_output("value.output.logits");
    b.finish()
}

struct DecoderShape {
    hidden: u64,
    heads: u64,
    kv_heads: u64,
    head_dim: u64,
    intermediate: u64,
    vocab: u64,
    tokens: u64,
    context: u64,
}

const QWEN3_SMALL: DecoderShape = DecoderShape {
    hidden: 1024,
    heads: 16,
    kv_heads: 8,
    head_dim: 128,
    intermediate: 3072,
    vocab: 151_936,
    tokens: 16,
    context: 32_768,
};

fn cuda_device(ops: &[&str]) -> Device {
    let mut capabilities: Vec<String> = ops.iter().map(|op| cap(op)).collect();
    capabilities.push("capability.device.reusable_execution.v1".to_owned());
    let caps: Vec<&str> = capabilities.iter().map(String::as_str).collect();
    device("device.cuda.0", DeviceClass::Accelerator, 24 * GIB, &caps)
}

fn embedding_and_head_weights(b: &mut RequestBuilder, s: &DecoderShape) {
    b.program_input(
        "value.input.token_ids",
        tensor(&[s.tokens], ElementType::U32),
    );
    b.dense_weight(
        "weight.embed_tokens",
        "value.weight.embed_tokens",
        &[s.vocab, s.hidden],
        F16,
        "model.embed_tokens.weight",
    );
    b.dense_weight(
        "weight.final_norm",
        "value.weight.final_norm",
        &[s.hidden],
        F16,
        "model.norm.weight",
    );
    b.dense_weight(
        "weight.lm_head",
        "value.weight.lm_head",
        &[s.vocab, s.hidden],
        F16,
        "lm_head.weight",
    );
}

fn embedding_node(b: &mut RequestBuilder, s: &DecoderShape, embed: &ProviderDescriptor) {
    b.node(
        "block.embedding",
        "node.embedding",
        "operation.token_embedding",
        attrs(&[
            ("hidden_size", unsigned(s.hidden)),
            ("vocab_size", unsigned(s.vocab)),
        ]),
        Some("value.input.token_ids"),
        &["value.input.token_ids", "value.weight.embed_tokens"],
        &[(
            "value.hidden.embedding",
            activation(s.tokens, s.hidden),
            Placement::Own,
        )],
        None,
        vec![estimate(embed, None, None, None)],
    );
}

fn head_nodes(
    b: &mut RequestBuilder,
    s: &DecoderShape,
    last: &'static str,
    norm: &ProviderDescriptor,
    linear: &ProviderDescriptor,
) {
    b.node(
        "block.head",
        "node.final_norm",
        "operation.rms_norm",
        attrs(&[("epsilon", epsilon())]),
        Some(last),
        &[last, "value.weight.final_norm"],
        &[(
            "value.output.final_hidden",
            activation(s.tokens, s.hidden),
            Placement::Own,
        )],
        None,
        vec![estimate(norm, None, None, None)],
    );
    b.node(
        "block.head",
        "node.logits",
        "operation.dense_linear",
        attrs(&[
            ("in_features", unsigned(s.hidden)),
            ("out_features", unsigned(s.vocab)),
        ]),
        Some("value.output.final_hidden"),
        &["value.output.final_hidden", "value.weight.lm_head"],
        &[(
            "value.output.logits",
            activation(s.tokens, s.vocab),
            Placement::Own,
        )],
        None,
        vec![estimate(
            linear,
            Some(scratch_tokens(s.vocab * 4)),
            None,
            None,
        )],
    );
    b.program_output("value.output.logits");
}

/// The post-attention norm, SwiGLU feed-forward and in-place residual add of layer `i`,
/// reading the mixer output `mixed` (`value.layer.{i}.attention`).
fn feed_forward_nodes(
    b: &mut RequestBuilder,
    s: &DecoderShape,
    i: usize,
    norm: &ProviderDescriptor,
    swiglu: &ProviderDescriptor,
    residual: &ProviderDescriptor,
) {
    let l = |name: &str| format!("value.weight.layer.{i}.{name}");
    let w = |name: &str| format!("weight.layer.{i}.{name}");
    let hf = |name: &str| format!("model.layers.{i}.{name}.weight");
    b.dense_weight(
        &w("post_attention_norm"),
        &l("post_attention_norm"),
        &[s.hidden],
        F16,
        &hf("post_attention_layernorm"),
    );
    b.dense_weight(
        &w("mlp.gate_up"),
        &l("mlp.gate_up"),
        &[2, s.intermediate, s.hidden],
        F16,
        &hf("mlp.gate_up_proj"),
    );
    b.dense_weight(
        &w("mlp.down"),
        &l("mlp.down"),
        &[s.hidden, s.intermediate],
        F16,
        &hf("mlp.down_proj"),
    );
    let mixed: &'static str = leak(format!("value.layer.{i}.attention"));
    let normed: &'static str = leak(format!("value.layer.{i}.post_attention_norm"));
    let mlp: &'static str = leak(format!("value.layer.{i}.mlp"));
    let out: &'static str = leak(format!("value.layer.{i}.output"));
    let block = format!("block.layer.{i}");
    b.node(
        &block,
        &format!("node.layer.{i}.post_attention_norm"),
        "operation.rms_norm",
        attrs(&[("epsilon", epsilon())]),
        Some(mixed),
        &[mixed, &l("post_attention_norm")],
        &[(normed, activation(s.tokens, s.hidden), Placement::Own)],
        None,
        vec![estimate(norm, None, None, None)],
    );
    b.node(
        &block,
        &format!("node.layer.{i}.feed_forward"),
        "operation.dense_swiglu",
        attrs(&[
            ("hidden_size", unsigned(s.hidden)),
            ("intermediate_size", unsigned(s.intermediate)),
        ]),
        Some(normed),
        &[normed, &l("mlp.gate_up"), &l("mlp.down")],
        &[(mlp, activation(s.tokens, s.hidden), Placement::Own)],
        None,
        vec![estimate(
            swiglu,
            Some(scratch_tokens(2 * s.intermediate * 2)),
            None,
            None,
        )],
    );
    b.node(
        &block,
        &format!("node.layer.{i}.residual"),
        "operation.residual_add",
        attrs(&[]),
        Some(mixed),
        &[mixed, mlp],
        &[(
            out,
            activation(s.tokens, s.hidden),
            Placement::InPlaceOf(mixed),
        )],
        None,
        vec![estimate(residual, None, None, None)],
    );
}

fn leak(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

/// `models/decoder-2layer`: a two-layer Qwen3-style decoder whose layers keep their
/// token-scaled KV states side by side in one paged KV-cache resource. Layer 0 prefers the
/// paged attention kernel; layer 1 prefers a flash kernel that only reads a contiguous KV
/// cache, so it loses to the storage conflict on `resource/state/kv-cache` and falls back,
/// with `storage_incompatible` evidence.
pub fn decoder_2layer() -> PlanRequest {
    let s = &QWEN3_SMALL;
    let ops = [
        "token_embedding",
        "rms_norm",
        "dense_linear",
        "dense_swiglu",
        "residual_add",
        "causal_paged_attention",
    ];
    let device = cuda_device(&ops);
    let device_id = device.id.clone();
    let mut policy = policy("runtime-policy.cuda.decoder", 22 * GIB, GIB, 8, 2048);
    policy.reusable_execution = Some(ReusableExecutionPolicy {
        maximum_reusable_lanes: 2,
        buckets: [(1, 1), (2, 2), (4, 4)]
            .into_iter()
            .map(|(seq, tok)| ReusableExecutionBucket {
                bucket_id: String::new(),
                class_id: id("uniform-query"),
                capacity: BucketCapacity {
                    maximum_sequences: seq,
                    maximum_tokens: tok,
                    maximum_pages: 1,
                },
            })
            .collect(),
    });
    let mut b = RequestBuilder::new(
        "family.qwen3.dense",
        json!({
            "architectures": ["Qwen3ForCausalLM"],
            "head_dim": s.head_dim, "hidden_size": s.hidden, "intermediate_size": s.intermediate,
            "max_position_embeddings": s.context, "num_attention_heads": s.heads,
            "num_hidden_layers": 2, "num_key_value_heads": s.kv_heads, "rms_norm_eps": 1e-6,
            "rope_theta": 1_000_000, "vocab_size": s.vocab
        }),
        "weight-format.safetensors.dense",
        "weight-layout.qwen3.dense.packed_gate_up",
        device,
        policy,
    );
    let embed = simple(&mut b, op_token_embedding());
    let norm = simple(&mut b, op_rms_norm());
    let linear = simple(&mut b, op_dense_linear());
    let swiglu = simple(&mut b, op_dense_swiglu());
    let residual = simple(&mut b, op_residual_add());
    let attention_op = op_causal_paged_attention();
    let paged_attention = provider(
        &attention_op,
        "provider.cuda.causal_paged_attention.f16",
        &device_id,
        "resource-estimator.cuda.causal_paged_attention.f16",
        &[(ValueRole::Input, 8, vec![paged_64k()])],
    );
    let flash_attention = provider(
        &attention_op,
        "provider.cuda.causal_paged_attention.f16.flash",
        &device_id,
        "resource-estimator.cuda.causal_paged_attention.f16.flash",
        &[(ValueRole::Input, 8, vec![LINEAR])],
    );
    b.add_operation(
        attention_op,
        vec![paged_attention.clone(), flash_attention.clone()],
    );

    embedding_and_head_weights(&mut b, s);
    embedding_node(&mut b, s, &embed);
    let kv_bytes = 2 * s.kv_heads * s.head_dim * 2;
    let (q_features, kv_features) = (s.heads * s.head_dim, s.kv_heads * s.head_dim);
    for i in 0..2usize {
        b.state(
            &format!("state.layer.{i}.kv"),
            &format!("value.state.layer.{i}.kv"),
            tensor(&[2, s.kv_heads, s.head_dim], F16),
            StateLifetime::Sequence,
            // Both layers' K and V of one token sit in one token slot of the shared cache.
            StateCapacityDemand::TokenScaled {
                bytes_per_token: 2 * kv_bytes,
                maximum_tokens: s.context,
            },
            StateInitialization::None,
            "resource/state/kv-cache",
            i as u64 * kv_bytes,
        );
        let l = |name: &str| format!("value.weight.layer.{i}.{name}");
        let w = |name: &str| format!("weight.layer.{i}.{name}");
        let hf = |name: &str| format!("model.layers.{i}.{name}.weight");
        b.dense_weight(
            &w("input_norm"),
            &l("input_norm"),
            &[s.hidden],
            F16,
            &hf("input_layernorm"),
        );
        b.dense_weight(
            &w("attention.q_proj"),
            &l("attention.q_proj"),
            &[q_features, s.hidden],
            F16,
            &hf("self_attn.q_proj"),
        );
        b.dense_weight(
            &w("attention.k_proj"),
            &l("attention.k_proj"),
            &[kv_features, s.hidden],
            F16,
            &hf("self_attn.k_proj"),
        );
        b.dense_weight(
            &w("attention.v_proj"),
            &l("attention.v_proj"),
            &[kv_features, s.hidden],
            F16,
            &hf("self_attn.v_proj"),
        );
        b.dense_weight(
            &w("attention.o_proj"),
            &l("attention.o_proj"),
            &[s.hidden, q_features],
            F16,
            &hf("self_attn.o_proj"),
        );
        b.dense_weight(
            &w("attention.q_norm"),
            &l("attention.q_norm"),
            &[s.head_dim],
            F16,
            &hf("self_attn.q_norm"),
        );
        b.dense_weight(
            &w("attention.k_norm"),
            &l("attention.k_norm"),
            &[s.head_dim],
            F16,
            &hf("self_attn.k_norm"),
        );
        let hidden_in: &'static str = if i == 0 {
            "value.hidden.embedding"
        } else {
            leak(format!("value.layer.{}.output", i - 1))
        };
        let names = [
            hidden_in.to_owned(),
            l("input_norm"),
            l("attention.q_proj"),
            l("attention.k_proj"),
            l("attention.v_proj"),
            l("attention.o_proj"),
            l("attention.q_norm"),
            l("attention.k_norm"),
            format!("value.state.layer.{i}.kv"),
        ];
        let inputs: Vec<&str> = names.iter().map(String::as_str).collect();
        let attention_workspaces = |p: &ProviderDescriptor, scratch_per_token: u64| {
            estimate(
                p,
                Some(workspace(
                    WorkspaceSizeFormula::Affine {
                        fixed_bytes: MIB,
                        bytes_per_sequence: 0,
                        bytes_per_token: scratch_per_token,
                    },
                    WorkspaceScope::Invocation,
                )),
                Some(workspace(
                    WorkspaceSizeFormula::ActualSequences {
                        bytes_per_sequence: 256,
                    },
                    WorkspaceScope::Invocation,
                )),
                None,
            )
        };
        let preferred = if i == 0 {
            "provider.cuda.causal_paged_attention.f16"
        } else {
            "provider.cuda.causal_paged_attention.f16.flash"
        };
        b.node(
            &format!("block.layer.{i}"),
            &format!("node.layer.{i}.attention"),
            "operation.causal_paged_attention",
            attrs(&[
                ("hidden_size", unsigned(s.hidden)),
                ("query_heads", unsigned(s.heads)),
                ("key_value_heads", unsigned(s.kv_heads)),
                ("head_dim", unsigned(s.head_dim)),
                ("query_features", unsigned(q_features)),
                ("query_projection_features", unsigned(q_features)),
                ("kv_features", unsigned(kv_features)),
                ("rope_dim", unsigned(s.head_dim)),
                ("maximum_context_tokens", unsigned(s.context)),
                ("layer_index", unsigned(i as u64)),
                (
                    "rope_theta",
                    SemanticValue::Rational(rational(1_000_000, 1)),
                ),
                ("rope_interleaved", SemanticValue::Bool(false)),
                ("output_gate", SemanticValue::Bool(false)),
                ("causal", SemanticValue::Bool(true)),
                ("epsilon", epsilon()),
            ]),
            Some(hidden_in),
            &inputs,
            &[(
                leak(format!("value.layer.{i}.attention")),
                activation(s.tokens, s.hidden),
                Placement::Own,
            )],
            Some(preferred),
            vec![
                attention_workspaces(&paged_attention, s.heads * 64),
                attention_workspaces(&flash_attention, s.heads * 128),
            ],
        );
        feed_forward_nodes(&mut b, s, i, &norm, &swiglu, &residual);
    }
    head_nodes(&mut b, s, "value.layer.1.output", &norm, &linear);
    b.finish()
}

/// `models/hybrid-block`: one Qwen3.5-style hybrid layer: a gated-delta linear attention
/// with a zero-initialised, sequence-lifetime convolution and recurrent state, then the
/// SwiGLU feed-forward whose residual add writes in place of its input (may_alias).
pub fn hybrid_block() -> PlanRequest {
    let s = &QWEN3_SMALL;
    let (key_heads, value_heads, key_dim, value_dim, kernel) = (16u64, 16u64, 128u64, 128u64, 4u64);
    let conv_channels = key_heads * key_dim * 2 + value_heads * value_dim;
    let value_features = value_heads * value_dim;
    let ops = [
        "token_embedding",
        "rms_norm",
        "dense_linear",
        "dense_swiglu",
        "residual_add",
        "gated_delta_recurrent_attention",
    ];
    let device = cuda_device(&ops);
    let mut b = RequestBuilder::new(
        "family.qwen3_5.hybrid",
        json!({
            "architectures": ["Qwen3_5ForCausalLM"],
            "hidden_size": s.hidden, "intermediate_size": s.intermediate,
            "layer_types": ["linear_attention"], "linear_conv_kernel_dim": kernel,
            "linear_key_head_dim": key_dim, "linear_num_key_heads": key_heads,
            "linear_num_value_heads": value_heads, "linear_value_head_dim": value_dim,
            "num_hidden_layers": 1, "rms_norm_eps": 1e-6, "vocab_size": s.vocab
        }),
        "weight-format.safetensors.dense",
        "weight-layout.qwen3_5.dense_hybrid.packed_gate_up",
        device,
        policy("runtime-policy.cuda.hybrid", 22 * GIB, GIB, 8, 2048),
    );
    let embed = simple(&mut b, op_token_embedding());
    let norm = simple(&mut b, op_rms_norm());
    let linear = simple(&mut b, op_dense_linear());
    let swiglu = simple(&mut b, op_dense_swiglu());
    let residual = simple(&mut b, op_residual_add());
    let delta = simple(&mut b, op_gated_delta());
    embedding_and_head_weights(&mut b, s);
    embedding_node(&mut b, s, &embed);
    b.state(
        "state.layer.0.conv",
        "value.state.layer.0.conv",
        tensor(&[conv_channels, kernel - 1], F16),
        StateLifetime::Sequence,
        StateCapacityDemand::FixedPerScope,
        StateInitialization::Zero,
        "resource/state/layer.0.conv",
        0,
    );
    b.state(
        "state.layer.0.delta",
        "value.state.layer.0.delta",
        tensor(&[value_heads, key_dim, value_dim], F32),
        StateLifetime::Sequence,
        StateCapacityDemand::FixedPerScope,
        StateInitialization::Zero,
        "resource/state/layer.0.delta",
        0,
    );
    let l = |name: &str| format!("value.weight.layer.0.{name}");
    let w = |name: &str| format!("weight.layer.0.{name}");
    let hf = |name: &str| format!("model.layers.0.{name}");
    b.dense_weight(
        &w("input_norm"),
        &l("input_norm"),
        &[s.hidden],
        F16,
        &hf("input_layernorm.weight"),
    );
    b.dense_weight(
        &w("linear_attn.in_proj_qkv"),
        &l("linear_attn.in_proj_qkv"),
        &[conv_channels, s.hidden],
        F16,
        &hf("linear_attn.in_proj_qkv.weight"),
    );
    b.dense_weight(
        &w("linear_attn.in_proj_z"),
        &l("linear_attn.in_proj_z"),
        &[value_features, s.hidden],
        F16,
        &hf("linear_attn.in_proj_z.weight"),
    );
    b.dense_weight(
        &w("linear_attn.in_proj_b"),
        &l("linear_attn.in_proj_b"),
        &[value_heads, s.hidden],
        F16,
        &hf("linear_attn.in_proj_b.weight"),
    );
    b.dense_weight(
        &w("linear_attn.in_proj_a"),
        &l("linear_attn.in_proj_a"),
        &[value_heads, s.hidden],
        F16,
        &hf("linear_attn.in_proj_a.weight"),
    );
    b.dense_weight(
        &w("linear_attn.conv1d"),
        &l("linear_attn.conv1d"),
        &[conv_channels, kernel],
        F16,
        &hf("linear_attn.conv1d.weight"),
    );
    b.dense_weight(
        &w("linear_attn.dt_bias"),
        &l("linear_attn.dt_bias"),
        &[value_heads],
        F16,
        &hf("linear_attn.dt_bias"),
    );
    b.dense_weight(
        &w("linear_attn.a_log"),
        &l("linear_attn.a_log"),
        &[value_heads],
        F32,
        &hf("linear_attn.A_log"),
    );
    b.dense_weight(
        &w("linear_attn.norm"),
        &l("linear_attn.norm"),
        &[value_dim],
        F16,
        &hf("linear_attn.norm.weight"),
    );
    b.dense_weight(
        &w("linear_attn.out_proj"),
        &l("linear_attn.out_proj"),
        &[s.hidden, value_features],
        F16,
        &hf("linear_attn.out_proj.weight"),
    );
    let names = [
        "value.hidden.embedding".to_owned(),
        l("input_norm"),
        l("linear_attn.in_proj_qkv"),
        l("linear_attn.in_proj_z"),
        l("linear_attn.in_proj_b"),
        l("linear_attn.in_proj_a"),
        l("linear_attn.conv1d"),
        l("linear_attn.dt_bias"),
        l("linear_attn.a_log"),
        l("linear_attn.norm"),
        l("linear_attn.out_proj"),
        "value.state.layer.0.conv".to_owned(),
        "value.state.layer.0.delta".to_owned(),
    ];
    let inputs: Vec<&str> = names.iter().map(String::as_str).collect();
    b.node(
        "block.layer.0",
        "node.layer.0.attention",
        "operation.gated_delta_recurrent_attention",
        attrs(&[
            ("hidden_size", unsigned(s.hidden)),
            ("key_heads", unsigned(key_heads)),
            ("value_heads", unsigned(value_heads)),
            ("key_head_dim", unsigned(key_dim)),
            ("value_head_dim", unsigned(value_dim)),
            ("conv_kernel", unsigned(kernel)),
            ("layer_index", unsigned(0)),
            ("epsilon", epsilon()),
        ]),
        Some("value.hidden.embedding"),
        &inputs,
        &[(
            "value.layer.0.attention",
            activation(s.tokens, s.hidden),
            Placement::Own,
        )],
        Some("provider.cuda.gated_delta_recurrent_attention.f16"),
        vec![estimate(
            &delta,
            Some(workspace(
                WorkspaceSizeFormula::Affine {
                    fixed_bytes: 2 * MIB,
                    bytes_per_sequence: 0,
                    bytes_per_token: conv_channels * 4,
                },
                WorkspaceScope::Invocation,
            )),
            None,
            None,
        )],
    );
    feed_forward_nodes(&mut b, s, 0, &norm, &swiglu, &residual);
    head_nodes(&mut b, s, "value.layer.0.output", &norm, &linear);
    b.finish()
}

/// Every shipped model, by folder name.
pub fn shipped_models() -> Vec<(&'static str, PlanRequest)> {
    vec![
        ("tiny", tiny()),
        ("decoder-2layer", decoder_2layer()),
        ("hybrid-block", hybrid_block()),
    ]
}
