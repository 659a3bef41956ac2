//! Plan time and peak memory against node count, each size planned in a child process
//! (this binary re-run as `child REQUEST.json`) so that its peak RSS (`VmHWM` of
//! `/proc/self/status`) is its own; plus the 70B-class ratio of the full plan to the floor
//! (parse + canonical hash of the request).
//!
//! ```text
//! cargo run --release --locked --example scaling_memory
//! ```
//!
//! Sizes come from DeepSeek-V3's configuration with `layers` and routed `experts` varied;
//! the device is the 512 GB one with its memory raised to 4 TiB (so the largest point's
//! weights fit); the plan is serialized into a counting sink (its byte count is reported),
//! not to disk.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use jointplan::builder::BuildOptions;
use jointplan::canonical::canonical_fingerprint;
use jointplan::plan::ExecutionPlan;
use jointplan::request::{PlanRequest, WireLimits};
use jointplan::synth::{synthesize, DeviceDescription, ModelFolder, PolicyPreset, SynthOptions};

type Failure = Box<dyn std::error::Error>;

/// (layers, routed experts) of DeepSeek-V3: about 1k, 5k, 20k and 50k nodes.
const SIZES: [(u64, u64); 4] = [(7, 240), (20, 240), (40, 500), (61, 800)];

fn peak_rss_kib() -> Result<u64, Failure> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .ok_or("no VmHWM in /proc/self/status")?;
    Ok(line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()?)
}

struct Count(u64);

impl Write for Count {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len() as u64;
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Child: plan one request file, print `nodes plan_seconds floor_seconds plan_bytes
/// peak_kib`: plan = parse + build (validation, selection with check, memory plan, hash,
/// internal validation) + serialization; floor = parse + canonical request hash.
fn child(file: &Path) -> Result<(), Failure> {
    let start = Instant::now();
    let request = PlanRequest::read(file)?;
    let parse = start.elapsed().as_secs_f64();
    let start = Instant::now();
    canonical_fingerprint("request", &request)?;
    let floor = parse + start.elapsed().as_secs_f64();
    let start = Instant::now();
    let plan = ExecutionPlan::build(&request, &BuildOptions::default())?;
    let bytes = plan.write_json(std::io::BufWriter::new(Count(0)))?;
    let bytes = bytes.into_inner().map_err(|e| e.to_string())?.0;
    let total = parse + start.elapsed().as_secs_f64();
    println!(
        "{} {total:.3} {floor:.3} {bytes} {}",
        plan.payload.nodes.len(),
        peak_rss_kib()?
    );
    Ok(())
}

fn run_child(file: &Path) -> Result<Vec<String>, Failure> {
    let output = Command::new(std::env::current_exe()?)
        .arg("child")
        .arg(file)
        .output()?;
    if !output.status.success() {
        return Err(format!(
            "child failed on {}: {}",
            file.display(),
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    Ok(String::from_utf8(output.stdout)?
        .split_whitespace()
        .map(str::to_owned)
        .collect())
}

fn main() -> Result<(), Failure> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 3 && args[1] == "child" {
        return child(Path::new(&args[2]));
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    let dir = tempfile::tempdir()?;
    let deepseek = ModelFolder::read(&root.join("deepseek-v3"))?;
    // The 512 GB device with 4 TiB of memory: the 50k-node point (800 experts in 61
    // layers) holds about 1.2 TB of weights; memory size does not change the node count.
    let mut device = DeviceDescription::read(&root.join("devices/m3-ultra-512gb.json"))?;
    device.total_memory_bytes = 1 << 42;
    println!("| nodes | layers x experts | plan s (wall) | s per 1k nodes | ratio per doubling | peak RSS MiB | plan JSON MB |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    let mut previous: Option<(f64, f64)> = None;
    for (layers, experts) in SIZES {
        let mut options = SynthOptions::new("deepseek-v3");
        options.layers = Some(layers);
        options.experts = Some(experts);
        options.weight_format = "gguf-q4k".parse().map_err(|e: String| e)?;
        options.wire_limits = Some(WireLimits {
            maximum_resource_rows: 1 << 20,
            maximum_plan_json_bytes: 1 << 40,
        });
        let request = synthesize(&deepseek.config, &device, &PolicyPreset::server(), &options)?;
        let file = dir.path().join(format!("ds-{layers}-{experts}.json"));
        serde_json::to_writer(
            std::io::BufWriter::new(std::fs::File::create(&file)?),
            &request,
        )?;
        drop(request);
        let fields = run_child(&file)?;
        let nodes: f64 = fields[0].parse()?;
        let seconds: f64 = fields[1].parse()?;
        let per_node = seconds / nodes;
        let ratio = previous.map_or_else(
            || "-".to_owned(),
            |(n, t)| {
                let doublings = (nodes / n).log2();
                format!("{:.2}", (per_node / t).powf(1.0 / doublings))
            },
        );
        previous = Some((nodes, per_node));
        let plan_mb = fields[3].parse::<f64>()? / 1e6;
        let peak_mib = fields[4].parse::<f64>()? / 1024.0;
        println!(
            "| {nodes} | {layers} x {experts} | {seconds:.2} | {:.3} | {ratio} | {peak_mib:.0} | {plan_mb:.1} |",
            per_node * 1000.0
        );
    }
    let seventy = ModelFolder::read(&root.join("llama-3.1-70b"))?;
    let device = DeviceDescription::read(&seventy.default_device().ok_or("no device")?)?;
    let policy = PolicyPreset::resolve(&seventy.default_policy().ok_or("no policy")?)?;
    let mut options = SynthOptions::new("llama-3.1-70b");
    if let Some(defaults) = &seventy.defaults {
        options.weight_format = defaults.weight_format.parse().map_err(|e: String| e)?;
    }
    options.wire_limits = seventy.default_wire_limits();
    let request = synthesize(&seventy.config, &device, &policy, &options)?;
    let file = dir.path().join("llama-70b.json");
    serde_json::to_writer(
        std::io::BufWriter::new(std::fs::File::create(&file)?),
        &request,
    )?;
    let fields = run_child(&file)?;
    let total: f64 = fields[1].parse()?;
    let floor: f64 = fields[2].parse()?;
    println!(
        "\nllama-3.1-70b: {} nodes, parse + hash {floor:.3} s, parse + plan + serialization {total:.3} s, ratio {:.2}",
        fields[0],
        total / floor
    );
    Ok(())
}
