//! Communication time across devices: an alpha-beta model per link (`time = latency +
//! bytes / bandwidth`) for the collectives and transfers a placement adds to a step.
//!
//! * tensor parallelism: an all-reduce of the hidden state after attention and after the
//!   feed-forward of every transformer layer (two per layer, Megatron-LM's row-parallel
//!   linears), `tokens x hidden x activation bytes` each, priced as NCCL's ring and tree
//!   algorithms and the faster taken (NCCL's tuner picks the faster one the same way);
//! * pipeline parallelism: one point-to-point send of the hidden state per stage boundary;
//! * host offload: the offloaded weight bytes cross the host link once per step; KV on the
//!   host, the bytes of the tokens the step reads.
//!
//! The latencies are NCCL's own model constants (`src/graph/tuning.cc`, NVIDIA/nccl, the
//! LL protocol's `baseLat` and per-hop `hwLat`); the bandwidths are the device set's
//! links (datasheet figures, cited in docs/placement.md). Every figure says which rule it
//! follows (docs/placement.md, "Time across devices").

use serde::Serialize;

/// The hardware class of a link: it selects NCCL's per-hop latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkClass {
    /// NVLink (NVSwitch or bridges).
    Nvlink,
    /// PCIe through the host.
    Pcie,
    /// A network between nodes (InfiniBand, RoCE).
    Network,
}

/// A link's figures.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LinkFigures {
    /// Its class.
    pub class: LinkClass,
    /// Bandwidth per direction per device, bytes per second.
    pub bandwidth_bytes_per_second: f64,
}

/// NCCL's fixed latency of a ring all-reduce with the LL protocol, seconds
/// (`baseLat[Ring][LL]` = 3.6 us, NVIDIA/nccl `src/graph/tuning.cc`).
pub const RING_BASE_SECONDS: f64 = 3.6e-6;
/// NCCL's fixed latency of a tree all-reduce with the LL protocol, seconds
/// (`baseLat[Tree][LL]` = 4.4 us, same file).
pub const TREE_BASE_SECONDS: f64 = 4.4e-6;

/// NCCL's per-hop latency of the ring (LL protocol), seconds (`hwLat[hw][Ring][LL]`:
/// NVLink 0.47 us, PCIe 1.0 us, network 2.7 us).
pub fn ring_hop_seconds(class: LinkClass) -> f64 {
    match class {
        LinkClass::Nvlink => 0.47e-6,
        LinkClass::Pcie => 1.0e-6,
        LinkClass::Network => 2.7e-6,
    }
}

/// NCCL's per-hop latency of the tree (LL protocol), seconds (`hwLat[hw][Tree][LL]`:
/// NVLink 0.52 us, PCIe 1.0 us, network 5.0 us).
pub fn tree_hop_seconds(class: LinkClass) -> f64 {
    match class {
        LinkClass::Nvlink => 0.52e-6,
        LinkClass::Pcie => 1.0e-6,
        LinkClass::Network => 5.0e-6,
    }
}

/// A collective's time and the algorithm that gives it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Collective {
    /// Seconds.
    pub seconds: f64,
    /// `ring` or `tree` (`none` for one rank).
    pub algorithm: &'static str,
}

/// An all-reduce of `bytes` over `ranks` devices on `link`: the faster of
/// * ring: `baseLat + 2(r-1) x hop + 2(r-1)/r x bytes / bandwidth`;
/// * tree: `baseLat + 2(r-1) x hop + 2 x bytes / bandwidth` (NCCL's tree moves every
///   byte up and down: algorithm bandwidth = half the bus bandwidth).
pub fn all_reduce(link: &LinkFigures, ranks: u32, bytes: u64) -> Collective {
    if ranks <= 1 {
        return Collective {
            seconds: 0.0,
            algorithm: "none",
        };
    }
    let r = f64::from(ranks);
    let hops = 2.0 * (r - 1.0);
    let b = bytes as f64;
    let bw = link.bandwidth_bytes_per_second;
    let ring = RING_BASE_SECONDS + hops * ring_hop_seconds(link.class) + hops / r * b / bw;
    let tree = TREE_BASE_SECONDS + hops * tree_hop_seconds(link.class) + 2.0 * b / bw;
    if tree < ring {
        Collective {
            seconds: tree,
            algorithm: "tree",
        }
    } else {
        Collective {
            seconds: ring,
            algorithm: "ring",
        }
    }
}

/// A point-to-point send of `bytes` on `link`: `baseLat[Ring][LL] + one hop + bytes /
/// bandwidth` (NCCL prices a send as a one-step ring).
pub fn point_to_point(link: &LinkFigures, bytes: u64) -> f64 {
    RING_BASE_SECONDS
        + ring_hop_seconds(link.class)
        + bytes as f64 / link.bandwidth_bytes_per_second
}

/// `bytes` copied from host memory to a device over `link`: `bytes / bandwidth` (a copy of
/// pinned memory; its launch latency is the engine's, already in the step's host time).
pub fn host_to_device(link: &LinkFigures, bytes: u64) -> f64 {
    bytes as f64 / link.bandwidth_bytes_per_second
}

/// The rules the communication figures follow (printed with them).
pub const RULES: &[&str] = &[
    "tensor parallel: 2 all-reduces per layer of tokens x hidden x activation bytes; each the faster of NCCL ring (3.6 us + 2(r-1) x hop + 2(r-1)/r x bytes / bandwidth) and tree (4.4 us + 2(r-1) x hop + 2 x bytes / bandwidth); hop = NCCL's LL per-hop latency of the link (NVLink 0.47/0.52 us, PCIe 1.0 us, network 2.7/5.0 us)",
    "pipeline: one send of tokens x hidden x activation bytes per stage boundary (3.6 us + one hop + bytes / bandwidth), over the set's slowest link between groups",
    "host offload: every offloaded expert group's and streamed layer's weight bytes cross the host link once per step (each decode step, each prefill chunk); a layer's KV cache on the host, the KV bytes of the tokens the step reads (bytes / bandwidth)",
    "pipeline: a step's batch passes the stages one after another (no micro-batching): a step's time = the sum of its stage times + sends + the engine's host time; bubble = the mean time a device waits for the other stages",
];

#[cfg(test)]
mod tests {
    use super::*;

    const NVLINK: LinkFigures = LinkFigures {
        class: LinkClass::Nvlink,
        bandwidth_bytes_per_second: 300e9,
    };

    #[test]
    fn one_rank_costs_nothing() {
        assert_eq!(all_reduce(&NVLINK, 1, 1 << 20).seconds, 0.0);
    }

    #[test]
    fn small_messages_pay_latency_large_ones_bandwidth() {
        // 16 KiB over 4 NVLink ranks: latency-bound, ring (its hops are cheaper).
        let small = all_reduce(&NVLINK, 4, 16 << 10);
        assert_eq!(small.algorithm, "ring");
        let latency = RING_BASE_SECONDS + 6.0 * 0.47e-6;
        assert!((small.seconds - latency - 1.5 * 16384.0 / 300e9).abs() < 1e-12);
        // 128 MiB: bandwidth-bound, 2(r-1)/r of the bytes.
        let large = all_reduce(&NVLINK, 4, 128 << 20);
        assert!((large.seconds - 1.5 * (128u64 << 20) as f64 / 300e9).abs() < 1e-5);
    }

    #[test]
    fn a_send_is_one_hop() {
        let t = point_to_point(&NVLINK, 0);
        assert!((t - (RING_BASE_SECONDS + 0.47e-6)).abs() < 1e-15);
    }
}
