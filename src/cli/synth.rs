//! `jointplan synth`: a plan request from a model folder or config, a device and a policy.
//!
//! The synthesis flags ([`SynthFlags`]) are shared with `jointplan plan MODEL_FOLDER`, which
//! synthesizes the same request in memory and plans it.

use std::path::{Path, PathBuf};

use jointplan::study::sweep::PolicyFields;
use jointplan::synth::{ModelSource, SynthError, Synthesized};

use super::destination::Destination;

/// The choices of a synthesis beside the model folder: config, device, policy, scaling
/// overrides and weight format. Shared by `synth` and `plan MODEL_FOLDER`.
#[derive(Clone, Debug, Default, clap::Args)]
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
    /// dense-f16, dense-bf16, gptq-int4, gguf-q4k, gguf-q4_k_m, gguf-q5_k_m, gguf-q8_0, fp8,
    /// int8, awq-int4, mxfp4 or nvfp4 (default: the checkpoint's quantization_config, else
    /// the model folder's).
    #[arg(long)]
    pub weight_format: Option<String>,
    /// KV cache element type: auto (the activation type), f16, bf16, fp8 (1 byte) or int8
    /// (1 byte) (default: the policy preset's kv_cache_dtype, else auto).
    #[arg(long, value_name = "DTYPE")]
    pub kv_cache_dtype: Option<String>,
    /// Build speculative-decoding layers beside the model: mtp (the checkpoint's
    /// multi-token-prediction layers, num_nextn_predict_layers; DeepSeek-V3, GLM-4.5) or
    /// none [default: none].
    #[arg(long, value_name = "KIND")]
    pub speculative: Option<String>,
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
            kv_cache_dtype: self.kv_cache_dtype.clone(),
            speculative: self.speculative.clone(),
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
            (self.kv_cache_dtype.is_some(), "--kv-cache-dtype"),
            (self.speculative.is_some(), "--speculative"),
        ]
        .into_iter()
        .find_map(|(given, name)| given.then_some(name))
    }
}

/// Fields of the policy preset set from the command line (`synth` and `plan
/// MODEL_FOLDER`): a sweep point's `context`, `sequences` and `scheduled_tokens`, so that
/// replaying a point needs no preset file.
#[derive(Debug, Default, clap::Args)]
pub struct PolicyFlags {
    /// The preset's maximum context in tokens (the model's trained positions still cap it).
    #[arg(long, value_name = "TOKENS", value_parser = clap::value_parser!(u64).range(1..))]
    pub context: Option<u64>,
    /// The preset's maximum active sequences.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub sequences: Option<u32>,
    /// The preset's scheduled-token ceiling (tokens per step).
    #[arg(long, value_name = "TOKENS", value_parser = clap::value_parser!(u64).range(1..))]
    pub scheduled_tokens: Option<u64>,
}

impl PolicyFlags {
    /// The preset fields these flags set.
    pub fn fields(&self) -> PolicyFields {
        PolicyFields {
            context: self.context,
            sequences: self.sequences,
            scheduled_tokens: self.scheduled_tokens,
            storage_views: None,
        }
    }

    /// The first flag given (as `--name`), if any (a request file rejects them).
    pub fn first_given(&self) -> Option<&'static str> {
        [
            (self.context.is_some(), "--context"),
            (self.sequences.is_some(), "--sequences"),
            (self.scheduled_tokens.is_some(), "--scheduled-tokens"),
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
    /// Policy preset fields.
    #[command(flatten)]
    pub policy: PolicyFlags,
    /// Output request file.
    #[arg(short = 'o', long)]
    pub output: PathBuf,
}

/// Synthesizes the request of a model folder (or of `--config`) under `flags`, with the
/// preset fields of `policy` set; the folder's `synth.json` supplies the device, policy and
/// weight format the flags do not.
pub fn synthesize_request(
    model: Option<&Path>,
    flags: &SynthFlags,
    policy: &PolicyFlags,
) -> Result<Synthesized, SynthError> {
    let source = flags.source(model);
    let fields = policy.fields();
    let synthesized = if fields.is_empty() {
        source.synthesize()?
    } else {
        fields.synthesize(&source)?
    };
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
    } = synthesize_request(args.model.as_deref(), &args.flags, &args.policy)?;
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
