//! `jointplan sweep --shard I/N` and `--merge`: shards of a grid, concatenated in shard
//! order (or merged), give exactly the unsharded sweep's rows and CSV lines; only the wall
//! time of each plan (`plan_seconds`) differs between runs, and is masked.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::process::{jointplan, ok, s, text};

fn models() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models")
}

/// A grid of seven one-layer points (seven contexts).
fn grid(dir: &Path) -> PathBuf {
    let grid = dir.join("grid.json");
    std::fs::write(
        &grid,
        serde_json::json!({
            "model": [models().join("llama-3.2-1b")],
            "layers": [1],
            "context": [512, 1024, 1536, 2048, 3072, 4096, 8192],
        })
        .to_string(),
    )
    .unwrap();
    grid
}

fn sweep(grid: &Path, out: &Path, extra: &[&str]) {
    let mut args = vec!["sweep", &s(grid), "-o", &s(out), "--jobs", "1"]
        .into_iter()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(&jointplan(&args));
}

/// The JSON lines of a file with `plan_seconds` removed.
fn rows_masked(text: &str) -> Vec<Value> {
    text.lines()
        .map(|line| {
            let mut row: Value = serde_json::from_str(line).unwrap();
            row.as_object_mut().unwrap().remove("plan_seconds");
            row
        })
        .collect()
}

/// The CSV lines of a file with the `plan_seconds` column emptied (the test's rows have
/// no quoted field, which the assertion checks).
fn csv_masked(text: &str) -> Vec<String> {
    let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    let column = header.iter().position(|h| *h == "plan_seconds").unwrap();
    text.lines()
        .map(|line| {
            assert!(!line.contains('"'), "{line}");
            let mut fields: Vec<&str> = line.split(',').collect();
            assert_eq!(fields.len(), header.len(), "{line}");
            if fields[column] != "plan_seconds" {
                fields[column] = "";
            }
            fields.join(",")
        })
        .collect()
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap()
}

#[test]
fn shards_concatenated_in_order_are_the_unsharded_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let grid = grid(dir.path());
    let whole = dir.path().join("whole");
    sweep(&grid, &whole, &[]);
    for count in [3usize, 10] {
        // Ten shards of seven points: three of them are empty, and still concatenate.
        let mut jsonl = String::new();
        let mut csv = String::new();
        let mut shards = Vec::new();
        for index in 0..count {
            let out = dir.path().join(format!("shard-{index}-of-{count}"));
            sweep(&grid, &out, &["--shard", &format!("{index}/{count}")]);
            jsonl.push_str(&read(&out, "results.jsonl"));
            let table = read(&out, "results.csv");
            // Concatenation keeps the first shard's header only.
            let body = if index == 0 {
                table.as_str()
            } else {
                table.split_once('\n').unwrap().1
            };
            csv.push_str(body);
            shards.push(out);
        }
        assert_eq!(
            rows_masked(&jsonl),
            rows_masked(&read(&whole, "results.jsonl")),
            "{count} shards"
        );
        assert_eq!(
            csv_masked(&csv),
            csv_masked(&read(&whole, "results.csv")),
            "{count} shards"
        );
        // --merge gives the same files, and the plots.
        let merged = dir.path().join(format!("merged-{count}"));
        let mut args = vec!["--merge".to_owned()];
        args.extend(shards.iter().map(|p| s(p)));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        sweep(&grid, &merged, &args);
        assert_eq!(
            rows_masked(&read(&merged, "results.jsonl")),
            rows_masked(&read(&whole, "results.jsonl"))
        );
        assert_eq!(
            csv_masked(&read(&merged, "results.csv")),
            csv_masked(&read(&whole, "results.csv"))
        );
        assert!(merged.join("tokens-vs-context.svg").exists());
    }
    assert_eq!(rows_masked(&read(&whole, "results.jsonl")).len(), 7);
}

#[test]
fn a_merge_skips_the_rows_already_in_the_output_and_names_a_missing_directory() {
    let dir = tempfile::tempdir().unwrap();
    let grid = grid(dir.path());
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    sweep(&grid, &a, &["--shard", "0/2"]);
    sweep(&grid, &b, &["--shard", "1/2"]);
    let merged = dir.path().join("merged");
    // b (points 3..7) first, then a (0..3) and b again: only a's three rows are new.
    sweep(&grid, &merged, &["--merge", &s(&b)]);
    let result = jointplan(&[
        "sweep",
        &s(&grid),
        "-o",
        &s(&merged),
        "--resume",
        "--merge",
        &s(&a),
        &s(&b),
    ]);
    ok(&result);
    assert!(
        text(&result.stdout).contains("3 new rows"),
        "{}",
        text(&result.stdout)
    );
    assert_eq!(rows_masked(&read(&merged, "results.jsonl")).len(), 7);
    let missing = dir.path().join("missing");
    let result = jointplan(&[
        "sweep",
        &s(&grid),
        "-o",
        &s(&dir.path().join("other")),
        "--merge",
        &s(&missing),
    ]);
    assert_eq!(result.status.code(), Some(2));
    assert!(
        text(&result.stderr).contains("missing") && text(&result.stderr).contains("results.jsonl"),
        "{}",
        text(&result.stderr)
    );
    let into_itself = jointplan(&[
        "sweep",
        &s(&grid),
        "-o",
        &s(&a),
        "--resume",
        "--merge",
        &s(&a),
    ]);
    assert_eq!(into_itself.status.code(), Some(2));
}

#[test]
fn a_bad_shard_is_refused_with_the_expected_form() {
    let dir = tempfile::tempdir().unwrap();
    let grid = grid(dir.path());
    for bad in ["3/3", "1", "a/2", "0/0", "-1/2"] {
        let result = jointplan(&[
            "sweep",
            &s(&grid),
            "-o",
            &s(&dir.path().join("out")),
            &format!("--shard={bad}"),
        ]);
        assert_eq!(result.status.code(), Some(2), "{bad}");
        assert!(
            text(&result.stderr).contains("I/N"),
            "{bad}: {}",
            text(&result.stderr)
        );
    }
    assert!(!dir.path().join("out").join("results.jsonl").exists());
}
