//! vLLM's profile run, per modelled version: the activation peak it measures at
//! `max_num_batched_tokens` and the non-torch memory it adds (docs/engines.md, "vLLM").
//!
//! The peak is the larger of the forward pass and the sampler run that follows it:
//! * forward: `max_num_batched_tokens` tokens through the largest block
//!   ([`forward_bytes_per_token`]);
//! * sampler (`_dummy_sampler_run`): logits of `min(max_num_seqs, max_num_batched_tokens)`
//!   rows over the vocabulary, with the profile run's hidden states still held. In 0.6 and
//!   0.10 one fitted figure per logit ([`SAMPLER_BYTES_PER_LOGIT`]); in 0.19 the logits in
//!   the model dtype plus [`SAMPLER_019_EXTRA_MILLIBYTES_PER_LOGIT`] (their float32 copy, the
//!   probabilities, the sampling draws, the top-k/top-p kernel's buffer; less the copy when
//!   the logits are float32 already), and for a mixture of experts the fused-MoE
//!   workspaces (`TritonExperts.workspace_shapes`: `(M, topk, max(N/2, K))`,
//!   `(M, topk, max(N, K))` and the `(M, K)` output), which stay allocated through the
//!   sampler run.

use super::super::facts::ModelFacts;
use super::super::{mul, EngineError, GIB};

/// The non-torch memory vLLM 0.6 and 0.10 measure in the profiling run (CUDA context
/// growth, cuBLAS workspaces, NCCL buffers): 0.35 GiB, the figure vLLM logged for
/// Llama-3.1-8B on an RTX 3090 (docs/data/engine-logs.json, record
/// `vllm-10517-llama31-8b-rtx3090-len20000`), the one record this constant is taken from;
/// the other records test it.
pub const NON_TORCH_BYTES: u64 = 350 * GIB / 1000;

/// vLLM 0.19's "non-torch forward increase memory" on a rank without tensor parallelism
/// (one GPU, or a pipeline stage): 0.25 GiB, the median of the fit half of the v0.19.0
/// records (docs/engines.md; `tests/planner/engine_rules.rs` recomputes it).
pub const NON_TORCH_019_TP1_BYTES: u64 = 250 * GIB / 1000;

/// vLLM 0.19's non-torch memory on a rank of a tensor-parallel group (NCCL and custom
/// all-reduce buffers): 2.07 GiB, the median of the fit half's tensor-parallel records.
pub const NON_TORCH_019_TP_BYTES: u64 = 2070 * GIB / 1000;

/// Bytes per logit element the profiling run's sampler holds at its peak in vLLM 0.6/0.10
/// (logits of `min(max_num_seqs, max_num_batched_tokens)` sequences, their float32 copies,
/// the top-k/top-p sort's values and indices, probabilities): 38, fitted on the one record
/// whose activation peak the sampler sets (docs/data/engine-logs.json,
/// `vllm-13882-qwen25-7b-rtx4060-8gb`: 1.42 GiB at 256 sequences x 152,064 logits, less
/// the hidden rows); the other records test it.
pub const SAMPLER_BYTES_PER_LOGIT: u64 = 38;

/// vLLM 0.19: bytes per logit the sampler run holds beyond the logits themselves (in the
/// model dtype), in thousandths of a byte: 12,860 (12.86 bytes), the median of the fit half
/// of the v0.19.0 records whose peak the sampler sets (docs/engines.md). What it holds
/// (`vllm/v1/sample/sampler.py` and `ops/topk_topp_sampler.py`, v0.19.0): the float32 copy
/// of 16-bit logits, the softmax probabilities and `random_sample`'s exponential draws (4
/// bytes each), and the Triton top-k/top-p kernel's buffer of one row per SM.
pub const SAMPLER_019_EXTRA_MILLIBYTES_PER_LOGIT: u64 = 12_860;

/// The part of [`SAMPLER_019_EXTRA_MILLIBYTES_PER_LOGIT`] that is the logits' float32 copy
/// (`Sampler.forward`, `vllm/v1/sample/sampler.py`, v0.19.0: `logits.to(torch.float32)`),
/// 4 bytes, which float32 logits do not need.
pub const FLOAT32_COPY_MILLIBYTES_PER_LOGIT: u64 = 4_000;

/// The forward pass's activation peak per token on one rank: the residual and hidden
/// streams (2h) plus the largest block's transient tensors, in the model dtype.
/// Attention: q/k/v projection output, attention output, o-projection output. Dense MLP:
/// gate-up output (2I), activation output (I), down-projection output (h). MoE (fused):
/// per routed expert slot gate-up (2Ie), activation (Ie) and output (h).
pub fn forward_bytes_per_token(model: &ModelFacts, tp: u64) -> Result<u64, EngineError> {
    let tp = tp.max(1);
    let h = model.hidden_size;
    let base = 2 * h;
    let q = model.query_heads.div_ceil(tp) * model.head_dim;
    let kv = model.kv_heads.div_ceil(tp) * model.head_dim;
    let attention = base + (q + 2 * kv) + q + h;
    let dense = if model.has_dense_mlp {
        let i = model.intermediate_size.div_ceil(tp);
        base + 3 * i + h
    } else {
        0
    };
    let moe = match model.moe {
        Some(moe) => {
            let ie = moe.expert_intermediate_size.div_ceil(tp);
            let k = moe.experts_per_token;
            let routed = k
                .checked_mul(3 * ie + h)
                .ok_or_else(|| EngineError::Overflow {
                    what: "MoE activation bytes per token".to_owned(),
                })?;
            base + routed
        }
        None => 0,
    };
    mul(
        attention.max(dense).max(moe),
        model.dtype_bytes,
        "activation bytes per token",
    )
}

/// vLLM 0.19's fused-MoE workspaces per token on one rank, in the model dtype:
/// `topk x (max(Ie, h) + max(2 Ie, h)) + h` elements (`TritonExperts.workspace_shapes`,
/// `vllm/model_executor/layers/fused_moe/fused_moe.py`); 0 for a dense model.
pub fn moe_workspace_bytes_per_token(model: &ModelFacts, tp: u64) -> Result<u64, EngineError> {
    let Some(moe) = model.moe else {
        return Ok(0);
    };
    let h = model.hidden_size;
    let ie = moe.expert_intermediate_size.div_ceil(tp.max(1));
    let per_slot = ie.max(h) + (2 * ie).max(h);
    let elements = moe
        .experts_per_token
        .checked_mul(per_slot)
        .and_then(|e| e.checked_add(h))
        .ok_or_else(|| EngineError::Overflow {
            what: "MoE workspace bytes per token".to_owned(),
        })?;
    mul(elements, model.dtype_bytes, "MoE workspace bytes per token")
}

/// The profile run's peak as one version of vLLM measures it.
pub struct Peak {
    /// The activation peak (bytes).
    pub bytes: u64,
    /// The forward term (bytes).
    pub forward: u64,
    /// The sampler term, with the MoE workspaces it runs beside (bytes).
    pub sampler: u64,
    /// The rule, with its figures.
    pub rule: String,
}

/// The activation peak of vLLM `version` ("0.19", "0.10", "0.6") for `model` on one of
/// `tp` ranks, at `batched_tokens` tokens and `max_num_seqs` sequences. `moe_workspaces`:
/// whether the fused-MoE kernel keeps its workspaces (a modular kernel takes them from
/// vLLM's persistent workspace manager, `FusedMoEKernelModularImpl._allocate_buffers`; a
/// monolithic one, such as the MXFP4 `TRITON` and FlashInfer TRT-LLM experts, allocates
/// inside its forward and frees them, `FusedMoEKernelMonolithicImpl`, v0.19.0
/// `vllm/model_executor/layers/fused_moe/modular_kernel.py`).
pub fn peak(
    version: &str,
    model: &ModelFacts,
    tp: u64,
    batched_tokens: u64,
    max_num_seqs: u64,
    moe_workspaces: bool,
) -> Result<Peak, EngineError> {
    let per_token = forward_bytes_per_token(model, tp)?;
    let forward = mul(batched_tokens, per_token, "forward activation peak")?;
    let sampled = max_num_seqs.min(batched_tokens);
    let logits = mul(sampled, model.vocab_size, "sampler logits")?;
    let hidden_row = mul(model.hidden_size, model.dtype_bytes, "sampler hidden rows")?;
    if version == "0.19" {
        let hidden = mul(batched_tokens, hidden_row, "sampler hidden rows")?;
        // Float32 logits are already what `Sampler.forward` converts them to
        // (`logits.to(torch.float32)` returns the same tensor): no float32 copy.
        let copy_milli = if model.dtype_bytes == 4 {
            FLOAT32_COPY_MILLIBYTES_PER_LOGIT
        } else {
            0
        };
        let per_logit_milli = model
            .dtype_bytes
            .checked_mul(1000)
            .and_then(|d| d.checked_add(SAMPLER_019_EXTRA_MILLIBYTES_PER_LOGIT))
            .and_then(|d| d.checked_sub(copy_milli))
            .ok_or_else(|| EngineError::Overflow {
                what: "sampler bytes per logit".to_owned(),
            })?;
        let logits_bytes = mul(logits, per_logit_milli, "sampler peak")? / 1000;
        let workspace_per_token = if moe_workspaces {
            moe_workspace_bytes_per_token(model, tp)?
        } else {
            0
        };
        let workspace = mul(batched_tokens, workspace_per_token, "MoE workspaces")?;
        let sampler = hidden
            .checked_add(logits_bytes)
            .and_then(|s| s.checked_add(workspace))
            .ok_or_else(|| EngineError::Overflow {
                what: "sampler peak".to_owned(),
            })?;
        let rule = format!(
            "profile run (vLLM v0.19.0 gpu_model_runner.py profile_run): max(forward at max_num_batched_tokens {batched_tokens} x {per_token} B/token, sampler: hidden states {batched_tokens} x {hidden_row} B + {sampled} sequences x vocab {} x ({} + {:.3}{}) B{}) (docs/engines.md)",
            model.vocab_size,
            model.dtype_bytes,
            SAMPLER_019_EXTRA_MILLIBYTES_PER_LOGIT as f64 / 1000.0,
            if copy_milli > 0 {
                " - 4, float32 logits need no float32 copy"
            } else {
                ""
            },
            if workspace > 0 {
                format!(" + fused-MoE workspaces {batched_tokens} x {workspace_per_token} B")
            } else if model.moe.is_some() {
                " (a monolithic fused-MoE kernel: no workspaces held)".to_owned()
            } else {
                String::new()
            }
        );
        return Ok(Peak {
            bytes: forward.max(sampler),
            forward,
            sampler,
            rule,
        });
    }
    let sampler = mul(logits, SAMPLER_BYTES_PER_LOGIT, "sampler peak")?.saturating_add(mul(
        batched_tokens + sampled,
        hidden_row,
        "sampler peak",
    )?);
    Ok(Peak {
        bytes: forward.max(sampler),
        forward,
        sampler,
        rule: format!(
            "profile run: max(forward at max_num_batched_tokens {batched_tokens} x {per_token} B/token, sampler at {sampled} sequences x vocab {} x {SAMPLER_BYTES_PER_LOGIT} B + hidden rows) (docs/engines.md)",
            model.vocab_size,
        ),
    })
}

/// The non-torch memory of vLLM `version` on one of `tp` ranks, and its rule.
pub fn non_torch(version: &str, tp: u64) -> (u64, &'static str) {
    match (version, tp > 1) {
        ("0.19", false) => (
            NON_TORCH_019_TP1_BYTES,
            "0.25 GiB without tensor parallelism: the median of the fit half of the vLLM v0.19.0 logs (docs/engines.md)",
        ),
        ("0.19", true) => (
            NON_TORCH_019_TP_BYTES,
            "2.07 GiB on a tensor-parallel rank (NCCL, custom all-reduce): the median of the fit half's tensor-parallel v0.19.0 logs (docs/engines.md)",
        ),
        _ => (
            NON_TORCH_BYTES,
            "0.35 GiB, as logged for Llama-3.1-8B on an RTX 3090 (docs/engines.md)",
        ),
    }
}
