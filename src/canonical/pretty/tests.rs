//! The pretty writer's tests: its bytes against serde_json's pretty printer.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde::Serialize;
use serde_json::Value;

use super::*;

/// The oracle: serde_json's own pretty printer.
fn oracle<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    serde_json::to_vec_pretty(value).unwrap()
}

fn pretty<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    write_pretty(value, Vec::new()).unwrap()
}

#[derive(Serialize, PartialEq, Eq, PartialOrd, Ord)]
enum KeyKind {
    First,
    Second,
}

#[derive(Serialize, PartialEq, Eq, PartialOrd, Ord)]
struct Named(String);

#[derive(Serialize)]
struct Unit;

/// Bytes serialized with `serialize_bytes` (serde's `Vec<u8>` is a sequence).
struct Bytes(Vec<u8>);

impl Serialize for Bytes {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(&self.0)
    }
}

#[derive(Serialize)]
enum Shape {
    Unit,
    Newtype(Vec<u8>),
    EmptyTuple(),
    Tuple(u8, Option<String>),
    EmptyRecord {},
    Record { zeta: f32, alpha: i128, mid: char },
}

#[derive(Serialize)]
struct Everything {
    shapes: Vec<Shape>,
    by_name: BTreeMap<Named, Shape>,
    by_kind: BTreeMap<KeyKind, Vec<()>>,
    by_number: BTreeMap<i64, f64>,
    by_u128: BTreeMap<u128, Unit>,
    by_flag: BTreeMap<bool, BTreeMap<String, u8>>,
    by_char: BTreeMap<char, Bytes>,
    by_option: BTreeMap<Option<u16>, i8>,
    floats: Vec<f32>,
    wide: (i128, u128),
    text: String,
    nothing: (),
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<u8>,
    #[serde(flatten)]
    flattened: BTreeMap<String, Vec<Vec<u8>>>,
    after: bool,
}

#[test]
fn every_serde_shape_is_written_as_serde_json_writes_it() {
    let everything = Everything {
        shapes: vec![
            Shape::Unit,
            Shape::Newtype(vec![]),
            Shape::Newtype(vec![0, 255]),
            Shape::EmptyTuple(),
            Shape::Tuple(7, None),
            Shape::Tuple(8, Some("q\"u\\o\nte\u{1}é\u{7f}".to_owned())),
            Shape::EmptyRecord {},
            Shape::Record {
                zeta: 0.1,
                alpha: -5,
                mid: '"',
            },
            Shape::Record {
                zeta: f32::NAN,
                alpha: i128::MIN,
                mid: 'ß',
            },
        ],
        by_name: [("b\"", Shape::Unit), ("a", Shape::EmptyRecord {})]
            .into_iter()
            .map(|(k, v)| (Named(k.to_owned()), v))
            .collect(),
        by_kind: [(KeyKind::Second, vec![()]), (KeyKind::First, vec![])]
            .into_iter()
            .collect(),
        by_number: [(-1, 1.5), (2, f64::INFINITY), (10, 1e300), (11, -0.0)]
            .into_iter()
            .collect(),
        by_u128: [(u128::MAX, Unit)].into_iter().collect(),
        by_flag: [
            (true, BTreeMap::new()),
            (false, [("x".to_owned(), 1)].into()),
        ]
        .into_iter()
        .collect(),
        by_char: [('\n', Bytes(vec![1, 2])), ('k', Bytes(vec![]))]
            .into_iter()
            .collect(),
        by_option: [(Some(3), -1)].into_iter().collect(),
        floats: vec![0.1, f32::MAX, f32::MIN_POSITIVE, f32::NEG_INFINITY, 3.0],
        wide: (i128::MAX, u128::MAX),
        text: String::new(),
        nothing: (),
        skipped: None,
        flattened: [
            ("aa".to_owned(), vec![vec![1], vec![]]),
            ("zz".to_owned(), vec![]),
        ]
        .into_iter()
        .collect(),
        after: false,
    };
    assert_eq!(
        String::from_utf8(pretty(&everything)).unwrap(),
        String::from_utf8(oracle(&everything)).unwrap()
    );
    assert_eq!(pretty(&Vec::<u8>::new()), oracle(&Vec::<u8>::new()));
    assert_eq!(pretty(&3u8), oracle(&3u8));
    assert_eq!(pretty(&Shape::Unit), oracle(&Shape::Unit));
}

#[test]
fn indentation_deeper_than_one_copy_is_written_whole() {
    let mut value = Value::from(1);
    for depth in 0..150 {
        value = if depth % 2 == 0 {
            Value::Array(vec![value, Value::Null])
        } else {
            Value::Object([("k".to_owned(), value)].into_iter().collect())
        };
    }
    assert_eq!(pretty(&value), oracle(&value));
}

/// Records the size of every write it receives.
struct Writes(Vec<u8>, Vec<usize>);

impl Write for Writes {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(bytes);
        self.1.push(bytes.len());
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_large_value_reaches_the_sink_in_chunks_and_whole() {
    let rows: Vec<BTreeMap<String, Vec<u64>>> = (0..20_000u64)
        .map(|n| [(format!("row.{n}"), vec![n, n * 3])].into())
        .collect();
    let Writes(bytes, sizes) = write_pretty(&rows, Writes(Vec::new(), Vec::new())).unwrap();
    assert_eq!(bytes, oracle(&rows));
    assert!(sizes.len() > 2, "{sizes:?}");
    assert!(sizes[..sizes.len() - 1].iter().all(|&size| size >= CHUNK));
}

#[test]
fn a_replaced_field_is_written_as_the_value_it_would_have() {
    #[derive(Serialize, Clone)]
    struct Inner {
        schema: u8,
        plan_id: String,
        rows: Vec<BTreeMap<String, String>>,
    }
    #[derive(Serialize, Clone)]
    struct Outer {
        payload: Inner,
        plan_id: String,
    }
    let unset = Outer {
        payload: Inner {
            schema: 1,
            plan_id: "unset".to_owned(),
            rows: vec![[("plan_id".to_owned(), "a map key, not a field".to_owned())].into()],
        },
        plan_id: "another struct's".to_owned(),
    };
    let mut sealed = unset.clone();
    sealed.payload.plan_id = "plan/sha256/\"quoted\"".to_owned();
    // The field of that struct only; a map key is no field.
    let replacement = |struct_name| Replacement {
        struct_name,
        field: "plan_id",
        value: FieldValue::Text("plan/sha256/\"quoted\""),
    };
    let replaced = write_pretty_with(&unset, Vec::new(), &[replacement("Inner")]).unwrap();
    assert_eq!(replaced, oracle(&sealed));
    let error = write_pretty_with(&unset, Vec::new(), &[replacement("Missing")]).unwrap_err();
    assert!(error.to_string().contains("Missing"), "{error}");
}

#[derive(Serialize)]
struct Row {
    id: String,
    values: Vec<BTreeMap<String, Shape>>,
    tail: Option<Vec<u8>>,
}

#[derive(Serialize)]
struct Rows {
    head: u8,
    rows: Vec<Row>,
    nested: Vec<Vec<Row>>,
}

fn rows(count: usize) -> Vec<Row> {
    (0..count)
        .map(|k| Row {
            id: format!("row \"{k}\""),
            values: (0..k % 3)
                .map(|v| [(format!("v{v}"), Shape::Tuple(v as u8, None))].into())
                .collect(),
            tail: (k % 2 == 0).then(|| vec![k as u8; k % 4]),
        })
        .collect()
}

#[test]
fn elements_printed_on_the_pool_are_the_bytes_of_the_sequence() {
    // Windows and pieces of every size against the serial printer: counts around them,
    // an empty sequence, and the sequence at the top, inside a struct and deeper.
    for count in [0, 1, 2, 3, 5, 7, 8, 17] {
        let value = Rows {
            head: 1,
            rows: rows(count),
            nested: vec![rows(count), Vec::new()],
        };
        for (window, piece) in [(1, 1), (3, 2), (4, 4), (5, 1), (64, 16)] {
            let split = Split { window, piece };
            let sequences: [(&'static str, &dyn PrintedElements); 2] =
                [("rows", &value.rows), ("nested", &value.nested)];
            for (field, elements) in sequences {
                let replacement = Replacement {
                    struct_name: "Rows",
                    field,
                    value: FieldValue::Elements(elements),
                };
                let printed = write_pretty_split(&value, Vec::new(), &[replacement], split);
                assert_eq!(
                    printed.unwrap(),
                    oracle(&value),
                    "{field}: {count} in {window}/{piece}"
                );
            }
        }
    }
}

#[test]
fn keys_serde_json_refuses_are_refused() {
    let empty: BTreeMap<u8, u8> = BTreeMap::new();
    assert_eq!(pretty(&empty), b"{}");
    struct FloatKey(f64);
    impl Serialize for FloatKey {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            use ser::SerializeMap;
            let mut map = serializer.serialize_map(Some(1))?;
            map.serialize_entry(&self.0, &0)?;
            map.end()
        }
    }
    assert_eq!(pretty(&FloatKey(2.5)), oracle(&FloatKey(2.5)));
    let error = write_pretty(&FloatKey(f64::NAN), Vec::new()).unwrap_err();
    assert!(error.to_string().contains("finite"), "{error}");
    assert!(serde_json::to_vec_pretty(&FloatKey(f64::NAN)).is_err());
    let mut list_keys = BTreeMap::new();
    list_keys.insert(vec![1u8], 1u8);
    let error = write_pretty(&list_keys, Vec::new()).unwrap_err();
    assert!(
        error.to_string().contains("key must be a string"),
        "{error}"
    );
    assert!(serde_json::to_vec_pretty(&list_keys).is_err());
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "\\PC{0,12}|[a-z\"\\\\\u{1}é]{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::btree_map("\\PC{0,6}", inner, 0..6)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn any_json_value_is_written_as_serde_json_writes_it(value in json_value()) {
        prop_assert_eq!(pretty(&value), oracle(&value));
    }
}
