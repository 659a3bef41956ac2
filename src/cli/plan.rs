//! `jointplan plan REQUEST.json|MODEL_FOLDER [-o PLAN.json] [--json]`: build a plan, write
//! it atomically and print a readable summary.
//!
//! A directory argument is a model folder of `models/`: its request is synthesized in
//! memory exactly as `jointplan synth --model FOLDER` would write it (the same flags
//! override the folder's device, policy and weight format), then planned.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::Error;
use jointplan::builder::BuildOptions;
use jointplan::plan::ExecutionPlan;
use jointplan::plan::DEFAULT_OBJECTIVE;
use jointplan::request::id_pattern::IdPattern;
use jointplan::request::PlanRequest;
use jointplan::request::{NodeId, ProviderId};
use jointplan::selection::{objective_by_name, Weights, DEFAULT_DP_STATE_BUDGET};
use jointplan::study::ServingReport;
use std::sync::Arc;

use super::destination::Destination;
use super::engine_flags::EngineFlags;
use super::output::{pretty_json, write_stdout};
use super::performance::{Requested, ServingFlags};
use super::progress::Progress;
use super::solve::BackendArg;
use super::synth::{synthesize_request, PolicyFlags, SynthFlags};
use jointplan::builder::error::PlanError;
use jointplan::engine::EngineReport;
use jointplan::render::infeasible_text::infeasibility_text;
use jointplan::render::performance_text::performance_text;
use jointplan::render::summary::{plan_summary, summary_text, ComponentSummary};
use jointplan::render::summary_text::Detail;
use jointplan::study::infeasible::{explain_failure, explain_source_failure};
use jointplan::synth::DeviceDescription;

/// Arguments of `jointplan plan`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plan request (JSON), or a model folder such as `models/llama-3.2-1b`.
    #[arg(value_name = "REQUEST.json|MODEL_FOLDER")]
    pub request: PathBuf,
    /// Write the plan here (a regular file, replaced atomically; symbolic links are
    /// followed; nothing is written on failure).
    #[arg(short, long, value_name = "PLAN.json")]
    pub output: Option<PathBuf>,
    /// Allow `-o` to name one of the inputs (the request file, or a file the model folder's
    /// synthesis read), replacing it with the plan.
    #[arg(long, requires = "output")]
    pub overwrite_input: bool,
    /// Print the summary as JSON instead of text (always complete).
    #[arg(long)]
    pub json: bool,
    /// List every node, dynamic resource and selection component in the text summary
    /// (by default ids that differ only in their numbers are grouped into one line).
    #[arg(long, conflicts_with = "json")]
    pub full: bool,
    /// Synthesis flags (model folders only).
    #[command(
        flatten,
        next_help_heading = "Model folder (synthesis, as in `jointplan synth`)"
    )]
    pub synth: SynthFlags,
    /// Policy preset fields (model folders only): replay a sweep point without a preset
    /// file.
    #[command(
        flatten,
        next_help_heading = "Model folder (synthesis, as in `jointplan synth`)"
    )]
    pub policy: PolicyFlags,
    /// Selection limits and certification.
    #[command(flatten, next_help_heading = "Selection")]
    pub selection: SelectionFlags,
    /// A serving engine's accounting (model folders only).
    #[command(flatten, next_help_heading = "Serving engine (docs/engines.md)")]
    pub engine: EngineFlags,
    /// Placement across devices (model folders only).
    #[command(flatten, next_help_heading = "Placement across devices")]
    pub placement: super::placement::PlacementFlags,
    /// The serving point whose latency and throughput the summary predicts.
    #[command(flatten, next_help_heading = "Serving point (performance model)")]
    pub serving: ServingFlags,
}

/// The plan summary with a serving engine's accounting (`--engine`): the summary's keys,
/// then `engine`. Without `--engine` the summary is printed alone, byte for byte as before.
#[derive(serde::Serialize)]
struct WithEngine<'a, S: serde::Serialize> {
    #[serde(flatten)]
    summary: &'a S,
    engine: &'a EngineReport,
    /// The budget the engine's rule gave the plan.
    engine_budget: Option<&'a jointplan::study::budget::Budget>,
}

/// Solver limits of `plan`, mirroring `jointplan solve`, and whether an answer a limit kept
/// from being proved optimal is accepted.
#[derive(Debug, clap::Args)]
pub struct SelectionFlags {
    /// Branch-and-bound node budget of each integer-program solve.
    #[arg(long)]
    pub node_limit: Option<u64>,
    /// Time limit in seconds of the whole selection (every component and part); a solve
    /// it stops returns its best solution as `feasible` with its gap.
    #[arg(long, value_name = "SECONDS")]
    pub time_limit: Option<f64>,
    /// Maximum number of states the frontier search may create per component.
    #[arg(long, default_value_t = DEFAULT_DP_STATE_BUDGET)]
    pub dp_state_budget: u64,
    /// MILP backend of the integer program: microlp (default) or highs (cargo
    /// feature `highs`).
    #[arg(long, value_enum, default_value = "microlp")]
    pub backend: BackendArg,
    /// Accept components whose selection was not proved optimal; each is listed in the
    /// summary with its first node, status and gap, and recorded in the plan.
    #[arg(long)]
    pub allow_uncertified: bool,
    /// Objective of the selection: seed-lex (default), max-preferred, min-penalty,
    /// weighted, or a time objective min-tpot, min-ttft or max-throughput (needs a serving
    /// point: --concurrency, --input-tokens, --output-tokens; recorded in the plan with it).
    /// Recorded in the plan unless seed-lex.
    #[arg(long, default_value = DEFAULT_OBJECTIVE)]
    pub objective: String,
    /// Weights file (JSON `{"preferred": N, "ranks": [...], "time": {"tpot": N}}`, `time`
    /// optional) of the `weighted` objective.
    #[arg(long, value_name = "FILE")]
    pub weights: Option<PathBuf>,
    /// Fix a node to one of its providers (repeatable; recorded in the plan). NODE may be an
    /// id pattern as summaries print it (`node.layer.[0-31].attention`): every node it selects.
    #[arg(long, value_name = "NODE=PROVIDER")]
    pub pin: Vec<String>,
    /// Forbid a provider at a node (repeatable; recorded in the plan). NODE may be an id
    /// pattern as summaries print it: the provider is forbidden at every node it selects.
    #[arg(long, value_name = "NODE=PROVIDER")]
    pub forbid: Vec<String>,
}

/// Parses `NODE=PROVIDER` of `--{flag}`.
pub fn node_provider(flag: &str, text: &str) -> Result<(NodeId, ProviderId), Error> {
    let usage = |detail: String| Error::Usage(format!("--{flag} {text}: {detail}"));
    let Some((node, provider)) = text.split_once('=') else {
        return Err(usage("expected NODE=PROVIDER, e.g. node.layer.0.attention=provider.cuda.causal_paged_attention.paged".to_owned()));
    };
    let node = NodeId::new(node).map_err(|e| usage(format!("bad node id: {e}")))?;
    let provider = ProviderId::new(provider).map_err(|e| usage(format!("bad provider id: {e}")))?;
    Ok((node, provider))
}

impl SelectionFlags {
    /// The build options these flags ask for.
    pub fn build_options(&self) -> Result<BuildOptions, Error> {
        let mut options = BuildOptions::default();
        options.selection.node_limit = self.node_limit;
        options.selection.time_limit = match self.time_limit {
            Some(s) if s.is_finite() && s >= 0.0 => Some(Duration::from_secs_f64(s)),
            Some(s) => {
                return Err(Error::Usage(format!(
                    "--time-limit {s}: expected a non-negative number of seconds"
                )))
            }
            None => None,
        };
        options.selection.dp_state_budget = self.dp_state_budget;
        options.selection.backend = self.backend.backend().map_err(Error::Usage)?;
        options.allow_uncertified = self.allow_uncertified;
        let weights =
            match &self.weights {
                Some(file) => {
                    let text = std::fs::read_to_string(file).map_err(|e| {
                        Error::Usage(format!("cannot read weights file {}: {e}", file.display()))
                    })?;
                    Some(Weights::from_json_str(&text).map_err(|e| {
                        Error::Usage(format!("weights file {}: {e}", file.display()))
                    })?)
                }
                None => None,
            };
        let objective =
            objective_by_name(&self.objective, weights).map_err(|e| Error::Usage(e.to_string()))?;
        options.selection.objective = Arc::from(objective);
        // Plain ids are checked here; patterns are read here and expanded against the
        // request's nodes by `apply_pins`, once the request is loaded.
        for (flag, texts) in [("pin", &self.pin), ("forbid", &self.forbid)] {
            for text in texts {
                node_pattern_provider(flag, text)?;
            }
        }
        Ok(options)
    }

    /// Adds the `--pin` and `--forbid` settings to `options`, each node id pattern expanded
    /// to the nodes of `request` it selects.
    pub fn apply_pins(
        &self,
        options: &mut BuildOptions,
        request: &PlanRequest,
    ) -> Result<(), Error> {
        let ids: Vec<&NodeId> = request.family.program.nodes().map(|n| &n.id).collect();
        for text in &self.pin {
            for (node, provider) in expand("pin", text, &ids)? {
                if let Some(earlier) = options.pins.insert(node.clone(), provider) {
                    return Err(Error::Usage(format!(
                        "--pin {text}: node {node} is already pinned to {earlier}"
                    )));
                }
            }
        }
        for text in &self.forbid {
            for (node, provider) in expand("forbid", text, &ids)? {
                options.forbids.entry(node).or_default().insert(provider);
            }
        }
        Ok(())
    }
}

/// A node (its id, or an id pattern of several) and a provider: `--pin`, `--forbid`.
enum NodeName {
    Id(NodeId),
    Pattern(IdPattern),
}

/// Parses `NODE=PROVIDER` of `--{flag}`, where NODE may be an id pattern as summaries print
/// them (`node.layer.[0-31].attention`).
fn node_pattern_provider(flag: &str, text: &str) -> Result<(NodeName, ProviderId), Error> {
    match text.split_once('=') {
        Some((node, provider)) if IdPattern::is_pattern(node) => {
            let usage = |detail: String| Error::Usage(format!("--{flag} {text}: {detail}"));
            let pattern = IdPattern::parse(node).map_err(|e| usage(e.to_string()))?;
            let provider =
                ProviderId::new(provider).map_err(|e| usage(format!("bad provider id: {e}")))?;
            Ok((NodeName::Pattern(pattern), provider))
        }
        _ => {
            let (node, provider) = node_provider(flag, text)?;
            Ok((NodeName::Id(node), provider))
        }
    }
}

/// The (node, provider) settings of one `--{flag}` value: a plain id as it is (the build
/// names an id the request does not have), a pattern as every node it selects.
fn expand(flag: &str, text: &str, ids: &[&NodeId]) -> Result<Vec<(NodeId, ProviderId)>, Error> {
    match node_pattern_provider(flag, text)? {
        (NodeName::Id(node), provider) => Ok(vec![(node, provider)]),
        (NodeName::Pattern(pattern), provider) => {
            let nodes: Vec<(NodeId, ProviderId)> = ids
                .iter()
                .filter(|id| pattern.matches(id.as_str()))
                .map(|id| ((*id).clone(), provider.clone()))
                .collect();
            if nodes.is_empty() {
                return Err(Error::Usage(format!(
                    "--{flag} {text}: the pattern {pattern} selects no node of the request                      (`jointplan plan --full` lists every node)"
                )));
            }
            Ok(nodes)
        }
    }
}

/// Reads a request file; errors name the file and the JSON path.
pub fn read_request(file: &Path) -> Result<PlanRequest, Error> {
    Ok(PlanRequest::read(file)?)
}

/// What [`load`] read: the request, the files it came from, the serving engine's
/// accounting, a model folder's device, and the policy sequence ceiling a serving point
/// raised.
struct Loaded {
    request: PlanRequest,
    inputs: Vec<PathBuf>,
    engine: Option<EngineReport>,
    device: Option<DeviceDescription>,
    raised: Option<u32>,
    /// Sequences the policy requires at the maximum context (a preset's
    /// `minimum_sequences`, 1 when absent or for a request file).
    required: u64,
    /// The budget a named engine's rule set (`--engine`).
    budget: Option<jointplan::study::budget::Budget>,
    /// For a model folder: what the request was synthesized from (why-infeasible tries the
    /// larger devices of the device's directory with it).
    origin: Option<Origin>,
}

/// A model folder's request as synthesized: the source, the policy fields set, the device
/// file.
struct Origin {
    source: jointplan::synth::ModelSource,
    fields: jointplan::study::sweep::PolicyFields,
    device_file: PathBuf,
}

/// The request to plan (the file as it is, or a model folder's synthesized request), the
/// files it was read from, and the serving engine's accounting when `--engine` asks for it.
/// With a serving point, a model folder's sequence ceiling is raised to the concurrency
/// when lower (and `--sequences` is not given).
fn load(args: &Args, progress: &Progress, point: Option<&Requested>) -> Result<Loaded, Error> {
    let input = &args.request;
    if input.is_dir() {
        progress.step(&format!("synthesizing the request of {}", input.display()));
        let synth_flags = args.engine.synth_flags(&args.synth)?;
        let mut synthesized = synthesize_request(Some(input), &synth_flags, &args.policy)
            .map_err(|e| Error::from(e).in_file(input))?;
        let mut raised = None;
        let mut fields = args.policy.fields();
        if let Some(point) = point {
            let ceiling = synthesized.policy.maximum_active_sequences;
            let wanted = u32::try_from(point.concurrency).unwrap_or(u32::MAX);
            if args.policy.sequences.is_none() && ceiling < wanted {
                let policy = PolicyFlags {
                    context: args.policy.context,
                    sequences: Some(wanted),
                    scheduled_tokens: args.policy.scheduled_tokens,
                };
                synthesized = synthesize_request(Some(input), &synth_flags, &policy)
                    .map_err(|e| Error::from(e).in_file(input))?;
                fields = policy.fields();
                raised = Some(ceiling);
            }
        }
        // A named engine sets the budget the plan is held to (docs/synth.md, "Policy
        // presets"): the preset's ceilings and requirements stay, its capacity and reserve
        // follow the engine's rule.
        let (engine, budget) = match args.engine.apply(&synthesized)? {
            Some(applied) => {
                synthesized.request = applied.request;
                (Some(applied.report), Some(applied.budget))
            }
            None => (None, None),
        };
        let origin = Origin {
            source: args.synth.source(Some(input)),
            fields,
            device_file: synthesized.device_file.clone(),
        };
        return Ok(Loaded {
            budget,
            required: u64::from(synthesized.policy.required_sequences()),
            request: synthesized.request,
            inputs: synthesized.inputs,
            engine,
            device: Some(synthesized.device),
            raised,
            origin: Some(origin),
        });
    }
    if args.engine.engine.is_some() {
        return Err(Error::Usage(format!(
            "--engine applies to a model folder (it needs the device file); {} is a request file",
            input.display()
        )));
    }
    if let Some(flag) = args.synth.first_given().or(args.policy.first_given()) {
        return Err(Error::Usage(format!(
            "{flag} applies to a model folder; {} is a request file, planned as it is",
            input.display()
        )));
    }
    progress.step(&format!("reading {}", input.display()));
    Ok(Loaded {
        request: read_request(input)?,
        inputs: vec![input.clone()],
        engine: None,
        device: None,
        raised: None,
        required: 1,
        budget: None,
        origin: None,
    })
}

/// The error of a failed build; when the request is infeasible, with why (the minimal
/// conflicting facts and the relaxations, [`jointplan::study::infeasible`]), and with
/// `--json` that answer printed as JSON on standard output.
fn explain_infeasible(
    args: &Args,
    origin: Option<&Origin>,
    request: &PlanRequest,
    options: &BuildOptions,
    error: PlanError,
) -> Error {
    if error.kind() != jointplan::ErrorKind::Infeasible {
        return Error::from(error).in_file(&args.request);
    }
    let mut quiet = options.clone();
    quiet.observer = None;
    quiet.selection.observer = None;
    let progress = Progress::start("plan");
    progress.step("finding why the request has no plan");
    let answer = match origin {
        Some(o) => explain_source_failure(
            &o.source,
            &o.fields,
            &o.device_file,
            request,
            &quiet,
            &error,
        ),
        None => explain_failure(request, &quiet, &error),
    };
    drop(progress);
    let plain = Error::from(error).in_file(&args.request);
    match answer {
        Ok(Some(reason)) => {
            if args.json {
                match pretty_json(&reason) {
                    Ok(text) => {
                        if let Err(e) = write_stdout(&text) {
                            return e.into();
                        }
                    }
                    Err(e) => return Error::Usage(format!("cannot serialize the answer: {e}")),
                }
            }
            Error::Explained {
                error: Box::new(plain),
                explanation: infeasibility_text(&reason),
            }
        }
        Ok(None) => plain,
        Err(analysis) => Error::Explained {
            error: Box::new(plain),
            explanation: format!("(why it is infeasible could not be found: {analysis})"),
        },
    }
}

/// Runs `jointplan plan`.
pub fn run(args: &Args) -> Result<(), Error> {
    if args.placement.active() {
        return super::placement::run(args);
    }
    if let Some((arg, devices)) = args.engine.several_devices() {
        return Err(Error::Usage(format!(
            "--engine-arg {arg} runs the model on {devices} devices: place it with --device D --count {devices} (or --devices SET.json); a single-device plan holds the whole model"
        )));
    }
    if let Some(flag) = args.placement.stray() {
        return Err(Error::Usage(format!(
            "{flag} applies to a placement: give --devices SET.json or --device D --count N"
        )));
    }
    let mut options = args.selection.build_options()?;
    let progress = Progress::start("plan");
    let point = args.serving.requested(args.engine.engine.as_deref())?;
    let Loaded {
        request,
        inputs,
        engine,
        device,
        raised,
        required,
        budget,
        origin,
    } = load(args, &progress, point.as_ref())?;
    // The engine's resolved arguments decide its scheduling (vLLM V0's chunked prefill).
    let point = point.map(|p| p.under(engine.as_ref()));
    args.selection.apply_pins(&mut options, &request)?;
    if options.selection.objective.time_weights().is_some() {
        options.serving = Some(super::performance::recorded_serving(
            &args.serving,
            point.as_ref(),
            device.as_ref(),
            options.selection.objective.name(),
        )?);
    }
    // The output is checked (and its temporary file created) before the plan is built, so
    // a bad `-o` fails at once.
    let mut destination = match &args.output {
        Some(output) => {
            let inputs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
            Some(Destination::open(
                output,
                &inputs,
                args.overwrite_input,
                Some("--overwrite-input"),
            )?)
        }
        None => None,
    };
    options.observer = Some(progress.observer());
    options.selection.observer = progress.solve_observer();
    // The plan file streams into the destination's temporary file while the plan is
    // checked (`ExecutionPlan::build_writing`); it is renamed into place only after every
    // check and every refusal below has passed, and removed otherwise.
    let streaming = match &destination {
        Some(destination) => destination.streaming_writer()?,
        None => None,
    };
    let file: Box<dyn Write + Send + '_> = match streaming {
        Some(file) => Box::new(file),
        None => Box::new(std::io::sink()),
    };
    let (outcome, written) = match ExecutionPlan::build_writing(&request, &options, file) {
        Ok(built) => built,
        Err(error) => {
            drop(progress);
            return Err(explain_infeasible(
                args,
                origin.as_ref(),
                &request,
                &options,
                error,
            ));
        }
    };
    let plan = &outcome.plan;
    // The plan file is made durable (on a large plan, a wait on the disk with every core
    // idle) while the serving report is derived; nothing is renamed before the refusal
    // below, and a failed sync is reported by the commit, in its place.
    let (serving, ()) = rayon::join(
        || ServingReport::with_limits(&request, plan),
        || match &mut destination {
            Some(destination) if written.write_error.is_none() => destination.sync(),
            _ => {}
        },
    );
    let serving =
        serving.map_err(|e| Error::from(jointplan::Error::from(e)).in_file(&args.request))?;
    // A serving engine refuses to start when not even one sequence fits: so does `plan`
    // when the policy's requirement (1 sequence unless it states more) does not fit,
    // before the plan file is renamed into place (its temporary file is removed).
    if let Some(refusal) = serving.0.refusal(&request, &serving.1, required) {
        return Err(Error::from(jointplan::Error::from(refusal)).in_file(&args.request));
    }
    if let Some(destination) = destination {
        progress.step(&format!("writing {}", destination.path().display()));
        destination.commit_written(written.write_error.map_or(Ok(()), Err))?;
    }
    let performance = match &point {
        Some(point) => {
            progress.step("predicting the serving point");
            Some(super::performance::predict(
                &args.serving,
                point,
                &request,
                plan,
                device.as_ref(),
            )?)
        }
        None => None,
    };
    drop(progress);
    let selection: Vec<ComponentSummary> = outcome
        .selection
        .iter()
        .map(ComponentSummary::from_report)
        .collect();
    let summary = plan_summary(plan, serving, &selection, args.output.as_deref());
    if args.json {
        let unserializable =
            |e: serde_json::Error| Error::Usage(format!("cannot serialize the summary: {e}"));
        let text = match (&engine, &performance) {
            (Some(engine), None) => pretty_json(&WithEngine {
                summary: &summary,
                engine,
                engine_budget: budget.as_ref(),
            }),
            (None, None) => pretty_json(&summary),
            // With a serving point, `performance` follows the summary's keys.
            (engine, Some(performance)) => {
                let mut value = match engine {
                    Some(engine) => serde_json::to_value(WithEngine {
                        summary: &summary,
                        engine,
                        engine_budget: budget.as_ref(),
                    }),
                    None => serde_json::to_value(&summary),
                }
                .map_err(unserializable)?;
                if let serde_json::Value::Object(map) = &mut value {
                    map.insert(
                        "performance".to_owned(),
                        serde_json::to_value(performance).map_err(unserializable)?,
                    );
                }
                pretty_json(&value)
            }
        }
        .map_err(unserializable)?;
        write_stdout(&text)?;
    } else {
        let detail = if args.full {
            Detail::Full
        } else {
            Detail::Grouped
        };
        let mut text = summary_text(&summary, detail);
        if let Some(budget) = &budget {
            text.push_str(&format!(
                "  budget of the plan (the engine's rule): capacity {} bytes, reserve {} bytes ({})\n",
                budget.capacity_bytes, budget.reserve_bytes, budget.rule
            ));
        }
        if let Some(engine) = &engine {
            text.push_str(&jointplan::render::engine_text::engine_text(engine));
        }
        if let Some(performance) = &performance {
            text.push_str(&performance_text(performance, raised));
        }
        write_stdout(&text)?;
    }
    // The process exits when `plan` returns: freeing the request, the plan and the summary
    // (millions of small allocations on a large model, about 5% of the command's CPU)
    // would only delay the exit, so they are left to the operating system. This is done
    // here, at the command's top level, and nowhere in the library.
    std::mem::forget(summary);
    std::mem::forget(outcome);
    std::mem::forget(request);
    Ok(())
}
