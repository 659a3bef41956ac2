//! The published JSON Schemas in `docs/schema/` are generated from the request and plan
//! types; this test regenerates them and fails when the files drift from the types.
//! Run with `JOINTPLAN_BLESS=1` to rewrite them.

use std::path::{Path, PathBuf};

use jointplan::plan::ExecutionPlan;
use jointplan::request::PlanRequest;

fn schema_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/schema")
        .join(name)
}

fn check(name: &str, schema: schemars::Schema) {
    let mut text = serde_json::to_string_pretty(&schema).unwrap();
    text.push('\n');
    let path = schema_file(name);
    if std::env::var_os("JOINTPLAN_BLESS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let stored = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        stored == text,
        "{} is out of date with the types (or missing); regenerate it with \
         `JOINTPLAN_BLESS=1 cargo test --test planner request_schema` and commit the result",
        path.display()
    );
}

#[test]
fn plan_request_schema_is_current() {
    check(
        "plan-request.schema.json",
        schemars::schema_for!(PlanRequest),
    );
}

#[test]
fn execution_plan_schema_is_current() {
    check(
        "execution-plan.schema.json",
        schemars::schema_for!(ExecutionPlan),
    );
}

#[test]
fn the_request_schema_describes_the_top_level_fields() {
    let schema = serde_json::to_value(schemars::schema_for!(PlanRequest)).unwrap();
    let properties = schema["properties"].as_object().unwrap();
    for field in [
        "family",
        "catalog",
        "policy",
        "node_resolutions",
        "completion_retention",
        "execution_weights",
    ] {
        assert!(properties.contains_key(field), "schema lacks {field}");
    }
    let required: Vec<_> = schema["required"].as_array().unwrap().iter().collect();
    assert!(required.iter().any(|r| *r == "family"));
    assert!(!required.iter().any(|r| *r == "execution_weights"));
}
