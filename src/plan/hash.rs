//! The plan hash and plan id (rules 5).
//!
//! The hash material is every payload field except `plan_id`: the payload is hashed with
//! its plan id set to the fixed text [`UNSET_PLAN_ID`], which hashes exactly the same
//! information and keeps one struct the single source of truth for the field set.
//! (Adaptation: the reference hashes a separate material struct without the field; the
//! information content is identical.)
//!
//! The payload is not cloned to unset its id: [`HashMaterial`] borrows every field and
//! serializes under the same names, and its constructor destructures the payload
//! exhaustively, so a field added to the payload without being hashed does not compile.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::canonical::{sorted_struct_fingerprint, CanonicalError};
use crate::request::{
    ContractVersion, DeviceId, ExecutionWeightPlan, ModelFamilyId, QuantizationFormatId,
    ResourceId, Sha256Hex, WeightFormatId,
};

use super::{
    ExecutionPlanPayload, MemoryPlan, PlanNode, RetainedCompletionValue, SelectionSettings,
};

/// The plan id of a payload whose hash is not computed yet.
pub const UNSET_PLAN_ID: &str = "plan/unset";

/// The payload as hashed: every field borrowed, the plan id replaced by [`UNSET_PLAN_ID`].
/// Field names equal the payload's. They are declared in key order (byte-wise sorted), so
/// the hash is written field by field ([`sorted_struct_fingerprint`]) without holding the
/// whole canonical text; a field added out of order makes every hash an error, never a
/// different hash.
#[derive(Serialize)]
struct HashMaterial<'a> {
    capability_catalog_fingerprint: &'a Sha256Hex,
    device_id: &'a DeviceId,
    device_runtime_implementation_fingerprint: &'a Sha256Hex,
    execution_weights: &'a ExecutionWeightPlan,
    family_id: &'a ModelFamilyId,
    maximum_scheduled_tokens: u64,
    memory: &'a MemoryPlan,
    nodes: &'a [PlanNode],
    plan_id: &'static str,
    policy_fingerprint: &'a Sha256Hex,
    policy_version: &'a ContractVersion,
    prepared_family_fingerprint: &'a Sha256Hex,
    program_fingerprint: &'a Sha256Hex,
    quantization_formats: &'a BTreeSet<QuantizationFormatId>,
    retained_completion_values: &'a [RetainedCompletionValue],
    schema: &'a ContractVersion,
    #[serde(skip_serializing_if = "SelectionSettings::is_default")]
    selection_settings: &'a SelectionSettings,
    terminal_output_resources: &'a [ResourceId],
    weight_format: &'a WeightFormatId,
}

impl<'a> HashMaterial<'a> {
    fn of(payload: &'a ExecutionPlanPayload) -> Self {
        let ExecutionPlanPayload {
            schema,
            plan_id: _,
            family_id,
            device_id,
            device_runtime_implementation_fingerprint,
            prepared_family_fingerprint,
            program_fingerprint,
            capability_catalog_fingerprint,
            policy_version,
            policy_fingerprint,
            maximum_scheduled_tokens,
            execution_weights,
            weight_format,
            quantization_formats,
            retained_completion_values,
            terminal_output_resources,
            nodes,
            memory,
            selection_settings,
        } = payload;
        HashMaterial {
            schema,
            plan_id: UNSET_PLAN_ID,
            family_id,
            device_id,
            device_runtime_implementation_fingerprint,
            prepared_family_fingerprint,
            program_fingerprint,
            capability_catalog_fingerprint,
            policy_version,
            policy_fingerprint,
            maximum_scheduled_tokens: *maximum_scheduled_tokens,
            execution_weights,
            weight_format,
            quantization_formats,
            retained_completion_values,
            terminal_output_resources,
            nodes,
            memory,
            selection_settings,
        }
    }
}

/// The canonical sha256 of the payload, its plan id ignored.
pub fn plan_hash(payload: &ExecutionPlanPayload) -> Result<Sha256Hex, CanonicalError> {
    sorted_struct_fingerprint("plan payload", &HashMaterial::of(payload))
}

/// `plan/sha256/<hash>`.
pub fn plan_id(hash: &Sha256Hex) -> String {
    format!("plan/sha256/{hash}")
}
