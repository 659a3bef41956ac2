//! Plan summaries (what `jointplan plan` prints, text or JSON) and human-readable sizes.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::plan::{AllocationLifetime, DynamicResourceDemand, DynamicResourceDescriptor};
use crate::plan::{
    CompatibilityRejection, ExecutionPlan, PlanNode, RejectedProvider, RejectionReason,
    SelectionReason, SelectionSettings, SettingRejection,
};
use crate::request::{BufferUsage, ResourceId, StorageProfile};
use crate::selection::{ComponentReport, Status};
pub use crate::study::explain::resource_profiles;
use crate::study::report::{pool_holds, ServingLimits, ServingReport};

pub use super::summary_text::{summary_text, write_rejections};

/// A byte count for people: `1.50 GiB (1610612736 bytes)`; plain bytes below 1 KiB.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.2} {} ({bytes} bytes)", UNITS[unit])
}

/// A signed byte difference for people (headroom can be reported before it is checked).
pub fn human_signed_bytes(bytes: i128) -> String {
    if bytes < 0 {
        format!(
            "-{}",
            human_bytes(u64::try_from(-bytes).unwrap_or(u64::MAX))
        )
    } else {
        human_bytes(u64::try_from(bytes).unwrap_or(u64::MAX))
    }
}

/// A selection reason in the plan's terms.
pub fn reason_text(reason: SelectionReason) -> &'static str {
    match reason {
        SelectionReason::PreferredCompatible => "preferred_compatible",
        SelectionReason::CanonicalCompatible => "canonical_compatible",
        SelectionReason::FallbackFromPreferred => "fallback_from_preferred",
    }
}

/// One compatibility rejection reason, in the catalog's terms.
pub fn compatibility_text(reason: &CompatibilityRejection) -> String {
    let list = |items: Vec<String>| items.join(", ");
    match reason {
        CompatibilityRejection::OperationVersionMismatch {
            required,
            available,
        } => format!("operation version {available} does not satisfy the node's {required}"),
        CompatibilityRejection::ProviderVersionMismatch {
            required,
            available,
        } => format!("provider version {available} does not satisfy {required}"),
        CompatibilityRejection::MissingCapabilities(set) => format!(
            "missing capabilities {}",
            list(set.iter().map(ToString::to_string).collect())
        ),
        CompatibilityRejection::UnsupportedWeightFormats(set) => format!(
            "cannot read weight formats {}",
            list(set.iter().map(ToString::to_string).collect())
        ),
        CompatibilityRejection::UnsupportedQuantizationFormats(set) => format!(
            "cannot read quantization formats {}",
            list(set.iter().map(ToString::to_string).collect())
        ),
        CompatibilityRejection::InsufficientExecutionDeterminism {
            required,
            available,
        } => format!(
            "promises {:?} / {:?}, the policy requires {required:?}",
            available.repeatability, available.replay_equivalence
        ),
    }
}

/// A rejected provider with its evidence, in the input's terms.
#[derive(Clone, Debug, Serialize)]
pub struct RejectionSummary {
    /// The provider.
    pub provider_id: String,
    /// `not_registered`, `incompatible` or `storage_incompatible`.
    pub reason: &'static str,
    /// The reasons in words.
    pub details: Vec<String>,
    /// For storage rejections: each evidence resource with the profile the plan chose.
    pub resources: Vec<ResourceProfile>,
}

/// A resource and its chosen profile.
#[derive(Clone, Debug, Serialize)]
pub struct ResourceProfile {
    /// The resource.
    pub resource_id: String,
    /// The chosen profile (`linear+contiguous`), or `unplanned`.
    pub profile: String,
}

/// The rejection evidence of one provider.
pub fn rejection_summary(
    rejected: &RejectedProvider,
    profiles: &BTreeMap<&ResourceId, StorageProfile>,
) -> RejectionSummary {
    let provider_id = rejected.provider_id.to_string();
    match &rejected.reasons {
        RejectionReason::NotRegistered => RejectionSummary {
            provider_id,
            reason: "not_registered",
            details: vec!["not registered for the node's operation in the catalog".to_owned()],
            resources: Vec::new(),
        },
        RejectionReason::Incompatible(reasons) => RejectionSummary {
            provider_id,
            reason: "incompatible",
            details: reasons.iter().map(compatibility_text).collect(),
            resources: Vec::new(),
        },
        RejectionReason::StorageIncompatible { resource_ids } => {
            let resources: Vec<ResourceProfile> = resource_ids
                .iter()
                .map(|r| ResourceProfile {
                    resource_id: r.to_string(),
                    profile: profiles
                        .get(r)
                        .map_or_else(|| "unplanned".to_owned(), ToString::to_string),
                })
                .collect();
            RejectionSummary {
                provider_id,
                reason: "storage_incompatible",
                details: resources
                    .iter()
                    .map(|r| format!("does not accept {} chosen for {}", r.profile, r.resource_id))
                    .collect(),
                resources,
            }
        }
        RejectionReason::Setting(setting) => RejectionSummary {
            provider_id,
            reason: "setting",
            details: vec![match setting {
                SettingRejection::PinnedElsewhere => {
                    "the node is pinned to another provider (--pin)"
                }
                SettingRejection::Forbidden => "forbidden at this node (--forbid)",
                SettingRejection::Objective => {
                    "the plan's objective ranks another choice higher (no storage conflict)"
                }
            }
            .to_owned()],
            resources: Vec::new(),
        },
    }
}

/// One node of the plan summary.
#[derive(Clone, Debug, Serialize)]
pub struct NodeSummary {
    /// Node id.
    pub node_id: String,
    /// Operation.
    pub operation_id: String,
    /// Selected provider.
    pub selected_provider: String,
    /// Requested provider.
    pub requested_provider: Option<String>,
    /// Selection reason.
    pub reason: &'static str,
    /// Rejected providers with evidence.
    pub rejected: Vec<RejectionSummary>,
}

/// One dynamic resource of the plan summary.
#[derive(Clone, Debug, Serialize)]
pub struct DynamicResourceSummary {
    /// The resource.
    pub resource_id: String,
    /// Chosen profile.
    pub profile: String,
    /// Usage.
    pub usage: BufferUsage,
    /// Lifetime.
    pub lifetime: AllocationLifetime,
    /// Minimum bytes of one instance (quantized), where it evaluates.
    pub minimum_bytes: Option<u64>,
}

/// One pool of the plan summary.
#[derive(Clone, Debug, Serialize)]
pub struct PoolSummary {
    /// Pool id.
    pub pool_id: String,
    /// Profile.
    pub profile: String,
    /// Usage.
    pub usage: BufferUsage,
    /// What it holds in serving terms (weights, KV cache, activations, workspaces).
    pub holds: &'static str,
    /// Member count.
    pub members: usize,
    /// Minimum resident bytes.
    pub minimum_resident_bytes: u64,
    /// Maximum resident bytes.
    pub maximum_resident_bytes: u64,
}

/// The memory part of the plan summary.
#[derive(Clone, Debug, Serialize)]
pub struct MemorySummary {
    /// Static bytes.
    pub static_bytes: u64,
    /// Minimum runnable request bytes.
    pub minimum_runnable_bytes: u64,
    /// Usable capacity.
    pub usable_capacity_bytes: u64,
    /// Spare at the minimum load: usable − static − minimum runnable request (not the
    /// report's headroom, which is what sequences have at the ceilings).
    pub spare_bytes: i128,
    /// Pools.
    pub pools: Vec<PoolSummary>,
    /// The report in serving terms (rules in `crate::study::report`).
    pub report: ServingReport,
    /// The ceilings the report was computed at (usable capacity, the policy's maximum
    /// active sequences, the largest context), which the text prints beside the report.
    #[serde(rename = "serving_ceilings")]
    pub limits: ServingLimits,
}

/// One selection component of the plan summary.
#[derive(Clone, Debug, Serialize)]
pub struct ComponentSummary {
    /// First node.
    pub first_node: String,
    /// Nodes.
    pub nodes: usize,
    /// Resources.
    pub resources: usize,
    /// Method (`ilp`, `dp`, `presolve`).
    pub method: String,
    /// Check (`dp-agrees`, ...).
    pub check: String,
    /// `optimal` (proved) or `feasible` (a limit stopped the proof).
    pub status: Status,
    /// Relative gap of an interrupted solve, where known.
    pub gap: Option<f64>,
    /// How the answer was certified.
    pub certificate: String,
}

impl ComponentSummary {
    /// The summary of one component of the solver's report.
    pub fn from_report(report: &ComponentReport) -> Self {
        Self {
            first_node: report.first_node.clone(),
            nodes: report.nodes,
            resources: report.resources,
            method: report.method.clone(),
            check: report.check.clone(),
            status: report.status,
            gap: report.gap,
            certificate: report.certificate.clone(),
        }
    }
}

/// A component whose selection was accepted without a proof of optimality
/// (`--allow-uncertified`).
#[derive(Clone, Debug, Serialize)]
pub struct UncertifiedComponent {
    /// First node of the component.
    pub first_node: String,
    /// Nodes.
    pub nodes: usize,
    /// Its status (`feasible`).
    pub status: Status,
    /// Relative gap, where the solver knows it.
    pub gap: Option<f64>,
    /// Why it is not certified.
    pub certificate: String,
}

/// The components of `selection` not proved optimal, in component order.
pub fn uncertified_components(selection: &[ComponentSummary]) -> Vec<UncertifiedComponent> {
    selection
        .iter()
        .filter(|c| c.status != Status::Optimal)
        .map(|c| UncertifiedComponent {
            first_node: c.first_node.clone(),
            nodes: c.nodes,
            status: c.status,
            gap: c.gap,
            certificate: c.certificate.clone(),
        })
        .collect()
}

/// Everything `jointplan plan` prints.
#[derive(Clone, Debug, Serialize)]
pub struct PlanSummary {
    /// Plan id.
    pub plan_id: String,
    /// Family.
    pub family_id: String,
    /// Device.
    pub device_id: String,
    /// Where the plan was written, if it was.
    pub written_to: Option<String>,
    /// Nodes.
    pub nodes: Vec<NodeSummary>,
    /// Dynamic resources.
    pub dynamic_resources: Vec<DynamicResourceSummary>,
    /// Memory.
    pub memory: MemorySummary,
    /// Selection components.
    pub selection: Vec<ComponentSummary>,
    /// Components accepted without a proof of optimality (only with
    /// `--allow-uncertified`; empty otherwise).
    pub uncertified: Vec<UncertifiedComponent>,
    /// The selection settings recorded in the plan (absent when all are default).
    #[serde(skip_serializing_if = "SelectionSettings::is_default")]
    pub selection_settings: SelectionSettings,
}

/// The node part of a summary (shared by `plan` and `explain`).
pub fn node_summary(
    node: &PlanNode,
    profiles: &BTreeMap<&ResourceId, StorageProfile>,
) -> NodeSummary {
    NodeSummary {
        node_id: node.id.to_string(),
        operation_id: node.operation_id.to_string(),
        selected_provider: node.selection.selected_provider.to_string(),
        requested_provider: node
            .selection
            .requested_provider
            .as_ref()
            .map(ToString::to_string),
        reason: reason_text(node.selection.selection_reason),
        rejected: node
            .selection
            .rejected_providers
            .iter()
            .map(|r| rejection_summary(r, profiles))
            .collect(),
    }
}

/// Builds the summary of a plan.
pub fn plan_summary(
    plan: &ExecutionPlan,
    (report, limits): (ServingReport, ServingLimits),
    selection: &[ComponentSummary],
    written_to: Option<&Path>,
) -> PlanSummary {
    let profiles = resource_profiles(plan);
    let memory = &plan.payload.memory;
    let spare = i128::from(memory.usable_capacity_bytes)
        - i128::from(memory.static_bytes)
        - i128::from(memory.minimum_runnable_request_bytes);
    PlanSummary {
        plan_id: plan.payload.plan_id.clone(),
        family_id: plan.payload.family_id.to_string(),
        device_id: plan.payload.device_id.to_string(),
        written_to: written_to.map(|p| p.display().to_string()),
        nodes: plan
            .payload
            .nodes
            .iter()
            .map(|n| node_summary(n, &profiles))
            .collect(),
        dynamic_resources: memory
            .dynamic_descriptors
            .iter()
            .map(|d| DynamicResourceSummary {
                resource_id: d.base_resource_id.to_string(),
                profile: d.storage.profile.to_string(),
                usage: d.usage,
                lifetime: d.lifetime,
                minimum_bytes: minimum_bytes(d),
            })
            .collect(),
        memory: MemorySummary {
            static_bytes: memory.static_bytes,
            minimum_runnable_bytes: memory.minimum_runnable_request_bytes,
            usable_capacity_bytes: memory.usable_capacity_bytes,
            spare_bytes: spare,
            pools: memory
                .dynamic_pools
                .iter()
                .map(|p| PoolSummary {
                    pool_id: p.pool_id.clone(),
                    profile: p.compatibility.profile.to_string(),
                    usage: p.compatibility.usage,
                    holds: pool_holds(p.compatibility.usage),
                    members: p.resource_ids.len(),
                    minimum_resident_bytes: p.provisioning.minimum_resident_bytes,
                    maximum_resident_bytes: p.provisioning.maximum_resident_bytes,
                })
                .collect(),
            report,
            limits,
        },
        selection: selection.to_vec(),
        uncertified: uncertified_components(selection),
        selection_settings: plan.payload.selection_settings.clone(),
    }
}

fn minimum_bytes(descriptor: &DynamicResourceDescriptor) -> Option<u64> {
    let logical = match &descriptor.demand {
        DynamicResourceDemand::Fixed { bytes } => *bytes,
        DynamicResourceDemand::ActualSequences {
            bytes_per_sequence, ..
        } => *bytes_per_sequence,
        DynamicResourceDemand::Tokens {
            bytes_per_token, ..
        } => *bytes_per_token,
        DynamicResourceDemand::Affine {
            fixed_bytes,
            bytes_per_sequence,
            bytes_per_token,
            ..
        } => fixed_bytes
            .checked_add(*bytes_per_sequence)?
            .checked_add(*bytes_per_token)?,
        DynamicResourceDemand::Pages { bytes_per_page, .. } => *bytes_per_page,
        DynamicResourceDemand::BoundedShapeBuckets { buckets } => buckets.first()?.bytes,
    };
    descriptor
        .storage
        .profile
        .quantize(logical, descriptor.alignment_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_human_and_exact() {
        assert_eq!(human_bytes(1_610_612_736), "1.50 GiB (1610612736 bytes)");
        assert_eq!(human_bytes(512), "512 bytes");
        assert_eq!(human_bytes(65536), "64.00 KiB (65536 bytes)");
        assert_eq!(human_signed_bytes(-2048), "-2.00 KiB (2048 bytes)");
    }
}
