//! `jointplan fit MODEL_OR_REQUEST --maximize context|sequences|scheduled-tokens [--json]`:
//! the largest value of one policy knob for which the plan builds and its worst case fits,
//! found by search with the planner as the oracle; `--devices DIR` ranks the device files
//! of a directory instead.

// `Error` carries `PlanError` unboxed: errors are the cold path.
#![allow(clippy::result_large_err)]

use std::num::NonZeroUsize;
use std::path::PathBuf;

use jointplan::builder::BuildOptions;
use jointplan::render::fit_text::{counts_text, devices_text, fit_text};
use jointplan::study::fit::{fit, fit_devices, FitSubject, Knob};

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

/// Runs `jointplan fit`.
pub fn run(args: &Args) -> Result<(), Error> {
    let options = BuildOptions {
        threads: args.threads,
        ..BuildOptions::default()
    };
    let folder = args.input.is_dir();
    if let Some(dir) = &args.devices {
        if !folder {
            return Err(Error::Usage(format!(
                "--devices needs a model folder; {} is a request file with its own device",
                args.input.display()
            )));
        }
        let source = args.synth.source(Some(&args.input));
        if let Some(max_count) = args.max_count {
            use jointplan::placement::fit::RankBy;
            let by = match args.by.as_deref() {
                None => RankBy::Count,
                Some(name) => RankBy::from_name(name)
                    .ok_or_else(|| Error::Usage(format!("--by {name}: expected count or price")))?,
            };
            let rows = jointplan::placement::fit::smallest_counts_by(
                &source,
                dir,
                max_count,
                &options,
                jointplan::placement::DEFAULT_ENUMERATION_BUDGET,
                by,
            )?;
            return if args.json {
                print(&rows)
            } else {
                Ok(write_stdout(&counts_text(&rows, max_count, by))?)
            };
        }
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
        FitSubject::Model(args.synth.source(Some(&args.input)))
    } else {
        if let Some(flag) = args.synth.first_given() {
            return Err(Error::Usage(format!(
                "{flag} applies to a model folder; {} is a request file",
                args.input.display()
            )));
        }
        FitSubject::Request(Box::new(read_request(&args.input)?))
    };
    let answer = fit(&subject, knob, &options)
        .map_err(|e| Error::from(jointplan::Error::from(e)).in_file(&args.input))?;
    if args.json {
        print(&answer)
    } else {
        Ok(write_stdout(&fit_text(&answer))?)
    }
}
