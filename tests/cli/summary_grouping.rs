//! The text summary of `jointplan plan`: totals first, nodes and resources grouped by id
//! pattern (ids that differ only in their numbers), every line only with `--full`, and
//! `--json` complete either way.

use serde_json::Value;

use crate::process::{jointplan, ok, text};

fn llama(layers: &str, extra: &[&str]) -> String {
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/llama-3.2-1b");
    let folder = folder.display().to_string();
    let mut args = vec!["plan", folder.as_str(), "--layers", layers];
    args.extend_from_slice(extra);
    let result = jointplan(&args);
    ok(&result);
    text(&result.stdout)
}

#[test]
fn repeated_layers_print_as_one_pattern_with_a_count() {
    let grouped = llama("4", &[]);
    for expected in [
        "node.layer.[0-3].q_proj  x4  provider.",
        "resource/state/layer.[0-3].kv  x4  ",
        "resource/scratch/sha256/<digest>  x",
        "--full lists every node",
    ] {
        assert!(grouped.contains(expected), "lacks {expected:?}:\n{grouped}");
    }
    assert!(!grouped.contains("node.layer.2.q_proj"), "{grouped}");
    // Totals come before the node list.
    let memory = grouped.find("\nmemory:").expect("memory section");
    let nodes = grouped.find("\nnodes (").expect("nodes section");
    assert!(memory < nodes, "{grouped}");
    // The grouped text stays short: it does not grow with the layer count.
    let more = llama("12", &[]);
    assert_eq!(
        grouped.lines().count(),
        more.lines().count(),
        "{grouped}\n---\n{more}"
    );
    assert!(more.contains("node.layer.[0-11].q_proj  x12"), "{more}");
}

#[test]
fn full_lists_every_node_and_json_stays_complete() {
    let full = llama("4", &["--full"]);
    for layer in 0..4 {
        let line = format!("  node.layer.{layer}.q_proj  provider.");
        assert!(full.contains(&line), "lacks {line:?}:\n{full}");
    }
    assert!(!full.contains("[0-3]"), "{full}");
    let json: Value = serde_json::from_str(&llama("4", &["--json"])).unwrap();
    let nodes = json["nodes"].as_array().unwrap();
    assert!(nodes.iter().any(|n| n["node_id"] == "node.layer.2.q_proj"));
    let result = jointplan(&["plan", "x", "--json", "--full"]);
    assert_eq!(
        result.status.code(),
        Some(2),
        "--full conflicts with --json"
    );
}

#[test]
fn moe_layers_print_as_one_layer_pattern_with_the_dense_layers_as_its_exception() {
    // DeepSeek-V3's first three layers are dense, the others route to experts (four of
    // seven here: the most common structure prints first).
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/deepseek-v3");
    let folder = folder.display().to_string();
    let result = jointplan(&["plan", &folder, "--layers", "7", "--experts", "8"]);
    ok(&result);
    let summary = text(&result.stdout);
    let layers: Vec<&str> = summary
        .lines()
        .skip_while(|line| !line.starts_with("layers ("))
        .take_while(|line| !line.is_empty())
        .collect();
    assert_eq!(layers.len(), 3, "{summary}");
    assert_eq!(
        layers[0],
        "layers (7 numbered node.layer.N, in 2 structures; the nodes of each layer):"
    );
    assert!(
        layers[1].starts_with("  node.layer.[3-6]  x4  20 nodes: input_norm, ")
            && layers[1].ends_with(", router, shared_expert, shared_residual, expert.[0-7] x8"),
        "{}",
        layers[1]
    );
    assert_eq!(
        layers[2],
        "    except node.layer.[0-2]  x3  11 nodes: without router, shared_expert, \
         shared_residual, expert.[0-7] x8; with feed_forward, output"
    );
    // The layers come after the totals and before the node list.
    let at = |section: &str| summary.find(section).expect(section);
    assert!(at("\nmemory:") < at("\nlayers (") && at("\nlayers (") < at("\nnodes ("));
}
