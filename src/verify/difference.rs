//! Where two plans differ: the first JSON path, in the order of a walk of their canonical
//! JSON (object keys in byte order, arrays by index), with both values shown.
//!
//! [`first_difference`] walks two JSON trees. [`first_plan_difference`] answers the same
//! question for two typed plans without a tree of either whole plan: a tree of each plan
//! with its nodes set aside, and the nodes compared one pair of trees at a time where the
//! walk reaches `payload.nodes`. A rejected `verify` of a large plan (DeepSeek-V3's 286 MB)
//! built trees of both whole plans, several times the plan's size in memory.

use serde_json::Value;

use super::{to_tree, FieldDifference, VerifyError};
use crate::plan::ExecutionPlan;

/// Where the walk hands over to the node-by-node comparison.
const NODES_PATH: &str = "payload.nodes";

/// The first field at which two plans differ (see [`first_difference`]), or `None`. The
/// nodes are taken out of both plans while their skeletons are compared and put back
/// before it returns, whatever it returns.
pub(super) fn first_plan_difference(
    stored: &mut ExecutionPlan,
    rebuilt: &mut ExecutionPlan,
) -> Result<Option<FieldDifference>, VerifyError> {
    let stored_nodes = std::mem::take(&mut stored.payload.nodes);
    let rebuilt_nodes = std::mem::take(&mut rebuilt.payload.nodes);
    let found = to_tree(stored).and_then(|stored_tree| {
        let rebuilt_tree = to_tree(rebuilt)?;
        let mut nodes = |path: &mut String| -> Result<Option<FieldDifference>, VerifyError> {
            for index in 0..stored_nodes.len().max(rebuilt_nodes.len()) {
                let mark = path.len();
                path.push_str(&format!("[{index}]"));
                let node_tree = |node: Option<&crate::plan::PlanNode>| {
                    node.map(|node| {
                        serde_json::to_value(node).map_err(|err| VerifyError::Malformed {
                            json_path: path.clone(),
                            message: err.to_string(),
                        })
                    })
                    .transpose()
                };
                let (x, y) = (
                    node_tree(stored_nodes.get(index))?,
                    node_tree(rebuilt_nodes.get(index))?,
                );
                if let Some(found) = compare_at(path, mark, x.as_ref(), y.as_ref(), &mut None)? {
                    return Ok(Some(found));
                }
            }
            Ok(None)
        };
        let mut hook: Option<&mut NodesHook<'_>> = Some(&mut nodes);
        walk(&stored_tree, &rebuilt_tree, &mut String::new(), &mut hook)
    });
    stored.payload.nodes = stored_nodes;
    rebuilt.payload.nodes = rebuilt_nodes;
    found
}

/// Compares what is at [`NODES_PATH`] in place of the trees there.
type NodesHook<'h> = dyn FnMut(&mut String) -> Result<Option<FieldDifference>, VerifyError> + 'h;

/// The first field at which two JSON trees differ: object keys are walked in sorted order
/// (a key missing on one side differs there), arrays by index (a length difference differs
/// at the first missing index). `None` if the trees are equal.
pub fn first_difference(stored: &Value, rebuilt: &Value) -> Option<FieldDifference> {
    let mut path = String::new();
    // Only a hook fails, and there is none.
    walk(stored, rebuilt, &mut path, &mut None).unwrap_or_default()
}

/// The walk of [`first_difference`]; `hook`, when given, compares what is at
/// [`NODES_PATH`] instead.
fn walk(
    stored: &Value,
    rebuilt: &Value,
    path: &mut String,
    hook: &mut Option<&mut NodesHook<'_>>,
) -> Result<Option<FieldDifference>, VerifyError> {
    if path == NODES_PATH {
        if let Some(nodes) = hook.as_mut() {
            return nodes(path);
        }
    }
    Ok(match (stored, rebuilt) {
        (Value::Object(a), Value::Object(b)) => {
            // serde_json maps are sorted (no `preserve_order`), so merging the two key
            // sequences visits keys in byte order.
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let mark = path.len();
                push_key(path, key);
                if let Some(found) = compare_at(path, mark, a.get(key), b.get(key), hook)? {
                    return Ok(Some(found));
                }
            }
            None
        }
        (Value::Array(a), Value::Array(b)) => {
            for index in 0..a.len().max(b.len()) {
                let mark = path.len();
                path.push_str(&format!("[{index}]"));
                if let Some(found) = compare_at(path, mark, a.get(index), b.get(index), hook)? {
                    return Ok(Some(found));
                }
            }
            None
        }
        (x, y) if x == y => None,
        (x, y) => Some(difference(path, Some(x), Some(y))),
    })
}

/// Compares the values at one key or index (`path` already names it; it was `mark` long
/// before): the first difference within them, or `path` put back when they are equal.
fn compare_at(
    path: &mut String,
    mark: usize,
    stored: Option<&Value>,
    rebuilt: Option<&Value>,
    hook: &mut Option<&mut NodesHook<'_>>,
) -> Result<Option<FieldDifference>, VerifyError> {
    let found = match (stored, rebuilt) {
        (Some(x), Some(y)) => walk(x, y, path, hook)?,
        (x, y) => Some(difference(path, x, y)),
    };
    if found.is_none() {
        path.truncate(mark);
    }
    Ok(found)
}

fn push_key(path: &mut String, key: &str) {
    let plain = !key.is_empty()
        && key
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(key);
    } else {
        path.push_str(&format!("[{key:?}]"));
    }
}

const SHOWN_CHARS: usize = 160;

fn shown(value: Option<&Value>) -> String {
    match value {
        None => "<absent>".to_owned(),
        Some(v) => {
            let text = v.to_string();
            if text.chars().count() <= SHOWN_CHARS {
                text
            } else {
                let cut: String = text.chars().take(SHOWN_CHARS).collect();
                format!("{cut}… ({} chars)", text.chars().count())
            }
        }
    }
}

fn difference(path: &str, stored: Option<&Value>, rebuilt: Option<&Value>) -> FieldDifference {
    FieldDifference {
        path: if path.is_empty() {
            ".".to_owned()
        } else {
            path.to_owned()
        },
        stored: shown(stored),
        rebuilt: shown(rebuilt),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::BuildOptions;
    use crate::request::PlanRequest;

    fn tiny_plan() -> ExecutionPlan {
        let file =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/tiny/request.json");
        let request = PlanRequest::read(&file).unwrap();
        ExecutionPlan::build(&request, &BuildOptions::default()).unwrap()
    }

    /// The typed comparison answers as the walk of the two whole trees does, and leaves
    /// both plans as they were.
    fn agrees(stored: &ExecutionPlan, rebuilt: &ExecutionPlan) -> Option<FieldDifference> {
        let whole = first_difference(
            &serde_json::to_value(stored).unwrap(),
            &serde_json::to_value(rebuilt).unwrap(),
        );
        let (mut a, mut b) = (stored.clone(), rebuilt.clone());
        let typed = first_plan_difference(&mut a, &mut b).unwrap();
        assert_eq!(typed, whole);
        assert!(a == *stored && b == *rebuilt, "the nodes are put back");
        typed
    }

    #[test]
    fn plans_differ_where_their_whole_trees_differ() {
        let plan = tiny_plan();
        assert!(plan.payload.nodes.len() >= 2);
        assert_eq!(agrees(&plan, &plan), None);

        // A field inside a node.
        let mut changed = plan.clone();
        let last = changed.payload.nodes.len() - 1;
        changed.payload.nodes[last].provider_resources.provider_id =
            crate::request::ProviderId::new("provider.changed").unwrap();
        let found = agrees(&plan, &changed).unwrap();
        assert_eq!(
            found.path,
            format!("payload.nodes[{last}].provider_resources.provider_id")
        );

        // A node fewer: the first missing index.
        let mut shorter = plan.clone();
        shorter.payload.nodes.pop();
        let found = agrees(&plan, &shorter).unwrap();
        assert_eq!(found.path, format!("payload.nodes[{last}]"));
        assert_eq!(found.rebuilt, "<absent>");

        // A field after `nodes` in key order and one inside a node: the node comes first.
        let mut both = changed.clone();
        both.payload.plan_id = "plan/sha256/other".to_owned();
        both.plan_hash = crate::canonical::Sha256Hex::new("0".repeat(64)).unwrap();
        let found = agrees(&plan, &both).unwrap();
        assert!(found.path.starts_with("payload.nodes["), "{}", found.path);

        // A field before `nodes` in key order and one inside a node: the field comes first.
        let mut before = changed.clone();
        before.payload.maximum_scheduled_tokens += 1;
        let found = agrees(&plan, &before).unwrap();
        assert_eq!(found.path, "payload.maximum_scheduled_tokens");

        // A node more in the rebuilt plan: the first index the stored plan lacks.
        let found = agrees(&shorter, &plan).unwrap();
        assert_eq!(found.path, format!("payload.nodes[{last}]"));
        assert_eq!(found.stored, "<absent>");

        // Only a field outside the nodes.
        let mut outside = plan.clone();
        outside.plan_hash = crate::canonical::Sha256Hex::new("0".repeat(64)).unwrap();
        assert_eq!(agrees(&plan, &outside).unwrap().path, "plan_hash");

        // A field one plan has and the other omits (default selection settings are not
        // written), either way round.
        let mut settled = plan.clone();
        settled.payload.selection_settings.objective = Some("min-penalty".to_owned());
        let found = agrees(&plan, &settled).unwrap();
        assert_eq!(found.path, "payload.selection_settings");
        assert_eq!(found.stored, "<absent>");
        let found = agrees(&settled, &plan).unwrap();
        assert_eq!(found.path, "payload.selection_settings");
        assert_eq!(found.rebuilt, "<absent>");
    }
}
