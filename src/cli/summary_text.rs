//! The readable text of a plan summary (`jointplan plan` without `--json`), and the
//! rejection lines `explain` shares.

use jointplan::selection::Status;

use super::output::{
    human_bytes, human_signed_bytes, NodeSummary, PlanSummary, UncertifiedComponent,
};
use super::serving_text::write_serving;

fn short(id: &str) -> &str {
    // Pool and workspace ids end in a 64-hex digest; show its first 12 digits.
    match id.rfind('/') {
        Some(i) if id.len() - i - 1 == 64 => &id[..i + 13],
        _ => id,
    }
}

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

/// The readable text of a plan summary.
pub fn summary_text(summary: &PlanSummary) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "plan {}\n  family {} on device {}, {} nodes\n",
        summary.plan_id,
        summary.family_id,
        summary.device_id,
        summary.nodes.len()
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
    out.push_str("\nnodes (chosen provider, reason):\n");
    for node in &summary.nodes {
        out.push_str(&format!(
            "  {}  {}  {}",
            node.node_id, node.selected_provider, node.reason
        ));
        if let (Some(requested), "fallback_from_preferred") =
            (&node.requested_provider, node.reason)
        {
            out.push_str(&format!(" (preferred {requested})"));
        }
        out.push('\n');
        if node.reason == "fallback_from_preferred" {
            write_rejections(&mut out, node, "      ");
        }
    }
    out.push_str("\ndynamic resources (profile, usage, lifetime, minimum):\n");
    for r in &summary.dynamic_resources {
        out.push_str(&format!(
            "  {}  {}  {:?}  {:?}  {}\n",
            short(&r.resource_id),
            r.profile,
            r.usage,
            r.lifetime,
            r.minimum_bytes.map_or_else(|| "-".to_owned(), human_bytes)
        ));
    }
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
        "  headroom                {}\n",
        human_signed_bytes(m.headroom_bytes)
    ));
    write_serving(&mut out, m);
    out.push_str("\nselection (per component: method, check):\n");
    for c in &summary.selection {
        out.push_str(&format!(
            "  from {}: {} nodes, {} resources, {}, {}\n",
            c.first_node, c.nodes, c.resources, c.method, c.check
        ));
    }
    write_uncertified(&mut out, &summary.uncertified);
    out
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
    use crate::cli::output::ComponentSummary;

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
            crate::cli::output::uncertified_components(&selection);
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
