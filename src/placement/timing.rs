//! Time across devices: each parallel option's per-layer times on each device kind at a
//! serving point (the performance model's node times split over the tensor-parallel ranks,
//! plus the layer's all-reduces), the stage boundary's send, an offloaded unit's transfer,
//! and the engine's fixed time per step; in integer nanoseconds for the solver and the
//! enumeration (the objective's linear estimate), and in seconds by part for the printed
//! breakdown (docs/placement.md, "Time across devices"). The figures a placement prints
//! first come from the closed-loop serving simulation over the same pricing
//! ([`super::step_price`]).

use serde::Serialize;

use crate::perf::communication::{self, LinkClass, LinkFigures};
use crate::perf::engine_profile::EngineProfile;
use crate::perf::model::{NodeGroup, PhaseTime, TimeModel};
use crate::perf::work::{Segment, StepShape};
use crate::perf::{engine_names, engine_profile, serving, Calibration, Lengths, ServingPoint};
use crate::synth::architecture::MixerKind;

use super::device_set::{DeviceSet, Link, LinkKind, LinkRole};
use super::model::ModelFacts;
use super::problem::{KindTimes, OptionTimes, ParallelOption, Problem, StepNs};
use super::PlacementError;

/// The serving point a placement is timed at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Serving {
    /// Requests in flight.
    pub concurrency: u64,
    /// Prompt tokens of each request.
    pub input_tokens: u64,
    /// Output tokens of each request.
    pub output_tokens: u64,
    /// The engine's time profile (`vllm`, ...).
    pub engine: String,
    /// Requests the serving simulation runs (`None`: `4 x concurrency`, as a single-device
    /// plan's `--concurrency` runs): a benchmark's own request count, when it is known.
    pub simulated_requests: Option<u64>,
    /// How the requests' lengths are drawn around `input_tokens` and `output_tokens`
    /// (`--lengths`; fixed by default).
    pub lengths: Lengths,
    /// The engine's `enable_chunked_prefill` when its arguments resolve it (vLLM V0's
    /// scheduling: [`ServingPoint::chunked_prefill`]); `None`: the engine's default at
    /// the context.
    pub chunked_prefill: Option<bool>,
}

/// A phase's time on one device by what bounds it, seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Parts {
    /// Nodes bound by compute.
    pub compute: f64,
    /// Nodes bound by memory.
    pub memory: f64,
    /// Kernel launches.
    pub overhead: f64,
    /// Tensor-parallel all-reduces.
    pub all_reduce: f64,
}

impl Parts {
    /// The sum of the parts.
    pub fn total(&self) -> f64 {
        self.compute + self.memory + self.overhead + self.all_reduce
    }

    /// Adds `other` part by part.
    pub fn add(&mut self, other: &Parts) {
        self.compute += other.compute;
        self.memory += other.memory;
        self.overhead += other.overhead;
        self.all_reduce += other.all_reduce;
    }
}

/// A request's share of the other requests' prompts per output token: `(batch - 1) / O`
/// (in a closed loop each of the other clients sends about one prompt while a request
/// generates its `O` tokens, and the engine runs it between or within decode steps).
fn prompt_share(point: &ServingPoint) -> f64 {
    let batch = point.concurrency.min(point.maximum_sequences);
    batch.saturating_sub(1) as f64 / point.output_tokens.max(1) as f64
}

/// One kind's times under one option, by part: `[decode, prefill]` each.
#[derive(Clone, Debug)]
pub(super) struct KindDetail {
    pub layers: Vec<[Parts; 2]>,
    pub first: [Parts; 2],
    pub last: [Parts; 2],
    pub unit: [f64; 2],
    /// Per layer: streaming its weights from the host, `[decode, prefill]`.
    pub layer_from_host: Vec<[f64; 2]>,
    /// Per layer: streaming its KV cache from the host, `[decode, prefill]`.
    pub kv_from_host: Vec<[f64; 2]>,
}

/// Tokens whose KV a step reads: every sequence's cached and new tokens.
pub(super) fn step_kv_tokens(shape: &StepShape) -> u64 {
    shape
        .segments
        .iter()
        .map(|s| {
            s.sequences
                .saturating_mul(s.cached.saturating_add(s.new_tokens))
        })
        .fold(0u64, u64::saturating_add)
}

/// What one device of a stage holds of each layer under one option, for pricing a step.
#[derive(Clone, Debug)]
pub(super) struct OptionShape {
    /// Tensor-parallel degree.
    pub degree: u32,
    /// Bytes of one offloaded unit (a routed expert group) on one rank.
    pub unit_bytes: u64,
    /// Per layer: weight bytes on one rank, and KV bytes one token adds on it.
    pub layers: Vec<(u64, u64)>,
    /// How much more than an even share of the routed experts' work a rank runs when
    /// their buffers are padded ([`super::mxfp4::expert_work_scale`]; `None`: the even
    /// share).
    pub expert_scale: Option<f64>,
}

/// Everything needed to price an arbitrary step shape on a placement: each device kind's
/// time model, where each node sits, the links, the engine and the options' shapes.
#[derive(Clone, Debug)]
pub(super) struct Pricing {
    /// Per device kind of the set, its time model.
    pub models: Vec<TimeModel>,
    /// Per kind, per group of its model: the slot of each node (a layer, `layers` for the
    /// first stage's nodes, `layers + 1` for the last's).
    pub slots: Vec<Vec<Vec<usize>>>,
    /// Per kind, its tensor-parallel groups' link.
    pub group_links: Vec<Option<LinkFigures>>,
    /// The host link.
    pub host: Option<LinkFigures>,
    /// The stage boundaries' link.
    pub boundary: Option<LinkFigures>,
    /// The engine's time profile.
    pub engine: EngineProfile,
    /// The hidden state's bytes per token (hidden size x activation bytes).
    pub hidden_token_bytes: u64,
    /// Sequences the placement provisions KV cache for (the problem's; a layer with some
    /// of them on the host streams that share of its KV).
    pub sequences: u64,
    /// The model's KV heads.
    pub kv_heads: f64,
    /// Whether attention keeps a latent (MLA) cache, read whole on every rank.
    pub latent: bool,
    /// Decoder layers.
    pub layer_count: usize,
    /// Per option of the problem, in order.
    pub options: Vec<OptionShape>,
}

/// The divisor of a group's bytes on one rank of `degree`: attention's KV read divides up
/// to the KV heads (a latent cache not at all); every other node's bytes by the degree.
pub(super) fn memory_divisor(group: &NodeGroup, degree: f64, kv_heads: f64, latent: bool) -> f64 {
    match group.cost.attention {
        Some(_) if latent => 1.0,
        Some(_) => degree.min(kv_heads),
        None => degree,
    }
}

/// The divisors of a group's FLOPs and bytes on one rank of `degree`: the degree, and
/// [`memory_divisor`] for its bytes; a routed expert group whose buffers are padded
/// (`expert_scale`: the rank's buffer over its even share) divides both by
/// `degree / expert_scale`, the rank's fraction of the expert being its buffer's (the
/// fullest rank's: every rank runs the kernel over its whole buffer, and the step waits for
/// the slowest).
pub(super) fn rank_divisors(
    group: &NodeGroup,
    degree: f64,
    kv_heads: f64,
    latent: bool,
    expert_scale: Option<f64>,
) -> (f64, f64) {
    match expert_scale {
        Some(scale) if group.cost.experts.is_some() => (degree / scale, degree / scale),
        _ => (degree, memory_divisor(group, degree, kv_heads, latent)),
    }
}

/// Every option's times by part, and the serving point's fixed figures.
#[derive(Clone, Debug)]
pub struct Timing {
    /// The serving point.
    pub point: ServingPoint,
    pub(super) share: f64,
    pub(super) chunk_overheads: f64,
    pub(super) fixed: [f64; 2],
    pub(super) options: Vec<(Vec<KindDetail>, [f64; 2])>,
    pub(super) pricing: Pricing,
    /// The links the figures use, described.
    pub links: Vec<String>,
}

fn ns(seconds: f64) -> u64 {
    // Times are finite and non-negative; a rounded nanosecond keeps comparisons exact.
    (seconds * 1e9).round().max(0.0) as u64
}

/// A slot's nanoseconds: TPOT's part is the decode step's plus `share` of the prompt's.
fn step_ns(parts: &[Parts; 2], share: f64) -> StepNs {
    StepNs {
        decode: ns(parts[0].total() + share * parts[1].total()),
        prefill: ns(parts[1].total()),
    }
}

fn pair_ns(pair: [f64; 2], share: f64) -> StepNs {
    StepNs {
        decode: ns(pair[0] + share * pair[1]),
        prefill: ns(pair[1]),
    }
}

pub(super) fn figures(link: &Link) -> LinkFigures {
    LinkFigures {
        class: match link.kind {
            LinkKind::Nvlink => LinkClass::Nvlink,
            LinkKind::Pcie => LinkClass::Pcie,
            LinkKind::Network => LinkClass::Network,
        },
        bandwidth_bytes_per_second: link.bandwidth_bytes_per_second as f64,
    }
}

/// Where a node sits: the first stage, a layer, the last stage.
pub(super) fn slot_of(node: &str, layers: usize) -> Option<usize> {
    let Some(tail) = node.strip_prefix("node.layer.") else {
        return Some(if node == "node.embedding" {
            layers
        } else {
            layers + 1
        });
    };
    let layer: usize = tail.split('.').next()?.parse().ok()?;
    (layer < layers).then_some(layer)
}

/// A node's time on one rank: FLOPs over `degree` (the compute divisor of
/// [`rank_divisors`]), bytes over `memory_divisor`, launches unchanged.
pub(super) fn on_rank(t: PhaseTime, degree: f64, memory_divisor: f64) -> Parts {
    let compute = t.compute_seconds / degree;
    let memory = t.memory_seconds / memory_divisor;
    if compute > memory {
        Parts {
            compute,
            overhead: t.overhead_seconds,
            ..Parts::default()
        }
    } else {
        Parts {
            memory,
            overhead: t.overhead_seconds,
            ..Parts::default()
        }
    }
}

/// The prompt's chunks of the budget, as the performance model runs them.
fn prefill_chunks(point: &ServingPoint) -> Vec<StepShape> {
    let mut chunks = Vec::new();
    let mut done = 0u64;
    while done < point.input_tokens {
        let chunk = (point.input_tokens - done).min(point.scheduled_token_budget.max(1));
        chunks.push(StepShape {
            segments: vec![Segment {
                sequences: 1,
                new_tokens: chunk,
                cached: done,
            }],
        });
        done += chunk;
    }
    chunks
}

#[allow(clippy::too_many_arguments)]
fn kind_detail(
    facts: &ModelFacts,
    model: &TimeModel,
    option: &ParallelOption,
    expert_scale: Option<f64>,
    link: Option<&LinkFigures>,
    host: Option<&LinkFigures>,
    point: &ServingPoint,
    engine: &EngineProfile,
) -> Result<KindDetail, PlacementError> {
    let n = facts.layer_count as usize;
    let degree = f64::from(option.degree);
    let kv_heads = facts.architecture.attention.key_value_heads.max(1) as f64;
    let latent = facts
        .architecture
        .layers
        .iter()
        .any(|l| l.mixer == MixerKind::LatentAttention);
    let decode = serving::decode_shape(point);
    let chunks = prefill_chunks(point);
    let mut slots = vec![[Parts::default(); 2]; n + 2];
    for group in &model.groups {
        // A latent cache is read whole on every rank; KV heads split up to their count;
        // padded expert buffers take their fullest rank's share.
        let (compute_divisor, memory_divisor) =
            rank_divisors(group, degree, kv_heads, latent, expert_scale);
        let d = on_rank(
            model.node_time(group, &decode, engine.decode_launch_factor),
            compute_divisor,
            memory_divisor,
        );
        let mut p = Parts::default();
        for chunk in &chunks {
            p.add(&on_rank(
                model.node_time(group, chunk, engine.prefill_launch_factor),
                compute_divisor,
                memory_divisor,
            ));
        }
        for node in &group.nodes {
            let slot = slot_of(node.as_str(), n).ok_or_else(|| {
                PlacementError::Model(format!("node {node}: its layer is not a decoder layer"))
            })?;
            slots[slot][0].add(&d);
            slots[slot][1].add(&p);
        }
    }
    let hidden = facts.architecture.hidden_size;
    let act = facts.activation_element_bytes;
    let bytes = |tokens: u64| {
        tokens
            .checked_mul(hidden)
            .and_then(|b| b.checked_mul(act))
            .ok_or_else(|| PlacementError::Model("all-reduce bytes overflow".to_owned()))
    };
    if option.degree > 1 {
        // `time` refuses an option of degree > 1 without its link before it gets here.
        let link = link.ok_or_else(|| {
            PlacementError::Internal("a tensor-parallel option without its link".to_owned())
        })?;
        let decode_bytes = bytes(decode.tokens())?;
        let mut prefill_reduce = 0.0;
        for chunk in &chunks {
            prefill_reduce += 2.0
                * communication::all_reduce(link, option.degree, bytes(chunk.tokens())?).seconds;
        }
        let decode_reduce =
            2.0 * communication::all_reduce(link, option.degree, decode_bytes).seconds;
        for slot in slots.iter_mut().take(n) {
            slot[0].all_reduce += decode_reduce;
            slot[1].all_reduce += prefill_reduce;
        }
    }
    let unit = match host {
        Some(h) if option.unit_bytes > 0 => {
            let once = communication::host_to_device(h, option.unit_bytes);
            [once, once * chunks.len() as f64]
        }
        _ => [0.0, 0.0],
    };
    // Streaming an offloaded layer: its weights cross the host link once per step (each
    // decode step, each prefill chunk); its KV cache, the tokens the step reads (every
    // sequence's cached and new tokens).
    let (mut layer_from_host, mut kv_from_host) = (Vec::new(), Vec::new());
    if let Some(h) = host {
        let decode_tokens = step_kv_tokens(&decode);
        for layer in &option.layers {
            let once = communication::host_to_device(h, layer.weight_bytes);
            layer_from_host.push([once, once * chunks.len() as f64]);
            let decode_kv = communication::host_to_device(
                h,
                decode_tokens.saturating_mul(layer.kv_token_bytes),
            );
            let prefill_kv: f64 = chunks
                .iter()
                .map(|c| {
                    communication::host_to_device(
                        h,
                        step_kv_tokens(c).saturating_mul(layer.kv_token_bytes),
                    )
                })
                .sum();
            kv_from_host.push([decode_kv, prefill_kv]);
        }
    }
    let last = slots.pop().unwrap_or_default();
    let first = slots.pop().unwrap_or_default();
    Ok(KindDetail {
        layers: slots,
        first,
        last,
        unit,
        layer_from_host,
        kv_from_host,
    })
}

/// Attaches times at `serving` to every option of `problem` (the set's kinds in order) and
/// sets its fixed time; returns the figures by part for the breakdown.
pub fn attach(
    problem: &mut Problem,
    facts: &ModelFacts,
    set: &DeviceSet,
    serving: &Serving,
) -> Result<Timing, PlacementError> {
    let point = ServingPoint {
        concurrency: serving.concurrency,
        input_tokens: serving.input_tokens,
        output_tokens: serving.output_tokens,
        engine: serving.engine.clone(),
        scheduled_token_budget: facts.scheduled_tokens,
        maximum_sequences: facts.sequences,
        simulated_requests: serving
            .simulated_requests
            .unwrap_or_else(|| serving.concurrency.saturating_mul(4)),
        lengths: serving.lengths.clone(),
        context_tokens: Some(facts.context_tokens),
        chunked_prefill: serving.chunked_prefill,
    };
    point
        .validate()
        .map_err(|e| PlacementError::Usage(e.to_string()))?;
    // The engine as it runs at the point: the provisioned context (vLLM V0 turns chunked
    // prefill on above 32K) and its `enable_chunked_prefill` when given.
    let engine = engine_profile(&serving.engine)
        .ok_or_else(|| {
            PlacementError::Usage(format!(
                "--engine {}: not one of {}",
                serving.engine,
                engine_names()
            ))
        })?
        .for_point(&point);
    // The linear figures (every option's per-layer times, the solver's estimate) are at the
    // mean lengths; the simulation draws each request's own.
    let mean = point.at_mean_lengths();
    let mut models = Vec::with_capacity(set.kinds.len());
    for kind in &set.kinds {
        let figures = kind.description.performance.as_ref().ok_or_else(|| {
            PlacementError::Usage(format!(
                "{}: no `performance` figures (peak_gflops, memory_bandwidth_gb_per_second, launch_overhead_nanoseconds): a time objective or serving point prices every device of the set",
                kind.file.display()
            ))
        })?;
        let model = TimeModel::new(
            &facts.request,
            |id| facts.providers.get(id),
            &kind.description.name,
            figures,
            Calibration::default(),
        )
        .map_err(|e| PlacementError::Model(e.to_string()))?;
        models.push(model);
    }
    let chunks = prefill_chunks(&mean).len() as f64;
    let share = prompt_share(&mean);
    let host = set.host_link.as_ref().map(figures);
    if problem.host_bytes.is_some() && host.is_none() {
        // Offloaded bytes cross the host link every step: unpriced, they would look free.
        return Err(set.missing_link(0, LinkRole::Host));
    }
    let boundary_link = set.boundary_link().map(figures);
    let decode_tokens = serving::decode_shape(&mean).tokens();
    let hidden_bytes = |tokens: u64| {
        tokens
            .saturating_mul(facts.architecture.hidden_size)
            .saturating_mul(facts.activation_element_bytes)
    };
    let boundary = match &boundary_link {
        Some(link) => {
            let decode = communication::point_to_point(link, hidden_bytes(decode_tokens));
            let mut prefill = 0.0;
            for chunk in prefill_chunks(&mean) {
                prefill += communication::point_to_point(link, hidden_bytes(chunk.tokens()));
            }
            [decode, prefill]
        }
        None => [0.0, 0.0],
    };
    let padding = super::mxfp4::padding_of(facts, set);
    let mut scales = Vec::with_capacity(problem.options.len());
    for option in &problem.options {
        scales.push(
            super::mxfp4::expert_work_scale(
                facts,
                &padding,
                u64::from(option.degree),
                option.split,
            )
            .map_err(|e| PlacementError::Internal(format!("an option the shares accepted: {e}")))?,
        );
    }
    let mut options = Vec::with_capacity(problem.options.len());
    for (option, &expert_scale) in problem.options.iter_mut().zip(&scales) {
        let mut kinds = Vec::with_capacity(models.len());
        let mut times = Vec::with_capacity(models.len());
        for (k, model) in models.iter().enumerate() {
            let link = set.group_link(k).map(figures);
            if option.degree > 1 && link.is_none() {
                return Err(set.missing_link(k, LinkRole::Peer));
            }
            let detail = kind_detail(
                facts,
                model,
                option,
                expert_scale,
                link.as_ref(),
                host.as_ref(),
                &mean,
                &engine,
            )?;
            times.push(KindTimes {
                layers: detail.layers.iter().map(|l| step_ns(l, share)).collect(),
                first: step_ns(&detail.first, share),
                last: step_ns(&detail.last, share),
                unit: pair_ns(detail.unit, share),
                layer_from_host: detail
                    .layer_from_host
                    .iter()
                    .map(|p| pair_ns(*p, share))
                    .collect(),
                kv_from_host: detail
                    .kv_from_host
                    .iter()
                    .map(|p| pair_ns(*p, share))
                    .collect(),
            });
            kinds.push(detail);
        }
        option.time = Some(OptionTimes {
            kinds: times,
            boundary: pair_ns(boundary, share),
        });
        options.push((kinds, boundary));
    }
    let pricing = pricing(
        facts,
        set,
        problem,
        &scales,
        models,
        host,
        boundary_link,
        engine,
    )?;
    if pricing.boundary.is_none() && problem.pipeline_stages != Some(1) {
        // Without link figures a boundary cannot be priced: one stage only.
        problem.pipeline_stages = Some(1);
    }
    // The other requests' prompts pay their host time per chunk, not their request
    // overhead (that is spent before the engine schedules them).
    // A decode step's host time is for its sequences; a prompt chunk's for one. The
    // estimate takes the host time of the set's devices (an engine whose host path differs
    // on one device, vLLM V0, is estimated as launched on all of them; the simulation of
    // the chosen placement takes its own count).
    let engine = engine.on_devices(set.device_count());
    let chunk_host = engine.host_seconds(1);
    let fixed = [
        engine.host_seconds(mean.concurrency.min(mean.maximum_sequences)),
        engine.request_overhead_seconds + chunks * chunk_host,
    ];
    problem.fixed_time = Some(StepNs {
        decode: ns(fixed[0] + share * chunks * chunk_host),
        prefill: ns(fixed[1]),
    });
    let mut links = Vec::new();
    for (k, kind) in set.kinds.iter().enumerate() {
        if let Some(l) = set.group_link(k) {
            links.push(format!(
                "{}: tensor-parallel groups over {:?} at {:.1} GB/s",
                kind.description.name,
                l.kind,
                l.bandwidth_bytes_per_second as f64 / 1e9
            ));
        }
    }
    if let Some(l) = set.boundary_link() {
        links.push(format!(
            "stage boundaries over {:?} at {:.1} GB/s (the set's slowest link)",
            l.kind,
            l.bandwidth_bytes_per_second as f64 / 1e9
        ));
    }
    if let Some(l) = &set.host_link {
        links.push(format!(
            "host transfers over {:?} at {:.1} GB/s",
            l.kind,
            l.bandwidth_bytes_per_second as f64 / 1e9
        ));
    }
    Ok(Timing {
        point,
        share,
        chunk_overheads: chunks * chunk_host,
        fixed,
        options,
        pricing,
        links,
    })
}

/// What pricing an arbitrary step needs, gathered once per problem (`scales`: each
/// option's expert work scale).
#[allow(clippy::too_many_arguments)]
fn pricing(
    facts: &ModelFacts,
    set: &DeviceSet,
    problem: &Problem,
    scales: &[Option<f64>],
    models: Vec<TimeModel>,
    host: Option<LinkFigures>,
    boundary: Option<LinkFigures>,
    engine: EngineProfile,
) -> Result<Pricing, PlacementError> {
    let n = facts.layer_count as usize;
    let mut slots = Vec::with_capacity(models.len());
    for model in &models {
        let mut groups = Vec::with_capacity(model.groups.len());
        for group in &model.groups {
            let mut at = Vec::with_capacity(group.nodes.len());
            for node in &group.nodes {
                at.push(slot_of(node.as_str(), n).ok_or_else(|| {
                    PlacementError::Model(format!("node {node}: its layer is not a decoder layer"))
                })?);
            }
            groups.push(at);
        }
        slots.push(groups);
    }
    // A step schedules at most the budget's tokens: with this product in range, a step's
    // hidden-state bytes never overflow.
    let hidden_token_bytes = facts
        .architecture
        .hidden_size
        .checked_mul(facts.activation_element_bytes)
        .filter(|b| b.checked_mul(facts.scheduled_tokens.max(1)).is_some())
        .ok_or_else(|| PlacementError::Model("a step's hidden-state bytes overflow".to_owned()))?;
    Ok(Pricing {
        group_links: (0..models.len())
            .map(|k| set.group_link(k).map(figures))
            .collect(),
        models,
        slots,
        host,
        boundary,
        engine,
        hidden_token_bytes,
        sequences: problem.sequences,
        kv_heads: facts.architecture.attention.key_value_heads.max(1) as f64,
        latent: facts
            .architecture
            .layers
            .iter()
            .any(|l| l.mixer == MixerKind::LatentAttention),
        layer_count: n,
        options: problem
            .options
            .iter()
            .zip(scales)
            .map(|(o, &expert_scale)| OptionShape {
                degree: o.degree,
                unit_bytes: o.unit_bytes,
                layers: o
                    .layers
                    .iter()
                    .map(|l| (l.weight_bytes, l.kv_token_bytes))
                    .collect(),
                expert_scale,
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_find_their_slot() {
        assert_eq!(slot_of("node.layer.3.q_proj", 4), Some(3));
        assert_eq!(slot_of("node.layer.4.q_proj", 4), None);
        assert_eq!(slot_of("node.embedding", 4), Some(4));
        assert_eq!(slot_of("node.lm_head", 4), Some(5));
    }

    #[test]
    fn a_rank_takes_its_share() {
        let t = PhaseTime {
            compute_seconds: 4.0,
            memory_seconds: 8.0,
            overhead_seconds: 1.0,
            seconds: 9.0,
        };
        let p = on_rank(t, 4.0, 2.0);
        assert_eq!((p.compute, p.memory, p.overhead), (0.0, 4.0, 1.0));
        let p = on_rank(t, 1.0, 4.0);
        assert_eq!((p.compute, p.memory), (4.0, 0.0));
    }
}
