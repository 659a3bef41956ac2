//! The text of a placement across devices (`plan MODEL --devices SET.json`): the placement
//! id, the decisions (stages, tensor parallelism, expert split, host offload), how the optimum
//! was certified, the checker's verdict, and each device's memory by item (docs/placement.md).

use std::fmt::Write;
use std::path::Path;

use crate::placement::Placed;
use crate::render::summary::{human_bytes, human_signed_bytes};

/// The text of a placement; `output` is the file it was written to, if any.
pub fn placement_text(placed: &Placed, output: Option<&Path>) -> String {
    let p = &placed.plan.payload;
    let mut out = String::new();
    let _ = writeln!(out, "placement {}", placed.plan.placement_id);
    let _ = writeln!(
        out,
        "  model {} ({}), policy {}: {} sequences x {} tokens of context",
        p.model, p.weight_format, p.policy, p.sequences, p.context_tokens
    );
    let _ = writeln!(
        out,
        "  device set {}: {} device(s) used, tensor parallel {}, pipeline {}, routed experts split by {}",
        p.device_set,
        p.devices_used,
        p.tensor_parallel,
        p.pipeline_parallel,
        p.expert_split.name()
    );
    let certificate = &placed.certificate;
    let proof = if certificate.method == "exhaustive" {
        format!(
            "the exhaustive enumeration of {} placements agrees",
            certificate.placements
        )
    } else {
        format!(
            "optimal by the dynamic program's proof (docs/solver.md, \"Placement across devices\"); {} placements exceed the enumeration budget of {}",
            certificate.placements, certificate.budget
        )
    };
    let _ = writeln!(out, "  objective {}: {proof}", p.objective.name());
    let _ = writeln!(
        out,
        "  checker: {}",
        if placed.violations.is_empty() {
            "no violations (9 rules, docs/placement.md)".to_owned()
        } else {
            format!("{} violation(s)", placed.violations.len())
        }
    );
    let _ = match output {
        Some(file) => writeln!(out, "  written to {}", file.display()),
        None => writeln!(out, "  not written (give -o PLACEMENT.json to write it)"),
    };
    for note in &placed.notes {
        let _ = writeln!(out, "  note: {note}");
    }
    let _ = writeln!(out, "\nstages:");
    for (s, stage) in p.stages.iter().enumerate() {
        let _ = writeln!(
            out,
            "  stage {s}  layers {}-{} ({})  {}  {} expert group(s) per device on the host",
            stage.first_layer,
            stage.end_layer - 1,
            stage.end_layer - stage.first_layer,
            stage.devices.join(", "),
            stage.offloaded_units
        );
    }
    let _ = writeln!(
        out,
        "\ndevices (rules: docs/placement.md, \"Per-device memory\"):"
    );
    for d in &p.devices {
        let _ = writeln!(
            out,
            "  {}  {}  stage {} rank {}  {} shards\n    weights {}\n    KV cache {}\n    activations {}\n    workspaces {}\n    communication {}\n    total {} of usable {}, room left {}",
            d.id,
            d.name,
            d.stage,
            d.rank,
            d.shards.len(),
            human_bytes(d.items.weights),
            human_bytes(d.items.kv_cache),
            human_bytes(d.items.activations),
            human_bytes(d.items.workspaces),
            human_bytes(d.items.communication),
            human_bytes(d.total_bytes),
            human_bytes(d.usable_bytes),
            human_signed_bytes(d.headroom_bytes)
        );
    }
    let _ = writeln!(
        out,
        "\nhost: {} offloaded ({} shards){}",
        human_bytes(p.host.offloaded_bytes),
        p.host.shards.len(),
        p.host
            .memory_bytes
            .map_or(", offload off".to_owned(), |m| format!(
                " of {}",
                human_bytes(m)
            ))
    );
    let _ = writeln!(
        out,
        "KV tokens that fit: {} (the fullest device's room over its KV bytes per token)",
        p.kv_tokens_that_fit
            .map_or("unbounded".to_owned(), |t| t.to_string())
    );
    if !placed.rejected.is_empty() {
        let _ = writeln!(out, "\noptions the model cannot take:");
        for r in &placed.rejected {
            let _ = writeln!(
                out,
                "  tensor parallel {} ({}-split experts): {}",
                r.degree,
                r.split.name(),
                r.reason
            );
        }
    }
    out
}
