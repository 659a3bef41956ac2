//! Keys (and variant names) read under [`Strict`](super::Strict): the key is handed to its
//! type's own deserialization as read, and the text it was read from is kept, so that the
//! object's keys can be held to the strict rules (each once, within `string-bytes`).

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, Visitor};

/// A key's seed: the key is handed to `seed` as read, and its text kept in `text` (left
/// `None` if the key was not read as a string).
pub(super) struct KeySeed<'k, 'de, S> {
    pub(super) seed: S,
    pub(super) text: &'k mut Option<Cow<'de, str>>,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for KeySeed<'_, 'de, S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, inner: D) -> Result<S::Value, D::Error> {
        self.seed.deserialize(KeyReader {
            inner,
            text: self.text,
        })
    }
}

/// The deserializer of a key: whatever the key's type asks for, the text it is read from
/// is kept.
struct KeyReader<'k, 'de, D> {
    inner: D,
    text: &'k mut Option<Cow<'de, str>>,
}

macro_rules! forward_key {
    ($($method:ident),*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
                self.inner.$method(KeyText {
                    visitor,
                    text: self.text,
                })
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for KeyReader<'_, 'de, D> {
    type Error = D::Error;

    forward_key!(
        deserialize_any,
        deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_i128,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_u128,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_str,
        deserialize_string,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_option,
        deserialize_unit,
        deserialize_seq,
        deserialize_map,
        deserialize_identifier,
        deserialize_ignored_any
    );

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_unit_struct(
            name,
            KeyText {
                visitor,
                text: self.text,
            },
        )
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_newtype_struct(
            name,
            KeyText {
                visitor,
                text: self.text,
            },
        )
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_tuple(
            len,
            KeyText {
                visitor,
                text: self.text,
            },
        )
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_tuple_struct(
            name,
            len,
            KeyText {
                visitor,
                text: self.text,
            },
        )
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_struct(
            name,
            fields,
            KeyText {
                visitor,
                text: self.text,
            },
        )
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_enum(
            name,
            variants,
            KeyText {
                visitor,
                text: self.text,
            },
        )
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

/// The visitor of a key: keeps the key's text when it comes as a string. A key that comes
/// any other way leaves the text unset (a newtype key is read through its reader again).
struct KeyText<'k, 'de, V> {
    visitor: V,
    text: &'k mut Option<Cow<'de, str>>,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for KeyText<'_, 'de, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.visitor.expecting(f)
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<V::Value, E> {
        *self.text = Some(Cow::Owned(value.to_owned()));
        self.visitor.visit_str(value)
    }
    fn visit_borrowed_str<E: de::Error>(self, value: &'de str) -> Result<V::Value, E> {
        *self.text = Some(Cow::Borrowed(value));
        self.visitor.visit_borrowed_str(value)
    }
    fn visit_string<E: de::Error>(self, value: String) -> Result<V::Value, E> {
        *self.text = Some(Cow::Owned(value.clone()));
        self.visitor.visit_string(value)
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, inner: D) -> Result<V::Value, D::Error> {
        self.visitor.visit_newtype_struct(KeyReader {
            inner,
            text: self.text,
        })
    }
}
