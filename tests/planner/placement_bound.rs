//! The incumbent bound of the placement solver (docs/solver.md, "The incumbent bound"):
//! with the KV offload grain of one sequence, the solver first solves the layer grain and
//! leaves out the ways and labels that cannot come within its optimum's first figure (time,
//! time x devices, devices or host bytes). On random small problems where the sequence
//! grain, host offload and times are all active, under every objective, the bounded
//! solver, the same solver without the bound and the exhaustive enumeration (which shares
//! no code with it) must give the identical answer, and the bound must have left something
//! out on many of them (else this test would not test it).

use jointplan::placement::enumerate::{enumerate, Enumerated};
use jointplan::placement::problem::{
    ExpertSplit, KindCapacity, KindTimes, LayerCost, Objective, OptionTimes, ParallelOption,
    Problem, StepNs,
};
use jointplan::placement::solve::{solve, solve_counted, BoundEffect};

/// A small deterministic generator (xorshift64*): the cases are the same on every run.
struct Dice(u64);

impl Dice {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `low..high`.
    fn within(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low)
    }

    fn step(&mut self, high: u64) -> StepNs {
        StepNs {
            decode: self.within(0, high),
            prefill: self.within(0, high),
        }
    }
}

fn option(
    dice: &mut Dice,
    layers: usize,
    degree: u32,
    split: ExpertSplit,
    kinds: usize,
) -> ParallelOption {
    let costs = (0..layers)
        .map(|_| LayerCost {
            weight_bytes: dice.within(0, 30),
            kv_sequence_bytes: dice.within(0, 6),
            kv_token_bytes: dice.within(0, 3),
            units: dice.within(0, 4),
        })
        .collect();
    let kind_times = (0..kinds)
        .map(|_| KindTimes {
            layers: (0..layers).map(|_| dice.step(8)).collect(),
            first: dice.step(4),
            last: dice.step(4),
            unit: dice.step(6),
            layer_from_host: (0..layers).map(|_| dice.step(12)).collect(),
            kv_from_host: (0..layers).map(|_| dice.step(12)).collect(),
        })
        .collect();
    ParallelOption {
        degree,
        split,
        layers: costs,
        first_bytes: dice.within(0, 8),
        last_bytes: dice.within(0, 8),
        device_bytes: dice.within(0, 5),
        pipeline_bytes: dice.within(0, 5),
        unit_bytes: dice.within(1, 6),
        time: Some(OptionTimes {
            kinds: kind_times,
            boundary: dice.step(4),
        }),
    }
}

/// A problem with host memory, KV offload by sequence (2 to 4 sequences) and times, under
/// any objective: up to 6 layers, up to 4 devices of 1 or 2 kinds,
/// degrees 1 and 2.
fn problem(dice: &mut Dice) -> Problem {
    let layers = dice.within(1, 7) as usize;
    let kind_count = dice.within(1, 3) as usize;
    let mut left = 4u64;
    let kinds: Vec<KindCapacity> = (0..kind_count)
        .map(|_| {
            let count = dice.within(1, 5).min(left).max(1);
            left = left.saturating_sub(count);
            KindCapacity {
                usable_bytes: dice.within(15, 80),
                groups: vec![(1, count as u32), (2, (count / 2) as u32)],
            }
        })
        .collect();
    let mut options = vec![
        option(dice, layers, 1, ExpertSplit::Tensor, kind_count),
        option(dice, layers, 2, ExpertSplit::Tensor, kind_count),
    ];
    if dice.within(0, 2) == 1 {
        options.push(option(dice, layers, 2, ExpertSplit::Expert, kind_count));
    }
    Problem {
        layer_count: layers as u32,
        options,
        kinds,
        sequences: dice.within(2, 5),
        host_bytes: Some(dice.within(20, 400)),
        layer_offload: dice.within(0, 2) == 1,
        kv_offload: true,
        kv_sequence_grain: true,
        kv_worst_case_tokens: dice.within(0, 30),
        pipeline_stages: [None, None, Some(1), Some(2)][dice.within(0, 4) as usize],
        objective: Objective::ALL[dice.within(0, 6) as usize],
        fixed_time: Some(dice.step(10)),
    }
}

#[test]
fn bounded_unbounded_and_enumeration_agree_on_the_sequence_grain() {
    let mut dice = Dice(0x5eed_9a1d_0000_0036);
    let mut total = BoundEffect::default();
    let (mut placed, mut bounded_cases) = (0, 0);
    for case in 0..1500 {
        let problem = problem(&mut dice);
        let (bounded, effect) = solve_counted(&problem, true);
        let (unbounded, none) = solve_counted(&problem, false);
        assert_eq!(
            none,
            BoundEffect::default(),
            "case {case}: no bound, nothing left out"
        );
        let exhaustive = match enumerate(&problem, u64::MAX) {
            Enumerated::Complete { best, .. } => best,
            Enumerated::OverBudget { placements } => {
                panic!("case {case}: {placements} placements over an unlimited budget")
            }
        };
        assert_eq!(bounded, unbounded, "case {case}: {problem:?}");
        assert_eq!(bounded, exhaustive, "case {case}: {problem:?}");
        assert_eq!(solve(&problem), bounded, "case {case}");
        placed += usize::from(bounded.is_some());
        if effect != BoundEffect::default() {
            bounded_cases += 1;
        }
        total.stages += effect.stages;
        total.labels += effect.labels;
    }
    // The cases must exercise the bound: placements found, and ways and labels left out.
    assert!(placed > 500, "only {placed} of 1,500 problems place");
    assert!(
        bounded_cases > 500,
        "the bound left something out in {bounded_cases} cases"
    );
    assert!(total.stages > 0 && total.labels > 0, "{total:?}");
}

#[test]
fn the_bound_leaves_out_offloading_stages_slower_than_the_layer_grain() {
    // Two layers of 10 weight bytes and 3 KV bytes per sequence, 4 sequences, devices of 32
    // usable bytes: a device per layer holds 10 + 12 = 22 bytes, no offload, 10 + 10 ns of
    // layers and a 1 ns boundary: 21 ns, the layer grain's optimum and the bound. One device
    // holding both needs 20 + 24 = 44 bytes: a partial layer's sequences free nothing (the
    // staging buffer grows by what they free), so every KV byte of both layers goes to the
    // host, 20 + 2 x 100 ns of transfers = 220 ns. Its stage's base (20 ns) is within the
    // bound, so its ways are searched, and the search stops at its first fitting `q`.
    let layer = LayerCost {
        weight_bytes: 10,
        kv_sequence_bytes: 3,
        kv_token_bytes: 0,
        units: 0,
    };
    let kind_times = KindTimes {
        layers: vec![
            StepNs {
                decode: 10,
                prefill: 10
            };
            2
        ],
        first: StepNs::default(),
        last: StepNs::default(),
        unit: StepNs::default(),
        layer_from_host: Vec::new(),
        kv_from_host: vec![
            StepNs {
                decode: 100,
                prefill: 100
            };
            2
        ],
    };
    let problem = Problem {
        layer_count: 2,
        options: vec![ParallelOption {
            degree: 1,
            split: ExpertSplit::Tensor,
            layers: vec![layer; 2],
            first_bytes: 0,
            last_bytes: 0,
            device_bytes: 0,
            pipeline_bytes: 0,
            unit_bytes: 0,
            time: Some(OptionTimes {
                kinds: vec![kind_times],
                boundary: StepNs {
                    decode: 1,
                    prefill: 1,
                },
            }),
        }],
        kinds: vec![KindCapacity {
            usable_bytes: 32,
            groups: vec![(1, 2)],
        }],
        sequences: 4,
        host_bytes: Some(1000),
        layer_offload: false,
        kv_offload: true,
        kv_sequence_grain: true,
        kv_worst_case_tokens: 8,
        pipeline_stages: None,
        objective: Objective::MinTpot,
        fixed_time: Some(StepNs::default()),
    };
    let (bounded, effect) = solve_counted(&problem, true);
    let answer = bounded.clone().unwrap();
    let ends: Vec<u32> = answer.stages.iter().map(|s| s.end_layer).collect();
    assert_eq!(ends, vec![1, 2]);
    assert_eq!((answer.tpot_ns, answer.offloaded_bytes), (Some(21), 0));
    // The stage of both layers is the one the bound cut; every label it reaches is within.
    assert_eq!(
        effect,
        BoundEffect {
            stages: 1,
            labels: 0
        }
    );
    assert_eq!(solve_counted(&problem, false).0, bounded);
    match enumerate(&problem, u64::MAX) {
        Enumerated::Complete { best, .. } => assert_eq!(best, bounded),
        Enumerated::OverBudget { .. } => panic!("two layers over an unlimited budget"),
    }
}
