//! Node resolution rules: value bindings and their storage (rules 1.5), provider
//! resource candidates and resolution-local rejections (rules 1.6).

use std::fmt::Display;

use crate::request::fingerprints::estimate_fingerprint;
use crate::request::{
    align_up, AliasPolicy, BufferUsage, NodeResolution, ProviderResourcePlan, ResolutionRejection,
    ShapeBucket, StorageComponent, ValueBinding, ValueRole, WorkspaceKind, WorkspaceRequirement,
    WorkspaceScope, WorkspaceSizeFormula,
};

use super::{deferred, key, RequestError};

/// Most buckets of a bounded-shape workspace formula.
pub const MAX_FORMULA_BUCKETS: usize = 64;

/// Checks every resolution on its own.
pub(super) fn validate_resolutions(resolutions: &[NodeResolution]) -> Result<(), RequestError> {
    use rayon::prelude::*;
    // Each resolution is checked on its own, in parallel; the error is the first in index
    // order, as the sequential loop gave.
    match resolutions
        .par_iter()
        .enumerate()
        .find_map_first(|(i, resolution)| {
            validate_resolution(
                &deferred(|f| write!(f, "node_resolutions[{i}]")),
                resolution,
            )
            .err()
        }) {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

fn validate_resolution(
    path: &dyn Display,
    resolution: &NodeResolution,
) -> Result<(), RequestError> {
    let node = resolution.node_id.as_str();
    if resolution.values.is_empty() {
        return Err(RequestError::EmptyResolutionValues {
            path: format!("{path}.values"),
            detail: format!("the resolution of node {node:?} binds no values"),
        });
    }
    for (j, binding) in resolution.values.iter().enumerate() {
        validate_binding(
            &deferred(|f| write!(f, "{path}.values[{j}]")),
            node,
            binding,
        )?;
    }
    let candidates = &resolution.provider_resource_candidates;
    if candidates.is_empty() {
        return Err(RequestError::InvalidCandidateList {
            path: format!("{path}.provider_resource_candidates"),
            detail: format!("node {node:?} has no provider candidate"),
        });
    }
    for (k, candidate) in candidates.iter().enumerate() {
        let candidate_path = deferred(|f| write!(f, "{path}.provider_resource_candidates[{k}]"));
        if k > 0 && candidates[k - 1].provider_id >= candidate.provider_id {
            return Err(RequestError::InvalidCandidateList {
                path: format!("{candidate_path}.provider_id"),
                detail: format!(
                    "node {node:?}: candidate {:?} is not after {:?} (sorted by provider id, unique)",
                    candidate.provider_id.as_str(),
                    candidates[k - 1].provider_id.as_str()
                ),
            });
        }
        validate_candidate(&candidate_path, node, candidate)?;
    }
    for (provider, rejection) in &resolution.provider_resolution_rejections {
        let rejection_path = deferred(|f| {
            write!(
                f,
                "{path}.provider_resolution_rejections{}",
                key(provider.as_str())
            )
        });
        if candidates
            .binary_search_by(|c| c.provider_id.cmp(provider))
            .is_ok()
        {
            return Err(RequestError::CandidateAlsoRejected {
                path: rejection_path.to_string(),
                detail: format!(
                    "node {node:?}: provider {:?} is a candidate and rejected",
                    provider.as_str()
                ),
            });
        }
        let ResolutionRejection::StorageIncompatible { resource_ids } = rejection;
        let ids_path =
            deferred(|f| write!(f, "{rejection_path}.storage_incompatible.resource_ids"));
        if resource_ids.is_empty() {
            return Err(RequestError::InvalidResolutionRejection {
                path: ids_path.to_string(),
                detail: format!(
                    "node {node:?}: provider {:?} is rejected for storage of no resource",
                    provider.as_str()
                ),
            });
        }
        if let Some(m) = (1..resource_ids.len()).find(|&m| resource_ids[m - 1] >= resource_ids[m]) {
            return Err(RequestError::InvalidResolutionRejection {
                path: format!("{ids_path}[{m}]"),
                detail: format!(
                    "node {node:?}: provider {:?} rejection lists {:?} after {:?} (strictly ascending)",
                    provider.as_str(),
                    resource_ids[m].as_str(),
                    resource_ids[m - 1].as_str()
                ),
            });
        }
    }
    Ok(())
}

fn validate_binding(
    path: &dyn Display,
    node: &str,
    binding: &ValueBinding,
) -> Result<(), RequestError> {
    let value = binding.value_id.as_str();
    let who = deferred(|f| write!(f, "node {node:?} binds value {value:?}"));
    match binding.role {
        ValueRole::Input if !binding.access.reads() => {
            return Err(RequestError::InvalidBindingAccess {
                path: format!("{path}.access"),
                detail: format!("{who} as input {} with write access", binding.ordinal),
            });
        }
        ValueRole::Input if binding.alias != AliasPolicy::NoAlias => {
            return Err(RequestError::InvalidBindingAccess {
                path: format!("{path}.alias"),
                detail: format!(
                    "{who} as input {} with an alias (inputs are no_alias)",
                    binding.ordinal
                ),
            });
        }
        ValueRole::Output if !binding.access.writes() => {
            return Err(RequestError::InvalidBindingAccess {
                path: format!("{path}.access"),
                detail: format!("{who} as output {} with read access", binding.ordinal),
            });
        }
        _ => {}
    }
    if let Some(problem) = binding.tensor.problem() {
        return Err(RequestError::InvalidBindingTensor {
            path: format!("{path}.tensor"),
            detail: format!("{who}: {problem}"),
        });
    }
    let components = &binding.storage.components;
    let storage_path = deferred(|f| write!(f, "{path}.storage.components"));
    if components.is_empty() {
        return Err(RequestError::InvalidValueStorage {
            path: storage_path.to_string(),
            detail: format!("{who} stored nowhere"),
        });
    }
    for (c, component) in components.iter().enumerate() {
        let component_path = deferred(|f| write!(f, "{storage_path}[{c}]"));
        let element = component.element_type.byte_size();
        let resource = component.resource_id.as_str();
        let bad = |field: &str, detail: String| RequestError::InvalidStorageComponent {
            path: format!("{component_path}.{field}"),
            detail: format!("{who} in resource {resource:?}: {detail}"),
        };
        if component.length_bytes == 0 {
            return Err(bad("length_bytes", "the component is empty".to_owned()));
        }
        if component.end_bytes().is_none() {
            return Err(bad(
                "length_bytes",
                "offset + length overflows u64".to_owned(),
            ));
        }
        if component.offset_bytes % element != 0 {
            return Err(bad(
                "offset_bytes",
                format!(
                    "offset {} is not a multiple of the {element}-byte element",
                    component.offset_bytes
                ),
            ));
        }
        if component.length_bytes % element != 0 {
            return Err(bad(
                "length_bytes",
                format!(
                    "length {} is not a multiple of the {element}-byte element",
                    component.length_bytes
                ),
            ));
        }
        if components.len() > 1 && component.component_id.is_none() {
            return Err(RequestError::InvalidValueStorage {
                path: format!("{component_path}.component_id"),
                detail: format!(
                    "{who} in {} components, but this one has no component id",
                    components.len()
                ),
            });
        }
        if c > 0 {
            let previous = &components[c - 1];
            if storage_order(previous) > storage_order(component) {
                return Err(RequestError::InvalidValueStorage {
                    path: component_path.to_string(),
                    detail: format!(
                        "{who}: components are not sorted by (component id, resource id, offset)"
                    ),
                });
            }
            if component.component_id.is_some() && previous.component_id == component.component_id {
                return Err(RequestError::InvalidValueStorage {
                    path: format!("{component_path}.component_id"),
                    detail: format!(
                        "{who}: component {:?} is stored twice",
                        component
                            .component_id
                            .as_ref()
                            .map(|id| id.as_str())
                            .unwrap_or_default()
                    ),
                });
            }
        }
    }
    check_overlap(&storage_path, &who, binding)?;
    if let [single] = components.as_slice() {
        if single.component_id.is_none() && single.element_type != binding.tensor.element_type {
            return Err(RequestError::StorageDoesNotFitTensor {
                path: format!("{storage_path}[0].element_type"),
                detail: format!(
                    "{who} as {:?} but stores {:?} elements",
                    binding.tensor.element_type, single.element_type
                ),
            });
        }
    }
    if binding.usage == BufferUsage::Weights {
        validate_weight_storage(path, &who, binding)
    } else {
        if binding.weight.is_some() {
            return Err(RequestError::WeightBindingMismatch {
                path: format!("{path}.weight"),
                detail: format!("{who} with usage {:?} but carries a weight", binding.usage),
            });
        }
        let [single] = components.as_slice() else {
            return Err(RequestError::StorageDoesNotFitTensor {
                path: storage_path.to_string(),
                detail: format!(
                    "{who} with usage {:?} in {} components (exactly one allowed)",
                    binding.usage,
                    components.len()
                ),
            });
        };
        let needed = binding.tensor.minimum_storage_bytes().unwrap_or(u64::MAX);
        if single.length_bytes < needed {
            return Err(RequestError::StorageDoesNotFitTensor {
                path: format!("{storage_path}[0].length_bytes"),
                detail: format!(
                    "{who} in {} bytes of resource {:?}, the tensor needs {needed}",
                    single.length_bytes,
                    single.resource_id.as_str()
                ),
            });
        }
        Ok(())
    }
}

/// The sort key of storage components: component id (none first), resource id, offset.
fn storage_order(
    component: &StorageComponent,
) -> (
    Option<&crate::request::WeightId>,
    &crate::request::ResourceId,
    u64,
) {
    (
        component.component_id.as_ref(),
        &component.resource_id,
        component.offset_bytes,
    )
}

/// No two components of one value share a byte of one resource (sort by resource, offset).
fn check_overlap(
    storage_path: &dyn Display,
    who: &dyn Display,
    binding: &ValueBinding,
) -> Result<(), RequestError> {
    let components = &binding.storage.components;
    if components.len() < 2 {
        return Ok(());
    }
    let mut order: Vec<usize> = (0..components.len()).collect();
    order.sort_by(|&a, &b| {
        (&components[a].resource_id, components[a].offset_bytes)
            .cmp(&(&components[b].resource_id, components[b].offset_bytes))
    });
    for pair in order.windows(2) {
        let (a, b) = (&components[pair[0]], &components[pair[1]]);
        if a.overlaps(b) {
            return Err(RequestError::StorageOverlap {
                path: format!("{storage_path}[{}]", pair[1].max(pair[0])),
                detail: format!(
                    "{who}: components {} and {} share bytes of resource {:?}",
                    pair[0].min(pair[1]),
                    pair[0].max(pair[1]),
                    a.resource_id.as_str()
                ),
            });
        }
    }
    Ok(())
}

fn validate_weight_storage(
    path: &dyn Display,
    who: &dyn Display,
    binding: &ValueBinding,
) -> Result<(), RequestError> {
    let Some(weight) = &binding.weight else {
        return Err(RequestError::WeightBindingMismatch {
            path: format!("{path}.weight"),
            detail: format!("{who} with usage weights but carries no weight"),
        });
    };
    let components = &binding.storage.components;
    if let Some(m) = (1..weight.components.len())
        .find(|&m| weight.components[m - 1].component_id >= weight.components[m].component_id)
    {
        return Err(RequestError::WeightBindingMismatch {
            path: format!("{path}.weight.components[{m}].component_id"),
            detail: format!("{who}: weight components are not sorted by component id and unique"),
        });
    }
    if weight.components.len() != components.len() {
        return Err(RequestError::WeightBindingMismatch {
            path: format!("{path}.storage.components"),
            detail: format!(
                "{who}: weight {:?} has {} components, the storage {}",
                weight.weight_id.as_str(),
                weight.components.len(),
                components.len()
            ),
        });
    }
    for (c, (spec, stored)) in weight.components.iter().zip(components).enumerate() {
        let component_path = deferred(|f| write!(f, "{path}.storage.components[{c}]"));
        let name = spec.component_id.as_str();
        if stored.component_id.as_ref() != Some(&spec.component_id) {
            return Err(RequestError::WeightBindingMismatch {
                path: format!("{component_path}.component_id"),
                detail: format!(
                    "{who}: storage component {c} should hold weight component {name:?}"
                ),
            });
        }
        let elements = spec
            .physical_dimensions
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d));
        let bytes = elements.and_then(|e| spec.encoding.physical_bytes(e));
        if bytes != Some(stored.length_bytes) {
            return Err(RequestError::WeightBindingMismatch {
                path: format!("{component_path}.length_bytes"),
                detail: format!(
                    "{who}: weight component {name:?} is {} bytes, its storage {}",
                    bytes.map_or("an overflowing number of".to_owned(), |b| b.to_string()),
                    stored.length_bytes
                ),
            });
        }
        let element = spec.encoding.physical_element_type();
        if stored.element_type != element {
            return Err(RequestError::WeightBindingMismatch {
                path: format!("{component_path}.element_type"),
                detail: format!(
                    "{who}: weight component {name:?} stores {element:?}, its storage {:?}",
                    stored.element_type
                ),
            });
        }
    }
    Ok(())
}

fn validate_candidate(
    path: &dyn Display,
    node: &str,
    candidate: &ProviderResourcePlan,
) -> Result<(), RequestError> {
    let provider = candidate.provider_id.as_str();
    let who = deferred(|f| write!(f, "node {node:?} provider {provider:?}"));
    if !candidate.estimator_version.is_stable() {
        return Err(RequestError::InvalidEstimate {
            path: format!("{path}.estimator_version.major"),
            detail: format!(
                "{who}: estimator {:?} has unstable version {}",
                candidate.estimator_id.as_str(),
                candidate.estimator_version
            ),
        });
    }
    if !candidate.value_alignment_bytes.is_power_of_two() {
        return Err(RequestError::InvalidEstimate {
            path: format!("{path}.value_alignment_bytes"),
            detail: format!(
                "{who}: value alignment {} is not a non-zero power of two",
                candidate.value_alignment_bytes
            ),
        });
    }
    for kind in WorkspaceKind::ALL {
        let Some(workspace) = candidate.workspace(kind) else {
            continue;
        };
        let workspace_path = deferred(|f| write!(f, "{path}.{}", kind.name()));
        let invocation = workspace.scope == WorkspaceScope::Invocation;
        let scope_ok = match kind {
            WorkspaceKind::Scratch | WorkspaceKind::Binding => invocation,
            WorkspaceKind::Persistent => !invocation,
        };
        if !scope_ok {
            return Err(RequestError::InvalidEstimate {
                path: format!("{workspace_path}.scope"),
                detail: format!(
                    "{who}: {} workspace has scope {:?} ({})",
                    kind.name(),
                    workspace.scope,
                    match kind {
                        WorkspaceKind::Persistent => "persistent workspaces outlive one invocation",
                        _ => "scratch and binding workspaces live for one invocation",
                    }
                ),
            });
        }
        validate_workspace(
            &workspace_path,
            &deferred(|f| write!(f, "{who} {} workspace", kind.name())),
            workspace,
        )?;
    }
    let expected = estimate_fingerprint(candidate)
        .map_err(|e| RequestError::fingerprint(path.to_string(), e))?;
    if candidate.estimate_fingerprint != expected {
        return Err(RequestError::EstimateFingerprintMismatch {
            path: format!("{path}.estimate_fingerprint"),
            detail: format!(
                "{who} quotes estimate fingerprint {}, its fields give {expected} \
                 (run `jointplan seal` after editing an estimate)",
                candidate.estimate_fingerprint
            ),
        });
    }
    Ok(())
}

fn validate_workspace(
    path: &dyn Display,
    who: &dyn Display,
    workspace: &WorkspaceRequirement,
) -> Result<(), RequestError> {
    let bad = |field: &str, detail: String| RequestError::InvalidWorkspace {
        path: format!("{path}.{field}"),
        detail: format!("{who}: {detail}"),
    };
    let minimum = minimum_bytes(&workspace.size_formula)
        .map_err(|(field, detail)| bad(&format!("size_formula.{field}"), detail))?;
    if !workspace.alignment_bytes.is_power_of_two() {
        return Err(bad(
            "alignment_bytes",
            format!(
                "alignment {} is not a non-zero power of two",
                workspace.alignment_bytes
            ),
        ));
    }
    if align_up(minimum, workspace.alignment_bytes).is_none() {
        return Err(bad(
            "alignment_bytes",
            format!(
                "{minimum} bytes rounded up to {} overflow u64",
                workspace.alignment_bytes
            ),
        ));
    }
    match workspace.scope {
        WorkspaceScope::Plan
            if !matches!(workspace.size_formula, WorkspaceSizeFormula::Fixed { .. }) =>
        {
            return Err(bad(
                "scope",
                "plan-scoped workspaces need a fixed size formula".to_owned(),
            ));
        }
        WorkspaceScope::Sequence if !sequence_independent(&workspace.size_formula) => {
            return Err(bad(
                "scope",
                "sequence-scoped workspaces need a formula independent of the sequence count"
                    .to_owned(),
            ));
        }
        _ => {}
    }
    if let Some(problem) = workspace.storage.problem() {
        return Err(bad("storage.accepted_profiles", problem));
    }
    Ok(())
}

/// The bytes of a formula at the minimum shape (1 sequence, 1 token, 1 page), or the field
/// (relative to `size_formula`) and reason why the formula is malformed.
pub(crate) fn minimum_bytes(formula: &WorkspaceSizeFormula) -> Result<u64, (String, String)> {
    let zero = |field: &str, what: &str| Err((field.to_owned(), format!("{what} is zero")));
    match *formula {
        WorkspaceSizeFormula::Fixed { bytes: 0 } => zero("fixed.bytes", "fixed bytes"),
        WorkspaceSizeFormula::Fixed { bytes } => Ok(bytes),
        WorkspaceSizeFormula::ActualSequences {
            bytes_per_sequence: 0,
        } => zero("actual_sequences.bytes_per_sequence", "bytes per sequence"),
        WorkspaceSizeFormula::ActualSequences { bytes_per_sequence } => Ok(bytes_per_sequence),
        WorkspaceSizeFormula::Tokens { bytes_per_token: 0 } => {
            zero("tokens.bytes_per_token", "bytes per token")
        }
        WorkspaceSizeFormula::Tokens { bytes_per_token } => Ok(bytes_per_token),
        WorkspaceSizeFormula::Affine {
            fixed_bytes,
            bytes_per_sequence,
            bytes_per_token,
        } => {
            if bytes_per_sequence == 0 && bytes_per_token == 0 {
                return Err((
                    "affine".to_owned(),
                    "affine formula has no per-sequence or per-token term (use fixed)".to_owned(),
                ));
            }
            fixed_bytes
                .checked_add(bytes_per_sequence)
                .and_then(|s| s.checked_add(bytes_per_token))
                .ok_or_else(|| ("affine".to_owned(), "affine terms overflow u64".to_owned()))
        }
        WorkspaceSizeFormula::Pages {
            bytes_per_page,
            maximum_pages,
        } => {
            if bytes_per_page == 0 {
                return zero("pages.bytes_per_page", "bytes per page");
            }
            if maximum_pages == 0 {
                return zero("pages.maximum_pages", "maximum pages");
            }
            if bytes_per_page.checked_mul(maximum_pages).is_none() {
                return Err((
                    "pages".to_owned(),
                    "bytes per page × maximum pages overflows u64".to_owned(),
                ));
            }
            Ok(bytes_per_page)
        }
        WorkspaceSizeFormula::BoundedShapeBuckets { ref buckets } => {
            validate_buckets(buckets)?;
            Ok(buckets[0].bytes)
        }
    }
}

fn validate_buckets(buckets: &[ShapeBucket]) -> Result<(), (String, String)> {
    const FIELD: &str = "bounded_shape_buckets.buckets";
    if buckets.is_empty() || buckets.len() > MAX_FORMULA_BUCKETS {
        return Err((
            FIELD.to_owned(),
            format!(
                "{} buckets (1..={MAX_FORMULA_BUCKETS} allowed)",
                buckets.len()
            ),
        ));
    }
    for (i, bucket) in buckets.iter().enumerate() {
        let fields = [
            ("maximum_sequences", u64::from(bucket.maximum_sequences)),
            ("maximum_tokens", bucket.maximum_tokens),
            ("maximum_pages", bucket.maximum_pages),
            ("bytes", bucket.bytes),
        ];
        if let Some((field, _)) = fields.iter().find(|(_, v)| *v == 0) {
            return Err((
                format!("{FIELD}[{i}].{field}"),
                format!("bucket {i} has zero {field}"),
            ));
        }
        if i > 0 {
            let p = &buckets[i - 1];
            let grows = bucket.maximum_sequences >= p.maximum_sequences
                && bucket.maximum_tokens >= p.maximum_tokens
                && bucket.maximum_pages >= p.maximum_pages
                && (
                    bucket.maximum_sequences,
                    bucket.maximum_tokens,
                    bucket.maximum_pages,
                ) != (p.maximum_sequences, p.maximum_tokens, p.maximum_pages)
                && bucket.bytes >= p.bytes;
            if !grows {
                return Err((
                    format!("{FIELD}[{i}]"),
                    format!(
                        "bucket {i} does not strictly extend bucket {} (every maximum and the \
                         bytes at least as large, one maximum larger)",
                        i - 1
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Formulas whose size does not depend on how many sequences are active.
fn sequence_independent(formula: &WorkspaceSizeFormula) -> bool {
    match formula {
        WorkspaceSizeFormula::Fixed { .. }
        | WorkspaceSizeFormula::Tokens { .. }
        | WorkspaceSizeFormula::Pages { .. } => true,
        WorkspaceSizeFormula::ActualSequences { .. } => false,
        WorkspaceSizeFormula::Affine {
            bytes_per_sequence, ..
        } => *bytes_per_sequence == 0,
        WorkspaceSizeFormula::BoundedShapeBuckets { buckets } => {
            buckets.iter().all(|b| b.maximum_sequences == 1)
        }
    }
}
