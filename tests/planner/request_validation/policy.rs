//! The runtime policy (rules 1.7).

use super::*;

// ---------------------------------------------------------------- policy (1.7)

rejects!(
    unstable_policy,
    |r| {
        r.policy.version = ContractVersion::new(0, 2);
    },
    UnstablePolicyVersion,
    "policy.version.major",
    "runtime-policy.test"
);
rejects!(
    policy_without_capacity,
    |r| {
        r.policy.memory_capacity_bytes = 0;
        r.policy.memory_reserve_bytes = 0;
    },
    InvalidMemoryCapacity,
    "policy.memory_capacity_bytes",
    "zero bytes"
);
rejects!(
    policy_above_device_memory,
    |r| {
        r.policy.memory_capacity_bytes = (1 << 20) + 1;
    },
    InvalidMemoryCapacity,
    "policy.memory_capacity_bytes",
    "device.reference.0"
);
rejects!(
    policy_reserve_not_below_capacity,
    |r| {
        r.policy.memory_reserve_bytes = 1 << 20;
    },
    InvalidMemoryCapacity,
    "policy.memory_reserve_bytes",
    "1048576"
);
rejects!(
    policy_without_sequences,
    |r| {
        r.policy.maximum_active_sequences = 0;
    },
    ZeroPolicyCeiling,
    "policy.maximum_active_sequences",
    "no sequence"
);
rejects!(
    policy_without_tokens,
    |r| {
        r.policy.maximum_scheduled_tokens = 0;
    },
    ZeroPolicyCeiling,
    "policy.maximum_scheduled_tokens",
    "no token"
);
rejects!(
    policy_without_profiles,
    |r| {
        r.policy.dynamic_storage_profile_order.clear();
    },
    InvalidProfileOrder,
    "policy.dynamic_storage_profile_order",
    "no storage profile"
);
rejects!(
    policy_with_repeated_profile,
    |r| {
        r.policy.dynamic_storage_profile_order.push(linear());
    },
    InvalidProfileOrder,
    "policy.dynamic_storage_profile_order[2]",
    "linear+contiguous"
);
rejects!(
    policy_with_illegal_profile,
    |r| {
        r.policy.dynamic_storage_profile_order.push(StorageProfile {
            allocator: StorageAllocator::FixedBlockArena { block_bytes: 4096 },
            view: StorageView::PagedRegions { block_bytes: 8192 },
        });
    },
    InvalidProfileOrder,
    "policy.dynamic_storage_profile_order[2]",
    "fixed_block(4096)+paged(8192)"
);
rejects!(
    reusable_without_lanes,
    |r| {
        r.policy
            .reusable_execution
            .as_mut()
            .unwrap()
            .maximum_reusable_lanes = 0;
    },
    InvalidReusableExecution,
    "policy.reusable_execution.maximum_reusable_lanes",
    "zero lanes"
);
rejects!(
    reusable_without_buckets,
    |r| {
        buckets(&mut r).clear();
    },
    InvalidReusableExecution,
    "policy.reusable_execution.buckets",
    "0 buckets"
);
rejects!(
    reusable_with_65_buckets,
    |r| {
        let list = buckets(&mut r);
        list.truncate(1);
        for tokens in 2..=65 {
            let mut next = list[0].clone();
            next.capacity.maximum_tokens = tokens;
            list.push(next);
        }
        reseal(&mut r);
    },
    InvalidReusableExecution,
    "policy.reusable_execution.buckets",
    "65 buckets"
);
rejects!(
    reusable_bucket_without_pages,
    |r| {
        buckets(&mut r)[1].capacity.maximum_pages = 0;
        reseal(&mut r);
    },
    InvalidReusableExecution,
    "policy.reusable_execution.buckets[1].capacity.maximum_pages",
    "uniform-query"
);
rejects!(
    reusable_bucket_above_sequence_ceiling,
    |r| {
        buckets(&mut r)[2].capacity.maximum_sequences = 4;
        reseal(&mut r);
    },
    InvalidReusableExecution,
    "policy.reusable_execution.buckets[2].capacity.maximum_sequences",
    "admits 3"
);
rejects!(
    reusable_bucket_above_token_ceiling,
    |r| {
        buckets(&mut r)[0].capacity.maximum_tokens = 4097;
        reseal(&mut r);
    },
    InvalidReusableExecution,
    "policy.reusable_execution.buckets[0].capacity.maximum_tokens",
    "packed-prefill"
);
rejects!(
    reusable_bucket_with_stale_id,
    |r| {
        buckets(&mut r)[2].capacity.maximum_tokens = 3;
    },
    ReusableBucketIdMismatch,
    "policy.reusable_execution.buckets[2].bucket_id",
    "uniform-query"
);
rejects!(
    reusable_buckets_unsorted,
    |r| {
        buckets(&mut r).swap(0, 1);
    },
    InvalidReusableExecution,
    "policy.reusable_execution.buckets[1]",
    "sorted"
);
rejects!(
    reusable_buckets_repeated,
    |r| {
        let again = buckets(&mut r)[2].clone();
        buckets(&mut r).push(again);
    },
    InvalidReusableExecution,
    "policy.reusable_execution.buckets[3]",
    "unique"
);
rejects!(
    reusable_bucket_that_does_not_extend,
    |r| {
        let list = buckets(&mut r);
        list[1].capacity = BucketCapacity {
            maximum_sequences: 1,
            maximum_tokens: 2,
            maximum_pages: 1,
        };
        list[2].capacity = BucketCapacity {
            maximum_sequences: 2,
            maximum_tokens: 1,
            maximum_pages: 1,
        };
        reseal(&mut r);
    },
    InvalidReusableExecution,
    "policy.reusable_execution.buckets[2].capacity",
    "strictly extend"
);
