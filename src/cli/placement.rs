//! `jointplan plan MODEL_FOLDER --devices SET.json` (or `--device D --count N`): the model
//! placed across a device set, certified, checked and hashed (docs/placement.md).

use std::path::{Path, PathBuf};

use jointplan::placement::problem::ExpertSplit;
use jointplan::placement::serving_engine::EngineOnSet;
use jointplan::placement::{
    self, DeviceSet, Objective, PlacementError, Settings, DEFAULT_ENUMERATION_BUDGET,
};

use super::destination::Destination;
use super::output::{pretty_json, write_stdout};
use super::Error;

/// Placement flags of `plan` (model folders only).
#[derive(Debug, Default, clap::Args)]
pub struct PlacementFlags {
    /// A device set file (`models/devices/sets/*.json`): place the model across it.
    #[arg(long, value_name = "SET.json", conflicts_with = "count")]
    pub devices: Option<PathBuf>,
    /// With `--device D`: place the model across N such devices in one domain, linked by
    /// the device file's `links` (docs/placement.md, "Device files: links").
    #[arg(long, value_name = "N")]
    pub count: Option<u32>,
    /// Pin the tensor-parallel degree (otherwise the solver chooses).
    #[arg(long, value_name = "N")]
    pub tensor_parallel: Option<u32>,
    /// Pin the pipeline depth (otherwise the solver chooses).
    #[arg(long, value_name = "N")]
    pub pipeline_parallel: Option<u32>,
    /// Pin how routed experts split under tensor parallelism: `tensor` (every expert's
    /// matrices split over the group) or `expert` (whole experts per rank); otherwise the
    /// solver tries both.
    #[arg(long, value_name = "SPLIT")]
    pub expert_split: Option<String>,
    /// Allow host memory: routed expert groups, whole layers' weights (streamed) and layers'
    /// KV cache, chosen by the solver.
    #[arg(long)]
    pub host_offload: bool,
    /// With --host-offload, the KV cache's offload unit: `layer` (default: whole layers'
    /// KV) or `sequence` (one sequence of one layer: a stage's host KV is whole layers and
    /// some sequences of the next, every count searched).
    #[arg(long, value_name = "GRAIN")]
    pub kv_offload_grain: Option<String>,
    /// Host memory offload may use, bytes (default: the set's host tier).
    #[arg(long, value_name = "BYTES")]
    pub host_memory: Option<u64>,
    /// fewest-devices (default), most-kv-tokens, least-offloaded, or (with a serving
    /// point: --concurrency, --input-tokens, --output-tokens) min-tpot, min-ttft or
    /// max-throughput.
    #[arg(long, value_name = "OBJECTIVE")]
    pub placement_objective: Option<String>,
    /// What an alternative costs against the placement: `tp=N`, `pp=N` or
    /// `offload=BYTES` (host offload within BYTES), solved under the same objective.
    #[arg(long, value_name = "ALTERNATIVE")]
    pub why_not: Option<String>,
    /// Placements the certifying enumeration may evaluate.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_ENUMERATION_BUDGET)]
    pub enumeration_budget: u64,
}

impl PlacementFlags {
    /// Whether the flags ask for a placement.
    pub fn active(&self) -> bool {
        self.devices.is_some() || self.count.is_some()
    }

    /// The first placement-only flag given without `--devices` or `--count`.
    pub fn stray(&self) -> Option<&'static str> {
        [
            (self.tensor_parallel.is_some(), "--tensor-parallel"),
            (self.pipeline_parallel.is_some(), "--pipeline-parallel"),
            (self.expert_split.is_some(), "--expert-split"),
            (self.host_offload, "--host-offload"),
            (self.host_memory.is_some(), "--host-memory"),
            (self.kv_offload_grain.is_some(), "--kv-offload-grain"),
            (self.placement_objective.is_some(), "--placement-objective"),
            (self.why_not.is_some(), "--why-not"),
        ]
        .into_iter()
        .find_map(|(given, name)| given.then_some(name))
    }
}

impl From<PlacementError> for Error {
    fn from(error: PlacementError) -> Self {
        Error::Placement(error)
    }
}

fn set_of(flags: &PlacementFlags, device: Option<&Path>) -> Result<DeviceSet, Error> {
    if let Some(file) = &flags.devices {
        return Ok(DeviceSet::read(file)?);
    }
    let count = flags.count.unwrap_or(1);
    let device = device.ok_or_else(|| {
        Error::Usage("--count N needs --device D (the device file of the N devices)".to_owned())
    })?;
    Ok(DeviceSet::uniform(device, count, flags.host_memory)?)
}

/// What `--engine` means for a placement: the library's rule
/// (`placement::serving_engine::engine_on_set`) with the engine's arguments as given, and
/// `--context` checked against the engine's longest request.
fn engine_on_set(
    args: &super::plan::Args,
    source: &jointplan::synth::ModelSource,
    set: &DeviceSet,
) -> Result<Option<EngineOnSet>, Error> {
    let Some(name) = &args.engine.engine else {
        return Ok(None);
    };
    let usage = |message: String| Error::Usage(format!("--engine {name}: {message}"));
    let choice: jointplan::engine::EngineChoice = name
        .parse()
        .map_err(|e: jointplan::engine::EngineError| usage(e.to_string()))?;
    let engine_args = jointplan::engine::EngineArgs::parse(&args.engine.engine_args)
        .map_err(|e| usage(e.to_string()))?;
    let context_key = jointplan::study::engine_facts::context_key(&choice);
    if let (Some(context), Some(given)) = (engine_args.count(context_key), args.policy.context) {
        if context != given {
            return Err(usage(format!(
                "--engine-arg {context_key}={context} disagrees with --context {given}; give one of the two"
            )));
        }
    }
    let fields = args.policy.fields();
    let policy = if fields.is_empty() {
        source
            .policy_preset()
            .map_err(|e| Error::from(e).in_file(&args.request))?
    } else {
        fields.preset(source)?
    };
    Ok(Some(placement::serving_engine::engine_on_set(
        source,
        set,
        &policy,
        &choice,
        &engine_args,
        args.placement.tensor_parallel,
        args.placement.pipeline_parallel,
    )?))
}

/// Places the model folder `model` as `args` ask; prints the placement and writes it to
/// `output` if given.
pub fn run(args: &super::plan::Args) -> Result<(), Error> {
    let flags = &args.placement;
    if !args.request.is_dir() {
        return Err(Error::Usage(format!(
            "--devices/--count place a model folder; {} is a request file",
            args.request.display()
        )));
    }
    let objective = match &flags.placement_objective {
        None => Objective::FewestDevices,
        Some(name) => Objective::from_name(name).ok_or_else(|| {
            Error::Usage(format!(
                "--placement-objective {name}: expected one of {}",
                Objective::ALL.map(Objective::name).join(", ")
            ))
        })?,
    };
    let expert_split = match &flags.expert_split {
        None => None,
        Some(name) => Some(ExpertSplit::from_name(name).ok_or_else(|| {
            Error::Usage(format!(
                "--expert-split {name}: expected `tensor` (every expert split over the group) or `expert` (whole experts per rank)"
            ))
        })?),
    };
    let kv_sequence_grain = match flags.kv_offload_grain.as_deref() {
        None | Some("layer") => false,
        Some("sequence") if flags.host_offload => true,
        Some("sequence") => {
            return Err(Error::Usage(
                "--kv-offload-grain sequence needs --host-offload (it says how KV goes to the host)".to_owned(),
            ))
        }
        Some(other) => {
            return Err(Error::Usage(format!(
                "--kv-offload-grain {other}: expected `layer` (whole layers' KV) or `sequence` (one sequence of one layer)"
            )))
        }
    };
    let set = set_of(flags, args.synth.device.as_deref())?;
    // The engine's arguments say what they say about the model (`dtype`, `quantization`,
    // `kv_cache_dtype`), as for a single-device plan.
    let source = args
        .engine
        .synth_flags(&args.synth)?
        .source(Some(&args.request));
    let engine = engine_on_set(args, &source, &set)?;
    if args.serving.calibration.is_some() || args.serving.performance_device.is_some() {
        return Err(Error::Usage(
            "--calibration and --performance-device do not apply to a placement: every device of the set is priced by its own file's figures".to_owned(),
        ));
    }
    let serving = args
        .serving
        .requested(args.engine.engine.as_deref())?
        // The engine's resolved arguments decide its scheduling (vLLM V0's chunked prefill).
        .map(|r| r.under(engine.as_ref().map(|e| &e.applied.report)))
        .map(|r| placement::timing::Serving {
            concurrency: r.concurrency,
            input_tokens: r.input_tokens,
            output_tokens: r.output_tokens,
            engine: r.engine,
            simulated_requests: None,
            lengths: r.lengths,
            chunked_prefill: r.chunked_prefill,
        });
    let why_not = flags
        .why_not
        .as_deref()
        .map(placement::alternative::Alternative::parse)
        .transpose()?;
    let mut settings = Settings {
        why_not,
        policy: None,
        serving,
        tensor_parallel: flags.tensor_parallel,
        pipeline_parallel: flags.pipeline_parallel,
        expert_split,
        host_offload: flags.host_offload,
        host_memory: flags.host_memory,
        kv_sequence_grain,
        objective,
        budget: None,
    };
    // --context, --sequences and --scheduled-tokens set the preset's fields, as for a
    // single-device plan.
    let fields = args.policy.fields();
    if !fields.is_empty() {
        settings.policy = Some(fields.preset(&source)?);
    }
    if let Some(engine) = &engine {
        settings = engine.settings(&settings);
    }
    let options = args.selection.build_options()?;
    let placed = placement::place(&source, &set, &settings, &options, flags.enumeration_budget);
    let mut placed = match (placed, &engine) {
        (Ok(placed), _) => placed,
        (Err(error), None) => return Err(error.into()),
        // The engine's accounting stands on its own: what it would log (or refuse) on a
        // rank, beside why no placement fits under its budget.
        (Err(error), Some(engine)) => {
            return Err(Error::Explained {
                error: Box::new(error.into()),
                explanation: format!(
                    "on each of the {} tensor-parallel ranks (the engine's own accounting at its degree):\n{}",
                    engine.tensor_parallel,
                    jointplan::render::engine_text::engine_text(&engine.applied.report)
                ),
            })
        }
    };
    placed.engine = engine.map(|e| e.applied.report);
    if let Some(output) = &args.output {
        Destination::open(output, &[], false, None)?.write_json(&placed.plan, true)?;
    }
    if args.json {
        let text = pretty_json(&placed)
            .map_err(|e| Error::Usage(format!("cannot serialize the placement: {e}")))?;
        write_stdout(&text)?;
    } else {
        write_stdout(&jointplan::render::placement_text::placement_text(
            &placed,
            args.output.as_deref(),
        ))?;
    }
    if !placed.violations.is_empty() {
        return Err(Error::Placement(PlacementError::Internal(format!(
            "the checker rejects the placement: {} violation(s), the first: {} at {}: {}",
            placed.violations.len(),
            placed.violations[0].rule,
            placed.violations[0].path,
            placed.violations[0].message
        ))));
    }
    Ok(())
}
