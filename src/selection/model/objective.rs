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
//! | `weighted` | `Σ_k ranks[k]·count_k − preferred·met` (smaller wins), then the `seed-lex` levels |
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

    /// The weighted score of a solution.
    pub fn score(&self, pref_met: u64, counts: &[u64]) -> i128 {
        let cost: i128 = counts
            .iter()
            .zip(&self.ranks)
            .map(|(&c, &w)| c as i128 * w as i128)
            .sum();
        cost - self.preferred as i128 * pref_met as i128
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

/// The objective named `name` (`weighted` needs `weights`).
pub fn objective_by_name(
    name: &str,
    weights: Option<Weights>,
) -> Result<Box<dyn Objective>, SelectionError> {
    match (name, weights) {
        ("seed-lex", None) => Ok(Box::new(SeedLex)),
        ("max-preferred", None) => Ok(Box::new(MaxPreferred)),
        ("min-penalty", None) => Ok(Box::new(MinPenalty)),
        ("weighted", Some(w)) => Ok(Box::new(Weighted(w))),
        ("weighted", None) => Err(SelectionError::BadInput(
            "objective `weighted` needs a weights file (--weights FILE)".into(),
        )),
        ("seed-lex" | "max-preferred" | "min-penalty", Some(_)) => Err(SelectionError::BadInput(
            format!("objective `{name}` takes no weights; --weights is only for `weighted`"),
        )),
        (other, _) => Err(SelectionError::BadInput(format!(
            "unknown objective `{other}` (expected seed-lex, max-preferred, min-penalty or weighted)"
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
                    w.score(ma, &a.counts).cmp(&w.score(mb, &b.counts))
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
