//! The strict reader's tests: duplicate keys, trailing bytes, limits and paths.

use super::document_check::FEW_KEYS;
use super::*;

#[test]
fn accepts_a_clean_document() {
    assert_eq!(
        check_document(r#" {"a": [1, {"b": 2}], "c": "x"} "#),
        Ok(())
    );
    let value: serde_json::Value = parse_strict(r#"{"a":1}"#).unwrap();
    assert_eq!(value, serde_json::json!({"a": 1}));
}

#[test]
fn a_duplicate_key_is_named_by_its_path() {
    let err = check_document(r#"{"a": [0, {"b": 1, "b": 2}]}"#).unwrap_err();
    assert_eq!(err.json_path, "a[1].b");
    assert!(err.message.contains("duplicate key `b`"), "{err}");
    let top = check_document(r#"{"x": 1, "x": 1}"#).unwrap_err();
    assert_eq!(top.json_path, "x");
}

#[test]
fn a_duplicate_is_found_among_few_keys_and_among_many() {
    // Objects of every size around the switch from a list to a hash set, with the
    // duplicate of every earlier key as the last member: always found and named.
    for size in 1..=(2 * FEW_KEYS + 2) {
        let members: Vec<String> = (0..size).map(|i| format!("\"k{i}\": {i}")).collect();
        check_document(&format!("{{{}}}", members.join(", "))).unwrap();
        for earlier in 0..size {
            let text = format!("{{{}, \"k{earlier}\": 0}}", members.join(", "));
            let err = check_document(&text).unwrap_err();
            assert_eq!(err.json_path, format!("k{earlier}"), "{size} keys");
            assert!(err.message.contains("duplicate key"), "{err}");
        }
    }
}

#[test]
fn escaped_spellings_of_one_key_are_the_same_key() {
    let err = check_document(r#"{"ab": 1, "\u0061b": 2}"#).unwrap_err();
    assert_eq!(err.json_path, "ab");
}

#[test]
fn the_same_key_in_sibling_objects_is_fine() {
    assert_eq!(check_document(r#"[{"a":1},{"a":2}]"#), Ok(()));
}

#[test]
fn trailing_bytes_are_rejected() {
    let err = check_document(r#"{"a": 1} this is not JSON"#).unwrap_err();
    assert_eq!(err.json_path, ".");
    assert!(err.message.contains("trailing characters"), "{err}");
    assert!(parse_strict::<serde_json::Value>("[1] [2]").is_err());
}

#[test]
fn a_syntax_error_inside_names_where() {
    let err = check_document(r#"{"a": {"b": [1, 2,]}}"#).unwrap_err();
    assert_eq!(err.json_path, "a.b[2]");
}

#[test]
fn names_follow_one_rule() {
    assert_eq!(name_problem("layer0.attention"), None);
    assert_eq!(name_problem("Ünïcode ok"), None);
    assert!(name_problem("").is_some());
    assert!(name_problem(&"x".repeat(161)).is_some());
    assert!(name_problem("a\u{202E}b").unwrap().contains("U+202E"));
    assert!(name_problem("a\nb").unwrap().contains("U+000A"));
    assert!(name_problem("a\u{200B}b").is_some());
    for byte in 0u8..0x80 {
        let text = format!("a{}b", char::from(byte));
        let control = byte < 0x20 || byte == 0x7f;
        assert_eq!(name_problem(&text).is_some(), control, "{text:?}");
    }
}

#[test]
fn limits_name_the_limit_and_the_flag() {
    let mut limits = InputLimits::DEFAULT;
    limits.apply("array-elements=3").unwrap();
    assert!(check_document_within("[1,2,3]", &limits).is_ok());
    let err = check_document_within(r#"{"a": {"b": [1,2,3,4]}}"#, &limits).unwrap_err();
    assert_eq!(err.json_path, "a.b[3]");
    assert!(err.message.contains("--limit array-elements=N"), "{err}");
    assert_eq!(err.limit.map(|b| b.limit), Some(Limit::ArrayElements));
    limits.apply("string-bytes=4").unwrap();
    let err = check_document_within(r#"{"k": "12345"}"#, &limits).unwrap_err();
    assert_eq!(err.json_path, "k");
    assert_eq!(err.limit.map(|b| b.limit), Some(Limit::StringBytes));
    let err = check_document_within(r#"{"long-key": 1}"#, &limits).unwrap_err();
    assert_eq!(err.limit.map(|b| b.limit), Some(Limit::StringBytes));
    limits.apply("object-members=1").unwrap();
    let err = check_document_within(r#"{"a": 1, "b": 2}"#, &limits).unwrap_err();
    assert_eq!(err.limit.map(|b| b.limit), Some(Limit::ObjectMembers));
    limits.apply("depth=2").unwrap();
    assert!(check_document_within("[[1]]", &limits).is_ok());
    let err = check_document_within("[[[1]]]", &limits).unwrap_err();
    assert_eq!(err.json_path, "[0][0]");
    assert_eq!(err.limit.map(|b| b.limit), Some(Limit::Depth));
    assert!(limits.apply("nodes=0").is_err());
    assert!(limits.apply("bogus=1").unwrap_err().contains("file-bytes"));
    limits.apply("file-bytes=2K").unwrap();
    assert_eq!(limits.file_bytes, 2048);
}

#[test]
fn a_counted_array_is_held_to_its_domain_limit_before_parsing() {
    let mut limits = InputLimits::DEFAULT;
    limits.apply("nodes=2").unwrap();
    let counted = Some(CountedArray {
        path: &["nodes"],
        limit: Limit::Nodes,
    });
    let ok: Result<serde_json::Value, _> =
        parse_strict_counting(r#"{"nodes": [1, 2], "other": [1, 2, 3]}"#, &limits, counted);
    assert!(ok.is_ok());
    let err = parse_strict_counting::<serde_json::Value>(
        r#"{"x": {"nodes": [1, 2, 3]}, "nodes": [1, 2, 3]}"#,
        &limits,
        counted,
    )
    .unwrap_err();
    assert_eq!(err.json_path, "nodes[2]");
    assert_eq!(err.limit.map(|b| b.limit), Some(Limit::Nodes));
    assert!(err.message.contains("--limit nodes=N"), "{err}");
}

#[test]
fn the_one_pass_reads_the_shipped_requests_as_the_two_passes_do() {
    for model in ["tiny", "decoder-2layer", "hybrid-block"] {
        let file = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("models")
            .join(model)
            .join("request.json");
        let text = std::fs::read_to_string(file).unwrap();
        let one: serde_json::Value = parse_strictly(&text, &InputLimits::DEFAULT).unwrap();
        check_document(&text).unwrap();
        let two: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(one, two, "{model}");
        // A duplicate key the typed parse alone would take: refused by the one pass,
        // named by the two-pass reading.
        let doubled = text.replacen('{', "{\"family\": 1, ", 1);
        assert_eq!(
            parse_strictly::<serde_json::Value>(&doubled, &InputLimits::DEFAULT),
            None
        );
        let err = parse_strict::<serde_json::Value>(&doubled).unwrap_err();
        assert!(err.message.contains("duplicate key `family`"), "{err}");
    }
}

#[test]
fn a_file_is_read_only_up_to_its_limit_and_non_json_fails_at_once() {
    let mut limits = InputLimits::DEFAULT;
    limits.file_bytes = 10;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("big.json");
    std::fs::write(&file, "[1,2,3,4,5,6,7]").unwrap();
    assert!(matches!(
        read_text(&file, &limits),
        Err(ReadError::TooLarge(_))
    ));
    #[cfg(unix)]
    {
        let zero = read_text(Path::new("/dev/zero"), &InputLimits::DEFAULT);
        assert!(matches!(zero, Err(ReadError::NotJson(_))), "{zero:?}");
    }
    std::fs::write(&file, [b' ', 0xff]).unwrap();
    assert!(matches!(
        read_text(&file, &InputLimits::DEFAULT),
        Err(ReadError::NotJson(_))
    ));
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let text = "[".repeat(100_000);
    assert!(check_document(&text).is_err());
}

/// A struct that takes unknown keys (serde itself refuses a known field read twice, not an
/// unknown key), and the same fields as an enum's struct variant.
#[derive(Debug, PartialEq, serde::Deserialize)]
struct OpenStruct {
    a: Option<u8>,
    b: Option<u8>,
    c: Option<u8>,
}

#[derive(Debug, PartialEq, serde::Deserialize)]
enum OpenVariant {
    V {
        a: Option<u8>,
        b: Option<u8>,
        c: Option<u8>,
    },
}

#[test]
fn the_one_pass_refuses_every_repeated_key_of_a_struct_as_the_scan_does() {
    // Every sequence of up to four keys: fields in and out of their declared place,
    // unknown keys, and a field spelled with an escape (the same key).
    let spellings = ["a", "b", "c", "x", "y", "\\u0061"];
    let mut sequences: Vec<Vec<&str>> = vec![Vec::new()];
    for _ in 0..4 {
        let longer: Vec<Vec<&str>> = sequences
            .iter()
            .filter(|keys| keys.len() == sequences.last().map_or(0, Vec::len))
            .flat_map(|keys| {
                spellings.iter().map(move |key| {
                    let mut keys = keys.clone();
                    keys.push(key);
                    keys
                })
            })
            .collect();
        sequences.extend(longer);
    }
    let mut refused = 0;
    for keys in &sequences {
        let members: Vec<String> = keys.iter().map(|key| format!("\"{key}\": 1")).collect();
        let object = format!("{{{}}}", members.join(", "));
        let strict = check_document(&object).is_ok();
        let one = parse_strictly::<OpenStruct>(&object, &InputLimits::DEFAULT);
        assert_eq!(one.is_some(), strict, "{object}");
        let variant = format!("{{\"V\": {object}}}");
        let one = parse_strictly::<OpenVariant>(&variant, &InputLimits::DEFAULT);
        assert_eq!(one.is_some(), strict, "{variant}");
        refused += usize::from(!strict);
    }
    assert!(refused > 1000, "only {refused} sequences repeat a key");
    let read = parse_strictly::<OpenStruct>(r#"{"c": 3, "x": 0, "a": 1}"#, &InputLimits::DEFAULT);
    assert_eq!(
        read,
        Some(OpenStruct {
            a: Some(1),
            b: None,
            c: Some(3)
        })
    );
    // The members limit counts every key, known or not.
    let mut limits = InputLimits::DEFAULT;
    limits.object_members = 2;
    assert!(parse_strictly::<OpenStruct>(r#"{"a": 1, "x": 1}"#, &limits).is_some());
    assert!(parse_strictly::<OpenStruct>(r#"{"a": 1, "x": 1, "b": 1}"#, &limits).is_none());
}

/// A struct read by hand: its field list names `a` twice (as serde lists an alias beside a
/// name) and it takes any key any number of times, so only the strict rules refuse a repeat.
#[derive(Debug, PartialEq)]
struct RepeatedNames;

impl<'de> serde::Deserialize<'de> for RepeatedNames {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> serde::de::Visitor<'de> for Members {
            type Value = RepeatedNames;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<RepeatedNames, A::Error> {
                while map.next_entry::<String, serde::de::IgnoredAny>()?.is_some() {}
                Ok(RepeatedNames)
            }
        }
        deserializer.deserialize_struct("RepeatedNames", &["a", "a", "b"], Members)
    }
}

#[test]
fn a_field_list_that_names_a_key_twice_still_refuses_the_key_read_twice() {
    for text in [
        r#"{"a": 1, "a": 2}"#,
        r#"{"b": 1, "a": 1, "a": 2}"#,
        r#"{"x": 1, "a": 1, "a": 2}"#,
        r#"{"a": 1, "b": 1, "a": 2}"#,
    ] {
        assert!(check_document(text).is_err(), "{text}");
        assert_eq!(
            parse_strictly::<RepeatedNames>(text, &InputLimits::DEFAULT),
            None,
            "{text}"
        );
    }
    let read = parse_strictly::<RepeatedNames>(r#"{"a": 1, "b": 2}"#, &InputLimits::DEFAULT);
    assert_eq!(read, Some(RepeatedNames));
}

#[test]
fn an_enum_variant_is_held_to_a_members_limit_of_zero() {
    let mut limits = InputLimits::DEFAULT;
    limits.object_members = 0;
    let text = r#"{"V": {}}"#;
    assert!(check_document_within(text, &limits).is_err());
    assert_eq!(parse_strictly::<OpenVariant>(text, &limits), None);
    limits.object_members = 1;
    assert!(check_document_within(text, &limits).is_ok());
    assert!(parse_strictly::<OpenVariant>(text, &limits).is_some());
}
