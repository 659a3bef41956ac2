//! Provider resource candidates, workspaces and rejection evidence (rules 1.6).

use super::*;

// ---------------------------------------------------------------- candidates and workspaces (1.6)

const C: &str = "node_resolutions[0].provider_resource_candidates";

rejects!(
    resolution_without_candidates,
    |r| {
        candidates(&mut r).clear();
    },
    InvalidCandidateList,
    C,
    "node.main"
);
rejects!(
    unsorted_candidates,
    |r| {
        candidates(&mut r).swap(0, 1);
    },
    InvalidCandidateList,
    &format!("{C}[1].provider_id"),
    "provider.operation.reference"
);
rejects!(
    repeated_candidate,
    |r| {
        let again = candidates(&mut r)[1].clone();
        candidates(&mut r).push(again);
    },
    InvalidCandidateList,
    &format!("{C}[2].provider_id"),
    "provider.operation.secondary"
);
rejects!(
    estimate_with_unstable_estimator,
    |r| {
        candidates(&mut r)[0].estimator_version = ContractVersion::new(0, 1);
        reseal_estimates(&mut r);
    },
    InvalidEstimate,
    &format!("{C}[0].estimator_version.major"),
    "provider.operation.reference"
);
rejects!(
    estimate_with_zero_alignment,
    |r| {
        candidates(&mut r)[1].value_alignment_bytes = 0;
        reseal_estimates(&mut r);
    },
    InvalidEstimate,
    &format!("{C}[1].value_alignment_bytes"),
    "provider.operation.secondary"
);
rejects!(
    estimate_with_odd_alignment,
    |r| {
        candidates(&mut r)[1].value_alignment_bytes = 48;
        reseal_estimates(&mut r);
    },
    InvalidEstimate,
    &format!("{C}[1].value_alignment_bytes"),
    "48"
);
rejects!(
    scratch_that_outlives_the_invocation,
    |r| {
        scratch(&mut r).scope = WorkspaceScope::Step;
        reseal_estimates(&mut r);
    },
    InvalidEstimate,
    &format!("{C}[0].scratch.scope"),
    "scratch workspace"
);
rejects!(
    binding_workspace_that_outlives_the_invocation,
    |r| {
        let workspace = scratch(&mut r).clone();
        candidates(&mut r)[1].binding = Some(WorkspaceRequirement {
            scope: WorkspaceScope::Request,
            ..workspace
        });
        reseal_estimates(&mut r);
    },
    InvalidEstimate,
    &format!("{C}[1].binding.scope"),
    "binding workspace"
);
rejects!(
    persistent_workspace_per_invocation,
    |r| {
        let workspace = scratch(&mut r).clone();
        candidates(&mut r)[1].persistent = Some(workspace);
        reseal_estimates(&mut r);
    },
    InvalidEstimate,
    &format!("{C}[1].persistent.scope"),
    "persistent"
);

fn with_formula(r: &mut PlanRequest, formula: WorkspaceSizeFormula) {
    scratch(r).size_formula = formula;
    reseal_estimates(r);
}

fn shape(sequences: u32, tokens: u64, pages: u64, bytes: u64) -> ShapeBucket {
    ShapeBucket {
        maximum_sequences: sequences,
        maximum_tokens: tokens,
        maximum_pages: pages,
        bytes,
    }
}

const S: &str = "node_resolutions[0].provider_resource_candidates[0].scratch";

rejects!(
    fixed_formula_of_zero_bytes,
    |r| {
        with_formula(&mut r, WorkspaceSizeFormula::Fixed { bytes: 0 });
    },
    InvalidWorkspace,
    &format!("{S}.size_formula.fixed.bytes"),
    "provider.operation.reference\" scratch workspace"
);
rejects!(
    sequence_formula_of_zero_bytes,
    |r| {
        with_formula(
            &mut r,
            WorkspaceSizeFormula::ActualSequences {
                bytes_per_sequence: 0,
            },
        );
    },
    InvalidWorkspace,
    &format!("{S}.size_formula.actual_sequences.bytes_per_sequence"),
    "zero"
);
rejects!(
    token_formula_of_zero_bytes,
    |r| {
        with_formula(&mut r, WorkspaceSizeFormula::Tokens { bytes_per_token: 0 });
    },
    InvalidWorkspace,
    &format!("{S}.size_formula.tokens.bytes_per_token"),
    "zero"
);
rejects!(
    affine_formula_without_unit_terms,
    |r| {
        with_formula(
            &mut r,
            WorkspaceSizeFormula::Affine {
                fixed_bytes: 64,
                bytes_per_sequence: 0,
                bytes_per_token: 0,
            },
        );
    },
    InvalidWorkspace,
    &format!("{S}.size_formula.affine"),
    "use fixed"
);
rejects!(
    affine_formula_overflow,
    |r| {
        with_formula(
            &mut r,
            WorkspaceSizeFormula::Affine {
                fixed_bytes: u64::MAX,
                bytes_per_sequence: 0,
                bytes_per_token: 1,
            },
        );
    },
    InvalidWorkspace,
    &format!("{S}.size_formula.affine"),
    "overflow"
);
rejects!(
    page_formula_without_pages,
    |r| {
        with_formula(
            &mut r,
            WorkspaceSizeFormula::Pages {
                bytes_per_page: 4096,
                maximum_pages: 0,
            },
        );
    },
    InvalidWorkspace,
    &format!("{S}.size_formula.pages.maximum_pages"),
    "maximum pages"
);
rejects!(
    page_formula_of_zero_bytes,
    |r| {
        with_formula(
            &mut r,
            WorkspaceSizeFormula::Pages {
                bytes_per_page: 0,
                maximum_pages: 8,
            },
        );
    },
    InvalidWorkspace,
    &format!("{S}.size_formula.pages.bytes_per_page"),
    "bytes per page"
);
rejects!(
    page_formula_overflow,
    |r| {
        with_formula(
            &mut r,
            WorkspaceSizeFormula::Pages {
                bytes_per_page: 1 << 40,
                maximum_pages: 1 << 30,
            },
        );
    },
    InvalidWorkspace,
    &format!("{S}.size_formula.pages"),
    "overflows"
);
rejects!(
    bucket_formula_without_buckets,
    |r| {
        with_formula(
            &mut r,
            WorkspaceSizeFormula::BoundedShapeBuckets { buckets: vec![] },
        );
    },
    InvalidWorkspace,
    &format!("{S}.size_formula.bounded_shape_buckets.buckets"),
    "0 buckets"
);
rejects!(
    bucket_formula_with_65_buckets,
    |r| {
        let buckets = (1..=65).map(|t| shape(1, t, 1, 64)).collect();
        with_formula(
            &mut r,
            WorkspaceSizeFormula::BoundedShapeBuckets { buckets },
        );
    },
    InvalidWorkspace,
    &format!("{S}.size_formula.bounded_shape_buckets.buckets"),
    "65 buckets"
);
rejects!(
    bucket_formula_with_zero_bytes,
    |r| {
        with_formula(
            &mut r,
            WorkspaceSizeFormula::BoundedShapeBuckets {
                buckets: vec![shape(1, 1, 1, 0)],
            },
        );
    },
    InvalidWorkspace,
    &format!("{S}.size_formula.bounded_shape_buckets.buckets[0].bytes"),
    "zero bytes"
);
rejects!(
    bucket_formula_that_shrinks,
    |r| {
        with_formula(
            &mut r,
            WorkspaceSizeFormula::BoundedShapeBuckets {
                buckets: vec![shape(1, 4, 1, 64), shape(2, 2, 1, 128)],
            },
        );
    },
    InvalidWorkspace,
    &format!("{S}.size_formula.bounded_shape_buckets.buckets[1]"),
    "strictly extend"
);
rejects!(
    bucket_formula_with_fewer_bytes,
    |r| {
        with_formula(
            &mut r,
            WorkspaceSizeFormula::BoundedShapeBuckets {
                buckets: vec![shape(1, 4, 1, 64), shape(2, 4, 1, 32)],
            },
        );
    },
    InvalidWorkspace,
    &format!("{S}.size_formula.bounded_shape_buckets.buckets[1]"),
    "bucket 1"
);
rejects!(
    bucket_formula_repeated_shape,
    |r| {
        with_formula(
            &mut r,
            WorkspaceSizeFormula::BoundedShapeBuckets {
                buckets: vec![shape(1, 4, 1, 64), shape(1, 4, 1, 64)],
            },
        );
    },
    InvalidWorkspace,
    &format!("{S}.size_formula.bounded_shape_buckets.buckets[1]"),
    "strictly extend"
);
rejects!(
    workspace_alignment_not_power_of_two,
    |r| {
        scratch(&mut r).alignment_bytes = 12;
        reseal_estimates(&mut r);
    },
    InvalidWorkspace,
    &format!("{S}.alignment_bytes"),
    "12"
);
rejects!(
    workspace_rounding_overflow,
    |r| {
        with_formula(
            &mut r,
            WorkspaceSizeFormula::Fixed {
                bytes: u64::MAX - 1,
            },
        );
    },
    InvalidWorkspace,
    &format!("{S}.alignment_bytes"),
    "overflow"
);
rejects!(
    workspace_without_profiles,
    |r| {
        scratch(&mut r).storage.accepted_profiles.clear();
        reseal_estimates(&mut r);
    },
    InvalidWorkspace,
    &format!("{S}.storage.accepted_profiles"),
    "accepts no storage profile"
);
rejects!(
    workspace_with_illegal_profile,
    |r| {
        scratch(&mut r).storage.accepted_profiles = vec![StorageProfile {
            allocator: StorageAllocator::FixedBlockArena { block_bytes: 3000 },
            view: StorageView::Contiguous,
        }];
        reseal_estimates(&mut r);
    },
    InvalidWorkspace,
    &format!("{S}.storage.accepted_profiles"),
    "3000"
);

fn persistent(r: &mut PlanRequest, scope: WorkspaceScope, formula: WorkspaceSizeFormula) {
    let workspace = scratch(r).clone();
    candidates(r)[1].persistent = Some(WorkspaceRequirement {
        scope,
        size_formula: formula,
        ..workspace
    });
    reseal_estimates(r);
}

rejects!(
    plan_scope_with_growing_formula,
    |r| {
        persistent(
            &mut r,
            WorkspaceScope::Plan,
            WorkspaceSizeFormula::Tokens { bytes_per_token: 8 },
        );
    },
    InvalidWorkspace,
    &format!("{C}[1].persistent.scope"),
    "fixed size formula"
);
rejects!(
    sequence_scope_with_sequence_formula,
    |r| {
        persistent(
            &mut r,
            WorkspaceScope::Sequence,
            WorkspaceSizeFormula::ActualSequences {
                bytes_per_sequence: 8,
            },
        );
    },
    InvalidWorkspace,
    &format!("{C}[1].persistent.scope"),
    "sequence count"
);
rejects!(
    sequence_scope_with_affine_sequence_term,
    |r| {
        persistent(
            &mut r,
            WorkspaceScope::Sequence,
            WorkspaceSizeFormula::Affine {
                fixed_bytes: 0,
                bytes_per_sequence: 8,
                bytes_per_token: 8,
            },
        );
    },
    InvalidWorkspace,
    &format!("{C}[1].persistent.scope"),
    "sequence count"
);
rejects!(
    sequence_scope_with_multi_sequence_buckets,
    |r| {
        persistent(
            &mut r,
            WorkspaceScope::Sequence,
            WorkspaceSizeFormula::BoundedShapeBuckets {
                buckets: vec![shape(1, 1, 1, 64), shape(2, 1, 1, 64)],
            },
        );
    },
    InvalidWorkspace,
    &format!("{C}[1].persistent.scope"),
    "provider.operation.secondary\" persistent workspace"
);
rejects!(
    stale_estimate_fingerprint,
    |r| {
        candidates(&mut r)[1].value_alignment_bytes = 32;
    },
    EstimateFingerprintMismatch,
    &format!("{C}[1].estimate_fingerprint"),
    "jointplan seal"
);
rejects!(
    provider_both_candidate_and_rejected,
    |r| {
        r.node_resolutions[0].provider_resolution_rejections.insert(
            id("provider.operation.secondary"),
            ResolutionRejection::StorageIncompatible {
                resource_ids: vec![id("resource/shared-state")],
            },
        );
    },
    CandidateAlsoRejected,
    "node_resolutions[0].provider_resolution_rejections[\"provider.operation.secondary\"]",
    "provider.operation.secondary"
);
rejects!(rejection_without_resources, |r| {
        r.node_resolutions[1].provider_resolution_rejections.insert(id("provider/fallback"),
            ResolutionRejection::StorageIncompatible { resource_ids: vec![] });
    }, InvalidResolutionRejection,
    "node_resolutions[1].provider_resolution_rejections[\"provider/fallback\"].storage_incompatible.resource_ids", "node.residual");
rejects!(rejection_with_unsorted_resources, |r| {
        r.node_resolutions[1].provider_resolution_rejections.insert(id("provider/fallback"),
            ResolutionRejection::StorageIncompatible {
                resource_ids: vec![id("resource/shared-state"), id("resource/activation-a")] });
    }, InvalidResolutionRejection,
    "node_resolutions[1].provider_resolution_rejections[\"provider/fallback\"].storage_incompatible.resource_ids[1]", "resource/activation-a");
