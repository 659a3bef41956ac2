//! Progress of long commands on standard error: a spinner naming the current stage and the
//! elapsed time, drawn with indicatif only when standard error is a terminal (never in
//! pipes, files or tests, where it would corrupt captured output).

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use jointplan::builder::{BuildObserver, BuildStage};

/// A stage spinner for one command; cleared when dropped, so errors print on a clean line.
#[derive(Debug)]
pub struct Progress {
    bar: ProgressBar,
    command: &'static str,
}

impl Progress {
    /// A spinner for `command` on standard error if it is a terminal, a hidden one otherwise.
    pub fn start(command: &'static str) -> Self {
        let bar = if std::io::stderr().is_terminal() {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            if let Ok(style) =
                ProgressStyle::default_spinner().template("{spinner} {msg} [{elapsed}]")
            {
                bar.set_style(style);
            }
            bar.set_message(command);
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        } else {
            ProgressBar::hidden()
        };
        Self { bar, command }
    }

    /// Shows `what` as the current step (`reading request.json`).
    pub fn step(&self, what: &str) {
        self.bar.set_message(format!("{}: {what}", self.command));
    }

    /// An observer of plan building that shows each build stage as the current step.
    pub fn observer(&self) -> Arc<dyn BuildObserver> {
        let bar = self.bar.clone();
        let command = self.command;
        Arc::new(move |stage: BuildStage| bar.set_message(format!("{command}: {stage}")))
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}
