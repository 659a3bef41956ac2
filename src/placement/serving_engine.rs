//! A serving engine named on a placement (`plan MODEL --devices SET.json --engine E
//! --engine-arg ...`, a sweep's device-set point with `engine`): the engine runs the model
//! at its own tensor-parallel degree and its own number of pipeline stages (vLLM's
//! `pipeline_parallel_size`, default 1), every device is held to the budget the engine's
//! rule gives it, and the engine's accounting of one rank (stage 0's) stands beside the
//! placement (docs/placement.md, "Serving engines across devices").

use crate::engine::{EngineArgs, EngineChoice};
use crate::study::engine_facts::{apply_engine, context_key, EngineApplied};
use crate::synth::{ModelSource, PolicyPreset};

use super::{DeviceSet, Gathered, PlacementError, Settings};

/// What naming an engine does to a placement.
#[derive(Clone, Debug)]
pub struct EngineOnSet {
    /// The degree the engine runs at: its argument (`tensor_parallel_size`, `tp_size`), or
    /// the pinned degree.
    pub tensor_parallel: u32,
    /// The pipeline stages the engine runs: its argument (`pipeline_parallel_size`), or the
    /// pinned number; 1 for an engine without stages.
    pub pipeline_parallel: u32,
    /// The policy with the engine's longest request (`max_model_len`, ...) as its context
    /// when the arguments give one.
    pub policy: PolicyPreset,
    /// The engine's accounting on one rank at that degree, and its budget.
    pub applied: EngineApplied,
}

impl EngineOnSet {
    /// `settings` with the engine's degree and stages pinned, its budget and its policy.
    pub fn settings(&self, settings: &Settings) -> Settings {
        Settings {
            tensor_parallel: Some(self.tensor_parallel),
            pipeline_parallel: Some(self.pipeline_parallel),
            budget: Some(self.applied.budget.clone()),
            policy: Some(self.policy.clone()),
            ..settings.clone()
        }
    }
}

fn usage(choice: &EngineChoice, message: String) -> PlacementError {
    PlacementError::Usage(format!("--engine {}: {message}", choice.engine.name()))
}

/// The engine `choice` with `args` on `set` under `policy`, at the pinned `tensor_parallel`
/// and `pipeline_parallel` if any: the degree is the engine's tensor-parallel argument or
/// the pinned one (both given must agree; on a set of one device, 1; otherwise one of the
/// two is required: an engine given several devices and no degree uses one), the stages
/// likewise the engine's pipeline argument or the pinned number (both given must agree;
/// default 1; an engine without stages takes one), the set one device kind; the engine's
/// accounting is that of the model synthesized for the set's device at that degree and
/// those stages.
pub fn engine_on_set(
    source: &ModelSource,
    set: &DeviceSet,
    policy: &PolicyPreset,
    choice: &EngineChoice,
    args: &EngineArgs,
    tensor_parallel: Option<u32>,
    pipeline_parallel: Option<u32>,
) -> Result<EngineOnSet, PlacementError> {
    engine_on_set_gathered(
        source,
        set,
        policy,
        choice,
        args,
        tensor_parallel,
        pipeline_parallel,
        &mut Gathered::once(),
    )
}

/// [`engine_on_set`] with the model's synthesis for the set's device taken from
/// `gathered` where it holds it (it depends on the source, the device and the policy, not
/// on the degree): the same answer, synthesized once across the calls sharing the store.
#[allow(clippy::too_many_arguments)]
pub fn engine_on_set_gathered(
    source: &ModelSource,
    set: &DeviceSet,
    policy: &PolicyPreset,
    choice: &EngineChoice,
    args: &EngineArgs,
    tensor_parallel: Option<u32>,
    pipeline_parallel: Option<u32>,
    gathered: &mut Gathered,
) -> Result<EngineOnSet, PlacementError> {
    let Some(key) = choice.engine.tensor_parallel_key() else {
        return Err(usage(
            choice,
            "its memory accounting is modelled on one device (llama.cpp splits layers over GPUs, which is not modelled): plan it with --device D alone".to_owned(),
        ));
    };
    let stages = match choice.engine.pipeline_parallel_key() {
        Some(pp_key) => {
            let from_arg = args
                .count(pp_key)
                .map(|p| {
                    u32::try_from(p)
                        .map_err(|_| usage(choice, format!("--engine-arg {pp_key}={p}: too large")))
                })
                .transpose()?;
            match (from_arg, pipeline_parallel) {
                (Some(a), Some(b)) if a != b => {
                    return Err(usage(
                        choice,
                        format!(
                            "--engine-arg {pp_key}={a} disagrees with --pipeline-parallel {b}; give one of the two"
                        ),
                    ))
                }
                (Some(p), _) | (None, Some(p)) => Some((pp_key, p)),
                (None, None) => None,
            }
        }
        None if pipeline_parallel.is_some_and(|p| p > 1) => {
            return Err(usage(
                choice,
                "the engine's accounting is modelled for one pipeline stage (tensor parallelism only): drop --pipeline-parallel".to_owned(),
            ));
        }
        None => None,
    };
    if set.kinds.len() > 1 {
        return Err(usage(
            choice,
            format!(
                "a serving engine's memory budget is modelled for one device kind, and the set {} has {}",
                set.name,
                set.kinds.len()
            ),
        ));
    }
    let from_arg = args
        .count(key)
        .map(|t| {
            u32::try_from(t)
                .map_err(|_| usage(choice, format!("--engine-arg {key}={t}: too large")))
        })
        .transpose()?;
    let devices = set.device_count();
    let degree = match (from_arg, tensor_parallel) {
        (Some(a), Some(b)) if a != b => {
            return Err(usage(
                choice,
                format!(
                    "--engine-arg {key}={a} disagrees with --tensor-parallel {b}; give one of the two"
                ),
            ))
        }
        (Some(t), _) | (None, Some(t)) => t,
        // One rank per stage: the set's devices are the engine's stages.
        (None, None) if devices == u64::from(stages.map_or(1, |(_, p)| p)) => 1,
        (None, None) => {
            return Err(usage(
                choice,
                format!(
                    "the engine runs at its {key} (default 1), not at the set's {devices} devices: give --engine-arg {key}=N (or --tensor-parallel N)"
                ),
            ))
        }
    };
    let needed = u64::from(degree).saturating_mul(u64::from(stages.map_or(1, |(_, p)| p)));
    if needed > devices {
        let stages_text = match stages {
            Some((pp_key, p)) if p > 1 => format!(" x {pp_key}={p}"),
            _ => String::new(),
        };
        return Err(usage(
            choice,
            format!(
                "{key}={degree}{stages_text} runs on {needed} devices and the set {} has {devices}: give a set of {needed} devices (--count {needed}) or lower the degrees",
                set.name
            ),
        ));
    }
    let mut args = args.clone();
    args.set(key, &degree.to_string());
    if let Some((pp_key, p)) = stages {
        args.set(pp_key, &p.to_string());
    }
    let mut policy = policy.clone();
    if let Some(context) = args.count(context_key(choice)) {
        policy.maximum_context_tokens = Some(context);
    }
    let kind = set
        .kinds
        .first()
        .ok_or_else(|| usage(choice, "the set has no device".to_owned()))?;
    let synthesized = gathered.synthesized(source, &kind.description, &kind.file, &policy)?;
    let applied = apply_engine(
        &synthesized.request,
        &synthesized.device,
        &synthesized.policy,
        choice,
        &args,
    )
    .map_err(|e| PlacementError::Study(Box::new(e)))?;
    Ok(EngineOnSet {
        tensor_parallel: degree,
        pipeline_parallel: stages.map_or(1, |(_, p)| p),
        policy,
        applied,
    })
}
