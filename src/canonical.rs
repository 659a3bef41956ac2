//! Canonical JSON and the SHA-256 fingerprints built on it (rules 5).
//!
//! Two kinds of fingerprint exist and both are needed to reproduce the reference bytes:
//!
//! * [`canonical_fingerprint`]: serialize to a JSON value, sort every object's keys byte-wise
//!   (recursively), print compactly, hash. Used for the plan hash, policy fingerprint, estimate
//!   and estimator-input fingerprints, pool ids, layout fingerprints and bucket ids.
//! * [`declaration_fingerprint`]: the compact serde JSON in struct field-declaration order,
//!   hashed as is. Used for the family, program, catalog and operation fingerprints.
//!
//! The canonical text is, byte for byte, `serde_json::to_string(&serde_json::to_value(x)?)`
//! (`serde_json` is built without `preserve_order`, so a `Value` object is key-sorted), but
//! it is written by a streaming serializer ([`writer`]) straight into the hasher or writer:
//! no `Value` tree is built, which for a plan of tens of thousands of nodes is the
//! difference between gigabytes of small allocations and one pass over the bytes.
//!
//! The plan file's pretty form ([`write_pretty`], byte for byte serde_json's pretty printer)
//! lives here too: it shares the string writer whose bytes must equal serde_json's.

mod compound;
mod digest;
mod json_string;
mod map_key;
mod pretty;
mod writer;

use std::cell::Cell;
use std::io::Write;

use serde::Serialize;
use sha2::{Digest, Sha256};

pub(crate) use compound::compound_traits;
pub(crate) use json_string::needs_escape;
pub(crate) use map_key::{append_key_text, key_str, KeyRules};
use writer::{CanonicalWriter, WriterBuffers};

pub use digest::Sha256Hex;
pub use pretty::{write_pretty, write_pretty_with, FieldValue, PrintedElements, Replacement};

/// Why a value could not be put in canonical form.
#[derive(Debug, thiserror::Error)]
#[error("cannot serialize {what} canonically: {source}")]
pub struct CanonicalError {
    what: &'static str,
    #[source]
    source: serde_json::Error,
}

impl CanonicalError {
    /// A serialization failure of `what`.
    pub fn new(what: &'static str, source: serde_json::Error) -> Self {
        CanonicalError { what, source }
    }
}

/// The canonical JSON text of `value`: keys sorted byte-wise at every depth, no whitespace.
pub fn canonical_json<T: Serialize + ?Sized>(
    what: &'static str,
    value: &T,
) -> Result<String, CanonicalError> {
    let bytes = write_canonical(what, value, Vec::new())?;
    // The writer emits only serde_json's own (UTF-8) output and UTF-8 keys.
    String::from_utf8(bytes).map_err(|_| CanonicalError {
        what,
        source: serde::ser::Error::custom("canonical JSON is not UTF-8"),
    })
}

/// Writes the canonical JSON text of `value` to `sink` and returns the sink. The sink sees
/// the bytes of every top-level array element or object as soon as it is complete.
pub fn write_canonical<T: Serialize + ?Sized, W: Write>(
    what: &'static str,
    value: &T,
    sink: W,
) -> Result<W, CanonicalError> {
    write_with_reused_buffers(what, value, sink, false)
}

/// SHA-256 (lowercase hex) of the canonical JSON of `value`, hashed as it is written.
pub fn canonical_fingerprint<T: Serialize + ?Sized>(
    what: &'static str,
    value: &T,
) -> Result<Sha256Hex, CanonicalError> {
    let hasher = write_canonical(what, value, HashSink(Sha256::new()))?;
    Ok(hex_digest(hasher.0.finalize().as_slice()))
}

/// [`canonical_fingerprint`] of a struct whose fields are declared in key order (byte-wise
/// sorted names): the same digest, but each field is hashed as soon as it is written, so
/// the memory held is one field's canonical text, not the whole value's (for a plan of
/// 50,000 nodes, about half a gigabyte). A field declared out of order is an error.
pub fn sorted_struct_fingerprint<T: Serialize + ?Sized>(
    what: &'static str,
    value: &T,
) -> Result<Sha256Hex, CanonicalError> {
    let hasher = write_with_reused_buffers(what, value, HashSink(Sha256::new()), true)?;
    Ok(hex_digest(hasher.0.finalize().as_slice()))
}

/// The most capacity of each byte buffer a thread keeps between two canonical values: the
/// text of one top-level value of a plan (a node) is tens of kilobytes; a larger one is
/// freed rather than held for the life of the thread.
const KEPT_BUFFER_BYTES: usize = 1 << 20;

thread_local! {
    /// The writer buffers of this thread, lent to one canonical value at a time.
    static REUSED_BUFFERS: Cell<WriterBuffers> = Cell::new(WriterBuffers::default());
}

/// Writes `value` canonically with this thread's buffers, and gives them back emptied. A
/// value written while another is being written on the same thread (a `Serialize` that
/// fingerprints something) finds the slot empty and grows buffers of its own. The bytes
/// never depend on the buffers: they hold only capacity and a field-order cache that is
/// checked on every use.
fn write_with_reused_buffers<T: Serialize + ?Sized, W: Write>(
    what: &'static str,
    value: &T,
    sink: W,
    streaming_sorted: bool,
) -> Result<W, CanonicalError> {
    // A thread being torn down has no slot left: it writes with buffers of its own.
    let buffers = REUSED_BUFFERS.try_with(Cell::take).unwrap_or_default();
    let (written, mut buffers) =
        CanonicalWriter::with_buffers(sink, buffers, streaming_sorted).write_value(value);
    buffers.reset(KEPT_BUFFER_BYTES);
    // Dropped instead when the slot is gone (the same teardown).
    let _ = REUSED_BUFFERS.try_with(|slot| slot.set(buffers));
    written.map_err(|source| CanonicalError { what, source })
}

/// An `io::Write` that feeds a SHA-256.
struct HashSink(Sha256);

impl Write for HashSink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// SHA-256 (lowercase hex) of the compact serde JSON of `value` in declaration order.
pub fn declaration_fingerprint<T: Serialize + ?Sized>(
    what: &'static str,
    value: &T,
) -> Result<Sha256Hex, CanonicalError> {
    // Streamed into the hasher in large chunks rather than written out first: a family's
    // text is as large as its request (tens of megabytes for DeepSeek-V3), and holding it
    // cost an allocation of that size, its page faults and a second pass over it.
    let mut sink = std::io::BufWriter::with_capacity(DECLARATION_CHUNK, HashSink(Sha256::new()));
    serde_json::to_writer(&mut sink, value).map_err(|source| CanonicalError { what, source })?;
    let hasher = sink.into_inner().map_err(|error| CanonicalError {
        what,
        source: serde_json::Error::io(error.into_error()),
    })?;
    Ok(hex_digest(hasher.0.finalize().as_slice()))
}

/// The bytes of declaration-order JSON handed to the hasher at once.
const DECLARATION_CHUNK: usize = 64 * 1024;

/// SHA-256 (lowercase hex) of raw bytes.
pub fn sha256_hex(bytes: &[u8]) -> Sha256Hex {
    hex_digest(Sha256::digest(bytes).as_slice())
}

fn hex_digest(digest: &[u8]) -> Sha256Hex {
    let mut text = String::with_capacity(64);
    for &byte in digest {
        text.push(char::from(HEX[usize::from(byte >> 4)]));
        text.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    Sha256Hex::from_digest_text(text)
}

const HEX: &[u8; 16] = b"0123456789abcdef";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_layout_constants() {
        // rules 5: sha256 of `"contiguous"` (with quotes) and of `"opaque_bytes_v1"`.
        assert_eq!(
            canonical_fingerprint("layout", "contiguous")
                .unwrap()
                .as_str(),
            "2ee77f83e72ffcea31cc6ac29a81070a45403f9fe3e3d76aa284ffc351ead457"
        );
        assert_eq!(
            canonical_fingerprint("layout", "opaque_bytes_v1")
                .unwrap()
                .as_str(),
            "309780bb231c537e8511cd06c6de0030f971c09499f8c0504e3bdee811fad897"
        );
        let set = ["2ee77f83e72ffcea31cc6ac29a81070a45403f9fe3e3d76aa284ffc351ead457"];
        assert_eq!(
            canonical_fingerprint("layout set", &set).unwrap().as_str(),
            "5ecd2941f2c44570bcee3178feaccaeb79f4eb49c6d9a01a0cf61df170fee566"
        );
    }

    /// The buffers a thread lends from one value to the next (and the field orders they
    /// remember) never change the bytes: not after a struct of the same name with other
    /// fields, not after a failed value, not inside a value that fingerprints another.
    #[test]
    fn reused_buffers_never_change_the_bytes() {
        #[derive(Serialize)]
        #[serde(rename = "Same")]
        struct First {
            z: u8,
            a: Vec<u8>,
        }
        #[derive(Serialize)]
        #[serde(rename = "Same")]
        struct Second {
            b: u8,
            y: u8,
            a: u8,
        }
        #[derive(Serialize)]
        struct OutOfOrder {
            b: u8,
            a: u8,
        }
        struct Nested;
        impl Serialize for Nested {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let inner = canonical_json("inner", &Second { b: 1, y: 2, a: 3 })
                    .map_err(serde::ser::Error::custom)?;
                serializer.serialize_str(&inner)
            }
        }
        fn text<T: Serialize>(value: &T) -> String {
            canonical_json("value", value).unwrap()
        }
        let first = || First {
            z: 1,
            a: vec![2, 3],
        };
        let fresh = text(&first());
        assert_eq!(fresh, r#"{"a":[2,3],"z":1}"#);
        for _ in 0..3 {
            assert_eq!(text(&Second { b: 1, y: 2, a: 3 }), r#"{"a":3,"b":1,"y":2}"#);
            assert_eq!(text(&first()), fresh);
            assert!(sorted_struct_fingerprint("out of order", &OutOfOrder { b: 1, a: 2 }).is_err());
            assert_eq!(text(&first()), fresh);
            assert_eq!(text(&vec![Nested]), r#"["{\"a\":3,\"b\":1,\"y\":2}"]"#);
            assert_eq!(
                canonical_fingerprint("value", &first()).unwrap(),
                sha256_hex(fresh.as_bytes())
            );
        }
    }

    #[test]
    fn canonical_sorts_nested_keys() {
        #[derive(Serialize)]
        struct Inner {
            z: u8,
            a: u8,
        }
        #[derive(Serialize)]
        struct Outer {
            y: Inner,
            b: bool,
        }
        let text = canonical_json(
            "t",
            &Outer {
                y: Inner { z: 1, a: 2 },
                b: true,
            },
        )
        .unwrap();
        assert_eq!(text, r#"{"b":true,"y":{"a":2,"z":1}}"#);
        let declared = serde_json::to_string(&Outer {
            y: Inner { z: 1, a: 2 },
            b: true,
        })
        .unwrap();
        assert_eq!(declared, r#"{"y":{"z":1,"a":2},"b":true}"#);
    }

    /// The reference definition the streaming writer must reproduce byte for byte.
    fn via_value<T: Serialize>(value: &T) -> String {
        serde_json::to_string(&serde_json::to_value(value).unwrap()).unwrap()
    }

    #[derive(Serialize)]
    enum Shape {
        Unit,
        Newtype(Vec<u8>),
        Tuple(u8, Option<String>),
        Record { zeta: f32, alpha: i128, mid: char },
    }

    #[derive(Serialize, PartialEq, Eq, PartialOrd, Ord)]
    struct Key(String);

    #[derive(Serialize)]
    #[serde(rename_all = "snake_case")]
    enum KeyKind {
        Second,
        First,
    }

    #[derive(Serialize)]
    struct Everything {
        shapes: Vec<Shape>,
        by_key: std::collections::BTreeMap<Key, Shape>,
        by_kind: std::collections::BTreeMap<u32, KeyKind>,
        numbers: std::collections::BTreeMap<i64, f64>,
        text: String,
        nothing: (),
        #[serde(skip_serializing_if = "Option::is_none")]
        skipped: Option<u8>,
        #[serde(flatten)]
        flattened: std::collections::BTreeMap<String, Vec<Vec<u8>>>,
        after: bool,
    }

    #[derive(Serialize)]
    struct Sometimes {
        z: u8,
        #[serde(skip_serializing_if = "Option::is_none")]
        b: Option<u8>,
        a: u8,
        #[serde(skip_serializing_if = "Option::is_none")]
        y: Option<Box<Sometimes>>,
    }

    #[test]
    fn a_struct_seen_again_with_other_fields_is_sorted_again() {
        let leaf = |b| Sometimes {
            z: 1,
            b,
            a: 2,
            y: None,
        };
        let list = vec![
            leaf(None),
            leaf(Some(3)),
            leaf(None),
            Sometimes {
                z: 0,
                b: None,
                a: 0,
                y: Some(Box::new(leaf(Some(4)))),
            },
            leaf(Some(5)),
        ];
        assert_eq!(canonical_json("t", &list).unwrap(), via_value(&list));
    }

    #[test]
    fn streaming_matches_the_value_tree_for_every_serde_shape() {
        let everything = Everything {
            shapes: vec![
                Shape::Unit,
                Shape::Newtype(vec![0, 255]),
                Shape::Tuple(7, None),
                Shape::Tuple(8, Some("q\"u\\o\nte\u{1}é".to_owned())),
                Shape::Record {
                    zeta: 0.1,
                    alpha: -5,
                    mid: 'ß',
                },
                Shape::Record {
                    zeta: f32::NAN,
                    alpha: i128::from(u64::MAX),
                    mid: '"',
                },
            ],
            by_key: [
                ("b\"".to_owned(), Shape::Unit),
                ("a".to_owned(), Shape::Newtype(vec![])),
                ("B".to_owned(), Shape::Tuple(0, None)),
            ]
            .into_iter()
            .map(|(k, v)| (Key(k), v))
            .collect(),
            by_kind: [
                (10, KeyKind::Second),
                (9, KeyKind::First),
                (100, KeyKind::First),
            ]
            .into_iter()
            .collect(),
            numbers: [(-1, 1.5), (2, f64::INFINITY), (10, 1e300)]
                .into_iter()
                .collect(),
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
            canonical_json("t", &everything).unwrap(),
            via_value(&everything)
        );
        let list = vec![Shape::Unit, Shape::Tuple(1, None)];
        assert_eq!(canonical_json("t", &list).unwrap(), via_value(&list));
        assert_eq!(canonical_json("t", &3u8).unwrap(), "3");
        assert_eq!(
            canonical_fingerprint("t", &everything).unwrap().as_str(),
            sha256_hex(via_value(&everything).as_bytes()).as_str()
        );
    }

    #[derive(Serialize)]
    struct SortedFields {
        alpha: Vec<Sometimes>,
        beta: Option<u8>,
        #[serde(skip_serializing_if = "Option::is_none")]
        gamma: Option<Box<SortedFields>>,
        zeta: std::collections::BTreeMap<String, Shape>,
    }

    #[test]
    fn a_sorted_struct_streams_to_the_same_digest_and_an_unsorted_one_is_refused() {
        let leaf = Sometimes {
            z: 1,
            b: Some(2),
            a: 3,
            y: None,
        };
        let inner = SortedFields {
            alpha: vec![],
            beta: None,
            gamma: None,
            zeta: [("k".to_owned(), Shape::Tuple(1, None))]
                .into_iter()
                .collect(),
        };
        let value = SortedFields {
            alpha: vec![leaf],
            beta: Some(4),
            gamma: Some(Box::new(inner)),
            zeta: [("b".to_owned(), Shape::Unit), ("a".to_owned(), Shape::Unit)]
                .into_iter()
                .collect(),
        };
        assert_eq!(
            sorted_struct_fingerprint("t", &value).unwrap().as_str(),
            sha256_hex(via_value(&value).as_bytes()).as_str()
        );
        let unsorted = Sometimes {
            z: 0,
            b: None,
            a: 0,
            y: None,
        };
        let error = sorted_struct_fingerprint("unsorted", &unsorted).unwrap_err();
        assert!(error.to_string().contains("\"a\""), "{error}");
        // A value that is not a struct is written as canonical_fingerprint writes it.
        assert_eq!(
            sorted_struct_fingerprint("t", &[3u8, 1]).unwrap(),
            canonical_fingerprint("t", &[3u8, 1]).unwrap()
        );
    }

    /// A map that repeats a key: a `Value` keeps the last value, so must the writer.
    struct Repeats;

    impl Serialize for Repeats {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            let mut map = serializer.serialize_map(None)?;
            map.serialize_entry("k", &1)?;
            map.serialize_entry("a", &2)?;
            map.serialize_entry("k", &3)?;
            map.end()
        }
    }

    #[test]
    fn a_repeated_key_keeps_its_last_value_and_bad_values_are_errors() {
        assert_eq!(canonical_json("t", &Repeats).unwrap(), via_value(&Repeats));
        assert_eq!(
            canonical_json("t", &[Repeats]).unwrap(),
            r#"[{"a":2,"k":3}]"#
        );
        let too_big = u128::from(u64::MAX) + 1;
        let error = canonical_json("big number", &too_big).unwrap_err();
        assert!(error.to_string().contains("big number"), "{error}");
        let mut bad_keys = std::collections::BTreeMap::new();
        bad_keys.insert(vec![1u8], 1u8);
        assert!(canonical_json("t", &bad_keys).is_err());
        assert!(serde_json::to_value(&bad_keys).is_err());
    }
}
