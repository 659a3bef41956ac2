//! `jointplan diff A.plan.json B.plan.json [--json]`: a semantic comparison of two plans of
//! one program (exit 0 whether or not they differ; 2 for two different programs).

// The command line's `Error` carries the library's error unboxed: errors are the cold path.
#![allow(clippy::result_large_err)]

use std::path::PathBuf;

use super::Error;
use jointplan::plan::ExecutionPlan;
use jointplan::render::diff_text::diff_text;
use jointplan::render::summary_text::Detail;
use jointplan::request::read_json_text;
use jointplan::study::diff::{diff_plans, diff_plans_with_reports};

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
    let diff = match args.request.as_slice() {
        [] => diff_plans(&a, &b),
        [one] => {
            let request = read_request(one)?;
            diff_plans_with_reports((&a, &request), (&b, &request))
        }
        [ra, rb] => {
            let (ra, rb) = (read_request(ra)?, read_request(rb)?);
            diff_plans_with_reports((&a, &ra), (&b, &rb))
        }
        more => {
            return Err(Error::Usage(format!(
                "--request is given {} times: give it once (both plans of one request) or twice (A's, then B's)",
                more.len()
            )))
        }
    }
    .map_err(|e| Error::Library(e.into()))?;
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
