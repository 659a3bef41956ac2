//! Objective variants behind one trait.
//!
//! Every objective is a lexicographic sequence of [`Level`]s; solutions are
//! compared level by level and the first level that differs decides. Each
//! level is exact integer arithmetic (or a lexicographic comparison of
//! sequences); no floating point is involved in comparing two solutions.
//!
//! | name | levels |
//! | --- | --- |
//! | `seed-lex` (default) | preferred in node order (lexicographic), rank counts from the worst rank down to rank 1, provider ids in node order |
//! | `max-preferred` | number of preferences met (more wins), rank counts worst first, provider ids |
//! | `min-penalty` | rank counts worst first, preferred in node order, provider ids |
//! | `weighted` | `Σ_k ranks[k]·count_k − preferred·met (+ Σ_m time[m]·T_m)` (smaller wins), then the `seed-lex` levels |
//! | `min-tpot`, `min-ttft`, `max-throughput` | the time `T_m` of metric `tpot`, `ttft` or `throughput` (smaller wins), then the `seed-lex` levels |
//!
//! A time `T_m` is the sum of the chosen candidates' time costs of metric `m` and of each
//! used resource's cost at its profile (`problem.rs`), integer picoseconds. A time objective
//! is the weighted level with every rank and preference weight zero and one time weight: its
//! time is folded into each candidate's and resource's cost when the problem is indexed
//! ([`TimeWeights::combine`]), so every method prices it as one more additive term of the
//! weighted level, exact in integers.
//!
//! Provider ids are compared as byte strings; within a node the candidates
//! are sorted by provider id, so comparing candidate indices is the same.

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::selection::error::SelectionError;
use crate::selection::reduce::components::Score;

/// One lexicographic level of an objective.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Preferred flags in node order; the first node where exactly one
    /// solution meets its preference decides for that solution.
    PreferredLex,
    /// Number of nodes whose preference is met; more wins.
    PreferredCount,
    /// Number of used resources whose profile has this rank; fewer wins.
    RankCount(usize),
    /// The weighted score of [`Weights`]; smaller wins.
    Weighted,
    /// Chosen provider ids in node order, as byte strings; smaller wins.
    ProviderLex,
}

/// User weights of the `weighted` objective (`--weights FILE`).
///
/// The score, minimised, is `Σ_k ranks[k] · (resources at rank k) −
/// preferred · (preferences met)`. Weights are non-negative integers and
/// `ranks` must be non-decreasing (a worse rank never costs less): this keeps
/// "the lowest rank in the intersection" the cheapest profile, which both the
/// problem definition and every presolve step rely on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Weights {
    /// Reward for each node whose preferred provider is chosen.
    pub preferred: u32,
    /// Cost of one resource at each rank; one entry per profile.
    pub ranks: Vec<u32>,
    /// Weights of the time metrics (per picosecond); absent: the score has no time term.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<TimeWeights>,
}

/// Weights of the time metrics in a weighted level: each picosecond of metric `m` costs
/// `m`'s weight. Absent keys weigh 0.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimeWeights {
    /// Weight of the `tpot` time (one decode step).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tpot: u32,
    /// Weight of the `ttft` time (one prompt's prefill).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ttft: u32,
    /// Weight of the `throughput` time (the device time per served batch).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub throughput: u32,
}

fn is_zero(x: &u32) -> bool {
    *x == 0
}

/// The largest possible combined time of a solution (every node at its dearest candidate,
/// every resource at its dearest profile, picoseconds times weights): every partial sum of
/// a method then stays far inside `i64`.
pub const MAX_TIME_EXTENT: u64 = 1 << 60;

impl TimeWeights {
    /// Only `metric` with weight 1.
    pub fn only(metric: TimeMetric) -> TimeWeights {
        let mut t = TimeWeights::default();
        match metric {
            TimeMetric::Tpot => t.tpot = 1,
            TimeMetric::Ttft => t.ttft = 1,
            TimeMetric::Throughput => t.throughput = 1,
        }
        t
    }

    /// `Σ_m weight[m] · costs[m]` in checked arithmetic; `None` when it exceeds
    /// [`MAX_TIME_EXTENT`].
    pub fn combine(&self, costs: &super::problem::TimeCosts) -> Option<u64> {
        let mut total = 0u64;
        for (w, c) in [
            (self.tpot, costs.tpot),
            (self.ttft, costs.ttft),
            (self.throughput, costs.throughput),
        ] {
            let term = u64::from(w).checked_mul(c.unwrap_or(0))?;
            total = total.checked_add(term)?;
        }
        (total <= MAX_TIME_EXTENT).then_some(total)
    }
}

/// A time metric of the selection problem's time costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TimeMetric {
    /// One decode step at the serving point (time per output token).
    Tpot,
    /// One prompt's prefill (time to first token).
    Ttft,
    /// The device time to serve one batch of requests (throughput's reciprocal).
    Throughput,
}

impl TimeMetric {
    /// The metric's key in the problem format (`tpot`, `ttft`, `throughput`).
    pub fn key(self) -> &'static str {
        match self {
            TimeMetric::Tpot => "tpot",
            TimeMetric::Ttft => "ttft",
            TimeMetric::Throughput => "throughput",
        }
    }

    /// The objective that minimises the metric.
    pub fn objective_name(self) -> &'static str {
        match self {
            TimeMetric::Tpot => "min-tpot",
            TimeMetric::Ttft => "min-ttft",
            TimeMetric::Throughput => "max-throughput",
        }
    }

    /// The metric a time objective minimises, by the objective's name.
    pub fn of_objective(name: &str) -> Option<TimeMetric> {
        [TimeMetric::Tpot, TimeMetric::Ttft, TimeMetric::Throughput]
            .into_iter()
            .find(|m| m.objective_name() == name)
    }
}

impl Weights {
    /// Parses weights from JSON text (errors carry the JSON path).
    pub fn from_json_str(text: &str) -> Result<Self, SelectionError> {
        crate::json_input::parse_strict(text).map_err(|e| {
            SelectionError::BadInput(format!(
                "invalid weights JSON at `{}`: {}",
                e.json_path, e.message
            ))
        })
    }

    /// Checks the weights against the number of profiles.
    pub fn validate(&self, profiles: usize) -> Result<(), SelectionError> {
        if self.ranks.len() != profiles {
            return Err(SelectionError::BadInput(format!(
                "weights: `ranks` has {} entries but the problem has {profiles} profiles",
                self.ranks.len()
            )));
        }
        if let Some(k) = (1..self.ranks.len()).find(|&k| self.ranks[k] < self.ranks[k - 1]) {
            return Err(SelectionError::BadInput(format!(
                "weights: `ranks[{k}]` = {} is smaller than `ranks[{}]` = {}; rank weights must not decrease",
                self.ranks[k],
                k - 1,
                self.ranks[k - 1]
            )));
        }
        Ok(())
    }

    /// The weighted score of a solution without its time term.
    pub fn score(&self, pref_met: u64, counts: &[u64]) -> i128 {
        let cost: i128 = counts
            .iter()
            .zip(&self.ranks)
            .map(|(&c, &w)| c as i128 * w as i128)
            .sum();
        cost - self.preferred as i128 * pref_met as i128
    }

    /// The weighted score with the solution's combined time (`time`, already weighted by
    /// [`TimeWeights::combine`]) when the weights have a time term.
    pub fn score_with_time(&self, pref_met: u64, counts: &[u64], time: i128) -> i128 {
        self.score(pref_met, counts) + if self.time.is_some() { time } else { 0 }
    }

    /// Whether the score has a time term.
    pub fn has_time(&self) -> bool {
        self.time.is_some()
    }

    /// The weights of a time objective: only `metric`'s time.
    pub fn time_only(metric: TimeMetric, profiles: usize) -> Weights {
        Weights {
            preferred: 0,
            ranks: vec![0; profiles],
            time: Some(TimeWeights::only(metric)),
        }
    }
}

/// An objective: a lexicographic sequence of levels.
pub trait Objective: Send + Sync + fmt::Debug {
    /// The name used by `--objective` and in the output.
    fn name(&self) -> &'static str;
    /// The levels, most significant first, for a problem with `profiles`
    /// profiles.
    fn levels(&self, profiles: usize) -> Vec<Level>;
    /// The weights of the `weighted` level, if the objective has one.
    fn weights(&self) -> Option<&Weights> {
        None
    }
    /// Whether a used resource at rank 0 is free under this objective.
    fn rank0_free(&self) -> bool {
        self.weights().is_none_or(|w| w.ranks.first() == Some(&0))
    }
    /// The weights of the weighted level for a problem of `profiles` profiles (the user's
    /// weights as given; a time objective's sized to the problem).
    fn weights_for(&self, profiles: usize) -> Option<Weights> {
        let _ = profiles;
        self.weights().cloned()
    }
    /// The time weights, when the objective has a time term.
    fn time_weights(&self) -> Option<TimeWeights> {
        self.weights().and_then(|w| w.time.clone())
    }
}

/// The rank-count levels from the worst rank down to rank 1.
fn penalty_levels(profiles: usize) -> impl Iterator<Item = Level> {
    (1..profiles).rev().map(Level::RankCount)
}

/// `seed-lex`: the objective of the specification.
#[derive(Debug, Clone, Copy, Default)]
pub struct SeedLex;
impl Objective for SeedLex {
    fn name(&self) -> &'static str {
        "seed-lex"
    }
    fn levels(&self, profiles: usize) -> Vec<Level> {
        let mut v = vec![Level::PreferredLex];
        v.extend(penalty_levels(profiles));
        v.push(Level::ProviderLex);
        v
    }
}

/// `max-preferred`: count of preferences met, then penalty, then provider ids.
#[derive(Debug, Clone, Copy, Default)]
pub struct MaxPreferred;
impl Objective for MaxPreferred {
    fn name(&self) -> &'static str {
        "max-preferred"
    }
    fn levels(&self, profiles: usize) -> Vec<Level> {
        let mut v = vec![Level::PreferredCount];
        v.extend(penalty_levels(profiles));
        v.push(Level::ProviderLex);
        v
    }
}

/// `min-penalty`: penalty first, then preferences in node order, then ids.
#[derive(Debug, Clone, Copy, Default)]
pub struct MinPenalty;
impl Objective for MinPenalty {
    fn name(&self) -> &'static str {
        "min-penalty"
    }
    fn levels(&self, profiles: usize) -> Vec<Level> {
        let mut v: Vec<Level> = penalty_levels(profiles).collect();
        v.push(Level::PreferredLex);
        v.push(Level::ProviderLex);
        v
    }
}

/// `weighted`: the weighted score, ties broken by `seed-lex`.
#[derive(Debug, Clone)]
pub struct Weighted(pub Weights);
impl Objective for Weighted {
    fn name(&self) -> &'static str {
        "weighted"
    }
    fn levels(&self, profiles: usize) -> Vec<Level> {
        let mut v = vec![Level::Weighted];
        v.extend(SeedLex.levels(profiles));
        v
    }
    fn weights(&self) -> Option<&Weights> {
        Some(&self.0)
    }
}

/// `min-tpot`, `min-ttft`, `max-throughput`: one metric's time, ties broken by `seed-lex`.
///
/// Its weights are those of [`Weights::time_only`]; the rank weights are sized to the
/// problem when it is solved ([`Objective::weights_for`]).
///
/// It has no user weights ([`Objective::weights`] is `None`, nothing to record in a plan).
#[derive(Debug, Clone, Copy)]
pub struct MinTime {
    metric: TimeMetric,
}

impl MinTime {
    /// The objective minimising `metric`.
    pub fn new(metric: TimeMetric) -> MinTime {
        MinTime { metric }
    }

    /// The metric minimised.
    pub fn metric(&self) -> TimeMetric {
        self.metric
    }
}

impl Objective for MinTime {
    fn name(&self) -> &'static str {
        self.metric.objective_name()
    }
    fn levels(&self, profiles: usize) -> Vec<Level> {
        let mut v = vec![Level::Weighted];
        v.extend(SeedLex.levels(profiles));
        v
    }
    fn rank0_free(&self) -> bool {
        true
    }
    fn time_weights(&self) -> Option<TimeWeights> {
        Some(TimeWeights::only(self.metric))
    }
    fn weights_for(&self, profiles: usize) -> Option<Weights> {
        Some(Weights::time_only(self.metric, profiles))
    }
}

/// The objective named `name` (`weighted` needs `weights`).
pub fn objective_by_name(
    name: &str,
    weights: Option<Weights>,
) -> Result<Box<dyn Objective>, SelectionError> {
    if let (Some(metric), None) = (TimeMetric::of_objective(name), &weights) {
        return Ok(Box::new(MinTime::new(metric)));
    }
    match (name, weights) {
        ("seed-lex", None) => Ok(Box::new(SeedLex)),
        ("max-preferred", None) => Ok(Box::new(MaxPreferred)),
        ("min-penalty", None) => Ok(Box::new(MinPenalty)),
        ("weighted", Some(w)) => Ok(Box::new(Weighted(w))),
        ("weighted", None) => Err(SelectionError::BadInput(
            "objective `weighted` needs a weights file (--weights FILE)".into(),
        )),
        (
            "seed-lex" | "max-preferred" | "min-penalty" | "min-tpot" | "min-ttft"
            | "max-throughput",
            Some(_),
        ) => Err(SelectionError::BadInput(format!(
            "objective `{name}` takes no weights; --weights is only for `weighted`"
        ))),
        (other, _) => Err(SelectionError::BadInput(format!(
            "unknown objective `{other}` (expected seed-lex, max-preferred, min-penalty, weighted, min-tpot, min-ttft or max-throughput)"
        ))),
    }
}

/// Compares two preferred vectors: `Less` means `a` is better.
pub(crate) fn cmp_pref_lex(a: &[bool], b: &[bool]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        if x != y {
            return if *x {
                Ordering::Less
            } else {
                Ordering::Greater
            };
        }
    }
    a.len().cmp(&b.len())
}

/// Compares two complete scores under `levels`: `Less` means `a` is better.
pub(crate) fn compare_scores(
    levels: &[Level],
    weights: Option<&Weights>,
    a: &Score,
    b: &Score,
) -> Ordering {
    for level in levels {
        let o = match *level {
            Level::PreferredLex => cmp_pref_lex(&a.pref, &b.pref),
            Level::PreferredCount => {
                let ca = a.pref.iter().filter(|&&p| p).count();
                let cb = b.pref.iter().filter(|&&p| p).count();
                cb.cmp(&ca)
            }
            Level::RankCount(k) => a.counts[k].cmp(&b.counts[k]),
            Level::Weighted => match weights {
                Some(w) => {
                    let ma = a.pref.iter().filter(|&&p| p).count() as u64;
                    let mb = b.pref.iter().filter(|&&p| p).count() as u64;
                    w.score_with_time(ma, &a.counts, a.time)
                        .cmp(&w.score_with_time(mb, &b.counts, b.time))
                }
                None => Ordering::Equal,
            },
            Level::ProviderLex => a.ids.cmp(&b.ids),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}
