//! A speculative-decoding drafter in vLLM's V1 engine (`speculative_config` with method
//! `eagle` or `draft_model` and a draft `model`): what it adds to the weights, the KV cache
//! and the profile run. Rules (docs/engines.md, "Speculative decoding"):
//!
//! * weights: the drafter is loaded inside the same memory measurement as the model
//!   (`gpu_model_runner.py` `load_model`: `self.drafter.load_model(self.model)`), so `Model
//!   loading took` counts it; an EAGLE head shares the target's embedding and head
//!   (`vllm/v1/spec_decode/eagle.py` `load_model`), a draft model keeps its own; its rotary
//!   cache is its own unless its arguments are the model's (`get_rope` caches one per
//!   argument set);
//! * KV cache: the drafter's attention layers are registered like the model's and get
//!   their own KV cache in the same groups (`get_kv_cache_spec` walks every attention layer of
//!   the static forward context), so they share the KV budget;
//! * profile run: `_dummy_run` runs the drafter after the model (`self.drafter.dummy_run`),
//!   with the model's hidden states alive; the proposer's persistent buffers
//!   (`EagleProposer.__init__`: token ids int32, positions int64, hidden states and input
//!   embeddings in the model dtype, all of `max_num_batched_tokens` rows, and an int32
//!   `arange` of `max(max_num_seqs + 1, max_num_batched_tokens)`) are allocated with the
//!   runner, after the worker's initial memory snapshot, so they count in the torch peak.

use super::super::facts::{CacheLayer, DraftFacts, ModelFacts};
use super::super::{add, mul, Engine, EngineError};
use super::activation::forward_bytes_per_token;

/// The drafter's part of the accounting.
pub struct DraftTerms {
    /// Bytes added to the weights term on one rank.
    pub weights: u64,
    /// The rule of `weights`.
    pub weights_rule: String,
    /// The profile run's peak with the drafter's forward pass: `max(model peak, draft
    /// forward)`, plus the proposer's persistent buffers.
    pub activation: u64,
    /// The rule of `activation`.
    pub activation_rule: String,
}

/// Checks that vLLM `version` can load `draft` beside `model`: the V1 engine only, the
/// draft's KV cache bytes per token and layer those of the model's layers (vLLM otherwise
/// enlarges the smaller layers' blocks to one page size, which is not modelled).
pub fn check(
    version: &str,
    model: &ModelFacts,
    draft: &DraftFacts,
    tp: u64,
) -> Result<(), EngineError> {
    if version == "0.6" {
        return Err(EngineError::Unsupported {
            engine: Engine::Vllm,
            feature: format!(
                "a speculative drafter ({}) under the V0 engine (vLLM 0.6): only the V1 engine's drafter (0.10, 0.19) is modelled",
                draft.method
            ),
        });
    }
    let widest = |layers: &[CacheLayer]| {
        layers
            .iter()
            .map(|l| l.elements_per_token_per_rank(tp))
            .max()
            .unwrap_or(0)
    };
    let (target, own) = (widest(&model.layers), widest(&draft.model.layers));
    if draft
        .model
        .layers
        .iter()
        .any(|l| l.elements_per_token_per_rank(tp) != target)
    {
        return Err(EngineError::Unsupported {
            engine: Engine::Vllm,
            feature: format!(
                "a draft ({}) whose KV cache holds {own} elements per token and layer where the model's layers hold {target}: vLLM then enlarges the smaller layers' blocks to one page size",
                draft.source
            ),
        });
    }
    Ok(())
}

/// The drafter's weights and profile-run terms on one of `tp` ranks, with the model's own
/// `peak` (the profile run without the drafter), `batched_tokens` and `max_num_seqs`.
pub fn terms(
    model: &ModelFacts,
    draft: &DraftFacts,
    tp: u64,
    peak: u64,
    batched_tokens: u64,
    max_num_seqs: u64,
) -> Result<DraftTerms, EngineError> {
    let d = &draft.model;
    let shared_rope = d.trained_context == model.trained_context
        && d.rotary_dim == model.rotary_dim
        && d.rotary_dtype_bytes == model.rotary_dtype_bytes;
    let rope = if shared_rope {
        0
    } else {
        mul(
            mul(d.trained_context, d.rotary_dim, "draft rotary cache")?,
            mul(d.rotary_dtype_bytes, d.rotary_caches, "draft rotary cache")?,
            "draft rotary cache",
        )?
    };
    let weights = add(draft.weights_bytes / tp, rope, "draft weights")?;
    let weights_rule = format!(
        " + the drafter ({} from {}, {}): {} B{} + its rotary cache {rope} B{}",
        draft.method,
        draft.source,
        draft.weights_rule,
        draft.weights_bytes,
        if tp > 1 {
            format!(" / tensor_parallel_size {tp}")
        } else {
            String::new()
        },
        if shared_rope {
            " (the model's: same positions and rotary dim)"
        } else {
            ""
        }
    );
    let row = mul(model.hidden_size, model.dtype_bytes, "draft activation")?;
    let draft_row = mul(d.hidden_size, model.dtype_bytes, "draft activation")?;
    // An EAGLE head embeds the tokens (h) and concatenates them with the model's hidden
    // states (2h) before its `fc`.
    let eagle_inputs = if draft.method == "eagle" {
        mul(3, draft_row, "draft activation")?
    } else {
        0
    };
    let per_token = add(
        add(row, forward_bytes_per_token(d, tp)?, "draft activation")?,
        eagle_inputs,
        "draft activation",
    )?;
    let forward = mul(batched_tokens, per_token, "draft forward")?;
    let buffers = add(
        mul(
            batched_tokens,
            add(12, mul(2, draft_row, "draft buffers")?, "draft buffers")?,
            "draft buffers",
        )?,
        mul(
            max_num_seqs.saturating_add(1).max(batched_tokens),
            4,
            "draft buffers",
        )?,
        "draft buffers",
    )?;
    let activation = add(peak.max(forward), buffers, "activation peak")?;
    let activation_rule = format!(
        "; with the drafter: max(that, its forward after the model's: {batched_tokens} x ({row} B of the model's hidden states + {} B/token of its largest block{}) = {forward} B) + the proposer's persistent buffers {buffers} B ({batched_tokens} x (4 + 8 + 2 x {draft_row}) + max(max_num_seqs + 1, max_num_batched_tokens) x 4; vllm/v1/spec_decode/eagle.py EagleProposer.__init__)",
        forward_bytes_per_token(d, tp)?,
        if eagle_inputs > 0 {
            format!(" + {eagle_inputs} B of embeddings and fc input")
        } else {
            String::new()
        }
    );
    Ok(DraftTerms {
        weights,
        weights_rule,
        activation,
        activation_rule,
    })
}
