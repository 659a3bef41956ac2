//! A device's performance figures (peak dense throughput per data type, memory bandwidth,
//! kernel launch overhead): the optional `performance` object of a device file.
//!
//! The figures feed the performance model (`crate::perf`), never the plan request: a
//! synthesized request is the same with or without them. Units are whole numbers so the
//! description stays exact (`Eq`): GFLOP/s (10^9 operations per second), GB/s (10^9 bytes
//! per second) and nanoseconds. The figures of the shipped device files and their
//! datasheets are listed in `docs/performance-model.md`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Peak dense (no sparsity) throughput per data type, in GFLOP/s (or GOP/s for int8). A
/// data type the device has no fast path for is absent; the model then computes it at the
/// next wider type the device has (fp4 -> fp8 -> bf16 -> fp32).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PeakThroughput {
    /// IEEE single precision (CUDA cores / GPU ALUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp32: Option<u64>,
    /// TensorFloat-32 tensor-core math.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tf32: Option<u64>,
    /// bfloat16 / float16 tensor-core math (dense).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bf16: Option<u64>,
    /// 8-bit floating point tensor-core math (dense).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp8: Option<u64>,
    /// 8-bit integer tensor-core math (dense), GOP/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub int8: Option<u64>,
    /// 4-bit floating point tensor-core math (dense).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp4: Option<u64>,
}

/// The performance figures of a device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DevicePerformance {
    /// Peak dense throughput per data type (GFLOP/s).
    pub peak_gflops: PeakThroughput,
    /// Peak memory bandwidth of the device memory (GB/s, 10^9 bytes per second).
    pub memory_bandwidth_gb_per_second: u64,
    /// Fixed cost of one kernel launch on the device's critical path (nanoseconds): the gap
    /// between dependent kernels launched one by one from the host.
    pub launch_overhead_nanoseconds: u64,
}

impl DevicePerformance {
    /// Why these figures cannot be used, naming the field, if they cannot.
    pub fn problem(&self) -> Option<(&'static str, String)> {
        if self.memory_bandwidth_gb_per_second == 0 {
            return Some((
                "performance.memory_bandwidth_gb_per_second",
                "must be positive".to_owned(),
            ));
        }
        let p = &self.peak_gflops;
        let all = [
            ("fp32", p.fp32),
            ("tf32", p.tf32),
            ("bf16", p.bf16),
            ("fp8", p.fp8),
            ("int8", p.int8),
            ("fp4", p.fp4),
        ];
        if let Some((name, _)) = all.iter().find(|(_, v)| *v == Some(0)) {
            return Some((
                "performance.peak_gflops",
                format!("{name} is zero: leave it out when the device has no such path"),
            ));
        }
        if p.fp32.is_none() && p.bf16.is_none() {
            return Some((
                "performance.peak_gflops",
                "needs at least fp32 or bf16 (the types every model computes in)".to_owned(),
            ));
        }
        None
    }
}
