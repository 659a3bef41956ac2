//! The layers of a model as repeated structure: the `layers` section of the text summary.
//!
//! The nodes whose ids share the text before their first number (`node.layer.` in
//! `node.layer.12.q_proj`) are that number's layer. A layer is described by its nodes with
//! the layer number taken out, grouped by id pattern (`expert.[0-255]  x256`), each with its
//! chosen provider; layers with the same description print as one line with their numbers
//! and a count (DeepSeek-V3's 58 MoE layers), the most common first. The other structures
//! are listed under it (up to [`MAXIMUM_EXCEPTIONS`], then how many more) by how they
//! differ, in the input's terms: the kinds of node a structure lacks, the kinds it has
//! besides, and the nodes whose numbers or provider differ. When several id prefixes are
//! numbered, the one with the most layers is the model's layers.
//!
//! A layer number is a numbered segment as id patterns define it, so without leading
//! zeros: in ids numbered `blk.00` to `blk.31`, layers 0 to 9 are literal text, not layers,
//! and the section shows layers 10 to 31 (the nodes section lists every node).

use std::collections::BTreeMap;

use super::id_pattern::{group_by_pattern, numbers_shown, split_first_number};
use super::summary::NodeSummary;

/// One kind of node of a layer: its pattern with the layer number taken out, how many
/// nodes, and their provider and reason.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Part {
    /// The id pattern with its number sets (`expert.[0-255]`).
    shown: String,
    count: usize,
    choice: String,
    /// The members' ids with the layer number taken out, sorted: two parts are the same
    /// nodes exactly when these are equal (`shown` can be equal for different members,
    /// when it says `(k of n combinations)`).
    members: Vec<String>,
    /// The id pattern, numbered segments as `*` (`expert.*`): parts of two layers with
    /// the same pattern are the same kind of node, whatever their numbers or providers.
    pattern: String,
}

impl Part {
    /// `expert.[0-255] x256`, or `q_proj`.
    fn label(&self) -> String {
        let shown = if self.shown.is_empty() {
            "(the layer's own node)"
        } else {
            &self.shown
        };
        if self.count > 1 {
            format!("{shown} x{}", self.count)
        } else {
            shown.to_owned()
        }
    }
}

/// The nodes of each layer of one id prefix, by layer number: each node with the rest of
/// its id after the layer number.
type Layers<'n> = BTreeMap<u64, Vec<(&'n str, &'n NodeSummary)>>;

/// Structures listed under the common one before the rest are counted.
const MAXIMUM_EXCEPTIONS: usize = 8;

/// Layers of one structure: the parts in node order and the layer numbers.
struct Structure {
    parts: Vec<Part>,
    layers: Vec<u64>,
}

/// Writes the `layers` section, or nothing when no id prefix numbers two layers or more.
/// `choice` is the provider-and-reason text of a node.
pub fn write_layers(
    out: &mut String,
    nodes: &[NodeSummary],
    choice: impl Fn(&NodeSummary) -> String,
) {
    let mut by_prefix: BTreeMap<&str, Layers<'_>> = BTreeMap::new();
    for node in nodes {
        if let Some((prefix, layer, rest)) = split_first_number(&node.node_id) {
            by_prefix
                .entry(prefix)
                .or_default()
                .entry(layer)
                .or_default()
                .push((rest, node));
        }
    }
    // The prefix with the most layers (the first in byte order on a tie).
    let Some((prefix, layers)) = by_prefix
        .iter()
        .rev()
        .max_by_key(|(_, layers)| layers.len())
        .filter(|(_, layers)| layers.len() >= 2)
    else {
        return;
    };
    let mut structures: Vec<Structure> = Vec::new();
    let mut index_of: BTreeMap<Vec<Part>, usize> = BTreeMap::new();
    for (&layer, members) in layers {
        let mut parts = Vec::new();
        for group in group_by_pattern(members, |(rest, _)| rest) {
            for (shown, grouped) in group.parts(|(_, node)| choice(node)) {
                let mut members: Vec<String> =
                    grouped.iter().map(|(rest, _)| (*rest).to_owned()).collect();
                members.sort_unstable();
                parts.push(Part {
                    shown,
                    count: grouped.len(),
                    choice: choice(grouped[0].1),
                    members,
                    pattern: group.pattern().to_owned(),
                });
            }
        }
        let mut key = parts.clone();
        key.sort();
        let index = *index_of.entry(key).or_insert_with(|| {
            structures.push(Structure {
                parts,
                layers: Vec::new(),
            });
            structures.len() - 1
        });
        structures[index].layers.push(layer);
    }
    // The most common structure first; ties in the order of their first layer.
    structures.sort_by_key(|s| std::cmp::Reverse(s.layers.len()));
    out.push_str(&format!(
        "\nlayers ({} numbered {prefix}N, in {} structure{}; the nodes of each layer):\n",
        layers.len(),
        structures.len(),
        if structures.len() == 1 { "" } else { "s" }
    ));
    let common = &structures[0];
    let (first, last) = (
        layers.keys().next().copied().unwrap_or(0),
        layers.keys().next_back().copied().unwrap_or(0),
    );
    // The exceptions printed: all of them when one more than the cap (the line saying how
    // many more would take the place of the last), else the cap.
    let exceptions = structures.len() - 1;
    let listed = if exceptions <= MAXIMUM_EXCEPTIONS + 1 {
        exceptions
    } else {
        MAXIMUM_EXCEPTIONS
    };
    let shown: Vec<String> = structures[..=listed]
        .iter()
        .map(|structure| numbers_shown(structure.layers.iter().copied()))
        .collect();
    // The common structure's layers as what the exceptions leave, when they are too
    // scattered to list (Qwen3-Next's linear-attention layers around every fourth), the
    // layers are numbered without a gap and every exception is listed by its numbers (so
    // that the exceptions say which).
    let scattered = |numbers: &String| numbers.contains(" values in ");
    let gapless = u64::try_from(layers.len()).is_ok_and(|n| last - first + 1 == n);
    let exceptions_named = listed == exceptions && !shown[1..].iter().any(scattered);
    for (index, (structure, numbers)) in structures.iter().zip(&shown).enumerate() {
        let mut numbers = numbers.clone();
        if index == 0 && exceptions > 0 && gapless && exceptions_named && scattered(&numbers) {
            numbers = format!("[the other {} of {first}-{last}]", structure.layers.len());
        }
        let count = structure.layers.len();
        let counted = if count > 1 {
            format!("  x{count}")
        } else {
            String::new()
        };
        let nodes: usize = structure.parts.iter().map(|p| p.count).sum();
        let nodes = format!("{nodes} node{}", if nodes == 1 { "" } else { "s" });
        if index == 0 {
            let labels: Vec<String> = structure.parts.iter().map(Part::label).collect();
            out.push_str(&format!(
                "  {prefix}{numbers}{counted}  {nodes}: {}\n",
                labels.join(", ")
            ));
        } else {
            out.push_str(&format!(
                "    except {prefix}{numbers}{counted}  {nodes}: {}\n",
                differences(&common.parts, &structure.parts)
            ));
        }
    }
    if listed < exceptions {
        let rest = &structures[listed + 1..];
        let layers: usize = rest.iter().map(|s| s.layers.len()).sum();
        out.push_str(&format!(
            "    ... and {} more structures of {layers} layers (the nodes section lists every kind of node)\n",
            rest.len()
        ));
    }
}

/// How `other` differs from `common`, kind of node by kind of node (parts with the same id
/// pattern): the kinds it lacks, those it has besides, and those whose numbers or providers
/// differ, with what the common structure has instead.
fn differences(common: &[Part], other: &[Part]) -> String {
    let by_pattern = |parts: &[Part]| -> BTreeMap<String, Vec<Part>> {
        let mut kinds: BTreeMap<String, Vec<Part>> = BTreeMap::new();
        for part in parts {
            kinds
                .entry(part.pattern.clone())
                .or_default()
                .push(part.clone());
        }
        kinds
    };
    let (mine, theirs) = (by_pattern(other), by_pattern(common));
    let without: Vec<String> = common
        .iter()
        .filter(|p| !mine.contains_key(&p.pattern))
        .map(Part::label)
        .collect();
    let with: Vec<String> = other
        .iter()
        .filter(|p| !theirs.contains_key(&p.pattern))
        .map(Part::label)
        .collect();
    let on = |parts: &[Part]| -> String {
        let labels: Vec<String> = parts
            .iter()
            .map(|p| format!("{} on {}", p.label(), p.choice))
            .collect();
        labels.join(", ")
    };
    // Kinds of node both have, by pattern; the same parts in another node order are no
    // difference.
    let sorted = |parts: &[Part]| {
        let mut parts = parts.to_vec();
        parts.sort();
        parts
    };
    let mut changed: Vec<String> = Vec::new();
    for (pattern, parts) in &mine {
        match theirs.get(pattern) {
            Some(usual) if sorted(usual) != sorted(parts) => {
                changed.push(match (parts.as_slice(), usual.as_slice()) {
                    // One kind, the same nodes, another provider: the provider is the difference.
                    ([part], [common]) if part.members == common.members => format!(
                        "{} on {} (the others: {})",
                        part.label(),
                        part.choice,
                        common.choice
                    ),
                    _ => format!("{} (the others: {})", on(parts), on(usual)),
                })
            }
            _ => {}
        }
    }
    let mut said = Vec::new();
    if !without.is_empty() {
        said.push(format!("without {}", without.join(", ")));
    }
    if !with.is_empty() {
        said.push(format!("with {}", with.join(", ")));
    }
    said.extend(changed);
    said.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, provider: &str) -> NodeSummary {
        NodeSummary {
            node_id: id.to_owned(),
            operation_id: "operation.x".to_owned(),
            selected_provider: provider.to_owned(),
            requested_provider: None,
            reason: "preferred_compatible",
            rejected: Vec::new(),
        }
    }

    /// One node per layer: full attention every fourth layer (3, 7, ...), linear
    /// attention in the others, as in Qwen3-Next.
    fn hybrid(layers: impl Iterator<Item = u64>) -> Vec<NodeSummary> {
        layers
            .map(|layer| {
                let kind = if layer % 4 == 3 {
                    "attention"
                } else {
                    "linear_attention"
                };
                node(&format!("node.layer.{layer}.{kind}"), "p")
            })
            .collect()
    }

    fn text(nodes: &[NodeSummary]) -> String {
        let mut out = String::new();
        write_layers(&mut out, nodes, |n| n.selected_provider.clone());
        out
    }

    #[test]
    fn dense_and_expert_layers_print_as_one_pattern_and_its_exception() {
        let mut nodes = vec![node("node.embedding", "p.gather")];
        for layer in 0..6 {
            nodes.push(node(&format!("node.layer.{layer}.attention"), "p.paged"));
            if layer < 2 {
                nodes.push(node(&format!("node.layer.{layer}.feed_forward"), "p.dense"));
            } else {
                nodes.push(node(&format!("node.layer.{layer}.router"), "p.topk"));
                for expert in 0..4 {
                    nodes.push(node(
                        &format!("node.layer.{layer}.expert.{expert}"),
                        "p.expert",
                    ));
                }
            }
        }
        assert_eq!(
            text(&nodes),
            "\nlayers (6 numbered node.layer.N, in 2 structures; the nodes of each layer):\n\
             \x20 node.layer.[2-5]  x4  6 nodes: attention, router, expert.[0-3] x4\n\
             \x20   except node.layer.[0-1]  x2  2 nodes: without router, expert.[0-3] x4; with feed_forward\n"
        );
    }

    #[test]
    fn a_layer_on_another_provider_is_an_exception_by_name() {
        let nodes: Vec<NodeSummary> = (0..8)
            .map(|layer| {
                let provider = if layer == 5 { "p.flash" } else { "p.paged" };
                node(&format!("blk_{layer}_attention"), provider)
            })
            .collect();
        assert_eq!(
            text(&nodes),
            "\nlayers (8 numbered blk_N, in 2 structures; the nodes of each layer):\n\
             \x20 blk_[0-4,6-7]  x7  1 node: attention\n\
             \x20   except blk_5  1 node: attention on p.flash (the others: p.paged)\n"
        );
    }

    #[test]
    fn scattered_common_layers_print_as_what_the_exceptions_leave() {
        let nodes = hybrid(0..32);
        assert_eq!(
            text(&nodes),
            "\nlayers (32 numbered node.layer.N, in 2 structures; the nodes of each layer):\n\
             \x20 node.layer.[the other 24 of 0-31]  x24  1 node: linear_attention\n\
             \x20   except node.layer.[3-31 step 4]  x8  1 node: without linear_attention; with attention\n"
        );
    }

    #[test]
    fn part_of_a_kind_on_another_provider_names_both_providers() {
        let mut nodes = Vec::new();
        for layer in 0..4 {
            for expert in 0..4 {
                let provider = if layer == 2 && expert == 3 {
                    "p.other"
                } else {
                    "p.expert"
                };
                nodes.push(node(
                    &format!("node.layer.{layer}.expert.{expert}"),
                    provider,
                ));
            }
        }
        assert_eq!(
            text(&nodes),
            "\nlayers (4 numbered node.layer.N, in 2 structures; the nodes of each layer):\n\
             \x20 node.layer.[0-1,3]  x3  4 nodes: expert.[0-3] x4\n\
             \x20   except node.layer.2  4 nodes: expert.[0-2] x3 on p.expert, expert.3 on p.other \
             (the others: expert.[0-3] x4 on p.expert)\n"
        );
    }

    /// One attention node per layer, on `p.common` in the layers `common` selects and on a
    /// provider of its own in the others (each of them a structure).
    fn own_providers(layers: u64, common: impl Fn(u64) -> bool) -> Vec<NodeSummary> {
        (0..layers)
            .map(|layer| {
                let provider = if common(layer) {
                    "p.common".to_owned()
                } else {
                    format!("p.{layer}")
                };
                node(&format!("node.layer.{layer}.attention"), &provider)
            })
            .collect()
    }

    #[test]
    fn many_structures_are_listed_up_to_a_cap() {
        // Every layer but the first four has its own provider: 12 exceptions.
        let out = text(&own_providers(16, |layer| layer < 4));
        assert_eq!(
            out.matches("    except ").count(),
            MAXIMUM_EXCEPTIONS,
            "{out}"
        );
        assert!(
            out.ends_with("    ... and 4 more structures of 4 layers (the nodes section lists every kind of node)\n"),
            "{out}"
        );
    }

    #[test]
    fn one_exception_past_the_cap_is_listed_instead_of_counted() {
        // Layers 3-11 each on its own provider: 9 exceptions, all listed.
        let out = text(&own_providers(12, |layer| layer < 3));
        assert_eq!(
            out.matches("    except ").count(),
            MAXIMUM_EXCEPTIONS + 1,
            "{out}"
        );
        assert!(!out.contains("more structures"), "{out}");
    }

    #[test]
    fn the_others_only_when_every_exception_is_named() {
        // 40 layers, every fourth on its own provider: 10 exceptions, 2 of them not
        // listed, so the common layers print by their numbers, not as "the other 30".
        let out = text(&own_providers(40, |layer| layer % 4 != 3));
        assert!(!out.contains("[the other "), "{out}");
        assert!(
            out.contains("  node.layer.[30 values in 0-38]  x30  "),
            "{out}"
        );
        assert!(
            out.ends_with("    ... and 2 more structures of 2 layers (the nodes section lists every kind of node)\n"),
            "{out}"
        );
    }

    #[test]
    fn the_same_nodes_in_another_order_are_no_difference() {
        // Layer 3 lists its experts in the other order and has one node more: that node is
        // the only difference.
        let mut nodes = Vec::new();
        for layer in 0..3 {
            nodes.push(node(&format!("L.{layer}.e.0"), "p1"));
            nodes.push(node(&format!("L.{layer}.e.1"), "p2"));
        }
        nodes.push(node("L.3.e.1", "p2"));
        nodes.push(node("L.3.e.0", "p1"));
        nodes.push(node("L.3.x", "p1"));
        assert_eq!(
            text(&nodes),
            "\nlayers (4 numbered L.N, in 2 structures; the nodes of each layer):\n\
             \x20 L.[0-2]  x3  2 nodes: e.0, e.1\n\
             \x20   except L.3  3 nodes: with x\n"
        );
    }

    #[test]
    fn a_different_node_is_not_reported_as_a_different_provider() {
        // Layer 1 has `L.1-x` besides `L.1.x`: one node more on the same provider.
        let nodes = [
            node("L.0.x", "p"),
            node("L.1.x", "p"),
            node("L.1-x", "p"),
            node("L.2.x", "p"),
        ];
        assert_eq!(
            text(&nodes),
            "\nlayers (3 numbered L.N, in 2 structures; the nodes of each layer):\n\
             \x20 L.[0,2]  x2  1 node: x\n\
             \x20   except L.1  2 nodes: with -x\n"
        );
    }

    #[test]
    fn layer_numbers_with_a_gap_are_not_summarised_as_the_others() {
        // Layer 31 is missing: "the other N of 0-32" would not say which are there.
        let nodes = hybrid((0..33).filter(|&layer| layer != 31));
        let out = text(&nodes);
        assert!(
            out.contains("  node.layer.[25 values in 0-32]  x25  "),
            "{out}"
        );
    }

    #[test]
    fn one_layer_or_none_prints_nothing() {
        assert_eq!(text(&[node("node.layer.0.attention", "p")]), "");
        assert_eq!(text(&[node("node.embedding", "p")]), "");
    }
}
