//! A 50,000-node decoder-shaped graph (issue 4 scale): derivation and validation finish and
//! step slots stay few (ordered reuse along the chain, residuals live across layers). Five
//! resources per layer keep the plan under the 65,536-row wire limit.

use crate::common::memory_fixture;

use jointplan::plan::StepSlotKind;
use memory_fixture::*;

#[test]
fn fifty_thousand_nodes_reuse_a_few_step_slots() {
    let mut f = Fixture::new();
    f.device_capacity_bytes = 1 << 40;
    f.policy.memory_capacity_bytes = 1 << 40;
    f.policy.reusable_execution = Some(reusable_policy(2, &[(1, 1, 1), (2, 64, 1)]));
    let layers = 12_500;
    // Per layer: norm -> attention -> residual (reads the layer input again) -> mlp.
    let mut residual = "resource/act/input".to_owned();
    f.node("node.embedding")
        .writes_tokens("value.input", &residual, 64, 4)
        .done();
    let mut previous = "node.embedding".to_owned();
    for layer in 0..layers {
        let norm = format!("node.{layer}.norm");
        let attention = format!("node.{layer}.attention");
        let add = format!("node.{layer}.residual");
        let mlp = format!("node.{layer}.mlp");
        let normed = format!("resource/act/{layer}/norm");
        let attended = format!("resource/act/{layer}/attention");
        let summed = format!("resource/act/{layer}/sum");
        let out = format!("resource/act/{layer}/out");
        f.node(&norm)
            .after(&[&previous])
            .reads_tokens(&format!("v.{residual}"), &residual, 64, 4)
            .writes_tokens(&format!("v.{normed}"), &normed, 64, 4)
            .done();
        f.node(&attention)
            .after(&[&norm])
            .reads_tokens(&format!("v.{normed}"), &normed, 64, 4)
            .writes_tokens(&format!("v.{attended}"), &attended, 64, 4)
            .done();
        f.node(&add)
            .after(&[&attention])
            .reads_tokens(&format!("v.{residual}"), &residual, 64, 4)
            .reads_tokens(&format!("v.{attended}"), &attended, 64, 4)
            .writes_tokens(&format!("v.{summed}"), &summed, 64, 4)
            .done();
        f.node(&mlp)
            .after(&[&add])
            .reads_tokens(&format!("v.{summed}"), &summed, 64, 4)
            .writes_tokens(&format!("v.{out}"), &out, 64, 4)
            .fixed_scratch(512)
            .done();
        previous = mlp;
        residual = out;
    }
    let plan = f.derive().unwrap();
    assert_eq!(f.nodes.len(), 1 + 4 * layers);
    let activations = plan
        .dynamic_pools
        .iter()
        .find(|p| p.compatibility.usage == BufferUsage::Activations)
        .unwrap();
    assert!(
        activations.step_resource_slots.len() <= 4,
        "{} slots",
        activations.step_resource_slots.len()
    );
    assert!(activations
        .step_resource_slots
        .iter()
        .all(|s| s.kind == StepSlotKind::OrderedSingleFenceStepWave));
    let scratch = plan
        .dynamic_pools
        .iter()
        .find(|p| p.compatibility.usage == BufferUsage::Scratch)
        .unwrap();
    assert_eq!(scratch.minimum_invocation_peak_bytes, 512);
}
