//! The one-pass strict reading of stored plans ([`crate::json_input::parse_strictly`]),
//! held against the two-pass reading (the strict scan, then the typed parse) on the shipped
//! plans: it accepts only what the two passes accept, with the same plan; and the same
//! reading with the nodes read on every core ([`crate::json_input::parse_strictly_split`])
//! held against it.

use crate::json_input::{check_document_within, parse_split_from, parse_strictly, InputLimits};
use crate::plan::ExecutionPlan;

fn plan_text(model: &str) -> String {
    let request = crate::request::PlanRequest::read(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("models")
            .join(model)
            .join("request.json"),
    )
    .unwrap();
    let plan = ExecutionPlan::build(&request, &crate::builder::BuildOptions::default()).unwrap();
    String::from_utf8(plan.write_json(Vec::new()).unwrap()).unwrap()
}

/// What the two-pass reading accepts: the strict scan, then the typed parse.
fn two_pass(text: &str, limits: &InputLimits) -> Option<ExecutionPlan> {
    check_document_within(text, limits).ok()?;
    serde_json::from_str(text).ok()
}

/// Differential against the strict scan (the oracle: `json_input`'s own pass) on the
/// shipped plans under every limit lowered step by step: the one pass accepts only what
/// the two passes accept, with the same plan, and (but for the depth of a variant
/// written as a bare string, which it holds one level deeper) everything they accept.
#[test]
fn accepts_exactly_what_the_strict_scan_and_the_parse_accept() {
    for model in ["tiny", "decoder-2layer", "hybrid-block"] {
        let text = plan_text(model);
        let default = InputLimits::DEFAULT;
        let plan = parse_strictly::<ExecutionPlan>(&text, &default);
        assert!(plan.is_some(), "{model}");
        assert_eq!(plan, two_pass(&text, &default), "{model}");
        let mut refused = 0;
        for value in [
            0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 16, 24, 32, 48, 64, 100, 200,
        ] {
            for (limit, exact) in [
                ("depth", false),
                ("string", true),
                ("array", true),
                ("object", true),
            ] {
                let mut limits = default;
                match limit {
                    "depth" => limits.depth = value,
                    "string" => limits.string_bytes = value,
                    "array" => limits.array_elements = value,
                    _ => limits.object_members = value,
                }
                let one = parse_strictly::<ExecutionPlan>(&text, &limits);
                let two = two_pass(&text, &limits);
                // The nodes read on every core: exactly what the one pass reads.
                let split = parse_split_from::<ExecutionPlan>(&text, &limits, 0);
                assert_eq!(split, one, "{model}: {limit} {value}, split");
                refused += usize::from(two.is_none());
                if exact {
                    assert_eq!(one, two, "{model}: {limit} {value}");
                } else {
                    assert!(one.is_none() || one == two, "{model}: {limit} {value}");
                }
            }
        }
        assert!(
            refused > 20,
            "{model}: the limits refused only {refused} times"
        );
    }
}

#[test]
fn refuses_a_duplicate_key_the_typed_parse_alone_would_take() {
    let text = plan_text("decoder-2layer");
    // The first non-empty attribute map: its first member written twice.
    let open = "\"attributes\": {\n";
    let at = text.find(open).unwrap() + open.len();
    let member_end = text[at..].find("\n          },\n").unwrap() + at + "\n          }".len();
    let member = text[at..member_end].trim_start();
    assert!(member.starts_with('"'), "{member}");
    let doubled = format!("{}{member},\n{}", &text[..at], &text[at..]);
    // (The attributes are a node's: inside the array the split reading reads on the pool.)
    assert_eq!(
        parse_split_from::<ExecutionPlan>(&doubled, &InputLimits::DEFAULT, 0),
        None
    );
    // serde keeps the last copy of a map key: only the strict rules see the duplicate.
    assert!(serde_json::from_str::<ExecutionPlan>(&doubled).is_ok());
    assert!(check_document_within(&doubled, &InputLimits::DEFAULT).is_err());
    assert_eq!(
        parse_strictly::<ExecutionPlan>(&doubled, &InputLimits::DEFAULT),
        None
    );
    // A duplicate struct field, trailing bytes, a second document: refused too.
    let field = text.replacen(
        "{\n  \"payload\": {\n",
        "{\n  \"payload\": {\n    \"schema\": 1,\n",
        1,
    );
    assert_ne!(field, text);
    let nodes_twice = text.replacen(
        "{\n  \"payload\": {\n",
        "{\n  \"payload\": {\n    \"nodes\": [],\n",
        1,
    );
    for refused in [&field, &nodes_twice] {
        assert_eq!(
            parse_strictly::<ExecutionPlan>(refused, &InputLimits::DEFAULT),
            None
        );
        assert_eq!(
            parse_split_from::<ExecutionPlan>(refused, &InputLimits::DEFAULT, 0),
            None
        );
    }
    for tail in ["x", "{}", "1"] {
        let extended = format!("{text}{tail}");
        assert_eq!(
            parse_strictly::<ExecutionPlan>(&extended, &InputLimits::DEFAULT),
            None
        );
        assert_eq!(
            parse_split_from::<ExecutionPlan>(&extended, &InputLimits::DEFAULT, 0),
            None
        );
    }
}
