//! Input rules that hold for every request (docs/format.md §0, docs/security.md): attribute
//! constraints are well formed (a `rational_range` bound with a zero denominator is refused,
//! as a rational value with one is), every identifier, free block ids included, is 1 to 160
//! bytes with no control or invisible formatting characters, and program size is bounded by
//! the `nodes` input limit.

use std::path::Path;

use jointplan::request::validate::RequestError;
use jointplan::request::PlanRequest;
use serde_json::Value;

fn tiny_json() -> Value {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("models/tiny/request.json"),
    )
    .unwrap();
    serde_json::from_str(&text).unwrap()
}

fn validate(document: &Value) -> Result<(), RequestError> {
    let request = PlanRequest::from_json_tree(document.clone()).unwrap();
    request.validate().map(drop)
}

/// The first operation of the catalog that has a rational attribute, and that attribute.
fn rational_attribute(document: &Value) -> (String, String) {
    let operations = document["catalog"]["operations"].as_object().unwrap();
    for (id, operation) in operations {
        for (key, spec) in operation["attributes"].as_object().unwrap() {
            if spec["constraint"].get("rational_range").is_some() {
                return (id.clone(), key.clone());
            }
        }
    }
    panic!("tiny has a rational attribute")
}

#[test]
fn a_rational_range_with_a_zero_denominator_is_refused() {
    let mut document = tiny_json();
    validate(&document).unwrap();
    let (operation, key) = rational_attribute(&document);
    document["catalog"]["operations"][&operation]["attributes"][&key]["constraint"]
        ["rational_range"]["maximum"]["denominator"] = Value::from(0);
    let error = validate(&document).unwrap_err();
    assert!(
        matches!(error, RequestError::InvalidOperation { .. }),
        "{error}"
    );
    assert!(
        error
            .path()
            .ends_with(&format!("attributes.{key}.constraint")),
        "{}",
        error.path()
    );
    assert!(error.detail().contains("zero denominator"), "{error}");
}

#[test]
fn an_inverted_rational_range_is_refused() {
    let mut document = tiny_json();
    let (operation, key) = rational_attribute(&document);
    let range = &mut document["catalog"]["operations"][&operation]["attributes"][&key]
        ["constraint"]["rational_range"];
    let (minimum, maximum) = (range["minimum"].clone(), range["maximum"].clone());
    range["minimum"] = maximum;
    range["maximum"] = minimum;
    let error = validate(&document).unwrap_err();
    assert!(error.detail().contains("exceeds maximum"), "{error}");
}

#[test]
fn block_ids_follow_the_identifier_rule() {
    for (bad, needle) in [
        ("block.\u{202E}evil", "U+202E"),
        ("block.\tx", "U+0009"),
        (&*"b".repeat(100_000), "100000 bytes"),
        ("", "is empty"),
    ] {
        let mut document = tiny_json();
        document["family"]["program"]["blocks"][0]["id"] = Value::from(bad);
        let error = validate(&document).unwrap_err();
        assert!(
            matches!(error, RequestError::InvalidBlockId { .. }),
            "{error}"
        );
        assert_eq!(error.path(), "family.program.blocks[0].id");
        assert!(error.detail().contains(needle), "{error}");
    }
}

#[test]
fn a_portable_id_with_a_bidirectional_override_is_refused_while_loading() {
    let mut document = tiny_json();
    let id = document["family"]["program"]["blocks"][0]["nodes"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    document["family"]["program"]["blocks"][0]["nodes"][0]["id"] =
        Value::from(format!("{id}\u{202E}"));
    let text = serde_json::to_string(&document).unwrap();
    let error = jointplan::request::PlanRequest::parse(Path::new("r.json"), &text).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("family.program.blocks[0].nodes[0].id"),
        "{message}"
    );
    assert!(message.contains("U+202E"), "{message}");
}
