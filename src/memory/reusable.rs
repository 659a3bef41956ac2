//! Reusable-execution budgets (rules 4.6): per policy bucket and base pool, the step and
//! invocation bytes at the bucket's shape; the per-pool ceilings they imply.

use std::collections::BTreeMap;

use crate::request::fingerprints::reusable_bucket_id;
use crate::request::{ReusableExecutionBucket, ReusableExecutionPolicy};

use super::demand::{quantized_bytes, Shape};
use super::error::{overflow, MemoryError};
use super::pools::{invocation_bytes, PoolLayout};
use super::{
    DynamicResourceDescriptor, PoolBudget, ReusableBucketBudget, ReusableExecutionMemoryPlan,
};

/// Most buckets a reusable policy may have.
pub const MAXIMUM_REUSABLE_BUCKETS: usize = 64;

fn invalid(reason: String) -> MemoryError {
    MemoryError::InvalidReusablePolicy { reason }
}

/// The local rules of a reusable-execution policy: lanes > 0; 1..=64 buckets with non-zero
/// capacities and canonical ids; sorted by (class, capacity), each capacity in a class
/// strictly extending the previous; within the sequence (and, when known, token) ceilings.
pub(crate) fn check_reusable_policy(
    lanes: u32,
    buckets: &[ReusableExecutionBucket],
    maximum_sequences: u32,
    maximum_tokens: Option<u64>,
) -> Result<(), MemoryError> {
    if lanes == 0 {
        return Err(invalid("maximum reusable lanes is zero".to_owned()));
    }
    if buckets.is_empty() || buckets.len() > MAXIMUM_REUSABLE_BUCKETS {
        return Err(invalid(format!(
            "{} buckets (1..={MAXIMUM_REUSABLE_BUCKETS})",
            buckets.len()
        )));
    }
    for bucket in buckets {
        let c = &bucket.capacity;
        if c.maximum_sequences == 0 || c.maximum_tokens == 0 || c.maximum_pages == 0 {
            return Err(invalid(format!(
                "bucket {} has a zero capacity",
                bucket.bucket_id
            )));
        }
        let expected = reusable_bucket_id(&bucket.class_id, &bucket.capacity)?;
        if bucket.bucket_id != expected {
            return Err(invalid(format!(
                "bucket {} of class {} should have id {expected}",
                bucket.bucket_id, bucket.class_id
            )));
        }
        if c.maximum_sequences > maximum_sequences {
            return Err(invalid(format!(
                "bucket {} allows {} sequences, above the ceiling {maximum_sequences}",
                bucket.bucket_id, c.maximum_sequences
            )));
        }
        if let Some(tokens) = maximum_tokens {
            if c.maximum_tokens > tokens {
                return Err(invalid(format!(
                    "bucket {} allows {} tokens, above the ceiling {tokens}",
                    bucket.bucket_id, c.maximum_tokens
                )));
            }
        }
    }
    for pair in buckets.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if (&a.class_id, a.capacity) > (&b.class_id, b.capacity) {
            return Err(invalid(format!(
                "bucket {} is not sorted after {} by (class, capacity)",
                b.bucket_id, a.bucket_id
            )));
        }
        if a.class_id == b.class_id {
            let (x, y) = (a.capacity, b.capacity);
            let extends = y.maximum_sequences >= x.maximum_sequences
                && y.maximum_tokens >= x.maximum_tokens
                && y.maximum_pages >= x.maximum_pages
                && y != x;
            if !extends {
                return Err(invalid(format!(
                    "bucket {} of class {} does not strictly extend {}",
                    b.bucket_id, b.class_id, a.bucket_id
                )));
            }
        }
    }
    Ok(())
}

/// Checks the policy and derives the reusable plan from it.
pub(crate) fn derive_from_policy(
    policy: &ReusableExecutionPolicy,
    maximum_sequences: u32,
    maximum_tokens: u64,
    node_count: usize,
    descriptors: &[DynamicResourceDescriptor],
    pools: &[PoolLayout],
) -> Result<ReusableExecutionMemoryPlan, MemoryError> {
    check_reusable_policy(
        policy.maximum_reusable_lanes,
        &policy.buckets,
        maximum_sequences,
        Some(maximum_tokens),
    )?;
    derive_reusable(
        policy.maximum_reusable_lanes,
        &policy.buckets,
        node_count,
        descriptors,
        pools,
    )
}

/// The reusable plan of a (checked) policy: lanes, nodes × buckets × lanes executables,
/// and per bucket the non-zero budgets of every base pool at the bucket's shape.
pub(crate) fn derive_reusable(
    lanes: u32,
    buckets: &[ReusableExecutionBucket],
    node_count: usize,
    descriptors: &[DynamicResourceDescriptor],
    pools: &[PoolLayout],
) -> Result<ReusableExecutionMemoryPlan, MemoryError> {
    if node_count == 0 {
        return Err(MemoryError::NoNodes);
    }
    let maximum_device_executables = u64::try_from(node_count)
        .ok()
        .and_then(|n| n.checked_mul(buckets.len() as u64))
        .and_then(|n| n.checked_mul(u64::from(lanes)))
        .ok_or_else(|| overflow("nodes x buckets x lanes"))?;
    let mut resolved = Vec::with_capacity(buckets.len());
    for bucket in buckets {
        let shape = Shape {
            sequences: bucket.capacity.maximum_sequences,
            tokens: bucket.capacity.maximum_tokens,
            pages: bucket.capacity.maximum_pages,
        };
        let mut pool_budgets = Vec::new();
        for pool in pools {
            let at = |m: usize| -> Result<u64, MemoryError> {
                let d = &descriptors[m];
                quantized_bytes(&d.demand, shape, &d.storage.profile, d.alignment_bytes).map_err(
                    |reason| MemoryError::ReusableBucketShape {
                        bucket: bucket.bucket_id.clone(),
                        pool: pool.pool_id.clone(),
                        resource: d.base_resource_id.clone(),
                        reason,
                    },
                )
            };
            let mut step_bytes = 0u64;
            for slot in &pool.slots {
                let mut largest = 0u64;
                for &m in slot {
                    largest = largest.max(at(m)?);
                }
                step_bytes = step_bytes.checked_add(largest).ok_or_else(|| {
                    overflow(format!(
                        "bucket {} pool {}: step bytes",
                        bucket.bucket_id, pool.pool_id
                    ))
                })?;
            }
            let invocation = invocation_bytes(&pool.phases, &pool.rows, at, || {
                format!(
                    "bucket {} pool {}: invocation bytes",
                    bucket.bucket_id, pool.pool_id
                )
            })?;
            if step_bytes != 0 || invocation != 0 {
                pool_budgets.push(PoolBudget {
                    pool_id: pool.pool_id.clone(),
                    step_bytes,
                    invocation_bytes: invocation,
                });
            }
        }
        resolved.push(ReusableBucketBudget {
            bucket: bucket.clone(),
            pool_budgets,
        });
    }
    Ok(ReusableExecutionMemoryPlan {
        maximum_reusable_lanes: lanes,
        maximum_device_executables,
        buckets: resolved,
    })
}

/// Per pool: Σ over buckets of (step + invocation bytes) × lanes. Every budget must name a
/// known pool.
pub(crate) fn ceilings(
    plan: &ReusableExecutionMemoryPlan,
    pools: &[PoolLayout],
) -> Result<BTreeMap<String, u64>, MemoryError> {
    let mut ceilings: BTreeMap<String, u64> = BTreeMap::new();
    for bucket in &plan.buckets {
        for budget in &bucket.pool_budgets {
            if pools
                .binary_search_by(|p| p.pool_id.cmp(&budget.pool_id))
                .is_err()
            {
                return Err(MemoryError::UnknownCeilingPool {
                    pool: budget.pool_id.clone(),
                });
            }
            let context = || format!("reusable ceiling of pool {}", budget.pool_id);
            let bytes = budget
                .step_bytes
                .checked_add(budget.invocation_bytes)
                .and_then(|b| b.checked_mul(u64::from(plan.maximum_reusable_lanes)))
                .ok_or_else(|| overflow(context()))?;
            let entry = ceilings.entry(budget.pool_id.clone()).or_insert(0);
            *entry = entry
                .checked_add(bytes)
                .ok_or_else(|| overflow(context()))?;
        }
    }
    Ok(ceilings)
}
