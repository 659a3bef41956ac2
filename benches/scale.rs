//! The scale benchmark: `synth`, `plan`, `verify`, `check` and `explain --node` of the
//! command-line binary against node count, each next to its floor (`hash` of the same
//! input: parse + canonical hash), in one run, as ratios.
//!
//! ```text
//! cargo bench --locked --bench scale                      # 1k to 100k nodes
//! cargo bench --locked --bench scale -- --max-nodes 20000 # the smaller sizes only
//! cargo bench --locked --bench scale -- --rounds 5        # five rounds of the smaller sizes
//! ```
//!
//! Every command runs as its own process, exactly as a user runs it; for each the table
//! gives the wall time, the CPU time (user + system, from the parent's `cutime` and
//! `cstime` in `/proc/self/stat` around the child's wait, so exact) and the peak resident
//! memory (the child's `VmHWM`, sampled every 2 ms while it runs, so a lower bound that
//! misses at most the last 2 ms). The machine this runs on may be shared: compare the
//! ratios, which are taken within one run.
//!
//! Each request is measured in rounds (three up to 20,000 nodes, one above; `--rounds N`
//! sets the first), a round being every command once in turn, so that a command and its
//! floor meet the same load. A cost cell is the median of its rounds (each of wall, CPU
//! and peak apart); a ratio is the median of the rounds' ratios; a last table gives the
//! targets' ratios of every round, so that the spread the machine's noise makes is on the
//! page beside the median.
//!
//! The sizes are DeepSeek-V3's configuration (`models/deepseek-v3`) with `layers` and routed
//! `experts` varied (about 1k, 5k, 15.6k = the full model, 20k, 50k and 100k nodes), on the
//! 512 GB device with its memory raised to 256 TiB (so every size's weights and workspaces
//! fit: only the node count matters here) and the wire limits raised; plus
//! `models/llama-3.1-70b` on its A100 80GB with the memory raised the same way.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

type Failure = Box<dyn std::error::Error>;

/// (label, layers, routed experts) of DeepSeek-V3.
const SIZES: [(&str, u64, u64); 6] = [
    ("deepseek 10x128", 10, 128),
    ("deepseek 20x240", 20, 240),
    ("deepseek-v3 (full)", 61, 256),
    ("deepseek 40x500", 40, 500),
    ("deepseek 61x850", 61, 850),
    ("deepseek 61x1700", 61, 1700),
];

/// The device `models/llama-3.1-70b` is planned for (enlarged like the others).
const SEVENTY_DEVICE: &str = "a100-80gb.json";

/// Requests of more nodes than this are measured in one round (a round of the 100,000-node
/// request takes about a minute and a half).
const ROUNDS_UP_TO_NODES: u64 = 20_000;

/// Input limits raised for the largest plans (a 100k-node plan file is about 1.8 GB).
const LIMITS: [&str; 4] = ["--limit", "file-bytes=64G", "--limit", "resources=16M"];

/// One command's cost.
#[derive(Clone, Copy, Debug)]
struct Cost {
    wall: f64,
    cpu: f64,
    peak_mib: f64,
}

impl Cost {
    /// The median of each of wall, CPU and peak over `costs` (the upper median of an even
    /// count), so that one noisy round moves no cell.
    fn median(costs: &[Cost]) -> Cost {
        let middle = |field: fn(&Cost) -> f64| {
            let mut values: Vec<f64> = costs.iter().map(field).collect();
            values.sort_by(f64::total_cmp);
            values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
        };
        Cost {
            wall: middle(|c| c.wall),
            cpu: middle(|c| c.cpu),
            peak_mib: middle(|c| c.peak_mib),
        }
    }
}

/// A table cell: wall seconds (CPU seconds).
impl std::fmt::Display for Cost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.2} ({:.2})", self.wall, self.cpu)
    }
}

/// `numerator / denominator` of CPU seconds, a denominator under one clock tick counted as
/// one tick.
fn ratio(numerator: f64, denominator: f64) -> f64 {
    numerator / denominator.max(0.01)
}

/// Seconds of CPU the waited-for children of this process have used (`cutime + cstime`).
fn children_cpu_seconds() -> Result<f64, Failure> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = &stat[stat.rfind(')').ok_or("malformed /proc/self/stat")? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // cutime and cstime are fields 16 and 17 of the whole line: 13 and 14 after the name.
    let ticks: f64 = fields[13].parse::<f64>()? + fields[14].parse::<f64>()?;
    Ok(ticks / clock_ticks_per_second()?)
}

/// The kernel's clock tick (`USER_HZ`, the unit of `cutime`), from `getconf CLK_TCK`, read
/// once (before any measurement, so that its own CPU time is in no measurement).
fn clock_ticks_per_second() -> Result<f64, Failure> {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    if let Some(ticks) = TICKS.get() {
        return Ok(*ticks);
    }
    let output = Command::new("getconf").arg("CLK_TCK").output()?;
    let ticks: f64 = String::from_utf8(output.stdout)?.trim().parse()?;
    Ok(*TICKS.get_or_init(|| ticks))
}

fn peak_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// Runs `jointplan ARGS`, which must succeed, and measures it.
fn run(args: &[&str]) -> Result<Cost, Failure> {
    let before = children_cpu_seconds()?;
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_jointplan"))
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let pid = child.id();
    let mut peak = 0u64;
    let status = loop {
        if let Some(kib) = peak_kib(pid) {
            peak = peak.max(kib);
        }
        if let Some(status) = child.try_wait()? {
            break status;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let wall = start.elapsed().as_secs_f64();
    if !status.success() {
        let mut stderr = String::new();
        if let Some(mut pipe) = child.stderr.take() {
            std::io::Read::read_to_string(&mut pipe, &mut stderr)?;
        }
        return Err(format!("jointplan {} failed ({status}): {stderr}", args.join(" ")).into());
    }
    Ok(Cost {
        wall,
        cpu: children_cpu_seconds()? - before,
        peak_mib: peak as f64 / 1024.0,
    })
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap_or_default()
}

/// A copy of the shipped device `name` in `dir` with 256 TiB of memory.
fn enlarged_device(dir: &Path, models: &Path, name: &str) -> Result<PathBuf, Failure> {
    let mut device: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(models.join("devices").join(name))?)?;
    device["total_memory_bytes"] = serde_json::json!(1u64 << 48);
    let file = dir.join(name);
    std::fs::write(&file, serde_json::to_vec_pretty(&device)?)?;
    Ok(file)
}

/// A model folder of DeepSeek-V3's configuration on the enlarged device, with raised wire
/// limits.
fn deepseek_folder(dir: &Path, models: &Path) -> Result<PathBuf, Failure> {
    let folder = dir.join("deepseek-v3-large");
    std::fs::create_dir_all(&folder)?;
    std::fs::copy(
        models.join("deepseek-v3/config.json"),
        folder.join("config.json"),
    )?;
    enlarged_device(dir, models, "m3-ultra-512gb.json")?;
    let synth = serde_json::json!({
        "device": "../m3-ultra-512gb.json",
        "policy": "server",
        "weight_format": "gguf-q4k",
        "wire_limits": {
            "maximum_resource_rows": 1u64 << 24,
            "maximum_plan_json_bytes": 1u64 << 40
        }
    });
    std::fs::write(
        folder.join("synth.json"),
        serde_json::to_vec_pretty(&synth)?,
    )?;
    Ok(folder)
}

/// One row of the table: every round, and each command's median over them.
struct Row {
    label: String,
    nodes: u64,
    plan_mb: f64,
    median: Round,
    rounds: Vec<Round>,
}

impl Row {
    /// The median over the rounds of each round's ratio `of(round)`: a command and its
    /// floor are paired within a round, under the same load, so a ratio of medians (of
    /// costs measured in different rounds) would mix the loads of different moments.
    fn ratio(&self, of: impl Fn(&Round) -> f64) -> f64 {
        let mut ratios: Vec<f64> = self.rounds.iter().map(of).collect();
        ratios.sort_by(f64::total_cmp);
        ratios.get(ratios.len() / 2).copied().unwrap_or(f64::NAN)
    }
}

/// Every command once, in turn.
struct Round {
    synth: Cost,
    request_floor: Cost,
    plan: Cost,
    plan_floor: Cost,
    check: Cost,
    verify: Cost,
    explain: Cost,
}

impl Round {
    /// The targets' ratios of CPU: plan / floor, check / plan, verify / plan.
    fn target_ratios(&self) -> [f64; 3] {
        [
            ratio(self.plan.cpu, self.request_floor.cpu),
            ratio(self.check.cpu, self.plan.cpu),
            ratio(self.verify.cpu, self.plan.cpu),
        ]
    }
}

/// Measures every command on one request synthesized with `synth_args`: one round (which
/// tells the node count), then up to `rounds` in all when the request has at most
/// [`ROUNDS_UP_TO_NODES`] nodes.
fn measure(
    label: &str,
    dir: &Path,
    synth_args: &[&str],
    explain_node: &str,
    rounds: usize,
) -> Result<Row, Failure> {
    let request = dir.join("request.json");
    let plan = dir.join("plan.json");
    let mut measured = vec![measure_round(dir, synth_args, explain_node)?];
    let nodes = jointplan::request::PlanRequest::read(&request)?
        .node_resolutions
        .len() as u64;
    if nodes <= ROUNDS_UP_TO_NODES {
        for _ in 1..rounds {
            measured.push(measure_round(dir, synth_args, explain_node)?);
        }
    }
    let median =
        |cost: fn(&Round) -> Cost| Cost::median(&measured.iter().map(cost).collect::<Vec<_>>());
    Ok(Row {
        label: label.to_owned(),
        nodes,
        plan_mb: std::fs::metadata(&plan)?.len() as f64 / 1e6,
        median: Round {
            synth: median(|r| r.synth),
            request_floor: median(|r| r.request_floor),
            plan: median(|r| r.plan),
            plan_floor: median(|r| r.plan_floor),
            check: median(|r| r.check),
            verify: median(|r| r.verify),
            explain: median(|r| r.explain),
        },
        rounds: measured,
    })
}

/// One round: synthesize the request into `dir`, then every command on it and its plan.
fn measure_round(dir: &Path, synth_args: &[&str], explain_node: &str) -> Result<Round, Failure> {
    let request = dir.join("request.json");
    let plan = dir.join("plan.json");
    let _ = std::fs::remove_file(&request);
    let _ = std::fs::remove_file(&plan);
    let mut args = vec!["synth"];
    args.extend_from_slice(synth_args);
    args.extend_from_slice(&["-o", s(&request)]);
    let synth = run(&args)?;
    let (request_s, plan_s) = (s(&request), s(&plan));
    let limited = |args: &[&str]| -> Result<Cost, Failure> {
        let mut all = args.to_vec();
        all.extend_from_slice(&LIMITS);
        run(&all)
    };
    Ok(Round {
        synth,
        request_floor: limited(&["hash", request_s])?,
        plan: limited(&["plan", request_s, "-o", plan_s])?,
        plan_floor: limited(&["hash", plan_s])?,
        check: limited(&["check", plan_s])?,
        verify: limited(&["verify", request_s, plan_s])?,
        explain: limited(&["explain", plan_s, "--node", explain_node])?,
    })
}

fn main() -> Result<(), Failure> {
    let args: Vec<String> = std::env::args().collect();
    let max_nodes: u64 = match args.iter().position(|a| a == "--max-nodes") {
        Some(i) => args.get(i + 1).ok_or("--max-nodes N")?.parse()?,
        None => u64::MAX,
    };
    let rounds: usize = match args.iter().position(|a| a == "--rounds") {
        Some(i) => args.get(i + 1).ok_or("--rounds N")?.parse()?,
        None => 3,
    };
    if rounds == 0 {
        return Err("--rounds must be at least 1".into());
    }
    clock_ticks_per_second()?;
    let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    let dir = tempfile::tempdir()?;
    let folder = deepseek_folder(dir.path(), &models)?;
    let mut rows = Vec::new();
    let seventy = models.join("llama-3.1-70b");
    let seventy_device = enlarged_device(dir.path(), &models, SEVENTY_DEVICE)?;
    rows.push(measure(
        "llama-3.1-70b",
        dir.path(),
        &["--model", s(&seventy), "--device", s(&seventy_device)],
        "node.layer.40.attention",
        rounds,
    )?);
    for (label, layers, experts) in SIZES {
        // About 255 nodes per layer at 256 experts: skip sizes above the cap unmeasured.
        let estimate = layers * (experts + 12);
        if estimate > max_nodes {
            continue;
        }
        let (l, e) = (layers.to_string(), experts.to_string());
        let node = format!("node.layer.{}.attention", layers / 2);
        let synth_args = ["--model", s(&folder), "--layers", &l, "--experts", &e];
        rows.push(measure(label, dir.path(), &synth_args, &node, rounds)?);
        eprintln!("measured {label}");
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "| request | nodes | plan MB | synth s | floor: hash request s | plan s | plan / floor | plan peak MiB | hash plan s | check s | check / plan | verify s | verify / plan | explain --node s |"
    )?;
    writeln!(
        out,
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )?;
    for r in &rows {
        let m = &r.median;
        writeln!(
            out,
            "| {} | {} | {:.0} | {} | {} | {} | {:.2}x | {:.0} | {} | {} | {:.2}x | {} | {:.2}x | {} |",
            r.label,
            r.nodes,
            r.plan_mb,
            m.synth,
            m.request_floor,
            m.plan,
            r.ratio(|x| x.target_ratios()[0]),
            m.plan.peak_mib,
            m.plan_floor,
            m.check,
            r.ratio(|x| x.target_ratios()[1]),
            m.verify,
            r.ratio(|x| x.target_ratios()[2]),
            m.explain,
        )?;
    }
    writeln!(
        out,
        "\nEach cell: wall seconds (CPU seconds, user + system), the median of the request's rounds. Ratios are of CPU seconds: the median of the rounds' ratios."
    )?;
    // Each command against the floor of what it reads: `plan` the request file, `check` and
    // `explain` the plan file, `verify` both. The last column is the
    // plan file's floor against `plan`: no `check` that parses and hashes the file can cost
    // much less than that share of `plan`.
    writeln!(
        out,
        "\nEach command's CPU against the floor of the files it reads (`hash` of the request, of the plan file, or of both):\n\n| request | plan / hash request | check / hash plan | verify / (hash request + hash plan) | explain --node / hash plan | hash plan / plan |"
    )?;
    writeln!(out, "|---|---:|---:|---:|---:|---:|")?;
    for r in &rows {
        writeln!(
            out,
            "| {} | {:.2}x | {:.2}x | {:.2}x | {:.2}x | {:.2}x |",
            r.label,
            r.ratio(|x| ratio(x.plan.cpu, x.request_floor.cpu)),
            r.ratio(|x| ratio(x.check.cpu, x.plan_floor.cpu)),
            r.ratio(|x| ratio(x.verify.cpu, x.request_floor.cpu + x.plan_floor.cpu)),
            r.ratio(|x| ratio(x.explain.cpu, x.plan_floor.cpu)),
            r.ratio(|x| ratio(x.plan_floor.cpu, x.plan.cpu)),
        )?;
    }
    writeln!(out, "\nPeak memory of every command:")?;
    writeln!(
        out,
        "\n| request | synth MiB | hash request MiB | plan MiB | hash plan MiB | check MiB | verify MiB | explain MiB |"
    )?;
    writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|")?;
    for r in &rows {
        writeln!(
            out,
            "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
            r.label,
            r.median.synth.peak_mib,
            r.median.request_floor.peak_mib,
            r.median.plan.peak_mib,
            r.median.plan_floor.peak_mib,
            r.median.check.peak_mib,
            r.median.verify.peak_mib,
            r.median.explain.peak_mib,
        )?;
    }
    writeln!(
        out,
        "\nThe targets' CPU ratios in every round (plan / hash request; check / plan; verify / plan), in the order measured:\n\n| request | rounds | plan / floor | check / plan | verify / plan |"
    )?;
    writeln!(out, "|---|---:|---|---|---|")?;
    for r in &rows {
        let column = |k: usize| {
            let ratios: Vec<String> = r
                .rounds
                .iter()
                .map(|round| format!("{:.2}x", round.target_ratios()[k]))
                .collect();
            ratios.join(", ")
        };
        writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            r.label,
            r.rounds.len(),
            column(0),
            column(1),
            column(2),
        )?;
    }
    Ok(())
}
