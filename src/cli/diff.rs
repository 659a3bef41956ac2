//! `jointplan diff A.plan.json B.plan.json [--json]`: a semantic comparison of two plans of
//! one program (exit 0 whether or not they differ; 2 for two different programs). With the
//! requests and a serving point (the flags, or one a plan recorded), also the time of both
//! plans and of each provider change ([`jointplan::study::diff::add_time`]).

use std::path::PathBuf;

use super::Error;
use jointplan::perf::Calibration;
use jointplan::plan::ExecutionPlan;
use jointplan::render::diff_text::diff_text;
use jointplan::render::summary_text::Detail;
use jointplan::request::read_json_text;
use jointplan::study::diff::{
    add_time, diff_plans, diff_plans_with_reports, diff_pricers, GivenPricing,
};
use jointplan::study::timing::{Load, Pricer};
use jointplan::synth::DeviceDescription;

use super::performance::ServingFlags;

use super::plan::read_request;
use jointplan::verify::read_plan_as_stored;

use super::output::{pretty_json, write_stdout};

/// Arguments of `jointplan diff`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Plan A (JSON).
    pub a: PathBuf,
    /// Plan B (JSON).
    pub b: PathBuf,
    /// Print the comparison as JSON.
    #[arg(long)]
    pub json: bool,
    /// List every changed node and resource on its own line (by default those that differ
    /// only in their numbers are grouped by id pattern, as plan summaries group them).
    #[arg(long, conflicts_with = "json")]
    pub full: bool,
    /// The request each plan was built from (once for both, or A's then B's): adds the
    /// memory report's items (`report.*`) to the memory figures.
    #[arg(long, value_name = "REQUEST.json", num_args = 1)]
    pub request: Vec<PathBuf>,
    /// The engine whose time profile prices a serving point given by the flags below
    /// (vllm, sglang, trtllm, llama.cpp; default vllm).
    #[arg(long, value_name = "ENGINE")]
    pub engine: Option<String>,
    /// A serving point that prices both plans (needs --request): TTFT, TPOT and tokens/s
    /// of each, and the time each provider change adds. Without it, the serving point a
    /// plan recorded (`plan --objective min-tpot|min-ttft|max-throughput`) prices them.
    #[command(flatten, next_help_heading = "Serving point (performance model)")]
    pub serving: ServingFlags,
}

/// The serving point the flags give, if any (`diff` and `explain --why-not`).
pub fn given_pricing(
    serving: &ServingFlags,
    engine: Option<&str>,
) -> Result<Option<GivenPricing>, Error> {
    let Some(point) = serving.requested(engine)? else {
        if engine.is_some() {
            return Err(Error::Usage(
                "--engine applies to a serving point: give --concurrency, --input-tokens and --output-tokens".to_owned(),
            ));
        }
        return Ok(None);
    };
    if !point.lengths.is_fixed() {
        return Err(Error::Usage(
            "--lengths applies to a plan's or a placement's predicted performance (the serving simulation); diff and explain price their changes at fixed lengths: drop --lengths".to_owned(),
        ));
    }
    let perf = |e: jointplan::perf::PerfError| Error::Library(jointplan::Error::from(e));
    let load = Load {
        concurrency: point.concurrency,
        input_tokens: point.input_tokens,
        output_tokens: point.output_tokens,
        engine: point.engine,
        lengths: point.lengths,
    };
    let calibration = match &serving.calibration {
        Some(file) => Calibration::read(file).map_err(perf)?,
        None => Calibration::default(),
    };
    Ok(Some(match &serving.performance_device {
        Some(file) => {
            let device =
                DeviceDescription::read(file).map_err(|e| Error::from(e.in_device_file(file)))?;
            GivenPricing::Pricer(Box::new(
                Pricer::on_device(load, &device, calibration).map_err(perf)?,
            ))
        }
        None => GivenPricing::Load { load, calibration },
    }))
}

/// Reads and strictly parses a stored plan (one pass over its text, no tree).
pub fn read_plan(file: &std::path::Path) -> Result<ExecutionPlan, Error> {
    let text = read_json_text(file)?;
    read_plan_as_stored(file, &text).map_err(|e| Error::from(e).in_file(file))
}

/// Runs `jointplan diff`.
pub fn run(args: &Args) -> Result<(), Error> {
    let a = read_plan(&args.a)?;
    let b = read_plan(&args.b)?;
    let given = given_pricing(&args.serving, args.engine.as_deref())?;
    let requests = match args.request.as_slice() {
        [] => None,
        [one] => {
            let request = read_request(one)?;
            Some((request.clone(), request))
        }
        [ra, rb] => Some((read_request(ra)?, read_request(rb)?)),
        more => {
            return Err(Error::Usage(format!(
                "--request is given {} times: give it once (both plans of one request) or twice (A's, then B's)",
                more.len()
            )))
        }
    };
    let research = |e: jointplan::study::ResearchError| Error::Library(e.into());
    let diff = match &requests {
        None => {
            if given.is_some() {
                return Err(Error::Usage(
                    "a serving point prices the plans' nodes, which only their requests have: give --request REQUEST.json".to_owned(),
                ));
            }
            diff_plans(&a, &b).map_err(research)?
        }
        Some((ra, rb)) => {
            let mut diff = diff_plans_with_reports((&a, ra), (&b, rb)).map_err(research)?;
            if let Some(pricers) = diff_pricers(given, &a, &b).map_err(research)? {
                add_time(&mut diff, (&a, ra), (&b, rb), &pricers).map_err(research)?;
            }
            diff
        }
    };
    if args.json {
        let text = pretty_json(&diff)
            .map_err(|e| Error::Usage(format!("cannot serialize the comparison: {e}")))?;
        write_stdout(&text)?;
    } else {
        let detail = if args.full {
            Detail::Full
        } else {
            Detail::Grouped
        };
        write_stdout(&diff_text(&diff, &a, &b, detail))?;
    }
    Ok(())
}
