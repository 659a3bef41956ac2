//! A speculative-decoding drafter in vLLM's V1 engine (`speculative_config` with method
//! `eagle`, `eagle3` or `draft_model` and a draft `model`): what it adds to the weights, the
//! KV cache and the profile run. Rules (docs/engines.md, "Speculative decoding"; an EAGLE-3
//! head's own in [`super::eagle3`]):
//!
//! * weights: the drafter is loaded inside the same memory measurement as the model
//!   (`gpu_model_runner.py` `load_model`: `self.drafter.load_model(self.model)`), so `Model
//!   loading took` counts it; an EAGLE head shares the target's embedding and head
//!   (`vllm/v1/spec_decode/eagle.py` `load_model`), a draft model keeps its own; its rotary
//!   cache is its own unless its arguments are the model's (`get_rope` caches one per
//!   argument set);
//! * KV cache: the drafter's attention layers are registered like the model's and get
//!   their own KV cache in the same groups (`get_kv_cache_spec` walks every attention layer of
//!   the static forward context), so they share the KV budget. A draft whose KV bytes per
//!   token and layer differ from the model's: vLLM v0.19.0 keeps every full-attention layer
//!   in one group whose page is the sum of the layers' pages (`UniformTypeKVCacheSpecs`,
//!   `vllm/v1/kv_cache_interface.py`; `get_kv_cache_groups` and
//!   `get_kv_cache_config_from_groups`, `vllm/v1/core/kv_cache_utils.py`), and beside
//!   sliding-window layers grows the smaller pages' blocks to one page size and regroups
//!   ([`kv_layout`]); v0.10.1 refuses such layers (`get_kv_cache_config` raises
//!   `NotImplementedError` when they are neither of one spec nor of one page size);
//! * profile run: `_dummy_run` runs the drafter after the model (`self.drafter.dummy_run`),
//!   with the model's hidden states alive; the proposer's persistent buffers
//!   (`EagleProposer.__init__`: token ids int32, positions int64, hidden states and input
//!   embeddings in the model dtype, all of `max_num_batched_tokens` rows, and an int32
//!   `arange` of `max(max_num_seqs + 1, max_num_batched_tokens)`) are allocated with the
//!   runner, after the worker's initial memory snapshot, so they count in the torch peak.

use super::super::facts::{CacheLayer, DraftFacts, ModelFacts};
use super::super::{add, mul, Engine, EngineError};
use super::activation::{forward_bytes_per_token, Peak};
use super::eagle3;

/// The drafter's part of the accounting.
pub struct DraftTerms {
    /// Bytes added to the weights term on one rank.
    pub weights: u64,
    /// The rule of `weights`.
    pub weights_rule: String,
    /// The profile run's peak with the drafter: `max(model peak, draft forward)`, plus the
    /// proposer's persistent buffers (an EAGLE-3 head: the target's forward holds its
    /// auxiliary hidden states too).
    pub activation: u64,
    /// The rule of `activation`.
    pub activation_rule: String,
}

/// Each layer's KV cache bytes per token on one of `tp` ranks (0 for a recurrent layer).
fn per_layer(layers: &[CacheLayer], tp: u64) -> Vec<u64> {
    layers
        .iter()
        .map(|l| l.elements_per_token_per_rank(tp))
        .collect()
}

/// Checks that vLLM `version` can load `draft` beside `model` as modelled: the V1 engine
/// only; a draft whose KV cache elements per token and layer differ from the model's only
/// in 0.19 ([`kv_layout`]; v0.10.1 refuses it, as vLLM does).
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
    let target = per_layer(&model.layers, tp);
    let own = per_layer(&draft.model.layers, tp);
    let widest = target.iter().copied().max().unwrap_or(0);
    if own.iter().all(|&e| e == widest) && target.iter().all(|&e| e == widest) {
        return Ok(());
    }
    let draft_width = own.iter().copied().max().unwrap_or(0);
    if version != "0.19" {
        return Err(EngineError::Refused {
            engine: Engine::Vllm,
            message: format!(
                "speculative_config.model {}: the draft's KV cache holds {draft_width} elements per token and layer where the model's layers hold {widest}; vLLM v0.10.1 refuses layers that are neither of one KV cache spec nor of one page size (vllm/v1/core/kv_cache_utils.py get_kv_cache_config raises NotImplementedError); use vllm@0.19, which keeps them in one group, or a draft with the model's KV heads and head size",
                draft.source
            ),
        });
    }
    Ok(())
}

/// One KV cache group of a [`KvLayout`].
pub struct LayoutGroup {
    /// Layers the group's page spans (its pool count, padding included).
    pub layers: u64,
    /// The sliding window of its layers (`None`: full attention).
    pub window: Option<u64>,
    /// Tokens per block of its layers.
    pub block_size: u64,
}

/// How vLLM v0.19.0 lays out the KV cache of a model and a drafter whose layers differ in
/// size: the page every block has, the layers per group and the groups.
pub struct KvLayout {
    /// Bytes of one block of one group's layer pool (the uniform page).
    pub page: u64,
    /// Layers per group (the pools `num_blocks` is divided over).
    pub group_size: u64,
    /// The groups.
    pub groups: Vec<LayoutGroup>,
    /// The rule, for the log line.
    pub rule: String,
}

/// vLLM v0.19.0's KV cache layout when `layers` (the model's and a drafter's) differ in
/// size per token, on one of `tp` ranks, at `element_bytes` per element and `block_size`
/// tokens per block (`get_kv_cache_groups`, `vllm/v1/core/kv_cache_utils.py`); `None` when
/// they are all of one size (the model's own rules apply):
/// * every layer full attention: one group of every layer whose page sums the layers'
///   pages (`UniformTypeKVCacheSpecs`, `vllm/v1/kv_cache_interface.py`);
/// * else (sliding windows beside): the smaller pages' blocks grow until every page is the
///   largest (`unify_kv_cache_spec_page_size`; vLLM's `NotImplementedError` when the largest
///   is not a multiple of one), the layers of one spec (window, size, block) form a type,
///   and the types split into groups of the largest type's count when it is below 1.5 times
///   the smallest's, else of the smallest's, each group padded to that many layers
///   (`_get_kv_cache_groups_uniform_page_size`).
pub fn kv_layout(
    layers: &[CacheLayer],
    tp: u64,
    element_bytes: u64,
    block_size: u64,
) -> Result<Option<KvLayout>, EngineError> {
    let widths = per_layer(layers, tp);
    if widths.windows(2).all(|w| w[0] == w[1]) {
        return Ok(None);
    }
    if layers.iter().all(|l| matches!(l, CacheLayer::Full { .. })) {
        let mut sum = 0u64;
        for &width in &widths {
            sum = add(sum, mul(width, element_bytes, "KV page")?, "KV page")?;
        }
        return Ok(Some(KvLayout {
            page: mul(sum, block_size, "KV page")?,
            group_size: 1,
            groups: vec![LayoutGroup {
                layers: 1,
                window: None,
                block_size,
            }],
            rule: format!(
                "the model's and the drafter's {} full-attention layers of different sizes in one group whose page sums theirs ({sum} B per token; UniformTypeKVCacheSpecs, v1/kv_cache_interface.py v0.19.0): num_blocks = floor(available / page); tokens = num_blocks x block_size {block_size} (kv_cache_utils.py v0.19.0)",
                layers.len()
            ),
        }));
    }
    let pages: Vec<u64> = widths
        .iter()
        .map(|&w| mul(mul(w, element_bytes, "KV page")?, block_size, "KV page"))
        .collect::<Result<_, _>>()?;
    let max_page = pages.iter().copied().max().unwrap_or(0);
    let mut types: std::collections::BTreeMap<(Option<u64>, u64, u64), u64> =
        std::collections::BTreeMap::new();
    for ((layer, &width), &page) in layers.iter().zip(&widths).zip(&pages) {
        let window = match *layer {
            CacheLayer::Full { .. } => None,
            CacheLayer::Sliding { window, .. } => Some(window),
            CacheLayer::Recurrent { .. } => continue,
        };
        if page == 0 || max_page % page != 0 {
            return Err(EngineError::Refused {
                engine: Engine::Vllm,
                message: format!(
                    "NotImplementedError: The page size of the layer is not divisible by the maximum page size. Cannot unify by adjusting block_size. (a layer of {page} B per block beside {max_page} B: vllm/v1/core/kv_cache_utils.py unify_kv_cache_spec_page_size, v0.19.0); give speculative_config.model a draft whose KV bytes per token and layer divide the model's"
                ),
            });
        }
        *types
            .entry((window, width, block_size * (max_page / page)))
            .or_default() += 1;
    }
    let min = types.values().copied().min().unwrap_or(1).max(1);
    let max = types.values().copied().max().unwrap_or(1);
    let group_size = if (max as f64) < (min as f64) * 1.5 {
        max
    } else {
        min
    };
    let mut groups = Vec::new();
    for (&(window, _, block), &count) in &types {
        for _ in 0..count.div_ceil(group_size) {
            groups.push(LayoutGroup {
                layers: group_size,
                window,
                block_size: block,
            });
        }
    }
    let rule = format!(
        "the smaller pages' blocks grown to the largest page {max_page} B (unify_kv_cache_spec_page_size), {} layer types split into {} groups of {group_size} layers (_get_kv_cache_groups_uniform_page_size, kv_cache_utils.py v0.19.0): num_blocks = floor(available / page / {group_size}); tokens = num_blocks // {} groups x block_size {block_size}",
        types.len(),
        groups.len(),
        groups.len()
    );
    Ok(Some(KvLayout {
        page: max_page,
        group_size,
        groups,
        rule,
    }))
}

/// The drafter's weights and profile-run terms on one of `tp` ranks under vLLM `version`,
/// with the model's own profile-run `peak` (without the drafter), `batched_tokens` and
/// `max_num_seqs`.
pub fn terms(
    version: &str,
    model: &ModelFacts,
    draft: &DraftFacts,
    tp: u64,
    peak: &Peak,
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
    let (own, own_rule) = match &draft.eagle3 {
        Some(head) => {
            let w = eagle3::weights(version, head, model.dtype_bytes, tp)?;
            (w.bytes, format!("{}: {} B", w.rule, w.bytes))
        }
        None => (
            draft.weights_bytes / tp,
            format!(
                "{}: {} B{}",
                draft.weights_rule,
                draft.weights_bytes,
                if tp > 1 {
                    format!(" / tensor_parallel_size {tp}")
                } else {
                    String::new()
                }
            ),
        ),
    };
    let weights = add(own, rope, "draft weights")?;
    let weights_rule = format!(
        " + the drafter ({} from {}, {own_rule}) + its rotary cache {rope} B{}",
        draft.method,
        draft.source,
        if shared_rope {
            " (the model's: same positions and rotary dim)"
        } else {
            ""
        }
    );
    let row = mul(model.hidden_size, model.dtype_bytes, "draft activation")?;
    let draft_row = mul(d.hidden_size, model.dtype_bytes, "draft activation")?;
    // An EAGLE-3 head reads the target's auxiliary hidden states (v0.10.1 always three);
    // they are alive from their layers to the end of the target's forward and through the
    // drafter's dummy run.
    let aux_states = match &draft.eagle3 {
        Some(head) if version == "0.19" => head.aux_hidden_states,
        Some(_) => 3,
        None => 0,
    };
    let aux_row = mul(aux_states, row, "auxiliary hidden states")?;
    let aux = mul(batched_tokens, aux_row, "auxiliary hidden states")?;
    let model_peak = add(peak.forward, aux, "activation peak")?.max(peak.sampler);
    // The drafter's inputs beside its largest block: an EAGLE head embeds the tokens (h)
    // and concatenates them with the model's hidden states (2h) before its `fc`; an EAGLE-3
    // head's first layer holds the embeddings, their norm and the 2h concatenation its
    // qkv reads (4h).
    let inputs = match draft.method.as_str() {
        "eagle" => mul(3, draft_row, "draft activation")?,
        "eagle3" => mul(4, draft_row, "draft activation")?,
        _ => 0,
    };
    let per_token = add(
        add(
            add(row, aux_row, "draft activation")?,
            forward_bytes_per_token(d, tp)?,
            "draft activation",
        )?,
        inputs,
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
    let activation = add(model_peak.max(forward), buffers, "activation peak")?;
    let aux_rule = if aux_states > 0 {
        format!(
            "; with the model's forward holding {aux_states} auxiliary hidden states for the EAGLE-3 head ({batched_tokens} x {aux_states} x {row} B = {aux} B: max(forward {} + {aux}, sampler {}) = {model_peak} B; vllm/v1/worker/gpu_model_runner.py _dummy_run)",
            peak.forward, peak.sampler
        )
    } else {
        String::new()
    };
    let activation_rule = format!(
        "{aux_rule}; with the drafter: max(that, its forward after the model's: {batched_tokens} x ({row} B of the model's hidden states{} + {} B/token of its largest block{}) = {forward} B) + the proposer's persistent buffers {buffers} B ({batched_tokens} x (4 + 8 + 2 x {draft_row}) + max(max_num_seqs + 1, max_num_batched_tokens) x 4; vllm/v1/spec_decode/eagle.py EagleProposer.__init__)",
        if aux_row > 0 {
            format!(" + {aux_row} B of auxiliary hidden states")
        } else {
            String::new()
        },
        forward_bytes_per_token(d, tp)?,
        match draft.method.as_str() {
            "eagle" => format!(" + {inputs} B of embeddings and fc input"),
            "eagle3" => format!(" + {inputs} B of embeddings, their norm and the 2h qkv input"),
            _ => String::new(),
        }
    );
    Ok(DraftTerms {
        weights,
        weights_rule,
        activation,
        activation_rule,
    })
}
