//! Plan requests synthesized from a model configuration, a device description and a
//! policy preset (issue 4).
//!
//! [`synthesize`] turns a Hugging Face–style `config.json` ([`ModelConfig`]) into a
//! complete [`PlanRequest`]: the program and weight schema in a chosen [`WeightFormat`]
//! ([`layers`], [`program`], [`weights`]), the capability catalog of the device with two to
//! four providers per operation ([`catalog`], [`estimate`]), the node resolutions with
//! fingerprinted resource estimates ([`resolution`]) and the runtime policy ([`policy`]).
//! The work is linear in the number of nodes: every node is resolved once, with one
//! estimator-input fingerprint per candidate provider.
//!
//! See `docs/synth.md` for the mapping and what is approximated.

pub mod architecture;
pub(crate) mod catalog;
pub mod config;
pub mod config_keys;
pub mod device;
pub mod device_links;
pub mod device_performance;
pub(crate) mod estimate;
pub mod gguf;
pub mod kv_cache;
pub(crate) mod layers;
pub(crate) mod operation;
pub mod policy;
pub(crate) mod program;
pub mod quantization;
pub mod registry;
pub(crate) mod resolution;
mod source;
pub mod speculative;
pub mod weights;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::canonical::CanonicalError;
use crate::request::{
    fingerprints, CompletionRetention, ModelFamily, ModelFamilyId, PlanRequest, PolicyId,
    WeightLayoutId, WireLimits,
};

pub use architecture::Architecture;
pub use config::ModelConfig;
pub use device::{Backend, DeviceDescription};
pub use device_performance::{DevicePerformance, PeakThroughput};
pub use policy::PolicyPreset;
pub use source::{ModelSource, Synthesized, DEFAULT_POLICY, DEFAULT_WEIGHT_FORMAT};
pub use weights::WeightFormat;

/// Why a request could not be synthesized.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    /// A configuration key is missing or inconsistent.
    #[error("model configuration: {key}: {message}")]
    Config {
        /// The key at fault (e.g. `num_key_value_heads`, `layer_types[3]`).
        key: String,
        /// What is wrong.
        message: String,
    },
    /// A device description field is invalid.
    #[error("device {device}: {field}: {message}")]
    Device {
        /// The device id.
        device: String,
        /// The field at fault.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// A policy preset field is invalid.
    #[error("policy {policy}: {field}: {message}")]
    Policy {
        /// The policy id.
        policy: String,
        /// The field at fault.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// A synthesis option is invalid.
    #[error("option --{option}: {message}")]
    Option {
        /// The option (`layers`, `experts`, `expert-group-size`, `model-name`).
        option: String,
        /// What is wrong.
        message: String,
    },
    /// No provider of a node's operation can serve it.
    #[error("node {node} ({operation}): {reason}")]
    NoProvider {
        /// The node.
        node: String,
        /// Its operation.
        operation: String,
        /// Why.
        reason: String,
    },
    /// A byte count or product overflows u64.
    #[error("{what} overflows u64")]
    Overflow {
        /// What overflowed.
        what: String,
    },
    /// A file could not be read or parsed.
    #[error(transparent)]
    Load(#[from] crate::request::LoadError),
    /// A fingerprint could not be computed.
    #[error(transparent)]
    Canonical(#[from] CanonicalError),
    /// An invariant of the synthesizer itself broke (a bug, never bad input).
    #[error("internal synthesizer error: {0}")]
    Internal(String),
}

impl SynthError {
    /// A configuration error naming `key`.
    pub fn config(key: &str, message: impl Into<String>) -> Self {
        Self::Config {
            key: key.to_owned(),
            message: message.into(),
        }
    }

    /// A device error naming the device and `field`.
    pub fn device(
        device: &crate::request::DeviceId,
        field: &str,
        message: impl Into<String>,
    ) -> Self {
        Self::Device {
            device: device.to_string(),
            field: field.to_owned(),
            message: message.into(),
        }
    }

    /// This error with a device error's device named together with its file, so the
    /// message says which file to edit.
    pub fn in_device_file(self, file: &std::path::Path) -> Self {
        match self {
            Self::Device {
                device,
                field,
                message,
            } => Self::Device {
                device: format!("{device} (file {})", file.display()),
                field,
                message,
            },
            other => other,
        }
    }

    /// A policy error naming the policy and `field`.
    pub fn policy(policy: &PolicyId, field: &str, message: impl Into<String>) -> Self {
        Self::Policy {
            policy: policy.to_string(),
            field: field.to_owned(),
            message: message.into(),
        }
    }

    /// An overflow of `what`.
    pub fn overflow(what: &str) -> Self {
        Self::Overflow {
            what: what.to_owned(),
        }
    }
}

/// Builds an id the synthesizer composes from portable parts. Ids are built from fixed
/// words, decimal numbers and the validated model name, so they are always portable; a
/// failure is reported through [`SynthError::Internal`] by the callers that take user text
/// ([`family_id_for`]) and cannot happen elsewhere.
pub(crate) fn portable<T: TryFrom<String, Error = String>>(text: String) -> T {
    T::try_from(text).unwrap_or_else(|e| unreachable!("synthesized ids are portable: {e}"))
}

/// Overrides and choices of one synthesis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SynthOptions {
    /// The model's name (the family id is `family.{name}`): ASCII letters, digits, `.`,
    /// `_`, `-`.
    pub model_name: String,
    /// Keep only the first N layers (scaling studies, fast tests).
    pub layers: Option<u64>,
    /// Use N routed experts per MoE layer (experts per token and expert groups clamp).
    pub experts: Option<u64>,
    /// Routed experts per expert node (1: one node per expert).
    pub expert_group_size: u64,
    /// Weight format.
    pub weight_format: WeightFormat,
    /// Module-name patterns the format leaves in the checkpoint dtype (a
    /// `quantization_config`'s `ignore` / `modules_to_not_convert`).
    pub keep_dense: Vec<quantization::Pattern>,
    /// The key (JSON path or flag) that set the format's group size, named by errors
    /// (absent: `--weight-format NAME`).
    pub group_key: Option<String>,
    /// The KV cache's element type (`auto`: the activation type).
    pub kv_cache_dtype: kv_cache::KvCacheDtype,
    /// Wire limits written into the policy (absent: the reference limits). The largest
    /// models' plans exceed the reference 16 MiB of plan JSON, so their folders raise them.
    pub wire_limits: Option<WireLimits>,
    /// Speculative-decoding layers built beside the model (`--speculative mtp`: the
    /// checkpoint's multi-token-prediction layers; default none).
    pub speculative: speculative::Speculative,
}

impl SynthOptions {
    /// Defaults for `model_name`: all layers and experts, one node per expert, dense f16.
    pub fn new(model_name: &str) -> Self {
        Self {
            model_name: model_name.to_owned(),
            layers: None,
            experts: None,
            expert_group_size: 1,
            weight_format: WeightFormat::DenseF16,
            keep_dense: Vec::new(),
            group_key: None,
            kv_cache_dtype: kv_cache::KvCacheDtype::Auto,
            wire_limits: None,
            speculative: speculative::Speculative::None,
        }
    }

    /// These options with the weight format of `config`'s own `quantization_config`, if
    /// it has one (else unchanged).
    pub fn with_config_quantization(mut self, config: &ModelConfig) -> Result<Self, SynthError> {
        if let Some(found) = quantization::of_config(config)? {
            self.weight_format = WeightFormat::Quantized(found.scheme);
            self.keep_dense = found.keep_dense;
            self.group_key = Some(found.group_key);
        }
        Ok(self)
    }

    /// The weight plan these options describe.
    pub fn weight_plan(&self) -> weights::WeightPlan {
        let mut plan = weights::WeightPlan::of(self.weight_format);
        plan.keep_dense = self.keep_dense.clone();
        if let Some(key) = &self.group_key {
            plan.group_key = key.clone();
        }
        plan
    }
}

fn family_id_for(name: &str) -> Result<ModelFamilyId, SynthError> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return Err(SynthError::Option {
            option: "model-name".to_owned(),
            message: format!("{name:?} must be non-empty ASCII letters, digits, '.', '_' or '-'"),
        });
    }
    ModelFamilyId::new(format!("family.{name}")).map_err(|message| SynthError::Option {
        option: "model-name".to_owned(),
        message,
    })
}

/// The configuration with the options' overrides applied, as the family records it.
pub fn effective_config(
    config: &ModelConfig,
    options: &SynthOptions,
) -> Result<ModelConfig, SynthError> {
    let mut config = config.text_decoder()?;
    if let Some(layers) = options.layers {
        let total = config.num_hidden_layers.unwrap_or(0);
        if layers == 0 || layers > total {
            return Err(SynthError::Option {
                option: "layers".to_owned(),
                message: format!("{layers} is not in 1..={total} (num_hidden_layers)"),
            });
        }
        config.num_hidden_layers = Some(layers);
        if let Some(types) = config.layer_types.as_mut() {
            types.truncate(layers as usize);
        }
        if let Some(indices) = config.attn_layer_indices.as_mut() {
            indices.retain(|&i| i < layers);
        }
        if let Some(k) = config.first_k_dense_replace.as_mut() {
            *k = (*k).min(layers);
        }
    }
    if let Some(experts) = options.experts {
        if config.routed_experts().is_none() {
            return Err(SynthError::Option {
                option: "experts".to_owned(),
                message: "the model has no routed experts".to_owned(),
            });
        }
        if experts == 0 {
            return Err(SynthError::Option {
                option: "experts".to_owned(),
                message: "must be positive".to_owned(),
            });
        }
        match config.routed_experts_key() {
            "n_routed_experts" => config.n_routed_experts = Some(experts),
            "num_local_experts" => config.num_local_experts = Some(experts),
            _ => config.num_experts = Some(experts),
        }
        if let Some(k) = config.num_experts_per_tok.as_mut() {
            *k = (*k).min(experts);
        }
        if config.n_group.is_some_and(|g| experts % g != 0) {
            config.n_group = Some(1);
            config.topk_group = Some(1);
        }
    }
    speculative::record(&mut config, options.speculative)?;
    if options.expert_group_size == 0 {
        return Err(SynthError::Option {
            option: "expert-group-size".to_owned(),
            message: "must be positive".to_owned(),
        });
    }
    Ok(config)
}

/// Synthesizes the plan request of `config` on `device` under `policy`.
pub fn synthesize(
    config: &ModelConfig,
    device: &DeviceDescription,
    policy: &PolicyPreset,
    options: &SynthOptions,
) -> Result<PlanRequest, SynthError> {
    device.validate()?;
    let family_id = family_id_for(&options.model_name)?;
    let effective = effective_config(config, options)?;
    let arch = registry::entry_of(&effective)?.specialize(&effective, effective.architecture()?)?;
    if let WeightFormat::Quantized(scheme) = options.weight_format {
        if scheme.experts_only && arch.experts.is_none() {
            return Err(SynthError::Option {
                option: "weight-format".to_owned(),
                message: format!(
                    "{} quantizes routed experts only (as gpt-oss and llama.cpp's MXFP4_MOE) and the model has none; choose fp8, int8, awq-int4 or nvfp4",
                    options.weight_format.name()
                ),
            });
        }
    }
    let mut runtime_policy = policy.runtime_policy(device)?;
    runtime_policy.wire_limits = options.wire_limits;
    let model_type = effective
        .model_type
        .as_deref()
        .filter(|t| !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or("decoder");
    let layout_id = WeightLayoutId::new(format!(
        "weight-layout.{model_type}.{}",
        options.weight_format.layout_suffix()
    ))
    .map_err(SynthError::Internal)?;
    let spec = layers::GraphSpec {
        arch: &arch,
        family_id: family_id.clone(),
        layout_id,
        weights: options.weight_plan(),
        kv_cache: options.kv_cache_dtype,
        tokens: runtime_policy.maximum_scheduled_tokens,
        context_tokens: policy.context_tokens(arch.trained_context),
        expert_group_size: options.expert_group_size,
    };
    let parts = layers::build_program(&spec)?;
    let needed = catalog::dtype_capability(parts.schema_activation_type());
    if !device.capabilities.contains(&needed) {
        return Err(SynthError::device(
            &device.id,
            "capabilities",
            format!(
                "lacks {needed}, which the model's {:?} activations and weights need; add it to the device file if the device has it, or plan with another --weight-format",
                parts.schema_activation_type()
            ),
        ));
    }
    let used: BTreeSet<operation::Operation> = parts.operations.iter().copied().collect();
    // `longrope` is admitted by the attention contracts only where a model uses it.
    let rope_kinds: &[&str] = match &arch.rope_scaling {
        Some(scaling) if scaling.kind == "longrope" => &["longrope"],
        _ => &[],
    };
    let catalog = catalog::build_catalog(
        device,
        &used,
        options.weight_format,
        options.kv_cache_dtype,
        rope_kinds,
    )?;
    let canonical_config = serde_json::to_value(&effective)
        .map_err(|e| SynthError::Internal(format!("configuration does not serialize: {e}")))?;
    let canonical_config = strip_nulls(canonical_config);
    let family = ModelFamily {
        family_id,
        canonical_config,
        weight_schema: parts.schema.clone(),
        program: parts.program.clone(),
    };
    let family_fingerprint = fingerprints::family_fingerprint(&family)?;
    let node_resolutions = resolution::resolve_nodes(
        &parts,
        &family_fingerprint,
        &catalog,
        &runtime_policy,
        device,
        options.weight_format,
    )?;
    Ok(PlanRequest {
        family,
        catalog,
        policy: runtime_policy,
        node_resolutions,
        completion_retention: CompletionRetention::default(),
        execution_weights: None,
    })
}

/// Drops the keys a parsed configuration did not have (serialized as `null`), so the family
/// records the configuration as written plus the overrides.
fn strip_nulls(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => serde_json::Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, strip_nulls(v)))
                .collect(),
        ),
        other => other,
    }
}

/// A model folder's defaults (`models/<name>/synth.json`): the device, policy and weight
/// format `jointplan synth --model` and `jointplan plan models/<name>` use unless flags
/// override them. Paths are relative to the folder.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelDefaults {
    /// Default device file.
    pub device: PathBuf,
    /// Default policy: `interactive`, `server`, or a preset file.
    pub policy: String,
    /// Default weight format (a `--weight-format` name); a checkpoint's own
    /// `quantization_config` takes precedence over it.
    pub weight_format: String,
    /// Wire limits for the policy (absent: the reference limits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire_limits: Option<WireLimits>,
}

/// A model folder of `models/`: its configuration, name and defaults.
#[derive(Clone, Debug)]
pub struct ModelFolder {
    /// The folder.
    pub path: PathBuf,
    /// Its name (the folder name), used for the family id.
    pub name: String,
    /// `config.json`.
    pub config: ModelConfig,
    /// `synth.json`, if present.
    pub defaults: Option<ModelDefaults>,
}

impl ModelFolder {
    /// Reads `config.json` and the optional `synth.json` of a model folder.
    pub fn read(path: &Path) -> Result<Self, SynthError> {
        let config = ModelConfig::read(&path.join("config.json"))?;
        let defaults_file = path.join("synth.json");
        let defaults = if defaults_file.exists() {
            Some(crate::request::read_json(&defaults_file)?)
        } else {
            None
        };
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("model")
            .to_owned();
        Ok(Self {
            path: path.to_path_buf(),
            name,
            config,
            defaults,
        })
    }

    /// The default device file, resolved against the folder.
    pub fn default_device(&self) -> Option<PathBuf> {
        self.defaults.as_ref().map(|d| self.path.join(&d.device))
    }

    /// The wire limits the folder's plans need, if not the reference ones.
    pub fn default_wire_limits(&self) -> Option<WireLimits> {
        self.defaults.as_ref().and_then(|d| d.wire_limits)
    }

    /// The default policy (a built-in name, or a preset file resolved against the folder).
    pub fn default_policy(&self) -> Option<String> {
        self.defaults.as_ref().map(|d| match d.policy.as_str() {
            "interactive" | "server" => d.policy.clone(),
            file => self.path.join(file).to_string_lossy().into_owned(),
        })
    }
}
