//! The time of an arbitrary scheduler step on a chosen placement, so the closed-loop
//! serving simulation (`crate::perf::serving::simulate_steps`) runs a placement across
//! devices the way it runs one device.
//!
//! A step of shape `S` (the decoding requests at their mean context, the prompt chunks)
//! costs, summed over the placement's stages one after another (no micro-batching: the
//! batch of a step passes every stage before the next step starts):
//!
//! * every node of the stage's layers (and the embedding on the first stage, the final
//!   norm, head and sampling on the last) at `S` on the stage's device kind, on one rank of
//!   its tensor-parallel group: FLOPs / r, bytes / r (attention's KV read / min(r, KV
//!   heads); a latent cache whole; padded MXFP4 expert buffers their fullest rank's
//!   share), launches unchanged (the rules of [`super::timing`]);
//! * two all-reduces per layer of `S`'s tokens x hidden x activation bytes over the
//!   group's link (when r > 1);
//! * the stage's offloaded expert groups and streamed layers' weights once, its host-held
//!   KV layers' bytes of the tokens `S` reads;
//! * one send of `S`'s hidden states per stage boundary.
//!
//! The engine's host time per step is added by the simulation.

use serde::Serialize;

use crate::perf::communication;
use crate::perf::work::StepShape;

use super::problem::Solution;
use super::timing::{on_rank, rank_divisors, step_kv_tokens, Parts, Pricing};
use super::PlacementError;

/// One stage's share of a step's pricing.
#[derive(Clone, Debug)]
struct StagePrice {
    /// The stage's device kind.
    kind: usize,
    /// Per group of the kind's model: its nodes on the stage.
    nodes: Vec<f64>,
    /// Its decoder layers (each two all-reduces when the degree is above one).
    layers: f64,
    /// Per step, seconds of weights from the host (offloaded expert groups and streamed
    /// layers): they cross the host link once whatever the step's shape.
    weights_from_host: f64,
    /// Per layer whose KV cache is on the host, the bytes one token's KV takes on a rank
    /// and the share of the sequences whose KV is there (1 but for a partly offloaded
    /// layer).
    kv_from_host: Vec<(u64, f64)>,
}

/// A step's time by part, seconds (on the critical path: stages one after another).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct StepParts {
    /// Nodes bound by compute.
    pub compute_seconds: f64,
    /// Nodes bound by memory.
    pub memory_seconds: f64,
    /// Kernel launches.
    pub launch_seconds: f64,
    /// Tensor-parallel all-reduces.
    pub all_reduce_seconds: f64,
    /// Sends between stages.
    pub send_seconds: f64,
    /// Transfers from the host.
    pub host_transfer_seconds: f64,
}

impl StepParts {
    /// The step's device time: the sum of its parts.
    pub fn seconds(&self) -> f64 {
        self.compute_seconds
            + self.memory_seconds
            + self.launch_seconds
            + self.all_reduce_seconds
            + self.send_seconds
            + self.host_transfer_seconds
    }

    /// Adds `other` part by part.
    pub fn add(&mut self, other: &StepParts) {
        self.add_scaled(other, 1.0);
    }

    /// Adds `weight` times `other`, part by part.
    pub fn add_scaled(&mut self, other: &StepParts, weight: f64) {
        self.compute_seconds += weight * other.compute_seconds;
        self.memory_seconds += weight * other.memory_seconds;
        self.launch_seconds += weight * other.launch_seconds;
        self.all_reduce_seconds += weight * other.all_reduce_seconds;
        self.send_seconds += weight * other.send_seconds;
        self.host_transfer_seconds += weight * other.host_transfer_seconds;
    }
}

/// Prices steps of any shape on one placement.
#[derive(Clone, Debug)]
pub struct StepPricer<'a> {
    pricing: &'a Pricing,
    degree: u32,
    /// The option's expert work scale (padded expert buffers).
    expert_scale: Option<f64>,
    stages: Vec<StagePrice>,
}

impl<'a> StepPricer<'a> {
    /// The pricer of `solution` (an option and stages of the problem `pricing` was
    /// gathered from).
    pub(super) fn new(
        pricing: &'a Pricing,
        solution: &Solution,
    ) -> Result<StepPricer<'a>, PlacementError> {
        let internal = |what: &str| PlacementError::Internal(format!("step pricing: {what}"));
        let option = pricing
            .options
            .get(solution.option as usize)
            .ok_or_else(|| internal("a solution of an unknown option"))?;
        let n = pricing.layer_count;
        let last = solution.stages.len().saturating_sub(1);
        let mut stages = Vec::with_capacity(solution.stages.len());
        let mut start = 0usize;
        for (s, stage) in solution.stages.iter().enumerate() {
            let kind = stage.kind as usize;
            let end = (stage.end_layer as usize).min(n);
            let slots = pricing
                .slots
                .get(kind)
                .ok_or_else(|| internal("a stage of an unknown device kind"))?;
            if option.degree > 1 && pricing.group_links.get(kind).and_then(|l| *l).is_none() {
                return Err(internal("a tensor-parallel stage without its group's link"));
            }
            let on_stage = |slot: usize| {
                (start..end).contains(&slot)
                    || (s == 0 && slot == n)
                    || (s == last && slot == n + 1)
            };
            let nodes = slots
                .iter()
                .map(|group| group.iter().filter(|&&slot| on_stage(slot)).count() as f64)
                .collect();
            let mut weights_from_host = 0.0;
            let mut kv_from_host = Vec::new();
            if let Some(host) = &pricing.host {
                weights_from_host += stage.offloaded_units as f64
                    * communication::host_to_device(host, option.unit_bytes);
                let streamed = (start + stage.offloaded_layers as usize).min(end);
                for &(weights, _) in option.layers.get(start..streamed).unwrap_or(&[]) {
                    weights_from_host += communication::host_to_device(host, weights);
                }
                let kv_end = (start + stage.kv_offloaded_layers as usize).min(end);
                for &(_, per_token) in option.layers.get(start..kv_end).unwrap_or(&[]) {
                    kv_from_host.push((per_token, 1.0));
                }
                if stage.kv_offloaded_sequences > 0 {
                    if let Some(&(_, per_token)) = option.layers.get(kv_end) {
                        let share =
                            stage.kv_offloaded_sequences as f64 / pricing.sequences.max(1) as f64;
                        kv_from_host.push((per_token, share));
                    }
                }
            } else if stage.offloaded_units > 0
                || stage.offloaded_layers > 0
                || stage.kv_offloaded_layers > 0
                || stage.kv_offloaded_sequences > 0
            {
                return Err(internal("an offloading stage without a host link"));
            }
            stages.push(StagePrice {
                kind,
                nodes,
                layers: end.saturating_sub(start) as f64,
                weights_from_host,
                kv_from_host,
            });
            start = end;
        }
        if stages.len() > 1 && pricing.boundary.is_none() {
            return Err(internal("several stages without a boundary link"));
        }
        Ok(StepPricer {
            pricing,
            degree: option.degree,
            expert_scale: option.expert_scale,
            stages,
        })
    }

    /// The device time of a step of `shape`, launches weighted by `launch_factor`, by part.
    pub fn price(&self, shape: &StepShape, launch_factor: f64) -> StepParts {
        let p = self.pricing;
        let degree = f64::from(self.degree);
        // At most the budget's tokens: the product is in range (checked when gathered).
        let hidden_bytes = shape.tokens().saturating_mul(p.hidden_token_bytes);
        let kv_tokens = step_kv_tokens(shape);
        let mut out = StepParts::default();
        for stage in &self.stages {
            let model = &p.models[stage.kind];
            let mut nodes = Parts::default();
            for (group, &count) in model.groups.iter().zip(&stage.nodes) {
                if count == 0.0 {
                    continue;
                }
                let (compute_divisor, memory_divisor) =
                    rank_divisors(group, degree, p.kv_heads, p.latent, self.expert_scale);
                let t = on_rank(
                    model.node_time(group, shape, launch_factor),
                    compute_divisor,
                    memory_divisor,
                );
                nodes.compute += count * t.compute;
                nodes.memory += count * t.memory;
                nodes.overhead += count * t.overhead;
            }
            out.compute_seconds += nodes.compute;
            out.memory_seconds += nodes.memory;
            out.launch_seconds += nodes.overhead;
            if let Some(link) = p.group_links[stage.kind]
                .as_ref()
                .filter(|_| self.degree > 1)
            {
                out.all_reduce_seconds += stage.layers
                    * 2.0
                    * communication::all_reduce(link, self.degree, hidden_bytes).seconds;
            }
            if let Some(host) = &p.host {
                out.host_transfer_seconds += stage.weights_from_host;
                for &(per_token, share) in &stage.kv_from_host {
                    out.host_transfer_seconds += share
                        * communication::host_to_device(host, kv_tokens.saturating_mul(per_token));
                }
            }
        }
        if let Some(link) = &p.boundary {
            out.send_seconds = self.stages.len().saturating_sub(1) as f64
                * communication::point_to_point(link, hidden_bytes);
        }
        out
    }
}
