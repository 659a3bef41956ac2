//! Property: random edits of a valid request's JSON never make loading, validation or the
//! build panic; every outcome is a value or a typed error, and every plan built from an
//! edited request verifies against it.

use crate::common::{build_fixture, request_fixture};

use std::path::Path;

use jointplan::builder::BuildOptions;
use jointplan::plan::ExecutionPlan;
use jointplan::request::validate::validate_request;
use jointplan::request::PlanRequest;
use jointplan::verify::verify_text;
use proptest::prelude::*;
use serde_json::Value;

#[derive(Clone, Debug)]
enum Junk {
    Null,
    Bool(bool),
    Signed(i64),
    Unsigned(u64),
    Text(String),
    EmptyArray,
    EmptyObject,
}

impl Junk {
    fn value(&self) -> Value {
        match self {
            Junk::Null => Value::Null,
            Junk::Bool(b) => Value::Bool(*b),
            Junk::Signed(i) => Value::from(*i),
            Junk::Unsigned(u) => Value::from(*u),
            Junk::Text(t) => Value::from(t.clone()),
            Junk::EmptyArray => Value::Array(vec![]),
            Junk::EmptyObject => Value::Object(Default::default()),
        }
    }
}

#[derive(Clone, Debug)]
enum Edit {
    /// Replace the node at a position with junk.
    Replace(usize, Junk),
    /// Remove the node at a position from its parent.
    Remove(usize),
    /// Duplicate an array element in place.
    Duplicate(usize),
    /// Add a delta to a number (keeps the document loadable more often).
    Nudge(usize, i64),
    /// Copy one string over another (ids stay well-formed, references break).
    CopyString(usize, usize),
    /// Swap two elements of the same array.
    Swap(usize, usize),
}

fn junk() -> impl Strategy<Value = Junk> {
    prop_oneof![
        Just(Junk::Null),
        any::<bool>().prop_map(Junk::Bool),
        prop_oneof![Just(0i64), Just(-1), Just(i64::MIN), any::<i64>()].prop_map(Junk::Signed),
        prop_oneof![
            Just(0u64),
            Just(1),
            Just(u64::MAX),
            Just(1 << 32),
            any::<u64>()
        ]
        .prop_map(Junk::Unsigned),
        prop_oneof![
            Just(String::new()),
            Just("linear_arena".to_owned()),
            Just("value.input".to_owned()),
            Just("bad id".to_owned()),
            "[a-z./_-]{0,12}",
        ]
        .prop_map(Junk::Text),
        Just(Junk::EmptyArray),
        Just(Junk::EmptyObject),
    ]
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), junk()).prop_map(|(at, j)| Edit::Replace(at, j)),
        any::<usize>().prop_map(Edit::Remove),
        any::<usize>().prop_map(Edit::Duplicate),
        (any::<usize>(), -3i64..=3).prop_map(|(at, d)| Edit::Nudge(at, d)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::CopyString(a, b)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::Swap(a, b)),
    ]
}

/// JSON pointers of every node below the root, in document order.
fn pointers(value: &Value, prefix: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let p = format!("{prefix}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.push(p.clone());
                pointers(v, &p, out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                let p = format!("{prefix}/{i}");
                out.push(p.clone());
                pointers(v, &p, out);
            }
        }
        _ => {}
    }
}

fn split(pointer: &str) -> (&str, String) {
    let at = pointer.rfind('/').unwrap_or(0);
    let last = pointer[at + 1..].replace("~1", "/").replace("~0", "~");
    (&pointer[..at], last)
}

fn apply(document: &mut Value, edit: &Edit) {
    let mut all = Vec::new();
    pointers(document, "", &mut all);
    if all.is_empty() {
        return;
    }
    let pick = |at: usize| all[at % all.len()].clone();
    match edit {
        Edit::Replace(at, j) => {
            if let Some(slot) = document.pointer_mut(&pick(*at)) {
                *slot = j.value();
            }
        }
        Edit::Remove(at) => {
            let pointer = pick(*at);
            let (parent, last) = split(&pointer);
            match document.pointer_mut(parent) {
                Some(Value::Object(map)) => {
                    map.remove(&last);
                }
                Some(Value::Array(items)) => {
                    if let Ok(i) = last.parse::<usize>() {
                        if i < items.len() {
                            items.remove(i);
                        }
                    }
                }
                _ => {}
            }
        }
        Edit::Duplicate(at) => {
            let pointer = pick(*at);
            let (parent, last) = split(&pointer);
            if let Some(Value::Array(items)) = document.pointer_mut(parent) {
                if let Ok(i) = last.parse::<usize>() {
                    if let Some(item) = items.get(i).cloned() {
                        items.insert(i, item);
                    }
                }
            }
        }
        Edit::Nudge(at, delta) => {
            if let Some(slot) = document.pointer_mut(&pick(*at)) {
                if let Some(u) = slot.as_u64() {
                    *slot = Value::from(u.saturating_add_signed(*delta));
                }
            }
        }
        Edit::CopyString(from, to) => {
            let strings: Vec<&String> = all
                .iter()
                .filter(|p| document.pointer(p).is_some_and(Value::is_string))
                .collect();
            if strings.is_empty() {
                return;
            }
            let source = strings[from % strings.len()].clone();
            let target = strings[to % strings.len()].clone();
            if let Some(text) = document.pointer(&source).cloned() {
                if let Some(slot) = document.pointer_mut(&target) {
                    *slot = text;
                }
            }
        }
        Edit::Swap(a, b) => {
            let pointer = pick(*a);
            let (parent, last) = split(&pointer);
            if let Some(Value::Array(items)) = document.pointer_mut(parent) {
                if let Ok(i) = last.parse::<usize>() {
                    let j = b % items.len().max(1);
                    if i < items.len() && j < items.len() {
                        items.swap(i, j);
                    }
                }
            }
        }
    }
}

/// The request the edits start from: the load-time fixture (every kind of field) or the
/// fixture that builds a plan (so that edited requests reach the build).
fn base_request(buildable: bool) -> PlanRequest {
    if buildable {
        build_fixture::request()
    } else {
        request_fixture::valid_request()
    }
}

/// A request that passed validation either builds a plan that verifies against it, or fails
/// with a typed error that renders.
fn build_and_verify(request: &PlanRequest) -> Result<(), TestCaseError> {
    let options = BuildOptions::default();
    match ExecutionPlan::build(request, &options) {
        Ok(plan) => {
            let stored = plan.to_json_text().unwrap();
            if let Err(error) = verify_text(request, &stored, &options) {
                return Err(TestCaseError::fail(format!(
                    "a plan built from the request does not verify: {error}"
                )));
            }
        }
        Err(error) => prop_assert!(!error.to_string().is_empty()),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn garbage_edits_never_panic(
        buildable in any::<bool>(),
        edits in proptest::collection::vec(edit(), 1..6),
    ) {
        let mut document = base_request(buildable).to_json_tree().unwrap();
        for e in &edits {
            apply(&mut document, e);
        }
        let text = serde_json::to_string(&document).unwrap();
        if let Ok(request) = PlanRequest::parse(Path::new("garbage.json"), &text) {
            match validate_request(&request) {
                Err(error) => {
                    // Every error names a path and renders.
                    prop_assert!(!error.path().is_empty());
                    prop_assert!(!error.to_string().is_empty());
                }
                Ok(()) => build_and_verify(&request)?,
            }
        }
    }

    #[test]
    fn truncated_text_never_panics(cut in any::<usize>()) {
        let text = request_fixture::valid_request().to_json_text(false).unwrap();
        let cut = cut % text.len();
        let cut = (0..=cut).rev().find(|&c| text.is_char_boundary(c)).unwrap_or(0);
        prop_assert!(PlanRequest::parse(Path::new("cut.json"), &text[..cut]).is_err());
    }
}

/// The edits reach validation often enough to matter: a fixed sweep of single number
/// nudges must produce both loadable-but-invalid and still-valid requests.
#[test]
fn single_nudges_reach_validation() {
    let (mut rejected, mut passed, mut built) = (0, 0, 0);
    for buildable in [false, true] {
        let base = base_request(buildable).to_json_tree().unwrap();
        let mut count = Vec::new();
        pointers(&base, "", &mut count);
        for at in 0..count.len() {
            let mut document = base.clone();
            apply(&mut document, &Edit::Nudge(at, 1));
            if let Ok(request) = PlanRequest::from_json_tree(document) {
                match validate_request(&request) {
                    Ok(()) => {
                        passed += 1;
                        build_and_verify(&request).unwrap();
                        built += usize::from(
                            ExecutionPlan::build(&request, &BuildOptions::default()).is_ok(),
                        );
                    }
                    Err(_) => rejected += 1,
                }
            }
        }
    }
    assert!(
        rejected > 10,
        "only {rejected} nudges were rejected by validation"
    );
    assert!(passed > 0, "no nudge kept the request valid");
    assert!(built > 0, "no nudged request built a plan");
}
