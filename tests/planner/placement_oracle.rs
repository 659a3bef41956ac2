//! The placement solver (`placement::solve`, a dynamic program) against the exhaustive
//! enumeration (`placement::enumerate`, which shares no code with it) on random small
//! problems: up to 8 layers, up to 4 devices of up to 2 kinds, tensor-parallel degrees 1
//! and 2 with both expert splits, with and without host offload (expert groups, and each of
//! whole layers' weights and layers' KV cache allowed or not, KV by layer or by sequence)
//! and a pinned depth, with
//! and without times (random per-layer, per-kind nanoseconds, offload transfers, streamed
//! layers and KV, and stage sends), under every objective (the time objectives too). The answers must be identical: the same option, the same stages, the
//! same offload and figures (the tie-break is part of the answer).

use jointplan::placement::enumerate::{enumerate, Enumerated};
use jointplan::placement::problem::{
    ExpertSplit, KindCapacity, KindTimes, LayerCost, Objective, OptionTimes, ParallelOption,
    Problem, Solution, StageChoice, StepNs,
};
use jointplan::placement::solve::solve;
use proptest::prelude::*;

fn layer() -> impl Strategy<Value = LayerCost> {
    (0u64..40, 0u64..4, 0u64..3, 0u64..4).prop_map(|(w, kv, tok, units)| LayerCost {
        weight_bytes: w,
        kv_sequence_bytes: kv,
        kv_token_bytes: tok,
        units,
    })
}

fn step() -> impl Strategy<Value = StepNs> {
    // Small ranges: ties between placements are frequent, so the tie-break is exercised.
    (0u64..6, 0u64..6).prop_map(|(decode, prefill)| StepNs { decode, prefill })
}

/// Times of an option on two kinds (a one-kind problem drops the second).
fn times(layers: usize) -> impl Strategy<Value = OptionTimes> {
    let kind = (
        prop::collection::vec(step(), layers),
        step(),
        step(),
        step(),
        prop::collection::vec(step(), layers),
        prop::collection::vec(step(), layers),
    )
        .prop_map(
            |(layers, first, last, unit, layer_from_host, kv_from_host)| KindTimes {
                layers,
                first,
                last,
                unit,
                layer_from_host,
                kv_from_host,
            },
        );
    (prop::collection::vec(kind, 2), step())
        .prop_map(|(kinds, boundary)| OptionTimes { kinds, boundary })
}

fn option(layers: usize, degree: u32, split: ExpertSplit) -> impl Strategy<Value = ParallelOption> {
    (
        prop::collection::vec(layer(), layers),
        0u64..10,
        0u64..10,
        0u64..6,
        0u64..6,
        0u64..8,
        times(layers),
    )
        .prop_map(
            move |(layers, first, last, device, pipeline, unit, time)| ParallelOption {
                degree,
                split,
                layers,
                first_bytes: first,
                last_bytes: last,
                device_bytes: device,
                pipeline_bytes: pipeline,
                unit_bytes: unit,
                time: Some(time),
            },
        )
}

fn problem() -> impl Strategy<Value = Problem> {
    (1usize..=8, 1usize..=2).prop_flat_map(|(layers, kind_count)| {
        (
            option(layers, 1, ExpertSplit::Tensor),
            option(layers, 2, ExpertSplit::Tensor),
            option(layers, 2, ExpertSplit::Expert),
            prop::collection::vec((10u64..90, 1u32..=4), kind_count),
            1u64..5,
            prop::option::of(0u64..120),
            prop::option::of(1u32..=3),
            prop::sample::select(Objective::ALL.to_vec()),
            0usize..3,
            prop::option::of(step()),
            (any::<bool>(), any::<bool>(), any::<bool>(), 0u64..30),
        )
            .prop_map(
                move |(
                    one,
                    two,
                    two_experts,
                    kinds,
                    sequences,
                    host,
                    pin,
                    objective,
                    drop,
                    fixed,
                    (layer_offload, kv_offload, kv_sequence_grain, worst),
                )| {
                    // At most 4 devices in all: the first kind keeps its count, the second
                    // what is left.
                    let mut left = 4u32;
                    let kinds: Vec<KindCapacity> = kinds
                        .into_iter()
                        .map(|(usable, count)| {
                            let count = count.min(left).max(1);
                            left = left.saturating_sub(count);
                            KindCapacity {
                                usable_bytes: usable,
                                groups: vec![(1, count), (2, count / 2)],
                            }
                        })
                        .collect();
                    let mut options = vec![one, two, two_experts];
                    // Some problems have fewer options (a degree the model cannot take).
                    if drop > 0 {
                        options.remove(drop);
                    }
                    for option in &mut options {
                        match (&mut option.time, fixed) {
                            // Without a serving point, no option has times.
                            (time, None) => *time = None,
                            (Some(t), Some(_)) => t.kinds.truncate(kinds.len()),
                            (None, Some(_)) => {}
                        }
                    }
                    Problem {
                        layer_count: layers as u32,
                        options,
                        kinds,
                        sequences,
                        host_bytes: host,
                        layer_offload,
                        kv_offload,
                        kv_sequence_grain,
                        kv_worst_case_tokens: worst,
                        pipeline_stages: pin,
                        objective,
                        fixed_time: fixed,
                    }
                },
            )
    })
}

fn exhaustive(problem: &Problem) -> Option<Solution> {
    match enumerate(problem, u64::MAX) {
        Enumerated::Complete { best, .. } => best,
        Enumerated::OverBudget { placements } => {
            panic!("{placements} placements over an unlimited budget")
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn solver_equals_exhaustive_enumeration(problem in problem()) {
        prop_assert_eq!(solve(&problem), exhaustive(&problem));
    }
}

/// A problem the test can state the answer of: four layers of 10 bytes, devices of 25
/// usable bytes; no device holds all four, two hold two each.
fn four_layers(objective: Objective, host: Option<u64>) -> Problem {
    let layer = LayerCost {
        weight_bytes: 10,
        kv_sequence_bytes: 1,
        kv_token_bytes: 1,
        units: 2,
    };
    Problem {
        layer_count: 4,
        options: vec![ParallelOption {
            degree: 1,
            split: ExpertSplit::Tensor,
            layers: vec![layer; 4],
            first_bytes: 0,
            last_bytes: 0,
            device_bytes: 0,
            pipeline_bytes: 0,
            unit_bytes: 4,
            time: None,
        }],
        kinds: vec![KindCapacity {
            usable_bytes: 25,
            groups: vec![(1, 3)],
        }],
        sequences: 1,
        host_bytes: host,
        layer_offload: false,
        kv_offload: false,
        kv_sequence_grain: false,
        kv_worst_case_tokens: 4,
        pipeline_stages: None,
        objective,
        fixed_time: None,
    }
}

#[test]
fn fewest_devices_splits_four_layers_in_two() {
    let answer = solve(&four_layers(Objective::FewestDevices, None)).unwrap();
    assert_eq!(answer.devices, 2);
    // Both splits 1+3 and 3+1 break the capacity; 2+2 holds 22 bytes per device, and the
    // room left (25 - 20 = 5) over 2 KV bytes per token is 2 tokens.
    let ends: Vec<u32> = answer.stages.iter().map(|s| s.end_layer).collect();
    assert_eq!(ends, vec![2, 4]);
    assert_eq!(answer.kv_tokens, 2);
    assert_eq!(
        answer,
        exhaustive(&four_layers(Objective::FewestDevices, None)).unwrap()
    );
}

#[test]
fn most_kv_tokens_uses_every_device() {
    let problem = Problem {
        kinds: vec![KindCapacity {
            usable_bytes: 25,
            groups: vec![(1, 4)],
        }],
        ..four_layers(Objective::MostKvTokens, None)
    };
    let answer = solve(&problem).unwrap();
    // One layer per device leaves 25 - 10 = 15 bytes over 1 byte per token; any stage of
    // two layers leaves 5 over 2.
    assert_eq!(answer.devices, 4);
    assert_eq!(answer.kv_tokens, 15);
    let ends: Vec<u32> = answer.stages.iter().map(|s| s.end_layer).collect();
    assert_eq!(ends, vec![1, 2, 3, 4]);
    // Fewest devices on the same set: still two.
    let fewest = Problem {
        objective: Objective::FewestDevices,
        ..problem
    };
    assert_eq!(solve(&fewest).unwrap().devices, 2);
}

#[test]
fn offload_fits_four_layers_on_one_device() {
    // One device needs 40 + 4 bytes: 19 over; ceil(19 / 4) = 5 units go to the host.
    let problem = Problem {
        kinds: vec![KindCapacity {
            usable_bytes: 25,
            groups: vec![(1, 1)],
        }],
        ..four_layers(Objective::FewestDevices, Some(100))
    };
    let answer = solve(&problem).unwrap();
    assert_eq!(answer.devices, 1);
    assert_eq!(
        answer.stages,
        vec![StageChoice {
            end_layer: 4,
            kind: 0,
            offloaded_units: 5,
            offloaded_layers: 0,
            kv_offloaded_layers: 0,
            kv_offloaded_sequences: 0,
        }]
    );
    assert_eq!(answer.offloaded_bytes, 20);
    // Too little host memory: no placement.
    let tight = Problem {
        host_bytes: Some(19),
        ..problem
    };
    assert_eq!(solve(&tight), None);
    assert_eq!(exhaustive(&tight), None);
}

/// Four dense layers (no expert groups) of 10 weight bytes, 2 KV bytes per sequence and 1
/// per token each (a context of 2 tokens, one sequence: the worst case is 2 tokens), on
/// one device of 25 usable bytes: only whole layers or their KV can leave.
fn dense(objective: Objective, layers: bool, kv: bool) -> Problem {
    let mut problem = four_layers(objective, Some(1000));
    for layer in &mut problem.options[0].layers {
        layer.units = 0;
        layer.kv_sequence_bytes = 2;
    }
    problem.options[0].unit_bytes = 0;
    problem.kinds = vec![KindCapacity {
        usable_bytes: 25,
        groups: vec![(1, 1)],
    }];
    problem.layer_offload = layers;
    problem.kv_offload = kv;
    problem.kv_worst_case_tokens = 2;
    problem
}

#[test]
fn whole_layers_stream_from_the_host() {
    // Layer offload only: streaming the first l layers leaves 10 (4 - l) bytes of weights,
    // a staging buffer of 10 when l > 0, and 8 bytes of KV: 48, 48, 38, 28, 18 for l = 0..4;
    // only l = 4 fits 25.
    let problem = dense(Objective::FewestDevices, true, false);
    let answer = solve(&problem).unwrap();
    assert_eq!(answer.stages.len(), 1);
    assert_eq!(answer.stages[0].offloaded_layers, 4);
    assert_eq!(answer.stages[0].kv_offloaded_layers, 0);
    assert_eq!(answer.offloaded_bytes, 40);
    // Room: 25 - 10 (staging) = 15 bytes over 4 bytes per token.
    assert_eq!(answer.kv_tokens, 3);
    assert_eq!(answer, exhaustive(&problem).unwrap());
    // Without layer offload the model does not fit.
    assert_eq!(solve(&dense(Objective::FewestDevices, false, false)), None);
}

#[test]
fn least_offloaded_mixes_layers_and_kv() {
    // Both allowed: weights W(l) = 40, 40, 30, 20, 10 and KV K(x) = 8, 8, 6, 4, 2 (a staging
    // buffer of one layer's once anything is on the host); W + K <= 25. The minimal pairs:
    // (4, 0) (18 bytes; (3, 0) needs 28) and (3, 3) (24; (2, 3) needs 34, (3, 2) 26). Host
    // bytes: 40 against 30 + 3 x 2 = 36, so least-offloaded takes (3, 3).
    let problem = dense(Objective::LeastOffloaded, true, true);
    let answer = solve(&problem).unwrap();
    let stage = &answer.stages[0];
    assert_eq!((stage.offloaded_layers, stage.kv_offloaded_layers), (3, 3));
    assert_eq!(answer.offloaded_bytes, 36);
    // Room 25 - 20 - 2 = 3 bytes over 1 byte per token, capped at the worst case, 2 tokens.
    assert_eq!(answer.kv_tokens, 2);
    assert_eq!(answer, exhaustive(&problem).unwrap());
    // Most KV tokens takes (4, 0): 3 tokens against 2.
    let most = dense(Objective::MostKvTokens, true, true);
    let answer = solve(&most).unwrap();
    let stage = &answer.stages[0];
    assert_eq!((stage.offloaded_layers, stage.kv_offloaded_layers), (4, 0));
    assert_eq!(answer.kv_tokens, 3);
    assert_eq!(answer, exhaustive(&most).unwrap());
}

/// Four layers of 4 weight bytes and 1 KV byte per sequence (1 per token), 4 sequences, on
/// one device of 25 usable bytes with KV offload only: 16 bytes of weights and 16 of KV.
fn kv_only(objective: Objective, by_sequence: bool) -> Problem {
    let mut problem = four_layers(objective, Some(1000));
    for layer in &mut problem.options[0].layers {
        layer.units = 0;
        layer.weight_bytes = 4;
        layer.kv_sequence_bytes = 1;
    }
    problem.options[0].unit_bytes = 0;
    problem.kinds = vec![KindCapacity {
        usable_bytes: 25,
        groups: vec![(1, 1)],
    }];
    problem.sequences = 4;
    problem.kv_offload = true;
    problem.kv_sequence_grain = by_sequence;
    problem.kv_worst_case_tokens = 8;
    problem
}

#[test]
fn kv_by_sequence_trims_the_last_host_layer() {
    // By layer: 16 + 4 (4 - x) + a staging buffer of 4 is 32, 28, 24 for x = 1, 2, 3: the
    // KV of 3 layers (12 bytes) goes to the host; room 25 - 16 - 4 = 5 bytes over the last
    // layer's 1 byte per token: 5 tokens.
    let by_layer = kv_only(Objective::LeastOffloaded, false);
    let answer = solve(&by_layer).unwrap();
    let stage = &answer.stages[0];
    assert_eq!(
        (stage.kv_offloaded_layers, stage.kv_offloaded_sequences),
        (3, 0)
    );
    assert_eq!((answer.offloaded_bytes, answer.kv_tokens), (12, 5));
    assert_eq!(answer, exhaustive(&by_layer).unwrap());
    // By sequence: 2 layers whole and s of the third's 4 sequences: 16 + 8 - s + a staging
    // buffer of max(4, s) = 28 - s fits 25 from s = 3: 11 bytes on the host; room 5 bytes
    // over the 2 bytes per token of the last two layers: 2 tokens.
    let by_sequence = kv_only(Objective::LeastOffloaded, true);
    let answer = solve(&by_sequence).unwrap();
    let stage = &answer.stages[0];
    assert_eq!(
        (stage.kv_offloaded_layers, stage.kv_offloaded_sequences),
        (2, 3)
    );
    assert_eq!((answer.offloaded_bytes, answer.kv_tokens), (11, 2));
    assert_eq!(answer, exhaustive(&by_sequence).unwrap());
}

#[test]
fn kv_by_sequence_mixes_expert_groups_and_sequences() {
    // Three layers of 7, 10 and 5 weight bytes holding 3, 4 and 1 expert groups of 1 byte,
    // 4, 1 and 4 KV bytes per sequence (1 per token), 3 sequences, on one device of 37
    // usable bytes with KV offload and expert groups: 22 bytes of weights and 27 of KV.
    let mut problem = four_layers(Objective::LeastOffloaded, Some(1000));
    problem.layer_count = 3;
    let option = &mut problem.options[0];
    option.layers = [(7, 4, 3), (10, 1, 4), (5, 4, 1)]
        .into_iter()
        .map(|(w, kv, units)| LayerCost {
            weight_bytes: w,
            kv_sequence_bytes: kv,
            kv_token_bytes: 1,
            units,
        })
        .collect();
    option.unit_bytes = 1;
    problem.kinds = vec![KindCapacity {
        usable_bytes: 37,
        groups: vec![(1, 1)],
    }];
    problem.sequences = 3;
    problem.kv_offload = true;
    problem.kv_worst_case_tokens = 100;
    // By layer: the KV of 1 or 2 layers leaves 49 or 46 bytes (a staging buffer of 12, the
    // first layer's 3 sequences), more than 37 + the 8 expert groups; all three leave
    // 22 + 12 = 34: 27 bytes on the host, room 37 - 34 = 3 bytes and no KV per token on the
    // device (the worst case, 100 tokens).
    let answer = solve(&problem).unwrap();
    let stage = &answer.stages[0];
    assert_eq!(
        (
            stage.kv_offloaded_layers,
            stage.kv_offloaded_sequences,
            stage.offloaded_units
        ),
        (3, 0, 0)
    );
    assert_eq!((answer.offloaded_bytes, answer.kv_tokens), (27, 100));
    assert_eq!(answer, exhaustive(&problem).unwrap());
    // By sequence: keeping the whole third layer on the device (no way of the layer grain
    // fits with it, so trimming the layer grain's ways never tries it), 2 layers and 1 of
    // its 3 sequences on the host leave 22 + 2 x 4 + 12 = 42 bytes: 5 expert groups, 12 +
    // 3 + 4 + 5 = 24 bytes on the host. 2 sequences and 1 group also put 24 on the host
    // (12 + 3 + 8 + 1) but leave 37 + 1 - 22 - 12 = 4 bytes for the third layer's 1 byte
    // per token, 4 tokens; the first leaves 37 + 5 - 22 - 12 = 8: 8 tokens.
    problem.kv_sequence_grain = true;
    let answer = solve(&problem).unwrap();
    let stage = &answer.stages[0];
    assert_eq!(
        (
            stage.kv_offloaded_layers,
            stage.kv_offloaded_sequences,
            stage.offloaded_units
        ),
        (2, 1, 5)
    );
    assert_eq!((answer.offloaded_bytes, answer.kv_tokens), (24, 8));
    assert_eq!(answer, exhaustive(&problem).unwrap());
}
