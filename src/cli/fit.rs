//! `jointplan fit MODEL_OR_REQUEST --maximize context|sequences|scheduled-tokens [--json]`:
//! the largest value of one policy knob for which the plan builds and its worst case fits,
//! found by search with the planner as the oracle; `--devices DIR` ranks the device files
//! of a directory instead. `--max-tpot-ms X` / `--max-ttft-ms Y` with `--maximize sequences`
//! also hold each value N to a latency target, served at concurrency N
//! ([`jointplan::study::fit::fit_serving`]); with `--devices DIR --max-count N`, each count
//! at `--concurrency C` on the device file's links
//! ([`jointplan::placement::fit::smallest_counts_for`]).

use std::num::NonZeroUsize;
use std::path::PathBuf;

use jointplan::builder::BuildOptions;
use jointplan::perf::Calibration;
use jointplan::render::fit_text::{counts_text, devices_text, fit_text};
use jointplan::study::fit::{fit_devices, fit_serving, FitServing, FitSubject, Knob};
use jointplan::study::timing::{LatencyQuery, LatencyTarget, Load};
use jointplan::synth::DeviceDescription;

use super::output::{pretty_json, write_stdout};
use super::plan::read_request;
use super::synth::SynthFlags;
use super::Error;

/// The knob `--maximize` names.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum KnobArg {
    /// The maximum context of a sequence (tokens).
    Context,
    /// The maximum active sequences.
    Sequences,
    /// The maximum tokens scheduled in one step.
    ScheduledTokens,
}

impl KnobArg {
    fn knob(self) -> Knob {
        match self {
            KnobArg::Context => Knob::Context,
            KnobArg::Sequences => Knob::Sequences,
            KnobArg::ScheduledTokens => Knob::ScheduledTokens,
        }
    }
}

/// Arguments of `jointplan fit`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A model folder such as `models/llama-3.1-8b`, or a plan request (JSON).
    #[arg(value_name = "MODEL_FOLDER|REQUEST.json")]
    pub input: PathBuf,
    /// The policy knob to maximize.
    #[arg(long, value_enum, required_unless_present = "devices")]
    pub maximize: Option<KnobArg>,
    /// Rank every device file (*.json) of this directory instead: fitting devices first,
    /// smallest first, with their headroom.
    #[arg(long, value_name = "DIR", conflicts_with = "maximize")]
    pub devices: Option<PathBuf>,
    /// With `--devices DIR`: place the model across up to N identical devices of each file
    /// and answer the fewest that serve the policy (docs/placement.md).
    #[arg(long, value_name = "N", requires = "devices")]
    pub max_count: Option<u32>,
    /// With `--max-count N`: rank by `count` (least total memory, the default) or by
    /// `price` (count x the device file's `price_per_hour`; files without one are listed
    /// after, unranked).
    #[arg(long, value_name = "count|price", requires = "max_count")]
    pub by: Option<String>,
    /// Print the answer as JSON.
    #[arg(long)]
    pub json: bool,
    /// Worker threads of each plan build (default: all cores).
    #[arg(long)]
    pub threads: Option<NonZeroUsize>,
    /// Hold each value to a time per output token of at most X milliseconds (mean, as
    /// `plan --concurrency N` predicts it): with --maximize sequences, each N served at
    /// concurrency N (docs/research.md).
    #[arg(long, value_name = "X", allow_negative_numbers = true)]
    pub max_tpot_ms: Option<f64>,
    /// Hold each value to a time to first token of at most Y milliseconds (mean).
    #[arg(long, value_name = "Y", allow_negative_numbers = true)]
    pub max_ttft_ms: Option<f64>,
    /// Prompt tokens of each request (with a latency target).
    #[arg(long, value_name = "I")]
    pub input_tokens: Option<u64>,
    /// Output tokens of each request (with a latency target).
    #[arg(long, value_name = "O")]
    pub output_tokens: Option<u64>,
    /// With `--max-count N` and a latency target: requests in flight at the serving point
    /// each count is timed at (default 1; `--maximize sequences` serves each value N at
    /// concurrency N instead).
    #[arg(long, value_name = "C", requires = "max_count", value_parser = clap::value_parser!(u64).range(1..))]
    pub concurrency: Option<u64>,
    /// A serving engine, as `plan --engine` takes it: each probe's memory is held to the
    /// engine's budget and the latency priced with its time profile (default time profile:
    /// vllm). Model folders only.
    #[arg(long, value_name = "ENGINE")]
    pub engine: Option<String>,
    /// Device file whose performance figures price the latency (default: the device each
    /// probe is synthesized for; needed for a request file).
    #[arg(long, value_name = "DEVICE.json")]
    pub performance_device: Option<PathBuf>,
    /// The policy's context ceiling in tokens while another knob is maximized, as
    /// `plan --context` (model folders only; e.g. input + output tokens of a latency fit).
    #[arg(long, value_name = "TOKENS", value_parser = clap::value_parser!(u64).range(1..))]
    pub context: Option<u64>,
    /// Calibration file of measured kernel times that replace the roofline.
    #[arg(long, value_name = "FILE")]
    pub calibration: Option<PathBuf>,
    /// Synthesis flags (model folders only).
    #[command(
        flatten,
        next_help_heading = "Model (synthesis, as in `jointplan synth`)"
    )]
    pub synth: SynthFlags,
}

fn print<T: serde::Serialize>(value: &T) -> Result<(), Error> {
    let text = pretty_json(value)
        .map_err(|e| Error::Usage(format!("cannot serialize the answer: {e}")))?;
    Ok(write_stdout(&text)?)
}

/// The latency target of `--max-tpot-ms` / `--max-ttft-ms`, with its load; the serving
/// flags without a target are refused, naming the flag.
fn latency_query(args: &Args) -> Result<Option<LatencyQuery>, Error> {
    let perf = |e: jointplan::perf::PerfError| Error::Library(jointplan::Error::from(e));
    if args.max_tpot_ms.is_none() && args.max_ttft_ms.is_none() {
        let given = [
            ("--input-tokens", args.input_tokens.is_some()),
            ("--output-tokens", args.output_tokens.is_some()),
            ("--performance-device", args.performance_device.is_some()),
            ("--calibration", args.calibration.is_some()),
        ];
        if let Some((flag, _)) = given.iter().find(|(_, set)| *set) {
            return Err(Error::Usage(format!(
                "{flag} applies to a latency target: give --max-tpot-ms X or --max-ttft-ms Y"
            )));
        }
        return Ok(None);
    }
    let target =
        LatencyTarget::from_milliseconds(args.max_tpot_ms, args.max_ttft_ms).map_err(perf)?;
    let (Some(input_tokens), Some(output_tokens)) = (args.input_tokens, args.output_tokens) else {
        let flag = if args.input_tokens.is_none() {
            "--input-tokens"
        } else {
            "--output-tokens"
        };
        return Err(Error::Usage(format!(
            "{flag} is missing: a latency target needs --input-tokens and --output-tokens (each value of the knob is the concurrency)"
        )));
    };
    let device = match &args.performance_device {
        Some(file) => {
            Some(DeviceDescription::read(file).map_err(|e| Error::from(e.in_device_file(file)))?)
        }
        None => None,
    };
    let calibration = match &args.calibration {
        Some(file) => Calibration::read(file).map_err(perf)?,
        None => Calibration::default(),
    };
    Ok(Some(LatencyQuery {
        target,
        load: Load {
            concurrency: 1,
            input_tokens,
            output_tokens,
            engine: args
                .engine
                .clone()
                .unwrap_or_else(|| jointplan::perf::DEFAULT_ENGINE.to_owned()),
            lengths: jointplan::perf::Lengths::Fixed,
        },
        device,
        calibration,
    }))
}

/// `fit MODEL --devices DIR --max-count N [--context T] [--engine E] [--max-tpot-ms X]
/// [--max-ttft-ms Y --input-tokens I --output-tokens O --concurrency C]`: the fewest devices
/// of each file that serve the model at the context, at the engine's degree with one, and
/// within the latency target with one, timed by each device file's `links`
/// (`placement::fit::smallest_counts_for`).
fn device_counts(
    args: &Args,
    dir: &std::path::Path,
    max_count: u32,
    folder: bool,
    options: &BuildOptions,
) -> Result<(), Error> {
    use jointplan::placement::fit::{CountLatency, CountQuery, RankBy};
    if !folder {
        return Err(Error::Usage(format!(
            "--devices needs a model folder; {} is a request file with its own device",
            args.input.display()
        )));
    }
    for (flag, given) in [
        ("--performance-device", args.performance_device.is_some()),
        ("--calibration", args.calibration.is_some()),
    ] {
        if given {
            return Err(Error::Usage(format!(
                "{flag} does not apply to --max-count: every count is priced by its own device file's performance figures and links"
            )));
        }
    }
    let latency = match latency_query(args)? {
        None => {
            if args.concurrency.is_some() {
                return Err(Error::Usage(
                    "--concurrency applies to a latency target: give --max-tpot-ms X or --max-ttft-ms Y".to_owned(),
                ));
            }
            None
        }
        Some(query) => Some(CountLatency {
            target: query.target,
            serving: jointplan::placement::timing::Serving {
                concurrency: args.concurrency.unwrap_or(1),
                input_tokens: query.load.input_tokens,
                output_tokens: query.load.output_tokens,
                engine: jointplan::study::engine_facts::time_profile_name(&query.load.engine)
                    .ok_or_else(|| {
                        Error::Usage(format!(
                            "--engine {}: no time profile of that name ({})",
                            query.load.engine,
                            jointplan::perf::engine_names()
                        ))
                    })?
                    .to_owned(),
                simulated_requests: None,
                lengths: jointplan::perf::Lengths::Fixed,
                chunked_prefill: None,
            },
        }),
    };
    let by = match args.by.as_deref() {
        None => RankBy::Count,
        Some(name) => RankBy::from_name(name)
            .ok_or_else(|| Error::Usage(format!("--by {name}: expected count or price")))?,
    };
    let source = args.synth.source(Some(&args.input));
    let engine = match &args.engine {
        None => None,
        Some(name) => {
            let choice: jointplan::engine::EngineChoice =
                name.parse().map_err(|e: jointplan::engine::EngineError| {
                    Error::Usage(format!("--engine {name}: {e}"))
                })?;
            Some((choice, jointplan::engine::EngineArgs::default()))
        }
    };
    let policy = match args.context {
        None => None,
        Some(context) => Some(
            jointplan::study::sweep::PolicyFields {
                context: Some(context),
                ..Default::default()
            }
            .preset(&source)
            .map_err(|e| Error::from(jointplan::Error::from(e)).in_file(&args.input))?,
        ),
    };
    let query = CountQuery {
        policy,
        engine,
        latency,
    };
    let rows = jointplan::placement::fit::smallest_counts_for(
        &source,
        dir,
        max_count,
        options,
        jointplan::placement::DEFAULT_ENUMERATION_BUDGET,
        by,
        &query,
    )?;
    if args.json {
        print(&rows)
    } else {
        Ok(write_stdout(&counts_text(
            &rows,
            max_count,
            by,
            args.engine.as_deref(),
            query.latency.as_ref(),
        ))?)
    }
}

/// Runs `jointplan fit`.
pub fn run(args: &Args) -> Result<(), Error> {
    let options = BuildOptions {
        threads: args.threads,
        ..BuildOptions::default()
    };
    let folder = args.input.is_dir();
    if let (Some(dir), Some(max_count)) = (&args.devices, args.max_count) {
        return device_counts(args, dir, max_count, folder, &options);
    }
    if let Some(dir) = &args.devices {
        if latency_query(args)?.is_some() || args.engine.is_some() || args.context.is_some() {
            return Err(Error::Usage(
                "--max-tpot-ms, --max-ttft-ms, --engine and --context apply to --maximize or to --devices DIR --max-count N, not to --devices alone".to_owned(),
            ));
        }
        if !folder {
            return Err(Error::Usage(format!(
                "--devices needs a model folder; {} is a request file with its own device",
                args.input.display()
            )));
        }
        let source = args.synth.source(Some(&args.input));
        let rows = fit_devices(&source, dir, &options)
            .map_err(|e| Error::from(jointplan::Error::from(e)).in_file(&args.input))?;
        return if args.json {
            print(&rows)
        } else {
            Ok(write_stdout(&devices_text(&rows))?)
        };
    }
    let Some(knob) = args.maximize.map(KnobArg::knob) else {
        return Err(Error::Usage("give --maximize KNOB or --devices DIR".into()));
    };
    let subject = if folder {
        FitSubject::Model(Box::new(args.synth.source(Some(&args.input))))
    } else {
        if let Some(flag) = args.synth.first_given() {
            return Err(Error::Usage(format!(
                "{flag} applies to a model folder; {} is a request file",
                args.input.display()
            )));
        }
        FitSubject::Request(Box::new(read_request(&args.input)?))
    };
    let serving = FitServing {
        engine: args.engine.clone(),
        latency: latency_query(args)?,
        context: args.context,
    };
    let answer = fit_serving(&subject, knob, &options, &serving)
        .map_err(|e| Error::from(jointplan::Error::from(e)).in_file(&args.input))?;
    if args.json {
        print(&answer)
    } else {
        Ok(write_stdout(&fit_text(&answer))?)
    }
}
