//! `jointplan seal REQUEST.json [-o OUT]`: recompute every derived fingerprint of a request
//! after a hand edit, and write it back atomically.

use std::path::PathBuf;

use super::Error;
use jointplan::request::seal::seal;

use super::destination::Destination;
use super::output::write_stdout;
use super::plan::read_request;

/// Arguments of `jointplan seal`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plan request (JSON).
    pub request: PathBuf,
    /// Write the sealed request here (default: over REQUEST.json, atomically; a symbolic
    /// link is followed and kept).
    #[arg(short, long, value_name = "OUT")]
    pub output: Option<PathBuf>,
}

/// Runs `jointplan seal`.
pub fn run(args: &Args) -> Result<(), Error> {
    let mut request = read_request(&args.request)?;
    let report = seal(&mut request).map_err(|e| Error::from(e).in_file(&args.request))?;
    let output = args.output.as_ref().unwrap_or(&args.request);
    // Sealing rewrites its request by design, so the input may be the output.
    Destination::open(output, &[&args.request], true, None)?.write_json(&request, true)?;
    let mut text = format!(
        "{}: checked {} derived fingerprints, {} changed; written to {}\n",
        args.request.display(),
        report.checked,
        report.changes.len(),
        output.display()
    );
    for change in &report.changes {
        text.push_str(&format!(
            "  {}: {} -> {}\n",
            change.json_path, change.old, change.new
        ));
    }
    write_stdout(&text)?;
    Ok(())
}
