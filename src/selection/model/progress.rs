//! Progress events of a running solve, for displays of long solves.
//!
//! A solve tells an optional [`SolveObserver`] (in [`super::SolveOptions`])
//! what it is doing: how many parts presolve left for the exact solvers,
//! which part starts, each level solve of the integer program as it begins
//! (with the incumbent's value on that level's objective and a lower bound)
//! and as it ends (with the value found, the backend's bound and whether it
//! is proved optimal), the provider-id search, and each finished part and
//! component. The observer only watches: every event is computed from values
//! the solve has anyway, nothing reads it back, and a solve with an observer
//! returns the same solution, byte for byte, as one without.
//!
//! Why the events are per level solve and not inside one: microlp reports
//! nothing while one branch-and-bound call runs. It could be driven in slices
//! (stop at a time or node limit, read the incumbent and bound, resume), but
//! an interrupted dive restarts from the best open node, so slicing re-orders
//! the search. A level can have several optima; a different one changes the
//! incumbent shortcuts of the later levels and with them the solve count in
//! the certificate, so progress would change the output. A display shows the
//! elapsed time of the level being solved instead.
//!
//! Events come from the worker threads of the solve, in parallel; the order
//! within one part is the order of its solve, and every part event comes
//! before the first [`SolveProgress::ComponentFinished`].

use std::fmt;
use std::sync::Arc;

use crate::selection::exact::backend::{RawError, RawSolution};
use crate::selection::model::objective::Level;
use crate::selection::model::solution::Status;

/// One event of a running solve.
#[derive(Debug, Clone, PartialEq)]
pub enum SolveProgress {
    /// Presolve has run on every component: `parts` parts (identical parts
    /// counted once) go to the exact solvers, numbered `0..parts`.
    Queued {
        /// Components of the problem.
        components: usize,
        /// Parts queued for the exact solvers.
        parts: usize,
    },
    /// A part's solve begins.
    PartStarted {
        /// The part's number among the queued parts.
        part: usize,
        /// Its nodes.
        nodes: usize,
    },
    /// One integer-program solve begins (one level, or one chunk of a
    /// node-order level).
    LevelStarted {
        /// The part being solved.
        part: usize,
        /// The level (`None`: the feasibility solve of a part whose levels
        /// are all constant).
        level: Option<Level>,
        /// The number of this solve within the part's integer program (from 1).
        solve: usize,
        /// The incumbent's value on this solve's objective, when one is known.
        incumbent: Option<f64>,
        /// A lower bound on the objective: fixed variables at their value,
        /// every free one at its cheaper end.
        bound: f64,
    },
    /// That solve ended.
    LevelSolved {
        /// The part being solved.
        part: usize,
        /// The level, as in [`SolveProgress::LevelStarted`].
        level: Option<Level>,
        /// The number of the solve within the part's integer program.
        solve: usize,
        /// The value of the best solution on the solve's objective (`None`:
        /// infeasible, or a limit before any solution).
        value: Option<f64>,
        /// The backend's proven lower bound, where it has one.
        bound: Option<f64>,
        /// Whether the value is proved optimal.
        optimal: bool,
    },
    /// The provider-id level of a part goes to the depth-first search.
    ProviderSearch {
        /// The part being solved.
        part: usize,
    },
    /// A part's solve ended.
    PartFinished {
        /// The part's number among the queued parts.
        part: usize,
    },
    /// A component's answer is assembled and re-checked.
    ComponentFinished {
        /// The component's number (component order).
        component: usize,
        /// Its nodes.
        nodes: usize,
        /// Whether its answer is proved optimal.
        status: Status,
    },
}

/// Watches a solve: called with every [`SolveProgress`] event, from the
/// solve's worker threads. It cannot change the solve.
#[derive(Clone)]
pub struct SolveObserver(Arc<dyn Fn(&SolveProgress) + Send + Sync>);

impl SolveObserver {
    /// An observer calling `f` with every event.
    pub fn new(f: impl Fn(&SolveProgress) + Send + Sync + 'static) -> Self {
        SolveObserver(Arc::new(f))
    }

    /// Tells the observer about `event`.
    pub(crate) fn report(&self, event: &SolveProgress) {
        (self.0)(event);
    }
}

impl fmt::Debug for SolveObserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SolveObserver(..)")
    }
}

/// The observer of one part's solve, with the part's number: what the
/// integer program and the provider-id search report to.
#[derive(Debug, Clone)]
pub(crate) struct PartReporter {
    /// The solve's observer.
    pub observer: SolveObserver,
    /// The part's number among the queued parts.
    pub part: usize,
}

impl PartReporter {
    /// A level solve begins.
    pub(crate) fn level_started(
        &self,
        level: Option<Level>,
        solve: usize,
        incumbent: Option<f64>,
        bound: f64,
    ) {
        self.observer.report(&SolveProgress::LevelStarted {
            part: self.part,
            level,
            solve,
            incumbent,
            bound,
        });
    }

    /// A level solve ended with `result`; `value_of` evaluates the solve's
    /// objective at the backend's variable values, `incumbent` is the value
    /// of the solution it started from.
    pub(crate) fn level_solved(
        &self,
        level: Option<Level>,
        solve: usize,
        result: &Result<RawSolution, RawError>,
        value_of: impl Fn(&[f64]) -> f64,
        incumbent: Option<f64>,
    ) {
        let (value, bound, optimal) = match result {
            Ok(raw) => (Some(value_of(&raw.values)), raw.bound, raw.optimal),
            Err(RawError::Infeasible) => (None, None, true),
            Err(RawError::Limit(bound)) => (incumbent, *bound, false),
            Err(RawError::Other(_)) => (incumbent, None, false),
        };
        self.observer.report(&SolveProgress::LevelSolved {
            part: self.part,
            level,
            solve,
            value,
            bound,
            optimal,
        });
    }

    /// The provider-id search of the part begins.
    pub(crate) fn provider_search(&self) {
        self.observer
            .report(&SolveProgress::ProviderSearch { part: self.part });
    }
}

/// A level's name in progress displays: `preferred (node order)`,
/// `preferred count`, `rank-K count`, `weighted sum` (also the grouped
/// count levels, which are solved as one weighted sum), `provider ids`.
impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Level::PreferredLex => f.write_str("preferred (node order)"),
            Level::PreferredCount => f.write_str("preferred count"),
            Level::RankCount(k) => write!(f, "rank-{k} count"),
            Level::Weighted => f.write_str("weighted sum"),
            Level::ProviderLex => f.write_str("provider ids"),
        }
    }
}
