//! Time objectives at the plan level (`--objective min-tpot|min-ttft|max-throughput` with a
//! serving point): the chosen plan's predicted decode step is no slower than that of any
//! other plan we can build on a small model (every other objective, and the time objective
//! with each node's chosen provider forbidden in turn), priced by the performance model's
//! own step rule (`perf::plan_time_model`, not the selection's picosecond costs); the
//! objective and the serving point are recorded and verified, a tampered serving point is
//! rejected, and a time objective without a serving point is refused.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use jointplan::builder::time_costs::{recorded_serving, serving_point};
use jointplan::builder::BuildOptions;
use jointplan::perf::{self, Calibration};
use jointplan::plan::hash::{plan_hash, plan_id};
use jointplan::plan::{ExecutionPlan, RecordedServing};
use jointplan::request::{NodeId, PlanRequest, ProviderId};
use jointplan::selection::objective_by_name;
use jointplan::synth::{DeviceDescription, ModelSource};
use jointplan::verify::verify_text;

fn request() -> &'static PlanRequest {
    static REQUEST: OnceLock<PlanRequest> = OnceLock::new();
    REQUEST.get_or_init(|| {
        let mut source =
            ModelSource::folder(concat!(env!("CARGO_MANIFEST_DIR"), "/models/llama-3.2-1b"));
        source.layers = Some(2);
        source.synthesize().unwrap().request
    })
}

fn device() -> DeviceDescription {
    DeviceDescription::read(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("models/devices/h100-sxm-80gb.json"),
    )
    .unwrap()
}

fn serving() -> RecordedServing {
    let d = device();
    recorded_serving(
        16,
        512,
        128,
        "vllm",
        &d.name,
        d.performance.as_ref().unwrap(),
    )
}

fn options(objective: &str) -> BuildOptions {
    let mut options = BuildOptions {
        threads: std::num::NonZeroUsize::new(1),
        ..Default::default()
    };
    options.selection.objective = Arc::from(objective_by_name(objective, None).unwrap());
    options.serving = Some(serving());
    options
}

/// The decode step's node time of `plan` at the serving point (the performance model's
/// rule, summed in `f64` over every node).
fn decode_seconds(plan: &ExecutionPlan) -> f64 {
    let model = perf::plan_time_model(request(), plan, &device(), Calibration::default()).unwrap();
    let point = serving_point(request(), &serving());
    let engine = perf::engine_profile(&point.engine).unwrap();
    perf::serving::decode_step_time(&model, &engine, &point).seconds
}

fn chosen(plan: &ExecutionPlan) -> BTreeMap<NodeId, ProviderId> {
    plan.payload
        .nodes
        .iter()
        .map(|n| (n.id.clone(), n.selection.selected_provider.clone()))
        .collect()
}

#[test]
fn min_tpot_is_no_slower_than_every_alternative_plan() {
    let best = ExecutionPlan::build(request(), &options("min-tpot")).unwrap();
    let t_best = decode_seconds(&best);
    let nodes = best.payload.nodes.len() as f64;
    // Each node's time is rounded to a picosecond in the selection problem.
    let slack = nodes * 1e-12;
    let mut alternatives = 0;
    let mut distinct = BTreeSet::new();
    distinct.insert(chosen(&best));
    for name in [
        "seed-lex",
        "min-penalty",
        "max-preferred",
        "min-ttft",
        "max-throughput",
    ] {
        let plan = ExecutionPlan::build(request(), &options(name)).unwrap();
        let t = decode_seconds(&plan);
        assert!(
            t_best <= t + slack,
            "{name}: {t} s beats min-tpot's {t_best} s"
        );
        distinct.insert(chosen(&plan));
        alternatives += 1;
    }
    for (node, provider) in chosen(&best) {
        let mut o = options("min-tpot");
        o.forbids
            .entry(node.clone())
            .or_default()
            .insert(provider.clone());
        // A node with a single candidate cannot lose it.
        let Ok(plan) = ExecutionPlan::build(request(), &o) else {
            continue;
        };
        let t = decode_seconds(&plan);
        assert!(
            t_best <= t + slack,
            "forbidding {provider} at {node}: {t} s beats min-tpot's {t_best} s"
        );
        distinct.insert(chosen(&plan));
        alternatives += 1;
    }
    assert!(alternatives > 5);
    assert!(
        distinct.len() > 2,
        "the alternatives must differ in their providers ({} distinct)",
        distinct.len()
    );
}

#[test]
fn a_time_objective_is_recorded_verified_and_its_tampering_rejected() {
    let plan = ExecutionPlan::build(request(), &options("min-tpot")).unwrap();
    let settings = &plan.payload.selection_settings;
    assert_eq!(settings.objective.as_deref(), Some("min-tpot"));
    assert_eq!(settings.serving.as_ref(), Some(&serving()));
    let file = String::from_utf8(plan.write_json(Vec::new()).unwrap()).unwrap();
    let verified = verify_text(request(), &file, &BuildOptions::default()).unwrap();
    assert_eq!(verified, plan);
    // Without its serving point, re-hashed so that only the setting is missing: the
    // rebuild cannot price the candidates, and verify refuses the plan.
    let mut tree = plan.to_json_tree().unwrap();
    tree["payload"]["selection_settings"]
        .as_object_mut()
        .unwrap()
        .remove("serving");
    let mut tampered = ExecutionPlan::from_json_tree(tree).unwrap();
    tampered.plan_hash = plan_hash(&tampered.payload).unwrap();
    tampered.payload.plan_id = plan_id(&tampered.plan_hash);
    let text = tampered.to_json_text().unwrap();
    let err = verify_text(request(), &text, &BuildOptions::default()).unwrap_err();
    assert!(err.to_string().contains("serving point"), "{err}");
    // Every other objective records no serving point (plans keep their bytes).
    let plain = ExecutionPlan::build(request(), &options("seed-lex")).unwrap();
    assert!(plain.payload.selection_settings.serving.is_none());
}

#[test]
fn a_time_objective_without_a_serving_point_is_refused() {
    let mut o = options("min-ttft");
    o.serving = None;
    let err = ExecutionPlan::build(request(), &o).unwrap_err().to_string();
    assert!(err.contains("serving point"), "{err}");
}
