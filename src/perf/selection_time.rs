//! Time costs of each node's candidate providers at a serving point, for the selection's
//! time objectives (`plan --objective min-tpot|min-ttft|max-throughput`).
//!
//! A candidate's costs are its node's roofline time with the candidate's efficiency class
//! ([`TimeModel::node_time`], the same rule as the plan's performance summary), in integer
//! picoseconds (`round(seconds x 10^12)`), per metric of the `solve` format
//! (docs/selection-problem.md):
//!
//! * `tpot`: one steady decode step ([`serving::decode_shape`]: `b = min(C, max_sequences)`
//!   requests at context `I + O/2`, the engine's decode launch factor);
//! * `ttft`: one prompt's prefill in chunks of the scheduled-token budget (the chunks of
//!   [`serving::prefill_time`], the engine's prefill launch factor);
//! * `throughput`: the device time of one batch of `b` requests, `b x ttft + (O - 1) x tpot`,
//!   whose minimum maximises output tokens per second (`b x O` tokens over it).
//!
//! The engine's per-step host time is the same for every choice and is left out; so is any
//! storage-profile effect: the model's KV bytes do not depend on the profile, so no
//! resource gets profile time costs.

use std::collections::BTreeMap;

use crate::request::{NodeId, PlanRequest, ProviderId};
use crate::selection::TimeCosts;
use crate::synth::DevicePerformance;

use super::calibration::Calibration;
use super::efficiency::class_of;
use super::engine_profile::engine_profile;
use super::model::{NodeGroup, TimeModel};
use super::profile::{profiles, NodeCost};
use super::serving::{decode_shape, ServingPoint};
use super::work::{Segment, StepShape};
use super::PerfError;

/// Prices a request's candidates at one serving point on one device.
pub struct CandidateTimes {
    costs: BTreeMap<NodeId, NodeCost>,
    model: TimeModel,
    point: ServingPoint,
    decode_launch: f64,
    prefill_launch: f64,
}

/// Seconds to integer picoseconds (non-negative, rounded to nearest; the model's times
/// are finite and far below the `u64` range).
fn picoseconds(seconds: f64) -> u64 {
    let ps = (seconds * 1e12).round();
    if ps.is_finite() && ps > 0.0 {
        ps.min(u64::MAX as f64) as u64
    } else {
        0
    }
}

impl CandidateTimes {
    /// The pricer of `request`'s nodes on the device `device_name` with `figures`, at
    /// `point` (its engine's profile).
    pub fn new(
        request: &PlanRequest,
        device_name: &str,
        figures: &DevicePerformance,
        point: &ServingPoint,
    ) -> Result<CandidateTimes, PerfError> {
        point.validate()?;
        let engine = engine_profile(&point.engine).ok_or_else(|| PerfError::UnknownEngine {
            name: point.engine.clone(),
            known: super::engine_names(),
        })?;
        let costs = profiles(request)?
            .into_iter()
            .map(|p| (p.node_id, p.cost))
            .collect();
        Ok(CandidateTimes {
            costs,
            model: TimeModel {
                groups: Vec::new(),
                device: figures.clone(),
                device_name: device_name.to_owned(),
                calibration: Calibration::default(),
                memory_factor: super::efficiency::device_memory_factor(device_name),
            },
            point: point.clone(),
            decode_launch: engine.decode_launch_factor,
            prefill_launch: engine.prefill_launch_factor,
        })
    }

    /// The time costs of `provider` at `node` (`None` for a node the request's program
    /// does not have).
    pub fn costs(&self, node: &NodeId, provider: &ProviderId) -> Option<TimeCosts> {
        let cost = self.costs.get(node)?;
        let group = NodeGroup {
            cost: cost.clone(),
            class: class_of(provider),
            nodes: Vec::new(),
        };
        let decode = self
            .model
            .node_time(&group, &decode_shape(&self.point), self.decode_launch)
            .seconds;
        let mut prefill = 0.0;
        let mut done = 0u64;
        let budget = self.point.scheduled_token_budget.max(1);
        while done < self.point.input_tokens {
            let chunk = (self.point.input_tokens - done).min(budget);
            let shape = StepShape {
                segments: vec![Segment {
                    sequences: 1,
                    new_tokens: chunk,
                    cached: done,
                }],
            };
            prefill += self
                .model
                .node_time(&group, &shape, self.prefill_launch)
                .seconds;
            done += chunk;
        }
        let batch = self.point.concurrency.min(self.point.maximum_sequences) as f64;
        let steps = self.point.output_tokens.saturating_sub(1) as f64;
        Some(TimeCosts {
            tpot: Some(picoseconds(decode)),
            ttft: Some(picoseconds(prefill)),
            throughput: Some(picoseconds(batch * prefill + steps * decode)),
        })
    }
}
