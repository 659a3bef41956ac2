//! `jointplan plan REQUEST.json [-o PLAN.json] [--json]`: build a plan, write it atomically
//! and print a readable summary.

use std::path::{Path, PathBuf};

use crate::plan::build::BuildOptions;
use crate::plan::ExecutionPlan;
use crate::request::PlanRequest;
use crate::Error;

use super::output::{plan_summary, pretty_json, summary_text, write_atomically, ComponentSummary};

/// Arguments of `jointplan plan`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plan request (JSON).
    pub request: PathBuf,
    /// Write the plan here (atomically; nothing is written on failure).
    #[arg(short, long, value_name = "PLAN.json")]
    pub output: Option<PathBuf>,
    /// Print the summary as JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Reads a request file; errors name the file and the JSON path.
pub fn read_request(file: &Path) -> Result<PlanRequest, Error> {
    Ok(PlanRequest::read(file)?)
}

/// Runs `jointplan plan`.
pub fn run(args: &Args) -> Result<(), Error> {
    let request = read_request(&args.request)?;
    let outcome = ExecutionPlan::build_with_report(&request, &BuildOptions::default())
        .map_err(|e| Error::from(e).in_file(&args.request))?;
    let plan = &outcome.plan;
    if let Some(output) = &args.output {
        let text = pretty_json(plan)
            .map_err(|e| Error::Usage(format!("cannot serialize the plan: {e}")).in_file(output))?;
        write_atomically(output, text.as_bytes())?;
    }
    let selection: Vec<ComponentSummary> = outcome
        .selection
        .iter()
        .map(|c| ComponentSummary {
            first_node: c.first_node.clone(),
            nodes: c.nodes,
            resources: c.resources,
            method: c.method.clone(),
            check: c.check.clone(),
        })
        .collect();
    let summary = plan_summary(plan, &selection, args.output.as_deref());
    if args.json {
        let text = pretty_json(&summary)
            .map_err(|e| Error::Usage(format!("cannot serialize the summary: {e}")))?;
        print!("{text}");
    } else {
        print!("{}", summary_text(&summary));
    }
    Ok(())
}
