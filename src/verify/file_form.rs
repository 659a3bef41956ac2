//! Whether a stored text is, byte for byte, the plan file form of the plan parsed from it.
//!
//! Why: a stored plan is in canonical form when its text and the typed plan parsed from it
//! have the same canonical JSON. Every plan file jointplan writes is
//! [`ExecutionPlan::write_json`] of its plan (serde_json's pretty printer, two spaces of
//! indent, and a final newline), so for the plans `check` usually reads, the text *is*
//! the typed plan's own serialization. [`Comparison`] walks the typed plan as that
//! printer does and holds each piece it would print against the text in place, without
//! printing it: an id is one `memcmp`, the layout a run of spaces. That costs a fraction of
//! the canonical pass over the text (parse, sort every object's keys, SHA-256) that
//! [`payload_text`](super::payload_text) makes, and of serde_json's own printer (which
//! scans every string byte through its escape table).
//!
//! A text equal to a JSON rendering of the plan has the plan's canonical JSON: whatever
//! [`Comparison`] holds the text to is valid JSON of the plan's values (strings with
//! nothing to escape verbatim, anything else as serde_json prints it), so an equal text
//! needs nothing more, and a mistake in reproducing the printer's layout could only make an
//! equal text look different, never the reverse. A text that differs (another layout, key
//! order or number form, or a change) is not rejected here: the caller then establishes
//! the form the general way, through the canonical hashes.

use std::fmt;

use serde::ser::{self, Serialize};

use crate::plan::ExecutionPlan;

use crate::canonical::{append_key_text, compound_traits, key_str, KeyRules};

/// Whether `text` is exactly `plan.write_json` (pretty JSON and the final newline). Stops
/// at the first byte that differs.
pub(super) fn is_file_form(plan: &ExecutionPlan, text: &str) -> bool {
    is_pretty_form(plan, text, b"\n")
}

/// Whether `text` is `serde_json::to_writer_pretty(value)` followed by `tail`.
fn is_pretty_form<T: Serialize + ?Sized>(value: &T, text: &str, tail: &[u8]) -> bool {
    let mut comparison = Comparison {
        rest: text.as_bytes(),
        indent: 0,
        scratch: Vec::new(),
        key_text: Vec::new(),
    };
    value.serialize(&mut comparison).is_ok() && comparison.rest == tail
}

/// The stored text differs from the printed form (where is of no use to the caller, which
/// falls back to the canonical hashes).
#[derive(Debug)]
pub(super) struct Differs;

impl fmt::Display for Differs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the stored text differs from the plan file form")
    }
}

impl std::error::Error for Differs {}

impl ser::Error for Differs {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Differs
    }
}

/// A serializer that prints nothing: it holds what serde_json's pretty printer would print
/// against the stored bytes still expected.
struct Comparison<'t> {
    /// The stored bytes not yet matched.
    rest: &'t [u8],
    /// Nesting depth (the printer indents by two spaces a level).
    indent: usize,
    /// Where a value serde_json prints with escapes or a float is printed to be compared.
    scratch: Vec<u8>,
    /// Where a map key's text is made to be compared.
    key_text: Vec<u8>,
}

/// Spaces the indentation is compared against, a slice at a time.
const SPACES: &[u8; 64] = &[b' '; 64];

impl<'t> Comparison<'t> {
    /// Consumes `bytes` from the stored text, or fails.
    fn expect(&mut self, bytes: &[u8]) -> Result<(), Differs> {
        self.rest = self.rest.strip_prefix(bytes).ok_or(Differs)?;
        Ok(())
    }

    /// A line break and the current indentation.
    fn new_line(&mut self) -> Result<(), Differs> {
        self.expect(b"\n")?;
        let mut spaces = 2 * self.indent;
        while spaces > 0 {
            let run = spaces.min(SPACES.len());
            self.expect(&SPACES[..run])?;
            spaces -= run;
        }
        Ok(())
    }

    /// A JSON string: verbatim between quotes when serde_json escapes none of its bytes,
    /// else as serde_json prints it.
    fn string(&mut self, text: &str) -> Result<(), Differs> {
        let bytes = text.as_bytes();
        if !crate::canonical::needs_escape(bytes) {
            let matched = self.rest.len() > bytes.len() + 1
                && self.rest[0] == b'"'
                && &self.rest[1..=bytes.len()] == bytes
                && self.rest[bytes.len() + 1] == b'"';
            if !matched {
                return Err(Differs);
            }
            self.rest = &self.rest[bytes.len() + 2..];
            return Ok(());
        }
        self.printed(text)
    }

    /// A map key as serde_json's printer writes it (a string; see
    /// [`crate::canonical::KeyRules`]).
    fn key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Differs> {
        let mut text = std::mem::take(&mut self.key_text);
        text.clear();
        let result = match append_key_text(key, KeyRules::Printer, &mut text) {
            Ok(()) => key_str(&text)
                .map_err(|_| Differs)
                .and_then(|key| self.string(key)),
            Err(_) => Err(Differs),
        };
        self.key_text = text;
        result
    }

    /// Any scalar as serde_json prints it.
    fn printed<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Differs> {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        serde_json::to_writer(&mut scratch, value).map_err(|_| Differs)?;
        let result = self.expect(&scratch);
        self.scratch = scratch;
        result
    }

    /// An unsigned integer in decimal.
    fn unsigned(&mut self, mut value: u128) -> Result<(), Differs> {
        let mut digits = [0u8; 39];
        let mut start = digits.len();
        loop {
            start -= 1;
            // The remainder is below ten.
            digits[start] = b'0' + (value % 10) as u8;
            value /= 10;
            if value == 0 {
                break;
            }
        }
        self.expect(&digits[start..])
    }

    /// A signed integer in decimal.
    fn signed(&mut self, value: i128) -> Result<(), Differs> {
        if value < 0 {
            self.expect(b"-")?;
        }
        self.unsigned(value.unsigned_abs())
    }

    /// Opens an array or object (`bracket`): `len == Some(0)` closes it at once, as the
    /// printer does.
    fn open(&mut self, bracket: u8, len: Option<usize>) -> Result<Compound<'_, 't>, Differs> {
        self.expect(&[bracket])?;
        if len == Some(0) {
            self.expect(&[closing(bracket)])?;
            return Ok(Compound {
                comparison: self,
                state: State::Closed,
                bracket,
                variant: false,
            });
        }
        self.indent += 1;
        Ok(Compound {
            comparison: self,
            state: State::First,
            bracket,
            variant: false,
        })
    }

    /// `{"variant": ` of an externally tagged variant with content.
    fn open_variant(&mut self, variant: &str) -> Result<(), Differs> {
        self.expect(b"{")?;
        self.indent += 1;
        self.new_line()?;
        self.string(variant)?;
        self.expect(b": ")
    }

    /// The closing `}` of an externally tagged variant with content.
    fn close_variant(&mut self) -> Result<(), Differs> {
        self.indent -= 1;
        self.new_line()?;
        self.expect(b"}")
    }
}

/// The bracket that closes `bracket`.
fn closing(bracket: u8) -> u8 {
    if bracket == b'[' {
        b']'
    } else {
        b'}'
    }
}

/// Where an open array or object stands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// Closed when opened (declared empty).
    Closed,
    /// Nothing in it yet.
    First,
    /// At least one element or member in it.
    Rest,
}

/// An open array or object.
struct Compound<'c, 't> {
    comparison: &'c mut Comparison<'t>,
    state: State,
    /// `[` or `{`.
    bracket: u8,
    /// Whether closing it also closes the variant object around it (tuple and struct
    /// variants).
    variant: bool,
}

impl<'t> Compound<'_, 't> {
    /// The separator before an element or a key: a line break after a comma unless first.
    fn next(&mut self) -> Result<&mut Comparison<'t>, Differs> {
        match self.state {
            State::Closed => return Err(Differs),
            State::First => self.state = State::Rest,
            State::Rest => self.comparison.expect(b",")?,
        }
        self.comparison.new_line()?;
        Ok(self.comparison)
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Differs> {
        value.serialize(&mut *self.next()?)
    }

    fn close(self) -> Result<(), Differs> {
        match self.state {
            State::Closed => {}
            State::First => {
                self.comparison.indent -= 1;
                self.comparison.expect(&[closing(self.bracket)])?;
            }
            State::Rest => {
                self.comparison.indent -= 1;
                self.comparison.new_line()?;
                self.comparison.expect(&[closing(self.bracket)])?;
            }
        }
        if self.variant {
            self.comparison.close_variant()?;
        }
        Ok(())
    }

    /// Marks the compound as the content of a tuple or struct variant.
    fn in_variant(mut self) -> Self {
        self.variant = true;
        self
    }

    fn key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Differs> {
        self.next()?.key(key)
    }

    fn value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Differs> {
        self.comparison.expect(b": ")?;
        value.serialize(&mut *self.comparison)
    }

    fn field<T: Serialize + ?Sized>(
        &mut self,
        name: &'static str,
        value: &T,
    ) -> Result<(), Differs> {
        self.next()?.string(name)?;
        self.value(value)
    }

    fn end_sequence(self) -> Result<(), Differs> {
        self.close()
    }

    fn end_object(self) -> Result<(), Differs> {
        self.close()
    }
}

impl<'c, 't> ser::Serializer for &'c mut Comparison<'t> {
    type Ok = ();
    type Error = Differs;
    type SerializeSeq = Compound<'c, 't>;
    type SerializeTuple = Compound<'c, 't>;
    type SerializeTupleStruct = Compound<'c, 't>;
    type SerializeTupleVariant = Compound<'c, 't>;
    type SerializeMap = Compound<'c, 't>;
    type SerializeStruct = Compound<'c, 't>;
    type SerializeStructVariant = Compound<'c, 't>;

    fn serialize_bool(self, v: bool) -> Result<(), Differs> {
        self.expect(if v { b"true" } else { b"false" })
    }
    fn serialize_i8(self, v: i8) -> Result<(), Differs> {
        self.signed(v.into())
    }
    fn serialize_i16(self, v: i16) -> Result<(), Differs> {
        self.signed(v.into())
    }
    fn serialize_i32(self, v: i32) -> Result<(), Differs> {
        self.signed(v.into())
    }
    fn serialize_i64(self, v: i64) -> Result<(), Differs> {
        self.signed(v.into())
    }
    fn serialize_i128(self, v: i128) -> Result<(), Differs> {
        self.signed(v)
    }
    fn serialize_u8(self, v: u8) -> Result<(), Differs> {
        self.unsigned(v.into())
    }
    fn serialize_u16(self, v: u16) -> Result<(), Differs> {
        self.unsigned(v.into())
    }
    fn serialize_u32(self, v: u32) -> Result<(), Differs> {
        self.unsigned(v.into())
    }
    fn serialize_u64(self, v: u64) -> Result<(), Differs> {
        self.unsigned(v.into())
    }
    fn serialize_u128(self, v: u128) -> Result<(), Differs> {
        self.unsigned(v)
    }
    fn serialize_f32(self, v: f32) -> Result<(), Differs> {
        self.printed(&v)
    }
    fn serialize_f64(self, v: f64) -> Result<(), Differs> {
        self.printed(&v)
    }
    fn serialize_char(self, v: char) -> Result<(), Differs> {
        self.string(v.encode_utf8(&mut [0u8; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<(), Differs> {
        self.string(v)
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Differs> {
        let mut array = self.open(b'[', Some(v.len()))?;
        for byte in v {
            ser::SerializeSeq::serialize_element(&mut array, byte)?;
        }
        array.close()
    }
    fn serialize_none(self) -> Result<(), Differs> {
        self.expect(b"null")
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Differs> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Differs> {
        self.expect(b"null")
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Differs> {
        self.expect(b"null")
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), Differs> {
        self.string(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Differs> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Differs> {
        self.open_variant(variant)?;
        value.serialize(&mut *self)?;
        self.close_variant()
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Compound<'c, 't>, Differs> {
        self.open(b'[', len)
    }
    fn serialize_tuple(self, len: usize) -> Result<Compound<'c, 't>, Differs> {
        self.open(b'[', Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        len: usize,
    ) -> Result<Compound<'c, 't>, Differs> {
        self.open(b'[', Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Compound<'c, 't>, Differs> {
        self.open_variant(variant)?;
        Ok(self.open(b'[', Some(len))?.in_variant())
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Compound<'c, 't>, Differs> {
        self.open(b'{', len)
    }
    fn serialize_struct(self, _: &'static str, len: usize) -> Result<Compound<'c, 't>, Differs> {
        self.open(b'{', Some(len))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Compound<'c, 't>, Differs> {
        self.open_variant(variant)?;
        Ok(self.open(b'{', Some(len))?.in_variant())
    }
}

compound_traits!([] Compound<'_, '_>, Differs);

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;
    use serde_json::json;

    fn plan(model: &str) -> ExecutionPlan {
        let request = crate::request::PlanRequest::read(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("models")
                .join(model)
                .join("request.json"),
        )
        .unwrap();
        ExecutionPlan::build(&request, &crate::builder::BuildOptions::default()).unwrap()
    }

    #[test]
    fn the_written_file_is_its_plans_file_form_and_nothing_else_is() {
        let plan = plan("decoder-2layer");
        let text = String::from_utf8(plan.write_json(Vec::new()).unwrap()).unwrap();
        assert!(is_file_form(&plan, &text));
        // Without the final newline, with a byte more, compact, or with one value changed:
        // not the file form (the caller then compares canonical hashes).
        assert!(!is_file_form(&plan, text.trim_end()));
        assert!(!is_file_form(&plan, &format!("{text} ")));
        assert!(!is_file_form(
            &plan,
            &format!("{}\n", serde_json::to_string(&plan).unwrap())
        ));
        let changed = text.replacen(
            &format!("\"{}\"", plan.payload.nodes[0].id),
            "\"node.other\"",
            1,
        );
        assert_ne!(changed, text);
        assert!(!is_file_form(&plan, &changed));
        assert!(!is_file_form(&plan, ""));
    }

    /// Differential against serde_json's pretty printer (the oracle: the comparison shares
    /// none of its code): the printer's text is equal, and every text one byte off (each
    /// byte removed, or replaced by another) is not, exactly when it is not the printer's.
    fn agrees_with_the_printer<T: Serialize>(value: &T) {
        let printed = serde_json::to_string_pretty(value).unwrap();
        assert!(is_pretty_form(value, &printed, b""), "{printed}");
        let bytes = printed.as_bytes();
        for index in 0..bytes.len() {
            let mut removed = bytes.to_vec();
            removed.remove(index);
            if let Ok(text) = String::from_utf8(removed) {
                assert!(!is_pretty_form(value, &text, b""), "{text}");
            }
            for replacement in [b' ', b'\n', b'0', b'a', b'"', b'\\', b',', b'}'] {
                let mut replaced = bytes.to_vec();
                replaced[index] = replacement;
                if let Ok(text) = String::from_utf8(replaced) {
                    assert_eq!(is_pretty_form(value, &text, b""), text == printed, "{text}");
                }
            }
        }
    }

    #[derive(Serialize)]
    enum Variants {
        Unit,
        Newtype(u8),
        Tuple(i32, String),
        Struct { a: Vec<u8>, b: Option<bool> },
        EmptyTuple(),
    }

    #[derive(Serialize)]
    struct Everything {
        variants: Vec<Variants>,
        integer_keys: std::collections::BTreeMap<i64, char>,
        empty_struct: Empty,
        unit: (),
        float: f64,
        negative: i128,
        big: u128,
    }

    #[derive(Serialize)]
    struct Empty {}

    #[test]
    fn agrees_with_serde_jsons_pretty_printer() {
        agrees_with_the_printer(&json!({
            "empty": {}, "list": [], "nested": [[], [{}], [1, [2, {"k": "v"}]]],
            "escapes": "quote \" backslash \\ newline \n tab \t control \u{1} del \u{7f}",
            "unicode": "h\u{e9}llo \u{1f600}", "numbers": [0, -1, 18446744073709551615u64, 1.5, -0.0, 1e300],
            "bool": [true, false, null]
        }));
        agrees_with_the_printer(&Everything {
            variants: vec![
                Variants::Unit,
                Variants::Newtype(7),
                Variants::Tuple(-3, "x\"y".to_owned()),
                Variants::Struct {
                    a: vec![],
                    b: Some(true),
                },
                Variants::Struct {
                    a: vec![1, 2],
                    b: None,
                },
                Variants::EmptyTuple(),
            ],
            integer_keys: [(-5, 'a'), (12, '"')].into_iter().collect(),
            empty_struct: Empty {},
            unit: (),
            float: 0.1,
            negative: -170141183460469231731687303715884105728,
            big: u128::MAX,
        });
    }

    #[test]
    fn every_shipped_plan_is_its_own_file_form() {
        for model in ["decoder-2layer", "hybrid-block", "tiny"] {
            let plan = plan(model);
            let text = String::from_utf8(plan.write_json(Vec::new()).unwrap()).unwrap();
            assert!(is_file_form(&plan, &text), "{model}");
        }
    }
}
