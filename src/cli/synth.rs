//! `jointplan synth`: a plan request from a model folder or config, a device and a policy.

use std::io::Write;
use std::path::PathBuf;

use crate::synth::{
    synthesize, DeviceDescription, ModelConfig, ModelFolder, PolicyPreset, SynthError,
    SynthOptions, WeightFormat,
};

/// Arguments of `jointplan synth`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A model folder of `models/` (its `config.json` and `synth.json` defaults).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// A `config.json` to use instead of the folder's.
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
    /// Routed experts per expert node.
    #[arg(long, default_value_t = 1)]
    pub expert_group_size: u64,
    /// dense-f16, dense-bf16, gptq-int4 or gguf-q4k (default: the model folder's).
    #[arg(long)]
    pub weight_format: Option<String>,
    /// Output request file.
    #[arg(short = 'o', long)]
    pub output: PathBuf,
}

fn option(option: &str, message: impl Into<String>) -> SynthError {
    SynthError::Option {
        option: option.to_owned(),
        message: message.into(),
    }
}

/// Runs `jointplan synth`; returns the summary line printed on success.
pub fn run(args: &Args) -> Result<String, SynthError> {
    let folder = args.model.as_deref().map(ModelFolder::read).transpose()?;
    let config = match (&args.config, &folder) {
        (Some(file), _) => ModelConfig::read(file)?,
        (None, Some(f)) => f.config.clone(),
        (None, None) => return Err(option("model", "give --model or --config")),
    };
    let name = match (&folder, &args.config) {
        (Some(f), _) => f.name.clone(),
        (None, Some(file)) => file
            .parent()
            .and_then(|p| p.file_name())
            .and_then(|n| n.to_str())
            .unwrap_or("model")
            .to_owned(),
        (None, None) => "model".to_owned(),
    };
    let device_file = args
        .device
        .clone()
        .or_else(|| folder.as_ref().and_then(|f| f.default_device()))
        .ok_or_else(|| option("device", "is required (the model folder has no synth.json)"))?;
    let device = DeviceDescription::read(&device_file)?;
    let policy_name = args
        .policy
        .clone()
        .or_else(|| folder.as_ref().and_then(|f| f.default_policy()))
        .unwrap_or_else(|| "interactive".to_owned());
    let policy = PolicyPreset::resolve(&policy_name)?;
    let format_name = args
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
    options.layers = args.layers;
    options.experts = args.experts;
    options.expert_group_size = args.expert_group_size;
    options.weight_format = weight_format;
    options.wire_limits = folder.as_ref().and_then(|f| f.default_wire_limits());
    let request = synthesize(&config, &device, &policy, &options)?;
    let dir = args
        .output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), PathBuf::from);
    let io = |e: std::io::Error| option("output", format!("{}: {e}", args.output.display()));
    let mut file = tempfile::NamedTempFile::new_in(&dir).map_err(io)?;
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
