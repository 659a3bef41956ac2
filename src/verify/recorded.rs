//! What `verify` reads from a stored plan before it rebuilds: the recorded selection
//! settings and, only when the settings replay uncertified components, each node's
//! selected provider.
//!
//! Each is a partial parse of the stored text: the members it needs are typed, every other
//! member is skipped by the JSON reader without being built. The whole typed plan is parsed
//! only if the rebuilt plan differs from the stored text (to check the stored plan's form
//! and name the first difference): a stored plan that *is* the rebuilt plan, which is every
//! plan `verify` accepts, is never held as a second typed plan beside the rebuilt one.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::plan::SelectionSettings;
use crate::request::{NodeId, ProviderId};

/// A stored plan's recorded selection settings (absent: the defaults, as the plan omits
/// them).
pub(super) fn recorded_settings(text: &str) -> Result<SelectionSettings, serde_json::Error> {
    #[derive(Deserialize)]
    struct Plan {
        payload: Payload,
    }
    #[derive(Deserialize)]
    struct Payload {
        #[serde(default)]
        selection_settings: SelectionSettings,
    }
    let plan: Plan = serde_json::from_str(text)?;
    Ok(plan.payload.selection_settings)
}

/// A stored plan's selected provider of every node, by node id.
pub(super) fn recorded_choices(
    text: &str,
) -> Result<BTreeMap<NodeId, ProviderId>, serde_json::Error> {
    #[derive(Deserialize)]
    struct Plan {
        payload: Payload,
    }
    #[derive(Deserialize)]
    struct Payload {
        nodes: Vec<Node>,
    }
    #[derive(Deserialize)]
    struct Node {
        id: NodeId,
        selection: Selection,
    }
    #[derive(Deserialize)]
    struct Selection {
        selected_provider: ProviderId,
    }
    let plan: Plan = serde_json::from_str(text)?;
    Ok(plan
        .payload
        .nodes
        .into_iter()
        .map(|node| (node.id, node.selection.selected_provider))
        .collect())
}
