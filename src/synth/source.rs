//! Where a synthesized request comes from: a model folder or a config file, and the
//! choices (device, policy, weight format, layers, experts) that override the folder's
//! defaults (`synth.json`).
//!
//! This is the one place the defaults are resolved, so `jointplan synth`, `jointplan plan
//! MODEL_FOLDER`, and the library's callers (studies, sweeps, bindings) synthesize the same
//! request from the same choices.

use std::path::{Path, PathBuf};

use crate::request::PlanRequest;

use super::{
    synthesize, DeviceDescription, ModelConfig, ModelFolder, PolicyPreset, SynthError,
    SynthOptions, WeightFormat,
};

/// The policy used when neither the caller nor the folder names one.
pub const DEFAULT_POLICY: &str = "interactive";
/// The weight format used when neither the caller nor the folder names one.
pub const DEFAULT_WEIGHT_FORMAT: &str = "dense-f16";

/// A model to synthesize and the choices that override its folder's defaults. Every field
/// left `None` takes the folder's default (`synth.json`), then the built-in default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelSource {
    /// The model folder (`config.json` and optional `synth.json`).
    pub folder: Option<PathBuf>,
    /// A `config.json` to use instead of the folder's (or without a folder).
    pub config: Option<PathBuf>,
    /// The device description file.
    pub device: Option<PathBuf>,
    /// The policy: `interactive`, `server`, or a preset file.
    pub policy: Option<String>,
    /// Keep only the first N layers.
    pub layers: Option<u64>,
    /// Use N routed experts per MoE layer.
    pub experts: Option<u64>,
    /// Routed experts per expert node (default 1).
    pub expert_group_size: Option<u64>,
    /// The weight format name (see [`super::weights::FORMAT_NAMES`]); absent: the
    /// checkpoint's `quantization_config`, else the folder's default, else `dense-f16`.
    pub weight_format: Option<String>,
    /// The KV cache dtype (`auto`, `f16`, `bf16`, `fp8`, `int8`); absent: the policy
    /// preset's `kv_cache_dtype`, else `auto`.
    pub kv_cache_dtype: Option<String>,
    /// Speculative-decoding layers to build beside the model: `mtp` (the checkpoint's
    /// multi-token-prediction layers) or `none`; absent: none.
    pub speculative: Option<String>,
}

/// A synthesized request and the weight format it was synthesized in.
#[derive(Clone, Debug)]
pub struct Synthesized {
    /// The request.
    pub request: PlanRequest,
    /// Its weight format.
    pub weight_format: WeightFormat,
    /// Warning lines for the user (a `--weight-format` that overrides the checkpoint's
    /// `quantization_config`; configuration keys the architecture registry does not
    /// model); never silently dropped.
    pub warnings: Vec<String>,
    /// The device the request was synthesized for (with fields the request does not
    /// carry, such as `driver_memory_bytes` and the `performance` figures).
    pub device: DeviceDescription,
    /// The policy preset it was synthesized under.
    pub policy: PolicyPreset,
    /// The device file the request was synthesized for (given, or the folder's default).
    pub device_file: PathBuf,
    /// Every file the synthesis read (config, the folder's defaults, device, policy preset),
    /// so that a command writing an output can refuse to overwrite one of them.
    pub inputs: Vec<PathBuf>,
}

fn option(option: &str, message: impl Into<String>) -> SynthError {
    SynthError::Option {
        option: option.to_owned(),
        message: message.into(),
    }
}

/// A `--weight-format` name, its quantized schemes in the checkpoint's dtype.
fn parse_format(name: &str, config: &ModelConfig) -> Result<WeightFormat, SynthError> {
    let format: WeightFormat = name
        .parse()
        .map_err(|m: String| option("weight-format", m))?;
    Ok(match format {
        WeightFormat::Quantized(scheme) => WeightFormat::Quantized(
            scheme.with_dense_type(super::quantization::checkpoint_dtype(config)),
        ),
        other => other,
    })
}

impl ModelSource {
    /// The model folder at `path`, with its defaults.
    pub fn folder(path: impl Into<PathBuf>) -> Self {
        ModelSource {
            folder: Some(path.into()),
            ..ModelSource::default()
        }
    }

    /// Reads the folder, config, device and policy and synthesizes the request.
    pub fn synthesize(&self) -> Result<Synthesized, SynthError> {
        self.synthesize_with(None)
    }

    /// The policy preset this source resolves to: the caller's, else the folder's default,
    /// else the built-in default. Studies change its fields and synthesize with it.
    pub fn policy_preset(&self) -> Result<PolicyPreset, SynthError> {
        let folder = self.folder.as_deref().map(ModelFolder::read).transpose()?;
        let name = self
            .policy
            .clone()
            .or_else(|| folder.as_ref().and_then(ModelFolder::default_policy))
            .unwrap_or_else(|| DEFAULT_POLICY.to_owned());
        PolicyPreset::resolve(&name)
    }

    /// Synthesizes the request under `policy` instead of the named preset (the other
    /// choices as [`ModelSource::synthesize`] resolves them).
    pub fn synthesize_with_policy(&self, policy: &PolicyPreset) -> Result<Synthesized, SynthError> {
        self.synthesize_with(Some(policy))
    }

    /// Synthesizes the request on `device` (a description in memory, read from `file`)
    /// instead of the source's device file; the other choices as
    /// [`ModelSource::synthesize`] resolves them. Placement across devices plans the model
    /// once on a description of the set's device with room for every byte.
    pub fn synthesize_on(
        &self,
        device: &DeviceDescription,
        file: &Path,
    ) -> Result<Synthesized, SynthError> {
        let mut source = self.clone();
        source.device = Some(file.to_path_buf());
        source.synthesize_resolved(None, Some(device))
    }

    /// [`ModelSource::synthesize_on`] under `policy` instead of the named preset (a
    /// placement with `--context`, `--sequences` or `--scheduled-tokens`).
    pub fn synthesize_on_with_policy(
        &self,
        device: &DeviceDescription,
        file: &Path,
        policy: &PolicyPreset,
    ) -> Result<Synthesized, SynthError> {
        let mut source = self.clone();
        source.device = Some(file.to_path_buf());
        source.synthesize_resolved(Some(policy), Some(device))
    }

    fn synthesize_with(&self, preset: Option<&PolicyPreset>) -> Result<Synthesized, SynthError> {
        self.synthesize_resolved(preset, None)
    }

    fn synthesize_resolved(
        &self,
        preset: Option<&PolicyPreset>,
        given_device: Option<&DeviceDescription>,
    ) -> Result<Synthesized, SynthError> {
        let folder = self.folder.as_deref().map(ModelFolder::read).transpose()?;
        let (config, config_file) = match (&self.config, &folder, &self.folder) {
            (Some(file), _, _) => (ModelConfig::read(file)?, file.clone()),
            (None, Some(f), Some(dir)) => (f.config.clone(), dir.join("config.json")),
            _ => return Err(option("model", "give a model folder or a config file")),
        };
        // The family id names the configuration actually used: `--config other/config.json`
        // gives `family.other` even beside a model folder.
        let name = match (&folder, &self.config) {
            (Some(f), None) => f.name.clone(),
            (_, Some(file)) => file
                .parent()
                .and_then(Path::file_name)
                .and_then(|n| n.to_str())
                .unwrap_or("model")
                .to_owned(),
            (None, None) => "model".to_owned(),
        };
        let device_file = self
            .device
            .clone()
            .or_else(|| folder.as_ref().and_then(ModelFolder::default_device))
            .ok_or_else(|| option("device", "is required (the model folder has no synth.json)"))?;
        let device = match given_device {
            Some(device) => device.clone(),
            None => {
                DeviceDescription::read(&device_file).map_err(|e| e.in_device_file(&device_file))?
            }
        };
        let policy_name = self
            .policy
            .clone()
            .or_else(|| folder.as_ref().and_then(ModelFolder::default_policy))
            .unwrap_or_else(|| DEFAULT_POLICY.to_owned());
        let policy = match preset {
            Some(preset) => preset.clone(),
            None => PolicyPreset::resolve(&policy_name)?,
        };
        let mut inputs = vec![config_file];
        if let Some(dir) = &self.folder {
            inputs.push(dir.join("synth.json"));
        }
        inputs.push(device_file.clone());
        if Path::new(&policy_name).is_file() {
            inputs.push(PathBuf::from(&policy_name));
        }
        // The format: an explicit --weight-format wins; else the checkpoint's own
        // quantization_config; else the folder's default; else dense f16.
        let config_quantization = super::quantization::of_config(&config)?;
        let mut notes = Vec::new();
        let mut options = SynthOptions::new(&name);
        let weight_format = match (&self.weight_format, config_quantization) {
            (Some(flag), found) => {
                let format = parse_format(flag, &config)?;
                if let Some(found) = found {
                    notes.push(format!(
                        "--weight-format {} overrides the checkpoint's quantization_config ({}): the plan stores the weights as {}",
                        format.name(),
                        WeightFormat::Quantized(found.scheme).name(),
                        format.name()
                    ));
                }
                format
            }
            (None, Some(found)) => {
                options.keep_dense = found.keep_dense;
                options.group_key = Some(found.group_key);
                WeightFormat::Quantized(found.scheme)
            }
            (None, None) => {
                let name = folder
                    .as_ref()
                    .and_then(|f| f.defaults.as_ref().map(|d| d.weight_format.clone()))
                    .unwrap_or_else(|| DEFAULT_WEIGHT_FORMAT.to_owned());
                parse_format(&name, &config)?
            }
        };
        options.layers = self.layers;
        options.experts = self.experts;
        options.expert_group_size = self.expert_group_size.unwrap_or(1);
        options.weight_format = weight_format;
        options.kv_cache_dtype = match &self.kv_cache_dtype {
            Some(text) => text
                .parse()
                .map_err(|m: String| option("kv-cache-dtype", m))?,
            None => policy.kv_cache_dtype.unwrap_or_default(),
        };
        options.wire_limits = folder.as_ref().and_then(ModelFolder::default_wire_limits);
        if let Some(text) = &self.speculative {
            options.speculative = text.parse().map_err(|m: String| option("speculative", m))?;
        }
        let request = synthesize(&config, &device, &policy, &options)
            .map_err(|e| e.in_device_file(&device_file))?;
        let decoder = config.text_decoder()?;
        // `quantization_config` is read by the weight formats (`quantization`).
        let unmodelled: Vec<String> =
            super::config_keys::unmodelled_keys(super::registry::entry_of(&decoder)?, &decoder)
                .into_iter()
                .filter(|k| k != "quantization_config")
                .collect();
        let mut warnings = notes;
        if !unmodelled.is_empty() {
            warnings.push(format!(
                "config keys that could change memory or time and that the architecture registry does not model (kept in the family's config, not built into the plan): {}",
                unmodelled.join(", ")
            ));
        }
        Ok(Synthesized {
            request,
            weight_format,
            warnings,
            device,
            device_file,
            policy,
            inputs,
        })
    }
}
