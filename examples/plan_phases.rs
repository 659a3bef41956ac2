//! Times the phases of planning one request: parse, canonical request hash (the floor),
//! request validation + steps 1-16, the whole build, the plan hash, the internal
//! validation, and the pretty plan serialization (into a sink, no disk).
//!
//! ```text
//! cargo run --release --example plan_phases -- REQUEST.json
//! ```

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use jointplan::builder::internal::validate_internal;
use jointplan::builder::{build_core, BuildOptions};
use jointplan::canonical::{canonical_fingerprint, write_canonical};
use jointplan::plan::hash::plan_hash;
use jointplan::plan::ExecutionPlan;
use jointplan::request::PlanRequest;

/// Counts bytes and drops them.
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

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let file: PathBuf = std::env::args_os()
        .nth(1)
        .ok_or("usage: plan_phases REQUEST.json")?
        .into();
    let time = |label: &str, start: Instant| {
        println!("{label:<28} {:>9.3} s", start.elapsed().as_secs_f64());
    };
    let start = Instant::now();
    let request = PlanRequest::read(&file)?;
    time("parse", start);
    let start = Instant::now();
    let hash = canonical_fingerprint("request", &request)?;
    time("request canonical hash", start);
    println!("  request hash {hash}");
    let options = BuildOptions::default();
    let start = Instant::now();
    let core = build_core(&request, &options)?;
    time("validate + steps 1-16", start);
    println!("  {} nodes", core.nodes.len());
    drop(core);
    let start = Instant::now();
    let plan = ExecutionPlan::build(&request, &options)?;
    time("build (total)", start);
    let start = Instant::now();
    plan_hash(&plan.payload)?;
    time("plan hash", start);
    let start = Instant::now();
    validate_internal(&plan, &request)?;
    time("internal validation", start);
    let start = Instant::now();
    let canonical = write_canonical("plan", &plan, Count(0))?;
    time("canonical plan bytes", start);
    let start = Instant::now();
    let mut pretty = Count(0);
    serde_json::to_writer_pretty(&mut pretty, &plan)?;
    time("pretty plan bytes", start);
    println!(
        "  canonical {} bytes, pretty {} bytes",
        canonical.0, pretty.0
    );
    Ok(())
}
