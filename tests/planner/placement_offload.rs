//! Host offload of whole layers and KV cache on synthesized models: the placement streams a
//! stage's first layers or keeps their KV on the host only as far as it must (by layer, or
//! by sequence of the last host-KV layer), the checker
//! counts the host's bytes and the staging buffers and rejects each broken offload rule; a
//! stored placement answers `--why-not` as `plan` does; `fit --by price` ranks priced device
//! files and lists the others unranked.

use std::path::Path;

use jointplan::placement::alternative::{compare, compare_stored, Alternative};
use jointplan::placement::check::check;
use jointplan::placement::fit::{smallest_counts_by, RankBy};
use jointplan::placement::problem::Objective;
use jointplan::placement::{place, DeviceSet, Placed, PlacementError, PlacementPlan, Settings};
use jointplan::synth::ModelSource;
use jointplan::BuildOptions;

fn settings(objective: Objective, host_offload: bool) -> Settings {
    Settings {
        host_offload,
        objective,
        ..Settings::default()
    }
}

/// [`settings`] with KV for every one of [`dense`]'s 64 sequences at its context (the
/// server policy's ceiling required).
fn dense_settings(objective: Objective, host_offload: bool) -> Settings {
    Settings {
        policy: Some(crate::common::requiring_the_ceiling(&dense())),
        ..settings(objective, host_offload)
    }
}

/// llama-3.1-70b, 4 layers in bf16 (1.7 GB of weights each, 2.1 GB each for the embedding
/// and the head) under the server policy (64 sequences of 32768 tokens: 8.6 GB of KV cache
/// per layer): far beyond one RTX 4090 without the host.
fn dense() -> ModelSource {
    let mut source = ModelSource::folder("models/llama-3.1-70b");
    source.layers = Some(4);
    source.weight_format = Some("dense-bf16".to_owned());
    source
}

fn rtx_4090(host: Option<u64>) -> DeviceSet {
    DeviceSet::uniform(Path::new("models/devices/rtx-4090-24gb.json"), 1, host).unwrap()
}

fn placed(source: &ModelSource, set: &DeviceSet, settings: &Settings) -> Placed {
    let placed = place(source, set, settings, &BuildOptions::default(), 1_000_000).unwrap();
    assert!(placed.violations.is_empty(), "{:?}", placed.violations);
    placed
}

fn rules(plan: &PlacementPlan) -> Vec<String> {
    check(plan).into_iter().map(|v| v.rule).collect()
}

#[test]
fn a_dense_model_offloads_layers_or_kv_only_as_far_as_it_must() {
    let source = dense();
    let plain = place(
        &source,
        &rtx_4090(Some(1 << 40)),
        &dense_settings(Objective::LeastOffloaded, false),
        &BuildOptions::default(),
        1_000_000,
    );
    assert!(
        matches!(plain, Err(PlacementError::Infeasible(_))),
        "{plain:?}"
    );
    let set = rtx_4090(Some(1 << 40));
    let placed = placed(
        &source,
        &set,
        &dense_settings(Objective::LeastOffloaded, true),
    );
    let p = &placed.plan.payload;
    let stage = &p.stages[0];
    let device = &p.devices[0];
    assert!(
        stage.offloaded_layers + stage.kv_offloaded_layers > 0,
        "{stage:?}"
    );
    assert_eq!(stage.offloaded_units, 0, "no routed experts");
    // The host holds the streamed layers' shards and the host-KV layers' cache, nothing
    // else; the device none of a streamed layer.
    let streamed: Vec<u32> = (0..stage.offloaded_layers).collect();
    assert_eq!(device.streamed_layers, streamed);
    for shard in &p.host.shards {
        let layer: u32 = shard.tensor.split('.').nth(2).unwrap().parse().unwrap();
        assert!(streamed.contains(&layer), "{}", shard.tensor);
    }
    let kv: u64 = device
        .host_kv
        .iter()
        .map(|h| h.sequence_bytes * p.sequences)
        .sum();
    assert_eq!(p.host.kv_bytes, kv);
    let shards: u64 = p.host.shards.iter().map(|s| s.arena_bytes).sum();
    assert_eq!(p.host.offloaded_bytes, shards + kv);
    assert!(device.items.staging > 0);
    assert!(device.headroom_bytes >= 0);
    // Least offloaded, exactly: one byte less of host memory and nothing fits.
    let tight = rtx_4090(Some(p.host.offloaded_bytes - 1));
    let refused = place(
        &source,
        &tight,
        &dense_settings(Objective::LeastOffloaded, true),
        &BuildOptions::default(),
        1_000_000,
    );
    assert!(
        matches!(refused, Err(PlacementError::Infeasible(_))),
        "{refused:?}"
    );
    // The certificate: one device, one stage, every way of it enumerated.
    assert_eq!(placed.certificate.method, "exhaustive");
}

#[test]
fn kv_by_sequence_offloads_less_and_the_checker_counts_the_partial_layer() {
    let set = rtx_4090(Some(1 << 40));
    let by_layer = placed(
        &dense(),
        &set,
        &dense_settings(Objective::LeastOffloaded, true),
    );
    let by_sequence_settings = Settings {
        kv_sequence_grain: true,
        ..dense_settings(Objective::LeastOffloaded, true)
    };
    let placed = placed(&dense(), &set, &by_sequence_settings);
    assert_eq!(placed.certificate.method, "exhaustive");
    let p = &placed.plan.payload;
    assert!(
        p.host.offloaded_bytes < by_layer.plan.payload.host.offloaded_bytes,
        "{} against {}",
        p.host.offloaded_bytes,
        by_layer.plan.payload.host.offloaded_bytes
    );
    let stage = &p.stages[0];
    let device = &p.devices[0];
    let s = stage.kv_offloaded_sequences;
    assert!(s > 0 && s < p.sequences, "{stage:?}");
    // The host keeps the whole layers' KV for every sequence and `s` sequences' of the
    // next layer; the device the other sequences' of that layer.
    let partial = device.host_kv.last().unwrap();
    assert_eq!(partial.layer, stage.first_layer + stage.kv_offloaded_layers);
    assert_eq!(partial.sequences, Some(s));
    let whole: u64 = device.host_kv[..device.host_kv.len() - 1]
        .iter()
        .map(|h| h.sequence_bytes * p.sequences)
        .sum();
    assert_eq!(p.host.kv_bytes, whole + s * partial.sequence_bytes);
    assert_eq!(
        device.items.kv_cache,
        device.kv_sequence_bytes * p.sequences - s * partial.sequence_bytes
    );
    assert!(check(&placed.plan).is_empty());
    // Least offloaded, exactly: one byte less of host memory and nothing fits.
    let tight = rtx_4090(Some(p.host.offloaded_bytes - 1));
    let refused = place(
        &dense(),
        &tight,
        &by_sequence_settings,
        &BuildOptions::default(),
        1_000_000,
    );
    assert!(
        matches!(refused, Err(PlacementError::Infeasible(_))),
        "{refused:?}"
    );
    // The checker: a partial layer's sequences the stage does not say, or every sequence.
    let mut broken = placed.plan.clone();
    broken.payload.devices[0]
        .host_kv
        .last_mut()
        .unwrap()
        .sequences = Some(s + 1);
    let found = rules(&broken);
    assert!(found.contains(&"home".to_owned()), "{found:?}");
    assert!(found.contains(&"items".to_owned()), "{found:?}");
    let mut broken = placed.plan.clone();
    broken.payload.stages[0].kv_offloaded_sequences = p.sequences;
    let found = rules(&broken);
    assert!(found.contains(&"stages".to_owned()), "{found:?}");
}

#[test]
fn the_checker_rejects_each_broken_offload_rule() {
    let set = rtx_4090(Some(1 << 40));
    let placed = placed(
        &dense(),
        &set,
        &dense_settings(Objective::LeastOffloaded, true),
    );
    let plan = placed.plan;
    assert!(check(&plan).is_empty());
    // Staging that is not the largest streamed layer plus the largest host-KV layer.
    let mut broken = plan.clone();
    broken.payload.devices[0].items.staging += 1;
    assert!(rules(&broken).contains(&"items".to_owned()));
    // Host KV bytes that the devices do not account for.
    let mut broken = plan.clone();
    broken.payload.host.kv_bytes += 1;
    assert!(rules(&broken).contains(&"host".to_owned()));
    // A stage that says it streams more layers than its devices do.
    let mut broken = plan.clone();
    broken.payload.stages[0].offloaded_layers += 1;
    assert!(rules(&broken).contains(&"home".to_owned()));
    // KV on the host for a layer the stage does not say.
    let mut broken = plan.clone();
    broken.payload.stages[0].kv_offloaded_layers += 1;
    assert!(rules(&broken).contains(&"home".to_owned()));
    // Host shards with no host tier.
    let mut broken = plan.clone();
    broken.payload.host.memory_bytes = None;
    if broken.payload.host.offloaded_bytes > 0 {
        assert!(rules(&broken).contains(&"host".to_owned()));
    }
    // A device holding a shard of a layer it streams.
    if let Some(shard) = plan.payload.host.shards.first().cloned() {
        let mut broken = plan.clone();
        broken.payload.devices[0].shards.push(shard);
        assert!(rules(&broken).contains(&"home".to_owned()));
    }
}

#[test]
fn a_stored_placement_answers_why_not_as_plan_does() {
    let mut source = ModelSource::folder("models/llama-3.1-8b");
    source.layers = Some(4);
    let set = DeviceSet::read(Path::new("models/devices/sets/a100-80gb-x2.json")).unwrap();
    let mut asked = settings(Objective::MostKvTokens, false);
    asked.why_not = Some(Alternative::TensorParallel(2));
    let placed = placed(&source, &set, &asked);
    let at_plan = placed.why_not.clone().unwrap();
    // Through the file: written, read back, asked.
    let text = placed.plan.to_json_text().unwrap();
    let stored = PlacementPlan::from_json_text(&text).unwrap();
    let answer = compare_stored(&stored, Alternative::TensorParallel(2)).unwrap();
    assert_eq!(answer, at_plan);
    for alternative in [
        Alternative::PipelineParallel(2),
        Alternative::Offload(1 << 30),
    ] {
        let solved = stored.solved.as_ref().unwrap();
        assert_eq!(
            compare_stored(&stored, alternative).unwrap(),
            compare(&solved.problem, &solved.solution, alternative)
        );
    }
    // A tampered file is refused: its id no longer hashes its payload.
    let mut tampered = stored.clone();
    tampered.payload.sequences += 1;
    let error = compare_stored(&tampered, Alternative::TensorParallel(2)).unwrap_err();
    assert!(error.to_string().contains("checker"), "{error}");
    // A stored solution that is not the problem's optimum is refused: most KV tokens uses
    // both devices, the fewest devices one.
    assert_eq!(stored.payload.devices_used, 2);
    let mut edited = stored.clone();
    if let Some(solved) = edited.solved.as_mut() {
        solved.problem.objective = Objective::FewestDevices;
    }
    let error = compare_stored(&edited, Alternative::TensorParallel(2)).unwrap_err();
    assert!(error.to_string().contains(".solved"), "{error}");
    // A file without its problem says what to do.
    let mut bare = stored;
    bare.solved = None;
    let error = compare_stored(&bare, Alternative::TensorParallel(2)).unwrap_err();
    assert!(error.to_string().contains("-o PLACEMENT.json"), "{error}");
}

#[test]
fn fit_by_price_ranks_priced_files_and_lists_the_others_unranked() {
    let dir = tempfile::tempdir().unwrap();
    for file in ["a100-80gb.json", "a100-40gb.json", "h100-sxm-80gb.json"] {
        std::fs::copy(
            Path::new("models/devices").join(file),
            dir.path().join(file),
        )
        .unwrap();
    }
    let mut source = ModelSource::folder("models/llama-3.1-8b");
    source.layers = Some(2);
    let rows = smallest_counts_by(
        &source,
        dir.path(),
        2,
        &BuildOptions::default(),
        1_000_000,
        RankBy::Price,
    )
    .unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r.device_file.rsplit('/').next().unwrap())
        .collect();
    // One device of each serves: the A100-80 ($2.736/h) before the H100 ($4.176/h); the
    // A100-40 has no price and comes after, unranked.
    assert_eq!(
        names,
        ["a100-80gb.json", "h100-sxm-80gb.json", "a100-40gb.json"]
    );
    for row in &rows {
        match (row.count, row.price_per_hour, row.total_price_per_hour) {
            (Some(count), Some(each), Some(total)) => {
                assert_eq!(total.micro_usd, each.micro_usd * count)
            }
            (Some(_), None, None) => assert!(row.device_file.ends_with("a100-40gb.json")),
            other => panic!("{}: {other:?}", row.device_file),
        }
    }
    assert_eq!(rows[0].price_per_hour.unwrap().micro_usd, 2_736_000);
    // By count (memory), the 40 GB device leads.
    let by_count = smallest_counts_by(
        &source,
        dir.path(),
        2,
        &BuildOptions::default(),
        1_000_000,
        RankBy::Count,
    )
    .unwrap();
    assert!(by_count[0].device_file.ends_with("a100-40gb.json"));
}

#[test]
fn host_offload_with_a_serving_point_needs_the_host_link() {
    // A device file without `links.host`: offloaded bytes could not be priced. (The
    // shipped file states its link, and the same placement is timed.)
    let dir = tempfile::tempdir().unwrap();
    let mut json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string("models/devices/rtx-4090-24gb.json").unwrap(),
    )
    .unwrap();
    json.as_object_mut().unwrap().remove("links");
    let bare = dir.path().join("bare.json");
    std::fs::write(&bare, json.to_string()).unwrap();
    let mut source = ModelSource::folder("models/llama-3.1-8b");
    source.layers = Some(2);
    let mut timed = settings(Objective::MinTpot, true);
    timed.serving = Some(jointplan::placement::timing::Serving {
        concurrency: 1,
        input_tokens: 16,
        output_tokens: 16,
        engine: "vllm".to_owned(),
        simulated_requests: None,
        lengths: jointplan::perf::Lengths::Fixed,
        chunked_prefill: None,
    });
    let error = place(
        &source,
        &DeviceSet::uniform(&bare, 1, Some(1 << 40)).unwrap(),
        &timed,
        &BuildOptions::default(),
        1_000_000,
    )
    .unwrap_err();
    assert!(error.is_bad_input(), "{error}");
    let message = error.to_string();
    assert!(
        message.contains("links.host") && message.contains(bare.to_str().unwrap()),
        "{message}"
    );
    let placed = place(
        &source,
        &rtx_4090(Some(1 << 40)),
        &timed,
        &BuildOptions::default(),
        1_000_000,
    )
    .unwrap();
    assert!(placed.performance.is_some());
}
