//! Random selection instances shared by the selection property tests
//! (`selection_props`, and `selection_highs` with the `highs` feature),
//! included by path so that those tests do not build the request fixtures.
#![allow(dead_code)]

use jointplan::selection::instances::{self, Params};
use std::sync::Arc;

use jointplan::selection::{
    MaxPreferred, MinPenalty, Objective, SeedLex, SelectionProblem, Weighted, Weights,
};
use proptest::prelude::*;

/// The case count, scaled by `SELECTION_CASES_PERCENT` (default 100).
pub fn cases(default: u32) -> u32 {
    let pct: u32 = std::env::var("SELECTION_CASES_PERCENT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    (default * pct / 100).max(1)
}

/// The generator families.
#[derive(Debug, Clone)]
pub enum Shape {
    /// `instances::chain`.
    Chain,
    /// `instances::residual_stream`.
    Residual,
    /// `instances::long_range` with sharing probability 0.5.
    LongRange,
    /// `instances::repeated_layers`.
    Layers,
}

/// Any shape, uniformly.
pub fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        Just(Shape::Chain),
        Just(Shape::Residual),
        Just(Shape::LongRange),
        Just(Shape::Layers)
    ]
}

/// Random candidate parameters: 1-4 profiles, 1-3 candidates, sometimes
/// workspaces, empty accepted lists and no fallback.
pub fn params() -> impl Strategy<Value = Params> {
    (
        1usize..=4,
        1usize..=3,
        0.0f64..1.0,
        prop_oneof![Just(0.0), 0.0f64..0.6],
        prop_oneof![Just(0.0), Just(0.0), 0.0f64..0.2],
        0.2f64..0.8,
        any::<bool>(),
    )
        .prop_map(|(profiles, maxc, pref, ws, empty, acc, fallback)| Params {
            profiles,
            min_candidates: 1,
            max_candidates: maxc,
            preferred_prob: pref,
            workspace_prob: ws,
            empty_prob: empty,
            accept_prob: acc,
            fallback,
        })
}

/// The instance of `shape` with `n` nodes.
pub fn build(shape: &Shape, n: usize, params: &Params, seed: u64) -> SelectionProblem {
    match shape {
        Shape::Chain => instances::chain(n, params, seed),
        Shape::Residual => instances::residual_stream(n, params, seed),
        Shape::LongRange => instances::long_range(n, 0.5, params, seed),
        Shape::Layers => instances::repeated_layers(1 + n / 4, 1 + n % 4, params, seed),
    }
}

/// Whether the generator produced a valid problem (every node has a usable
/// candidate).
pub fn valid(p: &SelectionProblem) -> bool {
    p.nodes.iter().all(|n| {
        n.candidates
            .iter()
            .any(|c| c.accepts.values().all(|v| !v.is_empty()))
    })
}

/// Non-negative, non-decreasing rank weights for `profiles` profiles.
pub fn weights(preferred: u32, steps: &[u32], profiles: usize) -> Weights {
    let mut acc = 0;
    let ranks = steps[..profiles]
        .iter()
        .map(|s| {
            acc += s;
            acc
        })
        .collect();
    Weights {
        preferred,
        ranks,
        time: None,
    }
}

/// The four objective variants for `profiles` profiles: `seed-lex`,
/// `max-preferred`, `min-penalty`, and `weighted` with non-decreasing rank
/// costs (`2k` for rank `k`) and a preference reward that can trade against
/// one rank step.
pub fn every_objective(profiles: usize) -> Vec<Arc<dyn Objective>> {
    let ranks: Vec<u32> = (0..profiles as u32).map(|k| 2 * k).collect();
    vec![
        Arc::new(SeedLex),
        Arc::new(MaxPreferred),
        Arc::new(MinPenalty),
        Arc::new(Weighted(Weights {
            preferred: 3,
            ranks,
            time: None,
        })),
    ]
}

/// A tiny long-range instance for brute-force comparisons: four profiles,
/// one to three candidates a node plus the catch-all, and 0%, 50% or 100%
/// of the nodes preferred as `seed` goes round.
pub fn tiny_long_range(n: usize, seed: u64) -> SelectionProblem {
    let params = Params {
        profiles: 4,
        preferred_prob: [0.0, 0.5, 1.0][(seed % 3) as usize],
        min_candidates: 1,
        max_candidates: 3,
        ..Params::default()
    };
    jointplan::selection::instances::long_range(n, 0.6, &params, seed)
}
