//! `jointplan verify REQUEST.json PLAN.json`: rebuild the plan from the request and check
//! the stored plan field by field (exit 0 verified, 1 rejected with the first differing JSON
//! path, 2 bad input).

use std::path::PathBuf;

use super::Error;
use jointplan::builder::BuildOptions;
use jointplan::request::read_json_text;
use jointplan::verify::{read_stored_plan_to_rebuild, verify_stored};

use super::plan::read_request;

/// Arguments of `jointplan verify`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plan request (JSON).
    pub request: PathBuf,
    /// The stored plan (JSON).
    pub plan: PathBuf,
}

/// Runs `jointplan verify`.
pub fn run(args: &Args) -> Result<(), Error> {
    let progress = super::progress::Progress::start("verify");
    progress.step(&format!("reading {}", args.request.display()));
    let request = read_request(&args.request)?;
    progress.step(&format!("reading {}", args.plan.display()));
    let text = read_json_text(&args.plan)?;
    let stored = read_stored_plan_to_rebuild(&args.plan, &text)
        .map_err(|e| Error::from(e).in_file(&args.plan))?;
    let options = BuildOptions {
        observer: Some(progress.observer()),
        ..BuildOptions::default()
    };
    let plan = verify_stored(&request, stored, &options)
        .map_err(|e| Error::from(e).in_file(&args.plan))?;
    drop(progress);
    super::output::write_stdout(&format!(
        "{}: verified {} ({} nodes) against {}\n",
        args.plan.display(),
        plan.payload.plan_id,
        plan.payload.nodes.len(),
        args.request.display()
    ))?;
    Ok(())
}
