//! `jointplan fit MODEL_OR_REQUEST --maximize context|sequences|scheduled-tokens [--json]`:
//! the largest value of one policy knob for which the plan builds and its worst case fits,
//! found by search with the planner as the oracle; `--devices DIR` ranks the device files
//! of a directory instead.

// `Error` carries `PlanError` unboxed: errors are the cold path.
#![allow(clippy::result_large_err)]

use std::num::NonZeroUsize;
use std::path::PathBuf;

use jointplan::builder::BuildOptions;
use jointplan::study::fit::{fit, fit_devices, DeviceFit, FitResult, FitSubject, Knob};

use super::output::{human_bytes, human_signed_bytes, pretty_json, write_stdout};
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
            let rows = jointplan::placement::fit::smallest_counts(
                &source,
                dir,
                max_count,
                &options,
                jointplan::placement::DEFAULT_ENUMERATION_BUDGET,
            )?;
            return if args.json {
                print(&rows)
            } else {
                Ok(write_stdout(&counts_text(&rows, max_count))?)
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

fn fit_text(answer: &FitResult) -> String {
    let knob = answer.knob.name();
    let mut out = match (answer.largest, &answer.plan_id) {
        (Some(value), Some(plan_id)) => format!(
            "largest {knob} that fits: {value} (exact: the plan builds and its worst case \
             fits; {} plans built)\n  plan {plan_id}\n",
            answer.probes
        ),
        _ => format!(
            "no {knob} fits, not even {} (the smallest value the policy admits; {} plans built)\n",
            answer.lowest, answer.probes
        ),
    };
    if let Some(report) = &answer.report {
        out.push_str(&format!(
            "  headroom {}, {} sequences fit at the maximum context\n",
            human_signed_bytes(report.headroom_bytes),
            report
                .sequences_that_fit
                .map_or_else(|| "any number of".to_owned(), |s| s.to_string())
        ));
    }
    match &answer.next {
        Some(next) => {
            out.push_str(&format!("  at {knob} {}: {}\n", next.value, next.reason));
            if let Some(short) = next.bytes_short {
                out.push_str(&format!("  short by {}\n", human_bytes(short)));
            }
        }
        None => out.push_str(&format!(
            "  {knob} is at the largest value its field holds\n"
        )),
    }
    out
}

fn devices_text(rows: &[DeviceFit]) -> String {
    let mut out =
        String::from("devices (fitting first, smallest first; worst case of the policy):\n");
    for row in rows {
        let verdict = if row.fits { "fits" } else { "does not fit" };
        out.push_str(&format!(
            "  {}  {}  {verdict}",
            row.device_file,
            human_bytes(row.device_memory_bytes)
        ));
        if let Some(headroom) = row.headroom_bytes {
            out.push_str(&format!("  headroom {}", human_signed_bytes(headroom)));
        }
        if let Some(sequences) = row.sequences_that_fit {
            out.push_str(&format!("  {sequences} sequences at maximum context"));
        }
        out.push('\n');
        if let Some(reason) = &row.reason {
            out.push_str(&format!("      {reason}\n"));
        }
    }
    out
}

fn counts_text(rows: &[jointplan::placement::fit::CountFit], max_count: u32) -> String {
    let mut out = format!(
        "device counts (the fewest of up to {max_count} identical devices on one NVLink domain that serve the policy's worst case; least total memory first; rules: docs/placement.md):\n"
    );
    for row in rows {
        match (row.count, row.total_memory_bytes) {
            (Some(count), Some(total)) => out.push_str(&format!(
                "  {}  {count} x {}  = {}  tensor parallel {}, pipeline {}  {} ({})\n",
                row.device_file,
                human_bytes(row.device_memory_bytes),
                human_bytes(total),
                row.tensor_parallel.unwrap_or(0),
                row.pipeline_parallel.unwrap_or(0),
                row.placement_id.as_deref().unwrap_or(""),
                row.certificate.as_deref().unwrap_or("")
            )),
            _ => out.push_str(&format!(
                "  {}  {}  does not fit on {max_count}: {}\n",
                row.device_file,
                human_bytes(row.device_memory_bytes),
                row.reason.as_deref().unwrap_or("")
            )),
        }
    }
    out
}
