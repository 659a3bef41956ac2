//! Every rank's share of one tensor at a tensor-parallel degree: which part it holds, the
//! part's bytes as a weight arena lays them out, the bytes every part holds whole, and,
//! for the routed experts of an mxfp4 model whose intermediate blocks do not divide by the
//! degree, vLLM's block-rounded uneven split (each rank a padded buffer of
//! `⌈blocks / t⌉` blocks, the last ranks fewer real blocks; docs/placement.md, "Quantized
//! shards"); or why a tensor cannot be split at the degree.

use std::collections::BTreeMap;

use crate::request::WeightEncoding;
use crate::synth::quantization::Method;
use crate::synth::WeightFormat;

use super::model::{layout_of, names_key, ModelFacts, Rule, TensorFacts};
use super::mxfp4::{allocated, Padding};
use super::problem::ExpertSplit;

/// The values of one mxfp4 block along the axis it quantizes (OCP microscaling: 32 e2m1
/// values share an e8m0 scale; vLLM's `mxfp4_block = 32` in `gpt_oss.py`).
pub const MXFP4_BLOCK: u64 = 32;

/// One tensor's share on one rank of a group of `degree`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Share {
    /// The part held (`None`: this rank holds nothing of it).
    pub part: Option<u64>,
    /// Parts the tensor is split into.
    pub parts: u64,
    /// Physical bytes of one part.
    pub part_bytes: u64,
    /// Bytes of one part as a weight arena lays it out (components aligned).
    pub arena_bytes: u64,
    /// Bytes of `part_bytes` every part holds whole (a per-tensor scale, or per-channel
    /// scales under a split of the input axis): the parts add up to the tensor plus
    /// `parts - 1` copies of them.
    pub replicated_bytes: u64,
    /// A part of a block-rounded split (`None`: an even split, or a tensor held whole):
    /// `part_bytes` is then the rank's padded buffer, of which it holds `held` blocks.
    pub blocks: Option<BlockShare>,
    /// Bytes of `part_bytes` the engine's kernel backend allocates beyond the part as the
    /// loader lays it out (vLLM's MXFP4 experts, [`super::mxfp4`]; 0: none): zeros and
    /// layout padding, held and read like the rest.
    pub padding_bytes: u64,
}

/// One rank's part of a tensor split block-rounded (vLLM's gpt-oss mxfp4 loader,
/// `_load_weights_mxfp4` in `vllm/model_executor/models/gpt_oss.py`): the tensor's
/// `count` blocks along its split axis go to the ranks in contiguous runs of
/// `⌈count / parts⌉` (`per_rank_intermediate_size_block = cdiv(intermediate_size_block,
/// tp_size)`), the last ranks fewer (`tp_rank_end = min(..., intermediate_size)`), and
/// every rank allocates the full run: a buffer of `⌈count / parts⌉` blocks whose tail past
/// its own blocks is zeros.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockShare {
    /// Blocks of the tensor along its split axis.
    pub count: u64,
    /// Bytes of one block: every component's share of one block of the split axis.
    pub block_bytes: u64,
    /// Blocks of the tensor this rank holds: `min(⌈count / parts⌉, count - rank x
    /// ⌈count / parts⌉)`, at least 0.
    pub held: u64,
}

/// Part bytes already worked out, by the tensor's shape, class and split: `even` for
/// [`part_bytes`], `padded` for [`padded_part`]; and the set's MXFP4 kernel backend, which
/// pads routed experts' buffers ([`super::mxfp4`]).
#[derive(Default)]
pub(super) struct ShardCache {
    even: BTreeMap<String, Result<(u64, u64, u64), String>>,
    padded: BTreeMap<String, Result<PaddedPart, String>>,
    pub(super) padding: Padding,
}

impl ShardCache {
    /// An empty cache for a set whose MXFP4 backend pads as `padding` says.
    pub(super) fn new(padding: Padding) -> Self {
        ShardCache {
            padding,
            ..ShardCache::default()
        }
    }
}

/// The physical, arena and replicated bytes of one part of a tensor with `axis` divided by
/// `divisor`, in the format and class of the tensor, when the part keeps the tensor's
/// encodings. Each component of the part is laid out as the single-device plan lays out the
/// tensor; a component whose dimensions the split leaves unchanged (a per-tensor scale, or
/// per-channel scales when the input axis is split) is held whole by every part, as vLLM's
/// linear layers load it; every other component must split exactly (`divisor` parts add up
/// to it). A block-quantized format (fp8 128x128 blocks with one f32 scale each) needs each
/// shard boundary on a block boundary: the part's extent along the split axis must be a
/// multiple of the block, else the engine refuses the degree (vLLM's
/// `Fp8LinearMethod.create_weights`, docs/placement.md "Quantized shards").
fn part_bytes(
    facts: &ModelFacts,
    tensor: usize,
    axis: usize,
    divisor: u64,
    cache: &mut ShardCache,
) -> Result<(u64, u64, u64), String> {
    let t = &facts.tensors[tensor];
    let key = cache_key(t, axis, divisor);
    if let Some(hit) = cache.even.get(&key) {
        return hit.clone();
    }
    let answer = (|| {
        let extent = *t.dims.get(axis).ok_or("no such axis")?;
        if divisor == 0 || extent % divisor != 0 {
            return Err(format!(
                "{}: dimension {axis} ({extent}) does not divide by {divisor}",
                t.id
            ));
        }
        let mut dims = t.dims.clone();
        dims[axis] = extent / divisor;
        if let Some(block) = block_along(facts.format, &t.components, t.dims.len(), axis) {
            if dims[axis] % block != 0 {
                return Err(format!(
                    "{}: a part of {} along dimension {axis} does not end on a {block}-value \
                     block of the {} format (the engine refuses a shard boundary inside a block)",
                    t.id,
                    dims[axis],
                    facts.format.name()
                ));
            }
        }
        let components =
            layout_of(facts.format, &t.id, &dims, t.class, &t.names).ok_or_else(|| {
                format!(
                    "{}: a part of {} along dimension {axis} is not a whole number of the {} \
                     format's blocks (no layout of the part {dims:?})",
                    t.id,
                    dims[axis],
                    facts.format.name()
                )
            })?;
        if !same_encodings(&components, &t.components) {
            return Err(format!(
                "{}: a part {dims:?} does not keep the {} format's blocks",
                t.id,
                facts.format.name()
            ));
        }
        let bytes_of = |d: &[u64], e: &WeightEncoding| {
            d.iter()
                .try_fold(1u64, |a, &x| a.checked_mul(x))
                .and_then(|n| e.physical_bytes(n))
        };
        let (mut physical, mut replicated) = (0u64, 0u64);
        for ((part_dims, encoding), (whole_dims, _)) in components.iter().zip(&t.components) {
            let part = bytes_of(part_dims, encoding).ok_or("bytes overflow")?;
            physical = physical.checked_add(part).ok_or("bytes overflow")?;
            if part_dims == whole_dims {
                replicated = replicated.checked_add(part).ok_or("bytes overflow")?;
                continue;
            }
            let whole = bytes_of(whole_dims, encoding).ok_or("bytes overflow")?;
            if part.checked_mul(divisor) != Some(whole) {
                return Err(format!(
                    "{}: {divisor} parts {part_dims:?} of its component {whole_dims:?} \
                     ({part} bytes each) do not add up to its {whole} bytes",
                    t.id
                ));
            }
        }
        let split = physical - replicated;
        if split
            .checked_mul(divisor)
            .and_then(|b| b.checked_add(replicated))
            != Some(t.bytes)
        {
            return Err(format!(
                "{}: {divisor} parts of {physical} bytes ({replicated} held by every part) \
                 do not add up to its {} bytes",
                t.id, t.bytes
            ));
        }
        let arena = ModelFacts::arena_bytes(&components).ok_or("bytes overflow")?;
        Ok((physical, arena, replicated))
    })();
    cache.even.insert(key, answer.clone());
    answer
}

/// The padded buffer of one rank under a block-rounded split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct PaddedPart {
    /// Physical bytes of the buffer (`⌈count / parts⌉` blocks).
    physical: u64,
    /// Its bytes as a weight arena lays it out.
    arena: u64,
    /// Blocks of the tensor along the split axis.
    count: u64,
    /// Bytes of one block.
    block_bytes: u64,
}

/// Whether tensor `tensor`, split along `axis` at `degree`, is split block-rounded: a
/// routed expert's tensor along its intermediate axis (tensor-split experts: the gate and
/// up projection, its bias and the down projection) in an mxfp4 format, whose
/// intermediate size is not a whole number of 32-value blocks per rank. vLLM loads every
/// mxfp4 expert tensor with the same block-rounded bounds (`_load_weights_mxfp4`); where
/// the blocks divide by the degree those bounds are the even split, which the even rule
/// already gives.
fn block_rounded(facts: &ModelFacts, tensor: usize, axis: usize, degree: u64) -> bool {
    let WeightFormat::Quantized(scheme) = facts.format else {
        return false;
    };
    let Some(experts) = facts.architecture.experts else {
        return false;
    };
    let extent = facts.tensors[tensor].dims.get(axis).copied();
    scheme.method == Method::Mxfp4
        && degree > 1
        && extent == Some(experts.expert_intermediate_size)
        && experts.expert_intermediate_size % MXFP4_BLOCK == 0
        && (experts.expert_intermediate_size / MXFP4_BLOCK) % degree != 0
}

/// The padded buffer of every rank when tensor `tensor` is split block-rounded along
/// `axis` over `degree` ranks: the tensor's layout at `⌈blocks / degree⌉` blocks along the
/// axis, which must keep its encodings and hold exactly that many blocks' bytes (every
/// component split along the axis, none held whole).
fn padded_part(
    facts: &ModelFacts,
    tensor: usize,
    axis: usize,
    degree: u64,
    cache: &mut ShardCache,
) -> Result<PaddedPart, String> {
    let t = &facts.tensors[tensor];
    let key = cache_key(t, axis, degree);
    if let Some(hit) = cache.padded.get(&key) {
        return hit.clone();
    }
    let answer = (|| {
        let extent = *t.dims.get(axis).ok_or("no such axis")?;
        let count = extent / MXFP4_BLOCK;
        if count == 0 || extent % MXFP4_BLOCK != 0 || t.bytes % count != 0 {
            return Err(format!(
                "{}: dimension {axis} ({extent}) is not whole {MXFP4_BLOCK}-value blocks of \
                 equal bytes ({} bytes in all)",
                t.id, t.bytes
            ));
        }
        // vLLM's fused MoE still needs the intermediate size to divide by the degree
        // (`FusedMoE.__init__`: `assert intermediate_size % self.tp_size == 0`,
        // `vllm/model_executor/layers/fused_moe/layer.py`).
        if extent % degree != 0 {
            return Err(format!(
                "{}: dimension {axis} ({extent}) does not divide by {degree}",
                t.id
            ));
        }
        let per_rank = count.div_ceil(degree);
        let mut dims = t.dims.clone();
        dims[axis] = per_rank
            .checked_mul(MXFP4_BLOCK)
            .ok_or("dimension overflow")?;
        let components =
            layout_of(facts.format, &t.id, &dims, t.class, &t.names).ok_or_else(|| {
                format!(
                    "{}: no layout of a padded part {dims:?} in the {} format",
                    t.id,
                    facts.format.name()
                )
            })?;
        if !same_encodings(&components, &t.components) {
            return Err(format!(
                "{}: a padded part {dims:?} does not keep the {} format's blocks",
                t.id,
                facts.format.name()
            ));
        }
        let mut physical = 0u64;
        for (part_dims, encoding) in &components {
            let elements = part_dims
                .iter()
                .try_fold(1u64, |a, &x| a.checked_mul(x))
                .ok_or("bytes overflow")?;
            physical = encoding
                .physical_bytes(elements)
                .and_then(|b| physical.checked_add(b))
                .ok_or("bytes overflow")?;
        }
        let block_bytes = t.bytes / count;
        if per_rank.checked_mul(block_bytes) != Some(physical) {
            return Err(format!(
                "{}: a padded part {dims:?} of {physical} bytes is not {per_rank} blocks of \
                 {block_bytes} bytes (a component is not split along dimension {axis})",
                t.id
            ));
        }
        let arena = ModelFacts::arena_bytes(&components).ok_or("bytes overflow")?;
        Ok(PaddedPart {
            physical,
            arena,
            count,
            block_bytes,
        })
    })();
    cache.padded.insert(key, answer.clone());
    answer
}

/// The block (values along `axis`) of a block-quantized weight format's scale grid: the
/// scales component has the tensor's rank and one entry per `block x block` tile.
fn block_along(
    format: crate::synth::WeightFormat,
    components: &[(Vec<u64>, WeightEncoding)],
    rank: usize,
    axis: usize,
) -> Option<u64> {
    let crate::synth::WeightFormat::Quantized(scheme) = format else {
        return None;
    };
    let crate::synth::quantization::Granularity::Block(rows, columns) = scheme.granularity else {
        return None;
    };
    // Only a tensor the scheme quantized carries the block grid (a dense head does not).
    let quantized = components
        .iter()
        .any(|(_, e)| matches!(e, WeightEncoding::BlockQuantized(_)));
    if !quantized || rank < 2 {
        return None;
    }
    if axis == rank - 1 {
        Some(columns)
    } else if axis == rank - 2 {
        Some(rows)
    } else {
        None
    }
}

/// The cache key of a part: what the part's bytes depend on (shape, class, component
/// names), the axis and the degree or divisor it is cut by.
fn cache_key(t: &TensorFacts, axis: usize, parts: u64) -> String {
    format!(
        "{:?} {:?} {:?} {axis} {parts}",
        t.dims,
        t.class,
        names_key(&t.names)
    )
}

fn encoding_kind(encoding: &WeightEncoding) -> String {
    format!("{encoding:?}")
}

/// Whether a part's components keep the whole tensor's encodings, one for one (a split
/// must not change a quantized tensor's blocks into another layout).
fn same_encodings(
    part: &[(Vec<u64>, WeightEncoding)],
    whole: &[(Vec<u64>, WeightEncoding)],
) -> bool {
    part.len() == whole.len()
        && part
            .iter()
            .zip(whole)
            .all(|((_, a), (_, b))| encoding_kind(a) == encoding_kind(b))
}

/// Every rank's share of tensor `index` at `degree` under `split`, with the buffers the
/// set's MXFP4 kernel backend allocates for a routed expert's tensor ([`super::mxfp4`]).
pub(super) fn shares_of(
    facts: &ModelFacts,
    index: usize,
    degree: u32,
    split: ExpertSplit,
    groups_in_layer: u64,
    cache: &mut ShardCache,
) -> Result<Vec<Share>, String> {
    let mut shares = loaded_shares(facts, index, degree, split, groups_in_layer, cache)?;
    let loaded = shares
        .iter()
        .find(|s| s.part.is_some())
        .map(|s| s.part_bytes);
    let Some(physical) = loaded else {
        return Ok(shares);
    };
    let d = u64::from(degree);
    if let Some(bytes) = allocated(facts, &cache.padding, index, d, split, physical)? {
        let padding = bytes - physical;
        for share in &mut shares {
            share.part_bytes = bytes;
            share.arena_bytes = share
                .arena_bytes
                .checked_add(padding)
                .ok_or("bytes overflow")?;
            share.padding_bytes = padding;
        }
    }
    Ok(shares)
}

/// Every rank's share of tensor `index` at `degree` under `split`, as the loader lays it
/// out.
fn loaded_shares(
    facts: &ModelFacts,
    index: usize,
    degree: u32,
    split: ExpertSplit,
    groups_in_layer: u64,
    cache: &mut ShardCache,
) -> Result<Vec<Share>, String> {
    let t = &facts.tensors[index];
    let d = u64::from(degree);
    let whole = ModelFacts::arena_bytes(&t.components).ok_or("bytes overflow")?;
    let all = |share: Share| Ok(vec![share; degree as usize]);
    let replicated = Share {
        part: Some(0),
        parts: 1,
        part_bytes: t.bytes,
        arena_bytes: whole,
        replicated_bytes: 0,
        blocks: None,
        padding_bytes: 0,
    };
    if degree == 1 {
        return all(replicated);
    }
    let split_by =
        |axis: usize, parts: u64, cache: &mut ShardCache| -> Result<Vec<Share>, String> {
            let (physical, arena, replicated) = part_bytes(facts, index, axis, parts, cache)?;
            Ok((0..d)
                .map(|rank| Share {
                    part: Some(rank * parts / d),
                    parts,
                    part_bytes: physical,
                    arena_bytes: arena,
                    replicated_bytes: replicated,
                    blocks: None,
                    padding_bytes: 0,
                })
                .collect())
        };
    match t.rule {
        Rule::Replicate => all(replicated),
        Rule::Split { axis } => split_by(axis, d, cache),
        Rule::KvHeads { axis, heads } => {
            if heads >= d {
                if heads % d != 0 {
                    return Err(format!("{heads} KV heads do not divide by {degree}"));
                }
                split_by(axis, d, cache)
            } else {
                if d % heads != 0 {
                    return Err(format!(
                        "{degree} ranks are not a multiple of the {heads} KV heads"
                    ));
                }
                split_by(axis, heads, cache)
            }
        }
        Rule::Expert { axis, group } => match split {
            ExpertSplit::Tensor => match axis {
                Some(axis) if block_rounded(facts, index, axis, d) => {
                    let padded = padded_part(facts, index, axis, d, cache)?;
                    let run = padded.count.div_ceil(d);
                    Ok((0..d)
                        .map(|rank| Share {
                            part: Some(rank),
                            parts: d,
                            part_bytes: padded.physical,
                            arena_bytes: padded.arena,
                            replicated_bytes: 0,
                            blocks: Some(BlockShare {
                                count: padded.count,
                                block_bytes: padded.block_bytes,
                                held: padded.count.saturating_sub(rank * run).min(run),
                            }),
                            padding_bytes: 0,
                        })
                        .collect())
                }
                Some(axis) => split_by(axis, d, cache),
                None => all(replicated),
            },
            ExpertSplit::Expert => {
                if groups_in_layer % d != 0 {
                    return Err(format!(
                        "{groups_in_layer} expert groups per layer do not divide by {degree}"
                    ));
                }
                let owner = group / (groups_in_layer / d);
                Ok((0..d)
                    .map(|rank| Share {
                        part: (rank == owner).then_some(0),
                        ..replicated.clone()
                    })
                    .collect())
            }
        },
    }
}
