//! One node of a stored plan, read without the rest: what `jointplan explain --node ID`
//! needs (the node, every node id for the suggestions a mistyped id gets, and the storage
//! profile of every memory row) from a plan of tens of thousands of nodes.
//!
//! The nodes are read one by one: a node whose `id` is not the one asked for is skipped by
//! the JSON reader from that member on (a plan writes `id` first, so nothing of it is
//! built), the node asked for is parsed strictly into a [`PlanNode`]; of the memory plan
//! only each row's resource id and profile are kept, and every other member is skipped.
//! The text is first scanned strictly like every input (one JSON value, each key once,
//! the input limits). A plan that the partial read cannot read is parsed whole, so that its
//! error names the culprit by its path as every other reader's does.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::plan::PlanNode;
use crate::request::{NodeId, ResourceId, StorageProfile};

use super::VerifyError;

/// What a stored plan holds for one node.
#[derive(Debug)]
pub struct PlanNodeView {
    /// The plan's id.
    pub plan_id: String,
    /// The node, if the plan has one with the id asked for (the first, should there be two).
    pub node: Option<PlanNode>,
    /// Every node id, in execution order.
    pub node_ids: Vec<NodeId>,
    /// The storage profile of every memory row (static allocations and dynamic
    /// descriptors), by resource id.
    pub profiles: BTreeMap<ResourceId, StorageProfile>,
}

/// Reads the node `id` of the stored plan in `text` (`file` names it in errors).
pub fn read_node_view(
    file: &std::path::Path,
    text: &str,
    id: &str,
) -> Result<PlanNodeView, VerifyError> {
    crate::json_input::check_document(text)
        .map_err(|err| crate::request::LoadError::from_strict(file, err))?;
    let mut deserializer = serde_json::Deserializer::from_str(text);
    match deserializer.deserialize_map(PlanSeed { id }) {
        Ok(view) => Ok(view),
        Err(partial) => {
            super::parse_plan(text)?;
            Err(VerifyError::Malformed {
                json_path: ".".to_owned(),
                message: partial.to_string(),
            })
        }
    }
}

/// The plan object: its `payload`, the rest skipped.
struct PlanSeed<'i> {
    id: &'i str,
}

impl<'de> Visitor<'de> for PlanSeed<'_> {
    type Value = PlanNodeView;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a stored plan")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PlanNodeView, A::Error> {
        let mut view = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == "payload" {
                view = Some(map.next_value_seed(PayloadSeed { id: self.id })?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        view.ok_or_else(|| de::Error::missing_field("payload"))
    }
}

/// The payload: its `nodes` and its `memory` rows' profiles, the rest skipped.
struct PayloadSeed<'i> {
    id: &'i str,
}

impl<'de> DeserializeSeed<'de> for PayloadSeed<'_> {
    type Value = PlanNodeView;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<PlanNodeView, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for PayloadSeed<'_> {
    type Value = PlanNodeView;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a plan payload")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PlanNodeView, A::Error> {
        let (mut nodes, mut memory, mut plan_id) = (None, None, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "plan_id" => plan_id = Some(map.next_value::<String>()?),
                "nodes" => nodes = Some(map.next_value_seed(NodesSeed { id: self.id })?),
                "memory" => memory = Some(map.next_value::<MemoryProfiles>()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let (node_ids, node) = nodes.ok_or_else(|| de::Error::missing_field("nodes"))?;
        let memory = memory.ok_or_else(|| de::Error::missing_field("memory"))?;
        let plan_id = plan_id.ok_or_else(|| de::Error::missing_field("plan_id"))?;
        let profiles = memory
            .static_allocations
            .into_iter()
            .map(|row| (row.resource_id, row.storage.profile))
            .chain(
                memory
                    .dynamic_descriptors
                    .into_iter()
                    .map(|row| (row.base_resource_id, row.storage.profile)),
            )
            .collect();
        Ok(PlanNodeView {
            plan_id,
            node,
            node_ids,
            profiles,
        })
    }
}

/// The memory plan's rows, each only as its resource id and profile.
#[derive(Deserialize)]
struct MemoryProfiles {
    static_allocations: Vec<StaticRow>,
    dynamic_descriptors: Vec<DynamicRow>,
}

#[derive(Deserialize)]
struct StaticRow {
    resource_id: ResourceId,
    storage: RowStorage,
}

#[derive(Deserialize)]
struct DynamicRow {
    base_resource_id: ResourceId,
    storage: RowStorage,
}

#[derive(Deserialize)]
struct RowStorage {
    profile: StorageProfile,
}

/// The nodes array: every id, and the node asked for.
struct NodesSeed<'i> {
    id: &'i str,
}

impl<'de> DeserializeSeed<'de> for NodesSeed<'_> {
    type Value = (Vec<NodeId>, Option<PlanNode>);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for NodesSeed<'_> {
    type Value = (Vec<NodeId>, Option<PlanNode>);

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("the plan's nodes")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let (mut ids, mut found) = (Vec::new(), None);
        while let Some((id, node)) = seq.next_element_seed(NodeSeed { id: self.id })? {
            ids.push(id);
            if found.is_none() {
                found = node;
            }
        }
        Ok((ids, found))
    }
}

/// One node: its id, and the whole node when it is the one asked for.
struct NodeSeed<'i> {
    id: &'i str,
}

impl<'de> DeserializeSeed<'de> for NodeSeed<'_> {
    type Value = (NodeId, Option<PlanNode>);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for NodeSeed<'_> {
    type Value = (NodeId, Option<PlanNode>);

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a plan node")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        // Members before `id` (none in a plan jointplan writes) are kept as values until
        // the id says whether the node is wanted.
        let mut members = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if key != "id" {
                members.insert(key, map.next_value()?);
                continue;
            }
            let id: NodeId = map.next_value()?;
            if id.as_str() != self.id {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                return Ok((id, None));
            }
            members.insert(key, serde_json::Value::String(id.as_str().to_owned()));
            while let Some((key, value)) = map.next_entry::<String, serde_json::Value>()? {
                members.insert(key, value);
            }
            let node = PlanNode::deserialize(serde_json::Value::Object(members))
                .map_err(de::Error::custom)?;
            return Ok((id, Some(node)));
        }
        Err(de::Error::missing_field("id"))
    }
}
