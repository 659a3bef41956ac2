//! The placement problem in numbers: per layer and per parallel option, what one device
//! of a stage holds; per device kind, its usable bytes and how many tensor-parallel groups
//! it forms; the objectives and their lexicographic keys. The solver (`solve.rs`) and the
//! exhaustive enumeration (`enumerate.rs`) both read this problem and share nothing else.
//!
//! The cost of one stage (a tensor-parallel group of `t` devices of one kind holding the
//! layers `a..b`), per device:
//!
//! * `non_kv = Σ weight_bytes + device_bytes + first_bytes (stage 0) + last_bytes (last
//!   stage) + pipeline_bytes (when there are several stages)`;
//! * `kv = sequences x Σ kv_sequence_bytes`;
//! * the stage fits without offload when `non_kv + kv <= usable`; otherwise, with a host
//!   tier, it offloads a *minimal* combination `(l, x, e)` (docs/placement.md, "Host
//!   offload"): the weights of its first `l` layers (when `Problem::layer_offload`),
//!   streamed in every step through a staging buffer of the largest such layer; the KV
//!   cache of its first `x` layers (when `Problem::kv_offload`), streamed through a
//!   staging buffer of the largest such layer's `sequences x kv_sequence_bytes`; and
//!   `e = ceil(excess / unit_bytes)` routed expert groups of its other layers. A
//!   combination is minimal when the stage fits and lowering any one of `l`, `x`, `e` by
//!   one (the others fixed) does not; the host takes `t x` the offloaded bytes;
//! * with `Problem::kv_sequence_grain`, the KV unit is one sequence of one layer: a
//!   combination `(l, q, e)` keeps `q` sequences of layers on the host in layer order,
//!   `x = q / sequences` whole layers and `s = q % sequences` sequences of layer
//!   `j = a + x` (recorded as `x` layers and `s` sequences); the other `sequences - s`
//!   sequences' `kv_sequence_bytes(j)` stay on the device with layer `j`'s bytes per
//!   token, its staging buffer is `s x kv_sequence_bytes(j)` (the largest with the whole
//!   layers'), its transfer time `s / sequences` of the layer's, rounded down to the
//!   nanosecond; minimal is then minimal in `(l, q, e)`, every `q` searched;
//! * its KV tokens: the device's room over its device-resident layers' bytes per token
//!   (unbounded without token-scaled state); a stage with KV on the host serves exactly
//!   the provisioned sequences at the context, `min(that, kv_worst_case_tokens)`.
//!
//! A placement fits when every stage fits and the host's bytes add up to at most its
//! memory.

use serde::{Deserialize, Serialize};

/// How a stage's tensor-parallel group splits routed experts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExpertSplit {
    /// Every expert's matrices split across the group (vLLM's fused MoE under tensor
    /// parallelism); also the only choice of a model without routed experts.
    Tensor,
    /// Whole experts distributed over the group (expert parallelism).
    Expert,
}

impl ExpertSplit {
    /// The split's name (`tensor`, `expert`).
    pub fn name(self) -> &'static str {
        match self {
            ExpertSplit::Tensor => "tensor",
            ExpertSplit::Expert => "expert",
        }
    }

    /// The split named `name` (`tensor`, `expert`), `None` for another name.
    pub fn from_name(name: &str) -> Option<Self> {
        [ExpertSplit::Tensor, ExpertSplit::Expert]
            .into_iter()
            .find(|s| s.name() == name)
    }
}

/// What one device of a stage holds for one layer under one option.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerCost {
    /// Weight bytes (its shards, aligned as the weight arenas align them).
    pub weight_bytes: u64,
    /// KV-cache and sequence-state bytes of one sequence at the policy's context.
    pub kv_sequence_bytes: u64,
    /// KV-cache bytes one token adds.
    pub kv_token_bytes: u64,
    /// Offload units (routed expert groups) this device holds of the layer.
    pub units: u64,
}

/// One parallel option: a tensor-parallel degree and an expert split, with what each
/// device holds under it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParallelOption {
    /// Tensor-parallel degree (devices per stage).
    pub degree: u32,
    /// How routed experts split.
    pub split: ExpertSplit,
    /// Per layer, what one device holds.
    pub layers: Vec<LayerCost>,
    /// Bytes of the first stage's extra tensors (the embedding shard).
    pub first_bytes: u64,
    /// Bytes of the last stage's extra tensors (final norm, head shard).
    pub last_bytes: u64,
    /// Bytes every device holds whatever its layers (activations, workspaces, the
    /// tensor-parallel communication buffers).
    pub device_bytes: u64,
    /// Bytes a device holds when the pipeline has several stages (the buffers of the
    /// activations passed between stages).
    pub pipeline_bytes: u64,
    /// Bytes one offload unit frees on a device (0: nothing can be offloaded).
    pub unit_bytes: u64,
    /// The option's times (`None`: no serving point, memory objectives only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<OptionTimes>,
}

/// Integer nanoseconds of one step of each phase: the steady decode step and one prompt's
/// prefill (all its chunks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepNs {
    /// The decode step.
    pub decode: u64,
    /// The prompt's prefill.
    pub prefill: u64,
}

/// What one device kind takes under an option, per rank of a stage.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindTimes {
    /// Per layer: its nodes' times and its two tensor-parallel all-reduces.
    pub layers: Vec<StepNs>,
    /// The first stage's extra nodes (the embedding).
    pub first: StepNs,
    /// The last stage's extra nodes (final norm, head, sampling).
    pub last: StepNs,
    /// One offloaded unit's transfer from the host.
    pub unit: StepNs,
    /// Per layer: streaming its weights (one rank's) from the host in a step (empty: no
    /// host link, 0).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layer_from_host: Vec<StepNs>,
    /// Per layer: streaming its KV cache (one rank's, the step's tokens) from the host in a
    /// step (empty: no host link, 0).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kv_from_host: Vec<StepNs>,
}

/// An option's times: per kind (in `Problem::kinds` order), and one stage boundary's send.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OptionTimes {
    /// Per device kind.
    pub kinds: Vec<KindTimes>,
    /// One stage boundary's send of the hidden state.
    pub boundary: StepNs,
}

/// One kind of device: its usable bytes and its groups per degree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindCapacity {
    /// Usable bytes of one device (the policy's share less its reserve).
    pub usable_bytes: u64,
    /// `(degree, groups)`: tensor-parallel groups of that degree the kind forms.
    pub groups: Vec<(u32, u32)>,
}

impl KindCapacity {
    /// Groups of `degree` devices.
    pub fn groups_of(&self, degree: u32) -> u32 {
        self.groups
            .iter()
            .find(|(d, _)| *d == degree)
            .map_or(0, |(_, g)| *g)
    }
}

/// What the placement optimizes: memory objectives, or (with a serving point) time ones.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Objective {
    /// Fewest devices; then least offloaded bytes; then most KV tokens (the default).
    #[default]
    FewestDevices,
    /// Most KV tokens; then fewest devices; then least offloaded bytes.
    MostKvTokens,
    /// Least offloaded bytes; then fewest devices; then most KV tokens.
    LeastOffloaded,
    /// Least time per output token; then fewest devices, least offloaded, most KV tokens.
    MinTpot,
    /// Least time to first token; then fewest devices, least offloaded, most KV tokens.
    MinTtft,
    /// Most output tokens per second per device (least TPOT x devices at the fixed batch);
    /// then fewest devices, least offloaded, most KV tokens.
    MaxThroughput,
}

impl Objective {
    /// Every objective.
    pub const ALL: [Objective; 6] = [
        Objective::FewestDevices,
        Objective::MostKvTokens,
        Objective::LeastOffloaded,
        Objective::MinTpot,
        Objective::MinTtft,
        Objective::MaxThroughput,
    ];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Objective::FewestDevices => "fewest-devices",
            Objective::MostKvTokens => "most-kv-tokens",
            Objective::LeastOffloaded => "least-offloaded",
            Objective::MinTpot => "min-tpot",
            Objective::MinTtft => "min-ttft",
            Objective::MaxThroughput => "max-throughput",
        }
    }

    /// The objective of a name.
    pub fn from_name(name: &str) -> Option<Objective> {
        Self::ALL.into_iter().find(|o| o.name() == name)
    }

    /// Whether the objective needs times (a serving point).
    pub fn is_time(self) -> bool {
        matches!(
            self,
            Objective::MinTpot | Objective::MinTtft | Objective::MaxThroughput
        )
    }

    /// The objective's key of a solution's figures: smaller is better. KV tokens are
    /// `u64::MAX` when unbounded; absent times count as 0.
    pub fn key(self, s: &Solution) -> [u128; 4] {
        let devices = u128::from(s.devices);
        let offloaded = u128::from(s.offloaded_bytes);
        let tokens = u128::from(u64::MAX - s.kv_tokens);
        let tpot = u128::from(s.tpot_ns.unwrap_or(0));
        let ttft = u128::from(s.ttft_ns.unwrap_or(0));
        match self {
            Objective::FewestDevices => [devices, offloaded, tokens, 0],
            Objective::MostKvTokens => [tokens, devices, offloaded, 0],
            Objective::LeastOffloaded => [offloaded, devices, tokens, 0],
            Objective::MinTpot => [tpot, devices, offloaded, tokens],
            Objective::MinTtft => [ttft, devices, offloaded, tokens],
            Objective::MaxThroughput => [tpot * devices, devices, offloaded, tokens],
        }
    }
}

/// A placement problem.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// Decoder layers.
    pub layer_count: u32,
    /// The parallel options (each with `layer_count` layer costs).
    pub options: Vec<ParallelOption>,
    /// Device kinds.
    pub kinds: Vec<KindCapacity>,
    /// Sequences the policy admits at once.
    pub sequences: u64,
    /// Host memory offload may use (`None`: offload off).
    pub host_bytes: Option<u64>,
    /// Whether a stage may offload whole layers' weights (with a host tier).
    #[serde(default)]
    pub layer_offload: bool,
    /// Whether a stage may offload layers' KV cache (with a host tier).
    #[serde(default)]
    pub kv_offload: bool,
    /// Whether the KV offload unit is one sequence of one layer instead of a whole layer
    /// (docs/placement.md, "Host offload").
    #[serde(default, skip_serializing_if = "is_false")]
    pub kv_sequence_grain: bool,
    /// The provisioned tokens (the problem's sequences x the policy's context): what a
    /// stage with KV on the host serves.
    #[serde(default)]
    pub kv_worst_case_tokens: u64,
    /// A pinned pipeline depth (stages).
    pub pipeline_stages: Option<u32>,
    /// The objective.
    pub objective: Objective,
    /// Every step's fixed time outside the stages (the engine's host time; the prefill's
    /// also the request's overhead); `None`: no serving point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_time: Option<StepNs>,
}

/// One stage of a solution.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct StageChoice {
    /// One past its last layer (its first is the previous stage's end, or 0).
    pub end_layer: u32,
    /// Its device kind (an index of `Problem::kinds`).
    pub kind: u32,
    /// Offload units each of its devices moves to the host.
    pub offloaded_units: u64,
    /// Its first layers whose weights each device streams from the host.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub offloaded_layers: u32,
    /// Its first layers whose KV cache each device keeps on the host.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub kv_offloaded_layers: u32,
    /// With the sequence grain, the sequences of its next layer (the one after its
    /// `kv_offloaded_layers`) whose KV cache each device keeps on the host, `1..sequences`
    /// (0: none).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub kv_offloaded_sequences: u64,
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A stage's decisions in the canonical tie-break order: end layer, kind, streamed layers,
/// host-KV layers, host-KV sequences of the next layer.
pub type Decision = (u32, u32, u32, u32, u64);

impl StageChoice {
    /// The stage's decisions in the canonical tie-break order: `(end layer, kind, layers
    /// offloaded, KV layers offloaded, KV sequences of the next layer offloaded)`.
    pub fn decision(&self) -> Decision {
        (
            self.end_layer,
            self.kind,
            self.offloaded_layers,
            self.kv_offloaded_layers,
            self.kv_offloaded_sequences,
        )
    }
}

/// An optimal placement of a problem.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Solution {
    /// The option (an index of `Problem::options`).
    pub option: u32,
    /// Its stages, in pipeline order.
    pub stages: Vec<StageChoice>,
    /// Devices used.
    pub devices: u64,
    /// Bytes offloaded to the host.
    pub offloaded_bytes: u64,
    /// KV tokens that fit (`u64::MAX`: unbounded, no token-scaled state).
    pub kv_tokens: u64,
    /// Time per output token, nanoseconds (with a serving point).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_ns: Option<u64>,
    /// Time to first token, nanoseconds (with a serving point).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ns: Option<u64>,
}

impl Solution {
    /// The full order key: the objective's key, then the option index, then the stages
    /// as `(end layer, kind, layers offloaded, KV layers offloaded, KV sequences
    /// offloaded)` in order (the canonical tie-break).
    pub fn order_key(&self, objective: Objective) -> ([u128; 4], u32, Vec<Decision>) {
        (
            objective.key(self),
            self.option,
            self.stages.iter().map(StageChoice::decision).collect(),
        )
    }
}
