//! The readable text of a plan summary (`jointplan plan` without `--json`), and the
//! rejection lines `explain` shares.

use crate::selection::Status;

use std::collections::BTreeMap;

use super::id_pattern::{group_by_pattern, short};
use super::layer_pattern::write_layers;
use super::serving_text::write_serving;
use super::summary::{
    human_bytes, human_signed_bytes, ComponentSummary, DynamicResourceSummary, NodeSummary,
    PlanSummary, UncertifiedComponent,
};

/// The rejection lines of one node (shared by `plan` and `explain`).
pub fn write_rejections(out: &mut String, node: &NodeSummary, indent: &str) {
    for rejected in &node.rejected {
        out.push_str(&format!(
            "{indent}rejected {} ({}):\n",
            rejected.provider_id, rejected.reason
        ));
        for detail in &rejected.details {
            out.push_str(&format!("{indent}  - {detail}\n"));
        }
    }
}

/// How much of the plan the text summary lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detail {
    /// Totals first, then nodes, resources and components grouped by id pattern (ids that
    /// differ only in their numbered segments), exceptions under their group.
    Grouped,
    /// Totals first, then every node, resource and component on its own line.
    Full,
}

/// The readable text of a plan summary: the header and totals (memory, serving figures,
/// selection), then the nodes and dynamic resources, grouped or in full.
pub fn summary_text(summary: &PlanSummary, detail: Detail) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "plan {}\n  family {} on device {}, {} nodes, {} dynamic resources\n",
        summary.plan_id,
        summary.family_id,
        summary.device_id,
        summary.nodes.len(),
        summary.dynamic_resources.len()
    ));
    match &summary.written_to {
        Some(file) => out.push_str(&format!("  written to {file}\n")),
        None => out.push_str("  not written (give -o PLAN.json to write it)\n"),
    }
    let settings = &summary.selection_settings;
    if !settings.is_default() {
        let forbids: usize = settings.forbids.values().map(|set| set.len()).sum();
        out.push_str(&format!(
            "  selection settings (recorded in the plan): objective {}, {} pins, {} forbids, {} uncertified components\n",
            settings.objective_name(),
            settings.pins.len(),
            forbids,
            settings.uncertified_components.len()
        ));
    }
    write_memory(&mut out, summary);
    match detail {
        Detail::Grouped => {
            write_selection_grouped(&mut out, &summary.selection);
            write_uncertified(&mut out, &summary.uncertified);
            write_layers(&mut out, &summary.nodes, choice_text);
            write_nodes_grouped(&mut out, &summary.nodes);
            write_resources_grouped(&mut out, &summary.dynamic_resources);
            out.push_str(
                "\n(grouped by id pattern: [a-b] stands for every number in the range, [a-b step s] for every s-th, [n values in a-b] for n of them; --full lists every node, resource and component; --json is complete)\n",
            );
        }
        Detail::Full => {
            write_selection_full(&mut out, &summary.selection);
            write_uncertified(&mut out, &summary.uncertified);
            write_nodes_full(&mut out, &summary.nodes);
            write_resources_full(&mut out, &summary.dynamic_resources);
        }
    }
    out
}

/// The memory totals and the serving figures.
fn write_memory(out: &mut String, summary: &PlanSummary) {
    let m = &summary.memory;
    out.push_str("\nmemory:\n");
    out.push_str(&format!(
        "  static bytes            {}\n",
        human_bytes(m.static_bytes)
    ));
    out.push_str(&format!(
        "  minimum runnable bytes  {}\n",
        human_bytes(m.minimum_runnable_bytes)
    ));
    out.push_str(&format!(
        "  usable capacity         {}\n",
        human_bytes(m.usable_capacity_bytes)
    ));
    out.push_str(&format!(
        "  spare at minimum load   {}\n",
        human_signed_bytes(m.spare_bytes)
    ));
    write_serving(out, m);
}

/// The node line's provider and reason (and the preferred provider of a fallback).
fn choice_text(node: &NodeSummary) -> String {
    let mut text = format!("{}  {}", node.selected_provider, node.reason);
    if let (Some(requested), "fallback_from_preferred") = (&node.requested_provider, node.reason) {
        text.push_str(&format!(" (preferred {requested})"));
    }
    text
}

fn write_nodes_full(out: &mut String, nodes: &[NodeSummary]) {
    out.push_str("\nnodes (chosen provider, reason):\n");
    for node in nodes {
        out.push_str(&format!("  {}  {}\n", node.node_id, choice_text(node)));
        if node.reason == "fallback_from_preferred" {
            write_rejections(out, node, "      ");
        }
    }
}

/// `  PATTERN  xN  TEXT` (the count only for more than one member).
pub fn group_line(out: &mut String, indent: &str, shown: &str, count: usize, text: &str) {
    if count > 1 {
        out.push_str(&format!("{indent}{shown}  x{count}  {text}\n"));
    } else {
        out.push_str(&format!("{indent}{shown}  {text}\n"));
    }
}

fn write_nodes_grouped(out: &mut String, nodes: &[NodeSummary]) {
    let groups = group_by_pattern(nodes, |n| n.node_id.as_str());
    out.push_str(&format!(
        "\nnodes ({} in {} id patterns; chosen provider, reason):\n",
        nodes.len(),
        groups.len()
    ));
    for group in &groups {
        let parts = group.parts(choice_text);
        for (index, (shown, members)) in parts.iter().enumerate() {
            let indent = if index == 0 { "  " } else { "    except " };
            let first = members[0];
            group_line(out, indent, shown, members.len(), &choice_text(first));
            if first.reason == "fallback_from_preferred" {
                if members.len() > 1 {
                    out.push_str(&format!(
                        "      (the rejections of {}; --full lists each node's)\n",
                        first.node_id
                    ));
                }
                write_rejections(out, first, "      ");
            }
        }
    }
}

fn resource_text(r: &DynamicResourceSummary) -> String {
    format!(
        "{}  {:?}  {:?}  {}",
        r.profile,
        r.usage,
        r.lifetime,
        r.minimum_bytes.map_or_else(|| "-".to_owned(), human_bytes)
    )
}

fn write_resources_full(out: &mut String, resources: &[DynamicResourceSummary]) {
    out.push_str("\ndynamic resources (profile, usage, lifetime, minimum):\n");
    for r in resources {
        out.push_str(&format!(
            "  {}  {}\n",
            short(&r.resource_id),
            resource_text(r)
        ));
    }
}

fn write_resources_grouped(out: &mut String, resources: &[DynamicResourceSummary]) {
    let groups = group_by_pattern(resources, |r| r.resource_id.as_str());
    out.push_str(&format!(
        "\ndynamic resources ({} in {} id patterns; profile, usage, lifetime, minimum of each):\n",
        resources.len(),
        groups.len()
    ));
    for group in &groups {
        for (index, (shown, members)) in group.parts(resource_text).iter().enumerate() {
            let indent = if index == 0 { "  " } else { "    except " };
            group_line(
                out,
                indent,
                short(shown),
                members.len(),
                &resource_text(members[0]),
            );
        }
    }
}

fn write_selection_full(out: &mut String, selection: &[ComponentSummary]) {
    out.push_str("\nselection (per component: method, check):\n");
    for c in selection {
        out.push_str(&format!(
            "  from {}: {} nodes, {} resources, {}, {}\n",
            c.first_node, c.nodes, c.resources, c.method, c.check
        ));
    }
}

/// The kind of a component's check: its text up to the first `:` (the rest names the
/// component's own figures).
fn check_kind(check: &str) -> &str {
    check.split(':').next().unwrap_or(check)
}

/// The components of one (method, check kind, status).
struct ComponentKind<'s> {
    count: usize,
    nodes: usize,
    resources: usize,
    largest: &'s ComponentSummary,
}

fn write_selection_grouped(out: &mut String, selection: &[ComponentSummary]) {
    let mut kinds: BTreeMap<(&str, &str, &str), ComponentKind<'_>> = BTreeMap::new();
    for c in selection {
        let key = (
            c.method.as_str(),
            check_kind(&c.check),
            status_text(c.status),
        );
        let kind = kinds.entry(key).or_insert(ComponentKind {
            count: 0,
            nodes: 0,
            resources: 0,
            largest: c,
        });
        kind.count += 1;
        kind.nodes += c.nodes;
        kind.resources += c.resources;
        if c.nodes > kind.largest.nodes {
            kind.largest = c;
        }
    }
    let plural = if selection.len() == 1 { "" } else { "s" };
    out.push_str(&format!(
        "\nselection ({} component{plural}, grouped by method, check and status):\n",
        selection.len()
    ));
    for ((method, check, status), kind) in &kinds {
        let ComponentKind {
            count,
            nodes,
            resources,
            largest,
        } = kind;
        if *count == 1 {
            out.push_str(&format!(
                "  from {}: {nodes} nodes, {resources} resources, {method}, {}, {status}\n",
                largest.first_node, largest.check
            ));
        } else {
            out.push_str(&format!(
                "  {count} components: {nodes} nodes, {resources} resources, {method}, {check}, {status} (largest {} nodes, from {})\n",
                largest.nodes, largest.first_node
            ));
        }
    }
}

/// The status of a component in words.
fn status_text(status: Status) -> &'static str {
    match status {
        Status::Optimal => "optimal",
        Status::Feasible => "feasible",
    }
}

/// The list of components accepted without a proof (nothing when every one is proved).
fn write_uncertified(out: &mut String, uncertified: &[UncertifiedComponent]) {
    if uncertified.is_empty() {
        return;
    }
    out.push_str(&format!(
        "\nuncertified selection ({} components accepted with --allow-uncertified, not proved optimal):\n",
        uncertified.len()
    ));
    for c in uncertified {
        let gap = c
            .gap
            .map_or_else(|| "gap unknown".to_owned(), |g| format!("gap {g:.6}"));
        out.push_str(&format!(
            "  from {}: {} nodes, status {}, {gap}: {}\n",
            c.first_node,
            c.nodes,
            status_text(c.status),
            c.certificate
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn component(first_node: &str, status: Status, gap: Option<f64>) -> ComponentSummary {
        ComponentSummary {
            first_node: first_node.to_owned(),
            nodes: 7,
            resources: 3,
            method: "ilp".to_owned(),
            check: "dp-skipped: budget".to_owned(),
            status,
            gap,
            certificate: format!("certificate of {first_node}"),
        }
    }

    #[test]
    fn uncertified_components_are_listed_in_text_and_json() {
        let selection = [
            component("node.a", Status::Optimal, Some(0.0)),
            component("node.b", Status::Feasible, Some(0.125)),
            component("node.c", Status::Feasible, None),
        ];
        let mut text = String::new();
        let uncertified: Vec<UncertifiedComponent> =
            crate::render::summary::uncertified_components(&selection);
        write_uncertified(&mut text, &uncertified);
        assert!(
            text.contains("uncertified selection (2 components"),
            "{text}"
        );
        assert!(
            text.contains(
                "from node.b: 7 nodes, status feasible, gap 0.125000: certificate of node.b"
            ),
            "{text}"
        );
        assert!(
            text.contains("from node.c: 7 nodes, status feasible, gap unknown"),
            "{text}"
        );
        assert!(!text.contains("node.a"), "{text}");
        let json = serde_json::to_value(&uncertified).unwrap();
        assert_eq!(json[0]["first_node"], "node.b");
        assert_eq!(json[0]["status"], "feasible");
        assert_eq!(json[0]["gap"], 0.125);
        assert!(json[1]["gap"].is_null());
        let mut none = String::new();
        write_uncertified(&mut none, &[]);
        assert!(none.is_empty());
    }
}
