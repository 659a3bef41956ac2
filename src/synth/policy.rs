//! Runtime policy presets: `interactive` (few sequences, long context, replayable
//! executions) and `server` (many sequences, bounded context), built in and as JSON files
//! in `models/policies/`. A preset is device-independent; [`PolicyPreset::runtime_policy`]
//! binds it to a device (capacity, storage profiles).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::request::{
    fingerprints, BucketCapacity, ContractVersion, DeterminismRequirement, PolicyId,
    ReusableExecutionBucket, ReusableExecutionClassId, ReusableExecutionPolicy, RuntimePolicy,
    StorageView,
};

use super::device::DeviceDescription;
use super::SynthError;

/// A storage view kind, ranked by the preset and mapped to the device's profiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ViewKind {
    /// The contiguous arena.
    Contiguous,
    /// Paged blocks.
    Paged,
}

/// One reusable-execution bucket of a preset.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BucketPreset {
    /// Class of executions (`uniform-query`, `packed-prefill`).
    pub class_id: ReusableExecutionClassId,
    /// Its capacity.
    pub capacity: BucketCapacity,
}

/// Reusable executions of a preset.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReusablePreset {
    /// Lanes held at once.
    pub maximum_reusable_lanes: u32,
    /// Buckets (sorted by class and capacity by the synthesizer).
    pub buckets: Vec<BucketPreset>,
}

/// A device-independent runtime policy preset.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyPreset {
    /// Policy id.
    pub id: PolicyId,
    /// Policy version.
    pub version: ContractVersion,
    /// What the preset is for.
    #[serde(default)]
    pub description: String,
    /// Ceiling: sequences active at once (an engine's `max_num_seqs`: at most this many;
    /// activations and per-sequence workspaces are sized for it). Not a requirement: how
    /// many sequences must fit is [`Self::minimum_sequences`].
    pub maximum_active_sequences: u32,
    /// Ceiling: tokens scheduled per step (an engine's `max_num_batched_tokens`; the
    /// activation token ceiling).
    pub maximum_scheduled_tokens: u64,
    /// Requirement: the context one sequence must reach; `null` means the model's trained
    /// context (`ModelConfig::trained_context`), which also caps a larger value. A sliding
    /// layer's KV state holds only its window of it.
    #[serde(default)]
    pub maximum_context_tokens: Option<u64>,
    /// Requirement: sequences that must fit at the context at once (absent: 1, the rule of
    /// the engines, which start when one request of the maximum length fits). `plan`
    /// refuses below it; `fit` maximizes a knob under it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum_sequences: Option<u32>,
    /// Share of device memory the policy may plan, in thousandths.
    pub memory_capacity_per_mille: u32,
    /// Bytes held back from planning.
    pub memory_reserve_bytes: u64,
    /// Determinism every provider must meet.
    pub execution_determinism: DeterminismRequirement,
    /// Storage views, most wanted first; each maps to the device's profiles of that view.
    pub storage_view_order: Vec<ViewKind>,
    /// Reusable (captured) executions, if any.
    #[serde(default)]
    pub reusable_execution: Option<ReusablePreset>,
    /// The KV cache's element type (`auto`, `f16`, `bf16`, `fp8`, `int8`); absent: `auto`
    /// (the activation type). `--kv-cache-dtype` overrides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache_dtype: Option<super::kv_cache::KvCacheDtype>,
}

fn id<T: TryFrom<String, Error = String>>(text: &str) -> T {
    T::try_from(text.to_owned()).unwrap_or_else(|e| unreachable!("built-in id: {e}"))
}

impl PolicyPreset {
    /// The built-in `interactive` preset: 4 sequences at the model's full context, 4096
    /// scheduled tokens, replay-equivalent providers, contiguous storage first, captured
    /// decode executions for 1, 2 and 4 sequences.
    pub fn interactive() -> Self {
        Self {
            id: id("runtime-policy.interactive"),
            version: ContractVersion::new(1, 0),
            description: "few sequences at long context, replayable decode steps".to_owned(),
            maximum_active_sequences: 4,
            maximum_scheduled_tokens: 4096,
            maximum_context_tokens: None,
            minimum_sequences: None,
            memory_capacity_per_mille: 950,
            memory_reserve_bytes: 1 << 30,
            execution_determinism: DeterminismRequirement::BitwiseSameRuntimeWithReplay,
            storage_view_order: vec![ViewKind::Contiguous, ViewKind::Paged],
            reusable_execution: Some(ReusablePreset {
                maximum_reusable_lanes: 2,
                buckets: [1u32, 2, 4]
                    .into_iter()
                    .map(|n| BucketPreset {
                        class_id: id("uniform-query"),
                        capacity: BucketCapacity {
                            maximum_sequences: n,
                            maximum_tokens: u64::from(n),
                            maximum_pages: 1,
                        },
                    })
                    .collect(),
            }),
            kv_cache_dtype: None,
        }
    }

    /// The built-in `server` preset: 64 sequences of up to 32768 tokens, 8192 scheduled
    /// tokens, paged storage first, no captured executions.
    pub fn server() -> Self {
        Self {
            id: id("runtime-policy.server"),
            version: ContractVersion::new(1, 0),
            description: "many concurrent sequences, bounded context".to_owned(),
            maximum_active_sequences: 64,
            maximum_scheduled_tokens: 8192,
            maximum_context_tokens: Some(32768),
            minimum_sequences: None,
            memory_capacity_per_mille: 900,
            memory_reserve_bytes: 2 << 30,
            execution_determinism: DeterminismRequirement::BitwiseSameRuntime,
            storage_view_order: vec![ViewKind::Paged, ViewKind::Contiguous],
            reusable_execution: None,
            kv_cache_dtype: None,
        }
    }

    /// A built-in preset by name, or a preset file.
    pub fn resolve(name_or_file: &str) -> Result<Self, SynthError> {
        match name_or_file {
            "interactive" => Ok(Self::interactive()),
            "server" => Ok(Self::server()),
            file => Self::read(Path::new(file)),
        }
    }

    /// Reads a preset file; a type error names the field (its JSON path).
    pub fn read(file: &Path) -> Result<Self, SynthError> {
        let preset: Self = crate::request::read_json(file)?;
        preset.validate()?;
        Ok(preset)
    }

    /// Checks the preset's own fields.
    pub fn validate(&self) -> Result<(), SynthError> {
        let fail = |field: &str, message: String| Err(SynthError::policy(&self.id, field, message));
        if self.maximum_active_sequences == 0 {
            return fail("maximum_active_sequences", "must be positive".into());
        }
        if self.maximum_scheduled_tokens == 0 {
            return fail("maximum_scheduled_tokens", "must be positive".into());
        }
        match self.minimum_sequences {
            Some(0) => return fail("minimum_sequences", "must be positive or absent".into()),
            Some(n) if n > self.maximum_active_sequences => {
                return fail(
                    "minimum_sequences",
                    format!(
                        "{n} exceeds the ceiling maximum_active_sequences {}",
                        self.maximum_active_sequences
                    ),
                )
            }
            _ => {}
        }
        if self.maximum_context_tokens == Some(0) {
            return fail("maximum_context_tokens", "must be positive or null".into());
        }
        if self.memory_capacity_per_mille == 0 || self.memory_capacity_per_mille > 1000 {
            return fail(
                "memory_capacity_per_mille",
                format!("{} is not in 1..=1000", self.memory_capacity_per_mille),
            );
        }
        if self.storage_view_order.is_empty() {
            return fail("storage_view_order", "is empty".into());
        }
        for (i, view) in self.storage_view_order.iter().enumerate() {
            if self.storage_view_order[..i].contains(view) {
                return fail("storage_view_order", format!("names {view:?} twice"));
            }
        }
        if let Some(reusable) = &self.reusable_execution {
            if reusable.maximum_reusable_lanes == 0 {
                return fail(
                    "reusable_execution.maximum_reusable_lanes",
                    "must be positive".into(),
                );
            }
            if reusable.buckets.is_empty() || reusable.buckets.len() > 64 {
                return fail(
                    "reusable_execution.buckets",
                    format!("has {} buckets (1..=64)", reusable.buckets.len()),
                );
            }
            for (i, bucket) in reusable.buckets.iter().enumerate() {
                let c = bucket.capacity;
                if c.maximum_sequences == 0 || c.maximum_tokens == 0 || c.maximum_pages == 0 {
                    return fail(
                        &format!("reusable_execution.buckets[{i}].capacity"),
                        "has a zero maximum".into(),
                    );
                }
                if c.maximum_sequences > self.maximum_active_sequences
                    || c.maximum_tokens > self.maximum_scheduled_tokens
                {
                    return fail(
                        &format!("reusable_execution.buckets[{i}].capacity"),
                        "exceeds the sequence or token ceiling".into(),
                    );
                }
            }
        }
        Ok(())
    }

    /// Sequences that must fit at the context (the requirement; 1 when absent).
    pub fn required_sequences(&self) -> u32 {
        self.minimum_sequences.unwrap_or(1)
    }

    /// This preset with its sequence ceiling at `sequences` (and its requirement no
    /// higher): reusable buckets for more sequences than the ceiling are dropped, since a
    /// bucket must stay within the ceilings.
    pub fn with_sequence_ceiling(&self, sequences: u32) -> Self {
        let mut preset = self.clone();
        preset.maximum_active_sequences = sequences;
        preset.minimum_sequences = preset.minimum_sequences.map(|n| n.min(sequences));
        preset.keep_buckets_within_ceilings();
        preset
    }

    /// This preset with its token ceiling at `tokens`, buckets above it dropped.
    pub fn with_token_ceiling(&self, tokens: u64) -> Self {
        let mut preset = self.clone();
        preset.maximum_scheduled_tokens = tokens;
        preset.keep_buckets_within_ceilings();
        preset
    }

    fn keep_buckets_within_ceilings(&mut self) {
        let (sequences, tokens) = (self.maximum_active_sequences, self.maximum_scheduled_tokens);
        if let Some(reusable) = &mut self.reusable_execution {
            reusable.buckets.retain(|b| {
                b.capacity.maximum_sequences <= sequences && b.capacity.maximum_tokens <= tokens
            });
            if reusable.buckets.is_empty() {
                self.reusable_execution = None;
            }
        }
    }

    /// The context ceiling for a model trained for `model_max` positions.
    pub fn context_tokens(&self, model_max: u64) -> u64 {
        self.maximum_context_tokens
            .map_or(model_max, |cap| cap.min(model_max))
    }

    /// The runtime policy of this preset on `device`: capacity = the per-mille share of the
    /// device memory, reserve clamped below it, the storage order mapped to the device's
    /// profiles (each view expands to the device's profiles of that view, in profile order).
    pub fn runtime_policy(&self, device: &DeviceDescription) -> Result<RuntimePolicy, SynthError> {
        self.validate()?;
        let capacity = u64::try_from(
            u128::from(device.total_memory_bytes) * u128::from(self.memory_capacity_per_mille)
                / 1000,
        )
        .map_err(|_| SynthError::overflow("policy memory capacity"))?;
        if capacity == 0 {
            return Err(SynthError::policy(
                &self.id,
                "memory_capacity_per_mille",
                format!(
                    "leaves no memory of the {}-byte device",
                    device.total_memory_bytes
                ),
            ));
        }
        if self.memory_reserve_bytes >= capacity {
            return Err(SynthError::policy(
                &self.id,
                "memory_reserve_bytes",
                format!(
                    "{} is not below the capacity {capacity} on device {}",
                    self.memory_reserve_bytes, device.id
                ),
            ));
        }
        let mut order = Vec::new();
        for view in &self.storage_view_order {
            order.extend(device.storage_profiles.iter().filter(|p| {
                matches!(
                    (view, p.view),
                    (ViewKind::Contiguous, StorageView::Contiguous)
                        | (ViewKind::Paged, StorageView::PagedRegions { .. })
                )
            }));
        }
        if order.is_empty() {
            return Err(SynthError::policy(
                &self.id,
                "storage_view_order",
                format!("matches no storage profile of device {}", device.id),
            ));
        }
        let reusable_execution = match &self.reusable_execution {
            None => None,
            Some(preset) => {
                let mut buckets = Vec::with_capacity(preset.buckets.len());
                for bucket in &preset.buckets {
                    buckets.push(ReusableExecutionBucket {
                        bucket_id: fingerprints::reusable_bucket_id(
                            &bucket.class_id,
                            &bucket.capacity,
                        )?,
                        class_id: bucket.class_id.clone(),
                        capacity: bucket.capacity,
                    });
                }
                buckets.sort_by(|a, b| (&a.class_id, a.capacity).cmp(&(&b.class_id, b.capacity)));
                Some(ReusableExecutionPolicy {
                    maximum_reusable_lanes: preset.maximum_reusable_lanes,
                    buckets,
                })
            }
        };
        Ok(RuntimePolicy {
            policy_id: self.id.clone(),
            version: self.version,
            memory_capacity_bytes: capacity,
            memory_reserve_bytes: self.memory_reserve_bytes,
            maximum_active_sequences: self.maximum_active_sequences,
            maximum_scheduled_tokens: self.maximum_scheduled_tokens,
            execution_determinism: self.execution_determinism,
            dynamic_storage_profile_order: order,
            reusable_execution,
            wire_limits: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_presets_are_valid() {
        PolicyPreset::interactive().validate().unwrap();
        PolicyPreset::server().validate().unwrap();
        assert_eq!(PolicyPreset::server().context_tokens(131072), 32768);
        assert_eq!(PolicyPreset::interactive().context_tokens(131072), 131072);
    }

    #[test]
    fn a_bucket_above_the_ceiling_is_rejected() {
        let mut preset = PolicyPreset::interactive();
        if let Some(r) = preset.reusable_execution.as_mut() {
            r.buckets[0].capacity.maximum_sequences = 99;
        }
        let err = preset.validate().unwrap_err();
        assert!(
            matches!(&err, SynthError::Policy { field, .. } if field == "reusable_execution.buckets[0].capacity"),
            "{err}"
        );
    }
}
