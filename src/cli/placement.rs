//! `jointplan plan MODEL_FOLDER --devices SET.json` (or `--device D --count N`): the model
//! placed across a device set, certified, checked and hashed (docs/placement.md).

use std::path::{Path, PathBuf};

use jointplan::placement::{
    self, DeviceSet, Objective, Placed, PlacementError, Settings, DEFAULT_ENUMERATION_BUDGET,
};

use super::destination::Destination;
use super::output::{pretty_json, write_stdout};
use super::Error;
use jointplan::render::summary::{human_bytes, human_signed_bytes};

/// Placement flags of `plan` (model folders only).
#[derive(Debug, Default, clap::Args)]
pub struct PlacementFlags {
    /// A device set file (`models/devices/sets/*.json`): place the model across it.
    #[arg(long, value_name = "SET.json", conflicts_with = "count")]
    pub devices: Option<PathBuf>,
    /// With `--device D`: place the model across N such devices on one NVLink domain.
    #[arg(long, value_name = "N")]
    pub count: Option<u32>,
    /// Pin the tensor-parallel degree (otherwise the solver chooses).
    #[arg(long, value_name = "N")]
    pub tensor_parallel: Option<u32>,
    /// Pin the pipeline depth (otherwise the solver chooses).
    #[arg(long, value_name = "N")]
    pub pipeline_parallel: Option<u32>,
    /// Allow routed expert groups to live in host memory.
    #[arg(long)]
    pub host_offload: bool,
    /// Host memory offload may use, bytes (default: the set's host tier).
    #[arg(long, value_name = "BYTES")]
    pub host_memory: Option<u64>,
    /// fewest-devices (default), most-kv-tokens, least-offloaded, or (with a serving
    /// point: --concurrency, --input-tokens, --output-tokens) min-tpot, min-ttft or
    /// max-throughput.
    #[arg(long, value_name = "OBJECTIVE")]
    pub placement_objective: Option<String>,
    /// What an alternative costs against the placement: `tp=N`, `pp=N` or
    /// `offload=BYTES` (host offload within BYTES), solved under the same objective.
    #[arg(long, value_name = "ALTERNATIVE")]
    pub why_not: Option<String>,
    /// Placements the certifying enumeration may evaluate.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_ENUMERATION_BUDGET)]
    pub enumeration_budget: u64,
}

impl PlacementFlags {
    /// Whether the flags ask for a placement.
    pub fn active(&self) -> bool {
        self.devices.is_some() || self.count.is_some()
    }

    /// The first placement-only flag given without `--devices` or `--count`.
    pub fn stray(&self) -> Option<&'static str> {
        [
            (self.tensor_parallel.is_some(), "--tensor-parallel"),
            (self.pipeline_parallel.is_some(), "--pipeline-parallel"),
            (self.host_offload, "--host-offload"),
            (self.host_memory.is_some(), "--host-memory"),
            (self.placement_objective.is_some(), "--placement-objective"),
            (self.why_not.is_some(), "--why-not"),
        ]
        .into_iter()
        .find_map(|(given, name)| given.then_some(name))
    }
}

impl From<PlacementError> for Error {
    fn from(error: PlacementError) -> Self {
        Error::Placement(error)
    }
}

fn set_of(flags: &PlacementFlags, device: Option<&Path>) -> Result<DeviceSet, Error> {
    if let Some(file) = &flags.devices {
        return Ok(DeviceSet::read(file)?);
    }
    let count = flags.count.unwrap_or(1);
    let device = device.ok_or_else(|| {
        Error::Usage("--count N needs --device D (the device file of the N devices)".to_owned())
    })?;
    Ok(DeviceSet::uniform(device, count, flags.host_memory)?)
}

/// Places the model folder `model` as `args` ask; prints the placement and writes it to
/// `output` if given.
pub fn run(args: &super::plan::Args) -> Result<(), Error> {
    let flags = &args.placement;
    if !args.request.is_dir() {
        return Err(Error::Usage(format!(
            "--devices/--count place a model folder; {} is a request file",
            args.request.display()
        )));
    }
    let objective = match &flags.placement_objective {
        None => Objective::FewestDevices,
        Some(name) => Objective::from_name(name).ok_or_else(|| {
            Error::Usage(format!(
                "--placement-objective {name}: expected one of {}",
                Objective::ALL.map(Objective::name).join(", ")
            ))
        })?,
    };
    let set = set_of(flags, args.synth.device.as_deref())?;
    if args.serving.calibration.is_some() || args.serving.performance_device.is_some() {
        return Err(Error::Usage(
            "--calibration and --performance-device do not apply to a placement: every device of the set is priced by its own file's figures".to_owned(),
        ));
    }
    let serving = args
        .serving
        .requested(args.engine.engine.as_deref())?
        .map(|r| placement::timing::Serving {
            concurrency: r.concurrency,
            input_tokens: r.input_tokens,
            output_tokens: r.output_tokens,
            engine: r.engine,
        });
    let why_not = flags
        .why_not
        .as_deref()
        .map(placement::alternative::Alternative::parse)
        .transpose()?;
    let mut settings = Settings {
        why_not,
        policy: None,
        serving,
        tensor_parallel: flags.tensor_parallel,
        pipeline_parallel: flags.pipeline_parallel,
        host_offload: flags.host_offload,
        host_memory: flags.host_memory,
        objective,
    };
    let source = args.synth.source(Some(&args.request));
    // --context, --sequences and --scheduled-tokens set the preset's fields, as for a
    // single-device plan.
    let fields = args.policy.fields();
    if !fields.is_empty() {
        settings.policy = Some(fields.preset(&source)?);
    }
    let options = args.selection.build_options()?;
    let placed = placement::place(&source, &set, &settings, &options, flags.enumeration_budget)?;
    if let Some(output) = &args.output {
        Destination::open(output, &[], false, None)?.write_json(&placed.plan, true)?;
    }
    if args.json {
        let text = pretty_json(&placed)
            .map_err(|e| Error::Usage(format!("cannot serialize the placement: {e}")))?;
        write_stdout(&text)?;
    } else {
        write_stdout(&text(&placed, args.output.as_deref()))?;
    }
    if !placed.violations.is_empty() {
        return Err(Error::Placement(PlacementError::Internal(format!(
            "the checker rejects the placement: {} violation(s), the first: {} at {}: {}",
            placed.violations.len(),
            placed.violations[0].rule,
            placed.violations[0].path,
            placed.violations[0].message
        ))));
    }
    Ok(())
}

fn text(placed: &Placed, output: Option<&Path>) -> String {
    use std::fmt::Write;
    let p = &placed.plan.payload;
    let mut out = String::new();
    let _ = writeln!(out, "placement {}", placed.plan.placement_id);
    let _ = writeln!(
        out,
        "  model {} ({}), policy {}: {} sequences x {} tokens of context",
        p.model, p.weight_format, p.policy, p.sequences, p.context_tokens
    );
    let _ = writeln!(
        out,
        "  device set {}: {} device(s) used, tensor parallel {}, pipeline {}, routed experts split by {}",
        p.device_set,
        p.devices_used,
        p.tensor_parallel,
        p.pipeline_parallel,
        p.expert_split.name()
    );
    let certificate = &placed.certificate;
    let proof = if certificate.method == "exhaustive" {
        format!(
            "the exhaustive enumeration of {} placements agrees",
            certificate.placements
        )
    } else {
        format!(
            "optimal by the dynamic program's proof (docs/solver.md, \"Placement across devices\"); {} placements exceed the enumeration budget of {}",
            certificate.placements, certificate.budget
        )
    };
    let _ = writeln!(out, "  objective {}: {proof}", p.objective.name());
    let _ = writeln!(
        out,
        "  checker: {}",
        if placed.violations.is_empty() {
            "no violations (9 rules, docs/placement.md)".to_owned()
        } else {
            format!("{} violation(s)", placed.violations.len())
        }
    );
    let _ = match output {
        Some(file) => writeln!(out, "  written to {}", file.display()),
        None => writeln!(out, "  not written (give -o PLACEMENT.json to write it)"),
    };
    for note in &placed.notes {
        let _ = writeln!(out, "  note: {note}");
    }
    let _ = writeln!(out, "\nstages:");
    for (s, stage) in p.stages.iter().enumerate() {
        let _ = writeln!(
            out,
            "  stage {s}  layers {}-{} ({})  {}  {} expert group(s) per device on the host",
            stage.first_layer,
            stage.end_layer - 1,
            stage.end_layer - stage.first_layer,
            stage.devices.join(", "),
            stage.offloaded_units
        );
    }
    let _ = writeln!(
        out,
        "\ndevices (rules: docs/placement.md, \"Per-device memory\"):"
    );
    for d in &p.devices {
        let _ = writeln!(
            out,
            "  {}  {}  stage {} rank {}  {} shards\n    weights {}\n    KV cache {}\n    activations {}\n    workspaces {}\n    communication {}\n    total {} of usable {}, headroom {}",
            d.id,
            d.name,
            d.stage,
            d.rank,
            d.shards.len(),
            human_bytes(d.items.weights),
            human_bytes(d.items.kv_cache),
            human_bytes(d.items.activations),
            human_bytes(d.items.workspaces),
            human_bytes(d.items.communication),
            human_bytes(d.total_bytes),
            human_bytes(d.usable_bytes),
            human_signed_bytes(d.headroom_bytes)
        );
    }
    let _ = writeln!(
        out,
        "\nhost: {} offloaded ({} shards){}",
        human_bytes(p.host.offloaded_bytes),
        p.host.shards.len(),
        p.host
            .memory_bytes
            .map_or(", offload off".to_owned(), |m| format!(
                " of {}",
                human_bytes(m)
            ))
    );
    let _ = writeln!(
        out,
        "KV tokens that fit: {} (the fullest device's room over its KV bytes per token)",
        p.kv_tokens_that_fit
            .map_or("unbounded".to_owned(), |t| t.to_string())
    );
    if let Some(perf) = &placed.performance {
        out.push_str(&performance_text(perf));
    }
    if let Some(c) = &placed.why_not {
        out.push_str(&why_not_text(c));
    }
    if !placed.rejected.is_empty() {
        let _ = writeln!(out, "\noptions the model cannot take:");
        for r in &placed.rejected {
            let _ = writeln!(
                out,
                "  tensor parallel {} ({}-split experts): {}",
                r.degree,
                r.split.name(),
                r.reason
            );
        }
    }
    out
}

fn ms(seconds: f64) -> String {
    format!("{:.3} ms", seconds * 1e3)
}

/// The predicted times of a placement, part by part, with the rules they follow.
fn performance_text(perf: &placement::timing::Prediction) -> String {
    use std::fmt::Write;
    let s = &perf.serving_point;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nperformance ({} engine profile; concurrency {}, {} input tokens, {} output tokens, budget {} tokens/step, at most {} sequences):",
        s.engine, s.concurrency, s.input_tokens, s.output_tokens, s.scheduled_token_budget, s.maximum_sequences
    );
    for (name, b) in [
        ("TPOT (decode step)", &perf.tpot),
        ("TTFT (one prompt)", &perf.ttft),
    ] {
        let _ = writeln!(
            out,
            "  {name:<19} {}: compute-bound {}, memory-bound {}, launches {}, all-reduce {}, sends {}, host transfers {}, engine {}; of which other requests' prompts {}, bubble (mean device wait) {}",
            ms(b.seconds),
            ms(b.compute_seconds),
            ms(b.memory_seconds),
            ms(b.launch_seconds),
            ms(b.all_reduce_seconds),
            ms(b.send_seconds),
            ms(b.host_transfer_seconds),
            ms(b.engine_seconds),
            ms(b.prompts_seconds),
            ms(b.bubble_seconds)
        );
    }
    let _ = writeln!(
        out,
        "  output tokens/s     {:.1} total, {:.1} per device",
        perf.output_tokens_per_second, perf.output_tokens_per_second_per_device
    );
    for link in &perf.links {
        let _ = writeln!(out, "  link: {link}");
    }
    for rule in &perf.rules {
        let _ = writeln!(out, "  rule: {rule}");
    }
    out
}

fn figures_text(f: &placement::alternative::Figures) -> String {
    let time = |ns: Option<u64>| ns.map_or("-".to_owned(), |t| ms(t as f64 * 1e-9));
    format!(
        "tensor parallel {}, pipeline {}, {} device(s), {} offloaded, KV tokens {}, TPOT {}, TTFT {}",
        f.tensor_parallel,
        f.pipeline_parallel,
        f.devices,
        human_bytes(f.offloaded_bytes),
        f.kv_tokens.map_or("unbounded".to_owned(), |t| t.to_string()),
        time(f.tpot_ns),
        time(f.ttft_ns)
    )
}

/// The answer to `--why-not`: the alternative's best placement against the chosen one.
fn why_not_text(c: &placement::alternative::Comparison) -> String {
    let mut out = format!(
        "\nwhy not {} (the same objective, solved exactly):\n  chosen       {}\n",
        c.alternative,
        figures_text(&c.chosen)
    );
    match (&c.alternative_best, &c.reason) {
        (Some(best), _) => {
            out.push_str(&format!("  alternative  {}\n", figures_text(best)));
            let delta = |a: Option<u64>, b: Option<u64>| match (a, b) {
                (Some(a), Some(b)) => format!("{:+.3} ms", (b as f64 - a as f64) * 1e-6),
                _ => "-".to_owned(),
            };
            out.push_str(&format!(
                "  it costs     {:+} device(s), {} offloaded bytes, {} KV tokens, TPOT {}, TTFT {}\n",
                best.devices as i128 - c.chosen.devices as i128,
                best.offloaded_bytes as i128 - c.chosen.offloaded_bytes as i128,
                match (best.kv_tokens, c.chosen.kv_tokens) {
                    (Some(b), Some(a)) => format!("{:+}", b as i128 - a as i128),
                    _ => "-".to_owned(),
                },
                delta(c.chosen.tpot_ns, best.tpot_ns),
                delta(c.chosen.ttft_ns, best.ttft_ns)
            ));
        }
        (None, reason) => out.push_str(&format!(
            "  alternative  infeasible: {}\n",
            reason.as_deref().unwrap_or("no placement fits")
        )),
    }
    out
}
