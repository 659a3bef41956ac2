//! The independent checker against the builder: it accepts every plan the builder makes
//! (shipped, synthesized and random requests), and it rejects plans that a builder with a
//! deliberate bug would make (`checker_mutants`).

use std::path::Path;

use jointplan::builder::BuildOptions;
use jointplan::check::{check_plan, check_sealed_plan};
use jointplan::plan::ExecutionPlan;
use jointplan::request::PlanRequest;
use jointplan::synth::ModelSource;

/// The plans the checker is tried on: every shipped request, and synthesized models of every
/// architecture family in `models/` (few layers and experts keep them small).
pub fn sample_plans() -> Vec<(String, ExecutionPlan)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut plans = Vec::new();
    for name in ["tiny", "decoder-2layer", "hybrid-block"] {
        let request =
            PlanRequest::read(&root.join("models").join(name).join("request.json")).unwrap();
        plans.push((
            name.to_owned(),
            ExecutionPlan::build(&request, &BuildOptions::default()).unwrap(),
        ));
    }
    // A request that retains an intermediate value until completion.
    let mut retaining =
        PlanRequest::read(&root.join("models/decoder-2layer/request.json")).unwrap();
    let value = retaining.family.program.nodes().next().unwrap().outputs[0].clone();
    retaining.completion_retention.values.insert(value);
    plans.push((
        "decoder-2layer retaining a value".to_owned(),
        ExecutionPlan::build(&retaining, &BuildOptions::default()).unwrap(),
    ));
    for (model, policy, experts) in [
        ("llama-3.2-1b", "interactive", None),
        ("llama-3.1-8b", "server", None),
        ("mixtral-8x7b", "interactive", Some(4)),
        ("deepseek-v3", "server", Some(4)),
        ("qwen3-next-80b-a3b", "interactive", Some(4)),
    ] {
        let mut source = ModelSource::folder(root.join("models").join(model));
        source.layers = Some(2);
        source.experts = experts;
        source.policy = Some(policy.to_owned());
        let request = source.synthesize().unwrap().request;
        let plan = ExecutionPlan::build(&request, &BuildOptions::default())
            .unwrap_or_else(|e| panic!("{model}: {e}"));
        plans.push((format!("{model} ({policy})"), plan));
    }
    plans
}

#[test]
fn the_checker_accepts_every_plan_the_builder_makes() {
    for (name, plan) in sample_plans() {
        let report = check_plan(&plan);
        assert!(
            report.is_valid(),
            "{name}: {} violations, first: {}",
            report.violations.len(),
            report
                .violations
                .iter()
                .take(5)
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// The checker `plan` runs on the plan it has just sealed takes the payload hash from the
/// seal: on a sealed plan it reports what the full check reports, and a plan hash changed
/// without its plan id is still a rule 2 violation.
#[test]
fn the_sealed_check_agrees_with_the_full_check() {
    for (name, plan) in sample_plans() {
        assert_eq!(check_sealed_plan(&plan), check_plan(&plan), "{name}");
        let mut other_hash = plan.clone();
        other_hash.plan_hash = jointplan::plan::hash::plan_hash(&{
            let mut other = plan.payload.clone();
            other.maximum_scheduled_tokens += 1;
            other
        })
        .unwrap();
        let rules: Vec<(u32, String)> = check_sealed_plan(&other_hash)
            .violations
            .into_iter()
            .map(|v| (v.rule, v.json_path))
            .collect();
        assert_eq!(rules, [(2, "payload.plan_id".to_owned())], "{name}");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Checker vs builder on random decoders (layers, preferences, profile orders, reusable
    /// budgets, device capabilities): every plan the builder makes is valid.
    #[test]
    fn the_checker_accepts_random_plans(spec in crate::request_props::decoder_spec()) {
        let request = spec.request();
        if let Ok(plan) = ExecutionPlan::build(&request, &BuildOptions::default()) {
            let report = check_plan(&plan);
            proptest::prop_assert!(
                report.is_valid(),
                "{}",
                report.violations.iter().take(5).map(ToString::to_string).collect::<Vec<_>>().join("\n")
            );
        }
    }
}

/// The checker's boundary: `src/check/` names only the plan's and the request's data types
/// and the canonical hashing, never builder code, so that a builder bug cannot be repeated
/// in the check of its output.
#[test]
fn the_checker_imports_no_builder_code() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/check");
    let allowed = [
        "crate::plan",
        "crate::request",
        "crate::canonical",
        "super::",
        "std::",
        "serde::",
        // Threads for independent rule families: no plan logic.
        "rayon::",
    ];
    let mut offending = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            let mut rest = code;
            while let Some(at) = rest.find("crate::") {
                let name = &rest[at..];
                if !allowed.iter().any(|a| name.starts_with(a)) {
                    offending.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                }
                rest = &rest[at + 7..];
            }
            if code.trim_start().starts_with("use ")
                && !code.contains("crate::")
                && !code.contains("super::")
                && !allowed.iter().any(|a| code.contains(a))
            {
                offending.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        offending.is_empty(),
        "src/check/ names code outside its boundary:\n{}",
        offending.join("\n")
    );
    // And within the plan module, only data types and the hash.
    for file in [
        "src/plan/payload.rs",
        "src/plan/memory_plan.rs",
        "src/plan/hash.rs",
        "src/plan/mod.rs",
    ] {
        let text =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file)).unwrap();
        for forbidden in [
            "crate::builder",
            "crate::memory",
            "crate::node",
            "crate::candidates",
            "crate::selection",
        ] {
            assert!(
                !text
                    .lines()
                    .any(|l| !l.trim_start().starts_with("//") && l.contains(forbidden)),
                "{file} names {forbidden}"
            );
        }
    }
}

/// Rule 11 holds a workspace's memory row to opaque bytes (element type u8 and the opaque
/// layout fingerprint), which the builder's memory validation requires and a stored plan's
/// check must too: a workspace row made of another element type, or with a value's layout,
/// is rejected at the node's workspace resource (other rules may report it as well).
#[test]
fn a_workspace_row_that_is_not_opaque_bytes_breaks_rule_11() {
    use jointplan::plan::hash::{plan_hash, plan_id};
    use jointplan::plan::AllocationKind;
    use jointplan::request::ElementType;
    type Edit = fn(&mut jointplan::plan::DynamicResourceDescriptor);
    let edits: [(&str, Edit); 2] = [
        ("element type", |d| d.element_type = ElementType::F16),
        ("layout fingerprint", |d| {
            d.storage.logical_layout_fingerprint = jointplan::canonical::sha256_hex(b"\"dense\"")
        }),
    ];
    let mut applied = 0;
    for (plan_name, plan) in sample_plans() {
        for (what, edit) in edits {
            let mut mutant = plan.clone();
            let Some((row, node_id)) = mutant
                .payload
                .memory
                .dynamic_descriptors
                .iter_mut()
                .find_map(|d| {
                    match &d.kind {
                        AllocationKind::Scratch { node_id } => Some(node_id.clone()),
                        _ => None,
                    }
                    .map(|node_id| (d, node_id))
                })
            else {
                continue;
            };
            edit(row);
            let hash = plan_hash(&mutant.payload).unwrap();
            mutant.payload.plan_id = plan_id(&hash);
            mutant.plan_hash = hash;
            let index = mutant
                .payload
                .nodes
                .iter()
                .position(|n| n.id == node_id)
                .unwrap();
            let at = format!("payload.nodes[{index}].scratch_resource");
            let report = check_plan(&mutant);
            assert!(
                report
                    .violations
                    .iter()
                    .any(|v| v.rule == 11 && v.json_path == at),
                "{what} of a scratch row on {plan_name}: no rule 11 at {at}: {:?}",
                report.violations
            );
            applied += 1;
        }
    }
    assert!(applied > 0, "no sample plan has a scratch workspace");
}
