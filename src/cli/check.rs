//! `jointplan check PLAN.json [--json]`: the independent checker on a stored plan alone (no
//! request): every violation with its rule and JSON path (exit 0 valid, 1 violations, 2
//! unreadable plan).

use std::path::PathBuf;

use super::Error;
use jointplan::verify::check_stored_plan;

/// Arguments of `jointplan check`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The stored plan (JSON).
    pub plan: PathBuf,
    /// Print the report as JSON (`{"plan_id", "valid", "violations": [{rule, json_path, message}]}`).
    #[arg(long)]
    pub json: bool,
}

/// Runs `jointplan check`; returns whether the plan is valid.
pub fn run(args: &Args) -> Result<bool, Error> {
    let text = jointplan::request::read_json_text(&args.plan)?;
    let (plan, report) =
        check_stored_plan(&args.plan, &text).map_err(|e| Error::from(e).in_file(&args.plan))?;
    let text = if args.json {
        let json = serde_json::json!({
            "plan_id": plan.payload.plan_id,
            "valid": report.is_valid(),
            "violations": report.violations,
        });
        let mut text = serde_json::to_string_pretty(&json)
            .map_err(|e| Error::Usage(format!("cannot serialize the report: {e}")))?;
        text.push('\n');
        text
    } else if report.is_valid() {
        format!(
            "{}: valid: {} ({} nodes) satisfies every rule of docs/checker.md\n",
            args.plan.display(),
            plan.payload.plan_id,
            plan.payload.nodes.len()
        )
    } else {
        let mut text = format!(
            "{}: INVALID: {} violations of docs/checker.md\n",
            args.plan.display(),
            report.violations.len()
        );
        for violation in &report.violations {
            text.push_str(&format!("  {violation}\n"));
        }
        text
    };
    super::output::write_stdout(&text)?;
    let valid = report.is_valid();
    // The process exits when `check` returns: freeing the plan (millions of small
    // allocations on a large model) would only delay the exit, so it is left to the
    // operating system, as `plan` leaves its own.
    std::mem::forget(plan);
    Ok(valid)
}
