//! Pins and forbids applied to the selection problem: a pinned node keeps only its pinned
//! candidate, a forbidden candidate is removed. The node candidates themselves stay whole, so
//! the evidence of a plan still sees every provider.

use std::collections::BTreeMap;

use super::error::SettingFlag;
use super::{CandidateError, NodeCandidates};
use crate::plan::SelectionSettings;
use crate::request::{NodeId, ProviderId};
use crate::selection::SelectionProblem;

/// Checks the pins and forbids of `settings` against the nodes (an unknown node or provider is
/// an error naming it), then removes from `problem` every candidate they rule out. `replay`,
/// when given, fixes every node it names to its provider instead of the pins (the recorded
/// choices of a plan accepted without a proof of optimality).
pub fn apply_settings(
    problem: &mut SelectionProblem,
    nodes: &[NodeCandidates<'_>],
    settings: &SelectionSettings,
    replay: Option<&BTreeMap<NodeId, ProviderId>>,
) -> Result<(), CandidateError> {
    let index: BTreeMap<&NodeId, usize> =
        nodes.iter().enumerate().map(|(i, n)| (n.node, i)).collect();
    let lookup = |setting: SettingFlag, node: &NodeId, provider: &ProviderId| {
        let Some(&i) = index.get(node) else {
            return Err(CandidateError::SettingUnknownNode {
                setting,
                node: node.clone(),
                provider: provider.clone(),
            });
        };
        let listed = &nodes[i].resolution.provider_resource_candidates;
        if !listed.iter().any(|c| &c.provider_id == provider) {
            let names: Vec<&str> = listed.iter().map(|c| c.provider_id.as_str()).collect();
            return Err(CandidateError::SettingUnknownProvider {
                setting,
                node: node.clone(),
                provider: provider.clone(),
                candidates: names.join(", "),
            });
        }
        Ok(i)
    };
    for (node, provider) in &settings.pins {
        lookup(SettingFlag::Pin, node, provider)?;
        if settings.forbids(node, provider) {
            return Err(CandidateError::SettingContradiction {
                node: node.clone(),
                provider: provider.clone(),
            });
        }
    }
    for (node, providers) in &settings.forbids {
        for provider in providers {
            lookup(SettingFlag::Forbid, node, provider)?;
        }
    }
    let pins = replay.unwrap_or(&settings.pins);
    for (i, node) in nodes.iter().enumerate() {
        let pinned = pins.get(node.node);
        let forbidden = settings.forbids.get(node.node);
        if pinned.is_none() && forbidden.is_none() {
            continue;
        }
        let candidates = &mut problem.nodes[i].candidates;
        candidates.retain(|c| {
            pinned.is_none_or(|p| p.as_str() == c.provider)
                && forbidden.is_none_or(|set| !set.iter().any(|f| f.as_str() == c.provider))
        });
        if candidates.is_empty() {
            return Err(CandidateError::SettingLeavesNoCandidate {
                node: node.node.clone(),
                detail: no_candidate_detail(node, pinned),
            });
        }
    }
    Ok(())
}

/// Why nothing is left: the pinned provider was dropped before selection (with its reason),
/// or every usable candidate is forbidden.
fn no_candidate_detail(node: &NodeCandidates<'_>, pinned: Option<&ProviderId>) -> String {
    if let Some(p) = pinned {
        if let Some(dropped) = node.dropped.iter().find(|d| &d.provider == p) {
            return format!(
                "the pinned provider cannot be used: {}",
                dropped.explain(node.node)
            );
        }
        return format!("the pinned provider {p} is also forbidden");
    }
    let usable: Vec<&str> = node
        .candidates
        .iter()
        .map(|c| c.plan.provider_id.as_str())
        .collect();
    format!(
        "every usable candidate ({}) is forbidden",
        usable.join(", ")
    )
}
