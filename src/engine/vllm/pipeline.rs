//! vLLM's pipeline parallelism (`pipeline_parallel_size`): each stage holds a contiguous
//! share of the decoder layers, profiles its own peak and sizes its own KV cache; the engine
//! core then takes the smallest block count of all stages (docs/engines.md, "Pipeline
//! parallelism").
//!
//! Sources, vLLM v0.19.0 (the same in v0.10.1 where noted):
//! * the split: `vllm/distributed/utils.py` `get_pp_indices` (v0.10.1 alike), with
//!   `VLLM_PP_LAYER_PARTITION` unset: `layers // stages` each, the remainder one more each
//!   on the stages before the last, from the second-to-last backwards;
//! * the weights: `vllm/model_executor/models/llama.py` (and `qwen2.py`): the embedding on
//!   the first stage, the final norm and `lm_head` on the last, `make_layers` only the
//!   stage's own layers; a tied head is refused (the model files differ: `llama.py` keeps
//!   the embedding on the first and last stages, `gemma2.py` on every stage);
//! * the profile run: `vllm/v1/worker/gpu_model_runner.py` `profile_run` runs the sampler
//!   only on the last stage (`get_pp_group().is_last_rank`); `_dummy_run` on every stage but
//!   the first allocates the received intermediate tensors, `hidden_states` and `residual`
//!   of `max_num_tokens x hidden_size` in the model dtype, which stay allocated (v0.10.1
//!   alike);
//! * the KV cache: `vllm/v1/core/kv_cache_utils.py` `get_kv_cache_configs` groups the whole
//!   model's layers (a kind's `i`-th group takes its layers `i::groups`), projects the groups
//!   on each stage's layers, sizes each stage's blocks by its largest projected group
//!   (`get_kv_cache_config_from_groups`), and gives every stage the smallest block count
//!   (`vllm/v1/engine/core.py` `_initialize_kv_caches` passes each worker's available
//!   memory). v0.10.1 groups each worker's own layers (`unify_kv_cache_configs`), the same
//!   for a model of one attention kind; a model mixing kinds is refused there.

use super::super::facts::{CacheLayer, ModelFacts};
use super::super::{add, mul, Engine, EngineError};

/// The decoder layers of each of `stages` stages as vLLM's `get_pp_indices` splits
/// `layers` (with `VLLM_PP_LAYER_PARTITION` unset): `(start, end)` per stage, end excluded.
/// Refused when a stage would hold no layer.
pub fn layer_ranges(layers: u64, stages: u64) -> Result<Vec<(u64, u64)>, EngineError> {
    if stages == 0 || stages > layers {
        return Err(EngineError::BadValue {
            key: "pipeline_parallel_size".to_owned(),
            value: stages.to_string(),
            expected: format!(
                "expected 1 to the model's {layers} decoder layers: vLLM's get_pp_indices gives each stage layers // stages, so more stages than layers leaves a stage with none"
            ),
        });
    }
    let mut partitions = vec![layers / stages; stages as usize];
    let remaining = (layers % stages) as usize;
    // `for i in range(2, remaining_layers + 2): partitions[-i] += 1`
    for i in 2..remaining + 2 {
        partitions[stages as usize - i] += 1;
    }
    let mut start = 0;
    Ok(partitions
        .into_iter()
        .map(|count| {
            let range = (start, start + count);
            start += count;
            range
        })
        .collect())
}

/// Why vLLM `version`'s pipeline parallelism is not modelled for `model`, if it is not.
pub fn check(version: &str, model: &ModelFacts, speculative: bool) -> Result<(), EngineError> {
    let unsupported = |feature: String| EngineError::Unsupported {
        engine: Engine::Vllm,
        feature,
    };
    if version == "0.6" {
        return Err(unsupported(
            "pipeline_parallel_size > 1 under vLLM 0.6 (the V0 engine's stages were not read; modelled for 0.19 and 0.10)".to_owned(),
        ));
    }
    if speculative || model.draft.is_some() {
        return Err(unsupported(
            "pipeline_parallel_size > 1 with a speculative_config (the drafter's stage is not modelled)".to_owned(),
        ));
    }
    if model.mxfp4_experts.is_some() {
        return Err(unsupported(
            "pipeline_parallel_size > 1 with MXFP4 experts (their padded allocation per stage is not modelled)".to_owned(),
        ));
    }
    if model.tied_embeddings {
        return Err(unsupported(
            "pipeline_parallel_size > 1 for a model whose head is tied to its embedding (vLLM's model files place the tied embedding differently: llama.py on the first and last stages, gemma2.py on every stage)".to_owned(),
        ));
    }
    let layers = model.layer_weights_bytes.len();
    let parts = model
        .layer_weights_bytes
        .iter()
        .try_fold(0u64, |a, &b| a.checked_add(b))
        .and_then(|l| l.checked_add(model.embedding_bytes))
        .and_then(|l| l.checked_add(model.head_bytes))
        .and_then(|l| l.checked_add(model.final_norm_bytes));
    if layers != model.layers.len() || parts != Some(model.weights_bytes) {
        return Err(unsupported(
            "pipeline_parallel_size > 1 for a model whose weights are not all decoder layers, embedding, final norm and head (multi-token-prediction layers, a vision tower)".to_owned(),
        ));
    }
    let kinds = attention_kinds(&model.layers);
    if version == "0.10" && kinds.len() > 1 {
        return Err(unsupported(
            "pipeline_parallel_size > 1 under vLLM 0.10 for a model mixing attention kinds (v0.10.1 groups each stage's own layers, not modelled; 0.19 is)".to_owned(),
        ));
    }
    Ok(())
}

/// Each attention kind (full, or sliding with its window) and its layers' indices, in
/// model order.
fn attention_kinds(layers: &[CacheLayer]) -> Vec<(Option<u64>, Vec<u64>)> {
    let mut kinds: Vec<(Option<u64>, Vec<u64>)> = Vec::new();
    for (i, layer) in layers.iter().enumerate() {
        let kind = match layer {
            CacheLayer::Full { .. } => None,
            CacheLayer::Sliding { window, .. } => Some(*window),
            CacheLayer::Recurrent { .. } => continue,
        };
        match kinds.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, list)) => list.push(i as u64),
            None => kinds.push((kind, vec![i as u64])),
        }
    }
    kinds
}

/// The layers each stage holds of its largest KV cache group: the whole model's groups of
/// `group_size` layers (a kind's `i`-th of `n` groups takes its layers `i, i + n, ...`),
/// projected on each stage's `ranges`.
pub fn stage_group_sizes(
    layers: &[CacheLayer],
    group_size: u64,
    ranges: &[(u64, u64)],
) -> Vec<u64> {
    let group_size = group_size.max(1);
    let mut groups: Vec<Vec<u64>> = Vec::new();
    for (_, list) in attention_kinds(layers) {
        let n = (list.len() as u64).div_ceil(group_size) as usize;
        for i in 0..n {
            groups.push(list.iter().copied().skip(i).step_by(n).collect());
        }
    }
    ranges
        .iter()
        .map(|&(start, end)| {
            groups
                .iter()
                .map(|g| g.iter().filter(|&&l| l >= start && l < end).count() as u64)
                .max()
                .unwrap_or(0)
        })
        .collect()
}

/// One stage's share: its layers, its weights and its activation peak on one of `tp`
/// ranks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stage {
    /// First decoder layer.
    pub start: u64,
    /// One past the last decoder layer.
    pub end: u64,
    /// Weights (bytes): its layers' parameters, the embedding on the first stage, the final
    /// norm and the head on the last (`/ tp`), plus the rotary cache its attention layers
    /// build.
    pub weights: u64,
    /// The profile run's peak (bytes): the forward pass; on the last stage the larger of it
    /// and the sampler run; on every stage but the first, plus the received intermediate
    /// tensors.
    pub activation: u64,
}

/// The stages of `model` at `ranges` on one of `tp` ranks: `rope` the rotary cache,
/// `forward` and `sampler` the profile run's two terms, `batched_tokens` its tokens.
pub fn stages(
    model: &ModelFacts,
    ranges: &[(u64, u64)],
    tp: u64,
    rope: u64,
    forward: u64,
    sampler: u64,
    batched_tokens: u64,
) -> Result<Vec<Stage>, EngineError> {
    let intermediate = mul(
        mul(
            mul(2, batched_tokens, "intermediate tensors")?,
            model.hidden_size,
            "intermediate tensors",
        )?,
        model.dtype_bytes,
        "intermediate tensors",
    )?;
    let last = ranges.len().saturating_sub(1);
    ranges
        .iter()
        .enumerate()
        .map(|(s, &(start, end))| {
            let mut bytes = model.layer_weights_bytes[start as usize..end as usize]
                .iter()
                .try_fold(0u64, |a, &b| add(a, b, "stage weights"))?;
            if s == 0 {
                bytes = add(bytes, model.embedding_bytes, "stage weights")?;
            }
            if s == last {
                bytes = add(bytes, model.head_bytes, "stage weights")?;
                bytes = add(bytes, model.final_norm_bytes, "stage weights")?;
            }
            let weights = add(bytes / tp.max(1), rope, "stage weights")?;
            let peak = if s == last {
                forward.max(sampler)
            } else {
                forward
            };
            let activation = if s == 0 {
                peak
            } else {
                add(peak, intermediate, "stage activation")?
            };
            Ok(Stage {
                start,
                end,
                weights,
                activation,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_split_is_get_pp_indices() {
        // 32 // 3 = 10 each, remainder 2 on partitions[-2] and partitions[-3]: 11, 11, 10.
        assert_eq!(
            layer_ranges(32, 3).unwrap(),
            vec![(0, 11), (11, 22), (22, 32)]
        );
        // 30 // 4 = 7, remainder 2 on partitions[-2] and partitions[-3]: 7, 8, 8, 7.
        assert_eq!(
            layer_ranges(30, 4).unwrap(),
            vec![(0, 7), (7, 15), (15, 23), (23, 30)]
        );
        // Remainder 1: the second-to-last stage only (8, 8, 9, 8).
        assert_eq!(
            layer_ranges(33, 4).unwrap(),
            vec![(0, 8), (8, 16), (16, 25), (25, 33)]
        );
        assert_eq!(layer_ranges(32, 2).unwrap(), vec![(0, 16), (16, 32)]);
        assert_eq!(layer_ranges(5, 5).unwrap().len(), 5);
        for bad in [0, 33] {
            let err = layer_ranges(32, bad).unwrap_err().to_string();
            assert!(err.contains("pipeline_parallel_size"), "{err}");
        }
    }

    #[test]
    fn hybrid_groups_are_strided_over_the_stages() {
        // vLLM's own example: stage 0 full.0 sw.0 sw.1, stage 1 full.1 sw.2 sw.3; groups
        // (full.0, full.1), (sw.0, sw.2), (sw.1, sw.3): one layer of each group per stage.
        let full = CacheLayer::Full {
            elements_per_token: 2,
            heads: 1,
        };
        let sliding = CacheLayer::Sliding {
            elements_per_token: 2,
            heads: 1,
            window: 4,
        };
        let layers = [full, sliding, sliding, full, sliding, sliding];
        assert_eq!(stage_group_sizes(&layers, 2, &[(0, 3), (3, 6)]), vec![1, 1]);
        // One kind: one group of every layer; each stage holds its own layers of it.
        assert_eq!(
            stage_group_sizes(&[full; 32], 32, &[(0, 11), (11, 22), (22, 32)]),
            vec![11, 11, 10]
        );
    }
}
