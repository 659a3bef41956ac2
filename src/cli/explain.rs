//! `jointplan explain PLAN.json [--node ID] [--request REQUEST.json]`: why each provider of
//! a node was chosen or rejected, in the input's terms: the selection reason, every
//! rejection's typed evidence, and for storage conflicts the evidence resources with the
//! profiles the plan chose for them (with `--request`, also what the rejected provider
//! accepts for the slots bound to those resources). The answer is the library's
//! [`jointplan::study::explain`] (what Python's `explain` returns), its text
//! [`jointplan::render::explain_text`]; `--json` prints the answer itself.

use std::path::PathBuf;

use super::Error;
use jointplan::plan::ExecutionPlan;
use jointplan::request::id_pattern::IdPattern;
use jointplan::request::PlanRequest;

use super::plan::{node_provider, read_request};
use jointplan::render::explain_text::explanation_text;
use jointplan::render::infeasible_text::why_not_text;
use jointplan::study::explain::{explain, explain_stored_node, Explanation};

/// Arguments of `jointplan explain`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plan (JSON).
    pub plan: PathBuf,
    /// Explain only this node, or the nodes an id pattern as summaries print it selects
    /// (`node.layer.[0-31].attention`).
    #[arg(long, value_name = "ID|PATTERN")]
    pub node: Option<String>,
    /// The request the plan was built from: adds what rejected providers accept and the
    /// compatible providers that were not chosen.
    #[arg(long, value_name = "REQUEST.json")]
    pub request: Option<PathBuf>,
    /// Re-solve with NODE pinned to PROVIDER and print the exact consequence (needs
    /// --request).
    #[arg(long, value_name = "NODE=PROVIDER")]
    pub why_not: Option<String>,
    /// Print the answer (the explanation, or the why-not answer) as JSON.
    #[arg(long)]
    pub json: bool,
    /// With --why-not: the engine whose time profile prices the serving point the flags
    /// below give (default vllm).
    #[arg(long, value_name = "ENGINE", requires = "why_not")]
    pub engine: Option<String>,
    /// With --why-not: a serving point that prices both plans (TTFT, TPOT, tokens/s, and
    /// the time of each provider change); without it, the point the plan recorded (a time
    /// objective records one), if any.
    #[command(flatten, next_help_heading = "Serving point (performance model)")]
    pub serving: super::performance::ServingFlags,
}

/// Runs `jointplan explain`.
pub fn run(args: &Args) -> Result<(), Error> {
    let text = jointplan::request::read_json_text(&args.plan)?;
    if is_placement(&text) {
        return placement(args, &text);
    }
    let research = |e: jointplan::study::ResearchError| Error::Library(e.into());
    if args.why_not.is_none() && args.serving.requested(None)?.is_some() {
        return Err(Error::Usage(
            "--concurrency prices the answer of --why-not NODE=PROVIDER: give --why-not".to_owned(),
        ));
    }
    if let (Some(id), None, None) = (&args.node, &args.request, &args.why_not) {
        if !IdPattern::is_pattern(id) {
            // One node by its id: read that node, the node ids and the rows' profiles, not the
            // whole plan (`jointplan::verify::read_node_view`); the answer is what the whole
            // read gives for the node.
            let view = jointplan::verify::read_node_view(&args.plan, &text, id)
                .map_err(|e| Error::from(e).in_file(&args.plan))?;
            let answer = explain_stored_node(&view, id).map_err(research)?;
            return print(args, &answer);
        }
    }
    let plan = jointplan::verify::read_plan_as_stored(&args.plan, &text)
        .map_err(|e| Error::from(e).in_file(&args.plan))?;
    let request = match &args.request {
        Some(file) => Some(read_request(file)?),
        None => None,
    };
    if let Some(question) = &args.why_not {
        let Some(request) = &request else {
            return Err(Error::Usage(format!(
                "--why-not {question} re-solves the plan's request: give it with --request REQUEST.json"
            )));
        };
        return why_not(args, question, request, &plan);
    }
    let answer = explain(&plan, request.as_ref(), args.node.as_deref()).map_err(research)?;
    print(args, &answer)
}

/// Whether the file is a placement plan (it has a `placement_id` key; an execution plan has
/// none).
fn is_placement(text: &str) -> bool {
    text.contains("\"placement_id\"")
}

/// `explain PLACEMENT.json --why-not tp=N|pp=N|offload=BYTES`: what the alternative costs
/// against a stored placement (docs/placement.md), the library's
/// [`jointplan::placement::alternative::compare_stored`].
fn placement(args: &Args, text: &str) -> Result<(), Error> {
    let shown = args.plan.display();
    let Some(question) = &args.why_not else {
        return Err(Error::Usage(format!(
            "{shown} is a placement plan: ask what an alternative costs with --why-not tp=N, pp=N or offload=BYTES"
        )));
    };
    if args.node.is_some() || args.request.is_some() {
        return Err(Error::Usage(format!(
            "{shown} is a placement plan: --node and --request apply to execution plans"
        )));
    }
    let plan = jointplan::placement::PlacementPlan::from_json_text(text)
        .map_err(|e| Error::Usage(format!("{shown}: not a placement plan: {e}")))?;
    let alternative = jointplan::placement::alternative::Alternative::parse(question)?;
    let answer = jointplan::placement::alternative::compare_stored(&plan, alternative)
        .map_err(|e| Error::Usage(format!("{shown}: {e}")))?;
    if args.json {
        let text = super::output::pretty_json(&answer)
            .map_err(|e| Error::Usage(format!("cannot serialize the answer: {e}")))?;
        super::output::write_stdout(&text)?;
    } else {
        super::output::write_stdout(&jointplan::render::placement_text::why_not_text(&answer))?;
    }
    Ok(())
}

/// Prints an explanation as text, or as JSON with `--json`.
fn print(args: &Args, answer: &Explanation) -> Result<(), Error> {
    if args.json {
        let text = super::output::pretty_json(answer)
            .map_err(|e| Error::Usage(format!("cannot serialize the answer: {e}")))?;
        super::output::write_stdout(&text)?;
    } else {
        super::output::write_stdout(&explanation_text(answer))?;
    }
    Ok(())
}

/// `--why-not NODE=PROVIDER`.
fn why_not(
    args: &Args,
    question: &str,
    request: &PlanRequest,
    plan: &ExecutionPlan,
) -> Result<(), Error> {
    let (node, provider) = node_provider("why-not", question)?;
    let progress = super::progress::Progress::start("explain");
    progress.step(&format!("re-solving with {node} pinned to {provider}"));
    let options = jointplan::builder::BuildOptions {
        observer: Some(progress.observer()),
        ..Default::default()
    };
    let pricing = super::diff::given_pricing(&args.serving, args.engine.as_deref())?;
    let answer =
        jointplan::study::why_not::why_not(request, plan, &node, &provider, &options, pricing)
            .map_err(|e| Error::Library(jointplan::Error::from(e).in_file(&args.plan)))?;
    drop(progress);
    if args.json {
        let text = super::output::pretty_json(&answer)
            .map_err(|e| Error::Usage(format!("cannot serialize the answer: {e}")))?;
        super::output::write_stdout(&text)?;
    } else {
        super::output::write_stdout(&why_not_text(node.as_str(), provider.as_str(), &answer))?;
    }
    Ok(())
}
