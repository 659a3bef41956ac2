//! The memory report of a plan in serving terms: what the weights, the KV cache, the
//! activations and the workspaces take, and how many tokens and sequences fit in what is
//! left.
//!
//! Every figure is computed from the plan's memory plan (its static allocations, dynamic
//! descriptors, step slots and invocation rows), evaluated at the policy's ceilings; only
//! the per-token KV figure reads the request (the bytes per token of its token-scaled
//! sequence states, which a contiguous cache's fixed reservation no longer shows). The rules:
//!
//! * **weights**: the static allocations holding weights;
//! * **per sequence**: every sequence-lifetime state descriptor (the KV cache, recurrent
//!   state) at its maximum, quantized by its storage profile: for a paged cache the context
//!   rounded up to whole blocks, for a contiguous one the reservation of the whole context;
//! * **activations**: static activation allocations plus every activation descriptor at its
//!   ceiling shape (the scheduled-token ceiling, the sequence ceiling), step descriptors
//!   counted once per step slot (the largest member of the slot);
//! * **workspaces**: everything else (scratch, bindings, persistent workspaces, other static
//!   bytes) at its ceiling, invocation descriptors by the pool's largest invocation phase
//!   (the rows the program's order lets run together, `memory::InvocationPhases`);
//! * **headroom**: usable capacity − weights − activations − workspaces: the bytes left for
//!   per-sequence state when everything else is at its ceiling;
//! * **tokens that fit**: for a paged cache, headroom / KV bytes per token (block rounding
//!   ignored: an upper bound, off by less than one block per layer per sequence); for a
//!   cache that reserves the whole context per sequence (contiguous), sequences that fit x
//!   maximum context;
//! * **sequences that fit**: headroom / bytes per sequence at the maximum context.

use serde::{Deserialize, Serialize};

use crate::memory::{quantized_bytes, theoretical_maximum_shape, InvocationPhases};
use crate::plan::{
    AllocationLifetime, DynamicResourceDemand, DynamicResourceDescriptor, ExecutionPlan,
    ExecutionPlanPayload,
};
use crate::request::{
    BufferUsage, IdMap, PlanRequest, SemanticValue, StateCapacityDemand, StateLifetime,
    StorageProfile,
};

use super::{SequenceShortfall, StudyError};

/// The memory report of one plan (`memory.report` of the plan summary's JSON).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServingReport {
    /// Static bytes holding weights.
    pub weights_bytes: u64,
    /// Logical KV-cache bytes one token adds to one sequence (Σ bytes per token of the
    /// request's token-scaled sequence states).
    pub kv_bytes_per_token: u64,
    /// Bytes of one sequence's state at the maximum context, as the plan provisions it.
    pub kv_bytes_per_sequence: u64,
    /// Activation bytes at the token and sequence ceilings.
    pub activation_bytes: u64,
    /// Workspace bytes (scratch, bindings, persistent, other static) at the ceilings.
    pub workspace_bytes: u64,
    /// The policy's reserve (not part of the usable capacity).
    pub reserve_bytes: u64,
    /// usable − weights − activations − workspaces (negative: not even those fit).
    pub headroom_bytes: i128,
    /// Tokens of KV cache the headroom holds, across all sequences (`null` without a
    /// token-scaled state).
    pub tokens_that_fit: Option<u64>,
    /// Sequences at the maximum context the headroom holds (`null` without per-sequence
    /// state: any number).
    pub sequences_that_fit: Option<u64>,
    /// Whether the policy's worst case (maximum active sequences at maximum context) fits.
    pub worst_case_fits: bool,
}

/// The facts of a plan the report needs beyond its items (for messages).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServingLimits {
    /// Usable capacity.
    pub usable_capacity_bytes: u64,
    /// The policy's maximum active sequences.
    pub maximum_active_sequences: u32,
    /// The maximum context a sequence may reach ([`context_tokens`]; a sliding-window
    /// layer's state holds only its window of it).
    pub context_tokens: u64,
    /// The model's trained context and the rule that set it ([`trained_context`]), when
    /// the request's family configuration is a model configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trained_context: Option<TrainedContext>,
    /// Whether the KV cache reserves the whole context per sequence (contiguous), so that
    /// tokens that fit are whole sequences' worth (not serialized: the report says it).
    #[serde(skip)]
    pub reserves_context: bool,
}

/// The longest context a model serves, as its configuration sets it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrainedContext {
    /// Tokens.
    pub tokens: u64,
    /// The keys and rule that set it (`max_position_embeddings`,
    /// `rope_scaling.original_max_position_embeddings 32768 x yarn factor 4`).
    pub rule: String,
}

/// The trained context of a request's model (`ModelConfig::trained_context`, vLLM's rule),
/// read from its family's configuration; `None` for a hand-made family whose configuration
/// is not a model configuration.
pub fn trained_context(request: &PlanRequest) -> Option<TrainedContext> {
    let config: crate::synth::ModelConfig =
        serde_json::from_value(request.family.canonical_config.clone()).ok()?;
    let arch = config.architecture().ok()?;
    Some(TrainedContext {
        tokens: arch.trained_context,
        rule: arch.trained_context_rule,
    })
}

/// What a pool holds, in serving terms (the summary labels pools with it).
pub fn pool_holds(usage: BufferUsage) -> &'static str {
    match usage {
        BufferUsage::Weights => "weights",
        BufferUsage::State => "KV cache and sequence state",
        BufferUsage::Activations => "activations",
        BufferUsage::Persistent | BufferUsage::Scratch | BufferUsage::Binding => "workspaces",
        BufferUsage::Transfer => "transfer staging",
    }
}

fn add(total: u64, bytes: u64, what: &str) -> Result<u64, StudyError> {
    total
        .checked_add(bytes)
        .ok_or_else(|| StudyError::Overflow {
            what: what.to_owned(),
        })
}

fn multiply(a: u64, b: u64, what: &str) -> Result<u64, StudyError> {
    a.checked_mul(b).ok_or_else(|| StudyError::Overflow {
        what: what.to_owned(),
    })
}

/// One instance of a descriptor at its ceiling shape, quantized by its profile.
fn ceiling_bytes(descriptor: &DynamicResourceDescriptor) -> Result<u64, StudyError> {
    let demand_error = |reason: String| StudyError::Demand {
        resource: descriptor.base_resource_id.to_string(),
        reason,
    };
    let shape = theoretical_maximum_shape(&descriptor.demand)
        .ok_or_else(|| demand_error("the demand has no maximum shape".to_owned()))?;
    let profile: &StorageProfile = &descriptor.storage.profile;
    quantized_bytes(
        &descriptor.demand,
        shape,
        profile,
        descriptor.alignment_bytes,
    )
    .map_err(demand_error)
}

fn is_sequence_state(descriptor: &DynamicResourceDescriptor) -> bool {
    descriptor.usage == BufferUsage::State && descriptor.lifetime == AllocationLifetime::Sequence
}

impl ServingReport {
    /// The report of `plan`, built from `request`.
    pub fn of(request: &PlanRequest, plan: &ExecutionPlan) -> Result<ServingReport, StudyError> {
        Ok(Self::with_limits(request, plan)?.0)
    }

    /// The report and the limits it was computed against.
    pub fn with_limits(
        request: &PlanRequest,
        plan: &ExecutionPlan,
    ) -> Result<(ServingReport, ServingLimits), StudyError> {
        Self::of_payload(request, &plan.payload)
    }

    /// [`ServingReport::with_limits`] of a plan's payload, hashed or not (the report reads
    /// its memory plan and nodes only).
    pub fn of_payload(
        request: &PlanRequest,
        payload: &ExecutionPlanPayload,
    ) -> Result<(ServingReport, ServingLimits), StudyError> {
        let memory = &payload.memory;
        let sequences = u64::from(memory.maximum_active_sequences);
        let mut weights = 0u64;
        let mut activations = 0u64;
        let mut workspaces = 0u64;
        for allocation in &memory.static_allocations {
            let (slot, what) = match allocation.usage {
                BufferUsage::Weights => (&mut weights, "weights bytes"),
                BufferUsage::Activations => (&mut activations, "activation bytes"),
                _ => (&mut workspaces, "workspace bytes"),
            };
            *slot = add(*slot, allocation.size_bytes, what)?;
        }
        let mut per_sequence = 0u64;
        let mut bytes_of: IdMap<&str, u64> = IdMap::default();
        for descriptor in &memory.dynamic_descriptors {
            let bytes = ceiling_bytes(descriptor)?;
            bytes_of.insert(descriptor.base_resource_id.as_str(), bytes);
            let (slot, what) = if descriptor.usage == BufferUsage::Activations {
                (&mut activations, "activation bytes")
            } else {
                (&mut workspaces, "workspace bytes")
            };
            match descriptor.lifetime {
                AllocationLifetime::Sequence if is_sequence_state(descriptor) => {
                    per_sequence = add(per_sequence, bytes, "bytes per sequence")?;
                }
                AllocationLifetime::Sequence => {
                    let all = multiply(bytes, sequences, "sequence bytes at the ceiling")?;
                    *slot = add(*slot, all, what)?;
                }
                AllocationLifetime::Plan | AllocationLifetime::Request => {
                    *slot = add(*slot, bytes, what)?;
                }
                // Step and invocation bytes are counted per pool below.
                AllocationLifetime::Step | AllocationLifetime::Invocation => {}
            }
        }
        let mut invocation_phases = InvocationPhases::new(&payload.nodes);
        for pool in &memory.dynamic_pools {
            let usage = pool.compatibility.usage;
            let (slot, what) = if usage == BufferUsage::Activations {
                (&mut activations, "activation bytes")
            } else {
                (&mut workspaces, "workspace bytes")
            };
            for step in &pool.step_resource_slots {
                let largest = step
                    .resource_ids
                    .iter()
                    .filter_map(|id| bytes_of.get(id.as_str()).copied())
                    .max()
                    .unwrap_or(0);
                *slot = add(*slot, largest, what)?;
            }
            let phases = invocation_phases
                .of_pool(pool)
                .map_err(|e| StudyError::Demand {
                    resource: pool.pool_id.clone(),
                    reason: format!("invocation phases: {e}"),
                })?;
            let mut peak = 0u64;
            for phase in phases {
                let mut phase_bytes = 0u64;
                for id in phase {
                    let bytes = bytes_of.get(id.as_str()).copied().unwrap_or(0);
                    phase_bytes = add(phase_bytes, bytes, what)?;
                }
                peak = peak.max(phase_bytes);
            }
            *slot = add(*slot, peak, what)?;
        }
        let mut kv_per_token = 0u64;
        for state in &request.family.program.states {
            if let (
                StateLifetime::Sequence,
                StateCapacityDemand::TokenScaled {
                    bytes_per_token, ..
                },
            ) = (state.lifetime, state.capacity_demand)
            {
                kv_per_token = add(kv_per_token, bytes_per_token, "KV bytes per token")?;
            }
        }
        let context = context_tokens(request);
        let headroom = i128::from(memory.usable_capacity_bytes)
            - i128::from(weights)
            - i128::from(activations)
            - i128::from(workspaces);
        let room = u64::try_from(headroom.max(0)).unwrap_or(u64::MAX);
        let sequences_that_fit = (per_sequence > 0).then(|| room / per_sequence);
        // A contiguous cache reserves the whole context per sequence: the tokens it holds
        // are whole sequences' worth. A paged cache holds any mix of sequence lengths.
        let reserves_context = memory.dynamic_descriptors.iter().any(|d| {
            is_sequence_state(d) && !matches!(d.demand, DynamicResourceDemand::Tokens { .. })
        });
        let tokens_that_fit = match (kv_per_token, sequences_that_fit) {
            (0, _) => None,
            (_, Some(sequences)) if reserves_context => {
                Some(multiply(sequences, context, "tokens that fit")?)
            }
            (per_token, _) => Some(room / per_token),
        };
        let worst_case_fits =
            headroom >= 0 && sequences_that_fit.is_none_or(|fit| fit >= sequences);
        Ok((
            ServingReport {
                weights_bytes: weights,
                kv_bytes_per_token: kv_per_token,
                kv_bytes_per_sequence: per_sequence,
                activation_bytes: activations,
                workspace_bytes: workspaces,
                reserve_bytes: memory.reserve_bytes,
                headroom_bytes: headroom,
                tokens_that_fit,
                sequences_that_fit,
                worst_case_fits,
            },
            ServingLimits {
                usable_capacity_bytes: memory.usable_capacity_bytes,
                maximum_active_sequences: memory.maximum_active_sequences,
                context_tokens: context,
                trained_context: trained_context(request),
                reserves_context,
            },
        ))
    }

    /// Whether the requirement fits: the bytes outside sequences fit and `required`
    /// sequences fit at the maximum context (any number when nothing is per sequence). The
    /// policy's sequence ceiling is not a requirement (`worst_case_fits` tells whether it
    /// fits too).
    pub fn meets(&self, required: u64) -> bool {
        self.headroom_bytes >= 0 && self.sequences_that_fit.is_none_or(|fit| fit >= required)
    }

    /// The refusal of a serving engine: an error when fewer than `required` sequences fit
    /// at the maximum context (also when the bytes outside sequences alone exceed the
    /// capacity), with the levers that would make it fit and their amounts.
    pub fn refusal(
        &self,
        request: &PlanRequest,
        limits: &ServingLimits,
        required: u64,
    ) -> Option<StudyError> {
        if self.meets(required) {
            return None;
        }
        let needed = i128::from(self.kv_bytes_per_sequence) * i128::from(required);
        let short = u64::try_from(needed - self.headroom_bytes).unwrap_or(u64::MAX);
        let mut levers = vec![format!(
            "more capacity: at least {short} more bytes of usable memory (a larger device, a \
             larger memory share or a smaller reserve)"
        )];
        if let Some(context) = longest_context(request, self.headroom_bytes, required) {
            levers.push(format!(
                "a shorter context: at most about {context} tokens (headroom / KV bytes per \
                 token and sequence, windows kept, block rounding ignored; `fit --maximize \
                 context` finds it exactly)"
            ));
        }
        if required > 1 {
            if let Some(fit) = self.sequences_that_fit.filter(|&f| f > 0) {
                levers.push(format!(
                    "fewer sequences: require at most {fit} (policy minimum_sequences)"
                ));
            }
        }
        if self.headroom_bytes < 0 {
            let usable = limits.usable_capacity_bytes.max(1);
            levers.push(format!(
                "a smaller weight format or more devices: the weights alone take {} of the {usable} \
                 usable bytes; with their KV cache and activations the model needs about {} \
                 devices of this capacity",
                self.weights_bytes,
                (u128::from(self.weights_bytes)
                    + u128::from(self.activation_bytes)
                    + u128::from(self.workspace_bytes)
                    + u128::try_from(needed).unwrap_or(0))
                .div_ceil(u128::from(usable))
            ));
        }
        let fit = self.sequences_that_fit.unwrap_or(0);
        let headline = if fit == 0 {
            "not even one sequence fits".to_owned()
        } else {
            format!("only {}", sequences_fit(fit))
        };
        Some(StudyError::NoSequenceFits(Box::new(SequenceShortfall {
            headline,
            required_sequences: required,
            context_tokens: limits.context_tokens,
            kv_bytes_per_sequence: self.kv_bytes_per_sequence,
            headroom_bytes: self.headroom_bytes,
            usable_capacity_bytes: limits.usable_capacity_bytes,
            weights_bytes: self.weights_bytes,
            activation_bytes: self.activation_bytes,
            workspace_bytes: self.workspace_bytes,
            levers: levers.join("; "),
        })))
    }
}

/// The longest context at which `required` sequences' token-scaled states fit `headroom`
/// bytes: each state holds `min(context, its maximum)` tokens when its maximum is below the
/// request's context (a sliding window), else the context; block rounding is ignored, so the
/// answer is an upper bound by less than a block per layer. `None` when not even one token
/// fits or the request has no token-scaled state.
fn longest_context(request: &PlanRequest, headroom: i128, required: u64) -> Option<u64> {
    let context = context_tokens(request);
    let states: Vec<(u64, u64)> = request
        .family
        .program
        .states
        .iter()
        .filter_map(|s| match (s.lifetime, s.capacity_demand) {
            (
                StateLifetime::Sequence,
                StateCapacityDemand::TokenScaled {
                    bytes_per_token,
                    maximum_tokens,
                },
            ) => Some((bytes_per_token, maximum_tokens)),
            _ => None,
        })
        .collect();
    if states.is_empty() || headroom <= 0 {
        return None;
    }
    let bytes_at = |tokens: u64| -> u128 {
        states
            .iter()
            .map(|&(per_token, maximum)| {
                let held = if maximum < context {
                    tokens.min(maximum)
                } else {
                    tokens
                };
                u128::from(per_token) * u128::from(held)
            })
            .sum::<u128>()
            * u128::from(required.max(1))
    };
    let room = u128::try_from(headroom).ok()?;
    if bytes_at(1) > room {
        return None;
    }
    let (mut low, mut high) = (1u64, context.max(1));
    if bytes_at(high) <= room {
        return Some(high);
    }
    while high - low > 1 {
        let middle = low + (high - low) / 2;
        if bytes_at(middle) <= room {
            low = middle;
        } else {
            high = middle;
        }
    }
    Some(low)
}

/// The maximum context of a request (tokens one sequence may reach): the largest
/// `maximum_context_tokens` attribute of its attention nodes, which the synthesizer sets to
/// the policy's context. A sliding-window layer's state holds fewer tokens (its window), so
/// the states alone would understate the context when every layer slides; a request without
/// the attribute (a hand-made program) falls back to its largest token-scaled sequence state.
pub fn context_tokens(request: &PlanRequest) -> u64 {
    let program = &request.family.program;
    let from_attributes = program
        .nodes()
        .filter_map(|node| match node.attributes.get("maximum_context_tokens") {
            Some(SemanticValue::Unsigned(v)) => Some(*v),
            _ => None,
        })
        .max();
    from_attributes.unwrap_or_else(|| {
        program
            .states
            .iter()
            .filter_map(|s| match (s.lifetime, s.capacity_demand) {
                (
                    StateLifetime::Sequence,
                    StateCapacityDemand::TokenScaled { maximum_tokens, .. },
                ) => Some(maximum_tokens),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    })
}

/// `1 sequence` or `n sequences`.
pub fn sequences(n: u64) -> String {
    if n == 1 {
        "1 sequence".to_owned()
    } else {
        format!("{n} sequences")
    }
}

/// `1 sequence fits` or `n sequences fit`.
pub fn sequences_fit(n: u64) -> String {
    if n == 1 {
        "1 sequence fits".to_owned()
    } else {
        format!("{n} sequences fit")
    }
}
