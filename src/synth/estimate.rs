//! Provider resource estimators: value alignment and workspace size formulas of every
//! provider variant, computed from a node's attributes.
//!
//! The figures model the usual kernels: split-k and softmax partials for attention, block
//! tables sized by the context and the page size, gate/up intermediates for SwiGLU,
//! quantized-activation buffers (q8_1: 36 bytes per 32 values) for GGUF matmuls, f32
//! split-k reduction buffers for Marlin, a cuBLAS-style fixed workspace for dense matmuls.

use std::collections::BTreeMap;

use crate::request::{
    AttributeId, ContractVersion, SemanticValue, StorageProfile, StorageRequirement,
    WorkspaceRequirement, WorkspaceScope, WorkspaceSizeFormula,
};

use super::operation::{Kernel, Operation};
use super::SynthError;

/// Version of every synthesized estimator.
pub const ESTIMATOR_VERSION: ContractVersion = ContractVersion::new(1, 0);

/// Alignment of every workspace.
pub const WORKSPACE_ALIGNMENT: u64 = 256;

/// What an estimator returns for one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Estimate {
    /// Alignment of every value offset on the node.
    pub value_alignment_bytes: u64,
    /// Scratch workspace.
    pub scratch: Option<WorkspaceRequirement>,
    /// Binding workspace.
    pub binding: Option<WorkspaceRequirement>,
    /// Persistent workspace.
    pub persistent: Option<WorkspaceRequirement>,
}

/// The facts an estimator reads besides the node's attributes.
pub struct EstimateContext<'a> {
    /// The node's attributes.
    pub attributes: &'a BTreeMap<AttributeId, SemanticValue>,
    /// Bytes per activation element.
    pub element_bytes: u64,
    /// Page size of the device's paged profile.
    pub page_bytes: u64,
    /// KV bytes per token of this node's cache (attention nodes).
    pub kv_bytes_per_token: u64,
    /// The node id, for error messages.
    pub node: &'a str,
}

impl EstimateContext<'_> {
    fn unsigned(&self, name: &str) -> Result<u64, SynthError> {
        match self.attributes.get(name) {
            Some(SemanticValue::Unsigned(v)) => Ok(*v),
            _ => Err(SynthError::Internal(format!(
                "node {} has no unsigned attribute {name} for its estimator",
                self.node
            ))),
        }
    }
}

fn mul(values: &[u64]) -> Result<u64, SynthError> {
    values
        .iter()
        .try_fold(1u64, |acc, &v| acc.checked_mul(v))
        .ok_or_else(|| SynthError::overflow("workspace size"))
}

fn invocation(size_formula: WorkspaceSizeFormula) -> Option<WorkspaceRequirement> {
    Some(WorkspaceRequirement {
        size_formula,
        alignment_bytes: WORKSPACE_ALIGNMENT,
        scope: WorkspaceScope::Invocation,
        storage: StorageRequirement {
            accepted_profiles: vec![StorageProfile::STATIC_CONTIGUOUS],
        },
    })
}

fn tokens(bytes_per_token: u64) -> Option<WorkspaceRequirement> {
    invocation(WorkspaceSizeFormula::Tokens { bytes_per_token })
}

/// q8_1 activation buffer bytes for `features` values (36 bytes per 32 values).
fn q8_1_bytes(features: u64) -> Result<u64, SynthError> {
    mul(&[features.div_ceil(32), 36])
}

const MIB: u64 = 1 << 20;

/// The estimate of provider `kernel` of `op` for one node.
pub fn estimate(
    op: Operation,
    kernel: Kernel,
    ctx: &EstimateContext<'_>,
) -> Result<Estimate, SynthError> {
    let e = ctx.element_bytes;
    let value_alignment_bytes = match kernel {
        Kernel::Reference => 16,
        Kernel::Gptq
        | Kernel::Gguf
        | Kernel::Fp8
        | Kernel::Int8
        | Kernel::Marlin
        | Kernel::Dequant
        | Kernel::Mxfp4
        | Kernel::Nvfp4 => 256,
        _ => 128,
    };
    let mut out = Estimate {
        value_alignment_bytes,
        scratch: None,
        binding: None,
        persistent: None,
    };
    match op {
        Operation::RmsNorm
        | Operation::HeadRmsNorm
        | Operation::LayerNorm
        | Operation::ResidualAdd => {}
        Operation::TokenEmbedding => {
            if kernel == Kernel::Gguf {
                out.scratch = tokens(mul(&[ctx.unsigned("hidden_size")?, 4])?);
            }
        }
        Operation::DenseLinear | Operation::BiasedDenseLinear => {
            let out_features = ctx.unsigned("out_features")?;
            let in_features = ctx.unsigned("in_features")?;
            out.scratch = match kernel {
                Kernel::Dense => invocation(WorkspaceSizeFormula::Fixed { bytes: 4 * MIB }),
                Kernel::Gptq | Kernel::Marlin | Kernel::Nvfp4 | Kernel::Mxfp4 => {
                    tokens(mul(&[out_features, 4])?)
                }
                Kernel::Gguf => tokens(q8_1_bytes(in_features)?),
                // Dynamic per-token activation quantization: one byte per input value and
                // an f32 scale per token.
                Kernel::Fp8 | Kernel::Int8 => tokens(
                    in_features
                        .checked_add(4)
                        .ok_or_else(|| SynthError::overflow("workspace size"))?,
                ),
                // The weight dequantized to 16 bits once per call.
                Kernel::Dequant => invocation(WorkspaceSizeFormula::Fixed {
                    bytes: mul(&[out_features, in_features, e])?,
                }),
                _ => None,
            };
        }
        Operation::DenseSwiglu
        | Operation::RoutedExpertSwiglu
        | Operation::BiasedRoutedExpertSwiglu => {
            let intermediate = ctx.unsigned("intermediate_size")?;
            let hidden = ctx.unsigned("hidden_size")?;
            let group = match op {
                Operation::RoutedExpertSwiglu | Operation::BiasedRoutedExpertSwiglu => {
                    ctx.unsigned("group_experts")?
                }
                _ => 1,
            };
            let gate_up = mul(&[2, intermediate, e, group])?;
            out.scratch = match kernel {
                Kernel::Gptq | Kernel::Marlin | Kernel::Mxfp4 | Kernel::Nvfp4 => {
                    invocation(WorkspaceSizeFormula::Affine {
                        fixed_bytes: MIB,
                        bytes_per_sequence: 0,
                        bytes_per_token: gate_up,
                    })
                }
                Kernel::Dequant => invocation(WorkspaceSizeFormula::Affine {
                    fixed_bytes: mul(&[3, intermediate, hidden, e, group])?,
                    bytes_per_sequence: 0,
                    bytes_per_token: gate_up,
                }),
                Kernel::Gguf => tokens(
                    gate_up
                        .checked_add(q8_1_bytes(hidden)?)
                        .ok_or_else(|| SynthError::overflow("workspace size"))?,
                ),
                Kernel::Reference => tokens(mul(&[2, intermediate, 4, group])?),
                _ => tokens(gate_up),
            };
        }
        Operation::CausalPagedAttention
        | Operation::CausalPagedSinkAttention
        | Operation::CausalPagedLatentAttention => {
            let heads = ctx.unsigned("query_heads")?;
            let context = ctx.unsigned("maximum_context_tokens")?;
            let features = match op {
                Operation::CausalPagedAttention | Operation::CausalPagedSinkAttention => {
                    ctx.unsigned("query_features")?
                }
                _ => mul(&[heads, ctx.unsigned("v_head_dim")?])?,
            };
            match kernel {
                Kernel::Paged => {
                    // Split-KV partial outputs and log-sum-exps, then one block table per
                    // sequence: a 4-byte page index for every page of the longest context.
                    out.scratch = invocation(WorkspaceSizeFormula::Affine {
                        fixed_bytes: 16 * MIB,
                        bytes_per_sequence: 0,
                        bytes_per_token: mul(&[heads, 8])?,
                    });
                    let tokens_per_page = (ctx.page_bytes / ctx.kv_bytes_per_token.max(1)).max(1);
                    let pages = context.div_ceil(tokens_per_page);
                    out.binding = invocation(WorkspaceSizeFormula::ActualSequences {
                        bytes_per_sequence: mul(&[pages, 4])?
                            .checked_add(64)
                            .ok_or_else(|| SynthError::overflow("block table"))?,
                    });
                }
                Kernel::Contiguous => {
                    out.scratch = invocation(WorkspaceSizeFormula::Affine {
                        fixed_bytes: 8 * MIB,
                        bytes_per_sequence: 0,
                        bytes_per_token: mul(&[heads, 8])?,
                    });
                    out.binding = invocation(WorkspaceSizeFormula::ActualSequences {
                        bytes_per_sequence: 64,
                    });
                }
                _ => {
                    out.scratch = tokens(mul(&[features, 4, 2])?);
                    out.binding = invocation(WorkspaceSizeFormula::ActualSequences {
                        bytes_per_sequence: 64,
                    });
                }
            }
        }
        Operation::GatedDeltaRecurrentAttention => {
            let key = mul(&[ctx.unsigned("key_heads")?, ctx.unsigned("key_head_dim")?])?;
            let value_heads = ctx.unsigned("value_heads")?;
            let value = mul(&[value_heads, ctx.unsigned("value_head_dim")?])?;
            // q, k, v, z and the beta/alpha gates for every token.
            let projected = mul(&[2, key])?
                .checked_add(mul(&[2, value])?)
                .and_then(|v| v.checked_add(2 * value_heads))
                .ok_or_else(|| SynthError::overflow("workspace size"))?;
            if kernel == Kernel::Chunked {
                out.scratch = tokens(mul(&[projected, e])?);
                out.binding = invocation(WorkspaceSizeFormula::ActualSequences {
                    bytes_per_sequence: 64,
                });
            } else {
                out.scratch = tokens(mul(&[projected, 4])?);
            }
        }
        Operation::MoeRouter | Operation::BiasedMoeRouter => {
            if kernel == Kernel::Fused {
                out.scratch = tokens(mul(&[ctx.unsigned("experts")?, 4])?);
            }
        }
        Operation::LastTokenDenseLinear => {
            let hidden = ctx.unsigned("hidden_size")?;
            match kernel {
                Kernel::Dense => {
                    out.scratch = invocation(WorkspaceSizeFormula::Fixed { bytes: 4 * MIB });
                }
                Kernel::Gguf => {
                    out.scratch = invocation(WorkspaceSizeFormula::ActualSequences {
                        bytes_per_sequence: q8_1_bytes(hidden)?,
                    });
                    // Dequantization lookup tables, built once per plan.
                    out.persistent = Some(WorkspaceRequirement {
                        size_formula: WorkspaceSizeFormula::Fixed { bytes: 65536 },
                        alignment_bytes: WORKSPACE_ALIGNMENT,
                        scope: WorkspaceScope::Plan,
                        storage: StorageRequirement {
                            accepted_profiles: vec![StorageProfile::STATIC_CONTIGUOUS],
                        },
                    });
                }
                _ => {}
            }
        }
    }
    Ok(out)
}
