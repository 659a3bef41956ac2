//! The buffers vLLM's MXFP4 kernel backends allocate for a routed expert's tensors on one
//! rank of a tensor-parallel group (gpt-oss's checkpoint format), and the work a rank's
//! kernel runs over them (docs/placement.md, "Quantized shards" and "Time across devices").
//!
//! vLLM v0.19.0 picks the fused-MoE backend by the GPU's compute capability (the rule of the
//! engine accounting, [`crate::engine::vllm_mxfp4::Backend::for_capability`]: MARLIN on 8.x,
//! TRITON on 9.x, FlashInfer TRT-LLM on 10.x) and allocates each expert's buffers at the
//! rank's intermediate size (`intermediate_size // tp`, the whole size under expert
//! parallelism) and the hidden size, both rounded up as the backend needs, in the layout
//! its conversion leaves ([`crate::engine::vllm_mxfp4::Backend::expert_buffers`]). The
//! loader copies the rank's blocks into the front of those buffers; the rest stays zeros,
//! allocated all the same and read by the kernel in every step.
//!
//! A set whose devices state no CUDA compute capability (no vLLM MXFP4 backend) keeps the
//! loader's buffers (the even part, or the block-rounded run); a set whose device kinds
//! would pick different backends, or a capability below vLLM's 8.0, cannot take the option.

use crate::engine::vllm_mxfp4::{Backend, ExpertBuffers};
use crate::synth::quantization::Method;
use crate::synth::WeightFormat;

use super::device_set::DeviceSet;
use super::model::{ModelFacts, Rule};
use super::problem::ExpertSplit;
use super::shares::MXFP4_BLOCK;

/// The MXFP4 kernel backend of a set's devices, as far as the placement models it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Padding {
    /// No vLLM MXFP4 backend is known for the set's devices (no CUDA compute capability, or
    /// a model without MXFP4 experts): the loader's buffers.
    #[default]
    Loader,
    /// Every device kind of the set picks this backend.
    Backend(Backend),
    /// The option cannot be served: why (device kinds picking different backends, or a
    /// capability vLLM refuses MXFP4 on).
    Refused(String),
}

/// A CUDA compute capability as vLLM compares it (`90` for `cuda-12.4/sm_90`).
fn capability(runtime: &str) -> Option<u32> {
    let (toolkit, target) = runtime.split_once('/')?;
    if !toolkit.starts_with("cuda") {
        return None;
    }
    target.strip_prefix("sm_")?.parse().ok()
}

/// Whether the model's routed experts are stored in MXFP4.
fn has_mxfp4_experts(facts: &ModelFacts) -> bool {
    matches!(facts.format, WeightFormat::Quantized(s) if s.method == Method::Mxfp4)
        && facts.architecture.experts.is_some()
}

/// The backend every device kind of `set` picks for the MXFP4 experts of `facts`.
pub(super) fn padding_of(facts: &ModelFacts, set: &DeviceSet) -> Padding {
    if !has_mxfp4_experts(facts) {
        return Padding::Loader;
    }
    let mut chosen: Option<(Option<Backend>, &str)> = None;
    for kind in &set.kinds {
        let name = kind.description.name.as_str();
        let backend = match capability(&kind.description.runtime) {
            None => None,
            Some(c) => match Backend::for_capability(c) {
                Ok(b) => Some(b),
                Err(e) => return Padding::Refused(format!("{name}: {e}")),
            },
        };
        match chosen {
            None => chosen = Some((backend, name)),
            Some((other, other_name)) if other != backend => {
                let label =
                    |b: Option<Backend>| b.map_or("none (no CUDA capability)", |b| b.name());
                return Padding::Refused(format!(
                    "the set's devices pick different MXFP4 kernel backends ({other_name}: {}, {name}: {}), which pad the experts' buffers differently; place the model on devices of one GPU generation",
                    label(other),
                    label(backend)
                ));
            }
            Some(_) => {}
        }
    }
    match chosen {
        Some((Some(backend), _)) => Padding::Backend(backend),
        _ => Padding::Loader,
    }
}

/// The intermediate size a rank's fused MoE is built with: `intermediate // degree` under
/// tensor-split experts, the whole size under expert parallelism (vLLM's fused MoE runs at
/// tensor-parallel size 1 within an expert-parallel group).
fn rank_intermediate(intermediate: u64, degree: u64, split: ExpertSplit) -> u64 {
    match split {
        ExpertSplit::Tensor => intermediate / degree.max(1),
        ExpertSplit::Expert => intermediate,
    }
}

/// One expert's buffers at `degree` under `split`, when the backend pads them.
fn buffers(
    facts: &ModelFacts,
    padding: &Padding,
    degree: u64,
    split: ExpertSplit,
) -> Result<Option<ExpertBuffers>, String> {
    let backend = match padding {
        Padding::Loader => return Ok(None),
        Padding::Refused(why) => return Err(why.clone()),
        Padding::Backend(b) => *b,
    };
    let Some(experts) = facts.architecture.experts.filter(|_| degree > 1) else {
        return Ok(None);
    };
    backend
        .expert_buffers(
            facts.architecture.hidden_size,
            rank_intermediate(experts.expert_intermediate_size, degree, split),
        )
        .map(Some)
        .map_err(|e| e.to_string())
}

/// The bytes one rank allocates for the routed-expert tensor `tensor` (held whole by the
/// rank, or its part) at `degree` under `split`: `None` when the backend does not pad it
/// (degree 1, whose bytes are the single-device plan's; no backend; not an MXFP4 expert
/// tensor). `physical` is the part's bytes as loaded (the loader's buffer); the allocation
/// is never smaller.
pub(super) fn allocated(
    facts: &ModelFacts,
    padding: &Padding,
    tensor: usize,
    degree: u64,
    split: ExpertSplit,
    physical: u64,
) -> Result<Option<u64>, String> {
    let t = &facts.tensors[tensor];
    if !matches!(t.rule, Rule::Expert { .. }) || !has_mxfp4_experts(facts) {
        return Ok(None);
    }
    let Some(b) = buffers(facts, padding, degree, split)? else {
        return Ok(None);
    };
    let Some((_, tail)) = t.id.split_once(".experts.") else {
        return Ok(None);
    };
    let per_expert = match tail.split_once('.').map(|(_, name)| name) {
        Some("gate_up") => b.gate_up,
        Some("down") => b.down,
        Some("gate_up.bias") => b.gate_up_bias,
        Some("down.bias") => b.down_bias,
        _ => {
            return Err(format!(
                "{}: an MXFP4 expert tensor vLLM's fused MoE has no buffer for",
                t.id
            ))
        }
    };
    // The group's experts lead the tensor's dimensions.
    let count = t.dims.first().copied().unwrap_or(1);
    let bytes = per_expert
        .checked_mul(count)
        .ok_or_else(|| format!("{}: padded bytes overflow", t.id))?;
    if bytes < physical {
        return Err(format!(
            "{}: the {} backend's buffer of {bytes} bytes is smaller than the {physical} bytes the rank loads",
            t.id,
            match padding {
                Padding::Backend(b) => b.name(),
                _ => "MXFP4",
            }
        ));
    }
    Ok(Some(bytes))
}

/// How much more work than an even share of its experts a rank's kernel runs, when the
/// split or the backend pads the experts' buffers: the product of the rank's buffer sizes
/// (intermediate columns x hidden rows) over its even share's (`intermediate / degree` x
/// hidden under tensor-split experts, the whole expert under expert parallelism). Every rank
/// runs the fused MoE over its whole buffer, zeros included, and a tensor-parallel step
/// waits for the slowest rank: so the fullest rank's buffer times the step. `None`: no
/// padding, the even share (the time model's `1 / degree`).
pub(super) fn expert_work_scale(
    facts: &ModelFacts,
    padding: &Padding,
    degree: u64,
    split: ExpertSplit,
) -> Result<Option<f64>, String> {
    let Some(experts) = facts.architecture.experts.filter(|_| degree > 1) else {
        return Ok(None);
    };
    if !has_mxfp4_experts(facts) {
        return Ok(None);
    }
    let hidden = facts.architecture.hidden_size;
    let even = rank_intermediate(experts.expert_intermediate_size, degree, split);
    let (rows, columns) = match buffers(facts, padding, degree, split)? {
        Some(b) => (b.hidden, b.intermediate),
        None => {
            // The loader's block-rounded run (`⌈blocks / degree⌉` blocks) under an uneven
            // tensor split; otherwise the even share.
            let blocks = experts.expert_intermediate_size / MXFP4_BLOCK;
            let run = match split {
                ExpertSplit::Tensor
                    if experts.expert_intermediate_size % MXFP4_BLOCK == 0
                        && blocks % degree != 0 =>
                {
                    blocks.div_ceil(degree) * MXFP4_BLOCK
                }
                _ => even,
            };
            (hidden, run)
        }
    };
    if (rows, columns) == (hidden, even) || even == 0 || hidden == 0 {
        return Ok(None);
    }
    Ok(Some(
        (rows as f64 * columns as f64) / (hidden as f64 * even as f64),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_are_read_from_cuda_runtimes_only() {
        assert_eq!(capability("cuda-12.4/sm_90"), Some(90));
        assert_eq!(capability("cuda-12.8/sm_100"), Some(100));
        assert_eq!(capability("metal-3.1/apple8"), None);
        assert_eq!(capability("cuda-12.4"), None);
    }

    #[test]
    fn ranks_build_their_moe_at_their_share_or_the_whole() {
        assert_eq!(rank_intermediate(2880, 4, ExpertSplit::Tensor), 720);
        assert_eq!(rank_intermediate(2880, 4, ExpertSplit::Expert), 2880);
    }
}
