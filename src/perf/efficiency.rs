//! Efficiency classes: the fraction of a device's peak throughput and bandwidth a provider's
//! kernels achieve. A provider's class is read from its id: the first part of
//! `provider.<backend>.<operation>.<kernel>` (after `provider.`) that names a class, else
//! `generic`. The constants and their sources are listed in `docs/performance-model.md`.

use crate::request::ProviderId;

/// Achievable fractions of the peaks for one family of kernels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EfficiencyClass {
    /// The class name (the id part that selects it).
    pub name: &'static str,
    /// Fraction of the peak FLOP/s of the arithmetic type.
    pub compute: f64,
    /// Fraction of the memory bandwidth.
    pub memory: f64,
    /// What the class stands for.
    pub what: &'static str,
}

/// The classes, by name. Compute and memory fractions (see the docs for the sources).
pub const CLASSES: &[EfficiencyClass] = &[
    EfficiencyClass {
        name: "dense",
        compute: 0.70,
        memory: 0.80,
        what: "cuBLAS-class 16-bit GEMM / GEMV",
    },
    EfficiencyClass {
        name: "gptq",
        compute: 0.50,
        memory: 0.75,
        what: "Marlin-class int4 x fp16 GEMM (dequantizes in registers)",
    },
    EfficiencyClass {
        name: "gguf",
        compute: 0.35,
        memory: 0.60,
        what: "GGUF block-quantized mat-vec / mat-mat kernels",
    },
    EfficiencyClass {
        name: "fused",
        compute: 0.50,
        memory: 0.70,
        what: "fused elementwise and normalization kernels",
    },
    EfficiencyClass {
        name: "paged",
        compute: 0.55,
        memory: 0.70,
        what: "paged attention (FlashAttention-style prefill, paged decode)",
    },
    EfficiencyClass {
        name: "contiguous",
        compute: 0.60,
        memory: 0.75,
        what: "attention over a contiguous cache (FlashAttention-2 class)",
    },
    EfficiencyClass {
        name: "chunked",
        compute: 0.40,
        memory: 0.60,
        what: "chunked recurrent (linear attention) kernels",
    },
    EfficiencyClass {
        name: "fp8",
        compute: 0.70,
        memory: 0.80,
        what: "FP8 scaled GEMM (CUTLASS scaled_mm class); assumed as dense, not measured",
    },
    EfficiencyClass {
        name: "int8",
        compute: 0.70,
        memory: 0.80,
        what: "INT8 W8A8 scaled GEMM (CUTLASS class); assumed as dense, not measured",
    },
    EfficiencyClass {
        name: "marlin",
        compute: 0.50,
        memory: 0.75,
        what: "Marlin int4/int8 weight-only GEMM (GPTQ, AWQ, compressed-tensors); as gptq",
    },
    EfficiencyClass {
        name: "mxfp4",
        compute: 0.50,
        memory: 0.75,
        what: "MXFP4 fused-MoE kernels; assumed as gptq (Marlin class), not measured",
    },
    EfficiencyClass {
        name: "nvfp4",
        compute: 0.50,
        memory: 0.75,
        what: "NVFP4 block-scaled GEMM; assumed as gptq (Marlin class), not measured",
    },
    EfficiencyClass {
        name: "dequant",
        compute: 0.35,
        memory: 0.60,
        what: "dequantizing GEMM (bitsandbytes); assumed as gguf, not measured",
    },
    EfficiencyClass {
        name: "reference",
        compute: 0.05,
        memory: 0.20,
        what: "unoptimized reference kernels",
    },
];

/// The class of providers no part of whose id names a class.
pub const GENERIC: EfficiencyClass = EfficiencyClass {
    name: "generic",
    compute: 0.50,
    memory: 0.60,
    what: "any other provider",
};

/// A device's fitted memory factor: in decode steps the achievable bandwidth of every class
/// on the device is `factor x eff_m x` its datasheet bandwidth.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeviceFactor {
    /// The device file's `name`.
    pub device: &'static str,
    /// The factor.
    pub memory: f64,
}

/// The largest class memory fraction (the dense class's): a fitted device factor is capped
/// at its inverse, so that no class is priced above the datasheet bandwidth.
pub const MAX_CLASS_MEMORY: f64 = 0.80;

/// The devices' memory factors, fitted on the fit half of the validation points
/// (`examples/perf_validation.rs` prints the fit, `tests/planner/perf_validation.rs`
/// checks these constants against it; `docs/performance-validation.md#validation`). A device
/// without an entry has factor 1 (the classes' priors alone).
pub const DEVICE_FACTORS: &[DeviceFactor] = &[
    DeviceFactor {
        device: "Apple M2 Ultra (128 GB unified memory)",
        memory: 0.85,
    },
    DeviceFactor {
        device: "NVIDIA A100-SXM4-80GB",
        memory: 0.55,
    },
    DeviceFactor {
        device: "NVIDIA GeForce RTX 4090",
        memory: 1.07,
    },
];

/// The memory factor of the device named `device` (1 without a fitted entry).
pub fn device_memory_factor(device: &str) -> f64 {
    DEVICE_FACTORS
        .iter()
        .find(|f| f.device == device)
        .map_or(1.0, |f| f.memory)
}

/// The efficiency class of `provider`.
pub fn class_of(provider: &ProviderId) -> EfficiencyClass {
    let text = provider.as_str();
    let parts = text.strip_prefix("provider.").unwrap_or(text).split('.');
    for part in parts {
        if let Some(class) = CLASSES.iter().find(|c| c.name == part) {
            return *class;
        }
    }
    GENERIC
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(text: &str) -> ProviderId {
        ProviderId::new(text).unwrap()
    }

    #[test]
    fn a_device_without_a_fitted_factor_keeps_the_priors() {
        assert_eq!(device_memory_factor("no such device"), 1.0);
        for f in DEVICE_FACTORS {
            assert_eq!(device_memory_factor(f.device), f.memory);
            // No class reaches more than the datasheet bandwidth.
            assert!(
                f.memory > 0.0 && f.memory * MAX_CLASS_MEMORY <= 1.0 + 1e-9,
                "{}",
                f.device
            );
        }
    }

    #[test]
    fn the_kernel_part_of_the_id_selects_the_class() {
        assert_eq!(
            class_of(&id("provider.cuda.dense_linear.dense")).name,
            "dense"
        );
        assert_eq!(
            class_of(&id("provider.cuda.dense_linear.gptq")).name,
            "gptq"
        );
        assert_eq!(
            class_of(&id("provider.cuda.causal_paged_attention.paged")).name,
            "paged"
        );
        assert_eq!(
            class_of(&id("provider.reference.rms_norm.f16")).name,
            "reference"
        );
        assert_eq!(class_of(&id("provider.x.y.z")).name, "generic");
        for class in CLASSES {
            assert!(
                class.compute > 0.0 && class.compute <= 1.0,
                "{}",
                class.name
            );
            assert!(class.memory > 0.0 && class.memory <= 1.0, "{}", class.name);
        }
    }
}
