//! `jointplan synth`: a plan request from a model folder or config, a device and a policy.
//!
//! The synthesis flags ([`SynthFlags`]) are shared with `jointplan plan MODEL_FOLDER`, which
//! synthesizes the same request in memory and plans it.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::request::PlanRequest;
use crate::synth::{
    synthesize, DeviceDescription, ModelConfig, ModelFolder, PolicyPreset, SynthError,
    SynthOptions, WeightFormat,
};

/// The choices of a synthesis beside the model folder: config, device, policy, scaling
/// overrides and weight format. Shared by `synth` and `plan MODEL_FOLDER`.
#[derive(Debug, Default, clap::Args)]
pub struct SynthFlags {
    /// A `config.json` to use instead of the model folder's.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Device description file (default: the model folder's).
    #[arg(long)]
    pub device: Option<PathBuf>,
    /// `interactive`, `server` or a preset file (default: the model folder's).
    #[arg(long)]
    pub policy: Option<String>,
    /// Keep only the first N layers.
    #[arg(long)]
    pub layers: Option<u64>,
    /// Use N routed experts per MoE layer.
    #[arg(long)]
    pub experts: Option<u64>,
    /// Routed experts per expert node [default: 1].
    #[arg(long)]
    pub expert_group_size: Option<u64>,
    /// dense-f16, dense-bf16, gptq-int4 or gguf-q4k (default: the model folder's).
    #[arg(long)]
    pub weight_format: Option<String>,
}

impl SynthFlags {
    /// The first synthesis flag given (as `--name`), if any: `plan REQUEST.json` rejects
    /// them, since a request file is planned as it is.
    pub fn first_given(&self) -> Option<&'static str> {
        [
            (self.config.is_some(), "--config"),
            (self.device.is_some(), "--device"),
            (self.policy.is_some(), "--policy"),
            (self.layers.is_some(), "--layers"),
            (self.experts.is_some(), "--experts"),
            (self.expert_group_size.is_some(), "--expert-group-size"),
            (self.weight_format.is_some(), "--weight-format"),
        ]
        .into_iter()
        .find_map(|(given, name)| given.then_some(name))
    }
}

/// Arguments of `jointplan synth`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A model folder of `models/` (its `config.json` and `synth.json` defaults).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Config, device, policy, overrides and weight format.
    #[command(flatten)]
    pub flags: SynthFlags,
    /// Output request file.
    #[arg(short = 'o', long)]
    pub output: PathBuf,
}

/// A synthesized request and the weight format it uses.
#[derive(Clone, Debug)]
pub struct Synthesized {
    /// The request.
    pub request: PlanRequest,
    /// Its weight format.
    pub weight_format: WeightFormat,
}

fn option(option: &str, message: impl Into<String>) -> SynthError {
    SynthError::Option {
        option: option.to_owned(),
        message: message.into(),
    }
}

/// Synthesizes the request of a model folder (or of `--config`) under `flags`; the folder's
/// `synth.json` supplies the device, policy and weight format the flags do not.
pub fn synthesize_request(
    model: Option<&Path>,
    flags: &SynthFlags,
) -> Result<Synthesized, SynthError> {
    let folder = model.map(ModelFolder::read).transpose()?;
    let config = match (&flags.config, &folder) {
        (Some(file), _) => ModelConfig::read(file)?,
        (None, Some(f)) => f.config.clone(),
        (None, None) => return Err(option("model", "give --model or --config")),
    };
    // The family id names the configuration actually used: `--config other/config.json`
    // gives `family.other` even beside a model folder.
    let name = match (&folder, &flags.config) {
        (Some(f), None) => f.name.clone(),
        (_, Some(file)) => file
            .parent()
            .and_then(|p| p.file_name())
            .and_then(|n| n.to_str())
            .unwrap_or("model")
            .to_owned(),
        (None, None) => "model".to_owned(),
    };
    if !config.extra.is_empty() {
        eprintln!(
            "warning: config keys the architecture registry does not model (kept in the family's config, no effect on the plan): {}",
            config.extra.keys().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    let device_file = flags
        .device
        .clone()
        .or_else(|| folder.as_ref().and_then(|f| f.default_device()))
        .ok_or_else(|| option("device", "is required (the model folder has no synth.json)"))?;
    let device =
        DeviceDescription::read(&device_file).map_err(|e| e.in_device_file(&device_file))?;
    let policy_name = flags
        .policy
        .clone()
        .or_else(|| folder.as_ref().and_then(|f| f.default_policy()))
        .unwrap_or_else(|| "interactive".to_owned());
    let policy = PolicyPreset::resolve(&policy_name)?;
    let format_name = flags
        .weight_format
        .clone()
        .or_else(|| {
            folder
                .as_ref()
                .and_then(|f| f.defaults.as_ref().map(|d| d.weight_format.clone()))
        })
        .unwrap_or_else(|| "dense-f16".to_owned());
    let weight_format: WeightFormat = format_name
        .parse()
        .map_err(|m: String| option("weight-format", m))?;
    let mut options = SynthOptions::new(&name);
    options.layers = flags.layers;
    options.experts = flags.experts;
    options.expert_group_size = flags.expert_group_size.unwrap_or(1);
    options.weight_format = weight_format;
    options.wire_limits = folder.as_ref().and_then(|f| f.default_wire_limits());
    let request = synthesize(&config, &device, &policy, &options)
        .map_err(|e| e.in_device_file(&device_file))?;
    Ok(Synthesized {
        request,
        weight_format,
    })
}

/// Runs `jointplan synth`; returns the summary line printed on success.
pub fn run(args: &Args) -> Result<String, SynthError> {
    let Synthesized {
        request,
        weight_format,
    } = synthesize_request(args.model.as_deref(), &args.flags)?;
    let dir = args
        .output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), PathBuf::from);
    let io = |e: std::io::Error| option("output", format!("{}: {e}", args.output.display()));
    let mut file = super::output::output_temporary(&dir).map_err(io)?;
    {
        let mut writer = std::io::BufWriter::new(file.as_file_mut());
        serde_json::to_writer(&mut writer, &request)
            .map_err(|e| SynthError::Internal(format!("request does not serialize: {e}")))?;
        writer.flush().map_err(io)?;
    }
    file.persist(&args.output).map_err(|e| io(e.error))?;
    Ok(format!(
        "{}: {} nodes, {} weights, device {}, policy {}, weight format {} -> {}",
        request.family.family_id,
        request.node_resolutions.len(),
        request.family.program.weights.len(),
        request.catalog.device.id,
        request.policy.policy_id,
        weight_format.name(),
        args.output.display()
    ))
}
