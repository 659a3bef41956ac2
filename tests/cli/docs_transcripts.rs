//! The command transcripts of README.md and docs/ are what the binary prints today.
//!
//! A transcript is a fenced `text` block whose first line is `$ jointplan ARGS` (a line
//! ending in `\` continues on the next), or a `text` block that follows a `sh` block of one
//! command, `cargo run --release -- ARGS` or `jointplan ARGS`. Each is run from a working
//! folder of its own file (one per document, with `models/` and `docs/` linked in, so a file
//! one transcript writes is there for the next), and its lines must appear, in order, in what
//! the command printed (standard output, then standard error):
//!
//! * the first line may match any printed line (what comes before it, such as a warning on
//!   standard error, is skipped);
//! * a line `...` (indented or not) skips any number of printed lines;
//! * within a line, `...` stands for any text (`component 0 ... is infeasible: ...`,
//!   `plan/sha256/037bf192acb2...`);
//! * every other character matches exactly (trailing spaces ignored), and lines not
//!   separated by `...` must be consecutive.
//!
//! So a figure quoted in the docs cannot go stale: when the output changes, this test names
//! the document, the line and what the binary printed instead.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One transcript: where it is and what it runs and expects.
struct Transcript {
    file: PathBuf,
    line: usize,
    args: Vec<String>,
    expected: Vec<String>,
}

fn documents(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md")];
    let mut stack = vec![root.join("docs")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("docs/ is readable") {
            let path = entry.expect("a docs entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Splits a shell command line into words (double and single quotes, no expansions).
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in line.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => word.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                any = true;
            }
            None if c.is_whitespace() => {
                if any || !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
                any = false;
            }
            None => word.push(c),
        }
    }
    if any || !word.is_empty() {
        out.push(word);
    }
    out
}

/// The arguments of a documented command line, if it runs jointplan.
fn jointplan_args(command: &str) -> Option<Vec<String>> {
    let command = command.split(" #").next().unwrap_or(command).trim();
    let rest = command
        .strip_prefix("cargo run --release -- ")
        .or_else(|| command.strip_prefix("jointplan "))?;
    Some(words(rest))
}

fn transcripts(file: &Path) -> Vec<Transcript> {
    let text = std::fs::read_to_string(file).expect("a document is readable");
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    // The single command of the last `sh` block, while no other text follows it.
    let mut pending: Option<Vec<String>> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim_end();
        if let Some(lang) = line.strip_prefix("```") {
            let lang = lang.trim().to_owned();
            let start = i + 1;
            let mut end = start;
            while end < lines.len() && !lines[end].trim_end().starts_with("```") {
                end += 1;
            }
            let body: Vec<&str> = lines[start..end.min(lines.len())].to_vec();
            if lang == "sh" {
                let commands: Vec<&str> = body
                    .iter()
                    .copied()
                    .filter(|l| !l.trim().is_empty())
                    .collect();
                pending = match commands.as_slice() {
                    [one] => jointplan_args(one),
                    _ => None,
                };
            } else if lang == "text" {
                if let Some(first) = body.first().and_then(|l| l.strip_prefix("$ jointplan ")) {
                    let mut command = first.trim_end().to_owned();
                    let mut k = 1;
                    while command.ends_with('\\') && k < body.len() {
                        command.pop();
                        command.push(' ');
                        command.push_str(body[k].trim());
                        k += 1;
                    }
                    out.push(Transcript {
                        file: file.to_owned(),
                        line: start + 1,
                        args: words(&command),
                        expected: body[k..].iter().map(|l| l.to_string()).collect(),
                    });
                } else if let Some(args) = pending.take() {
                    out.push(Transcript {
                        file: file.to_owned(),
                        line: start + 1,
                        args,
                        expected: body.iter().map(|l| l.to_string()).collect(),
                    });
                }
                pending = None;
            } else {
                pending = None;
            }
            i = end + 1;
            continue;
        }
        if !line.trim().is_empty() {
            pending = None;
        }
        i += 1;
    }
    out
}

/// Where the expected lines first fail to match the printed ones (`None`: they match).
fn mismatch(expected: &[String], printed: &[&str]) -> Option<String> {
    let mut at = 0; // the next printed line
    let mut may_skip = true;
    for (n, want) in expected.iter().enumerate() {
        let want = want.trim_end();
        if want.trim() == "..." {
            may_skip = true;
            continue;
        }
        let matches = |got: &str| glob(want, got.trim_end());
        let found = if may_skip {
            (at..printed.len()).find(|&k| matches(printed[k]))
        } else {
            (at < printed.len() && matches(printed[at])).then_some(at)
        };
        match found {
            Some(k) => at = k + 1,
            None => {
                let got = printed.get(at).copied().unwrap_or("<end of output>");
                return Some(format!(
                    "expected line {} of the block:\n  {want}\nprinted instead:\n  {got}",
                    n + 1
                ));
            }
        }
        may_skip = false;
    }
    None
}

/// Whether `got` matches `want`, where `...` in `want` stands for any text.
fn glob(want: &str, got: &str) -> bool {
    let parts: Vec<&str> = want.split("...").collect();
    if parts.len() == 1 {
        return want == got;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !got.starts_with(first) || got.len() < first.len() + last.len() || !got.ends_with(last) {
        return false;
    }
    let mut rest = &got[first.len()..got.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(k) => rest = &rest[k + middle.len()..],
            None => return false,
        }
    }
    true
}

fn link(from: &Path, to: &Path) {
    #[cfg(unix)]
    std::os::unix::fs::symlink(from, to).expect("a link in the working folder");
}

#[test]
fn every_documented_transcript_is_what_the_binary_prints() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut failures = Vec::new();
    let mut count = 0;
    for file in documents(root) {
        let found = transcripts(&file);
        if found.is_empty() {
            continue;
        }
        let work = tempfile::tempdir().expect("a working folder");
        link(&root.join("models"), &work.path().join("models"));
        link(&root.join("docs"), &work.path().join("docs"));
        for t in found {
            count += 1;
            let output = Command::new(env!("CARGO_BIN_EXE_jointplan"))
                .args(&t.args)
                .current_dir(work.path())
                .env("NO_COLOR", "1")
                .output()
                .expect("the jointplan binary runs");
            let printed = format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            let lines: Vec<&str> = printed.lines().collect();
            if let Some(why) = mismatch(&t.expected, &lines) {
                failures.push(format!(
                    "{}:{} `jointplan {}`: {why}\n--- printed ---\n{printed}",
                    t.file.strip_prefix(root).unwrap_or(&t.file).display(),
                    t.line,
                    t.args.join(" ")
                ));
            }
        }
    }
    assert!(
        count >= 5,
        "only {count} transcripts found in README.md and docs/"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_matcher_skips_and_prefixes_as_documented() {
    let printed = ["a", "b 12", "c", "d"];
    let e = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(mismatch(&e(&["a", "b ...", "c"]), &printed).is_none());
    assert!(mismatch(&e(&["a", "...", "d"]), &printed).is_none());
    assert!(
        mismatch(&e(&["c", "d"]), &printed).is_none(),
        "the first line may match anywhere"
    );
    assert!(
        mismatch(&e(&["a", "c"]), &printed).is_some(),
        "lines must be consecutive"
    );
    assert!(mismatch(&e(&["b 13"]), &printed).is_some());
    assert!(mismatch(&e(&["...", "e"]), &printed).is_some());
    assert!(glob("x ... y ... z", "x 1 y 2 z"));
    assert!(!glob("x ... y ... z", "x 1 z 2 y"));
    assert!(glob("ab...", "abc") && !glob("ab...", "a"));
    assert_eq!(words("plan 'a b' \"c\" d"), ["plan", "a b", "c", "d"]);
}
