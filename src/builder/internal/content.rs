//! The payload fields the internal validation's content checks read (rules 6.3 onwards),
//! borrowed one by one so that the builder can run those checks while it hashes the same
//! payload and writes its plan id.

use std::collections::BTreeSet;

use crate::plan::{MemoryPlan, PlanNode, RetainedCompletionValue};
use crate::request::{
    ExecutionWeightPlan, ModelFamilyId, QuantizationFormatId, ResourceId, Sha256Hex, WeightFormatId,
};

/// Every payload field the content checks (rules 6.3 onwards) read, borrowed: all but the
/// plan id, which only the identity check reads. The builder borrows these fields one by one
/// ([`payload_content!`]) so that the content checks can run while the plan hash is computed
/// and the plan id written into the same payload.
pub(crate) struct PayloadContent<'a> {
    pub(crate) family_id: &'a ModelFamilyId,
    pub(crate) prepared_family_fingerprint: &'a Sha256Hex,
    pub(crate) program_fingerprint: &'a Sha256Hex,
    pub(crate) capability_catalog_fingerprint: &'a Sha256Hex,
    pub(crate) device_runtime_implementation_fingerprint: &'a Sha256Hex,
    pub(crate) policy_fingerprint: &'a Sha256Hex,
    pub(crate) maximum_scheduled_tokens: u64,
    pub(crate) execution_weights: &'a ExecutionWeightPlan,
    pub(crate) weight_format: &'a WeightFormatId,
    pub(crate) quantization_formats: &'a BTreeSet<QuantizationFormatId>,
    pub(crate) retained_completion_values: &'a [RetainedCompletionValue],
    pub(crate) terminal_output_resources: &'a [ResourceId],
    pub(crate) nodes: &'a [PlanNode],
    pub(crate) memory: &'a MemoryPlan,
}

/// The [`PayloadContent`] of a payload place expression, each field borrowed on its own
/// (a macro, not a function, so that the borrows are of the fields and the plan id stays
/// writable beside them).
macro_rules! payload_content {
    ($payload:expr) => {
        $crate::builder::internal::PayloadContent {
            family_id: &$payload.family_id,
            prepared_family_fingerprint: &$payload.prepared_family_fingerprint,
            program_fingerprint: &$payload.program_fingerprint,
            capability_catalog_fingerprint: &$payload.capability_catalog_fingerprint,
            device_runtime_implementation_fingerprint: &$payload
                .device_runtime_implementation_fingerprint,
            policy_fingerprint: &$payload.policy_fingerprint,
            maximum_scheduled_tokens: $payload.maximum_scheduled_tokens,
            execution_weights: &$payload.execution_weights,
            weight_format: &$payload.weight_format,
            quantization_formats: &$payload.quantization_formats,
            retained_completion_values: &$payload.retained_completion_values,
            terminal_output_resources: &$payload.terminal_output_resources,
            nodes: &$payload.nodes,
            memory: &$payload.memory,
        }
    };
}
pub(crate) use payload_content;
