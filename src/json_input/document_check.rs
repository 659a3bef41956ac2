//! The streaming check of a whole document (duplicate keys, the input limits), which
//! names the culprit of a text the one-pass strict parse refused: a walk of the text that
//! keeps only the keys of the objects open (borrowed from the text where they have no
//! escapes) and builds no tree, assembling the JSON path of a failure while it unwinds.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::{CountedArray, InputLimits, Limit, LimitBreach, StrictJsonError};

pub(super) fn check_document_counting(
    text: &str,
    limits: &InputLimits,
    counted: Option<CountedArray>,
) -> Result<(), StrictJsonError> {
    let failure = RefCell::new(Failure::default());
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let checked = DocumentCheck {
        failure: &failure,
        limits,
        depth: 0,
        counted,
        matched: 0,
    }
    .deserialize(&mut deserializer)
    .and_then(|()| deserializer.end());
    checked.map_err(|err| {
        let Failure {
            mut segments,
            limit,
        } = failure.into_inner();
        segments.reverse();
        StrictJsonError {
            json_path: render_path(&segments),
            message: err.to_string(),
            limit,
        }
    })
}

/// What the streaming pass learns about a failure while it unwinds.
#[derive(Debug, Default)]
struct Failure {
    /// Path segments, innermost first.
    segments: Vec<Segment>,
    /// The limit exceeded, if that is the failure.
    limit: Option<LimitBreach>,
}

/// One step of a JSON path, recorded while a failure unwinds.
#[derive(Debug)]
enum Segment {
    Key(String),
    Index(usize),
}

fn render_path(segments: &[Segment]) -> String {
    if segments.is_empty() {
        return ".".to_owned();
    }
    let mut path = String::new();
    for segment in segments {
        match segment {
            Segment::Key(key) => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
            }
            Segment::Index(index) => {
                path.push('[');
                path.push_str(&index.to_string());
                path.push(']');
            }
        }
    }
    path
}

/// Walks any JSON value, checking every object for duplicate keys and every string, array,
/// object and nesting level against the limits. On failure each level adds its own path
/// segment to `failure` (innermost first).
#[derive(Clone, Copy)]
struct DocumentCheck<'f> {
    failure: &'f RefCell<Failure>,
    limits: &'f InputLimits,
    depth: u64,
    /// The array held to a domain limit, if any.
    counted: Option<CountedArray>,
    /// How many keys of `counted.path` lead to this value (`usize::MAX`: off the path).
    matched: usize,
}

impl DocumentCheck<'_> {
    /// Fails with a limit breach (the message names the limit and the flag).
    fn exceed<E: serde::de::Error>(&self, limit: Limit, found: impl fmt::Display) -> E {
        let breach = LimitBreach {
            limit,
            allowed: self.limits.get(limit),
        };
        self.failure.borrow_mut().limit = Some(breach);
        E::custom(format_args!("{found} {}, {breach}", limit.unit()))
    }

    fn string<E: serde::de::Error>(&self, text: &str) -> Result<(), E> {
        if text.len() as u64 > self.limits.string_bytes {
            return Err(self.exceed(
                Limit::StringBytes,
                format_args!("a string of {}", text.len()),
            ));
        }
        Ok(())
    }

    /// The check of a value one level deeper.
    fn nested<E: serde::de::Error>(self) -> Result<Self, E> {
        let depth = self.depth + 1;
        if depth > self.limits.depth {
            return Err(self.exceed(
                Limit::Depth,
                format_args!("nesting deeper than {}", self.limits.depth),
            ));
        }
        Ok(DocumentCheck {
            depth,
            matched: usize::MAX,
            ..self
        })
    }

    /// The check of the member `key` of an object checked by `self`.
    fn member(self, inner: Self, key: &str) -> Self {
        let on_path = self
            .counted
            .is_some_and(|counted| counted.path.get(self.matched) == Some(&key));
        DocumentCheck {
            matched: if on_path {
                self.matched + 1
            } else {
                usize::MAX
            },
            ..inner
        }
    }

    /// The element limit of an array checked by `self`: `array-elements`, or the counted
    /// array's own limit when this is it and that limit is lower.
    fn array_limit(&self) -> (Limit, u64) {
        let general = (Limit::ArrayElements, self.limits.array_elements);
        match self.counted {
            Some(counted) if counted.path.len() == self.matched => {
                let own = self.limits.get(counted.limit);
                if own < general.1 {
                    (counted.limit, own)
                } else {
                    general
                }
            }
            _ => general,
        }
    }
}

impl<'de> DeserializeSeed<'de> for DocumentCheck<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for DocumentCheck<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<(), E> {
        self.string(text)
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let inner = self.nested()?;
        let (limit, allowed) = self.array_limit();
        let mut index = 0usize;
        loop {
            if index as u64 >= allowed {
                // One more element would exceed the limit: fail if there is one.
                match seq.next_element::<IgnoredAny>() {
                    Ok(None) => return Ok(()),
                    Ok(Some(_)) => {
                        self.failure
                            .borrow_mut()
                            .segments
                            .push(Segment::Index(index));
                        return Err(self.exceed(limit, format_args!("more than {index}")));
                    }
                    Err(err) => {
                        self.failure
                            .borrow_mut()
                            .segments
                            .push(Segment::Index(index));
                        return Err(err);
                    }
                }
            }
            match seq.next_element_seed(inner) {
                Ok(Some(())) => index += 1,
                Ok(None) => return Ok(()),
                Err(err) => {
                    self.failure
                        .borrow_mut()
                        .segments
                        .push(Segment::Index(index));
                    return Err(err);
                }
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let inner = self.nested()?;
        let mut keys = ObjectKeys::default();
        let mut last_key: Option<Cow<'de, str>> = None;
        loop {
            let key = match map.next_key_seed(KeyText) {
                Ok(Some(key)) => key,
                Ok(None) => return Ok(()),
                Err(err) => {
                    // A syntax error between members: name the object's last good key.
                    if let Some(last) = last_key {
                        self.failure
                            .borrow_mut()
                            .segments
                            .push(Segment::Key(last.into_owned()));
                    }
                    return Err(err);
                }
            };
            if let Err(err) = self.string::<A::Error>(&key) {
                let _ = map.next_value::<IgnoredAny>();
                self.failure
                    .borrow_mut()
                    .segments
                    .push(Segment::Key(truncated(&key)));
                return Err(err);
            }
            if keys.len() as u64 >= self.limits.object_members {
                let _ = map.next_value::<IgnoredAny>();
                self.failure
                    .borrow_mut()
                    .segments
                    .push(Segment::Key(truncated(&key)));
                return Err(self.exceed(
                    Limit::ObjectMembers,
                    format_args!("more than {}", keys.len()),
                ));
            }
            if keys.contains(&key) {
                self.failure
                    .borrow_mut()
                    .segments
                    .push(Segment::Key(key.clone().into_owned()));
                // Consume the value so the error is about the key, not a parse state.
                let _ = map.next_value::<IgnoredAny>();
                return Err(serde::de::Error::custom(format_args!(
                    "duplicate key `{key}` (each key may appear once per object; a reader \
                     that keeps the first copy would see a different document)"
                )));
            }
            if let Err(err) = map.next_value_seed(self.member(inner, &key)) {
                self.failure
                    .borrow_mut()
                    .segments
                    .push(Segment::Key(key.into_owned()));
                return Err(err);
            }
            keys.insert(key.clone());
            last_key = Some(key);
        }
    }
}

/// The keys seen so far in one object, to find a duplicate: a short list compared in
/// place while the object has at most [`FEW_KEYS`] keys (nearly every object of a request:
/// hashing each key with SipHash cost more than comparing it, about a third of this pass
/// on a large request), a hash set beyond.
pub(crate) enum ObjectKeys<'de> {
    Few(Vec<Cow<'de, str>>),
    Many(HashSet<Cow<'de, str>>),
}

/// The most keys [`ObjectKeys`] compares one by one.
pub(super) const FEW_KEYS: usize = 16;

impl Default for ObjectKeys<'_> {
    fn default() -> Self {
        ObjectKeys::Few(Vec::new())
    }
}

impl<'de> ObjectKeys<'de> {
    pub(crate) fn len(&self) -> usize {
        match self {
            ObjectKeys::Few(keys) => keys.len(),
            ObjectKeys::Many(keys) => keys.len(),
        }
    }

    pub(crate) fn contains(&self, key: &str) -> bool {
        match self {
            ObjectKeys::Few(keys) => keys.iter().any(|seen| seen.as_ref() == key),
            ObjectKeys::Many(keys) => keys.contains(key),
        }
    }

    pub(crate) fn insert(&mut self, key: Cow<'de, str>) {
        match self {
            ObjectKeys::Few(keys) if keys.len() < FEW_KEYS => keys.push(key),
            ObjectKeys::Few(keys) => {
                let mut many: HashSet<Cow<'de, str>> = keys.drain(..).collect();
                many.insert(key);
                *self = ObjectKeys::Many(many);
            }
            ObjectKeys::Many(keys) => {
                keys.insert(key);
            }
        }
    }
}

/// A key for a path in a message: at most 64 characters, marked when cut.
fn truncated(key: &str) -> String {
    match key.char_indices().nth(64) {
        Some((cut, _)) => format!("{}…", &key[..cut]),
        None => key.to_owned(),
    }
}

/// An object key, borrowed from the text when it has no escapes.
struct KeyText;

impl<'de> DeserializeSeed<'de> for KeyText {
    type Value = Cow<'de, str>;

    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyText {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(key))
    }

    fn visit_str<E>(self, key: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(key.to_owned()))
    }
}
