//! Estimate verification (rules 1.6, 2.2): the chosen provider resource plan is well
//! formed, belongs to the selected provider and its registered estimator, respects the
//! operation's alignment and workspace rules, and was computed for exactly this node.

use super::NodeError;
use crate::request::fingerprints::{estimate_fingerprint, node_estimator_input_fingerprint};
use crate::request::{
    align_up, NodeId, NodeResolution, OperationDescriptor, Presence, ProgramNode,
    ProviderDescriptor, ProviderResourcePlan, Sha256Hex, WorkspaceKind, WorkspaceRequirement,
    WorkspaceScope, WorkspaceSizeFormula,
};

/// Why a workspace size formula is malformed, if it is.
pub fn formula_problem(formula: &WorkspaceSizeFormula) -> Option<String> {
    match *formula {
        WorkspaceSizeFormula::Fixed { bytes: 0 } => Some("fixed formula of 0 bytes".into()),
        WorkspaceSizeFormula::ActualSequences {
            bytes_per_sequence: 0,
        } => Some("actual_sequences formula of 0 bytes per sequence".into()),
        WorkspaceSizeFormula::Tokens { bytes_per_token: 0 } => {
            Some("tokens formula of 0 bytes per token".into())
        }
        WorkspaceSizeFormula::Affine {
            fixed_bytes,
            bytes_per_sequence,
            bytes_per_token,
        } => {
            if bytes_per_sequence == 0 && bytes_per_token == 0 {
                Some("affine formula with no per-sequence or per-token term".into())
            } else if fixed_bytes
                .checked_add(bytes_per_sequence)
                .and_then(|s| s.checked_add(bytes_per_token))
                .is_none()
            {
                Some("affine formula terms overflow u64".into())
            } else {
                None
            }
        }
        WorkspaceSizeFormula::Pages {
            bytes_per_page,
            maximum_pages,
        } => {
            if bytes_per_page == 0 || maximum_pages == 0 {
                Some("pages formula with 0 bytes per page or 0 pages".into())
            } else if bytes_per_page.checked_mul(maximum_pages).is_none() {
                Some("pages formula bytes_per_page x maximum_pages overflows u64".into())
            } else {
                None
            }
        }
        WorkspaceSizeFormula::BoundedShapeBuckets { ref buckets } => {
            if buckets.is_empty() || buckets.len() > 64 {
                return Some(format!("{} shape buckets (1..=64 allowed)", buckets.len()));
            }
            if buckets.iter().any(|b| {
                b.maximum_sequences == 0
                    || b.maximum_tokens == 0
                    || b.maximum_pages == 0
                    || b.bytes == 0
            }) {
                return Some("a shape bucket has a zero field".into());
            }
            for (i, pair) in buckets.windows(2).enumerate() {
                let (a, b) = (&pair[0], &pair[1]);
                let non_decreasing = b.maximum_sequences >= a.maximum_sequences
                    && b.maximum_tokens >= a.maximum_tokens
                    && b.maximum_pages >= a.maximum_pages
                    && b.bytes >= a.bytes;
                let grows = b.maximum_sequences > a.maximum_sequences
                    || b.maximum_tokens > a.maximum_tokens
                    || b.maximum_pages > a.maximum_pages;
                if !(non_decreasing && grows) {
                    return Some(format!(
                        "shape bucket {} does not strictly extend bucket {i}",
                        i + 1
                    ));
                }
            }
            None
        }
        _ => None,
    }
}

/// Bytes of a formula at the minimum shape (1 sequence, 1 token, 1 page).
fn minimum_bytes(formula: &WorkspaceSizeFormula) -> Option<u64> {
    match *formula {
        WorkspaceSizeFormula::Fixed { bytes } => Some(bytes),
        WorkspaceSizeFormula::ActualSequences { bytes_per_sequence } => Some(bytes_per_sequence),
        WorkspaceSizeFormula::Tokens { bytes_per_token } => Some(bytes_per_token),
        WorkspaceSizeFormula::Affine {
            fixed_bytes,
            bytes_per_sequence,
            bytes_per_token,
        } => fixed_bytes
            .checked_add(bytes_per_sequence)?
            .checked_add(bytes_per_token),
        WorkspaceSizeFormula::Pages { bytes_per_page, .. } => Some(bytes_per_page),
        WorkspaceSizeFormula::BoundedShapeBuckets { ref buckets } => {
            buckets.first().map(|b| b.bytes)
        }
    }
}

fn independent_of_sequences(formula: &WorkspaceSizeFormula) -> bool {
    match formula {
        WorkspaceSizeFormula::Fixed { .. }
        | WorkspaceSizeFormula::Tokens { .. }
        | WorkspaceSizeFormula::Pages { .. } => true,
        WorkspaceSizeFormula::Affine {
            bytes_per_sequence, ..
        } => *bytes_per_sequence == 0,
        WorkspaceSizeFormula::BoundedShapeBuckets { buckets } => {
            buckets.iter().all(|b| b.maximum_sequences == 1)
        }
        WorkspaceSizeFormula::ActualSequences { .. } => false,
    }
}

/// Why a workspace requirement is malformed, if it is (rules 1.6).
pub fn workspace_problem(workspace: &WorkspaceRequirement) -> Option<String> {
    if let Some(problem) = formula_problem(&workspace.size_formula) {
        return Some(problem);
    }
    if !workspace.alignment_bytes.is_power_of_two() {
        return Some(format!(
            "alignment {} is not a non-zero power of two",
            workspace.alignment_bytes
        ));
    }
    match workspace.scope {
        WorkspaceScope::Plan
            if !matches!(workspace.size_formula, WorkspaceSizeFormula::Fixed { .. }) =>
        {
            return Some("plan scope requires a fixed size formula".into())
        }
        WorkspaceScope::Sequence if !independent_of_sequences(&workspace.size_formula) => {
            return Some(
                "sequence scope requires a formula independent of the sequence count".into(),
            )
        }
        _ => {}
    }
    match minimum_bytes(&workspace.size_formula) {
        Some(bytes) if align_up(bytes, workspace.alignment_bytes).is_some() => {}
        _ => return Some("minimum bytes overflow u64".into()),
    }
    workspace.storage.problem()
}

/// `validate_shape` of a provider resource plan (rules 1.6): its field rules
/// ([`validate_fields`]) and the estimate fingerprint equal to the recomputed one.
pub fn validate_shape(plan: &ProviderResourcePlan) -> Result<(), String> {
    validate_fields(plan)?;
    let expected = estimate_fingerprint(plan).map_err(|e| e.to_string())?;
    if expected != plan.estimate_fingerprint {
        return Err(format!(
            "estimate fingerprint {} differs from the recomputed {expected}",
            plan.estimate_fingerprint
        ));
    }
    Ok(())
}

/// The field rules of `validate_shape` (rules 1.6) without the estimate fingerprint: a
/// stable estimator version, a power-of-two value alignment, workspace rules per kind and
/// scope. The fingerprint is a canonical hash of the whole plan, the costly part; a caller
/// holding a request that passed `validate_request`, which recomputed every candidate's
/// fingerprint, checks only these.
pub fn validate_fields(plan: &ProviderResourcePlan) -> Result<(), String> {
    if !plan.estimator_version.is_stable() {
        return Err(format!(
            "estimator {} version {} has major 0",
            plan.estimator_id, plan.estimator_version
        ));
    }
    if !plan.value_alignment_bytes.is_power_of_two() {
        return Err(format!(
            "value alignment {} is not a non-zero power of two",
            plan.value_alignment_bytes
        ));
    }
    for kind in WorkspaceKind::ALL {
        let Some(workspace) = plan.workspace(kind) else {
            continue;
        };
        let invocation = workspace.scope == WorkspaceScope::Invocation;
        match kind {
            WorkspaceKind::Scratch | WorkspaceKind::Binding if !invocation => {
                return Err(format!(
                    "{} workspace has scope {:?}; it must be invocation scoped",
                    kind.name(),
                    workspace.scope
                ))
            }
            WorkspaceKind::Persistent if invocation => {
                return Err("persistent workspace must not be invocation scoped".into())
            }
            _ => {}
        }
        if let Some(problem) = workspace_problem(workspace) {
            return Err(format!("{} workspace: {problem}", kind.name()));
        }
    }
    Ok(())
}

fn presence_name(presence: Presence) -> &'static str {
    match presence {
        Presence::Forbidden => "forbidden",
        Presence::Optional => "optional",
        Presence::Required => "required",
    }
}

/// What estimate verification compares against.
pub struct EstimateContext<'a> {
    /// The family fingerprint.
    pub family_fingerprint: &'a Sha256Hex,
    /// The program node.
    pub node: &'a ProgramNode,
    /// Its operation.
    pub operation: &'a OperationDescriptor,
    /// The operation's fingerprint.
    pub operation_fingerprint: &'a Sha256Hex,
    /// Its resolution.
    pub resolution: &'a NodeResolution,
}

/// Verifies the chosen estimate of a node (rules 2.2) and returns the selected catalog
/// provider. The plan's own shape (`validate_shape`) is the caller's to check first, once
/// per candidate: the builder checks its fingerprint in `validate_request` and its fields
/// when deriving the candidates (`candidates::derive_candidates`), before any is chosen.
pub fn verify_estimate<'c>(
    ctx: &EstimateContext<'_>,
    catalog_row: Option<&'c [ProviderDescriptor]>,
    selected: &crate::request::ProviderId,
    plan: &ProviderResourcePlan,
) -> Result<&'c ProviderDescriptor, NodeError> {
    let node: &NodeId = &ctx.node.id;
    if &plan.provider_id != selected {
        return Err(NodeError::EstimateProviderMismatch {
            node: node.clone(),
            estimate_provider: plan.provider_id.clone(),
            selected: selected.clone(),
        });
    }
    let Some(descriptor) = catalog_row
        .into_iter()
        .flatten()
        .find(|p| &p.provider_id == selected)
    else {
        return Err(NodeError::SelectedProviderNotRegistered {
            node: node.clone(),
            provider: selected.clone(),
            operation: ctx.operation.id.clone(),
        });
    };
    let identity = |id: &dyn std::fmt::Display,
                    v: &dyn std::fmt::Display,
                    f: &dyn std::fmt::Display| { format!("{id} v{v} ({f})") };
    if plan.estimator_id != descriptor.resource_estimator_id
        || plan.estimator_version != descriptor.resource_estimator_version
        || plan.estimator_implementation_fingerprint
            != descriptor.resource_estimator_implementation_fingerprint
    {
        return Err(NodeError::EstimatorIdentityMismatch {
            node: node.clone(),
            provider: selected.clone(),
            expected: identity(
                &descriptor.resource_estimator_id,
                &descriptor.resource_estimator_version,
                &descriptor.resource_estimator_implementation_fingerprint,
            ),
            found: identity(
                &plan.estimator_id,
                &plan.estimator_version,
                &plan.estimator_implementation_fingerprint,
            ),
        });
    }
    let minimum = ctx.operation.resources.minimum_value_alignment_bytes;
    if minimum == 0
        || plan.value_alignment_bytes < minimum
        || plan.value_alignment_bytes % minimum != 0
    {
        return Err(NodeError::ValueAlignment {
            node: node.clone(),
            provider: selected.clone(),
            operation: ctx.operation.id.clone(),
            alignment: plan.value_alignment_bytes,
            minimum,
        });
    }
    let rules = &ctx.operation.resources;
    for (kind, presence) in [
        (WorkspaceKind::Scratch, rules.scratch),
        (WorkspaceKind::Binding, rules.binding),
        (WorkspaceKind::Persistent, rules.persistent),
    ] {
        let present = plan.workspace(kind).is_some();
        if !presence.accepts(present) {
            return Err(NodeError::WorkspacePresence {
                node: node.clone(),
                provider: selected.clone(),
                operation: ctx.operation.id.clone(),
                kind: kind.name(),
                present,
                presence: presence_name(presence),
            });
        }
    }
    let expected = node_estimator_input_fingerprint(
        ctx.family_fingerprint,
        ctx.operation,
        ctx.operation_fingerprint,
        ctx.node,
        ctx.resolution,
        selected,
    )?;
    if expected != plan.estimator_input_fingerprint {
        return Err(NodeError::EstimatorInputMismatch {
            node: node.clone(),
            provider: selected.clone(),
            expected: expected.to_string(),
            found: plan.estimator_input_fingerprint.to_string(),
        });
    }
    Ok(descriptor)
}
