//! Stable identities, contract versions and fingerprints (rules 1.1).
//!
//! Every id is a newtype over a string of 1..=160 bytes drawn from ASCII alphanumerics and
//! `. _ - : /`. Ids are validated when they are deserialized, so a malformed id is reported
//! with the JSON path of the field that holds it and can never reach the planner.

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

pub use crate::canonical::Sha256Hex;

/// A lookup table keyed by ids (or by references to them): a hash map with the Fx hasher.
///
/// Why: a hot table of a large plan (resource id to its memory row, value id to its
/// producer) was a `BTreeMap`, and finding a key in one compares it with about
/// log2(n) stored ids, each a `memcmp` over ids that share long prefixes
/// (`resource/activation/...`) and lie scattered over the heap: about 14% of `plan`'s CPU
/// on DeepSeek-V3 was `memcmp`, nearly all of it such lookups. A hash lookup reads the key
/// once and compares it with one stored id.
///
/// Its iteration order is deterministic (the hasher has no random state, so the same
/// inserts give the same order in every run and on every thread count) but it is not the
/// ids' order: a table whose order reaches a plan, a message or a report stays ordered
/// (`BTreeMap`), and an `IdMap` is only looked up or iterated where order cannot matter
/// (sums, or results sorted afterwards).
pub type IdMap<K, V> = rustc_hash::FxHashMap<K, V>;

/// A set of ids (or of references to them) for membership tests: see [`IdMap`].
pub type IdSet<K> = rustc_hash::FxHashSet<K>;

/// Longest id, in bytes.
pub const MAX_ID_BYTES: usize = crate::json_input::MAX_NAME_BYTES;

/// Why a string is not a portable id: it must be an identifier at all
/// ([`crate::json_input::name_problem`]) and use only ASCII letters, digits and `. _ - : /`.
pub fn portable_id_problem(text: &str) -> Option<String> {
    // The common case in one pass over the bytes: the length in range and every byte
    // portable. A portable byte is printable ASCII, so neither a control nor an invisible
    // formatting character: `name_problem` has nothing to say. Every id of every request
    // and plan read comes here; decoding each as chars for `name_problem` was 2-6% of
    // `plan` and `check` on DeepSeek-V3.
    if (1..=MAX_ID_BYTES).contains(&text.len())
        && text.bytes().all(|byte| PORTABLE[usize::from(byte)])
    {
        return None;
    }
    if let Some(problem) = crate::json_input::name_problem(text) {
        return Some(problem);
    }
    text.chars()
        .find(|&c| !u8::try_from(c).is_ok_and(is_portable_byte))
        .map(|c| format!("contains {c:?} (allowed: ASCII letters, digits and . _ - : /)"))
}

/// Whether a byte may appear in a portable id: an ASCII letter or digit, or `. _ - : /`.
const fn is_portable_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-' | b':' | b'/')
}

/// [`is_portable_byte`] of every byte value, looked up once per byte of an id.
const PORTABLE: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 256 {
        table[byte] = is_portable_byte(byte as u8);
        byte += 1;
    }
    table
};

macro_rules! portable_id {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
        #[serde(try_from = "String")]
        pub struct $name(String);

        // Serialized as its text, borrowed: `#[serde(into = "String")]` would clone the
        // id on every serialization (every fingerprint, plan hash and plan file).
        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }

        impl $name {
            /// Builds the id, or says why the text is not a portable id.
            pub fn new(text: impl Into<String>) -> Result<Self, String> {
                let text = text.into();
                match portable_id_problem(&text) {
                    None => Ok(Self(text)),
                    Some(problem) => Err(format!(
                        concat!(stringify!($name), " {:?} {}"),
                        text, problem
                    )),
                }
            }

            /// The id text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = String;
            fn try_from(text: String) -> Result<Self, String> {
                Self::new(text)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:?}", self.0)
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl JsonSchema for $name {
            fn schema_name() -> Cow<'static, str> {
                Cow::Borrowed(stringify!($name))
            }
            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                schemars::json_schema!({
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_ID_BYTES,
                    "pattern": "^[A-Za-z0-9._:/-]+$"
                })
            }
        }
    };
}

portable_id!(
    /// A capability a device offers and a provider or operation requires.
    CapabilityId
);
portable_id!(
    /// A device.
    DeviceId
);
portable_id!(
    /// A model family (one model configuration).
    ModelFamilyId
);
portable_id!(
    /// A program node.
    NodeId
);
portable_id!(
    /// An operation of the capability catalog.
    OperationId
);
portable_id!(
    /// A value of the model program (input, output, weight, state or activation).
    ProgramValueId
);
portable_id!(
    /// A provider (kernel implementation) of an operation, or a runtime engine.
    ProviderId
);
portable_id!(
    /// A quantization format.
    QuantizationFormatId
);
portable_id!(
    /// A memory resource (a buffer that bindings place components in).
    ResourceId
);
portable_id!(
    /// A per-sequence or per-request state of the program (a KV cache, a recurrent state).
    StateId
);
portable_id!(
    /// A weight tensor or weight component.
    WeightId
);
portable_id!(
    /// A weight format.
    WeightFormatId
);
portable_id!(
    /// A weight layout.
    WeightLayoutId
);
portable_id!(
    /// A node attribute key.
    AttributeId
);
portable_id!(
    /// A resource estimator of a provider.
    EstimatorId
);
portable_id!(
    /// A runtime policy.
    PolicyId
);
portable_id!(
    /// A class of reusable executions (e.g. `uniform-query`).
    ReusableExecutionClassId
);
portable_id!(
    /// A weight materializer.
    MaterializerId
);

/// A contract version `{major, minor}`, ordered by (major, minor). Major 0 is unstable.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct ContractVersion {
    /// Incompatible changes bump the major version.
    pub major: u16,
    /// Compatible additions bump the minor version.
    pub minor: u16,
}

impl ContractVersion {
    /// `major.minor`.
    pub const fn new(major: u16, minor: u16) -> Self {
        Self { major, minor }
    }

    /// `self` can serve a request for `required`: same major, minor at least as new.
    pub fn satisfies(self, required: ContractVersion) -> bool {
        self.major == required.major && self.minor >= required.minor
    }

    /// Major 0 is the unstable series, rejected nearly everywhere.
    pub fn is_stable(self) -> bool {
        self.major != 0
    }
}

impl fmt::Display for ContractVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_checked_on_load() {
        assert!(NodeId::new("node.layer.0/attention:a-b_c").is_ok());
        assert!(NodeId::new("").is_err());
        assert!(NodeId::new("node with space").is_err());
        assert!(NodeId::new("x".repeat(161)).is_err());
        let err = serde_json::from_str::<NodeId>("\"bad id\"").unwrap_err();
        assert!(err.to_string().contains("NodeId \"bad id\""), "{err}");
    }

    #[test]
    fn every_byte_is_judged_as_the_rule_says() {
        for code in 0u32..0x300 {
            let c = char::from_u32(code).unwrap();
            let allowed = c.is_ascii_alphanumeric() || ".:_-/".contains(c);
            for text in [
                format!("{c}"),
                format!("a{c}"),
                format!("{c}b"),
                format!("a{c}b"),
            ] {
                let problem = portable_id_problem(&text);
                assert_eq!(problem.is_none(), allowed, "{text:?}: {problem:?}");
            }
        }
        assert_eq!(portable_id_problem(&"x".repeat(MAX_ID_BYTES)), None);
        let long = portable_id_problem(&"x".repeat(MAX_ID_BYTES + 1)).unwrap();
        assert!(long.contains("161 bytes long"), "{long}");
        assert_eq!(portable_id_problem("").unwrap(), "is empty");
        let control = portable_id_problem("a\u{202E}b").unwrap();
        assert!(control.contains("U+202E"), "{control}");
        let space = portable_id_problem("a b").unwrap();
        assert!(space.contains("contains ' '"), "{space}");
    }

    #[test]
    fn version_satisfaction() {
        let v = ContractVersion::new(2, 3);
        assert!(v.satisfies(ContractVersion::new(2, 1)));
        assert!(!v.satisfies(ContractVersion::new(2, 4)));
        assert!(!v.satisfies(ContractVersion::new(1, 0)));
    }
}
