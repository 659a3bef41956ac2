//! `--engine` and `--engine-arg` of `plan MODEL_FOLDER`: the memory accounting of a
//! serving engine for the synthesized model, beside jointplan's own plan (docs/engines.md).

use jointplan::engine::{EngineArgs, EngineChoice};
use jointplan::study::engine_facts::EngineApplied;
use jointplan::synth::Synthesized;

use super::synth::SynthFlags;
use super::Error;

fn library(e: jointplan::engine::EngineError) -> Error {
    Error::Library(jointplan::Error::from(jointplan::study::StudyError::from(
        e,
    )))
}

/// The engine whose accounting `plan` reports, and its arguments.
#[derive(Debug, Default, clap::Args)]
pub struct EngineFlags {
    /// Report what a serving engine would allocate and log for this model and device:
    /// vllm, sglang, trtllm or llama.cpp (NAME@VERSION picks another modelled version,
    /// e.g. vllm@0.6; rules: docs/engines.md). Model folders only.
    #[arg(long, value_name = "ENGINE")]
    pub engine: Option<String>,
    /// An engine argument as the engine spells it (repeatable), e.g.
    /// `gpu_memory_utilization=0.95`, `max_num_batched_tokens=8192`, `kv_cache_dtype=fp8`;
    /// the engine's defaults where absent.
    #[arg(long = "engine-arg", value_name = "KEY=VALUE", requires = "engine")]
    pub engine_args: Vec<String>,
}

impl EngineFlags {
    /// The synthesis flags with what the engine arguments say about the model: `dtype` and
    /// `quantization` set the weight format, `kv_cache_dtype` the KV cache dtype (the
    /// engine's own spelling), `speculative_config` with an MTP method `--speculative mtp`,
    /// where the flags leave them open; a flag that disagrees with an engine argument is
    /// refused (the library's rule, `study::engine_facts::source_with_engine_args`).
    pub fn synth_flags(&self, flags: &SynthFlags) -> Result<SynthFlags, Error> {
        let mut flags = flags.clone();
        if self.engine.is_none() {
            return Ok(flags);
        }
        let args = EngineArgs::parse(&self.engine_args).map_err(library)?;
        let source =
            jointplan::study::engine_facts::source_with_engine_args(&flags.source(None), &args)
                .map_err(|e| Error::Library(jointplan::Error::from(e)))?;
        flags.weight_format = source.weight_format;
        flags.kv_cache_dtype = source.kv_cache_dtype;
        flags.speculative = source.speculative;
        Ok(flags)
    }

    /// The engine's tensor- or pipeline-parallel argument when it asks for more than one
    /// device (`tensor_parallel_size=N` or `pipeline_parallel_size=N` of vLLM, `tp_size=N`
    /// of SGLang and TensorRT-LLM, N > 1), as `--engine-arg KEY=N`, with the devices the
    /// engine runs on (the product of the two degrees); unparsable arguments are left to
    /// the accounting's errors.
    pub fn several_devices(&self) -> Option<(String, u64)> {
        let choice: EngineChoice = self.engine.as_deref()?.parse().ok()?;
        let args = EngineArgs::parse(&self.engine_args).ok()?;
        let degree = |key: Option<&'static str>| {
            key.and_then(|k| args.count(k).filter(|&n| n > 1).map(|n| (k, n)))
        };
        let tp = degree(choice.engine.tensor_parallel_key());
        let pp = degree(choice.engine.pipeline_parallel_key());
        let devices = tp.map_or(1, |t| t.1).saturating_mul(pp.map_or(1, |p| p.1));
        let named: Vec<String> = [tp, pp]
            .into_iter()
            .flatten()
            .map(|(key, n)| format!("{key}={n}"))
            .collect();
        (!named.is_empty()).then(|| (named.join(" --engine-arg "), devices))
    }

    /// What `--engine` does to a synthesized model, if given: the engine's accounting and
    /// the request held to the engine's budget (the library's rule, which a sweep's
    /// `engine` knob follows too).
    pub fn apply(&self, synthesized: &Synthesized) -> Result<Option<EngineApplied>, Error> {
        let Some(name) = &self.engine else {
            return Ok(None);
        };
        let choice: EngineChoice = name.parse().map_err(library)?;
        let args = EngineArgs::parse(&self.engine_args).map_err(library)?;
        let applied = jointplan::study::engine_facts::apply_engine(
            &synthesized.request,
            &synthesized.device,
            &synthesized.policy,
            &choice,
            &args,
        )
        .map_err(|e| Error::Library(jointplan::Error::from(e)))?;
        Ok(Some(applied))
    }
}
