//! `jointplan explain PLAN.json [--node ID] [--request REQUEST.json]`: why each provider of
//! a node was chosen or rejected, in the input's terms: the selection reason, every
//! rejection's typed evidence, and for storage conflicts the evidence resources with the
//! profiles the plan chose for them (with `--request`, also what the rejected provider
//! accepts for the slots bound to those resources).

// The command line's `Error` carries the library's error unboxed: errors are the cold path.
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::Error;
use jointplan::plan::{ExecutionPlan, PlanNode, RejectionReason, SelectionReason};
use jointplan::request::{PlanRequest, ResourceId, StorageProfile, WorkspaceKind};

use super::infeasible_text::why_not_text;
use super::output::{node_summary, resource_profiles, write_rejections};
use super::plan::{node_provider, read_request};
use jointplan::study::alternatives::Alternative;

/// Arguments of `jointplan explain`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plan (JSON).
    pub plan: PathBuf,
    /// Explain only this node.
    #[arg(long, value_name = "ID")]
    pub node: Option<String>,
    /// The request the plan was built from: adds what rejected providers accept and the
    /// compatible providers that were not chosen.
    #[arg(long, value_name = "REQUEST.json")]
    pub request: Option<PathBuf>,
    /// Re-solve with NODE pinned to PROVIDER and print the exact consequence (needs
    /// --request).
    #[arg(long, value_name = "NODE=PROVIDER")]
    pub why_not: Option<String>,
    /// Print the why-not answer as JSON.
    #[arg(long, requires = "why_not")]
    pub json: bool,
}

/// Runs `jointplan explain`.
pub fn run(args: &Args) -> Result<(), Error> {
    let text = jointplan::request::read_json_text(&args.plan)?;
    if let (Some(id), None, None) = (&args.node, &args.request, &args.why_not) {
        return explain_one(args, &text, id);
    }
    let plan = jointplan::verify::read_plan_as_stored(&args.plan, &text)
        .map_err(|e| Error::from(e).in_file(&args.plan))?;
    let request = match &args.request {
        Some(file) => Some(read_request(file)?),
        None => None,
    };
    if let Some(question) = &args.why_not {
        let Some(request) = &request else {
            return Err(Error::Usage(format!(
                "--why-not {question} re-solves the plan's request: give it with --request REQUEST.json"
            )));
        };
        return why_not(args, question, request, &plan);
    }
    let alternatives = match &request {
        Some(request) => Some(
            jointplan::study::alternatives::alternatives(request, &plan)
                .map_err(|e| Error::Library(e.into()))?,
        ),
        None => None,
    };
    let nodes: Vec<&PlanNode> = match &args.node {
        None => plan.payload.nodes.iter().collect(),
        Some(id) => match plan.payload.nodes.iter().find(|n| n.id.as_str() == id) {
            Some(node) => vec![node],
            None => {
                let ids: Vec<&str> = plan.payload.nodes.iter().map(|n| n.id.as_str()).collect();
                return Err(no_such_node(args, &ids, id));
            }
        },
    };
    let mut out = String::new();
    if let Some(request) = &request {
        let tradeoff = jointplan::study::kv_tradeoff::kv_tradeoff(request, &plan)
            .map_err(|e| Error::Library(e.into()))?;
        if let Some(t) = tradeoff.filter(|t| {
            nodes
                .iter()
                .any(|n| n.selection.selected_provider == t.contiguous_provider)
        }) {
            tradeoff_lines(&mut out, &t);
        }
    }
    // Once for every node explained (it was once per node: quadratic for `explain PLAN`).
    let profiles = resource_profiles(&plan);
    for node in nodes {
        explain_node(&mut out, &profiles, node, request.as_ref());
        match &alternatives {
            Some(map) => alternatives_lines(&mut out, map.get(&node.id)),
            None => out.push_str(WITHOUT_REQUEST),
        }
    }
    super::output::write_stdout(&out)?;
    Ok(())
}

/// What a node's explanation says in place of the alternatives when no request is given.
const WITHOUT_REQUEST: &str =
    "  compatible providers not chosen: give --request REQUEST.json to list them\n\n";

/// `explain PLAN --node ID` alone: reads that node, the node ids and the rows' profiles,
/// not the whole plan (`jointplan::verify::read_node_view`); the text is what the whole
/// read prints for the node.
fn explain_one(args: &Args, text: &str, id: &str) -> Result<(), Error> {
    let view = jointplan::verify::read_node_view(&args.plan, text, id)
        .map_err(|e| Error::from(e).in_file(&args.plan))?;
    let Some(node) = &view.node else {
        let ids: Vec<&str> = view.node_ids.iter().map(|n| n.as_str()).collect();
        return Err(no_such_node(args, &ids, id));
    };
    let profiles: BTreeMap<&ResourceId, StorageProfile> =
        view.profiles.iter().map(|(r, p)| (r, *p)).collect();
    let mut out = String::new();
    explain_node(&mut out, &profiles, node, None);
    out.push_str(WITHOUT_REQUEST);
    super::output::write_stdout(&out)?;
    Ok(())
}

/// The error of `--node ID` naming no node of the plan, with the closest ids.
fn no_such_node(args: &Args, ids: &[&str], id: &str) -> Error {
    Error::Usage(format!(
        "--node {id}: the plan has no such node ({}; `jointplan plan --full` lists every node)",
        nearest_nodes(ids, id)
    ))
    .in_file(&args.plan)
}

/// The node ids closest to a mistyped `id`, for the error message: those sharing the
/// longest prefix with it (at most eight), and the node count.
fn nearest_nodes(ids: &[&str], id: &str) -> String {
    const SHOWN: usize = 8;
    let common = |other: &str| {
        id.bytes()
            .zip(other.bytes())
            .take_while(|(a, b)| a == b)
            .count()
    };
    let best = ids.iter().map(|other| common(other)).max().unwrap_or(0);
    let near: Vec<&str> = ids
        .iter()
        .copied()
        .filter(|other| common(other) == best)
        .take(SHOWN)
        .collect();
    format!("{} nodes; closest: {}", ids.len(), near.join(", "))
}

/// The contiguous-versus-paged KV trade-off (`jointplan::study::kv_tradeoff`).
fn tradeoff_lines(out: &mut String, t: &jointplan::study::kv_tradeoff::KvTradeoff) {
    out.push_str(
        "explain trade-off (KV cache: a contiguous cache reserves the whole context per sequence, \
         a paged one grows by blocks; rule: docs/synth.md, \"Memory semantics of the KV cache\"):\n",
    );
    out.push_str(&format!(
        "  {} (selected, preferred by the policy's storage order): reserves {} bytes per sequence \
         from admission (the whole {}-token context, {} KV states) -> admits {} sequences\n",
        t.contiguous_provider,
        t.contiguous_bytes_per_sequence,
        t.context_tokens,
        t.kv_states,
        t.contiguous_sequences
    ));
    out.push_str(&format!(
        "  {} (compatible, not chosen): reserves {} bytes per sequence at admission (one {}-byte \
         block per KV state) -> admits {} sequences (the policy admits at most {}); at the full \
         context {} bytes -> {}\n",
        t.paged_provider,
        t.paged_bytes_at_admission,
        t.paged_block_bytes,
        t.paged_sequences_at_admission,
        t.policy_sequences,
        t.paged_bytes_at_context,
        t.paged_sequences_at_context
    ));
    out.push_str(&format!(
        "  room for sequences: {} bytes (usable - weights - activations - workspaces at the \
         ceilings, this plan's)\n\n",
        t.room_bytes
    ));
}

/// The providers of a node the plan passed over.
fn alternatives_lines(out: &mut String, list: Option<&Vec<Alternative>>) {
    let Some(list) = list else {
        out.push_str("  compatible providers not chosen: none\n\n");
        return;
    };
    out.push_str("  compatible providers not chosen (the objective preferred the selected one; --why-not NODE=PROVIDER says by how much):\n");
    for a in list.iter().filter(|a| a.dropped.is_none()) {
        out.push_str(&format!("    {}\n", a.provider));
    }
    for a in list.iter().filter(|a| a.dropped.is_some()) {
        out.push_str(&format!(
            "    {} (dropped before selection: {})\n",
            a.provider,
            a.dropped.as_deref().unwrap_or_default()
        ));
    }
    out.push('\n');
}

/// `--why-not NODE=PROVIDER`.
fn why_not(
    args: &Args,
    question: &str,
    request: &PlanRequest,
    plan: &ExecutionPlan,
) -> Result<(), Error> {
    let (node, provider) = node_provider("why-not", question)?;
    let progress = super::progress::Progress::start("explain");
    progress.step(&format!("re-solving with {node} pinned to {provider}"));
    let options = jointplan::builder::BuildOptions {
        observer: Some(progress.observer()),
        ..Default::default()
    };
    let answer = jointplan::study::why_not::why_not(request, plan, &node, &provider, &options)
        .map_err(|e| Error::Library(jointplan::Error::from(e).in_file(&args.plan)))?;
    drop(progress);
    if args.json {
        let text = super::output::pretty_json(&answer)
            .map_err(|e| Error::Usage(format!("cannot serialize the answer: {e}")))?;
        super::output::write_stdout(&text)?;
    } else {
        super::output::write_stdout(&why_not_text(node.as_str(), provider.as_str(), &answer))?;
    }
    Ok(())
}

fn explain_node(
    out: &mut String,
    profiles: &BTreeMap<&ResourceId, StorageProfile>,
    node: &PlanNode,
    request: Option<&PlanRequest>,
) {
    let summary = node_summary(node, profiles);
    let selection = &node.selection;
    out.push_str(&format!(
        "node {} (operation {} {})\n",
        node.id, node.operation_id, node.operation_version
    ));
    out.push_str(&format!(
        "  requested: {}\n",
        selection
            .requested_provider
            .as_ref()
            .map_or_else(|| "none".to_owned(), ToString::to_string)
    ));
    let why = match selection.selection_reason {
        SelectionReason::PreferredCompatible => {
            "preferred_compatible: the requested provider is compatible and the joint selection kept it".to_owned()
        }
        SelectionReason::CanonicalCompatible => {
            "canonical_compatible: no provider was requested; the joint optimum (policy profile ranks, then provider id) chose it".to_owned()
        }
        SelectionReason::FallbackFromPreferred => format!(
            "fallback_from_preferred: the requested provider {} was rejected (evidence below)",
            selection
                .requested_provider
                .as_ref()
                .map_or_else(String::new, ToString::to_string)
        ),
    };
    out.push_str(&format!(
        "  selected:  {} — {why}\n",
        selection.selected_provider
    ));
    if summary.rejected.is_empty() {
        out.push_str("  rejected:  none\n");
    }
    write_rejections(out, &summary, "  ");
    if let Some(request) = request {
        for rejected in &selection.rejected_providers {
            if let RejectionReason::StorageIncompatible { resource_ids } = &rejected.reasons {
                for line in accepted_lines(request, node, &rejected.provider_id, resource_ids) {
                    out.push_str(&format!("      {line}\n"));
                }
            }
        }
    }
    out.push_str("  resources of the selected provider:\n");
    for resource in &node.resources {
        out.push_str(&format!(
            "    {}  {}  ({})\n",
            resource,
            profiles
                .get(resource)
                .map_or_else(|| "unplanned".to_owned(), ToString::to_string),
            resource_role(node, resource)
        ));
    }
}

/// What a resource is to the node: the bindings on it, or the workspace it is.
fn resource_role(node: &PlanNode, resource: &ResourceId) -> String {
    for kind in WorkspaceKind::ALL {
        let id = match kind {
            WorkspaceKind::Scratch => &node.scratch_resource,
            WorkspaceKind::Binding => &node.binding_resource,
            WorkspaceKind::Persistent => &node.persistent_resource,
        };
        if id.as_ref() == Some(resource) {
            return format!("{} workspace", kind.name());
        }
    }
    let uses: Vec<String> = node
        .values
        .iter()
        .filter(|b| {
            b.storage
                .components
                .iter()
                .any(|c| &c.resource_id == resource)
        })
        .map(|b| {
            format!(
                "{} as {:?} {} {}",
                b.value_id,
                b.usage,
                role_name(b.role),
                b.ordinal
            )
        })
        .collect();
    uses.join("; ")
}

fn role_name(role: jointplan::request::ValueRole) -> &'static str {
    match role {
        jointplan::request::ValueRole::Input => "input",
        jointplan::request::ValueRole::Output => "output",
    }
}

/// For a storage rejection: what the rejected provider accepts for each slot bound to an
/// evidence resource, from the request's catalog.
fn accepted_lines(
    request: &PlanRequest,
    node: &PlanNode,
    provider: &jointplan::request::ProviderId,
    resources: &[ResourceId],
) -> Vec<String> {
    let Some(descriptor) = request.catalog.provider(&node.operation_id, provider) else {
        return vec![format!("{provider} is not in the request's catalog")];
    };
    let mut accepted: BTreeMap<String, Vec<StorageProfile>> = BTreeMap::new();
    for binding in &node.values {
        for component in &binding.storage.components {
            if resources.contains(&component.resource_id) {
                let slot = format!(
                    "{} ({} {} on {})",
                    binding.value_id,
                    role_name(binding.role),
                    binding.ordinal,
                    component.resource_id
                );
                let profiles = descriptor
                    .storage_for(binding.role, binding.ordinal)
                    .map(|r| r.accepted_profiles.clone())
                    .unwrap_or_default();
                accepted.insert(slot, profiles);
            }
        }
    }
    accepted
        .into_iter()
        .map(|(slot, profiles)| {
            let list: Vec<String> = profiles.iter().map(ToString::to_string).collect();
            format!(
                "{provider} accepts [{}] for {slot}",
                if list.is_empty() {
                    "nothing".to_owned()
                } else {
                    list.join(", ")
                }
            )
        })
        .collect()
}
