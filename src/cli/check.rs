//! `jointplan check PLAN.json [--json | --full]`: the independent checker on a stored plan alone (no
//! request): the violations by rule and JSON path (array indices as numbers; the
//! first ten of each rule unless `--full`; exit 0 valid, 1 violations, 2 unreadable plan).

use std::path::PathBuf;

use super::Error;
use jointplan::verify::check_stored_plan;

/// Arguments of `jointplan check`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The stored plan (JSON).
    pub plan: PathBuf,
    /// Print the report as JSON (`{"plan_id", "valid", "violations": [{rule, json_path, message}]}`).
    #[arg(long, conflicts_with = "full")]
    pub json: bool,
    /// List every violation (by default the first few of each rule, and how many more).
    #[arg(long)]
    pub full: bool,
}

/// Violations of one rule the text lists before it says how many more there are.
const SHOWN_PER_RULE: usize = 10;

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
        // By rule, then by path: the first few of each rule, unless --full.
        let mut rest = report.violations.as_slice();
        while let Some(first) = rest.first() {
            let count = rest.iter().take_while(|v| v.rule == first.rule).count();
            let (of_rule, after) = rest.split_at(count);
            let shown = if args.full {
                count
            } else {
                count.min(SHOWN_PER_RULE)
            };
            for violation in &of_rule[..shown] {
                text.push_str(&format!("  {violation}\n"));
            }
            if shown < count {
                let more = count - shown;
                text.push_str(&format!(
                    "  ... and {more} more violation{} of rule {} (--full or --json lists every one)\n",
                    if more == 1 { "" } else { "s" },
                    first.rule
                ));
            }
            rest = after;
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
