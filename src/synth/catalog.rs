//! The providers of the operations a synthesized program uses ([`super::operation`]): for
//! each operation two to four providers that differ in capabilities, weight/quantization
//! formats, determinism, storage requirements and workspace size formulas.
//!
//! Providers are named `provider.{backend}.{operation}.{variant}`; their implementation
//! and estimator fingerprints are SHA-256 digests of their ids and the device runtime, so
//! they are stable per runtime build and differ between runtimes.

use std::collections::{BTreeMap, BTreeSet};

use crate::canonical::sha256_hex;
use crate::request::{
    fingerprints, CapabilityCatalog, CapabilityId, ContractVersion, Device, ElementType,
    EngineProviderDescriptor, EstimatorId, ExecutionSemantics, ProviderDescriptor, ProviderId,
    QuantizationFormatId, ReplayEquivalence, Sha256Hex, StorageBindingRequirement, StorageProfile,
    StorageRequirement, ValueRole, WeightFormatId,
};

use super::device::{Backend, DeviceDescription};
use super::estimate;
use super::kv_cache::KvCacheDtype;
use super::operation::{Kernel, Operation, SlotKind};
use super::weights::{
    GGUF_FORMAT, GPTQ_FORMAT, GPTQ_QUANTIZATION, Q4K_QUANTIZATION, Q6K_QUANTIZATION,
    Q8_0_QUANTIZATION, SAFETENSORS_DENSE_FORMAT,
};
use super::WeightFormat;
use super::{portable, SynthError};

/// The provider id `provider.{backend}.{operation}.{variant}`.
pub fn provider_id(backend: Backend, operation: Operation, variant: &str) -> ProviderId {
    portable(format!(
        "provider.{}.{}.{}",
        backend.name(),
        operation.name(),
        variant
    ))
}

/// The estimator id `resource-estimator.{backend}.{operation}.{variant}`.
pub fn estimator_id(backend: Backend, operation: Operation, variant: &str) -> EstimatorId {
    portable(format!(
        "resource-estimator.{}.{}.{}",
        backend.name(),
        operation.name(),
        variant
    ))
}

/// The dtype capability `capability.dtype.{f16|bf16}`.
pub fn dtype_capability(element_type: ElementType) -> CapabilityId {
    portable(match element_type {
        ElementType::Bf16 => "capability.dtype.bf16".to_owned(),
        _ => "capability.dtype.f16".to_owned(),
    })
}

/// The device runtime's implementation fingerprint.
pub fn runtime_fingerprint(device: &DeviceDescription) -> Sha256Hex {
    sha256_hex(format!("jointplan.synth.runtime\0{}", device.runtime).as_bytes())
}

/// The implementation fingerprint of a provider or estimator on a runtime.
pub fn implementation_fingerprint(kind: &str, id: &str, device: &DeviceDescription) -> Sha256Hex {
    sha256_hex(format!("jointplan.synth.{kind}\0{id}\0{}", device.runtime).as_bytes())
}

/// Weight and quantization formats a kernel reads in a catalog for weights in `format`.
/// The four original formats' catalogs are those of [`legacy_kernel_formats`]; for the
/// others, the format's quantized kernel reads the dense format and the format's own, the
/// chunked kernel (any format) adds the format's, and the rest read dense weights.
pub fn kernel_formats(
    kernel: Kernel,
    format: WeightFormat,
) -> (BTreeSet<WeightFormatId>, BTreeSet<QuantizationFormatId>) {
    if format.is_legacy() {
        return legacy_kernel_formats(kernel);
    }
    let dense: WeightFormatId = portable(SAFETENSORS_DENSE_FORMAT.to_owned());
    let own = || -> (BTreeSet<WeightFormatId>, BTreeSet<QuantizationFormatId>) {
        (
            [dense.clone(), portable(format.format_id().to_owned())].into(),
            format
                .quantization_ids()
                .into_iter()
                .map(portable)
                .collect(),
        )
    };
    let quantized = super::operation::format_kernel(format).map(|(_, k)| k);
    match kernel {
        Kernel::Chunked => {
            let (mut formats, mut quantization) = legacy_kernel_formats(kernel);
            let (more, more_q) = own();
            formats.extend(more);
            quantization.extend(more_q);
            (formats, quantization)
        }
        k if Some(k) == quantized => own(),
        _ => ([dense].into(), BTreeSet::new()),
    }
}

/// Weight and quantization formats a kernel reads in the catalogs of the four original
/// formats.
fn legacy_kernel_formats(
    kernel: Kernel,
) -> (BTreeSet<WeightFormatId>, BTreeSet<QuantizationFormatId>) {
    let dense: WeightFormatId = portable(SAFETENSORS_DENSE_FORMAT.to_owned());
    match kernel {
        // A Marlin-style kernel reads packed int4 weights only, never dense ones.
        Kernel::Gptq => (
            [portable(GPTQ_FORMAT.to_owned())].into(),
            [portable(GPTQ_QUANTIZATION.to_owned())].into(),
        ),
        Kernel::Gguf => (
            [dense, portable(GGUF_FORMAT.to_owned())].into(),
            [Q4K_QUANTIZATION, Q6K_QUANTIZATION, Q8_0_QUANTIZATION]
                .iter()
                .map(|q| portable((*q).to_owned()))
                .collect(),
        ),
        Kernel::Chunked => (
            [
                dense,
                portable(GPTQ_FORMAT.to_owned()),
                portable(GGUF_FORMAT.to_owned()),
            ]
            .into(),
            [
                GPTQ_QUANTIZATION,
                Q4K_QUANTIZATION,
                Q6K_QUANTIZATION,
                Q8_0_QUANTIZATION,
            ]
            .iter()
            .map(|q| portable((*q).to_owned()))
            .collect(),
        ),
        _ => ([dense].into(), BTreeSet::new()),
    }
}

fn kernel_dtypes(backend: Backend, kernel: Kernel) -> Vec<ElementType> {
    match (backend, kernel) {
        // Metal's paged attention kernels are half precision only: bf16 models fall back.
        (Backend::Metal, Kernel::Paged) => vec![ElementType::F16],
        _ => vec![ElementType::F16, ElementType::Bf16],
    }
}

/// Storage a kernel accepts for a state slot, given the device's paged profile.
fn state_storage(kernel: Kernel, paged: Option<StorageProfile>) -> StorageRequirement {
    let contiguous = StorageProfile::STATIC_CONTIGUOUS;
    let accepted_profiles = match (kernel, paged) {
        (Kernel::Paged, Some(p)) => vec![p],
        (Kernel::Reference, Some(p)) => vec![contiguous, p],
        _ => vec![contiguous],
    };
    StorageRequirement { accepted_profiles }
}

/// The catalog for the operations `used` on `device`, for weights in `format` and a KV
/// cache in `kv_cache`; the attention operations' rope choices also admit `rope_kinds` (see
/// [`Operation::descriptor_admitting`]).
pub fn build_catalog(
    device: &DeviceDescription,
    used: &BTreeSet<Operation>,
    format: WeightFormat,
    kv_cache: KvCacheDtype,
    rope_kinds: &[&str],
) -> Result<CapabilityCatalog, SynthError> {
    let paged = device.paged_profile();
    let mut capabilities = device.capabilities.clone();
    capabilities.extend(used.iter().map(|op| op.capability()));
    let device_entry = Device {
        id: device.id.clone(),
        class: device.class,
        ordinal: device.ordinal,
        total_memory_bytes: device.total_memory_bytes,
        runtime_implementation_fingerprint: runtime_fingerprint(device),
        capabilities: capabilities.clone(),
        dynamic_storage_profiles: device.storage_profiles.clone(),
    };
    let mut operations = BTreeMap::new();
    let mut providers = BTreeMap::new();
    for &op in used {
        let descriptor = op.descriptor_for(kv_cache, rope_kinds);
        let operation_fingerprint = fingerprints::operation_fingerprint(&descriptor)?;
        let kinds = op.slot_kinds();
        let inputs = descriptor.inputs.len();
        let mut row = Vec::new();
        for (variant, kernel) in op.variants_for(format) {
            let id = provider_id(device.backend, op, variant);
            let estimator = estimator_id(device.backend, op, variant);
            let mut caps: BTreeSet<CapabilityId> = [op.capability()].into();
            caps.extend(
                kernel_dtypes(device.backend, kernel)
                    .into_iter()
                    .map(dtype_capability),
            );
            let (accepted_weight_formats, accepted_quantization_formats) =
                kernel_formats(kernel, format);
            let dynamic_storage_bindings = kinds
                .iter()
                .enumerate()
                .filter(|(_, kind)| **kind != SlotKind::Weight)
                .map(|(k, kind)| {
                    let (role, ordinal) = if k < inputs {
                        (ValueRole::Input, k)
                    } else {
                        (ValueRole::Output, k - inputs)
                    };
                    StorageBindingRequirement {
                        role,
                        ordinal: ordinal as u32,
                        storage: match kind {
                            SlotKind::State => state_storage(kernel, paged),
                            _ => StorageRequirement {
                                accepted_profiles: vec![StorageProfile::STATIC_CONTIGUOUS],
                            },
                        },
                    }
                })
                .collect();
            row.push(ProviderDescriptor {
                provider_implementation_fingerprint: implementation_fingerprint(
                    "provider",
                    id.as_str(),
                    device,
                ),
                provider_id: id,
                operation_id: op.id(),
                operation_fingerprint: operation_fingerprint.clone(),
                execution_semantics: ExecutionSemantics::new(if kernel == Kernel::Reference {
                    ReplayEquivalence::Ineligible
                } else {
                    ReplayEquivalence::BitwiseEagerEquivalent
                }),
                version: op.version(),
                device_id: device.id.clone(),
                capabilities: caps,
                accepted_weight_formats,
                accepted_quantization_formats,
                dynamic_storage_bindings,
                resource_estimator_implementation_fingerprint: implementation_fingerprint(
                    "estimator",
                    estimator.as_str(),
                    device,
                ),
                resource_estimator_id: estimator,
                resource_estimator_version: estimate::ESTIMATOR_VERSION,
            });
        }
        row.sort_by(|a, b| (&a.provider_id, a.version).cmp(&(&b.provider_id, b.version)));
        operations.insert(op.id(), descriptor);
        providers.insert(op.id(), row);
    }
    let engine_id: ProviderId =
        portable(format!("provider.engine.{}.vnext", device.backend.name()));
    let engine = EngineProviderDescriptor {
        implementation_fingerprint: implementation_fingerprint(
            "engine",
            engine_id.as_str(),
            device,
        ),
        provider_id: engine_id.clone(),
        contract_version: ContractVersion::new(1, 0),
        device_id: device.id.clone(),
        capabilities: device.capabilities.clone(),
    };
    let identity = fingerprints::identity_materializer()?;
    Ok(CapabilityCatalog {
        device: device_entry,
        operations,
        providers,
        engine_providers: [(engine_id, engine)].into(),
        weight_materializers: [(identity.id.clone(), identity)].into(),
    })
}
