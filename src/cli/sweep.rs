//! `jointplan sweep GRID.json|MODEL -o DIR [knob flags] [--resume] [--jobs N]`: plan every
//! point of a grid (a file, or a model folder with knob lists as flags: `--devices
//! a.json,b.json --tensor-parallel 1,2,4,8 --concurrency 1,8,32,128 ...`),
//! append the rows to `DIR/results.csv` and `DIR/results.jsonl`, and draw the plots
//! (SVG) from every row of the directory. A progress bar counts points on a terminal;
//! elsewhere (a log file, a batch job) one line per finished point goes to standard error.
//!
//! `--shard I/N` plans only the I-th of N contiguous runs of the grid's points (a batch
//! scheduler's array job runs one shard each); `--merge DIR...` plans nothing and gathers
//! the rows of shard or partial-sweep directories into DIR, first row per key.

use std::collections::BTreeSet;
use std::io::{IsTerminal, Write};
use std::num::NonZeroUsize;
use std::path::PathBuf;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use jointplan::builder::BuildOptions;
use jointplan::placement::sweep::SweepPlacer;
use jointplan::study::plot::write_plots;
use jointplan::study::results::{append_rows, merge_rows, read_rows, JSONL};
use jointplan::study::sweep::{progress_line, run_points, Grid, Shard, SweepRow};
use jointplan::study::StudyError;

use super::output::write_stdout;
use super::Error;

/// Arguments of `jointplan sweep`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The grid: values per knob (see docs/research.md); or a model folder, swept over the
    /// knob flags below.
    #[arg(value_name = "GRID.json|MODEL")]
    pub grid: PathBuf,
    /// The results directory (created if absent).
    #[arg(short, long, value_name = "DIR")]
    pub output: PathBuf,
    /// Skip the points whose key is already in DIR (without it, a DIR with results is
    /// refused rather than appended to).
    #[arg(long)]
    pub resume: bool,
    /// Points planned at once (each plan on one thread) [default: all cores].
    #[arg(long)]
    pub jobs: Option<NonZeroUsize>,
    /// Plan only shard I of N (0 <= I < N): the I-th of N contiguous runs of the grid's
    /// points, so that the shards' results concatenated in shard order are the whole
    /// sweep's.
    #[arg(long, value_name = "I/N", conflicts_with = "merge")]
    pub shard: Option<Shard>,
    /// Plan nothing: gather the rows of these results directories (shards in shard order,
    /// or partial sweeps of the grid) into DIR, keeping the first row of each key, and
    /// draw the plots.
    #[arg(long, value_name = "DIR", num_args = 1..)]
    pub merge: Vec<PathBuf>,
    /// Knob lists given as flags.
    #[command(flatten, next_help_heading = "Knobs (each replaces the grid's list)")]
    pub knobs: KnobFlags,
}

/// Knob lists given on the command line (comma-separated): each replaces the grid's.
#[derive(Debug, Default, clap::Args)]
pub struct KnobFlags {
    /// Device files, one device per point.
    #[arg(long, value_delimiter = ',', value_name = "DEVICE.json,...")]
    pub device: Vec<PathBuf>,
    /// Device set files: each point placed across a set (`plan --devices`).
    #[arg(long, value_delimiter = ',', value_name = "SET.json,...")]
    pub devices: Vec<PathBuf>,
    /// Pinned tensor-parallel degrees of the device-set points.
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    pub tensor_parallel: Vec<u32>,
    /// Pinned pipeline depths of the device-set points.
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    pub pipeline_parallel: Vec<u32>,
    /// Requests in flight at the serving point (every row gains the time columns).
    #[arg(long, value_delimiter = ',', value_name = "C,...")]
    pub concurrency: Vec<u64>,
    /// Prompt tokens of each request at the serving point.
    #[arg(long, value_delimiter = ',', value_name = "I,...")]
    pub input_tokens: Vec<u64>,
    /// Output tokens of each request at the serving point.
    #[arg(long, value_delimiter = ',', value_name = "O,...")]
    pub output_tokens: Vec<u64>,
    /// Maximum contexts of the policy preset.
    #[arg(long, value_delimiter = ',', value_name = "TOKENS,...")]
    pub context: Vec<u64>,
    /// Maximum active sequences of the policy preset.
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    pub sequences: Vec<u32>,
    /// Weight formats.
    #[arg(long, value_delimiter = ',', value_name = "FORMAT,...")]
    pub weight_format: Vec<String>,
    /// Layers kept.
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    pub layers: Vec<u64>,
    /// Serving engines as `plan --engine` takes them (vllm, vllm@0.6, sglang, trtllm,
    /// llama.cpp): each point planned under the engine's memory rules and priced with its
    /// time profile.
    #[arg(long, value_delimiter = ',', value_name = "ENGINE,...")]
    pub engine: Vec<String>,
}

impl KnobFlags {
    /// Replaces the grid's lists of the knobs given.
    fn apply(&self, grid: &mut Grid) {
        fn set<T: Clone>(into: &mut Vec<T>, from: &[T]) {
            if !from.is_empty() {
                *into = from.to_vec();
            }
        }
        set(&mut grid.device, &self.device);
        set(&mut grid.devices, &self.devices);
        set(&mut grid.tensor_parallel, &self.tensor_parallel);
        set(&mut grid.pipeline_parallel, &self.pipeline_parallel);
        set(&mut grid.concurrency, &self.concurrency);
        set(&mut grid.input_tokens, &self.input_tokens);
        set(&mut grid.output_tokens, &self.output_tokens);
        set(&mut grid.context, &self.context);
        set(&mut grid.sequences, &self.sequences);
        set(&mut grid.weight_format, &self.weight_format);
        set(&mut grid.layers, &self.layers);
        set(&mut grid.engine, &self.engine);
    }
}

/// The grid: the file's, or a model folder's one-model grid, with the knob flags applied.
fn read_grid(args: &Args) -> Result<Grid, Error> {
    let mut grid = if args.grid.is_dir() {
        Grid {
            model: vec![args.grid.clone()],
            ..Grid::default()
        }
    } else {
        let text = std::fs::read_to_string(&args.grid).map_err(|e| {
            Error::Usage(format!(
                "{}: cannot read the grid: {e} (give a grid file or a model folder)",
                args.grid.display()
            ))
        })?;
        serde_json::from_str(&text).map_err(|e| {
            Error::Usage(format!(
                "{}: not a grid ({e}); knobs: model, device, policy, context, sequences, \
                 scheduled_tokens, storage_views, weight_format, layers, experts, objective, \
                 devices, tensor_parallel, pipeline_parallel, concurrency, input_tokens, \
                 output_tokens, engine, region_axes",
                args.grid.display()
            ))
        })?
    };
    args.knobs.apply(&mut grid);
    Ok(grid)
}

fn study(error: StudyError) -> Error {
    Error::Library(jointplan::Error::from(error))
}

/// Runs `jointplan sweep`.
pub fn run(args: &Args) -> Result<(), Error> {
    let grid = read_grid(args)?;
    let points = grid.points().map_err(study)?;
    grid.plot_axes().map_err(study)?;
    std::fs::create_dir_all(&args.output)
        .map_err(|e| Error::Usage(format!("{}: cannot create: {e}", args.output.display())))?;
    let existing = read_rows(&args.output).map_err(study)?;
    if !existing.is_empty() && !args.resume {
        return Err(Error::Usage(format!(
            "{} already holds {} results ({JSONL}); give --resume to skip them and add the \
             rest, or another directory",
            args.output.display(),
            existing.len()
        )));
    }
    let mut done: BTreeSet<String> = existing.iter().map(|r| r.key.clone()).collect();
    if !args.merge.is_empty() {
        return merge(args, &grid, &mut done);
    }
    let points = match args.shard {
        Some(shard) => shard.select(&points),
        None => &points[..],
    };
    let jobs = args
        .jobs
        .or_else(|| std::thread::available_parallelism().ok())
        .unwrap_or(NonZeroUsize::MIN);
    let terminal = std::io::stderr().is_terminal();
    let varying = grid.varying();
    let bar = if terminal {
        let bar =
            ProgressBar::with_draw_target(Some(points.len() as u64), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::default_bar()
            .template("sweep {bar:30} {pos}/{len} points [{elapsed} < {eta}] {msg}")
        {
            bar.set_style(style);
        }
        bar
    } else {
        ProgressBar::hidden()
    };
    // Both files exist from the start, so that a shard with no point (more shards than
    // points) still leaves its (empty) part of the concatenation.
    append_rows(&args.output, &[]).map_err(study)?;
    let total = points.len();
    let ran = run_points(
        points,
        &mut done,
        jobs,
        &BuildOptions::default(),
        &SweepPlacer,
        |rows, handled| {
            append_rows(&args.output, rows)?;
            if terminal {
                bar.set_position(handled as u64);
            } else {
                // The rows of a batch finish together: they are numbered up to `handled`.
                let first = handled - rows.len();
                let mut err = std::io::stderr().lock();
                for (index, row) in rows.iter().enumerate() {
                    let line = progress_line(row, first + index + 1, total, &varying);
                    // A closed standard error loses the progress, not the sweep.
                    let _ = writeln!(err, "{line}");
                }
            }
            Ok(())
        },
    )
    .map_err(study)?;
    bar.finish_and_clear();
    let shard = args
        .shard
        .map(|s| format!(" (shard {}/{})", s.index, s.count))
        .unwrap_or_default();
    let head = format!(
        "sweep: {} points{shard}, {ran} planned, {} skipped (already in {} or equal to \
         another point)",
        points.len(),
        points.len() - ran,
        args.output.display(),
    );
    finish(args, &grid, &head)
}

/// `--merge DIR...`: the rows of the directories not yet in the output, appended to it.
fn merge(args: &Args, grid: &Grid, done: &mut BTreeSet<String>) -> Result<(), Error> {
    let output = std::fs::canonicalize(&args.output)
        .map_err(|e| Error::Usage(format!("{}: {e}", args.output.display())))?;
    for dir in &args.merge {
        if std::fs::canonicalize(dir).is_ok_and(|d| d == output) {
            return Err(Error::Usage(format!(
                "--merge {}: this is the output directory; merge into another one",
                dir.display()
            )));
        }
    }
    let dirs: Vec<&std::path::Path> = args.merge.iter().map(PathBuf::as_path).collect();
    let rows: Vec<SweepRow> = merge_rows(&dirs)
        .map_err(study)?
        .into_iter()
        .filter(|row| done.insert(row.key.clone()))
        .collect();
    append_rows(&args.output, &rows).map_err(study)?;
    let head = format!(
        "sweep: merged {} directories, {} new rows",
        args.merge.len(),
        rows.len()
    );
    finish(args, grid, &head)
}

/// Draws the plots from every row of the output and prints the summary.
fn finish(args: &Args, grid: &Grid, head: &str) -> Result<(), Error> {
    let rows = read_rows(&args.output).map_err(study)?;
    let axes = grid.plot_axes().map_err(study)?;
    let plots = write_plots(&args.output, &rows, &axes).map_err(study)?;
    let mut out = format!("{head}; {} rows in {}\n", rows.len(), args.output.display());
    for plot in plots {
        out.push_str(&format!("  plot {}\n", args.output.join(plot).display()));
    }
    Ok(write_stdout(&out)?)
}
