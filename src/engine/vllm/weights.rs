//! vLLM's weights term: the parameters a rank holds as vLLM allocates them (MXFP4 experts
//! padded for their kernels in 0.19), and the model as `dtype=float32` loads it.

use super::super::facts::{DeviceFacts, ModelFacts};
use super::super::{Engine, EngineError};
use super::mxfp4;

/// The weights term on one of `tp` ranks: the parameters as stored (`/ tp`), except that
/// vLLM 0.19 allocates MXFP4 experts as its kernel backend for the device's compute
/// capability needs ([`mxfp4::allocation`]); plus the rotary cache `rope`. Returns the bytes,
/// the experts' part of the rule, and the MXFP4 backend when one was modelled.
pub(super) fn weights_term(
    version: &str,
    model: &ModelFacts,
    device: &DeviceFacts,
    tp: u64,
    rope: u64,
) -> Result<(u64, String, Option<mxfp4::Backend>), EngineError> {
    let Some(experts) = model.mxfp4_experts.filter(|_| version == "0.19") else {
        return Ok((model.weights_bytes / tp + rope, String::new(), None));
    };
    let Some(capability) = device.compute_capability else {
        return Ok((
            model.weights_bytes / tp + rope,
            " (the MXFP4 experts as stored: the device states no CUDA compute capability, by which vLLM picks the MXFP4 kernels that pad them)".to_owned(),
            None,
        ));
    };
    let allocation = mxfp4::allocation(&experts, capability, tp)?;
    let rest = model
        .weights_bytes
        .checked_sub(experts.stored_bytes)
        .ok_or_else(|| EngineError::Facts {
            what: format!(
                "the MXFP4 experts' {} stored bytes exceed the weights' {}",
                experts.stored_bytes, model.weights_bytes
            ),
        })?;
    let weights = super::super::add(rest / tp, allocation.bytes, "weights")?;
    Ok((
        super::super::add(weights, rope, "weights")?,
        format!(
            " for all but the MXFP4 experts ({rest} B), + {} B: {}",
            allocation.bytes, allocation.rule
        ),
        Some(allocation.backend),
    ))
}

/// `model` as vLLM `version` loads it at `dtype=float32` (`word`, or its alias `float`):
/// a 16-bit checkpoint upcast (`_STR_DTYPE_TO_TORCH_DTYPE`, `vllm/config/model.py`,
/// v0.19.0), weights, rotary cache, activations and an `auto` KV cache at 4 bytes
/// ([`ModelFacts::as_float32`]). Refused under 0.6 and 0.10 (their sampler constant was
/// taken at 16 bits) and for quantized weights: vLLM v0.19.0 refuses float32 for most
/// methods (`vllm/config/vllm.py` checks the method's `get_supported_act_dtypes`: fp8,
/// GPTQ, AWQ, MXFP4, GGUF and ModelOpt take float16 and bfloat16 only), and the float32
/// layout of those that accept it (compressed-tensors, bitsandbytes, torchao) is not
/// modelled.
pub(super) fn float32_facts(
    version: &str,
    word: &str,
    model: &ModelFacts,
) -> Result<ModelFacts, EngineError> {
    if version != "0.19" {
        return Err(EngineError::Unsupported {
            engine: Engine::Vllm,
            feature: format!(
                "dtype={word} under vLLM {version} (modelled for 0.19: the {version} sampler constant was taken from 16-bit logs)"
            ),
        });
    }
    if let Some(format) = &model.quantization {
        return Err(EngineError::Unsupported {
            engine: Engine::Vllm,
            feature: format!(
                "dtype={word} with quantized weights ({format}): vLLM v0.19.0 refuses float32 for fp8, GPTQ, AWQ, MXFP4, GGUF and ModelOpt checkpoints (\"torch.float32 is not supported for quantization method ...\", vllm/config/vllm.py), and the float32 layout of compressed-tensors, bitsandbytes and torchao weights is not modelled; give dtype=auto, float16 or bfloat16"
            ),
        });
    }
    if model.draft.is_some() {
        // vLLM builds the drafter in the target's dtype; its float32 weights, KV cache and
        // proposer buffers are not modelled.
        return Err(EngineError::Unsupported {
            engine: Engine::Vllm,
            feature: format!(
                "dtype={word} with a speculative_config drafter (the drafter would load in float32 too, which is not modelled); drop speculative_config or give dtype=auto, float16 or bfloat16"
            ),
        });
    }
    model.as_float32()
}
