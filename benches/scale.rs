//! The scale benchmark: `synth`, `plan`, `verify`, `check` and `explain --node` of the
//! command-line binary against node count, each next to its floor (`hash` of the same
//! input: parse + canonical hash), in one run, as ratios.
//!
//! ```text
//! cargo bench --locked --bench scale                      # 1k to 100k nodes
//! cargo bench --locked --bench scale -- --max-nodes 20000 # the smaller sizes only
//! ```
//!
//! Every command runs as its own process, exactly as a user runs it; for each the table
//! gives the wall time, the CPU time (user + system, from the parent's `cutime` and
//! `cstime` in `/proc/self/stat` around the child's wait, so exact) and the peak resident
//! memory (the child's `VmHWM`, sampled every 2 ms while it runs, so a lower bound that
//! misses at most the last 2 ms). The machine this runs on may be shared: compare the
//! ratios, which are taken within one run.
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

/// Input limits raised for the largest plans (a 100k-node plan file is about 1.8 GB).
const LIMITS: [&str; 4] = ["--limit", "file-bytes=64G", "--limit", "resources=16M"];

/// One command's cost.
#[derive(Clone, Copy, Debug)]
struct Cost {
    wall: f64,
    cpu: f64,
    peak_mib: f64,
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

/// One row of the table.
struct Row {
    label: String,
    nodes: u64,
    plan_mb: f64,
    synth: Cost,
    request_floor: Cost,
    plan: Cost,
    plan_floor: Cost,
    check: Cost,
    verify: Cost,
    explain: Cost,
}

/// Measures every command on one request (synthesized from `folder`, or given).
fn measure(
    label: &str,
    dir: &Path,
    synth_args: &[&str],
    explain_node: &str,
) -> Result<Row, Failure> {
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
    let request_floor = limited(&["hash", request_s])?;
    let planned = limited(&["plan", request_s, "-o", plan_s])?;
    let plan_floor = limited(&["hash", plan_s])?;
    let check = limited(&["check", plan_s])?;
    let verify = limited(&["verify", request_s, plan_s])?;
    let explain = limited(&["explain", plan_s, "--node", explain_node])?;
    let nodes = jointplan::request::PlanRequest::read(&request)?
        .node_resolutions
        .len() as u64;
    Ok(Row {
        label: label.to_owned(),
        nodes,
        plan_mb: std::fs::metadata(&plan)?.len() as f64 / 1e6,
        synth,
        request_floor,
        plan: planned,
        plan_floor,
        check,
        verify,
        explain,
    })
}

fn main() -> Result<(), Failure> {
    let args: Vec<String> = std::env::args().collect();
    let max_nodes: u64 = match args.iter().position(|a| a == "--max-nodes") {
        Some(i) => args.get(i + 1).ok_or("--max-nodes N")?.parse()?,
        None => u64::MAX,
    };
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
        rows.push(measure(label, dir.path(), &synth_args, &node)?);
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
        writeln!(
            out,
            "| {} | {} | {:.0} | {:.2} ({:.2}) | {:.2} ({:.2}) | {:.2} ({:.2}) | {:.2}x | {:.0} | {:.2} ({:.2}) | {:.2} ({:.2}) | {:.2}x | {:.2} ({:.2}) | {:.2}x | {:.2} ({:.2}) |",
            r.label,
            r.nodes,
            r.plan_mb,
            r.synth.wall,
            r.synth.cpu,
            r.request_floor.wall,
            r.request_floor.cpu,
            r.plan.wall,
            r.plan.cpu,
            r.plan.cpu / r.request_floor.cpu.max(0.01),
            r.plan.peak_mib,
            r.plan_floor.wall,
            r.plan_floor.cpu,
            r.check.wall,
            r.check.cpu,
            r.check.cpu / r.plan.cpu.max(0.01),
            r.verify.wall,
            r.verify.cpu,
            r.verify.cpu / r.plan.cpu.max(0.01),
            r.explain.wall,
            r.explain.cpu,
        )?;
    }
    writeln!(
        out,
        "\nEach cell: wall seconds (CPU seconds, user + system). Ratios are of CPU seconds."
    )?;
    // Each command against the floor of what it reads: `plan` and `synth` read the request's
    // sources, `check` and `explain` the plan file, `verify` both. The last column is the
    // plan file's floor against `plan`: no `check` that parses and hashes the file can cost
    // much less than that share of `plan`.
    writeln!(
        out,
        "\nEach command's CPU against the floor of the files it reads (`hash` of the request, of the plan file, or of both):\n\n| request | plan / hash request | check / hash plan | verify / (hash request + hash plan) | explain --node / hash plan | hash plan / plan |"
    )?;
    writeln!(out, "|---|---:|---:|---:|---:|---:|")?;
    for r in &rows {
        let plan_floor = r.plan_floor.cpu.max(0.01);
        writeln!(
            out,
            "| {} | {:.2}x | {:.2}x | {:.2}x | {:.2}x | {:.2}x |",
            r.label,
            r.plan.cpu / r.request_floor.cpu.max(0.01),
            r.check.cpu / plan_floor,
            r.verify.cpu / (r.request_floor.cpu + r.plan_floor.cpu).max(0.01),
            r.explain.cpu / plan_floor,
            r.plan_floor.cpu / r.plan.cpu.max(0.01),
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
            r.synth.peak_mib,
            r.request_floor.peak_mib,
            r.plan.peak_mib,
            r.plan_floor.peak_mib,
            r.check.peak_mib,
            r.verify.peak_mib,
            r.explain.peak_mib,
        )?;
    }
    Ok(())
}
