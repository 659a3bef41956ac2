//! Rules 3-12 and 25: the nodes, their evidence, work, workspaces and aliases, and the
//! retained values (the state rules 9 and 10 are in [`super::state`]). Each rule is a
//! direct reading of the plan, node by node.

use crate::canonical::{sha256_hex, Sha256Hex};
use crate::plan::{
    AllocationKind, AllocationLifetime, DynamicResourceDemand, DynamicResourceDescriptor,
    ExecutionPlanPayload, NodeWorkContract, PlanNode, RejectionReason, ResourceAllocation,
    SelectionReason, SelectionSettings, SettingRejection,
};
use crate::request::{
    AliasPolicy, BufferUsage, ElementType, IdMap, IdSet, NodeId, ProgramValueId, ResourceId,
    ValueRole, WorkspaceRequirement, WorkspaceScope, WorkspaceSizeFormula,
};

use super::Findings;

pub(super) fn node_path(index: usize) -> String {
    format!("payload.nodes[{index}]")
}

/// The memory rows by resource id (the first of each id: rule 16 reports duplicates), for
/// lookups only.
pub(super) struct Rows<'p> {
    pub(super) statics: IdMap<&'p ResourceId, &'p ResourceAllocation>,
    pub(super) dynamics: IdMap<&'p ResourceId, &'p DynamicResourceDescriptor>,
}

pub(super) fn check(payload: &ExecutionPlanPayload, found: &mut Findings) {
    let nodes = &payload.nodes;
    let mut rows = Rows {
        statics: IdMap::default(),
        dynamics: IdMap::default(),
    };
    for row in &payload.memory.static_allocations {
        rows.statics.entry(&row.resource_id).or_insert(row);
    }
    for row in &payload.memory.dynamic_descriptors {
        rows.dynamics.entry(&row.base_resource_id).or_insert(row);
    }
    // 3.
    if nodes.is_empty() {
        found.add(3, "payload.nodes", "the plan has no node");
    }
    if payload.maximum_scheduled_tokens == 0 {
        found.add(3, "payload.maximum_scheduled_tokens", "is zero");
    }
    // A workspace's bytes are opaque: element type u8, and this layout fingerprint, the
    // canonical hash of the layout name's JSON text.
    let opaque = sha256_hex(b"\"opaque_bytes_v1\"");
    let mut position: IdMap<&NodeId, usize> = IdMap::default();
    for (i, node) in nodes.iter().enumerate() {
        if let Some(first) = position.insert(&node.id, i) {
            found.add(
                3,
                format!("{}.id", node_path(i)),
                format!("node {} also appears at index {first}", node.id),
            );
            position.insert(&node.id, first);
        }
    }
    for (i, node) in nodes.iter().enumerate() {
        dependencies(i, node, &position, found);
        selection(i, node, found);
        settings(i, node, &payload.selection_settings, found);
        work(i, node, found);
        aliases(i, node, found);
        workspaces(i, node, payload, &rows, &opaque, found);
        node_resources(i, node, found);
    }
    super::state::check(payload, &rows, found);
    retention(payload, &position, found);
}

/// 4.
fn dependencies(i: usize, node: &PlanNode, position: &IdMap<&NodeId, usize>, found: &mut Findings) {
    for (k, dependency) in node.dependencies.iter().enumerate() {
        let path = format!("{}.dependencies[{k}]", node_path(i));
        if k > 0 && node.dependencies[k - 1] >= *dependency {
            found.add(4, &path, "dependencies are not strictly ascending");
        }
        match position.get(dependency) {
            Some(&at) if at < i => {}
            Some(&at) if at == i => found.add(4, &path, "a node depends on itself"),
            Some(_) => found.add(4, &path, format!("{dependency} runs later")),
            None => found.add(4, &path, format!("{dependency} is not a node of the plan")),
        }
    }
}

/// 5.
fn selection(i: usize, node: &PlanNode, found: &mut Findings) {
    let path = format!("{}.selection", node_path(i));
    let s = &node.selection;
    if node.provider_resources.provider_id != s.selected_provider {
        found.add(
            5,
            format!("{}.provider_resources.provider_id", node_path(i)),
            format!(
                "the estimate is {}'s, the selected provider is {}",
                node.provider_resources.provider_id, s.selected_provider
            ),
        );
    }
    for (k, rejected) in s.rejected_providers.iter().enumerate() {
        let at = format!("{path}.rejected_providers[{k}]");
        if k > 0 && s.rejected_providers[k - 1].provider_id >= rejected.provider_id {
            found.add(5, &at, "rejected providers are not strictly ascending");
        }
        if rejected.provider_id == s.selected_provider {
            found.add(5, &at, "the selected provider is also rejected");
        }
        if let RejectionReason::StorageIncompatible { resource_ids } = &rejected.reasons {
            if resource_ids.is_empty() || resource_ids.windows(2).any(|w| w[0] >= w[1]) {
                found.add(
                    5,
                    format!("{at}.reasons"),
                    "a storage rejection needs a non-empty, strictly ascending resource list",
                );
            }
        }
    }
    let expected = match &s.requested_provider {
        None => SelectionReason::CanonicalCompatible,
        Some(requested) if *requested == s.selected_provider => {
            SelectionReason::PreferredCompatible
        }
        Some(requested) => {
            if !s
                .rejected_providers
                .iter()
                .any(|r| r.provider_id == *requested)
            {
                found.add(
                    5,
                    format!("{path}.rejected_providers"),
                    format!("the requested provider {requested} lost without evidence"),
                );
            }
            SelectionReason::FallbackFromPreferred
        }
    };
    if s.selection_reason != expected {
        found.add(
            5,
            format!("{path}.selection_reason"),
            format!(
                "is {:?}, the requested and selected providers say {expected:?}",
                s.selection_reason
            ),
        );
    }
}

/// 5 (recorded settings): a pinned node selected its pin, no node selected a provider it
/// forbids, and a rejection by a setting names a setting the plan records.
fn settings(i: usize, node: &PlanNode, settings: &SelectionSettings, found: &mut Findings) {
    let s = &node.selection;
    let at = format!("{}.selection.selected_provider", node_path(i));
    if let Some(pin) = settings.pins.get(&node.id) {
        if *pin != s.selected_provider {
            found.add(5, &at, format!("the node is pinned to {pin}"));
        }
    }
    if settings.forbids(&node.id, &s.selected_provider) {
        found.add(5, &at, "the selected provider is forbidden at this node");
    }
    for (k, rejected) in s.rejected_providers.iter().enumerate() {
        let RejectionReason::Setting(setting) = &rejected.reasons else {
            continue;
        };
        let recorded = match setting {
            SettingRejection::PinnedElsewhere => settings
                .pins
                .get(&node.id)
                .is_some_and(|p| *p != rejected.provider_id),
            SettingRejection::Forbidden => settings.forbids(&node.id, &rejected.provider_id),
            SettingRejection::Objective => settings.objective.is_some(),
        };
        if !recorded {
            found.add(
                5,
                format!("{}.selection.rejected_providers[{k}].reasons", node_path(i)),
                format!("rejected by setting {setting:?}, which payload.selection_settings does not record"),
            );
        }
    }
}

/// The workspace resources of a node with what its estimate asks for.
fn workspace_slots(
    node: &PlanNode,
) -> [(
    &'static str,
    Option<&ResourceId>,
    Option<&WorkspaceRequirement>,
); 3] {
    let p = &node.provider_resources;
    [
        (
            "scratch",
            node.scratch_resource.as_ref(),
            p.scratch.as_ref(),
        ),
        (
            "binding",
            node.binding_resource.as_ref(),
            p.binding.as_ref(),
        ),
        (
            "persistent",
            node.persistent_resource.as_ref(),
            p.persistent.as_ref(),
        ),
    ]
}

/// 6 (the node's own list; rule 6's rows are checked with the memory plan).
fn node_resources(i: usize, node: &PlanNode, found: &mut Findings) {
    let mut expected: Vec<&ResourceId> = node
        .values
        .iter()
        .flat_map(|binding| &binding.storage.components)
        .map(|component| &component.resource_id)
        .collect();
    for (_, resource, _) in workspace_slots(node) {
        expected.extend(resource);
    }
    // Sorted and unique: the set the list must be.
    expected.sort_unstable();
    expected.dedup();
    if !node.resources.iter().eq(expected.iter().copied()) {
        found.add(
            6,
            format!("{}.resources", node_path(i)),
            format!(
                "lists {} resources; its bindings and workspaces use {} (sorted, unique)",
                node.resources.len(),
                expected.len()
            ),
        );
    }
}

/// 8.
fn work(i: usize, node: &PlanNode, found: &mut Findings) {
    let NodeWorkContract::Tokens {
        source,
        projections,
    } = &node.work
    else {
        return;
    };
    let path = format!("{}.work", node_path(i));
    if projections.is_empty() {
        found.add(8, &path, "a token contract without projections");
    }
    if projections.windows(2).any(|w| w[0] >= w[1]) {
        found.add(8, format!("{path}.projections"), "not strictly ascending");
    }
    if !projections.contains(source) {
        found.add(
            8,
            format!("{path}.source"),
            "the source is not among the projections",
        );
    }
    for (k, p) in projections.iter().enumerate() {
        let at = format!("{path}.projections[{k}]");
        if p.canonical_extent != source.canonical_extent {
            found.add(
                8,
                &at,
                format!(
                    "extent {} differs from the source's {}",
                    p.canonical_extent, source.canonical_extent
                ),
            );
        }
        let binding = node
            .values
            .iter()
            .find(|b| b.value_id == p.value_id && b.role == p.role && b.ordinal == p.ordinal);
        match binding {
            None => found.add(
                8,
                &at,
                format!("no binding of {} at this role and ordinal", p.value_id),
            ),
            Some(b) => {
                let dims = &b.tensor.dimensions;
                let rank_ok = u32::try_from(dims.len()).ok() == Some(p.rank);
                let extent = usize::try_from(p.axis).ok().and_then(|a| dims.get(a));
                if !rank_ok
                    || extent != Some(&p.canonical_extent)
                    || b.usage != BufferUsage::Activations
                {
                    found.add(
                        8,
                        &at,
                        format!(
                            "does not match its binding of {} (rank {}, dimensions {dims:?}, usage {:?})",
                            p.value_id,
                            dims.len(),
                            b.usage
                        ),
                    );
                }
            }
        }
    }
}

/// 12.
fn aliases(i: usize, node: &PlanNode, found: &mut Findings) {
    for (k, alias) in node.exact_aliases.iter().enumerate() {
        let at = format!("{}.exact_aliases[{k}]", node_path(i));
        if k > 0 && node.exact_aliases[k - 1].output_ordinal >= alias.output_ordinal {
            found.add(
                12,
                &at,
                "aliases are not strictly ascending by output ordinal",
            );
        }
        let find = |role: ValueRole, value: &ProgramValueId, ordinal: u32| {
            node.values
                .iter()
                .find(|b| b.role == role && b.value_id == *value && b.ordinal == ordinal)
        };
        let output = find(
            ValueRole::Output,
            &alias.output_value_id,
            alias.output_ordinal,
        );
        let input = find(ValueRole::Input, &alias.input_value_id, alias.input_ordinal);
        let (Some(output), Some(input)) = (output, input) else {
            found.add(12, &at, "names a binding the node does not have");
            continue;
        };
        let policy_names_input = match output.alias {
            AliasPolicy::MayAlias { tensor_index } | AliasPolicy::MustAlias { tensor_index } => {
                tensor_index == alias.input_ordinal
            }
            AliasPolicy::NoAlias => false,
        };
        if !policy_names_input {
            found.add(
                12,
                &at,
                "the output's alias policy does not name this input",
            );
        }
        if output.storage != input.storage {
            found.add(12, &at, "output and input storage differ");
        }
        if output.usage != BufferUsage::Activations || input.usage != BufferUsage::Activations {
            found.add(12, &at, "output and input must both be activations");
        }
    }
}

/// The demand a workspace formula has under the plan's ceilings.
fn bound_demand(
    formula: &WorkspaceSizeFormula,
    sequences: u32,
    tokens: u64,
) -> DynamicResourceDemand {
    match formula {
        WorkspaceSizeFormula::Fixed { bytes } => DynamicResourceDemand::Fixed { bytes: *bytes },
        WorkspaceSizeFormula::ActualSequences { bytes_per_sequence } => {
            DynamicResourceDemand::ActualSequences {
                bytes_per_sequence: *bytes_per_sequence,
                maximum_sequences: sequences,
            }
        }
        WorkspaceSizeFormula::Tokens { bytes_per_token } => DynamicResourceDemand::Tokens {
            bytes_per_token: *bytes_per_token,
            maximum_tokens: tokens,
        },
        WorkspaceSizeFormula::Affine {
            fixed_bytes,
            bytes_per_sequence,
            bytes_per_token,
        } => DynamicResourceDemand::Affine {
            fixed_bytes: *fixed_bytes,
            bytes_per_sequence: *bytes_per_sequence,
            maximum_sequences: sequences,
            bytes_per_token: *bytes_per_token,
            maximum_tokens: tokens,
        },
        WorkspaceSizeFormula::Pages {
            bytes_per_page,
            maximum_pages,
        } => DynamicResourceDemand::Pages {
            bytes_per_page: *bytes_per_page,
            maximum_pages: *maximum_pages,
        },
        WorkspaceSizeFormula::BoundedShapeBuckets { buckets } => {
            DynamicResourceDemand::BoundedShapeBuckets {
                buckets: buckets.clone(),
            }
        }
    }
}

/// 11.
fn workspaces(
    i: usize,
    node: &PlanNode,
    payload: &ExecutionPlanPayload,
    rows: &Rows<'_>,
    opaque: &Sha256Hex,
    found: &mut Findings,
) {
    let memory = &payload.memory;
    for (kind, resource, requirement) in workspace_slots(node) {
        let at = format!("{}.{kind}_resource", node_path(i));
        let (resource, requirement) = match (resource, requirement) {
            (None, None) => continue,
            (Some(r), Some(q)) => (r, q),
            (Some(_), None) => {
                found.add(
                    11,
                    &at,
                    format!("the estimate asks for no {kind} workspace"),
                );
                continue;
            }
            (None, Some(_)) => {
                found.add(11, &at, format!("the estimate asks for a {kind} workspace"));
                continue;
            }
        };
        let expected_id = {
            let mut text = Vec::new();
            text.extend_from_slice(kind.as_bytes());
            text.push(0);
            text.extend_from_slice(node.id.as_str().as_bytes());
            text.push(0);
            text.extend_from_slice(
                node.provider_resources
                    .estimate_fingerprint
                    .as_str()
                    .as_bytes(),
            );
            format!("resource/{kind}/sha256/{}", sha256_hex(&text))
        };
        if resource.as_str() != expected_id {
            found.add(
                11,
                &at,
                format!("the {kind} workspace of this node and estimate is {expected_id}"),
            );
        }
        let expected_kind = match kind {
            "scratch" => AllocationKind::Scratch {
                node_id: node.id.clone(),
            },
            "binding" => AllocationKind::Binding {
                node_id: node.id.clone(),
            },
            _ => AllocationKind::Persistent {
                node_id: node.id.clone(),
            },
        };
        let usage = match kind {
            "scratch" => BufferUsage::Scratch,
            "binding" => BufferUsage::Binding,
            _ => BufferUsage::Persistent,
        };
        let lifetime = match requirement.scope {
            WorkspaceScope::Plan => AllocationLifetime::Plan,
            WorkspaceScope::Request => AllocationLifetime::Request,
            WorkspaceScope::Sequence => AllocationLifetime::Sequence,
            WorkspaceScope::Step => AllocationLifetime::Step,
            WorkspaceScope::Invocation => AllocationLifetime::Invocation,
        };
        let expected_lifetime = if kind == "persistent" {
            lifetime
        } else {
            AllocationLifetime::Invocation
        };
        if expected_lifetime == AllocationLifetime::Plan {
            let row = rows.statics.get(resource).copied();
            let fixed = match requirement.size_formula {
                WorkspaceSizeFormula::Fixed { bytes } => Some(bytes),
                _ => None,
            };
            match row {
                None => found.add(
                    11,
                    &at,
                    "a plan-scope persistent workspace needs a static allocation",
                ),
                Some(row) => {
                    if Some(row.per_instance_bytes) != fixed
                        || row.alignment_bytes != requirement.alignment_bytes
                        || row.usage != usage
                        || row.kind != expected_kind
                        || row.element_type != ElementType::U8
                        || row.storage.logical_layout_fingerprint != *opaque
                        || !requirement
                            .storage
                            .accepted_profiles
                            .contains(&row.storage.profile)
                    {
                        found.add(
                            11,
                            &at,
                            "its static allocation does not match the workspace requirement \
                             (fixed bytes, alignment, usage, kind, accepted profile) or is not \
                             opaque bytes (u8, the opaque layout)",
                        );
                    }
                }
            }
        } else {
            let row = rows.dynamics.get(resource).copied();
            let demand = bound_demand(
                &requirement.size_formula,
                memory.maximum_active_sequences,
                payload.maximum_scheduled_tokens,
            );
            match row {
                None => found.add(
                    11,
                    &at,
                    format!("a {kind} workspace needs a dynamic descriptor"),
                ),
                Some(row) => {
                    if row.demand != demand
                        || row.alignment_bytes != requirement.alignment_bytes
                        || row.usage != usage
                        || row.kind != expected_kind
                        || row.lifetime != expected_lifetime
                        || row.element_type != ElementType::U8
                        || row.storage.logical_layout_fingerprint != *opaque
                        || !requirement
                            .storage
                            .accepted_profiles
                            .contains(&row.storage.profile)
                    {
                        found.add(
                            11,
                            &at,
                            format!(
                                "its descriptor does not match the workspace requirement \
                                 (demand {demand:?} bound to the ceilings, alignment, usage, \
                                 kind, lifetime {expected_lifetime:?}, accepted profile) or is \
                                 not opaque bytes (u8, the opaque layout)"
                            ),
                        );
                    }
                }
            }
        }
    }
}

/// 25.
fn retention(
    payload: &ExecutionPlanPayload,
    position: &IdMap<&NodeId, usize>,
    found: &mut Findings,
) {
    for (k, retained) in payload.retained_completion_values.iter().enumerate() {
        let at = format!("payload.retained_completion_values[{k}]");
        if k > 0 && payload.retained_completion_values[k - 1].value_id >= retained.value_id {
            found.add(
                25,
                &at,
                "retained values are not strictly ascending by value id",
            );
        }
        let binding = position
            .get(&retained.producer_node_id)
            .map(|&at| &payload.nodes[at])
            .and_then(|n| {
                n.values.iter().find(|b| {
                    b.role == ValueRole::Output
                        && b.value_id == retained.value_id
                        && b.ordinal == retained.output_ordinal
                })
            });
        match binding {
            None => found.add(
                25,
                &at,
                format!(
                    "{} does not produce {} at that ordinal",
                    retained.producer_node_id, retained.value_id
                ),
            ),
            Some(b) => {
                let placed = b.storage.components.iter().any(|c| {
                    c.resource_id == retained.resource_id
                        && c.offset_bytes == retained.logical_offset_bytes
                });
                if !placed || b.tensor != retained.tensor {
                    found.add(
                        25,
                        &at,
                        "resource, offset or tensor differ from the producer's binding",
                    );
                }
            }
        }
    }
    let terminal = &payload.terminal_output_resources;
    if terminal.is_empty() {
        found.add(25, "payload.terminal_output_resources", "is empty");
    }
    let all: IdSet<&ResourceId> = payload.nodes.iter().flat_map(|n| &n.resources).collect();
    for (k, resource) in terminal.iter().enumerate() {
        let at = format!("payload.terminal_output_resources[{k}]");
        if k > 0 && terminal[k - 1] >= *resource {
            found.add(25, &at, "not strictly ascending");
        }
        if !all.contains(resource) {
            found.add(25, &at, format!("{resource} is no node's resource"));
        }
    }
}
