//! Deterministic instance generators shared by tests and benchmarks.
//!
//! Each generator builds a *skeleton* (the shared resources every node
//! touches) and then random candidates over it with [`Params`]: every
//! candidate touches all of its node's shared resources, optionally a
//! workspace only it touches, and accepts a random non-empty subset of the
//! profiles for each (or an empty one, with `empty_prob`, which makes the
//! candidate unusable). The random source is a fixed SplitMix64, so a seed
//! always gives the same instance on every platform.

use std::collections::BTreeMap;

use crate::selection::model::problem::{Candidate, SelectionNode, SelectionProblem};

/// A small deterministic pseudo-random generator (SplitMix64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator with this seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A uniform integer in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    /// `true` with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p && p > 0.0
    }
}

/// Parameters of the random candidates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Number of profiles (1..=64).
    pub profiles: usize,
    /// Minimum candidates per node (at least 1).
    pub min_candidates: usize,
    /// Maximum candidates per node.
    pub max_candidates: usize,
    /// Probability that a node has a preferred provider (which may be one
    /// without a candidate, with probability 1/8).
    pub preferred_prob: f64,
    /// Probability that a candidate has a workspace only it touches.
    pub workspace_prob: f64,
    /// Probability that an accepted list is empty (the candidate is unusable).
    pub empty_prob: f64,
    /// Probability that each profile is in an accepted set.
    pub accept_prob: f64,
    /// Give every node a last candidate `zz-fallback` accepting every
    /// profile (keeps instances feasible).
    pub fallback: bool,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            profiles: 3,
            min_candidates: 2,
            max_candidates: 3,
            preferred_prob: 0.7,
            workspace_prob: 0.2,
            empty_prob: 0.0,
            accept_prob: 0.5,
            fallback: true,
        }
    }
}

fn profile_names(p: usize) -> Vec<String> {
    (0..p).map(|k| format!("p{k}")).collect()
}

/// Builds random candidates over a skeleton: `skeleton[i]` lists the shared
/// resources of node `i`. Resources whose name starts with `stream` are
/// accepted with every profile by every candidate.
pub fn from_skeleton(
    skeleton: &[Vec<String>],
    ids: &[String],
    params: &Params,
    rng: &mut Rng,
) -> SelectionProblem {
    let p = params.profiles.clamp(1, 64);
    let names = profile_names(p);
    let mut nodes = Vec::with_capacity(skeleton.len());
    for (i, shared) in skeleton.iter().enumerate() {
        let lo = params.min_candidates.max(1);
        let hi = params.max_candidates.max(lo);
        let nc = lo + rng.below((hi - lo + 1) as u64) as usize;
        let mut candidates = Vec::with_capacity(nc + 1);
        for c in 0..nc {
            let provider = format!("prov{c}");
            let mut accepts = BTreeMap::new();
            let mut res: Vec<String> = shared.clone();
            if rng.chance(params.workspace_prob) {
                res.push(format!("{}.ws.{provider}", ids[i]));
            }
            for r in res {
                let list: Vec<String> = if r.starts_with("stream") {
                    names.clone()
                } else if rng.chance(params.empty_prob) {
                    Vec::new()
                } else {
                    let mut l: Vec<String> = names
                        .iter()
                        .filter(|_| rng.chance(params.accept_prob))
                        .cloned()
                        .collect();
                    if l.is_empty() {
                        l.push(names[rng.below(p as u64) as usize].clone());
                    }
                    l
                };
                accepts.insert(r, list);
            }
            candidates.push(Candidate {
                provider,
                accepts,
                time_ps: None,
            });
        }
        if params.fallback {
            let accepts = shared.iter().map(|r| (r.clone(), names.clone())).collect();
            candidates.push(Candidate {
                provider: "zz-fallback".into(),
                accepts,
                time_ps: None,
            });
        }
        let preferred = if rng.chance(params.preferred_prob) {
            if rng.below(8) == 0 {
                Some("absent".to_string())
            } else {
                Some(format!("prov{}", rng.below(nc as u64)))
            }
        } else {
            None
        };
        nodes.push(SelectionNode {
            id: ids[i].clone(),
            preferred,
            candidates,
        });
    }
    SelectionProblem {
        profiles: names,
        nodes,
        profile_time_ps: BTreeMap::new(),
    }
}

fn node_ids(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i:05}")).collect()
}

/// A chain: node `i` reads `v{i-1}` and writes `v{i}`.
pub fn chain(n: usize, params: &Params, seed: u64) -> SelectionProblem {
    let skeleton: Vec<Vec<String>> = (0..n)
        .map(|i| {
            let mut v = vec![format!("v{i}")];
            if i > 0 {
                v.insert(0, format!("v{}", i - 1));
            }
            v
        })
        .collect();
    from_skeleton(&skeleton, &node_ids("n", n), params, &mut Rng::new(seed))
}

/// A residual stream: a chain in blocks of four nodes, where the first node
/// of each block also reads the previous block's residual value and writes a
/// new one, so residual values span whole blocks.
pub fn residual_stream(n: usize, params: &Params, seed: u64) -> SelectionProblem {
    let skeleton: Vec<Vec<String>> = (0..n)
        .map(|i| {
            let mut v = Vec::new();
            if i > 0 {
                v.push(format!("v{}", i - 1));
            }
            v.push(format!("v{i}"));
            if i % 4 == 0 {
                if i >= 4 {
                    v.push(format!("res{}", i / 4 - 1));
                }
                v.push(format!("res{}", i / 4));
            }
            v
        })
        .collect();
    from_skeleton(&skeleton, &node_ids("n", n), params, &mut Rng::new(seed))
}

/// Random long-range sharing: a chain where each node also touches, with
/// probability `share_prob`, the output of a uniformly random earlier node
/// (a shared arena or a long skip connection), so the cut width is unbounded.
pub fn long_range(n: usize, share_prob: f64, params: &Params, seed: u64) -> SelectionProblem {
    let mut rng = Rng::new(seed ^ 0xA5A5);
    let skeleton: Vec<Vec<String>> = (0..n)
        .map(|i| {
            let mut v = Vec::new();
            if i > 0 {
                v.push(format!("v{}", i - 1));
            }
            v.push(format!("v{i}"));
            if i > 2 && rng.chance(share_prob) {
                let j = rng.below(i as u64 - 1) as usize;
                v.push(format!("v{j}"));
            }
            v.sort();
            v.dedup();
            v
        })
        .collect();
    from_skeleton(&skeleton, &node_ids("n", n), params, &mut Rng::new(seed))
}

/// `layers` identical layers of `layer_size` chained nodes; the first node of
/// every layer also touches one `stream` resource that every candidate
/// accepts with every profile, so presolve settles it and the layers split
/// into identical parts.
pub fn repeated_layers(
    layers: usize,
    layer_size: usize,
    params: &Params,
    seed: u64,
) -> SelectionProblem {
    let mut out = SelectionProblem {
        profiles: profile_names(params.profiles.clamp(1, 64)),
        nodes: Vec::new(),
        profile_time_ps: BTreeMap::new(),
    };
    for l in 0..layers {
        let skeleton: Vec<Vec<String>> = (0..layer_size)
            .map(|i| {
                let mut v = vec![format!("L{l:04}.v{i}")];
                if i > 0 {
                    v.insert(0, format!("L{l:04}.v{}", i - 1));
                } else {
                    v.insert(0, "stream".to_string());
                }
                v
            })
            .collect();
        let ids: Vec<String> = (0..layer_size).map(|i| format!("L{l:04}.n{i}")).collect();
        // The same seed for every layer: identical structure.
        let layer = from_skeleton(&skeleton, &ids, params, &mut Rng::new(seed));
        out.nodes.extend(layer.nodes);
    }
    out
}

/// The benchmark families of `benches/selection.rs` and
/// `examples/selection_table.rs`: (family, node count, problem), with three
/// profiles unless the family name says `4p`.
pub fn benchmark_families() -> Vec<(&'static str, usize, SelectionProblem)> {
    let p3 = Params::default();
    let p4 = Params {
        profiles: 4,
        ..Params::default()
    };
    let mut out = Vec::new();
    for n in [100, 1_000, 10_000] {
        out.push(("chain", n, chain(n, &p3, 1)));
        out.push(("residual", n, residual_stream(n, &p3, 1)));
        out.push(("repeated-layers", n, repeated_layers(n / 10, 10, &p3, 1)));
    }
    for n in [100, 1_000, 5_000] {
        out.push(("long-range", n, long_range(n, 0.5, &p3, 1)));
        out.push(("long-range-4p", n, long_range(n, 0.5, &p4, 1)));
    }
    out
}

/// The four objective variants as the benchmarks compare them: `seed-lex`,
/// `max-preferred`, `min-penalty` and `weighted` with
/// `{"preferred": 3, "ranks": [0, 2, 4, 6]}` (four profiles).
pub fn benchmark_objectives() -> Vec<std::sync::Arc<dyn super::Objective>> {
    use crate::selection::model::objective::{
        MaxPreferred, MinPenalty, SeedLex, Weighted, Weights,
    };
    vec![
        std::sync::Arc::new(SeedLex),
        std::sync::Arc::new(MaxPreferred),
        std::sync::Arc::new(MinPenalty),
        std::sync::Arc::new(Weighted(Weights {
            preferred: 3,
            ranks: vec![0, 2, 4, 6],
            time: None,
        })),
    ]
}

/// `problem` with time costs (the optional keys of the `solve` format), for the time
/// objectives' tests and benchmarks. Node `i`'s costs come from a generator seeded with
/// `seed` and `i % period`, so nodes `period` apart (the layers of [`repeated_layers`] with
/// `period` = the layer size) get the same costs, and a resource's costs follow the last
/// `.`-separated part of its name (the same in every layer). Per candidate: a decode time (`tpot`) of
/// 0.8 to 1.4 times a node base of 2 to 40 microseconds, a prefill time (`ttft`) 50 to 200
/// times it, and `throughput` = 8 prefills plus 127 decode steps (a batch of 8 requests of
/// 128 output tokens). About a third of the shared resources get profile costs that grow
/// by up to 2 microseconds per rank.
pub fn with_time_costs(problem: &SelectionProblem, seed: u64, period: usize) -> SelectionProblem {
    use super::model::problem::{ProfileTimes, TimeCosts};
    let mut out = problem.clone();
    let period = period.max(1);
    for (i, node) in out.nodes.iter_mut().enumerate() {
        let mut rng = Rng::new(seed ^ ((i % period) as u64).wrapping_mul(0x9E37_79B9));
        let base = 2_000_000 + rng.below(38_000_000);
        for cand in &mut node.candidates {
            let tpot = base * (80 + rng.below(60)) / 100;
            let ttft = tpot * (50 + rng.below(150));
            cand.time_ps = Some(TimeCosts {
                tpot: Some(tpot),
                ttft: Some(ttft),
                throughput: Some(8 * ttft + 127 * tpot),
            });
        }
    }
    let mut shared: Vec<String> = out
        .nodes
        .iter()
        .flat_map(|n| n.candidates.iter())
        .filter(|c| c.accepts.values().all(|v| !v.is_empty()))
        .flat_map(|c| c.accepts.keys())
        .filter(|r| !r.contains(".ws."))
        .cloned()
        .collect();
    shared.sort();
    shared.dedup();
    for r in shared {
        // FNV-1a of the name's last part.
        let last = r.rsplit('.').next().unwrap_or(&r);
        let hash = last.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        let mut rng = Rng::new(seed.rotate_left(17) ^ hash);
        if !rng.chance(0.33) {
            continue;
        }
        let step = rng.below(2_000_000);
        let list: Vec<u64> = (0..out.profiles.len() as u64).map(|k| k * step).collect();
        out.profile_time_ps.insert(
            r,
            ProfileTimes {
                tpot: Some(list.clone()),
                ttft: Some(list.iter().map(|t| t * 4).collect()),
                throughput: None,
            },
        );
    }
    out
}
