//! Times the phases of planning one request: parse, canonical request hash (the floor),
//! request validation + steps 1-16, the whole build, then each pass over the finished plan
//! alone (the plan hash, the internal validation, the independent checker, the pretty plan
//! serialization into a sink and into a temporary file) and the passes `plan` runs
//! concurrently (`check_beside_writing`: both checks beside the plan file's serialization
//! into a temporary file; `hash_check_and_write`: the same with the plan hash, as `plan`
//! runs them, the internal validation beside the hash), so that the concurrent window can
//! be compared with the sum of its parts. Wall seconds; the whole build also per stage,
//! with the CPU seconds the process used meanwhile (so a stage on one core shows).
//!
//! ```text
//! cargo run --release --example plan_phases -- REQUEST.json
//! ```

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use jointplan::builder::internal::validate_internal;
use jointplan::builder::{
    build_core, check_beside_writing, hash_check_and_write, BuildOptions, BuildStage,
};
use jointplan::canonical::{canonical_fingerprint, write_canonical};
use jointplan::check::check_plan;
use jointplan::plan::hash::{plan_hash, UNSET_PLAN_ID};
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

/// CPU seconds (user + system) of this process so far, from `/proc/self/stat` (Linux; 0
/// elsewhere). Clock ticks of 1/100 s.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // The fields after the command name, which is in parentheses and may hold spaces.
    let Some((_, after)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |index: usize| {
        fields
            .get(index)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    (ticks(11) + ticks(12)) / 100.0
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
    // The whole build again, each stage timed by the build's observer: wall seconds and
    // the CPU seconds of the process meanwhile, so that a stage on one core shows.
    let stages = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let observed = {
        let stages = std::sync::Arc::clone(&stages);
        BuildOptions {
            observer: Some(std::sync::Arc::new(move |stage: BuildStage| {
                let mark = (format!("{stage:?}"), Instant::now(), cpu_seconds());
                stages
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(mark);
            })),
            ..BuildOptions::default()
        }
    };
    let start = Instant::now();
    let start_cpu = cpu_seconds();
    let plan = ExecutionPlan::build(&request, &observed)?;
    time("build (total)", start);
    let mut marks = stages
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    marks.insert(0, ("Start".to_owned(), start, start_cpu));
    marks.push(("End".to_owned(), Instant::now(), cpu_seconds()));
    for pair in marks.windows(2) {
        let ((stage, at, cpu), (_, next, next_cpu)) = (&pair[0], &pair[1]);
        let wall = next.duration_since(*at).as_secs_f64();
        let used = next_cpu - cpu;
        println!(
            "  stage {stage:<22} {wall:>7.3} s wall {used:>7.3} s CPU ({:.2} cores)",
            used / wall.max(1e-9)
        );
    }
    let start = Instant::now();
    plan_hash(&plan.payload)?;
    time("plan hash", start);
    let start = Instant::now();
    validate_internal(&plan, &request)?;
    time("internal validation", start);
    let start = Instant::now();
    let report = check_plan(&plan);
    time("independent checker", start);
    if !report.is_valid() {
        return Err(format!("the checker rejects the plan: {:?}", report.violations).into());
    }
    let start = Instant::now();
    let canonical = write_canonical("plan", &plan, Count(0))?;
    time("canonical plan bytes", start);
    let start = Instant::now();
    let pretty = plan.write_json(Count(0))?;
    time("pretty plan bytes", start);
    println!(
        "  canonical {} bytes, pretty {} bytes",
        canonical.0, pretty.0
    );
    let file = tempfile::NamedTempFile::new()?;
    let start = Instant::now();
    plan.write_json(std::io::BufWriter::new(file.as_file()))?;
    time("pretty plan file write", start);
    let file = tempfile::NamedTempFile::new()?;
    let start = Instant::now();
    let written = check_beside_writing(&plan, &request, file.as_file())?;
    time("checks beside the file write", start);
    println!(
        "  {} bytes written concurrently, {} rayon threads",
        written.bytes,
        rayon::current_num_threads()
    );
    let mut payload = plan.payload.clone();
    payload.plan_id = UNSET_PLAN_ID.to_owned();
    let file = tempfile::NamedTempFile::new()?;
    let start = Instant::now();
    let (rehashed, _) = hash_check_and_write(payload, &request, &options, file.as_file())?;
    time("hash + checks + file write", start);
    if rehashed.plan_hash != plan.plan_hash {
        return Err("the concurrent hash differs from the plan's".into());
    }
    Ok(())
}
