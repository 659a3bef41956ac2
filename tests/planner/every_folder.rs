//! Every shipped model folder (`models/*/`) under every policy preset, with jointplan's own
//! budget and with each engine's (`--engine vllm|sglang|trtllm|llama.cpp`), on every shipped
//! device (`models/devices/*.json`): it plans, or it is refused with a lever that has an
//! amount (more capacity, a shorter context, fewer sequences, a smaller weight format or
//! more devices).
//!
//! The cheapest query that decides it: one full build per folder, preset and device kind
//! (backend, capabilities and storage profiles: what the synthesized program and its
//! providers depend on) on a roomy copy of the device, then each device's and each engine's
//! budget applied to that plan's report (`ServingReport::at_budget`). The move is exact
//! when the planner's own check passes under the budget (`fits_same_selection`: the same
//! selection is feasible there, and the selection does not weigh memory); when it does not,
//! the device is planned for real, and its failure must be a capacity infeasibility. When
//! the weights alone exceed the usable capacity no selection can fit (providers and storage
//! profiles choose kernels and KV layouts, never the bytes of a weight), so the refusal is
//! read off the moved report; that premise is checked by a real build the first time it is
//! used for each folder, preset and device kind (a real build of DeepSeek-V3 on every
//! device and budget was most of this test's time).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use jointplan::engine::{EngineArgs, EngineChoice};
use jointplan::plan::ExecutionPlan;
use jointplan::study::budget::{fits_same_selection, Budget};
use jointplan::study::engine_facts::{device_facts, engine_report};
use jointplan::study::report::ServingLimits;
use jointplan::study::ServingReport;
use jointplan::synth::{DeviceDescription, ModelSource, PolicyPreset};
use jointplan::BuildOptions;
use rayon::prelude::*;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn folders() -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(root().join("models"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("config.json").is_file())
        .collect();
    found.sort();
    found
}

fn devices() -> Vec<(PathBuf, DeviceDescription)> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(root().join("models/devices"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    found.sort();
    found
        .into_iter()
        .map(|p| {
            let d = DeviceDescription::read(&p).unwrap();
            (p, d)
        })
        .collect()
}

/// What the synthesized program and its providers depend on (not the memory).
fn kind(device: &DeviceDescription) -> String {
    format!(
        "{:?} {:?} {:?}",
        device.backend, device.capabilities, device.storage_profiles
    )
}

/// Whether a refusal names a lever and its amount.
fn has_lever_with_amount(text: &str) -> bool {
    let levers = [
        "more capacity",
        "a shorter context",
        "fewer sequences",
        "smaller weight format",
        "more devices",
    ];
    text.split("; ").any(|part| {
        levers.iter().any(|l| part.contains(l)) && part.chars().any(|c| c.is_ascii_digit())
    })
}

/// The refusal of the roomy plan's report moved to `budget` (empty when it fits there).
fn moved_lever(
    report: &ServingReport,
    limits: &ServingLimits,
    budget: &Budget,
    request: &jointplan::PlanRequest,
    required: u64,
) -> String {
    let (moved, moved_limits) = report.at_budget(limits, budget);
    moved
        .refusal(request, &moved_limits, required)
        .map(|r| r.to_string())
        .unwrap_or_default()
}

#[derive(Default, Debug)]
struct Tally {
    plans: u32,
    refused: u32,
    built_on_device: u32,
    /// Refusals whose weights alone exceed the usable capacity, read off the moved report.
    weights_overflow: u32,
    engine_not_modelled: BTreeMap<String, u32>,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.plans += other.plans;
        self.refused += other.refused;
        self.built_on_device += other.built_on_device;
        self.weights_overflow += other.weights_overflow;
        for (what, count) in other.engine_not_modelled {
            *self.engine_not_modelled.entry(what).or_default() += count;
        }
    }
}

#[test]
fn every_folder_plans_under_every_preset_and_engine_on_every_device_or_names_its_lever() {
    let start = Instant::now();
    let options = BuildOptions::default();
    let devices = devices();
    assert!(
        devices.len() >= 9,
        "models/devices holds the shipped devices"
    );
    let mut kinds: BTreeMap<String, Vec<&(PathBuf, DeviceDescription)>> = BTreeMap::new();
    for entry in &devices {
        kinds.entry(kind(&entry.1)).or_default().push(entry);
    }
    let engines: Vec<EngineChoice> = ["vllm", "sglang", "trtllm", "llama.cpp"]
        .iter()
        .map(|e| e.parse().unwrap())
        .collect();
    // One folder a task: the folders are independent, and DeepSeek-V3's and the other large
    // folders' builds are most of the test's time.
    let per_folder: Vec<(Tally, Vec<String>)> = folders()
        .par_iter()
        .map(|folder| check_folder(folder, &kinds, &engines, &options))
        .collect();
    let mut tally = Tally::default();
    let mut lever_less = Vec::new();
    for (folder_tally, folder_lever_less) in per_folder {
        tally.add(folder_tally);
        lever_less.extend(folder_lever_less);
    }
    eprintln!(
        "every folder x preset x budget x device: {tally:?} in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    assert!(tally.plans > 0 && tally.refused > 0, "{tally:?}");
    assert!(
        lever_less.is_empty(),
        "refusals without a lever and its amount:\n{}",
        lever_less.join("\n")
    );
}

/// One folder under both presets on every device kind and budget: its tally and the
/// refusals that name no lever with an amount.
/// Counts a planned answer, or a refusal (kept in `lever_less` when it names no lever with
/// an amount).
fn tally_answer(
    tally: &mut Tally,
    lever_less: &mut Vec<String>,
    what: &str,
    refusal: Option<impl std::fmt::Display>,
) {
    match refusal {
        None => tally.plans += 1,
        Some(refusal) => {
            tally.refused += 1;
            let text = refusal.to_string();
            if !has_lever_with_amount(&text) {
                lever_less.push(format!("{what}: {text}"));
            }
        }
    }
}

fn check_folder(
    folder: &Path,
    kinds: &BTreeMap<String, Vec<&(PathBuf, DeviceDescription)>>,
    engines: &[EngineChoice],
    options: &BuildOptions,
) -> (Tally, Vec<String>) {
    let mut tally = Tally::default();
    let mut lever_less = Vec::new();
    for preset_name in ["interactive", "server"] {
        let preset = PolicyPreset::resolve(preset_name).unwrap();
        let required = u64::from(preset.required_sequences());
        let mut source = ModelSource::folder(folder);
        source.policy = Some(preset_name.to_owned());
        for members in kinds.values() {
            // Whether a real build has confirmed that weights beyond the usable
            // capacity fail the build (once per folder, preset and device kind).
            let mut overflow_confirmed = false;
            let (file, device) = members[0];
            let mut roomy = device.clone();
            roomy.total_memory_bytes = 1 << 50;
            let synthesized = source.synthesize_on(&roomy, file).unwrap();
            let request = &synthesized.request;
            let plan = ExecutionPlan::build(request, options).unwrap();
            let (report, limits) = ServingReport::with_limits(request, &plan).unwrap();
            for (file, device) in members {
                let runtime = preset.runtime_policy(device).unwrap();
                let mut budgets = vec![(
                    "preset".to_owned(),
                    Budget {
                        capacity_bytes: runtime.memory_capacity_bytes,
                        reserve_bytes: runtime.memory_reserve_bytes,
                        rule: "the preset's".to_owned(),
                    },
                )];
                for choice in engines {
                    let args = EngineArgs::parse::<&str>(&[]).unwrap();
                    match engine_report(request, device, &preset, choice, &args) {
                        Ok(engine) => budgets.push((
                            choice.engine.name().to_owned(),
                            jointplan::study::budget::engine_budget(
                                &engine,
                                device_facts(device).total_bytes,
                            ),
                        )),
                        Err(e) => {
                            let text = e.to_string();
                            assert!(text.contains("not modelled"), "{text}");
                            *tally
                                .engine_not_modelled
                                .entry(format!(
                                    "{} under {}",
                                    folder.file_name().unwrap().to_string_lossy(),
                                    choice.engine.name()
                                ))
                                .or_default() += 1;
                        }
                    }
                }
                for (by, mut budget) in budgets {
                    budget.capacity_bytes = budget.capacity_bytes.min(device.total_memory_bytes);
                    let what = format!(
                        "{} under {preset_name}, budget {by}, on {}",
                        folder.display(),
                        file.display()
                    );
                    if budget.reserve_bytes >= budget.capacity_bytes {
                        lever_less.push(format!("{what}: the reserve exceeds the capacity"));
                        continue;
                    }
                    if fits_same_selection(&plan, &budget) {
                        let (moved, moved_limits) = report.at_budget(&limits, &budget);
                        let refusal = moved.refusal(request, &moved_limits, required);
                        tally_answer(&mut tally, &mut lever_less, &what, refusal);
                        continue;
                    }
                    if report.weights_bytes > budget.usable_bytes() && overflow_confirmed {
                        // No selection fits: the weights alone exceed the capacity.
                        tally.refused += 1;
                        tally.weights_overflow += 1;
                        let lever = moved_lever(&report, &limits, &budget, request, required);
                        if !has_lever_with_amount(&lever) {
                            lever_less.push(format!("{what}: weights overflow / {lever}"));
                        }
                        continue;
                    }
                    // The same selection does not pass the planner's check: plan the
                    // device for real (its own selection may differ).
                    tally.built_on_device += 1;
                    let on_device = source.synthesize_on(device, file).unwrap();
                    let real = match by.as_str() {
                        "preset" => on_device.request,
                        _ => {
                            let mut r = on_device.request;
                            r.policy.memory_capacity_bytes = budget.capacity_bytes;
                            r.policy.memory_reserve_bytes = budget.reserve_bytes;
                            jointplan::request::seal::seal(&mut r).unwrap();
                            r
                        }
                    };
                    match ExecutionPlan::build(&real, options) {
                        Ok(real_plan) => {
                            assert!(
                                report.weights_bytes <= budget.usable_bytes(),
                                "{what}: planned although its weights exceed the usable capacity"
                            );
                            let (r, l) = ServingReport::with_limits(&real, &real_plan).unwrap();
                            let refusal = r.refusal(&real, &l, required);
                            tally_answer(&mut tally, &mut lever_less, &what, refusal);
                        }
                        Err(error) => {
                            // The capacity refusal: the static bytes (or static +
                            // minimum runnable) exceed the usable capacity, by an amount
                            // the error states; `plan` adds the relaxations.
                            if report.weights_bytes > budget.usable_bytes() {
                                overflow_confirmed = true;
                            }
                            tally.refused += 1;
                            let text = error.to_string();
                            assert_eq!(
                                error.kind(),
                                jointplan::ErrorKind::Infeasible,
                                "{what}: {text}"
                            );
                            let lever = moved_lever(&report, &limits, &budget, request, required);
                            if !has_lever_with_amount(&lever) {
                                lever_less.push(format!("{what}: {text} / {lever}"));
                            }
                        }
                    }
                }
            }
        }
    }
    (tally, lever_less)
}
