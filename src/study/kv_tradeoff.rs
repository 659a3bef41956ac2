//! The contiguous-versus-paged KV trade-off of a plan: when the plan keeps its KV cache
//! contiguous (the policy ranks contiguous storage first, so the contiguous-cache kernel is
//! preferred) but a compatible paged kernel was passed over, how many sequences each admits.
//!
//! The rules (docs/synth.md, "Memory semantics of the KV cache"):
//!
//! * the **contiguous** provider reserves the whole context for each admitted sequence:
//!   per sequence, every sequence state at its maximum as the plan provisions it (the serving
//!   report's `kv_bytes_per_sequence`);
//! * the **paged** provider grows by blocks: at admission a sequence holds one token, i.e.
//!   one block of the paged provider's profile per KV state; at the maximum context it holds
//!   the context rounded up to whole blocks;
//! * both admit `room / per-sequence bytes` sequences, where room is the serving report's
//!   headroom for sequences (usable − weights − activations − workspaces at the ceilings) of
//!   this plan. The paged plan's activations and workspaces are taken to be this plan's (the
//!   two attention kernels' workspace formulas differ by a few KiB per layer).

use std::collections::BTreeMap;

use serde::Serialize;

use super::alternatives::alternatives;
use super::report::ServingReport;
use super::ResearchError;
use crate::memory::{quantized_bytes, Shape};
use crate::plan::{AllocationLifetime, DynamicResourceDemand, ExecutionPlan};
use crate::request::{
    BufferUsage, PlanRequest, ProviderId, StateCapacityDemand, StorageProfile, StorageView,
};

/// The trade-off between the selected contiguous-cache provider and a passed-over paged one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KvTradeoff {
    /// The selected provider, holding its KV state contiguously.
    pub contiguous_provider: ProviderId,
    /// A compatible provider not chosen that accepts a paged profile for the same state.
    pub paged_provider: ProviderId,
    /// The paged profile's block bytes.
    pub paged_block_bytes: u64,
    /// How many KV states (layers) the selected provider holds contiguously.
    pub kv_states: usize,
    /// The maximum context (tokens).
    pub context_tokens: u64,
    /// Bytes one sequence reserves under the contiguous provider (at admission and after).
    pub contiguous_bytes_per_sequence: u64,
    /// Bytes one sequence holds at admission under the paged provider.
    pub paged_bytes_at_admission: u64,
    /// Bytes one sequence holds at the maximum context under the paged provider.
    pub paged_bytes_at_context: u64,
    /// Headroom for sequences (the serving report's).
    pub room_bytes: u64,
    /// Sequences the contiguous provider admits.
    pub contiguous_sequences: u64,
    /// Sequences the paged provider admits while each is one token long.
    pub paged_sequences_at_admission: u64,
    /// Sequences the paged provider admits when each holds the maximum context.
    pub paged_sequences_at_context: u64,
    /// The policy's sequence ceiling.
    pub policy_sequences: u32,
}

fn overflow(what: &str) -> ResearchError {
    ResearchError::Overflow {
        what: what.to_owned(),
    }
}

/// The trade-off of `plan` (built from `request`), or `None` when no node holds a sequence
/// state contiguously while a compatible provider of it accepts a paged profile.
pub fn kv_tradeoff(
    request: &PlanRequest,
    plan: &ExecutionPlan,
) -> Result<Option<KvTradeoff>, ResearchError> {
    let memory = &plan.payload.memory;
    let descriptors: BTreeMap<_, _> = memory
        .dynamic_descriptors
        .iter()
        .map(|d| (&d.base_resource_id, d))
        .collect();
    let states: BTreeMap<_, _> = request
        .family
        .program
        .states
        .iter()
        .map(|s| (&s.value_id, s))
        .collect();
    let passed_over = alternatives(request, plan)?;
    let mut pair: Option<(ProviderId, ProviderId, StorageProfile)> = None;
    let (mut kv_states, mut contiguous_kv, mut paged_admission, mut paged_context) =
        (0usize, 0u64, 0u64, 0u64);
    for node in &plan.payload.nodes {
        let Some(list) = passed_over.get(&node.id) else {
            continue;
        };
        for binding in node.values.iter().filter(|b| b.usage == BufferUsage::State) {
            let [component] = binding.storage.components.as_slice() else {
                continue;
            };
            let Some(descriptor) = descriptors.get(&component.resource_id) else {
                continue;
            };
            let contiguous = descriptor.lifetime == AllocationLifetime::Sequence
                && descriptor.storage.profile.view == StorageView::Contiguous
                && matches!(descriptor.demand, DynamicResourceDemand::Fixed { .. });
            let Some(state) = states.get(&binding.value_id) else {
                continue;
            };
            let StateCapacityDemand::TokenScaled {
                bytes_per_token,
                maximum_tokens,
            } = state.capacity_demand
            else {
                continue;
            };
            if !contiguous {
                continue;
            }
            let paged = list.iter().filter(|a| a.dropped.is_none()).find_map(|a| {
                let descriptor = request.catalog.provider(&node.operation_id, &a.provider)?;
                let accepted = descriptor.storage_for(binding.role, binding.ordinal)?;
                let profile = accepted
                    .accepted_profiles
                    .iter()
                    .find(|p| matches!(p.view, StorageView::PagedRegions { .. }))?;
                Some((a.provider.clone(), *profile))
            });
            let Some((paged_provider, profile)) = paged else {
                continue;
            };
            if pair.is_none() {
                pair = Some((
                    node.selection.selected_provider.clone(),
                    paged_provider,
                    profile,
                ));
            }
            let demand = DynamicResourceDemand::Tokens {
                bytes_per_token,
                maximum_tokens,
            };
            let at = |tokens: u64| {
                quantized_bytes(
                    &demand,
                    Shape {
                        sequences: 1,
                        tokens,
                        pages: 1,
                    },
                    &profile,
                    descriptor.alignment_bytes,
                )
                .map_err(|detail| ResearchError::Report { detail })
            };
            let contiguous_bytes = quantized_bytes(
                &descriptor.demand,
                Shape {
                    sequences: 1,
                    tokens: 1,
                    pages: 1,
                },
                &descriptor.storage.profile,
                descriptor.alignment_bytes,
            )
            .map_err(|detail| ResearchError::Report { detail })?;
            kv_states += 1;
            contiguous_kv = contiguous_kv
                .checked_add(contiguous_bytes)
                .ok_or_else(|| overflow("contiguous KV bytes per sequence"))?;
            paged_admission = paged_admission
                .checked_add(at(1)?)
                .ok_or_else(|| overflow("paged KV bytes at admission"))?;
            paged_context = paged_context
                .checked_add(at(maximum_tokens)?)
                .ok_or_else(|| overflow("paged KV bytes at the maximum context"))?;
        }
    }
    let Some((contiguous_provider, paged_provider, profile)) = pair else {
        return Ok(None);
    };
    let (report, limits) =
        ServingReport::with_limits(request, plan).map_err(|e| ResearchError::Report {
            detail: e.to_string(),
        })?;
    // Other sequence state (recurrent state, KV the paged provider cannot hold) stays as
    // provisioned under both.
    let others = report
        .kv_bytes_per_sequence
        .checked_sub(contiguous_kv)
        .ok_or_else(|| overflow("sequence state besides the contiguous KV"))?;
    let with_others =
        |bytes: u64, what: &str| bytes.checked_add(others).ok_or_else(|| overflow(what));
    let paged_bytes_at_admission = with_others(paged_admission, "paged bytes at admission")?;
    let paged_bytes_at_context = with_others(paged_context, "paged bytes at the context")?;
    let room = u64::try_from(report.headroom_bytes.max(0)).unwrap_or(u64::MAX);
    let admits = |per_sequence: u64| room.checked_div(per_sequence).unwrap_or(0);
    let paged_block_bytes = match profile.view {
        StorageView::PagedRegions { block_bytes } => block_bytes,
        StorageView::Contiguous => 0,
    };
    Ok(Some(KvTradeoff {
        contiguous_provider,
        paged_provider,
        paged_block_bytes,
        kv_states,
        context_tokens: limits.context_tokens,
        contiguous_bytes_per_sequence: report.kv_bytes_per_sequence,
        paged_bytes_at_admission,
        paged_bytes_at_context,
        room_bytes: room,
        contiguous_sequences: admits(report.kv_bytes_per_sequence),
        paged_sequences_at_admission: admits(paged_bytes_at_admission),
        paged_sequences_at_context: admits(paged_bytes_at_context),
        policy_sequences: limits.maximum_active_sequences,
    }))
}
