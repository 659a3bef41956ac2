//! Per node, the providers the request offers that the plan neither chose nor rejected with
//! evidence: compatible candidates the joint optimum passed over (`jointplan explain` lists
//! them; `--why-not NODE=PROVIDER` says what choosing one would cost), and candidates dropped
//! before selection because no storage profile fits them (with the reason).

use std::collections::BTreeMap;

use serde::Serialize;

use super::ResearchError;
use crate::candidates::derive_node_candidates;
use crate::plan::ExecutionPlan;
use crate::request::{NodeId, PlanRequest, ProviderId};

/// A provider of a node that the plan did not choose.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Alternative {
    /// The provider.
    pub provider: ProviderId,
    /// `None`: compatible, passed over by the objective; `Some(reason)`: dropped before
    /// selection because no storage profile fits it.
    pub dropped: Option<String>,
}

/// Per node (plan order), its alternatives; nodes without any are left out.
pub fn alternatives(
    request: &PlanRequest,
    plan: &ExecutionPlan,
) -> Result<BTreeMap<NodeId, Vec<Alternative>>, ResearchError> {
    let resolutions: BTreeMap<&NodeId, _> = request
        .node_resolutions
        .iter()
        .map(|r| (&r.node_id, r))
        .collect();
    let program: BTreeMap<&NodeId, _> =
        request.family.program.nodes().map(|n| (&n.id, n)).collect();
    let mut out = BTreeMap::new();
    for node in &plan.payload.nodes {
        let (Some(resolution), Some(program_node)) =
            (resolutions.get(&node.id), program.get(&node.id))
        else {
            return Err(ResearchError::PlanNotOfRequest {
                detail: format!(
                    "the request has no node {} or no resolution for it",
                    node.id
                ),
            });
        };
        let derived =
            derive_node_candidates(&request.catalog, &request.policy, program_node, resolution)
                .map_err(|e| ResearchError::Build(Box::new(e.into())))?;
        let mut list = Vec::new();
        for candidate in &resolution.provider_resource_candidates {
            let provider = &candidate.provider_id;
            if *provider == node.selection.selected_provider
                || node
                    .selection
                    .rejected_providers
                    .iter()
                    .any(|r| &r.provider_id == provider)
            {
                continue;
            }
            let dropped = derived
                .dropped
                .iter()
                .find(|d| &d.provider == provider)
                .map(|d| d.explain(&node.id));
            list.push(Alternative {
                provider: provider.clone(),
                dropped,
            });
        }
        if !list.is_empty() {
            out.insert(node.id.clone(), list);
        }
    }
    Ok(out)
}
