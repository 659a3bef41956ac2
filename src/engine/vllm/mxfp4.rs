//! What vLLM v0.19.0 allocates for a mixture of experts whose routed experts are stored in
//! MXFP4 (gpt-oss): the `Mxfp4MoEMethod` of `vllm/model_executor/layers/quantization/mxfp4.py`
//! picks a kernel backend by GPU generation
//! (`vllm/model_executor/layers/fused_moe/oracle/mxfp4.py` `select_mxfp4_moe_backend`), pads
//! the experts' hidden and intermediate dimensions as that backend needs
//! (`mxfp4_round_up_hidden_size_and_intermediate_size`), and converts the loaded tensors to the
//! backend's layout (`convert_to_mxfp4_moe_kernel_format`), which can pad again and change the
//! biases' dtype. `Model loading took X GiB` measures what is allocated after that conversion,
//! so these bytes, not the checkpoint's, are vLLM's weights term (docs/engines.md, "MXFP4
//! experts").
//!
//! The backends, with vLLM's defaults (no LoRA, no `VLLM_*MXFP4*` environment variable,
//! FlashInfer installed, as in the container of the v0.19.0 logs):
//! * compute capability 9.x (Hopper): `TRITON`, the OpenAI Triton kernels
//!   (`OAITritonMxfp4ExpertsMonolithic`, capability 9.0 to 11.0, and the first of
//!   `_get_priority_backends` that supports the device): the intermediate size is rounded up
//!   to 64; the weights are swizzled into `HopperMXValueLayout`
//!   (`vllm/third_party/triton_kernels/tensor_details/layout_details/hopper_value.py`, both
//!   matrix dimensions of the packed bytes padded to 64) and the scales into
//!   `HopperMXScaleLayout` (`hopper_scale.py`, rows padded to `2 x num_warps 8 x 2 x 8 = 256`,
//!   columns to 2), the checkpoint-layout scale parameters stay registered beside the swizzled
//!   copies, and the biases become float32;
//! * capability 10.x (Blackwell B200/B300): `FLASHINFER_TRTLLM_MXFP4_BF16`: hidden and
//!   intermediate sizes rounded up to 256; the weights and scales are shuffled in place
//!   (same sizes), the biases become float32;
//! * capability 8.x (Ampere, Ada) and 11.x and above (Thor, RTX Blackwell): `MARLIN` (the
//!   Triton kernels stop below 9.0 and at 11.0; FlashInfer's CUTLASS MXFP4 kernel is 9.0
//!   only): intermediate size rounded up to 128, hidden size to 256; the repacked weights and
//!   the e8m0 scales keep their sizes, the biases stay bf16
//!   (`vllm/model_executor/layers/quantization/utils/marlin_utils_fp4.py`
//!   `prepare_moe_mxfp4_layer_for_marlin`);
//! * below 8.0: vLLM refuses the method (`Mxfp4Config.get_min_capability` is 80).
//!
//! Tensor parallelism splits the intermediate size (`intermediate_size // tp` per rank) before
//! the rounding; every rank holds all experts.

use super::super::facts::Mxfp4Experts;
use super::super::{add, mul, Engine, EngineError};

/// The MXFP4 block: 32 values share one e8m0 scale byte; two e2m1 values per byte.
const BLOCK: u64 = 32;

/// The fused-MoE kernel backend vLLM v0.19.0 picks for MXFP4 experts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// OpenAI's Triton kernels with Hopper's swizzled layouts (capability 9.x).
    Triton,
    /// FlashInfer's TensorRT-LLM kernels, bf16 activations (capability 10.x).
    FlashInferTrtllm,
    /// Marlin (capability 8.x, and 11.x and above).
    Marlin,
}

impl Backend {
    /// The backend for a CUDA compute capability written as vLLM compares it (`90` for 9.0),
    /// or vLLM's refusal below 8.0.
    pub fn for_capability(capability: u32) -> Result<Self, EngineError> {
        match capability {
            0..=79 => Err(EngineError::Refused {
                engine: Engine::Vllm,
                message: format!(
                    "the quantization method mxfp4 is not supported for the current GPU: minimum capability 80, current capability {capability} (Mxfp4Config.get_min_capability, vLLM v0.19.0); use a GPU of compute capability 8.0 or above"
                ),
            }),
            90..=99 => Ok(Self::Triton),
            100..=109 => Ok(Self::FlashInferTrtllm),
            _ => Ok(Self::Marlin),
        }
    }

    /// The name vLLM logs (`Using 'TRITON' Mxfp4 MoE backend.`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Triton => "TRITON",
            Self::FlashInferTrtllm => "FLASHINFER_TRTLLM_MXFP4_BF16",
            Self::Marlin => "MARLIN",
        }
    }

    /// `(hidden, intermediate)` multiples the backend rounds up to
    /// (`mxfp4_round_up_hidden_size_and_intermediate_size`); 1 leaves a size as it is.
    fn rounding(self) -> (u64, u64) {
        match self {
            Self::Triton => (1, 64),
            Self::FlashInferTrtllm => (256, 256),
            Self::Marlin => (256, 128),
        }
    }
}

/// The experts' bytes vLLM v0.19.0 holds on one rank, with the rule that gave them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocation {
    /// The backend.
    pub backend: Backend,
    /// Bytes of every MXFP4 expert layer on one rank.
    pub bytes: u64,
    /// How they were counted.
    pub rule: String,
}

/// One expert's buffers on one rank, tensor by tensor, as a backend allocates them (after
/// its conversion to the kernel's layout): what the placement's shards of an MXFP4 expert
/// hold (docs/placement.md, "Quantized shards") and what [`allocation`] sums.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExpertBuffers {
    /// The padded hidden size.
    pub hidden: u64,
    /// The padded intermediate size of the rank.
    pub intermediate: u64,
    /// The fused gate and up projection (`w13_weight` and its scales).
    pub gate_up: u64,
    /// The down projection (`w2_weight` and its scales).
    pub down: u64,
    /// The gate and up bias (`w13_bias`).
    pub gate_up_bias: u64,
    /// The down bias (`w2_bias`).
    pub down_bias: u64,
}

impl Backend {
    /// One expert's buffers on a rank whose share of the intermediate size is
    /// `intermediate` (`intermediate_size // tp`; the whole size under expert parallelism),
    /// for experts of `hidden` input width: both sizes rounded up as the backend needs
    /// (`mxfp4_round_up_hidden_size_and_intermediate_size`), then laid out as its
    /// conversion leaves them (module documentation).
    pub fn expert_buffers(
        self,
        hidden: u64,
        intermediate: u64,
    ) -> Result<ExpertBuffers, EngineError> {
        let (hidden_multiple, intermediate_multiple) = self.rounding();
        let h = round_up(hidden, hidden_multiple);
        let i = round_up(intermediate, intermediate_multiple);
        let what = "MXFP4 expert bytes";
        // create_weights: w13 (E, 2I, H/2) and w2 (E, H, I/2) packed bytes, their scales
        // (E, 2I, H/32) and (E, H, I/32) one byte each, the biases (E, 2I) and (E, H).
        let (gate_up, down, bias_bytes) = match self {
            Backend::Triton => {
                // Hopper swizzle: the packed bytes are transposed to (E, H/2, 2I) and
                // (E, I/2, H), and both matrix dimensions padded to 64; the scales, as
                // (E, 2I, H/32) and (E, H, I/32), get rows padded to 256 and columns to 2,
                // and the checkpoint-layout scales stay registered.
                let w13 = mul(round_up(h / 2, 64), round_up(2 * i, 64), what)?;
                let w2 = mul(round_up(i / 2, 64), round_up(h, 64), what)?;
                let w13_scales = add(
                    mul(2 * i, h / BLOCK, what)?,
                    mul(round_up(2 * i, 256), round_up(h / BLOCK, 2), what)?,
                    what,
                )?;
                let w2_scales = add(
                    mul(h, i / BLOCK, what)?,
                    mul(round_up(h, 256), round_up(i / BLOCK, 2), what)?,
                    what,
                )?;
                (add(w13, w13_scales, what)?, add(w2, w2_scales, what)?, 4)
            }
            Backend::FlashInferTrtllm | Backend::Marlin => {
                let w13 = add(mul(2 * i, h / 2, what)?, mul(2 * i, h / BLOCK, what)?, what)?;
                let w2 = add(mul(h, i / 2, what)?, mul(h, i / BLOCK, what)?, what)?;
                let bias = if self == Backend::Marlin { 2 } else { 4 };
                (w13, w2, bias)
            }
        };
        Ok(ExpertBuffers {
            hidden: h,
            intermediate: i,
            gate_up,
            down,
            gate_up_bias: mul(2 * i, bias_bytes, what)?,
            down_bias: mul(h, bias_bytes, what)?,
        })
    }
}

fn round_up(value: u64, multiple: u64) -> u64 {
    value.div_ceil(multiple) * multiple
}

/// What vLLM v0.19.0 allocates for `experts` on one of `tp` ranks of a GPU of compute
/// `capability` (`90` for 9.0).
pub fn allocation(
    experts: &Mxfp4Experts,
    capability: u32,
    tp: u64,
) -> Result<Allocation, EngineError> {
    let backend = Backend::for_capability(capability)?;
    if !experts.bias && backend != Backend::Marlin {
        // convert_to_mxfp4_moe_kernel_format: `assert w13_bias is not None and w2_bias is
        // not None` in the TRITON and TRT-LLM branches.
        return Err(EngineError::Refused {
            engine: Engine::Vllm,
            message: format!(
                "vLLM v0.19.0's {} MXFP4 backend (compute capability {capability}) needs expert biases (convert_to_mxfp4_moe_kernel_format asserts them) and this model's MXFP4 experts have none; serve it on a GPU that takes MARLIN (compute capability 8.x) or set VLLM_MXFP4_USE_MARLIN=1",
                backend.name()
            ),
        });
    }
    let e = experts.experts;
    let buffers =
        backend.expert_buffers(experts.hidden_size, experts.intermediate_size / tp.max(1))?;
    let (h, i) = (buffers.hidden, buffers.intermediate);
    let what = "MXFP4 expert bytes";
    let bias = if experts.bias {
        add(buffers.gate_up_bias, buffers.down_bias, what)?
    } else {
        0
    };
    let per_expert = add(add(buffers.gate_up, buffers.down, what)?, bias, what)?;
    let bytes = mul(mul(per_expert, e, what)?, experts.layers, what)?;
    let layout = match backend {
        Backend::Triton => format!(
            "packed w13 {}x{} and w2 {}x{} bytes after the Hopper swizzle's padding to 64, scales kept plus swizzled (rows padded to 256), float32 biases",
            round_up(h / 2, 64),
            round_up(2 * i, 64),
            round_up(i / 2, 64),
            round_up(h, 64)
        ),
        Backend::FlashInferTrtllm => {
            "packed weights and e8m0 scales of the padded shapes, float32 biases".to_owned()
        }
        Backend::Marlin => {
            "packed weights and e8m0 scales of the padded shapes, bf16 biases".to_owned()
        }
    };
    let rule = format!(
        "MXFP4 experts as vLLM v0.19.0's {} backend allocates them (compute capability {capability}): {} layers x {e} experts x {per_expert} B, hidden {} -> {h}, intermediate {} / tp {} -> {i}; {layout}",
        backend.name(),
        experts.layers,
        experts.hidden_size,
        experts.intermediate_size,
        tp.max(1)
    );
    Ok(Allocation {
        backend,
        bytes,
        rule,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpt_oss_20b() -> Mxfp4Experts {
        Mxfp4Experts {
            layers: 24,
            experts: 32,
            hidden_size: 2880,
            intermediate_size: 2880,
            bias: true,
            stored_bytes: 0,
        }
    }

    #[test]
    fn backends_follow_the_gpu_generation() {
        assert_eq!(Backend::for_capability(80).unwrap(), Backend::Marlin);
        assert_eq!(Backend::for_capability(89).unwrap(), Backend::Marlin);
        assert_eq!(Backend::for_capability(90).unwrap(), Backend::Triton);
        assert_eq!(
            Backend::for_capability(100).unwrap(),
            Backend::FlashInferTrtllm
        );
        assert_eq!(Backend::for_capability(120).unwrap(), Backend::Marlin);
        let err = Backend::for_capability(75).unwrap_err().to_string();
        assert!(err.contains("minimum capability 80"), "{err}");
    }

    #[test]
    fn marlin_pads_gpt_oss_20b_to_3072_and_2944() {
        // By hand: hidden 2880 -> 3072 (256), intermediate 2880 -> 2944 (128). Per expert:
        // w13 5888 x 1536 B + scales 5888 x 96 + bias 5888 x 2; w2 3072 x 1472 + scales
        // 3072 x 92 + bias 3072 x 2.
        let per_expert = 5888 * 1536 + 5888 * 96 + 5888 * 2 + 3072 * 1472 + 3072 * 92 + 3072 * 2;
        let a = allocation(&gpt_oss_20b(), 80, 1).unwrap();
        assert_eq!(a.backend, Backend::Marlin);
        assert_eq!(a.bytes, 24 * 32 * per_expert);
        assert_eq!(a.bytes, 11_083_579_392);
    }

    #[test]
    fn hopper_triton_pads_the_swizzled_layouts() {
        // tp 2 by hand: intermediate 1440 -> 1472 (64), hidden 2880 stays. Packed w13
        // (H/2 = 1440 -> 1472) x (2I = 2944), w2 (I/2 = 736 -> 768) x 2880; scales kept
        // 2944 x 90 + 2880 x 46, swizzled (2944 -> 3072) x 90 + (2880 -> 3072) x 46;
        // float32 biases (2944 + 2880) x 4.
        let per_expert = 1472 * 2944
            + 768 * 2880
            + (2944 * 90 + 2880 * 46)
            + (3072 * 90 + 3072 * 46)
            + (2944 + 2880) * 4;
        let a = allocation(&gpt_oss_20b(), 90, 2).unwrap();
        assert_eq!(a.backend, Backend::Triton);
        assert_eq!(a.bytes, 24 * 32 * per_expert);
        // tp 1: 2880 needs no rounding to 64; H/2 1440 -> 1472; scale rows 5760 -> 5888
        // and 2880 -> 3072.
        let per_expert = 1472 * 5760
            + 1472 * 2880
            + (5760 * 90 + 2880 * 90)
            + (5888 * 90 + 3072 * 90)
            + (5760 + 2880) * 4;
        assert_eq!(
            allocation(&gpt_oss_20b(), 90, 1).unwrap().bytes,
            24 * 32 * per_expert
        );
    }

    #[test]
    fn experts_without_biases_load_only_on_marlin() {
        let mut plain = gpt_oss_20b();
        plain.bias = false;
        // Marlin: the padded shapes without the biases.
        let per_expert = 5888 * 1536 + 5888 * 96 + 3072 * 1472 + 3072 * 92;
        assert_eq!(
            allocation(&plain, 86, 1).unwrap().bytes,
            24 * 32 * per_expert
        );
        for capability in [90, 100] {
            let err = allocation(&plain, capability, 1).unwrap_err().to_string();
            assert!(err.contains("needs expert biases"), "{err}");
        }
    }

    #[test]
    fn blackwell_trtllm_pads_both_to_256_with_float32_biases() {
        // hidden 2880 -> 3072, intermediate 2880 -> 3072.
        let per_expert = 6144 * 1536 + 6144 * 96 + 3072 * 1536 + 3072 * 96 + (6144 + 3072) * 4;
        let a = allocation(&gpt_oss_20b(), 100, 1).unwrap();
        assert_eq!(a.backend, Backend::FlashInferTrtllm);
        assert_eq!(a.bytes, 24 * 32 * per_expert);
    }
}
