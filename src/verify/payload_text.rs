//! The plan hash of a stored plan's *text*: the canonical SHA-256 of the text's `payload`
//! object with its `plan_id` member's value replaced by [`UNSET_PLAN_ID`], the very material
//! [`plan_hash`](crate::plan::hash::plan_hash) hashes for a typed payload.
//!
//! Why: a stored plan is in canonical form when its text and the typed plan parsed from it
//! have the same canonical JSON. The two documents are `{"payload": P, "plan_hash": h}`;
//! the typed parse keeps the `plan_hash` and `plan_id` strings as they are (no
//! normalization) and rejects any other top-level member, so the documents agree exactly
//! when the payloads agree with `plan_id` set aside, that is when this hash of the text
//! equals `plan_hash` of the typed payload. The checker computes the latter anyway (its
//! rule 2), so `check` confirms the form with one canonical pass over the text instead of
//! two over the whole document (the text's and the typed plan's).
//!
//! The text is transcoded through the canonical writer member by member, streamed from the
//! JSON reader: no `Value` tree and no typed value is built.

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::ser::{self, SerializeMap};
use serde::{Deserializer, Serialize, Serializer};

use crate::canonical::{canonical_fingerprint, Sha256Hex};
use crate::plan::hash::UNSET_PLAN_ID;

/// The plan hash of the stored text's payload, or `None` when the text is not an object
/// whose `payload` member is an object (the typed parse then says what is wrong).
pub(super) fn stored_payload_hash(text: &str) -> Option<Sha256Hex> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    deserializer.deserialize_map(Document).ok().flatten()
}

/// The top-level object: finds `payload` and hashes it; skips the other members.
struct Document;

impl<'de> Visitor<'de> for Document {
    type Value = Option<Sha256Hex>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a stored plan")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut hash = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == "payload" {
                hash = Some(map.next_value_seed(PayloadSeed)?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(hash)
    }
}

/// The `payload` member's value, hashed as plan-hash material.
struct PayloadSeed;

impl<'de> DeserializeSeed<'de> for PayloadSeed {
    type Value = Sha256Hex;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Sha256Hex, D::Error> {
        canonical_fingerprint(
            "stored payload",
            &PayloadMaterial(RefCell::new(Some(deserializer))),
        )
        .map_err(de::Error::custom)
    }
}

/// A payload object read from a deserializer as it is serialized (once: the reader is
/// taken on the first serialization).
struct PayloadMaterial<D>(RefCell<Option<D>>);

impl<'de, D: Deserializer<'de>> Serialize for PayloadMaterial<D> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let deserializer = self
            .0
            .borrow_mut()
            .take()
            .ok_or_else(|| ser::Error::custom("a stored payload is read once"))?;
        deserializer
            .deserialize_map(PayloadMembers(serializer))
            .map_err(ser::Error::custom)
    }
}

/// Writes the payload's members to the serializer, `plan_id` as [`UNSET_PLAN_ID`].
struct PayloadMembers<S>(S);

impl<'de, S: Serializer> Visitor<'de> for PayloadMembers<S> {
    type Value = S::Ok;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a plan payload object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<S::Ok, A::Error> {
        let mut out = self.0.serialize_map(None).map_err(de::Error::custom)?;
        while let Some(key) = map.next_key::<String>()? {
            if key == "plan_id" {
                map.next_value::<IgnoredAny>()?;
                out.serialize_entry(&key, UNSET_PLAN_ID)
                    .map_err(de::Error::custom)?;
            } else {
                out.serialize_key(&key).map_err(de::Error::custom)?;
                map.next_value_seed(MemberValue(&mut out))?;
            }
        }
        out.end().map_err(de::Error::custom)
    }
}

/// One member's value, transcoded from the reader into the open object.
struct MemberValue<'m, M>(&'m mut M);

impl<'de, M: SerializeMap> DeserializeSeed<'de> for MemberValue<'_, M> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        self.0
            .serialize_value(&serde_transcode::Transcoder::new(deserializer))
            .map_err(de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::hash::plan_hash;

    #[test]
    fn hashes_the_text_as_the_typed_payload_is_hashed() {
        let request = crate::request::PlanRequest::read(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/models/decoder-2layer/request.json"
        )))
        .unwrap();
        let plan =
            crate::plan::ExecutionPlan::build(&request, &crate::builder::BuildOptions::default())
                .unwrap();
        let text = serde_json::to_string_pretty(&plan).unwrap();
        let expected = plan_hash(&plan.payload).unwrap();
        assert_eq!(stored_payload_hash(&text), Some(expected.clone()));
        assert_eq!(expected, plan.plan_hash);
        // Another plan id hashes the same (it is not material); any other change does not.
        let renamed = text.replace(&plan.payload.plan_id, "plan/sha256/other");
        assert_eq!(stored_payload_hash(&renamed), Some(expected.clone()));
        let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
        value["payload"]["maximum_scheduled_tokens"] = serde_json::json!(7);
        let changed = stored_payload_hash(&value.to_string());
        assert!(changed.is_some() && changed != Some(expected));
        assert_eq!(stored_payload_hash("[1]"), None);
        assert_eq!(stored_payload_hash(r#"{"payload": 3}"#), None);
    }
}
