//! Sealing: recomputing every derived fingerprint of a hand-written request.
//!
//! A request quotes fingerprints of other parts of itself: each provider quotes its
//! operation's fingerprint and its execution contract fingerprint, each reusable bucket its
//! id, each provider resource candidate the fingerprint of the estimator input it was
//! computed from and the fingerprint of the estimate itself. After a hand edit those quotes
//! are stale and the planner rightly rejects them; `jointplan seal` recomputes them in
//! dependency order:
//!
//! 1. execution semantics `contract_fingerprint` (depends on the semantics only);
//! 2. provider `operation_fingerprint` (depends on the operation descriptor);
//! 3. reusable bucket ids (depend on class and capacity);
//! 4. the execution weight plan's `source_schema_fingerprint`, when the identity
//!    materializer produced it (depends on the family's weight schema);
//! 5. each candidate's `estimator_input_fingerprint` (depends on the family fingerprint, the
//!    operation fingerprint, the node and its bindings);
//! 6. each candidate's `estimate_fingerprint` (depends on every other candidate field,
//!    step 5 included).
//!
//! Sealing never invents data: a candidate of a node that is not in the program, or of an
//! operation that is not in the catalog, is an error naming it.

use std::collections::BTreeMap;

use crate::canonical::CanonicalError;

use super::fingerprints::{
    estimate_fingerprint, family_fingerprint, node_estimator_input_fingerprint,
    operation_fingerprint, reusable_bucket_id, weight_schema_fingerprint,
};
use super::{NodeId, PlanRequest, ProgramNode, IDENTITY_MATERIALIZER_ID};

/// One fingerprint sealing changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealChange {
    /// JSON path of the field in the request (e.g.
    /// `node_resolutions[2].provider_resource_candidates[0].estimate_fingerprint`).
    pub json_path: String,
    /// The stale value.
    pub old: String,
    /// The recomputed value.
    pub new: String,
}

/// What sealing did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SealReport {
    /// Every field that changed, in the order it was sealed.
    pub changes: Vec<SealChange>,
    /// How many derived fingerprints were checked in total.
    pub checked: usize,
}

impl SealReport {
    /// Whether the request was already sealed.
    pub fn is_unchanged(&self) -> bool {
        self.changes.is_empty()
    }

    fn record(&mut self, json_path: String, old: &str, new: &str) {
        self.checked += 1;
        if old != new {
            self.changes.push(SealChange {
                json_path,
                old: old.to_owned(),
                new: new.to_owned(),
            });
        }
    }
}

/// Why a request could not be sealed.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// A provider row names an operation the catalog does not declare.
    #[error(
        "catalog.providers[{operation:?}]: provider row of operation {operation} has no operation descriptor in catalog.operations"
    )]
    UnknownProviderOperation {
        /// The operation.
        operation: String,
    },
    /// A resolution names a node that is not in the program.
    #[error("node_resolutions[{index}]: node {node} is not a node of the program")]
    UnknownNode {
        /// Index of the resolution.
        index: usize,
        /// The node.
        node: NodeId,
    },
    /// A program node invokes an operation the catalog does not declare.
    #[error(
        "node_resolutions[{index}]: node {node} invokes operation {operation}, which catalog.operations does not declare"
    )]
    UnknownNodeOperation {
        /// Index of the resolution.
        index: usize,
        /// The node.
        node: NodeId,
        /// The operation.
        operation: String,
    },
    /// A fingerprint could not be computed.
    #[error("cannot compute a fingerprint: {0}")]
    Canonical(CanonicalError),
}

/// Recomputes every derived fingerprint of `request` in place, in dependency order, and
/// reports what changed.
pub fn seal(request: &mut PlanRequest) -> Result<SealReport, SealError> {
    let mut report = SealReport::default();

    // 1-2. Provider execution contract fingerprints and operation fingerprints.
    let mut operation_fingerprints = BTreeMap::new();
    for (id, operation) in &request.catalog.operations {
        operation_fingerprints.insert(id.clone(), operation_fingerprint(operation)?);
    }
    for (operation, providers) in &mut request.catalog.providers {
        let expected = operation_fingerprints.get(operation).ok_or_else(|| {
            SealError::UnknownProviderOperation {
                operation: operation.to_string(),
            }
        })?;
        for (index, provider) in providers.iter_mut().enumerate() {
            let base = format!("catalog.providers[{:?}][{index}]", operation.as_str());
            let semantics = provider.execution_semantics.expected_fingerprint();
            report.record(
                format!("{base}.execution_semantics.contract_fingerprint"),
                provider.execution_semantics.contract_fingerprint.as_str(),
                semantics.as_str(),
            );
            provider.execution_semantics.contract_fingerprint = semantics;
            report.record(
                format!("{base}.operation_fingerprint"),
                provider.operation_fingerprint.as_str(),
                expected.as_str(),
            );
            provider.operation_fingerprint = expected.clone();
        }
    }

    // 3. Reusable bucket ids.
    if let Some(reusable) = &mut request.policy.reusable_execution {
        for (index, bucket) in reusable.buckets.iter_mut().enumerate() {
            let id = reusable_bucket_id(&bucket.class_id, &bucket.capacity)?;
            report.record(
                format!("policy.reusable_execution.buckets[{index}].bucket_id"),
                &bucket.bucket_id,
                &id,
            );
            bucket.bucket_id = id;
        }
    }

    // 4. The identity execution weight plan quotes the source schema.
    if let Some(weights) = &mut request.execution_weights {
        if weights.materializer_id.as_str() == IDENTITY_MATERIALIZER_ID {
            let fingerprint = weight_schema_fingerprint(&request.family.weight_schema)?;
            report.record(
                "execution_weights.source_schema_fingerprint".to_owned(),
                weights.source_schema_fingerprint.as_str(),
                fingerprint.as_str(),
            );
            weights.source_schema_fingerprint = fingerprint;
        }
    }

    // 5-6. Estimator input fingerprints, then estimate fingerprints.
    let family = family_fingerprint(&request.family)?;
    let nodes: BTreeMap<&NodeId, &ProgramNode> = request
        .family
        .program
        .nodes()
        .map(|node| (&node.id, node))
        .collect();
    for (index, resolution) in request.node_resolutions.iter_mut().enumerate() {
        let node =
            nodes
                .get(&resolution.node_id)
                .copied()
                .ok_or_else(|| SealError::UnknownNode {
                    index,
                    node: resolution.node_id.clone(),
                })?;
        let operation = request
            .catalog
            .operations
            .get(&node.operation_id)
            .ok_or_else(|| SealError::UnknownNodeOperation {
                index,
                node: node.id.clone(),
                operation: node.operation_id.to_string(),
            })?;
        let fingerprint = match operation_fingerprints.get(&node.operation_id) {
            Some(fingerprint) => fingerprint.clone(),
            None => operation_fingerprint(operation)?,
        };
        let mut inputs = Vec::with_capacity(resolution.provider_resource_candidates.len());
        for candidate in &resolution.provider_resource_candidates {
            inputs.push(node_estimator_input_fingerprint(
                &family,
                operation,
                &fingerprint,
                node,
                resolution,
                &candidate.provider_id,
            )?);
        }
        for (slot, (candidate, input)) in resolution
            .provider_resource_candidates
            .iter_mut()
            .zip(inputs)
            .enumerate()
        {
            let base = format!("node_resolutions[{index}].provider_resource_candidates[{slot}]");
            report.record(
                format!("{base}.estimator_input_fingerprint"),
                candidate.estimator_input_fingerprint.as_str(),
                input.as_str(),
            );
            candidate.estimator_input_fingerprint = input;
            let estimate = estimate_fingerprint(candidate)?;
            report.record(
                format!("{base}.estimate_fingerprint"),
                candidate.estimate_fingerprint.as_str(),
                estimate.as_str(),
            );
            candidate.estimate_fingerprint = estimate;
        }
    }
    Ok(report)
}

// Wrappers displayed with context are not also returned as `source()` (a reporter that
// walks the chain would print the inner error twice), hence these hand-written `From`s.

impl From<CanonicalError> for SealError {
    fn from(error: CanonicalError) -> Self {
        SealError::Canonical(error)
    }
}
