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
};
use crate::request::{
    BufferUsage, IdMap, PlanRequest, StateCapacityDemand, StateLifetime, StorageProfile,
};

use super::StudyError;

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
    /// The maximum context: the largest `maximum_tokens` of a token-scaled sequence state.
    pub context_tokens: u64,
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
        let memory = &plan.payload.memory;
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
        let mut invocation_phases = InvocationPhases::new(&plan.payload.nodes);
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
        let mut context = 0u64;
        for state in &request.family.program.states {
            if let (
                StateLifetime::Sequence,
                StateCapacityDemand::TokenScaled {
                    bytes_per_token,
                    maximum_tokens,
                },
            ) = (state.lifetime, state.capacity_demand)
            {
                kv_per_token = add(kv_per_token, bytes_per_token, "KV bytes per token")?;
                context = context.max(maximum_tokens);
            }
        }
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
            },
        ))
    }

    /// The refusal of a serving engine: an error when not even one sequence fits at the
    /// maximum context (also when the bytes outside sequences alone exceed the capacity).
    pub fn refusal(&self, limits: &ServingLimits) -> Option<StudyError> {
        (self.sequences_that_fit == Some(0)).then_some(StudyError::NoSequenceFits {
            context_tokens: limits.context_tokens,
            kv_bytes_per_sequence: self.kv_bytes_per_sequence,
            headroom_bytes: self.headroom_bytes,
            usable_capacity_bytes: limits.usable_capacity_bytes,
            weights_bytes: self.weights_bytes,
            activation_bytes: self.activation_bytes,
            workspace_bytes: self.workspace_bytes,
        })
    }
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
