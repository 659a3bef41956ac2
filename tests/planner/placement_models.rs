//! Placement of synthesized models: a placement on one device holds exactly what the
//! single-device plan holds; tensor parallelism splits tensors into parts that add up
//! (with KV heads replicated when fewer than the degree); the checker accepts every
//! placement and rejects each broken rule; device set files fail with their file and JSON
//! path.

use std::path::Path;

use jointplan::placement::check::check;
use jointplan::placement::problem::{ExpertSplit, Objective};
use jointplan::placement::{place, DeviceSet, Placed, PlacementError, Settings};
use jointplan::synth::ModelSource;
use jointplan::BuildOptions;

fn source(model: &str, layers: u64, experts: Option<u64>) -> ModelSource {
    let mut source = ModelSource::folder(format!("models/{model}"));
    source.layers = Some(layers);
    source.experts = experts;
    source
}

fn settings(objective: Objective) -> Settings {
    Settings {
        objective,
        ..Settings::default()
    }
}

fn placed(source: &ModelSource, set: &DeviceSet, settings: &Settings) -> Placed {
    let placed = place(source, set, settings, &BuildOptions::default(), 1_000_000).unwrap();
    assert!(placed.violations.is_empty(), "{:?}", placed.violations);
    placed
}

fn a100(count: u32) -> DeviceSet {
    DeviceSet::uniform(Path::new("models/devices/a100-80gb.json"), count, None).unwrap()
}

#[test]
fn one_device_holds_what_the_single_device_plan_holds() {
    for (model, experts) in [("llama-3.1-8b", None), ("mixtral-8x7b", Some(8))] {
        let source = source(model, 2, experts);
        let placed = placed(&source, &a100(1), &settings(Objective::FewestDevices));
        let request = source.synthesize().unwrap().request;
        let plan = jointplan::ExecutionPlan::build(&request, &BuildOptions::default()).unwrap();
        let report = jointplan::study::ServingReport::of(&request, &plan).unwrap();
        let p = &placed.plan.payload;
        assert_eq!(p.devices.len(), 1, "{model}");
        let device = &p.devices[0];
        assert_eq!(device.items.weights, report.weights_bytes, "{model}");
        assert_eq!(
            device.items.kv_cache,
            report.kv_bytes_per_sequence * p.sequences,
            "{model}"
        );
        assert_eq!(device.items.activations, report.activation_bytes, "{model}");
        assert_eq!(device.items.workspaces, report.workspace_bytes, "{model}");
        assert_eq!(device.items.communication, 0, "{model}");
        assert_eq!(
            device.usable_bytes, plan.payload.memory.usable_capacity_bytes,
            "{model}"
        );
        // Every tensor whole on the one device.
        assert!(device.shards.iter().all(|s| s.parts == 1 && s.part == 0));
        assert_eq!(device.shards.len(), p.tensors.len());
    }
}

/// The facts' single-device plan is built without its hash and sealed only when a
/// placement is written out: its sealed id is the id `ExecutionPlan::build` gives the same
/// request (a whole build, sharing none of the sealing's calls), the one the placement
/// quotes; unsealed facts cannot be written out.
#[test]
fn the_single_device_plan_is_sealed_only_when_written_out() {
    use jointplan::placement::model::ModelFacts;
    use jointplan::placement::{choose, options::form, record::record};
    for (model, experts) in [("llama-3.1-8b", None), ("mixtral-8x7b", Some(8))] {
        let source = source(model, 2, experts);
        let set = a100(2);
        let kind = &set.kinds[0];
        let options = BuildOptions::default();
        let preset = source.policy_preset().unwrap();
        let facts =
            ModelFacts::gather(&source, &kind.description, &kind.file, &options, &preset).unwrap();
        assert_eq!(facts.plan_id(), None, "{model}");
        let fewest = settings(Objective::FewestDevices);
        let formed = form(&facts, &set, &preset, &fewest).unwrap();
        let solution = jointplan::placement::solve::solve(&formed.problem).unwrap();
        let unsealed = record(&facts, &set, &formed, &solution).unwrap_err();
        assert!(unsealed.to_string().contains("not sealed"), "{unsealed}");
        let sealed = facts.seal(&options).unwrap();
        let mut roomy = kind.description.clone();
        roomy.total_memory_bytes = 1 << 50;
        let request = source
            .synthesize_on_with_policy(&roomy, &kind.file, &preset)
            .unwrap()
            .request;
        let built = jointplan::ExecutionPlan::build(&request, &options).unwrap();
        assert_eq!(
            sealed.plan_id(),
            Some(built.payload.plan_id.as_str()),
            "{model}"
        );
        let recorded = record(&sealed, &set, &formed, &solution).unwrap();
        let placed = placed(&source, &set, &fewest);
        assert_eq!(recorded.placement_id, placed.plan.placement_id, "{model}");
        assert_eq!(
            placed.plan.payload.single_device_plan, built.payload.plan_id,
            "{model}"
        );
        let chosen = choose(&source, &set, &fewest, &options, 1_000_000).unwrap();
        assert_eq!(chosen.solution, solution, "{model}");
        assert_eq!(chosen.certificate, placed.certificate, "{model}");
    }
}

#[test]
fn tensor_parallel_splits_heads_and_replicates_kv_heads() {
    // llama-3.1-8b: 32 query heads, 8 KV heads. At degree 2 the K/V projections split in
    // two; the KV cache per device halves.
    let source = source("llama-3.1-8b", 2, None);
    let mut pinned = settings(Objective::FewestDevices);
    pinned.tensor_parallel = Some(2);
    let two = placed(&source, &a100(2), &pinned);
    let one = placed(&source, &a100(1), &settings(Objective::FewestDevices));
    let d1 = &one.plan.payload.devices[0];
    let d2 = &two.plan.payload.devices[0];
    assert_eq!(d2.kv_sequence_bytes * 2, d1.kv_sequence_bytes);
    let k = d2
        .shards
        .iter()
        .find(|s| s.tensor == "weight.layer.0.k_proj")
        .unwrap();
    assert_eq!((k.part, k.parts), (0, 2));
    let norm = d2
        .shards
        .iter()
        .find(|s| s.tensor == "weight.layer.0.input_norm")
        .unwrap();
    assert_eq!(norm.parts, 1, "norms are replicated");
    assert_eq!(d2.items.communication, 3 * 8 * 1024 * 1024);
}

#[test]
fn kv_heads_fewer_than_the_degree_are_replicated() {
    // gemma-3-1b: 4 query heads, 1 KV head. At degree 4 every rank holds the one KV head
    // (vLLM's QKVParallelLinear: one head per rank, replicated), so its K/V projections are
    // one part held four times and the KV bytes per token per device are the whole layer's.
    let source = source("gemma-3-1b", 2, None);
    let mut pinned = settings(Objective::FewestDevices);
    pinned.tensor_parallel = Some(4);
    let four = placed(&source, &a100(4), &pinned);
    let one = placed(&source, &a100(1), &settings(Objective::FewestDevices));
    let per_token_one = one.plan.payload.devices[0].kv_token_bytes;
    for device in &four.plan.payload.devices {
        assert_eq!(device.kv_token_bytes, per_token_one);
        let v = device
            .shards
            .iter()
            .find(|s| s.tensor == "weight.layer.1.v_proj")
            .unwrap();
        assert_eq!((v.part, v.parts), (0, 1));
        let q = device
            .shards
            .iter()
            .find(|s| s.tensor == "weight.layer.1.q_proj")
            .unwrap();
        assert_eq!((q.part, q.parts), (u64::from(device.rank), 4));
    }
}

#[test]
fn expert_parallelism_gives_whole_experts_to_ranks() {
    let source = source("mixtral-8x7b", 2, Some(8));
    let mut pinned = settings(Objective::MostKvTokens);
    pinned.tensor_parallel = Some(2);
    let placed = placed(&source, &a100(2), &pinned);
    let p = &placed.plan.payload;
    // Both splits hold the same bytes of experts per device (8 experts, 2 ranks); the
    // tie-break takes the tensor split (option order), so check the expert split's
    // availability through the rejected list: it is not rejected.
    assert!(placed
        .rejected
        .iter()
        .all(|r| r.split != ExpertSplit::Expert || r.degree != 2));
    assert_eq!(p.tensor_parallel, 2);
}

#[test]
fn host_offload_moves_expert_groups_and_the_checker_counts_them() {
    // mixtral, 8 layers of 8 experts in bf16 (each expert 3 x 4096 x 14336 x 2 bytes, 22.5 GB
    // of experts), under the interactive policy (4 sequences of 32768 tokens) does not fit
    // one RTX 4090 (23.4 GB usable); with 64 GiB of host memory it does.
    let mut source = source("mixtral-8x7b", 8, Some(8));
    source.weight_format = Some("dense-bf16".to_owned());
    source.policy = Some("interactive".to_owned());
    let set = DeviceSet::uniform(
        Path::new("models/devices/rtx-4090-24gb.json"),
        1,
        Some(64 << 30),
    )
    .unwrap();
    // KV for the interactive policy's 4 sequences at its full context.
    let required = Settings {
        policy: Some(crate::common::requiring_the_ceiling(&source)),
        ..settings(Objective::FewestDevices)
    };
    let plain = place(
        &source,
        &set,
        &required,
        &BuildOptions::default(),
        1_000_000,
    );
    assert!(
        matches!(plain, Err(PlacementError::Infeasible(_))),
        "{plain:?}"
    );
    let mut offload = Settings {
        objective: Objective::LeastOffloaded,
        ..required.clone()
    };
    offload.host_offload = true;
    let placed = placed(&source, &set, &offload);
    let p = &placed.plan.payload;
    let device = &p.devices[0];
    let expert = 3 * 4096 * 14336 * 2;
    // The fewest experts: one fewer would not fit.
    let units = p.stages[0].offloaded_units;
    assert!(units > 0);
    assert_eq!(p.host.offloaded_bytes, units * expert);
    assert!(device.headroom_bytes >= 0);
    assert!(
        device.headroom_bytes < i128::from(expert),
        "{}",
        device.headroom_bytes
    );
    assert!(p.host.shards.iter().all(|s| s.tensor.contains(".experts.")));
    assert_eq!(
        units * 2,
        p.host.shards.len() as u64,
        "gate_up and down per expert"
    );
    // Too little host memory for them: no placement.
    let tight = DeviceSet::uniform(
        Path::new("models/devices/rtx-4090-24gb.json"),
        1,
        Some(p.host.offloaded_bytes - 1),
    )
    .unwrap();
    let refused = place(
        &source,
        &tight,
        &offload,
        &BuildOptions::default(),
        1_000_000,
    );
    assert!(matches!(refused, Err(PlacementError::Infeasible(_))));
}

#[test]
fn the_checker_rejects_each_broken_rule() {
    let source = source("llama-3.1-8b", 4, None);
    let mut pinned = settings(Objective::FewestDevices);
    pinned.pipeline_parallel = Some(2);
    let placed = placed(&source, &a100(2), &pinned);
    let rules = |plan: &jointplan::placement::PlacementPlan| -> Vec<String> {
        let mut rules: Vec<String> = check(plan).into_iter().map(|v| v.rule).collect();
        rules.sort();
        rules.dedup();
        rules
    };
    // A stage that skips a layer.
    let mut broken = placed.plan.clone();
    broken.payload.stages[1].first_layer += 1;
    assert!(rules(&broken).contains(&"stages".to_owned()));
    // A shard moved to the other stage.
    let mut broken = placed.plan.clone();
    let shard = broken.payload.devices[0]
        .shards
        .iter()
        .position(|s| s.tensor.starts_with("weight.layer.0."))
        .unwrap();
    let moved = broken.payload.devices[0].shards.remove(shard);
    broken.payload.devices[1].shards.push(moved);
    let found = rules(&broken);
    assert!(found.contains(&"home".to_owned()), "{found:?}");
    assert!(found.contains(&"items".to_owned()), "{found:?}");
    // A shard dropped: its tensor's parts no longer add up.
    let mut broken = placed.plan.clone();
    broken.payload.devices[1].shards.pop();
    assert!(rules(&broken).contains(&"shards".to_owned()));
    // A device over its capacity.
    let mut broken = placed.plan.clone();
    let device = &mut broken.payload.devices[0];
    device.usable_bytes = device.total_bytes - 1;
    device.headroom_bytes = -1;
    assert!(rules(&broken).contains(&"capacity".to_owned()));
    // Host bytes without a host tier.
    let mut broken = placed.plan.clone();
    let shard = broken.payload.devices[0].shards.pop().unwrap();
    broken.payload.host.offloaded_bytes = shard.arena_bytes;
    broken.payload.host.shards.push(shard);
    assert!(rules(&broken).contains(&"host".to_owned()));
    // A tampered figure changes the id.
    let mut broken = placed.plan.clone();
    broken.payload.sequences += 1;
    assert!(rules(&broken).contains(&"id".to_owned()));
    // The placement as built passes.
    assert!(check(&placed.plan).is_empty());
}

#[test]
fn placements_are_deterministic() {
    let source = source("llama-3.1-8b", 3, None);
    let set = DeviceSet::read(Path::new(
        "models/devices/sets/mixed-a100-80gb-rtx-4090.json",
    ))
    .unwrap();
    let a = placed(&source, &set, &settings(Objective::MostKvTokens));
    let b = placed(&source, &set, &settings(Objective::MostKvTokens));
    assert_eq!(a.plan.placement_id, b.plan.placement_id);
    assert_eq!(
        a.plan.to_json_text().unwrap(),
        b.plan.to_json_text().unwrap()
    );
}

#[test]
fn every_shipped_set_reads() {
    for entry in std::fs::read_dir("models/devices/sets").unwrap() {
        let path = entry.unwrap().path();
        let set = DeviceSet::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // Several devices, or one with a host tier (the host-offload target).
        assert!(
            set.device_count() >= 2 || set.host_memory_bytes.is_some(),
            "{}",
            path.display()
        );
    }
}

#[test]
fn bad_set_files_name_the_file_and_the_json_path() {
    let dir = tempfile::tempdir().unwrap();
    let devices = std::fs::canonicalize("models/devices").unwrap();
    let write = |name: &str, text: String| {
        let file = dir.path().join(name);
        std::fs::write(&file, text).unwrap();
        file
    };
    let good_device = devices.join("a100-80gb.json").display().to_string();
    let cases = [
        (
            "unknown-key.json",
            format!(
                r#"{{"name":"x","devices":[{{"file":"{good_device}","count":2,"domain":"d","colour":1}}],"domains":[{{"id":"d","link":{{"kind":"nvlink","bandwidth_bytes_per_second":1}}}}]}}"#
            ),
            "devices[0]",
        ),
        (
            "zero-count.json",
            format!(
                r#"{{"name":"x","devices":[{{"file":"{good_device}","count":0,"domain":"d"}}],"domains":[{{"id":"d","link":{{"kind":"nvlink","bandwidth_bytes_per_second":1}}}}]}}"#
            ),
            ".devices[0].count",
        ),
        (
            "unknown-domain.json",
            format!(
                r#"{{"name":"x","devices":[{{"file":"{good_device}","count":2,"domain":"e"}}],"domains":[{{"id":"d","link":{{"kind":"nvlink","bandwidth_bytes_per_second":1}}}}]}}"#
            ),
            ".devices[0].domain",
        ),
        (
            "missing-device.json",
            r#"{"name":"x","devices":[{"file":"nowhere.json","count":2,"domain":"d"}],"domains":[{"id":"d","link":{"kind":"nvlink","bandwidth_bytes_per_second":1}}]}"#.to_owned(),
            ".devices[0].file",
        ),
        (
            "no-interconnect.json",
            format!(
                r#"{{"name":"x","devices":[{{"file":"{good_device}","count":1,"domain":"d"}},{{"file":"{good_device}","count":1,"domain":"e"}}],"domains":[{{"id":"d","link":{{"kind":"nvlink","bandwidth_bytes_per_second":1}}}},{{"id":"e","link":{{"kind":"nvlink","bandwidth_bytes_per_second":1}}}}]}}"#
            ),
            ".interconnect",
        ),
        (
            "zero-bandwidth.json",
            format!(
                r#"{{"name":"x","devices":[{{"file":"{good_device}","count":2,"domain":"d"}}],"domains":[{{"id":"d","link":{{"kind":"nvlink","bandwidth_bytes_per_second":0}}}}]}}"#
            ),
            ".domains[0].link.bandwidth_bytes_per_second",
        ),
    ];
    for (name, text, path) in cases {
        let file = write(name, text);
        let error = DeviceSet::read(&file).unwrap_err().to_string();
        assert!(error.contains(name), "{name}: {error}");
        assert!(error.contains(path), "{name}: {error}");
    }
}

#[test]
fn levers_are_exact_amounts() {
    use jointplan::placement::levers::{levers, Lever};
    use jointplan::placement::model::ModelFacts;
    use jointplan::placement::options::form;
    // llama-3.1-70b, 4 layers in bf16 under the server policy (64 sequences of 32768
    // tokens: 8.6 GB of KV cache per layer) on one RTX 4090: infeasible.
    let mut source = source("llama-3.1-70b", 4, None);
    source.weight_format = Some("dense-bf16".to_owned());
    let device = Path::new("models/devices/rtx-4090-24gb.json");
    let set = DeviceSet::uniform(device, 1, None).unwrap();
    let options = BuildOptions::default();
    let kind = &set.kinds[0];
    // KV for every one of the server policy's 64 sequences at its context.
    let preset = crate::common::requiring_the_ceiling(&source);
    let settings = |objective: Objective| Settings {
        policy: Some(preset.clone()),
        ..settings(objective)
    };
    let facts =
        ModelFacts::gather(&source, &kind.description, &kind.file, &options, &preset).unwrap();
    let formed = form(&facts, &set, &preset, &settings(Objective::FewestDevices)).unwrap();
    let found = levers(&formed, &facts, &set);
    let added = found
        .iter()
        .find_map(|l| match l {
            Lever::MoreDevices { added, .. } => Some(*added),
            _ => None,
        })
        .unwrap();
    // Exact: with `added` more devices it places, with one fewer it does not.
    let with = DeviceSet::uniform(device, 1 + added, None).unwrap();
    assert!(place(
        &source,
        &with,
        &settings(Objective::FewestDevices),
        &options,
        0
    )
    .is_ok());
    let without = DeviceSet::uniform(device, added, None).unwrap();
    assert!(matches!(
        place(
            &source,
            &without,
            &settings(Objective::FewestDevices),
            &options,
            0
        ),
        Err(PlacementError::Infeasible(_))
    ));
    // No routed experts: the offload lever streams layers or keeps KV on the host, and its
    // host bytes are exact: with them the model places (least offloaded), with one fewer
    // it does not.
    let host = found
        .iter()
        .find_map(|l| match l {
            Lever::Offload {
                units, host_bytes, ..
            } => {
                assert_eq!(*units, 0);
                Some(*host_bytes)
            }
            _ => None,
        })
        .unwrap();
    let mut offload = settings(Objective::LeastOffloaded);
    offload.host_offload = true;
    for (memory, fits) in [(host, true), (host - 1, false)] {
        let with_host = DeviceSet::uniform(device, 1, Some(memory)).unwrap();
        let result = place(&source, &with_host, &offload, &options, 0);
        assert_eq!(result.is_ok(), fits, "host {memory}: {result:?}");
    }
    // The most sequences: the problem's bound (the policy's activations) refined by
    // synthesizing the model at each probe; with them it places, with one more it does not.
    let bound = found
        .iter()
        .find_map(|l| match l {
            Lever::FewerSequences { sequences } => Some(*sequences),
            _ => None,
        })
        .unwrap();
    let fewest = settings(Objective::FewestDevices);
    let sequences = jointplan::placement::levers::most_sequences(
        &source, &set, &fewest, &options, &preset, bound,
    );
    assert!(sequences >= bound);
    for (count, fits) in [(sequences, true), (sequences + 1, false)] {
        let mut at = settings(Objective::FewestDevices);
        at.policy = Some(preset.with_sequence_ceiling(u32::try_from(count).unwrap()));
        let result = place(&source, &set, &at, &options, 0);
        assert_eq!(result.is_ok(), fits, "{count} sequences: {result:?}");
    }
    // The longest context, checked by synthesizing the model at it and one token more.
    let context = found
        .iter()
        .find_map(|l| match l {
            Lever::ShorterContext { context_tokens } => Some(*context_tokens),
            _ => None,
        })
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (tokens, fits) in [(context, true), (context + 1, false)] {
        let mut policy = preset.clone();
        policy.maximum_context_tokens = Some(tokens);
        let file = dir.path().join(format!("policy-{tokens}.json"));
        std::fs::write(&file, serde_json::to_string(&policy).unwrap()).unwrap();
        let mut at = source.clone();
        at.policy = Some(file.display().to_string());
        // The file's policy (the ceiling required, at this context), not the closure's.
        let from_file = Settings {
            policy: None,
            ..settings(Objective::FewestDevices)
        };
        let result = place(&at, &set, &from_file, &options, 0);
        assert_eq!(result.is_ok(), fits, "context {tokens}: {result:?}");
    }
}
