//! The progress line of `jointplan solve`: never on a standard error that is not a terminal,
//! shown on a terminal once a solve runs over a second, and never a byte of difference in the
//! answer.

use std::path::Path;
use std::process::{Command, Output};

fn jointplan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_jointplan"))
        .args(args)
        .output()
        .expect("the binary runs")
}

/// A weights file for `weighted` (four profiles) under which long-range sharing with every
/// node preferred is hard without the dual bound's reduced costs: the worst rank costs nine
/// times the second, a met preference five. With `--without reduced-costs` the integer
/// program runs on a wide part and stops at its limit.
fn weights(dir: &Path) -> String {
    let path = dir.join("weights.json");
    std::fs::write(&path, r#"{"preferred": 5, "ranks": [0, 1, 3, 9]}"#).unwrap();
    path.to_string_lossy().into_owned()
}

fn generate(dir: &Path, spec: &str) -> String {
    let path = dir.join(format!("{}.json", spec.replace(':', "_")));
    let path = path.to_string_lossy().into_owned();
    let out = jointplan(&["solve", "--generate", spec, &path]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    path
}

#[test]
fn a_long_solve_writes_no_progress_bytes_to_a_pipe() {
    let dir = tempfile::tempdir().unwrap();
    // weighted with these weights on this instance (every node preferred), without the dual
    // bound, runs into its time limit, well past the second after which a terminal would show
    // the progress line.
    let p = generate(dir.path(), "long-range:3000:1:4:100");
    let w = weights(dir.path());
    let out = jointplan(&[
        "solve",
        &p,
        "--objective",
        "weighted",
        "--weights",
        &w,
        "--without",
        "reduced-costs",
        "--time-limit",
        "2",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        out.stderr.is_empty(),
        "standard error (a pipe) got {:?}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert_eq!(v["status"], "feasible");
    assert!(
        !out.stdout.contains(&0x1b),
        "an escape sequence in the answer"
    );
}

/// Runs `command` with a pseudo-terminal as its standard error (util-linux `script`), and
/// returns the terminal transcript; `None` where `script` is not installed.
fn on_a_terminal(command: &str, dir: &Path) -> Option<String> {
    let transcript = dir.join("transcript");
    let out = Command::new("script")
        .args(["-q", "-e", "-c", command])
        .arg(&transcript)
        .output()
        .ok()?;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    Some(String::from_utf8_lossy(&std::fs::read(&transcript).unwrap()).into_owned())
}

#[test]
fn on_a_terminal_progress_is_shown_and_the_answer_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_jointplan");
    // The integer program runs (no preferences), so the observer receives level solves.
    let quick = generate(dir.path(), "long-range:300:1:4:0");
    let piped = jointplan(&["solve", &quick, "--no-timings"]);
    assert_eq!(piped.status.code(), Some(0), "{piped:?}");
    let answer = dir.path().join("answer.json");
    let command = format!("{bin} solve {quick} --no-timings > {}", answer.display());
    let Some(_) = on_a_terminal(&command, dir.path()) else {
        eprintln!("skipped: util-linux `script` is not installed (no pseudo-terminal)");
        return;
    };
    let watched = std::fs::read(&answer).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&watched),
        String::from_utf8_lossy(&piped.stdout),
        "the answer on a terminal differs from the piped one"
    );

    // A solve stopped by a 2 s limit runs past the first second: the line appears, naming
    // the elapsed time, the parts and the level being solved.
    let hard = generate(dir.path(), "long-range:3000:1:4:100");
    let w = weights(dir.path());
    let command = format!(
        "{bin} solve {hard} --objective weighted --weights {w} --without reduced-costs --time-limit 2 > {}",
        dir.path().join("hard.json").display()
    );
    let transcript = on_a_terminal(&command, dir.path()).unwrap();
    assert!(
        transcript.contains("solve [0:01] selection:"),
        "no progress line on the terminal: {transcript:?}"
    );
    assert!(transcript.contains(" parts"), "{transcript:?}");
    assert!(
        transcript.contains(" #"),
        "no level solve shown: {transcript:?}"
    );
}
