//! The roofline time of a step: per node, `max(FLOPs / (eff_c x peak[type]),
//! bytes / (m_device x eff_m x bandwidth)) + kernels x launch`, unless a calibration entry gives the
//! node's measured time; a step is the sum over its nodes.

use serde::Serialize;

use crate::request::{NodeId, PlanRequest, ProviderId};
use crate::synth::DevicePerformance;

use super::calibration::Calibration;
use super::efficiency::{class_of, device_memory_factor, EfficiencyClass};
use super::profile::{profiles, ComputeType, NodeCost};
use super::work::{work, StepShape};
use super::PerfError;

/// The time of one node or one step, split the way the roofline does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct PhaseTime {
    /// Sum of the nodes' compute times (FLOPs at the achievable peak).
    pub compute_seconds: f64,
    /// Sum of the nodes' memory times (bytes at the achievable bandwidth).
    pub memory_seconds: f64,
    /// Launch overheads and the engine's host time.
    pub overhead_seconds: f64,
    /// The time: each node's larger of compute and memory (or its calibrated time), plus
    /// the overheads.
    pub seconds: f64,
}

impl PhaseTime {
    fn add(&mut self, other: &PhaseTime) {
        self.compute_seconds += other.compute_seconds;
        self.memory_seconds += other.memory_seconds;
        self.overhead_seconds += other.overhead_seconds;
        self.seconds += other.seconds;
    }

    /// Whether the time is bound by compute (else by memory).
    pub fn compute_bound(&self) -> bool {
        self.compute_seconds > self.memory_seconds
    }
}

/// Nodes with the same costs and class, priced once.
#[derive(Clone, Debug)]
pub struct NodeGroup {
    /// Their costs.
    pub cost: NodeCost,
    /// Its provider's efficiency class.
    pub class: EfficiencyClass,
    /// The nodes of the group.
    pub nodes: Vec<NodeId>,
}

/// A request's nodes with their chosen providers on one device.
#[derive(Clone, Debug)]
pub struct TimeModel {
    /// Groups of identical nodes, in program order of their first node.
    pub groups: Vec<NodeGroup>,
    /// The device's figures.
    pub device: DevicePerformance,
    /// The device's name (calibration entries name it).
    pub device_name: String,
    /// Measured kernel times, if any.
    pub calibration: Calibration,
    /// The device's memory factor: in decode steps (every sequence adds one token) every
    /// class's achievable bandwidth is `memory_factor x eff_m x` the datasheet bandwidth
    /// ([`super::efficiency::device_memory_factor`]).
    pub memory_factor: f64,
}

impl TimeModel {
    /// The model of `request` with each node's provider from `providers` (a node it does
    /// not name is an error naming the node).
    pub fn new<'a>(
        request: &PlanRequest,
        providers: impl Fn(&NodeId) -> Option<&'a ProviderId>,
        device_name: &str,
        device: &DevicePerformance,
        calibration: Calibration,
    ) -> Result<Self, PerfError> {
        let mut groups: Vec<NodeGroup> = Vec::new();
        for profile in profiles(request)? {
            let provider = providers(&profile.node_id).ok_or_else(|| PerfError::Request {
                node: profile.node_id.to_string(),
                message: "has no chosen provider".to_owned(),
            })?;
            let class = class_of(provider);
            match groups
                .iter_mut()
                .find(|g| g.class.name == class.name && g.cost == profile.cost)
            {
                Some(group) => group.nodes.push(profile.node_id),
                None => groups.push(NodeGroup {
                    nodes: vec![profile.node_id],
                    cost: profile.cost,
                    class,
                }),
            }
        }
        Ok(TimeModel {
            groups,
            device: device.clone(),
            device_name: device_name.to_owned(),
            calibration,
            memory_factor: device_memory_factor(device_name),
        })
    }

    /// Peak FLOP/s of `compute` on the device: the type's own peak, else the next wider
    /// type's (fp4 -> fp8 -> bf16 -> fp32; int8 -> bf16; bf16 -> fp32; fp32 -> bf16).
    pub fn peak(&self, compute: ComputeType) -> f64 {
        let p = &self.device.peak_gflops;
        let order: &[Option<u64>] = match compute {
            ComputeType::Fp4 => &[p.fp4, p.fp8, p.bf16, p.fp32],
            ComputeType::Fp8 => &[p.fp8, p.bf16, p.fp32],
            ComputeType::Int8 => &[p.int8, p.bf16, p.fp32],
            ComputeType::Bf16 => &[p.bf16, p.fp32],
            ComputeType::Fp32 => &[p.fp32, p.bf16],
        };
        order.iter().flatten().next().copied().unwrap_or(1) as f64 * 1e9
    }

    /// The time of one node of `group` in a step of `shape`, launches weighted by
    /// `launch_factor`.
    pub fn node_time(&self, group: &NodeGroup, shape: &StepShape, launch_factor: f64) -> PhaseTime {
        let p = &group.cost;
        let w = work(p, shape);
        let mut compute = 0.0;
        for t in ComputeType::ALL {
            let flops = w.flops[t.index()];
            if flops > 0.0 {
                compute += flops / (group.class.compute * self.peak(t));
            }
        }
        let bandwidth = self.device.memory_bandwidth_gb_per_second as f64 * 1e9;
        // The device's memory factor is fitted on decode steps and prices them; a step with
        // a prompt chunk streams its weights through GEMM tiles at the class's fraction.
        let factor = if shape.segments.iter().all(|s| s.new_tokens <= 1) {
            self.memory_factor
        } else {
            1.0
        };
        let memory = w.bytes / (group.class.memory * factor * bandwidth);
        let overhead =
            w.kernels * self.device.launch_overhead_nanoseconds as f64 * 1e-9 * launch_factor;
        let rows = match p.rows {
            super::profile::Rows::Tokens => shape.tokens() as f64,
            super::profile::Rows::Sequences => shape.sequences() as f64,
            super::profile::Rows::Fixed => 1.0,
        };
        let dtype = match (p.matrix_elements, p.attention) {
            (0, Some(a)) => a.compute,
            _ => p.matrix_compute,
        };
        match self
            .calibration
            .seconds(p, &self.device_name, dtype.name(), rows)
        {
            // A measured time includes the launch; it is attributed to the bound side.
            Some(measured) => PhaseTime {
                compute_seconds: if compute > memory { measured } else { 0.0 },
                memory_seconds: if compute > memory { 0.0 } else { measured },
                overhead_seconds: 0.0,
                seconds: measured,
            },
            None => PhaseTime {
                compute_seconds: compute,
                memory_seconds: memory,
                overhead_seconds: overhead,
                seconds: compute.max(memory) + overhead,
            },
        }
    }

    /// The time of a step of `shape`: every node, launches weighted by `launch_factor`.
    pub fn step_time(&self, shape: &StepShape, launch_factor: f64) -> PhaseTime {
        let mut total = PhaseTime::default();
        for group in &self.groups {
            let mut one = self.node_time(group, shape, launch_factor);
            let n = group.nodes.len() as f64;
            one.compute_seconds *= n;
            one.memory_seconds *= n;
            one.overhead_seconds *= n;
            one.seconds *= n;
            total.add(&one);
        }
        total
    }
}
