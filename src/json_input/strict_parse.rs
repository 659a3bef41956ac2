//! The strict reading of a JSON document and its typed parse in one pass over the text.
//!
//! Why: reading an input is a strict scan of the whole text (one JSON value, each key
//! once, strings, arrays, objects and nesting within the input limits:
//! [`check_document`](super::check_document)) and then the typed parse, two passes of the
//! JSON reader over a text of up to hundreds of megabytes (a request of 102 MB, a stored
//! plan of 286 MB for DeepSeek-V3). Here the typed parse itself runs under [`Strict`], a
//! deserializer that wraps the JSON reader and holds every value the parse reads to the
//! same rules as it goes by, so the limits still bound what is built (an array is refused
//! at its first element past the limit, not after it was built whole).
//!
//! The pass only *accepts*: a text it does not accept, for whatever reason (a broken rule,
//! a parse error, or a shape it does not follow, such as a key that is not read as a
//! string), gets `None`, and the caller reads it the two-pass way, which names the culprit
//! exactly as before. So the pass may refuse more than the strict scan does (a refusal
//! only costs the second reading), never less: every rule is checked at least as strictly
//! as the scan checks it. (The differential tests run on the shipped plans, in
//! `verify::one_pass_reading`, and on requests, in `json_input`'s tests.)

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess};
use serde::de::{VariantAccess, Visitor};

use super::{InputLimits, ObjectKeys};

mod key;

use key::KeySeed;

/// The value of `text` when the text is a strict document under `limits` and parses into
/// a `T`; `None` otherwise (the caller then says why, the two-pass way).
pub(crate) fn parse_strictly<T: serde::de::DeserializeOwned>(
    text: &str,
    limits: &InputLimits,
) -> Option<T> {
    parse_strictly_at(text, limits, 0)
}

/// [`parse_strictly`] of a value that stands inside `depth` arrays and objects of its
/// document (the depth limit counts them).
pub(crate) fn parse_strictly_at<T: serde::de::DeserializeOwned>(
    text: &str,
    limits: &InputLimits,
    depth: u64,
) -> Option<T> {
    let mut reader = serde_json::Deserializer::from_str(text);
    let value = T::deserialize(Strict {
        inner: &mut reader,
        limits,
        depth,
    })
    .ok()?;
    reader.end().ok()?;
    Some(value)
}

/// A deserializer that holds every value it hands out to the strict rules. `depth` is the
/// number of arrays and objects around the value.
struct Strict<'l, D> {
    inner: D,
    limits: &'l InputLimits,
    depth: u64,
}

/// The visitor of a value read under [`Strict`]: checks strings, and wraps arrays, objects,
/// options, newtypes and enums so that what is inside them is checked too.
struct Guard<'l, V> {
    visitor: V,
    limits: &'l InputLimits,
    depth: u64,
    /// The field names of the struct this value is read as, if it is one: its keys are
    /// then told apart by their position among them (see [`MemberKeys`]).
    fields: Option<&'static [&'static str]>,
}

impl<'l, V> Guard<'l, V> {
    fn string<E: de::Error>(&self, bytes: usize) -> Result<(), E> {
        if bytes as u64 > self.limits.string_bytes {
            return Err(E::custom("a string over the string-bytes limit"));
        }
        Ok(())
    }

    /// The depth of what is inside an array or object this value is, if within the limit.
    fn nested<E: de::Error>(&self) -> Result<u64, E> {
        let depth = self.depth + 1;
        if depth > self.limits.depth {
            return Err(E::custom("nesting over the depth limit"));
        }
        Ok(depth)
    }
}

macro_rules! forward_deserialize {
    ($($method:ident),*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
                self.inner.$method(Guard {
                    visitor,
                    limits: self.limits,
                    depth: self.depth,
                    fields: None,
                })
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Strict<'_, D> {
    type Error = D::Error;

    forward_deserialize!(
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
        deserialize_identifier
    );

    /// An ignored value is still read whole, so that everything in it is checked.
    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.deserialize_any(visitor)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_unit_struct(
            name,
            Guard {
                visitor,
                limits: self.limits,
                depth: self.depth,
                fields: None,
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
            Guard {
                visitor,
                limits: self.limits,
                depth: self.depth,
                fields: None,
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
            Guard {
                visitor,
                limits: self.limits,
                depth: self.depth,
                fields: None,
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
            Guard {
                visitor,
                limits: self.limits,
                depth: self.depth,
                fields: None,
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
            Guard {
                visitor,
                limits: self.limits,
                depth: self.depth,
                fields: Some(fields),
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
            Guard {
                visitor,
                limits: self.limits,
                depth: self.depth,
                fields: None,
            },
        )
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

macro_rules! forward_scalar {
    ($($method:ident: $ty:ty),*) => {
        $(
            fn $method<E: de::Error>(self, value: $ty) -> Result<V::Value, E> {
                self.visitor.$method(value)
            }
        )*
    };
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Guard<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.visitor.expecting(f)
    }

    forward_scalar!(
        visit_bool: bool,
        visit_i8: i8,
        visit_i16: i16,
        visit_i32: i32,
        visit_i64: i64,
        visit_i128: i128,
        visit_u8: u8,
        visit_u16: u16,
        visit_u32: u32,
        visit_u64: u64,
        visit_u128: u128,
        visit_f32: f32,
        visit_f64: f64,
        visit_char: char
    );

    fn visit_str<E: de::Error>(self, value: &str) -> Result<V::Value, E> {
        self.string(value.len())?;
        self.visitor.visit_str(value)
    }
    fn visit_borrowed_str<E: de::Error>(self, value: &'de str) -> Result<V::Value, E> {
        self.string(value.len())?;
        self.visitor.visit_borrowed_str(value)
    }
    fn visit_string<E: de::Error>(self, value: String) -> Result<V::Value, E> {
        self.string(value.len())?;
        self.visitor.visit_string(value)
    }
    fn visit_bytes<E: de::Error>(self, value: &[u8]) -> Result<V::Value, E> {
        self.string(value.len())?;
        self.visitor.visit_bytes(value)
    }
    fn visit_borrowed_bytes<E: de::Error>(self, value: &'de [u8]) -> Result<V::Value, E> {
        self.string(value.len())?;
        self.visitor.visit_borrowed_bytes(value)
    }
    fn visit_byte_buf<E: de::Error>(self, value: Vec<u8>) -> Result<V::Value, E> {
        self.string(value.len())?;
        self.visitor.visit_byte_buf(value)
    }
    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.visitor.visit_none()
    }
    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.visitor.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, inner: D) -> Result<V::Value, D::Error> {
        self.visitor.visit_some(Strict {
            inner,
            limits: self.limits,
            depth: self.depth,
        })
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, inner: D) -> Result<V::Value, D::Error> {
        self.visitor.visit_newtype_struct(Strict {
            inner,
            limits: self.limits,
            depth: self.depth,
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, inner: A) -> Result<V::Value, A::Error> {
        let depth = self.nested()?;
        self.visitor.visit_seq(StrictSeq {
            inner,
            limits: self.limits,
            depth,
            elements: 0,
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, inner: A) -> Result<V::Value, A::Error> {
        let depth = self.nested()?;
        self.visitor.visit_map(StrictMap {
            inner,
            limits: self.limits,
            depth,
            keys: MemberKeys::new(self.fields),
        })
    }

    fn visit_enum<A: EnumAccess<'de>>(self, inner: A) -> Result<V::Value, A::Error> {
        // A variant with content is an object of one member (one level deeper); a variant
        // written as a bare string is not, but is held to the same depth and the same
        // members limit (a refusal only sends the text down the two-pass reading).
        let depth = self.nested()?;
        if self.limits.object_members == 0 {
            return Err(de::Error::custom("an object over the object-members limit"));
        }
        self.visitor.visit_enum(StrictEnum {
            inner,
            limits: self.limits,
            depth,
        })
    }
}

/// The elements of an array, counted against `array-elements`.
struct StrictSeq<'l, A> {
    inner: A,
    limits: &'l InputLimits,
    /// The depth of the elements.
    depth: u64,
    elements: u64,
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for StrictSeq<'_, A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        if self.elements >= self.limits.array_elements {
            // One more element would be over the limit: refuse if there is one, building
            // nothing of it.
            return match self.inner.next_element::<de::IgnoredAny>()? {
                None => Ok(None),
                Some(_) => Err(de::Error::custom("an array over the array-elements limit")),
            };
        }
        let element = self.inner.next_element_seed(StrictSeed {
            seed,
            limits: self.limits,
            depth: self.depth,
        })?;
        self.elements += 1;
        Ok(element)
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// The members of an object: each key read as a string, within `string-bytes`, once, and
/// at most `object-members` of them.
struct StrictMap<'de, 'l, A> {
    inner: A,
    limits: &'l InputLimits,
    /// The depth of the values.
    depth: u64,
    keys: MemberKeys<'de>,
}

/// The keys seen so far in one object, to refuse one read twice. In an object read as a
/// struct, a key that names one of the struct's fields (nearly every key of a plan or a
/// request) is marked by a bit at the first position of that name among the fields (a
/// field list may name a key twice: serde lists a field's aliases beside the names), where
/// keeping each key cost an allocation per object, about 7% of `check` on DeepSeek-V3. Any
/// other key, and every key of a map, is kept in [`ObjectKeys`].
struct MemberKeys<'de> {
    /// The struct's field names (none for a map, or a struct of more than 64 fields).
    fields: &'static [&'static str],
    /// Bit `i`: `fields[i]` was read.
    read: u64,
    others: ObjectKeys<'de>,
}

impl<'de> MemberKeys<'de> {
    fn new(fields: Option<&'static [&'static str]>) -> Self {
        MemberKeys {
            fields: fields.filter(|names| names.len() <= 64).unwrap_or(&[]),
            read: 0,
            others: ObjectKeys::default(),
        }
    }

    /// The keys read so far (each once).
    fn len(&self) -> u64 {
        u64::from(self.read.count_ones()) + self.others.len() as u64
    }

    /// Records `key`; false if it was read before.
    fn first_read(&mut self, key: Cow<'de, str>) -> bool {
        match self.fields.iter().position(|name| *name == key.as_ref()) {
            Some(at) => {
                let bit = 1u64 << at;
                let first = self.read & bit == 0;
                self.read |= bit;
                first
            }
            None if self.others.contains(&key) => false,
            None => {
                self.others.insert(key);
                true
            }
        }
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for StrictMap<'de, '_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        let mut text = None;
        let key = self.inner.next_key_seed(KeySeed {
            seed,
            text: &mut text,
        })?;
        if key.is_none() {
            return Ok(None);
        }
        let text = text.ok_or_else(|| de::Error::custom("a key not read as a string"))?;
        if text.len() as u64 > self.limits.string_bytes {
            return Err(de::Error::custom("a key over the string-bytes limit"));
        }
        if self.keys.len() >= self.limits.object_members {
            return Err(de::Error::custom("an object over the object-members limit"));
        }
        if !self.keys.first_read(text) {
            return Err(de::Error::custom("a duplicate key"));
        }
        Ok(key)
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.inner.next_value_seed(StrictSeed {
            seed,
            limits: self.limits,
            depth: self.depth,
        })
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// An enum's variant name (read as a key is) and its content.
struct StrictEnum<'l, A> {
    inner: A,
    limits: &'l InputLimits,
    /// The depth of the content.
    depth: u64,
}

impl<'de, 'l, A: EnumAccess<'de>> EnumAccess<'de> for StrictEnum<'l, A> {
    type Error = A::Error;
    type Variant = StrictSeed<'l, A::Variant>;

    fn variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<(T::Value, Self::Variant), A::Error> {
        let mut text = None;
        let (value, variant) = self.inner.variant_seed(KeySeed {
            seed,
            text: &mut text,
        })?;
        let text = text.ok_or_else(|| de::Error::custom("a variant not read as a string"))?;
        if text.len() as u64 > self.limits.string_bytes {
            return Err(de::Error::custom("a variant over the string-bytes limit"));
        }
        Ok((
            value,
            StrictSeed {
                seed: variant,
                limits: self.limits,
                depth: self.depth,
            },
        ))
    }
}

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for StrictSeed<'_, A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.seed.unit_variant()
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.seed.newtype_variant_seed(StrictSeed {
            seed,
            limits: self.limits,
            depth: self.depth,
        })
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.seed.tuple_variant(
            len,
            Guard {
                visitor,
                limits: self.limits,
                depth: self.depth,
                fields: None,
            },
        )
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        self.seed.struct_variant(
            fields,
            Guard {
                visitor,
                limits: self.limits,
                depth: self.depth,
                fields: Some(fields),
            },
        )
    }
}

/// A seed (or an enum's variant access) whose value is read under [`Strict`] at `depth`.
struct StrictSeed<'l, S> {
    seed: S,
    limits: &'l InputLimits,
    depth: u64,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for StrictSeed<'_, S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, inner: D) -> Result<S::Value, D::Error> {
        self.seed.deserialize(Strict {
            inner,
            limits: self.limits,
            depth: self.depth,
        })
    }
}
