//! The text of a map key, as serde_json turns a key into a JSON object's string key.
//!
//! A JSON object's keys are strings, so serde_json converts every map key to one: a
//! string, a char or a unit variant is itself, a newtype passes its inner key through,
//! an integer or a boolean becomes the string of its JSON text; any other key is refused.
//! Its printer (`to_writer`) and its value builder (`to_value`) differ on two kinds of key,
//! which [`KeyRules`] names. Every writer and reader of jointplan that must produce or
//! recognize serde_json's exact bytes converts keys here: the canonical writer (hashes),
//! the plan file's pretty writer, and the file-form comparison of a stored plan.

use serde::ser::{self, Error as _, Serialize};
use serde_json::Error;

/// Which of serde_json's serializers a conversion follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyRules {
    /// `serde_json::to_writer` (and its pretty printer): a finite float is the string of
    /// its printed digits, `Some(key)` is `key`.
    Printer,
    /// The canonical form (`serde_json::to_value`, then printed): `Some(key)` is refused,
    /// and so is every float key, whose text serde_json's value builder and printer have
    /// not always agreed on; no plan or request has one.
    Canonical,
}

/// Appends the unquoted, unescaped text of `key` to `text` under `rules`. The text is
/// UTF-8: it comes from strings, chars, variant names and printed numbers only.
pub(crate) fn append_key_text<K: Serialize + ?Sized>(
    key: &K,
    rules: KeyRules,
    text: &mut Vec<u8>,
) -> Result<(), Error> {
    key.serialize(KeyText { text, rules })
}

/// Appends the JSON string of `key` (quoted and escaped as serde_json prints it) to `out`,
/// using `text` as scratch.
pub(crate) fn write_key<K: Serialize + ?Sized>(
    key: &K,
    rules: KeyRules,
    text: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> Result<(), Error> {
    text.clear();
    append_key_text(key, rules, text)?;
    super::json_string::write_json_string(out, key_str(text)?)
}

/// The key text [`append_key_text`] appended, as a `str`.
pub(crate) fn key_str(text: &[u8]) -> Result<&str, Error> {
    std::str::from_utf8(text).map_err(|_| Error::custom("map key is not UTF-8"))
}

fn key_must_be_a_string() -> Error {
    Error::custom("key must be a string")
}

/// The serializer that turns a key into its text.
struct KeyText<'k> {
    text: &'k mut Vec<u8>,
    rules: KeyRules,
}

impl KeyText<'_> {
    fn str(self, text: &str) -> Result<(), Error> {
        self.text.extend_from_slice(text.as_bytes());
        Ok(())
    }

    /// A number's JSON text, printed by serde_json so that its digits are serde_json's.
    fn number<T: Serialize>(self, value: T) -> Result<(), Error> {
        serde_json::to_writer(&mut *self.text, &value)
    }

    fn float<T: Serialize>(self, value: T, finite: bool) -> Result<(), Error> {
        match self.rules {
            KeyRules::Canonical => Err(Error::custom(
                "float map keys are not supported canonically",
            )),
            KeyRules::Printer if !finite => Err(Error::custom("float key must be finite")),
            KeyRules::Printer => self.number(value),
        }
    }
}

impl ser::Serializer for KeyText<'_> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = ser::Impossible<(), Error>;
    type SerializeTuple = ser::Impossible<(), Error>;
    type SerializeTupleStruct = ser::Impossible<(), Error>;
    type SerializeTupleVariant = ser::Impossible<(), Error>;
    type SerializeMap = ser::Impossible<(), Error>;
    type SerializeStruct = ser::Impossible<(), Error>;
    type SerializeStructVariant = ser::Impossible<(), Error>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.str(if v { "true" } else { "false" })
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        self.float(v, v.is_finite())
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        self.float(v, v.is_finite())
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.str(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        self.str(v)
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_none(self) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        match self.rules {
            KeyRules::Printer => value.serialize(self),
            KeyRules::Canonical => Err(key_must_be_a_string()),
        }
    }
    fn serialize_unit(self) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(key_must_be_a_string())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Serialize;

    use super::*;

    fn printed<K: Serialize + Ord>(key: K, rules: KeyRules) -> Result<String, Error> {
        let mut text = Vec::new();
        let mut out = Vec::new();
        write_key(&key, rules, &mut text, &mut out)?;
        Ok(String::from_utf8(out).expect("key text is UTF-8"))
    }

    /// The oracle: the key of a one-entry map as serde_json prints it.
    fn serde_json_key<K: Serialize + Ord>(key: K) -> Option<String> {
        let map: BTreeMap<K, u8> = [(key, 0)].into();
        let text = serde_json::to_string(&map).ok()?;
        Some(text[1..text.len() - 3].to_owned())
    }

    #[derive(Serialize, PartialEq, Eq, PartialOrd, Ord)]
    enum Side {
        Left,
    }

    #[derive(Serialize, PartialEq, Eq, PartialOrd, Ord)]
    struct Named(String);

    #[test]
    fn printer_keys_are_serde_jsons_printed_keys() {
        for rules in [KeyRules::Printer, KeyRules::Canonical] {
            assert_eq!(printed("a\"b\n", rules).ok(), serde_json_key("a\"b\n"));
            assert_eq!(printed('é', rules).ok(), serde_json_key('é'));
            assert_eq!(printed(-17i64, rules).ok(), serde_json_key(-17i64));
            assert_eq!(printed(u128::MAX, rules).ok(), serde_json_key(u128::MAX));
            assert_eq!(printed(true, rules).ok(), serde_json_key(true));
            assert_eq!(printed(Side::Left, rules).ok(), serde_json_key(Side::Left));
            let named = || Named("node.1".to_owned());
            assert_eq!(printed(named(), rules).ok(), serde_json_key(named()));
        }
        assert_eq!(
            printed(Some(3u8), KeyRules::Printer).ok(),
            serde_json_key(Some(3u8))
        );
    }

    #[test]
    fn the_canonical_rules_refuse_what_they_cannot_promise() {
        assert!(printed(Some(3u8), KeyRules::Canonical).is_err());
        assert!(printed((), KeyRules::Printer).is_err());
        assert!(printed(None::<u8>, KeyRules::Printer).is_err());
        assert!(printed(vec![1u8], KeyRules::Printer).is_err());
        let mut text = Vec::new();
        assert!(append_key_text(&1.5f64, KeyRules::Canonical, &mut text).is_err());
        assert!(append_key_text(&f64::NAN, KeyRules::Printer, &mut text).is_err());
        append_key_text(&1.5f64, KeyRules::Printer, &mut text).unwrap();
        assert_eq!(text, b"1.5");
    }
}
