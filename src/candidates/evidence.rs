//! Storage rejection evidence (rules 3.5): why a node's preferred provider lost the joint
//! selection, in terms of the resources whose selected profile it does not accept.

use std::collections::BTreeMap;

use super::CandidateError;
use crate::plan::{RejectedProvider, RejectionReason, SelectionSettings, SettingRejection};
use crate::request::{ResolutionRejection, ResourceId, StorageProfile};

use super::{NodeCandidates, ProviderCandidate};

/// The storage rejection evidence of one node, if its preferred provider was not chosen.
///
/// A preferred provider without a surviving candidate yields its resolution-local rejection
/// if the resolution has one, else nothing (selection evidence then relies on compatibility
/// or `not_registered` evidence). A preferred candidate ruled out by a recorded setting (a
/// forbid, a pin to another provider) yields that setting. Otherwise it yields the resources,
/// in id order, whose selected profile it does not allow; if there are none, a non-default
/// objective is the reason, and under the default objective that is an error.
pub fn storage_rejection_evidence(
    node: &NodeCandidates<'_>,
    chosen: &ProviderCandidate<'_>,
    profiles: &BTreeMap<ResourceId, StorageProfile>,
    settings: &SelectionSettings,
) -> Result<Option<RejectedProvider>, CandidateError> {
    let Some(preferred) = node.resolution.preferred_provider.as_ref() else {
        return Ok(None);
    };
    if &chosen.plan.provider_id == preferred {
        return Ok(None);
    }
    let Some(candidate) = node
        .candidates
        .iter()
        .find(|c| &c.plan.provider_id == preferred)
    else {
        return Ok(node
            .resolution
            .provider_resolution_rejections
            .get(preferred)
            .map(|rejection| match rejection {
                ResolutionRejection::StorageIncompatible { resource_ids } => RejectedProvider {
                    provider_id: preferred.clone(),
                    reasons: RejectionReason::StorageIncompatible {
                        resource_ids: resource_ids.clone(),
                    },
                },
            }));
    };
    let setting = |rejection| {
        Ok(Some(RejectedProvider {
            provider_id: preferred.clone(),
            reasons: RejectionReason::Setting(rejection),
        }))
    };
    if settings.forbids(node.node, preferred) {
        return setting(SettingRejection::Forbidden);
    }
    if settings.pins.contains_key(node.node) {
        return setting(SettingRejection::PinnedElsewhere);
    }
    let resource_ids: Vec<ResourceId> = candidate
        .allowed
        .iter()
        .filter(|(resource, allowed)| {
            profiles
                .get(*resource)
                .is_some_and(|selected| !allowed.contains(selected))
        })
        .map(|(resource, _)| resource.clone())
        .collect();
    if resource_ids.is_empty() {
        if settings.objective.is_some() {
            return setting(SettingRejection::Objective);
        }
        return Err(CandidateError::PreferredLostWithoutConflict {
            node: node.node.clone(),
            provider: preferred.clone(),
        });
    }
    Ok(Some(RejectedProvider {
        provider_id: preferred.clone(),
        reasons: RejectionReason::StorageIncompatible { resource_ids },
    }))
}
