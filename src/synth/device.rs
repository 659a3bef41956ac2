//! Device descriptions: what a machine offers the planner (memory, capabilities, storage
//! profiles), as JSON files in `models/devices/`.

use std::collections::BTreeSet;
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::request::{
    CapabilityId, DeviceClass, DeviceId, StorageAllocator, StorageProfile, StorageView,
};

use super::device_links::DeviceLinks;
use super::device_performance::DevicePerformance;
use super::SynthError;

/// The runtime family that drives the device; it names the providers
/// (`provider.cuda.*`, `provider.metal.*`).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// NVIDIA CUDA.
    Cuda,
    /// Apple Metal (unified memory).
    Metal,
}

impl Backend {
    /// The backend's name in provider, engine and estimator ids.
    pub fn name(self) -> &'static str {
        match self {
            Self::Cuda => "cuda",
            Self::Metal => "metal",
        }
    }
}

/// A device description file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeviceDescription {
    /// Device id in the catalog (e.g. `device.cuda.0`).
    pub id: DeviceId,
    /// Human-readable name (e.g. `NVIDIA A100-SXM4-80GB`).
    pub name: String,
    /// Device class.
    pub class: DeviceClass,
    /// Runtime family.
    pub backend: Backend,
    /// Ordinal among the machine's devices.
    #[serde(default)]
    pub ordinal: u32,
    /// Total memory in bytes.
    pub total_memory_bytes: u64,
    /// The total the driver reports (`cudaMemGetInfo`, `torch.cuda.mem_get_info()[1]`),
    /// which serving engines budget from; less than the marketed size (ECC, reserved
    /// regions). Optional; never copied into a synthesized request (docs/engines.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_memory_bytes: Option<u64>,
    /// Runtime build the provider implementations belong to (e.g. `cuda-12.4/sm_80`);
    /// hashed into the device's runtime implementation fingerprint.
    pub runtime: String,
    /// Device capabilities beyond the operations (`capability.dtype.bf16`,
    /// `capability.device.reusable_execution.v1`, ...), taken at their word: a dtype the
    /// list lacks is not offered (a model whose activations need it is refused). Operation
    /// capabilities (`capability.operation.*`) are added by the synthesizer for every
    /// operation the program uses: the runtime implements all of its backend's operations.
    pub capabilities: BTreeSet<CapabilityId>,
    /// Storage profiles the runtime offers: a contiguous arena and paged blocks.
    pub storage_profiles: BTreeSet<StorageProfile>,
    /// Performance figures for the time model (`crate::perf`); optional, and never copied
    /// into a synthesized request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub performance: Option<DevicePerformance>,
    /// The on-demand price of one such device, US dollars per hour (docs/placement.md
    /// cites each shipped figure); optional, and never copied into a synthesized request:
    /// `fit --devices DIR --by price` ranks device counts by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<f64>")]
    pub price_per_hour: Option<PricePerHour>,
    /// The device's links to its peers and to the host (docs/placement.md, "Device files:
    /// links"); optional, and never copied into a synthesized request: `--device D --count
    /// N` times tensor parallelism, stage boundaries and host transfers by them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<DeviceLinks>,
}

/// A price in US dollars per hour, held as whole micro-dollars so the description stays
/// exact (`Eq`); read and written as a JSON number of dollars (`2.736`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PricePerHour {
    /// Micro-dollars (10^-6 USD) per hour.
    pub micro_usd: u64,
}

impl PricePerHour {
    /// The price in dollars per hour.
    pub fn usd(self) -> f64 {
        self.micro_usd as f64 / 1e6
    }
}

impl Serialize for PricePerHour {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(self.usd())
    }
}

impl<'de> Deserialize<'de> for PricePerHour {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let usd = f64::deserialize(deserializer)?;
        if !(usd.is_finite() && usd > 0.0 && usd < 1e6) {
            return Err(serde::de::Error::custom(format!(
                "price_per_hour {usd}: give a positive number of US dollars per hour below 1000000"
            )));
        }
        Ok(PricePerHour {
            micro_usd: (usd * 1e6).round() as u64,
        })
    }
}

impl DeviceDescription {
    /// Reads a device file; a type error names the field (its JSON path).
    pub fn read(file: &Path) -> Result<Self, SynthError> {
        let device: Self = crate::request::read_json(file)?;
        device.validate()?;
        Ok(device)
    }

    /// Checks memory, profiles and the contiguous arena every static allocation needs.
    pub fn validate(&self) -> Result<(), SynthError> {
        if self.total_memory_bytes == 0 {
            return Err(SynthError::device(
                &self.id,
                "total_memory_bytes",
                "must be positive",
            ));
        }
        if let Some(driver) = self.driver_memory_bytes {
            if driver == 0 || driver > self.total_memory_bytes {
                return Err(SynthError::device(
                    &self.id,
                    "driver_memory_bytes",
                    format!(
                        "{driver} is not in 1..=total_memory_bytes ({}); give the total the driver reports",
                        self.total_memory_bytes
                    ),
                ));
            }
        }
        if self.runtime.trim().is_empty() {
            return Err(SynthError::device(&self.id, "runtime", "is empty"));
        }
        if let Some(problem) = self.storage_profiles.iter().find_map(|p| p.problem()) {
            return Err(SynthError::device(&self.id, "storage_profiles", problem));
        }
        if !self
            .storage_profiles
            .contains(&StorageProfile::STATIC_CONTIGUOUS)
        {
            return Err(SynthError::device(
                &self.id,
                "storage_profiles",
                "must offer the contiguous arena (linear_arena + contiguous)",
            ));
        }
        if let Some((field, problem)) = self.performance.as_ref().and_then(|p| p.problem()) {
            return Err(SynthError::device(&self.id, field, problem));
        }
        if let Some((field, problem)) = self.links.as_ref().and_then(DeviceLinks::problem) {
            return Err(SynthError::device(&self.id, &field, problem));
        }
        Ok(())
    }

    /// The paged profile of the device (the smallest block), if it offers one.
    pub fn paged_profile(&self) -> Option<StorageProfile> {
        self.storage_profiles
            .iter()
            .find(|p| matches!(p.view, StorageView::PagedRegions { .. }))
            .copied()
    }

    /// Page size of the paged profile (65536 if the device offers none; only used to size
    /// block tables).
    pub fn page_bytes(&self) -> u64 {
        match self.paged_profile().map(|p| p.allocator) {
            Some(StorageAllocator::FixedBlockArena { block_bytes }) => block_bytes,
            _ => 65536,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_without_the_contiguous_arena_is_rejected() {
        let device: DeviceDescription = serde_json::from_value(serde_json::json!({
            "id": "device.cuda.0", "name": "x", "class": "accelerator", "backend": "cuda",
            "total_memory_bytes": 1024, "runtime": "cuda-12.4",
            "capabilities": [],
            "storage_profiles": [{
                "allocator": {"fixed_block_arena": {"block_bytes": 65536}},
                "view": {"paged_regions": {"block_bytes": 65536}}
            }]
        }))
        .unwrap();
        let err = device.validate().unwrap_err();
        assert!(
            matches!(&err, SynthError::Device { field, .. } if field == "storage_profiles"),
            "{err}"
        );
        assert_eq!(device.page_bytes(), 65536);
    }
}
