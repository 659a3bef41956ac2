//! Provider compatibility (rules 1.4) and provider selection evidence (2.7).

use std::collections::BTreeSet;

use serde::Serialize;

use super::NodeError;
use crate::plan::{
    CompatibilityRejection, ProviderSelection, RejectedProvider, RejectionReason, SelectionReason,
};
use crate::request::{
    CapabilityCatalog, CapabilityId, ContractVersion, DeterminismRequirement, NodeId,
    OperationDescriptor, OperationId, ProviderId, QuantizationFormatId, WeightFormatId,
};

/// What a node needs of a provider.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CompatibilityRequest {
    /// The operation.
    pub operation_id: OperationId,
    /// The version the node requires.
    pub required_version: ContractVersion,
    /// Operation ∪ resolution capabilities.
    pub required_capabilities: BTreeSet<CapabilityId>,
    /// Weight formats the node's weights require.
    pub required_weight_formats: BTreeSet<WeightFormatId>,
    /// Quantization formats the node's weights require.
    pub required_quantization_formats: BTreeSet<QuantizationFormatId>,
    /// The policy's determinism requirement.
    pub execution_determinism: DeterminismRequirement,
}

/// One incompatible provider and every reason, in the fixed reason order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProviderRejection {
    /// The provider.
    pub provider_id: ProviderId,
    /// The reasons (never empty).
    pub reasons: Vec<CompatibilityRejection>,
}

/// The compatibility of every provider of an operation with one request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CompatibilityReport {
    /// The request, with the operation's required capabilities unioned in.
    pub request: CompatibilityRequest,
    /// Compatible providers, sorted.
    pub compatible_provider_ids: Vec<ProviderId>,
    /// Incompatible providers, sorted by provider id.
    pub rejected: Vec<ProviderRejection>,
}

impl CompatibilityReport {
    /// Whether `provider` is compatible.
    pub fn is_compatible(&self, provider: &ProviderId) -> bool {
        self.compatible_provider_ids.binary_search(provider).is_ok()
    }
}

fn missing<T: Ord + Clone>(required: &BTreeSet<T>, offered: &BTreeSet<T>) -> BTreeSet<T> {
    required.difference(offered).cloned().collect()
}

/// The compatibility report of every provider of `operation` (catalog order = provider id
/// order), with reasons accumulated in the fixed order: operation version, provider version,
/// missing capabilities, weight formats, quantization formats, determinism.
pub fn provider_compatibility(
    catalog: &CapabilityCatalog,
    operation: &OperationDescriptor,
    mut request: CompatibilityRequest,
) -> CompatibilityReport {
    request
        .required_capabilities
        .extend(operation.provider.required_capabilities.iter().cloned());
    let mut compatible = Vec::new();
    let mut rejected = Vec::new();
    for provider in catalog.providers.get(&operation.id).into_iter().flatten() {
        let mut reasons = Vec::new();
        if !operation.version.satisfies(request.required_version) {
            reasons.push(CompatibilityRejection::OperationVersionMismatch {
                required: request.required_version,
                available: operation.version,
            });
        }
        if !provider.version.satisfies(request.required_version) {
            reasons.push(CompatibilityRejection::ProviderVersionMismatch {
                required: request.required_version,
                available: provider.version,
            });
        }
        let capabilities = missing(&request.required_capabilities, &provider.capabilities);
        if !capabilities.is_empty() {
            reasons.push(CompatibilityRejection::MissingCapabilities(capabilities));
        }
        let formats = missing(
            &request.required_weight_formats,
            &provider.accepted_weight_formats,
        );
        if !formats.is_empty() {
            reasons.push(CompatibilityRejection::UnsupportedWeightFormats(formats));
        }
        let quantization = missing(
            &request.required_quantization_formats,
            &provider.accepted_quantization_formats,
        );
        if !quantization.is_empty() {
            reasons.push(CompatibilityRejection::UnsupportedQuantizationFormats(
                quantization,
            ));
        }
        if !request
            .execution_determinism
            .accepts(&provider.execution_semantics)
        {
            reasons.push(CompatibilityRejection::InsufficientExecutionDeterminism {
                required: request.execution_determinism,
                available: provider.execution_semantics.clone(),
            });
        }
        if reasons.is_empty() {
            compatible.push(provider.provider_id.clone());
        } else {
            rejected.push(ProviderRejection {
                provider_id: provider.provider_id.clone(),
                reasons,
            });
        }
    }
    compatible.sort();
    rejected.sort_by(|a, b| a.provider_id.cmp(&b.provider_id));
    CompatibilityReport {
        request,
        compatible_provider_ids: compatible,
        rejected,
    }
}

/// Fails when no provider is compatible: an operation version mismatch (first found), or a
/// provider version mismatch on every rejection (the highest available version), is an
/// incompatible operation version; anything else is an unsupported operation.
pub fn require_compatible_for_node(
    node: &NodeId,
    report: &CompatibilityReport,
) -> Result<(), NodeError> {
    if !report.compatible_provider_ids.is_empty() {
        return Ok(());
    }
    let operation = &report.request.operation_id;
    let version_error = |required, available| NodeError::IncompatibleOperationVersion {
        node: node.clone(),
        operation: operation.clone(),
        required,
        available,
    };
    for rejection in &report.rejected {
        for reason in &rejection.reasons {
            if let CompatibilityRejection::OperationVersionMismatch {
                required,
                available,
            } = reason
            {
                return Err(version_error(*required, *available));
            }
        }
    }
    let provider_mismatch = |r: &ProviderRejection| {
        r.reasons.iter().find_map(|reason| match reason {
            CompatibilityRejection::ProviderVersionMismatch {
                required,
                available,
            } => Some((*available, *required)),
            _ => None,
        })
    };
    if !report.rejected.is_empty()
        && report
            .rejected
            .iter()
            .all(|r| provider_mismatch(r).is_some())
    {
        if let Some((available, required)) =
            report.rejected.iter().filter_map(provider_mismatch).max()
        {
            return Err(version_error(required, available));
        }
    }
    Err(NodeError::UnsupportedOperation {
        node: node.clone(),
        operation: operation.clone(),
        rejections: serde_json::to_string(&report.rejected)
            .unwrap_or_else(|_| format!("{:?}", report.rejected)),
    })
}

/// Builds the selection evidence of a node (rules 2.7): the solver's provider must be
/// compatible; the reason follows the preference; rejected providers are the report's
/// incompatible ones, a preferred provider missing from the catalog row (`not_registered`),
/// and the joint solver's storage rejection; a fallback needs evidence for the preferred
/// provider.
pub fn select_provider(
    catalog: &CapabilityCatalog,
    node: &NodeId,
    operation: &OperationDescriptor,
    report: &CompatibilityReport,
    preferred: Option<&ProviderId>,
    selected: &ProviderId,
    storage_rejection: Option<&RejectedProvider>,
) -> Result<ProviderSelection, NodeError> {
    require_compatible_for_node(node, report)?;
    if !report.is_compatible(selected) {
        let reasons = report
            .rejected
            .iter()
            .find(|r| &r.provider_id == selected)
            .map(|r| serde_json::to_string(&r.reasons).unwrap_or_default())
            .unwrap_or_else(|| "not in the operation's catalog row".to_owned());
        return Err(NodeError::SelectedIncompatibleProvider {
            node: node.clone(),
            provider: selected.clone(),
            reasons,
        });
    }
    let selection_reason = match preferred {
        Some(p) if p == selected => SelectionReason::PreferredCompatible,
        Some(_) => SelectionReason::FallbackFromPreferred,
        None => SelectionReason::CanonicalCompatible,
    };
    let mut rejected: Vec<RejectedProvider> = report
        .rejected
        .iter()
        .map(|r| RejectedProvider {
            provider_id: r.provider_id.clone(),
            reasons: RejectionReason::Incompatible(r.reasons.clone()),
        })
        .collect();
    if let Some(p) = preferred {
        if catalog.provider(&operation.id, p).is_none() {
            rejected.push(RejectedProvider {
                provider_id: p.clone(),
                reasons: RejectionReason::NotRegistered,
            });
        }
    }
    if let Some(storage) = storage_rejection {
        if rejected
            .iter()
            .any(|r| r.provider_id == storage.provider_id)
        {
            return Err(NodeError::DuplicateRejectionEvidence {
                node: node.clone(),
                provider: storage.provider_id.clone(),
            });
        }
        rejected.push(storage.clone());
    }
    if let (SelectionReason::FallbackFromPreferred, Some(p)) = (selection_reason, preferred) {
        if !rejected.iter().any(|r| &r.provider_id == p) {
            return Err(NodeError::FallbackLacksEvidence {
                node: node.clone(),
                preferred: p.clone(),
                selected: selected.clone(),
            });
        }
    }
    rejected.sort_by(|a, b| a.provider_id.cmp(&b.provider_id));
    Ok(ProviderSelection {
        requested_provider: preferred.cloned(),
        selected_provider: selected.clone(),
        selection_reason,
        rejected_providers: rejected,
    })
}
