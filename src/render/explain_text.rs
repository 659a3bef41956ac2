//! The text of an explanation (`jointplan explain` without `--json`): per node the
//! selection reason, every rejection's evidence, what storage-rejected providers accept,
//! the resources of the selected provider, and the providers passed over; the KV trade-off
//! first when there is one.

use std::collections::BTreeMap;

use crate::plan::SelectionReason;
use crate::request::{ResourceId, StorageProfile};
use crate::study::alternatives::Alternative;
use crate::study::explain::{Explanation, NodeExplanation};
use crate::study::kv_tradeoff::KvTradeoff;

use super::summary::{rejection_summary, write_rejections, NodeSummary};

/// What a node's explanation says in place of the alternatives when no request is given.
const WITHOUT_REQUEST: &str =
    "  compatible providers not chosen: give --request REQUEST.json to list them\n\n";

/// The text of an explanation.
pub fn explanation_text(explanation: &Explanation) -> String {
    let mut out = String::new();
    if let Some(t) = &explanation.kv_tradeoff {
        tradeoff_lines(&mut out, t);
    }
    for node in &explanation.nodes {
        node_lines(&mut out, node);
        match &node.alternatives {
            Some(list) => alternatives_lines(&mut out, list),
            None => out.push_str(WITHOUT_REQUEST),
        }
    }
    out
}

/// The contiguous-versus-paged KV trade-off (`crate::study::kv_tradeoff`).
fn tradeoff_lines(out: &mut String, t: &KvTradeoff) {
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
fn alternatives_lines(out: &mut String, list: &[Alternative]) {
    if list.is_empty() {
        out.push_str("  compatible providers not chosen: none\n\n");
        return;
    }
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

fn node_lines(out: &mut String, node: &NodeExplanation) {
    let profiles: BTreeMap<&ResourceId, StorageProfile> =
        node.profiles.iter().map(|(r, p)| (r, *p)).collect();
    let selection = &node.selection;
    let summary = NodeSummary {
        node_id: node.node.to_string(),
        operation_id: node.operation.to_string(),
        selected_provider: selection.selected_provider.to_string(),
        requested_provider: selection
            .requested_provider
            .as_ref()
            .map(ToString::to_string),
        reason: super::summary::reason_text(selection.selection_reason),
        rejected: selection
            .rejected_providers
            .iter()
            .map(|r| rejection_summary(r, &profiles))
            .collect(),
    };
    out.push_str(&format!(
        "node {} (operation {} {})\n",
        node.node, node.operation, node.operation_version
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
    for acceptance in &node.accepts {
        let provider = &acceptance.provider;
        if !acceptance.in_catalog {
            out.push_str(&format!(
                "      {provider} is not in the request's catalog\n"
            ));
            continue;
        }
        for slot in &acceptance.slots {
            let list: Vec<String> = slot.profiles.iter().map(ToString::to_string).collect();
            out.push_str(&format!(
                "      {provider} accepts [{}] for {}\n",
                if list.is_empty() {
                    "nothing".to_owned()
                } else {
                    list.join(", ")
                },
                slot.slot
            ));
        }
    }
    out.push_str("  resources of the selected provider:\n");
    for resource in &node.resources {
        out.push_str(&format!(
            "    {}  {}  ({})\n",
            resource.resource,
            resource
                .profile
                .map_or_else(|| "unplanned".to_owned(), |p| p.to_string()),
            resource.role
        ));
    }
}
