//! Canonical JSON and the SHA-256 fingerprints built on it (domain.md section 5).
//!
//! Two kinds of fingerprint exist and both are needed to reproduce the reference bytes:
//!
//! * [`canonical_fingerprint`]: serialize to a JSON value, sort every object's keys byte-wise
//!   (recursively), print compactly, hash. Used for the plan hash, policy fingerprint, estimate
//!   and estimator-input fingerprints, pool ids, layout fingerprints and bucket ids.
//! * [`declaration_fingerprint`]: the compact serde JSON in struct field-declaration order,
//!   hashed as is. Used for the family, program, catalog and operation fingerprints.
//!
//! `serde_json` is built without `preserve_order`, so maps are always key-sorted and
//! [`serde_json::Value`] objects are sorted as well: converting to a `Value` *is* the
//! recursive key sort.

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::request::Sha256Hex;

/// Why a value could not be put in canonical form.
#[derive(Debug, thiserror::Error)]
#[error("cannot serialize {what} canonically: {source}")]
pub struct CanonicalError {
    what: &'static str,
    #[source]
    source: serde_json::Error,
}

/// The canonical JSON text of `value`: keys sorted byte-wise at every depth, no whitespace.
pub fn canonical_json<T: Serialize + ?Sized>(
    what: &'static str,
    value: &T,
) -> Result<String, CanonicalError> {
    let tree = serde_json::to_value(value).map_err(|source| CanonicalError { what, source })?;
    serde_json::to_string(&tree).map_err(|source| CanonicalError { what, source })
}

/// SHA-256 (lowercase hex) of the canonical JSON of `value`.
pub fn canonical_fingerprint<T: Serialize + ?Sized>(
    what: &'static str,
    value: &T,
) -> Result<Sha256Hex, CanonicalError> {
    Ok(sha256_hex(canonical_json(what, value)?.as_bytes()))
}

/// SHA-256 (lowercase hex) of the compact serde JSON of `value` in declaration order.
pub fn declaration_fingerprint<T: Serialize + ?Sized>(
    what: &'static str,
    value: &T,
) -> Result<Sha256Hex, CanonicalError> {
    let text = serde_json::to_vec(value).map_err(|source| CanonicalError { what, source })?;
    Ok(sha256_hex(&text))
}

/// SHA-256 (lowercase hex) of raw bytes.
pub fn sha256_hex(bytes: &[u8]) -> Sha256Hex {
    let digest = Sha256::digest(bytes);
    let mut text = String::with_capacity(64);
    for byte in digest {
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
        // domain.md section 5: sha256 of `"contiguous"` (with quotes) and of `"opaque_bytes_v1"`.
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
}
