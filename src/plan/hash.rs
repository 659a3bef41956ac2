//! The plan hash and plan id (domain.md section 5).
//!
//! The hash material is every payload field except `plan_id`: the payload is hashed with
//! its plan id set to the fixed text [`UNSET_PLAN_ID`], which hashes exactly the same
//! information and keeps one struct the single source of truth for the field set.
//! (Adaptation: the reference hashes a separate material struct without the field; the
//! information content is identical.)

use crate::canonical::{canonical_fingerprint, CanonicalError};
use crate::request::Sha256Hex;

use super::ExecutionPlanPayload;

/// The plan id of a payload whose hash is not computed yet.
pub const UNSET_PLAN_ID: &str = "plan/unset";

/// The canonical sha256 of the payload, its plan id ignored.
pub fn plan_hash(payload: &ExecutionPlanPayload) -> Result<Sha256Hex, CanonicalError> {
    if payload.plan_id == UNSET_PLAN_ID {
        return canonical_fingerprint("plan payload", payload);
    }
    let mut unset = payload.clone();
    unset.plan_id = UNSET_PLAN_ID.to_owned();
    canonical_fingerprint("plan payload", &unset)
}

/// `plan/sha256/<hash>`.
pub fn plan_id(hash: &Sha256Hex) -> String {
    format!("plan/sha256/{hash}")
}
