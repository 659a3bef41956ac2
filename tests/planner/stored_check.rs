//! `jointplan::check` on a stored plan's text: the text must be the canonical form of the
//! plan it parses into (JSON equality: whitespace and member order are free, a field left
//! out or written where the plan omits it is not), and the checker's report comes back
//! for a canonical text whatever its violations. The reader confirms the form from the
//! hash of the text's payload and the checker's own hash of the typed payload; these tests
//! pin each way the two can agree or differ.

use crate::common;

use jointplan::builder::BuildOptions;
use jointplan::plan::ExecutionPlan;
use jointplan::verify::VerifyError;
use serde_json::Value;

fn built() -> (ExecutionPlan, Value) {
    let plan = ExecutionPlan::build(&common::models::decoder_2layer(), &BuildOptions::default())
        .unwrap_or_else(|e| panic!("decoder-2layer must build: {e}"));
    let tree = plan.to_json_tree().unwrap();
    (plan, tree)
}

fn rules(text: &str) -> Vec<u32> {
    let report = jointplan::check(text).unwrap_or_else(|e| panic!("must read: {e}"));
    report.violations.iter().map(|v| v.rule).collect()
}

fn non_canonical_at(text: &str) -> String {
    match jointplan::check(text) {
        Err(jointplan::Error::Verify(VerifyError::NonCanonical(difference))) => difference.path,
        other => panic!("expected a non-canonical plan, got {other:?}"),
    }
}

#[test]
fn a_canonical_text_is_checked_whatever_its_layout() {
    let (plan, tree) = built();
    assert_eq!(
        rules(&serde_json::to_string_pretty(&plan).unwrap()),
        Vec::<u32>::new()
    );
    assert_eq!(rules(&tree.to_string()), Vec::<u32>::new());
    // The top-level members in the other order, the payload compact: the same document.
    let reordered = format!(
        "{{\"plan_hash\": {}, \"payload\": {}}}",
        tree["plan_hash"], tree["payload"]
    );
    assert_eq!(rules(&reordered), Vec::<u32>::new());
}

#[test]
fn a_canonical_text_with_violations_gets_its_report() {
    let (_, tree) = built();
    let mut bumped = tree.clone();
    let memory = &mut bumped["payload"]["memory"];
    memory["static_bytes"] = (memory["static_bytes"].as_u64().unwrap() + 1).into();
    let found = rules(&bumped.to_string());
    assert!(found.contains(&2) && found.contains(&17), "{found:?}");
    // The plan id is not hash material: a wrong one is rule 2 at payload.plan_id alone.
    let mut renamed = tree.clone();
    renamed["payload"]["plan_id"] = Value::from("plan/sha256/elsewhere");
    assert_eq!(paths(&renamed.to_string()), ["payload.plan_id"]);
    // A wrong plan hash, payload untouched: rule 2 at plan_hash, and the plan id no
    // longer follows it.
    let mut rehashed = tree;
    rehashed["plan_hash"] = Value::from("0".repeat(64));
    assert_eq!(
        paths(&rehashed.to_string()),
        ["payload.plan_id", "plan_hash"]
    );
}

/// The JSON paths of the rule-2 violations of a text that must read.
fn paths(text: &str) -> Vec<String> {
    let report = jointplan::check(text).unwrap_or_else(|e| panic!("must read: {e}"));
    report
        .violations
        .iter()
        .filter(|v| v.rule == 2)
        .map(|v| v.json_path.clone())
        .collect()
}

#[test]
fn a_text_that_is_not_the_plans_canonical_form_is_refused() {
    let (_, tree) = built();
    // A field the plan writes, left out: it parses as absent and the typed plan writes it
    // back as null, so the text's payload hashes otherwise than the typed one.
    let mut missing = tree.clone();
    missing["payload"]["nodes"][0]
        .as_object_mut()
        .unwrap()
        .remove("scratch_resource");
    assert_eq!(
        non_canonical_at(&missing.to_string()),
        "payload.nodes[0].scratch_resource"
    );
    // A field the plan omits when empty, written out: the typed plan is valid and hashes
    // to its plan_hash (every rule holds), the text's payload does not.
    let mut explicit = tree;
    explicit["payload"]
        .as_object_mut()
        .unwrap()
        .insert("selection_settings".to_owned(), serde_json::json!({}));
    assert_eq!(
        non_canonical_at(&explicit.to_string()),
        "payload.selection_settings"
    );
}
