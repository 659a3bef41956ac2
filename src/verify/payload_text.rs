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
//! rule 2), so `check` confirms the form of a text that is not byte for byte its plan's file
//! form ([`file_form`](super::file_form), the common case's cheaper test) with one canonical
//! pass over the text instead of two over the whole document (the text's and the typed
//! plan's).
//!
//! `verify` uses the same pass, for a text that is not the rebuilt plan's file form,
//! without parsing the text into a typed plan at all: the rebuilt plan carries its own
//! plan hash and plan id, so the stored text is the rebuilt plan's canonical form exactly
//! when its only members are `payload` and `plan_hash`, its payload hashes to the rebuilt
//! plan hash, and its `plan_hash` and `plan_id` strings are the rebuilt plan's
//! ([`TextIdentity::is_plan`]).
//!
//! The text is transcoded through the canonical writer member by member, streamed from the
//! JSON reader: no `Value` tree and no typed value is built.

use std::cell::{Cell, RefCell};
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde::ser::{self, SerializeMap};
use serde::{Deserializer, Serialize, Serializer};

use crate::canonical::{canonical_fingerprint, Sha256Hex};
use crate::plan::hash::UNSET_PLAN_ID;
use crate::plan::ExecutionPlan;

/// What a stored text says about its plan's identity, read in one pass.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct TextIdentity {
    /// The plan hash of the text's payload (its plan-hash material hashed).
    pub(super) payload_hash: Sha256Hex,
    /// The payload's `plan_id` string.
    plan_id: String,
    /// The top-level `plan_hash` string.
    plan_hash: String,
}

impl TextIdentity {
    /// Whether the text is `plan`'s canonical form: its payload hashes to the plan's hash,
    /// and its `plan_id` and `plan_hash` strings are the plan's (the text has no other
    /// top-level member: [`stored_identity`] reads none from a text that has one).
    pub(super) fn is_plan(&self, plan: &ExecutionPlan) -> bool {
        self.payload_hash == plan.plan_hash
            && self.plan_hash == plan.plan_hash.as_str()
            && self.plan_id == plan.payload.plan_id
    }
}

/// The identity of a stored text, or `None` when the text is not an object of exactly the
/// members `payload` (an object with a string `plan_id`) and `plan_hash` (a string): the
/// typed parse then says what is wrong.
pub(super) fn stored_identity(text: &str) -> Option<TextIdentity> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    deserializer.deserialize_map(Document).ok().flatten()
}

/// The top-level object: hashes `payload`, reads `plan_hash`, refuses any other member.
struct Document;

impl<'de> Visitor<'de> for Document {
    type Value = Option<TextIdentity>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a stored plan")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut payload, mut plan_hash) = (None, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "payload" => payload = Some(map.next_value_seed(PayloadSeed)?),
                "plan_hash" => plan_hash = Some(map.next_value::<String>()?),
                _ => return Ok(None),
            }
        }
        Ok(match (payload, plan_hash) {
            (Some((payload_hash, Some(plan_id))), Some(plan_hash)) => Some(TextIdentity {
                payload_hash,
                plan_id,
                plan_hash,
            }),
            _ => None,
        })
    }
}

/// The `payload` member's value, hashed as plan-hash material, with its `plan_id` string.
struct PayloadSeed;

impl<'de> DeserializeSeed<'de> for PayloadSeed {
    type Value = (Sha256Hex, Option<String>);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        let material = PayloadMaterial {
            reader: RefCell::new(Some(deserializer)),
            plan_id: Cell::new(None),
        };
        let hash = canonical_fingerprint("stored payload", &material).map_err(de::Error::custom)?;
        Ok((hash, material.plan_id.take()))
    }
}

/// A payload object read from a deserializer as it is serialized (once: the reader is
/// taken on the first serialization), keeping the `plan_id` it meets.
struct PayloadMaterial<D> {
    reader: RefCell<Option<D>>,
    plan_id: Cell<Option<String>>,
}

impl<'de, D: Deserializer<'de>> Serialize for PayloadMaterial<D> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let deserializer = self
            .reader
            .borrow_mut()
            .take()
            .ok_or_else(|| ser::Error::custom("a stored payload is read once"))?;
        deserializer
            .deserialize_map(PayloadMembers {
                out: serializer,
                plan_id: &self.plan_id,
            })
            .map_err(ser::Error::custom)
    }
}

/// Writes the payload's members to the serializer, `plan_id` as [`UNSET_PLAN_ID`] (its
/// string kept aside).
struct PayloadMembers<'i, S> {
    out: S,
    plan_id: &'i Cell<Option<String>>,
}

impl<'de, S: Serializer> Visitor<'de> for PayloadMembers<'_, S> {
    type Value = S::Ok;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a plan payload object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<S::Ok, A::Error> {
        let mut out = self.out.serialize_map(None).map_err(de::Error::custom)?;
        while let Some(key) = map.next_key::<String>()? {
            if key == "plan_id" {
                self.plan_id.set(Some(map.next_value::<String>()?));
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

    fn hash_of(text: &str) -> Option<Sha256Hex> {
        stored_identity(text).map(|identity| identity.payload_hash)
    }

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
        assert_eq!(expected, plan.plan_hash);
        let identity = stored_identity(&text).unwrap();
        assert_eq!(identity.payload_hash, expected);
        assert!(identity.is_plan(&plan));
        // Another plan id hashes the same (it is not material), but is not the plan's.
        let renamed = text.replace(&plan.payload.plan_id, "plan/sha256/other");
        let identity = stored_identity(&renamed).unwrap();
        assert_eq!(identity.payload_hash, expected);
        assert!(!identity.is_plan(&plan));
        // Any other change hashes otherwise.
        let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
        value["payload"]["maximum_scheduled_tokens"] = serde_json::json!(7);
        let changed = hash_of(&value.to_string());
        assert!(changed.is_some() && changed != Some(expected));
        // Not a plan's shape: no identity.
        assert_eq!(hash_of("[1]"), None);
        assert_eq!(hash_of(r#"{"payload": 3, "plan_hash": "x"}"#), None);
        let mut extra: serde_json::Value = serde_json::from_str(&text).unwrap();
        extra["signature"] = serde_json::json!("x");
        assert_eq!(hash_of(&extra.to_string()), None);
        let mut unhashed: serde_json::Value = serde_json::from_str(&text).unwrap();
        unhashed.as_object_mut().unwrap().remove("plan_hash");
        assert_eq!(hash_of(&unhashed.to_string()), None);
    }
}
