//! The `jointplan` binary run as a process, for the command-line tests.

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
