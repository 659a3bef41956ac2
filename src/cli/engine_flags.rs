//! `--engine` and `--engine-arg` of `plan MODEL_FOLDER`: the memory accounting of a
//! serving engine for the synthesized model, beside jointplan's own plan (docs/engines.md).

use jointplan::engine::{EngineArgs, EngineChoice, EngineReport};
use jointplan::synth::Synthesized;

use super::Error;

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
    /// The engine's report for a synthesized model, if `--engine` was given.
    pub fn report(&self, synthesized: &Synthesized) -> Result<Option<EngineReport>, Error> {
        let Some(name) = &self.engine else {
            return Ok(None);
        };
        let library = |e: jointplan::engine::EngineError| {
            Error::Library(jointplan::Error::from(jointplan::study::StudyError::from(
                e,
            )))
        };
        let choice: EngineChoice = name.parse().map_err(library)?;
        let args = EngineArgs::parse(&self.engine_args).map_err(library)?;
        let report = jointplan::study::engine_facts::engine_report(
            &synthesized.request,
            &synthesized.device,
            &synthesized.policy,
            &choice,
            &args,
        )
        .map_err(|e| Error::Library(jointplan::Error::from(e)))?;
        Ok(Some(report))
    }
}
