//! The `jointplan` binary run as a process, shared by the command-line tests.

use std::path::Path;
use std::process::{Command, Output};

/// Runs `jointplan ARGS...` and waits for it.
pub fn jointplan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_jointplan"))
        .args(args)
        .output()
        .expect("the jointplan binary runs")
}

/// Process output as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A path as an argument.
pub fn s(p: &Path) -> String {
    p.display().to_string()
}

/// The command succeeded (its output shown otherwise).
pub fn ok(result: &Output) {
    assert_eq!(
        result.status.code(),
        Some(0),
        "stderr: {}\nstdout: {}",
        text(&result.stderr),
        text(&result.stdout)
    );
}

/// Runs `jointplan ARGS...`, asserts it succeeded and reads its standard output as JSON.
pub fn ok_json(args: &[&str]) -> serde_json::Value {
    let result = jointplan(args);
    ok(&result);
    serde_json::from_slice(&result.stdout).expect("the command prints JSON")
}

/// The serving figures a `performance` object (and a sweep row's `time`) carries.
pub const SERVING_FIGURES: [&str; 5] = [
    "ttft_seconds",
    "tpot_seconds",
    "output_tokens_per_second",
    "output_tokens_per_second_per_device",
    "output_tokens_per_second_per_user",
];
