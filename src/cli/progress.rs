//! Progress of long commands on standard error: one line naming the current stage, what the
//! selection solver is doing and the elapsed time, drawn with indicatif only when standard
//! error is a terminal (never in pipes, files or tests, where it would corrupt captured
//! output).
//!
//! Events (build stages, solver progress) only update a small shared view under a mutex (the
//! solver's latest part event is kept as it is); the line is formatted from that view when
//! indicatif redraws, at most ten times a second, so a solve that reports thousands of level
//! solves a second pays for a lock and a copy, not for formatting or drawing.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

use jointplan::builder::{BuildObserver, BuildStage};
use jointplan::selection::{SolveObserver, SolveProgress};

/// Redraws per second.
const REDRAWS_PER_SECOND: u8 = 10;

/// The frames of the spinner, one per redraw tick.
const SPINNER: [char; 8] = ['⠁', '⠂', '⠄', '⡀', '⢀', '⠠', '⠐', '⠈'];

/// A progress line for one command; cleared when dropped, so errors print on a clean line.
#[derive(Debug)]
pub struct Progress {
    bar: ProgressBar,
    view: Arc<Mutex<View>>,
    /// Whether the line is drawn at all (standard error is a terminal).
    shown: bool,
}

/// What the line shows.
#[derive(Debug)]
struct View {
    command: &'static str,
    /// The current step or build stage.
    step: String,
    /// The line stays empty until the command has run this long.
    quiet_for: Duration,
    selection: SelectionView,
}

/// What the selection solver reported last, for the line.
#[derive(Debug, Default)]
struct SelectionView {
    parts: usize,
    parts_done: usize,
    components: usize,
    components_done: usize,
    /// The latest part event (start, level solve, provider-id search), formatted only when
    /// the line is drawn.
    latest: Option<SolveProgress>,
}

impl SelectionView {
    fn take(&mut self, event: &SolveProgress) {
        match event {
            SolveProgress::Queued { components, parts } => {
                self.components = *components;
                self.parts = *parts;
            }
            SolveProgress::PartFinished { .. } => self.parts_done += 1,
            SolveProgress::ComponentFinished { .. } => self.components_done += 1,
            SolveProgress::PartStarted { .. }
            | SolveProgress::LevelStarted { .. }
            | SolveProgress::LevelSolved { .. }
            | SolveProgress::ProviderSearch { .. } => self.latest = Some(event.clone()),
        }
    }

    /// The view in words, empty before the solver's first event.
    fn write(&self, out: &mut dyn std::fmt::Write) {
        if self.components == 0 {
            return;
        }
        let _ = write!(out, ": {}/{} parts", self.parts_done, self.parts);
        if self.components_done > 0 {
            let _ = write!(
                out,
                ", {}/{} components",
                self.components_done, self.components
            );
        }
        if let Some(latest) = &self.latest {
            let _ = write!(out, "; ");
            describe(latest, out);
        }
    }
}

/// A part event in words: `part 3: rank-2 count #4, incumbent 40, bound 31 (gap 23%)`.
fn describe(event: &SolveProgress, out: &mut dyn std::fmt::Write) {
    let _ = match event {
        SolveProgress::PartStarted { part, nodes } => {
            write!(out, "part {} ({nodes} nodes)", part + 1)
        }
        SolveProgress::LevelStarted {
            part,
            level,
            solve,
            incumbent,
            bound,
        } => {
            let _ = write!(out, "part {}: {} #{solve}", part + 1, level_name(level));
            match incumbent {
                Some(v) => write!(
                    out,
                    ", incumbent {v:.0}, bound {bound:.0} (gap {})",
                    gap(*v, *bound)
                ),
                None => write!(out, ", no incumbent yet, bound {bound:.0}"),
            }
        }
        SolveProgress::LevelSolved {
            part,
            level,
            solve,
            value,
            bound,
            optimal,
        } => {
            let _ = write!(out, "part {}: {} #{solve}", part + 1, level_name(level));
            match (value, optimal, bound) {
                (Some(v), true, _) => write!(out, ", optimum {v:.0}"),
                (None, true, _) => write!(out, ", infeasible"),
                (Some(v), false, Some(b)) => {
                    write!(
                        out,
                        ", stopped at {v:.0}, bound {b:.0} (gap {})",
                        gap(*v, *b)
                    )
                }
                (Some(v), false, None) => write!(out, ", stopped at {v:.0}"),
                (None, false, _) => write!(out, ", stopped without a solution"),
            }
        }
        SolveProgress::ProviderSearch { part } => {
            write!(out, "part {}: provider-id search", part + 1)
        }
        SolveProgress::Queued { .. }
        | SolveProgress::PartFinished { .. }
        | SolveProgress::ComponentFinished { .. } => Ok(()),
    };
}

/// A level's name; `None` is the feasibility solve of a part whose levels are constant.
fn level_name(level: &Option<jointplan::selection::Level>) -> String {
    match level {
        Some(l) => l.to_string(),
        None => "feasibility".into(),
    }
}

/// The relative gap of `value` against `bound` on an integer objective, as the solver
/// reports it (the bound rounded up, over `max(|value|, 1)`), in percent.
fn gap(value: f64, bound: f64) -> String {
    let lower = (bound - 1e-6).ceil();
    let g = (value - lower).max(0.0) / value.abs().max(1.0);
    format!("{:.0}%", 100.0 * g)
}

impl View {
    fn write(&self, state: &ProgressState, out: &mut dyn std::fmt::Write) {
        let elapsed = state.elapsed();
        if elapsed < self.quiet_for {
            return;
        }
        let frame = SPINNER[(elapsed.as_millis() / 100) as usize % SPINNER.len()];
        let secs = elapsed.as_secs();
        let _ = write!(
            out,
            "{frame} {} [{}:{:02}]",
            self.command,
            secs / 60,
            secs % 60
        );
        if !self.step.is_empty() {
            let _ = write!(out, " {}", self.step);
        }
        self.selection.write(out);
    }
}

/// The view, whatever a panicking holder left in it (a display never stops the command).
fn lock(view: &Mutex<View>) -> MutexGuard<'_, View> {
    view.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Progress {
    /// A progress line for `command` on standard error if it is a terminal, a hidden one
    /// otherwise.
    pub fn start(command: &'static str) -> Self {
        Self::start_quiet_for(command, Duration::ZERO)
    }

    /// Like [`Progress::start`], but the line stays empty until the command has run for
    /// `quiet_for` (a fast `solve` draws nothing).
    pub fn start_quiet_for(command: &'static str, quiet_for: Duration) -> Self {
        let view = Arc::new(Mutex::new(View {
            command,
            step: String::new(),
            quiet_for,
            selection: SelectionView::default(),
        }));
        let shown = std::io::stderr().is_terminal();
        let bar = if shown {
            let bar = ProgressBar::with_draw_target(
                None,
                ProgressDrawTarget::stderr_with_hz(REDRAWS_PER_SECOND),
            );
            let drawn = Arc::clone(&view);
            if let Ok(style) = ProgressStyle::default_spinner()
                .template("{line}")
                .map(|s| {
                    s.with_key(
                        "line",
                        move |state: &ProgressState, out: &mut dyn std::fmt::Write| {
                            lock(&drawn).write(state, out)
                        },
                    )
                })
            {
                bar.set_style(style);
            }
            bar.enable_steady_tick(Duration::from_millis(1000 / u64::from(REDRAWS_PER_SECOND)));
            bar
        } else {
            ProgressBar::hidden()
        };
        Self { bar, view, shown }
    }

    /// Shows `what` as the current step (`reading request.json`).
    pub fn step(&self, what: &str) {
        lock(&self.view).step = what.to_string();
    }

    /// An observer of plan building that shows each build stage as the current step.
    pub fn observer(&self) -> Arc<dyn BuildObserver> {
        let view = Arc::clone(&self.view);
        Arc::new(move |stage: BuildStage| {
            let mut view = lock(&view);
            view.step = stage.to_string();
            view.selection = SelectionView::default();
        })
    }

    /// An observer of the selection solver that shows the part and level being solved, the
    /// incumbent, the bound and how many parts and components are done; `None` when the line
    /// is not drawn (standard error is not a terminal), so the solve reports to nobody.
    pub fn solve_observer(&self) -> Option<SolveObserver> {
        if !self.shown {
            return None;
        }
        let view = Arc::clone(&self.view);
        Some(SolveObserver::new(move |event: &SolveProgress| {
            lock(&view).selection.take(event)
        }))
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}
