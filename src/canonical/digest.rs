//! The SHA-256 digest as it appears in requests and plans: 64 lowercase hex digits.

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

/// A SHA-256 digest as 64 lowercase hex digits.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(try_from = "String")]
pub struct Sha256Hex(String);

/// Serialized as its hex text, borrowed (no copy per serialization).
impl Serialize for Sha256Hex {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl Sha256Hex {
    /// Parses 64 lowercase hex digits.
    pub fn new(text: impl Into<String>) -> Result<Self, String> {
        let text = text.into();
        if text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            Ok(Self(text))
        } else {
            Err(format!(
                "fingerprint {text:?} is not 64 lowercase hex digits"
            ))
        }
    }

    /// Wraps text produced by the hasher itself.
    pub(crate) fn from_digest_text(text: String) -> Self {
        debug_assert_eq!(text.len(), 64);
        Self(text)
    }

    /// The hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Sha256Hex {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        Self::new(text)
    }
}

impl From<Sha256Hex> for String {
    fn from(hash: Sha256Hex) -> String {
        hash.0
    }
}

impl fmt::Display for Sha256Hex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Sha256Hex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl JsonSchema for Sha256Hex {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("Sha256Hex")
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schemars::json_schema!({ "type": "string", "pattern": "^[0-9a-f]{64}$" })
    }
}
