//! The standard operation contracts of the example models (rules 7) and their
//! CUDA providers.
#![allow(dead_code)]

use jointplan::request::*;

use super::model_fixtures::*;

pub const F16: ElementType = ElementType::F16;
pub const F32: ElementType = ElementType::F32;
pub const NO: AliasPolicy = AliasPolicy::NoAlias;
pub const MAY0: AliasPolicy = AliasPolicy::MayAlias { tensor_index: 0 };
pub const ABSENT: [Presence; 3] = [Presence::Forbidden; 3];
pub const GIB: u64 = 1 << 30;
pub const MIB: u64 = 1 << 20;

/// The capability a provider of `op` on f16 needs.
pub fn cap(op: &str) -> String {
    format!("capability.operation.{op}.f16")
}

/// An unsigned attribute value.
pub fn unsigned(n: u64) -> SemanticValue {
    SemanticValue::Unsigned(n)
}

/// `operation.token_embedding` 1.0: token ids × embedding table → hidden.
pub fn op_token_embedding() -> OperationDescriptor {
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

/// `operation.rms_norm`: hidden × norm weight → hidden.
pub fn op_rms_norm() -> OperationDescriptor {
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

/// `operation.dense_linear`: hidden × weight → features.
pub fn op_dense_linear() -> OperationDescriptor {
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

/// `operation.dense_swiglu`: the SwiGLU feed-forward with packed gate/up.
pub fn op_dense_swiglu() -> OperationDescriptor {
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

/// `operation.residual_add` 1.0: two hidden states → their sum, may alias input 0.
pub fn op_residual_add() -> OperationDescriptor {
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

/// `operation.causal_paged_attention` 2.0 with its KV state as input 8 (read_write).
pub fn op_causal_paged_attention() -> OperationDescriptor {
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

/// `operation.gated_delta_recurrent_attention` 4.0 with conv and delta states (read_write).
pub fn op_gated_delta() -> OperationDescriptor {
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

/// The CUDA (or reference) provider of `op` on `device`, accepting linear storage.
pub fn cuda_provider(
    op: &OperationDescriptor,
    device: &DeviceId,
    suffix: &str,
) -> ProviderDescriptor {
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

/// Adds `op` with its one provider; returns the provider.
pub fn simple(builder: &mut RequestBuilder, op: OperationDescriptor) -> ProviderDescriptor {
    let provider = cuda_provider(&op, &builder.catalog.device.id.clone(), "");
    builder.add_operation(op, vec![provider.clone()]);
    provider
}

/// An invocation scratch workspace of `bytes_per_token` per token.
pub fn scratch_tokens(bytes_per_token: u64) -> WorkspaceRequirement {
    workspace(
        WorkspaceSizeFormula::Tokens { bytes_per_token },
        WorkspaceScope::Invocation,
    )
}

/// An f16 `[tokens, width]` activation.
pub fn activation(tokens: u64, width: u64) -> TensorSpec {
    tensor(&[tokens, width], F16)
}

/// The RMS-norm epsilon 1e-6.
pub fn epsilon() -> SemanticValue {
    SemanticValue::Rational(rational(1, 1_000_000))
}
