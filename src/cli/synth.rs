//! `jointplan synth`: a plan request from a model folder or config, a device and a policy.
//!
//! The synthesis flags ([`SynthFlags`]) are shared with `jointplan plan MODEL_FOLDER`, which
//! synthesizes the same request in memory and plans it.

// `Error` carries the library error unboxed: errors are the cold path.
#![allow(clippy::result_large_err)]

use std::path::{Path, PathBuf};

use jointplan::synth::{ModelSource, SynthError, Synthesized};

use super::destination::Destination;

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
    /// The model source these flags describe, for the folder `model` if given.
    pub fn source(&self, model: Option<&Path>) -> ModelSource {
        ModelSource {
            folder: model.map(Path::to_path_buf),
            config: self.config.clone(),
            device: self.device.clone(),
            policy: self.policy.clone(),
            layers: self.layers,
            experts: self.experts,
            expert_group_size: self.expert_group_size,
            weight_format: self.weight_format.clone(),
        }
    }

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

/// Synthesizes the request of a model folder (or of `--config`) under `flags`; the folder's
/// `synth.json` supplies the device, policy and weight format the flags do not.
pub fn synthesize_request(
    model: Option<&Path>,
    flags: &SynthFlags,
) -> Result<Synthesized, SynthError> {
    let synthesized = flags.source(model).synthesize()?;
    for warning in &synthesized.warnings {
        eprintln!("warning: {warning}");
    }
    Ok(synthesized)
}

/// Runs `jointplan synth` and prints its summary line.
pub fn run(args: &Args) -> Result<(), super::Error> {
    let Synthesized {
        request,
        weight_format,
        inputs,
        ..
    } = synthesize_request(args.model.as_deref(), &args.flags)?;
    let inputs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    Destination::open(&args.output, &inputs, false, None)?.write_json(&request, false)?;
    super::output::write_stdout(&format!(
        "{}: {} nodes, {} weights, device {}, policy {}, weight format {} -> {}\n",
        request.family.family_id,
        request.node_resolutions.len(),
        request.family.program.weights.len(),
        request.catalog.device.id,
        request.policy.policy_id,
        weight_format.name(),
        args.output.display()
    ))?;
    Ok(())
}
