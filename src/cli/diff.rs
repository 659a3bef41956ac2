//! `jointplan diff A.plan.json B.plan.json [--json]`: a semantic comparison of two plans of
//! one program (exit 0 whether or not they differ; 2 for two different programs).

// The command line's `Error` carries the library's error unboxed: errors are the cold path.
#![allow(clippy::result_large_err)]

use std::path::PathBuf;

use super::Error;
use jointplan::plan::ExecutionPlan;
use jointplan::request::read_json_text;
use jointplan::study::diff::{diff_plans, diff_plans_with_reports, PlanDiff, ProfileChange};

use super::plan::read_request;
use jointplan::study::objective_keys::ObjectiveKeys;
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
        write_stdout(&diff_text(&diff, &a, &b))?;
    }
    Ok(())
}

/// The comparison for people.
pub fn diff_text(diff: &PlanDiff, a: &ExecutionPlan, b: &ExecutionPlan) -> String {
    let mut out = format!("A {}\nB {}\n", a.payload.plan_id, b.payload.plan_id);
    if !diff.programs_equal {
        out.push_str("programs: same nodes, different program fingerprints (shapes differ)\n");
    }
    if diff.is_empty() {
        out.push_str("no difference in providers, profiles or memory\n");
    }
    out.push_str(&format!(
        "\nproviders: {} of {} nodes changed\n",
        diff.nodes_changed.len(),
        a.payload.nodes.len()
    ));
    for pattern in &diff.patterns {
        out.push_str(&format!(
            "  {} -> {}: {}\n",
            pattern.a, pattern.b, pattern.count
        ));
        for node in &pattern.nodes {
            out.push_str(&format!("    {node}\n"));
        }
    }
    out.push_str(&format!(
        "\nstorage profiles: {} resources changed\n",
        diff.profiles_changed.len()
    ));
    out.push_str(&profile_change_lines(&diff.profiles_changed));
    out.push_str("\nobjective keys (A | B):\n");
    out.push_str(&objective_lines(
        &diff.objective.a,
        &diff.objective.b,
        ["A", "B"],
    ));
    out.push_str("\nmemory (A | B | B - A, bytes; pools summed per kind, and every pool's maximum is bounded by the same dynamic capacity, which they share):\n");
    for (name, m) in &diff.memory {
        out.push_str(&format!("  {name}  {} | {} | {:+}\n", m.a, m.b, m.delta));
    }
    out
}

/// One line per resource whose profile changed (`(absent)` on a side without it).
pub fn profile_change_lines(changes: &[ProfileChange]) -> String {
    let show = |p: &Option<String>| p.clone().unwrap_or_else(|| "(absent)".to_owned());
    changes
        .iter()
        .map(|c| format!("  {}  {} -> {}\n", c.resource, show(&c.a), show(&c.b)))
        .collect()
}

/// The objective keys of two plans side by side (`labels` name the two sides).
pub fn objective_lines(a: &ObjectiveKeys, b: &ObjectiveKeys, labels: [&str; 2]) -> String {
    let mut out = format!("  objective  {} | {}\n", a.objective, b.objective);
    out.push_str(&format!(
        "  preferences met (node order decides seed-lex)  {}/{} | {}/{}\n",
        a.preferred_met, a.preferences, b.preferred_met, b.preferences
    ));
    let missed = |k: &ObjectiveKeys| {
        if k.preferred_missed.is_empty() {
            return "none".to_owned();
        }
        k.preferred_missed
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    if a.preferred_missed != b.preferred_missed {
        out.push_str(&format!("    missed in {}: {}\n", labels[0], missed(a)));
        out.push_str(&format!("    missed in {}: {}\n", labels[1], missed(b)));
    }
    let profiles: std::collections::BTreeSet<&String> = a
        .resources_by_profile
        .keys()
        .chain(b.resources_by_profile.keys())
        .collect();
    for profile in profiles {
        out.push_str(&format!(
            "  resources at {profile}  {} | {}\n",
            a.resources_by_profile.get(profile).unwrap_or(&0),
            b.resources_by_profile.get(profile).unwrap_or(&0)
        ));
    }
    if !a.penalty_by_rank.is_empty() {
        out.push_str(&format!(
            "  penalty by rank (resources at rank 0, 1, ...)  {:?} | {:?}\n",
            a.penalty_by_rank, b.penalty_by_rank
        ));
    }
    match a
        .providers
        .iter()
        .zip(&b.providers)
        .find(|(x, y)| x.1 != y.1)
    {
        Some((x, y)) => out.push_str(&format!(
            "  provider-id tie-break: first difference at {}: {} | {}\n",
            x.0, x.1, y.1
        )),
        None => out.push_str("  provider-id tie-break: equal\n"),
    }
    out
}
