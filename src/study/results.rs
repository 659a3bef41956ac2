//! The results of a sweep on disk: `results.jsonl` (one [`SweepRow`] per line, the source
//! of truth a resume and the plots read) and `results.csv` (the same rows as a table, for
//! spreadsheets). Both are appended batch by batch; two directories merge by
//! concatenating their files (the CSV without its second header), and reading keeps the
//! first row of each key. [`merge_rows`] does that merge for any number of directories
//! (the shards of one grid, or partial sweeps), without duplicate keys.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;

use super::sweep::{SweepRow, KNOBS};
use super::StudyError;

/// The JSON-lines file of a sweep directory.
pub const JSONL: &str = "results.jsonl";
/// The CSV file of a sweep directory.
pub const CSV: &str = "results.csv";

/// The CSV columns after the knobs (`context_used`: the context the request has, below
/// `context` where the model caps it; `placed_*` and `devices_used`: what a device-set
/// point's placement chose; the time columns, with the rule and the engine's time profile
/// that priced them, where the grid gives a serving point).
pub const COLUMNS: [&str; 32] = [
    "key",
    "request_hash",
    "status",
    "context_used",
    "plan_id",
    "choice_id",
    "certified",
    "weights_bytes",
    "kv_bytes_per_token",
    "kv_bytes_per_sequence",
    "activation_bytes",
    "workspace_bytes",
    "reserve_bytes",
    "headroom_bytes",
    "tokens_that_fit",
    "sequences_that_fit",
    "worst_case_fits",
    "placement_id",
    "placed_tensor_parallel",
    "placed_pipeline_parallel",
    "devices_used",
    "ttft_seconds",
    "tpot_seconds",
    "output_tokens_per_second",
    "output_tokens_per_second_per_device",
    "output_tokens_per_second_per_user",
    "time_rule",
    "time_engine",
    "plan_seconds",
    "providers",
    "reason",
    "time_error",
];

fn io(file: &Path, error: std::io::Error) -> StudyError {
    StudyError::Settings {
        path: file.display().to_string(),
        message: format!("cannot read or write: {error}"),
    }
}

/// Every row of `dir`'s `results.jsonl` (first row per key; none when the file is absent).
pub fn read_rows(dir: &Path) -> Result<Vec<SweepRow>, StudyError> {
    let file = dir.join(JSONL);
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(&file, e)),
    };
    let mut seen = BTreeSet::new();
    let mut rows = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let row: SweepRow = serde_json::from_str(line).map_err(|e| StudyError::Settings {
            path: format!("{}:{}", file.display(), index + 1),
            message: format!("not a sweep row ({e}); remove the line or the file to re-run"),
        })?;
        if seen.insert(row.key.clone()) {
            rows.push(row);
        }
    }
    Ok(rows)
}

/// The rows of `dirs` in the order given, each directory's in file order, keeping the
/// first row of each key: the merge of shards (in shard order, it is the unsharded sweep's
/// rows) or of partial sweeps of one grid.
pub fn merge_rows(dirs: &[&Path]) -> Result<Vec<SweepRow>, StudyError> {
    let mut seen = BTreeSet::new();
    let mut rows = Vec::new();
    for dir in dirs {
        if !dir.join(JSONL).is_file() {
            return Err(StudyError::Settings {
                path: dir.display().to_string(),
                message: format!("no {JSONL} here: give the results directory of a sweep"),
            });
        }
        for row in read_rows(dir)? {
            if seen.insert(row.key.clone()) {
                rows.push(row);
            }
        }
    }
    Ok(rows)
}

fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

fn number<T: ToString>(value: Option<T>) -> String {
    value.map(|v| v.to_string()).unwrap_or_default()
}

/// The CSV header line.
pub fn csv_header() -> String {
    let mut fields: Vec<&str> = KNOBS.to_vec();
    fields.extend(COLUMNS);
    fields.join(",") + "\n"
}

/// One row as a CSV line, in the columns of [`csv_header`].
pub fn csv_line(row: &SweepRow) -> String {
    line(&csv_fields(row))
}

fn line(fields: &[String]) -> String {
    fields
        .iter()
        .map(|f| csv_field(f))
        .collect::<Vec<_>>()
        .join(",")
        + "\n"
}

/// One row's fields in the columns of [`csv_header`].
fn csv_fields(row: &SweepRow) -> Vec<String> {
    let report = row.report.as_ref();
    let placement = row.placement.as_ref();
    let time = row.time.as_ref();
    let mut fields: Vec<String> = KNOBS.iter().map(|k| row.point.value(k)).collect();
    fields.extend([
        row.key.clone(),
        row.request_hash.clone(),
        row.status.clone(),
        number(row.context_used),
        row.plan_id.clone().unwrap_or_default(),
        row.choice_id.clone().unwrap_or_default(),
        number(row.certified),
        number(report.map(|r| r.weights_bytes)),
        number(report.map(|r| r.kv_bytes_per_token)),
        number(report.map(|r| r.kv_bytes_per_sequence)),
        number(report.map(|r| r.activation_bytes)),
        number(report.map(|r| r.workspace_bytes)),
        number(report.map(|r| r.reserve_bytes)),
        number(report.map(|r| r.headroom_bytes)),
        number(report.and_then(|r| r.tokens_that_fit)),
        number(report.and_then(|r| r.sequences_that_fit)),
        number(report.map(|r| r.worst_case_fits)),
        placement
            .map(|p| p.placement_id.clone())
            .unwrap_or_default(),
        number(placement.map(|p| p.tensor_parallel)),
        number(placement.map(|p| p.pipeline_parallel)),
        number(placement.map(|p| p.devices_used)),
        number(time.map(|t| t.ttft_seconds)),
        number(time.map(|t| t.tpot_seconds)),
        number(time.map(|t| t.output_tokens_per_second)),
        number(time.map(|t| t.output_tokens_per_second_per_device)),
        number(time.map(|t| t.output_tokens_per_second_per_user)),
        time.map(|t| t.rule.clone()).unwrap_or_default(),
        time.map(|t| t.engine.clone()).unwrap_or_default(),
        format!("{:.3}", row.plan_seconds),
        row.providers.join(" "),
        row.reason.clone().unwrap_or_default(),
        row.time_error.clone().unwrap_or_default(),
    ]);
    fields
}

/// One row as a CSV line in the columns of `header` (an existing file's first line): a
/// results directory written before a column was added keeps its own columns, so that a
/// resume appends rows that line up with them (a column it lacks is left out; its JSON
/// lines keep every figure).
fn csv_line_in(row: &SweepRow, header: &str) -> String {
    let names: Vec<&str> = KNOBS.iter().chain(COLUMNS.iter()).copied().collect();
    let fields = csv_fields(row);
    let chosen: Vec<String> = header
        .trim_end()
        .split(',')
        .map(|column| {
            names
                .iter()
                .position(|n| *n == column)
                .map(|at| fields[at].clone())
                .unwrap_or_default()
        })
        .collect();
    line(&chosen)
}

fn append(file: &Path, text: &str) -> Result<(), StudyError> {
    let mut handle = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .map_err(|e| io(file, e))?;
    handle.write_all(text.as_bytes()).map_err(|e| io(file, e))?;
    handle.sync_data().map_err(|e| io(file, e))
}

/// The first line of `file` with its line feed (empty when the file is absent or empty).
fn first_line(file: &Path) -> Result<String, StudyError> {
    use std::io::BufRead;
    let handle = match std::fs::File::open(file) {
        Ok(handle) => handle,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(String::new()),
        Err(e) => return Err(io(file, e)),
    };
    let mut line = String::new();
    std::io::BufReader::new(handle)
        .read_line(&mut line)
        .map_err(|e| io(file, e))?;
    Ok(line)
}

/// Appends `rows` to both files of `dir` (the CSV gets its header when it is new). The
/// CSV is written first: a crash between the two leaves the JSON lines, which decide a
/// resume, without the rows, so they are planned again rather than lost.
pub fn append_rows(dir: &Path, rows: &[SweepRow]) -> Result<(), StudyError> {
    let csv = dir.join(CSV);
    let mut table = String::new();
    let current = csv_header();
    // An existing file keeps its header (one written before a column was added).
    let header = first_line(&csv)?;
    if header.is_empty() {
        table.push_str(&current);
    }
    let mut lines = String::new();
    for row in rows {
        if header.is_empty() || header == current {
            table.push_str(&csv_line(row));
        } else {
            table.push_str(&csv_line_in(row, &header));
        }
        let line = serde_json::to_string(row).map_err(|e| StudyError::Settings {
            path: row.key.clone(),
            message: format!("cannot serialize the row: {e}"),
        })?;
        lines.push_str(&line);
        lines.push('\n');
    }
    append(&csv, &table)?;
    append(&dir.join(JSONL), &lines)
}
