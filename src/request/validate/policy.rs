//! Runtime policy rules (rules 1.7, 2.1 steps 1 and 3).

use std::collections::HashMap;

use crate::request::fingerprints::reusable_bucket_id;
use crate::request::{BucketCapacity, CapabilityCatalog, ReusableExecutionPolicy, RuntimePolicy};

use super::RequestError;

/// Most buckets of a reusable-execution policy.
pub const MAX_REUSABLE_BUCKETS: usize = 64;

/// Checks the policy on its own and against the catalog device.
pub(super) fn validate_policy(
    policy: &RuntimePolicy,
    catalog: &CapabilityCatalog,
) -> Result<(), RequestError> {
    let name = policy.policy_id.as_str();
    if !policy.version.is_stable() {
        return Err(RequestError::UnstablePolicyVersion {
            path: "policy.version.major".to_owned(),
            detail: format!("policy {name:?} has version {}", policy.version),
        });
    }
    let capacity = policy.memory_capacity_bytes;
    let device = &catalog.device;
    if capacity == 0 {
        return Err(RequestError::InvalidMemoryCapacity {
            path: "policy.memory_capacity_bytes".to_owned(),
            detail: format!("policy {name:?} plans for zero bytes"),
        });
    }
    if capacity > device.total_memory_bytes {
        return Err(RequestError::InvalidMemoryCapacity {
            path: "policy.memory_capacity_bytes".to_owned(),
            detail: format!(
                "policy {name:?} plans for {capacity} bytes, device {:?} has {}",
                device.id.as_str(),
                device.total_memory_bytes
            ),
        });
    }
    if policy.memory_reserve_bytes >= capacity {
        return Err(RequestError::InvalidMemoryCapacity {
            path: "policy.memory_reserve_bytes".to_owned(),
            detail: format!(
                "policy {name:?} reserves {} of its {capacity} bytes (the reserve must be smaller)",
                policy.memory_reserve_bytes
            ),
        });
    }
    if policy.maximum_active_sequences == 0 {
        return Err(RequestError::ZeroPolicyCeiling {
            path: "policy.maximum_active_sequences".to_owned(),
            detail: format!("policy {name:?} admits no sequence"),
        });
    }
    if policy.maximum_scheduled_tokens == 0 {
        return Err(RequestError::ZeroPolicyCeiling {
            path: "policy.maximum_scheduled_tokens".to_owned(),
            detail: format!("policy {name:?} schedules no token"),
        });
    }
    let order = &policy.dynamic_storage_profile_order;
    if order.is_empty() {
        return Err(RequestError::InvalidProfileOrder {
            path: "policy.dynamic_storage_profile_order".to_owned(),
            detail: format!("policy {name:?} allows no storage profile"),
        });
    }
    let mut seen = HashMap::new();
    for (i, profile) in order.iter().enumerate() {
        let path = format!("policy.dynamic_storage_profile_order[{i}]");
        if let Some(problem) = profile.problem() {
            return Err(RequestError::InvalidProfileOrder {
                path,
                detail: format!("profile {profile}: {problem}"),
            });
        }
        if let Some(first) = seen.insert(*profile, i) {
            return Err(RequestError::InvalidProfileOrder {
                path,
                detail: format!("profile {profile} is also ranked {first}"),
            });
        }
    }
    if let Some(reusable) = &policy.reusable_execution {
        validate_reusable(reusable, policy)?;
    }
    Ok(())
}

fn validate_reusable(
    reusable: &ReusableExecutionPolicy,
    policy: &RuntimePolicy,
) -> Result<(), RequestError> {
    const PATH: &str = "policy.reusable_execution";
    let bad =
        |path: String, detail: String| RequestError::InvalidReusableExecution { path, detail };
    if reusable.maximum_reusable_lanes == 0 {
        return Err(bad(
            format!("{PATH}.maximum_reusable_lanes"),
            "reusable executions get zero lanes".to_owned(),
        ));
    }
    let count = reusable.buckets.len();
    if count == 0 || count > MAX_REUSABLE_BUCKETS {
        return Err(bad(
            format!("{PATH}.buckets"),
            format!("{count} buckets (1..={MAX_REUSABLE_BUCKETS} allowed)"),
        ));
    }
    for (i, bucket) in reusable.buckets.iter().enumerate() {
        let path = format!("{PATH}.buckets[{i}]");
        let class = bucket.class_id.as_str();
        let capacity = bucket.capacity;
        let zero = [
            ("maximum_sequences", u64::from(capacity.maximum_sequences)),
            ("maximum_tokens", capacity.maximum_tokens),
            ("maximum_pages", capacity.maximum_pages),
        ]
        .into_iter()
        .find(|(_, v)| *v == 0);
        if let Some((field, _)) = zero {
            return Err(bad(
                format!("{path}.capacity.{field}"),
                format!("bucket of class {class:?} has zero {field}"),
            ));
        }
        if capacity.maximum_sequences > policy.maximum_active_sequences {
            return Err(bad(
                format!("{path}.capacity.maximum_sequences"),
                format!(
                    "bucket of class {class:?} holds {} sequences, the policy admits {}",
                    capacity.maximum_sequences, policy.maximum_active_sequences
                ),
            ));
        }
        if capacity.maximum_tokens > policy.maximum_scheduled_tokens {
            return Err(bad(
                format!("{path}.capacity.maximum_tokens"),
                format!(
                    "bucket of class {class:?} holds {} tokens, the policy schedules {}",
                    capacity.maximum_tokens, policy.maximum_scheduled_tokens
                ),
            ));
        }
        let expected = reusable_bucket_id(&bucket.class_id, &capacity)
            .map_err(|e| RequestError::fingerprint(&path, e))?;
        if bucket.bucket_id != expected {
            return Err(RequestError::ReusableBucketIdMismatch {
                path: format!("{path}.bucket_id"),
                detail: format!(
                    "bucket of class {class:?} is named {:?}, its class and capacity give {expected:?}",
                    bucket.bucket_id
                ),
            });
        }
        if i > 0 {
            let previous = &reusable.buckets[i - 1];
            if (&previous.class_id, previous.capacity) >= (&bucket.class_id, capacity) {
                return Err(bad(
                    path,
                    format!(
                        "bucket {} of class {class:?} is not after bucket {} of class {:?} \
                         (sorted by class, capacity; unique)",
                        describe(&capacity),
                        describe(&previous.capacity),
                        previous.class_id.as_str()
                    ),
                ));
            }
            if previous.class_id == bucket.class_id && !extends(&previous.capacity, &capacity) {
                return Err(bad(
                    format!("{path}.capacity"),
                    format!(
                        "bucket {} of class {class:?} does not strictly extend the previous \
                         bucket {} (every maximum at least as large, one larger)",
                        describe(&capacity),
                        describe(&previous.capacity)
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn extends(previous: &BucketCapacity, next: &BucketCapacity) -> bool {
    let ge = next.maximum_sequences >= previous.maximum_sequences
        && next.maximum_tokens >= previous.maximum_tokens
        && next.maximum_pages >= previous.maximum_pages;
    ge && next != previous
}

fn describe(capacity: &BucketCapacity) -> String {
    format!(
        "({} sequences, {} tokens, {} pages)",
        capacity.maximum_sequences, capacity.maximum_tokens, capacity.maximum_pages
    )
}
