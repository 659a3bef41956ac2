//! The research queries of `study`: diff, why-not and why-infeasible, each checked against
//! plans built independently in the test (the planner is the oracle).

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use jointplan::builder::BuildOptions;
use jointplan::plan::ExecutionPlan;
use jointplan::request::{NodeId, PlanRequest, ProviderId};
use jointplan::selection::objective_by_name;
use jointplan::study::diff::diff_plans;
use jointplan::study::infeasible::{analyze, Fact};
use jointplan::study::why_not::{why_not, WhyNot};
use jointplan::study::ResearchError;

use crate::common;

const F16: &str = "provider.cuda.causal_paged_attention.f16";
const FLASH: &str = "provider.cuda.causal_paged_attention.f16.flash";

fn decoder() -> &'static PlanRequest {
    static REQUEST: OnceLock<PlanRequest> = OnceLock::new();
    REQUEST.get_or_init(common::models::decoder_2layer)
}

fn options(objective: &str) -> BuildOptions {
    let mut options = BuildOptions {
        threads: std::num::NonZeroUsize::new(1),
        ..Default::default()
    };
    options.selection.objective = Arc::from(objective_by_name(objective, None).unwrap());
    options
}

fn build(request: &PlanRequest, options: &BuildOptions) -> ExecutionPlan {
    ExecutionPlan::build(request, options).unwrap_or_else(|e| panic!("{e}"))
}

fn id(text: &str) -> NodeId {
    NodeId::new(text).unwrap()
}

fn provider(text: &str) -> ProviderId {
    ProviderId::new(text).unwrap()
}

#[test]
fn a_plan_diffed_with_itself_is_empty() {
    let plan = build(decoder(), &options("seed-lex"));
    let diff = diff_plans(&plan, &plan).unwrap();
    assert!(diff.is_empty());
    assert!(diff.programs_equal);
    assert!(diff.nodes_changed.is_empty() && diff.patterns.is_empty());
    assert!(diff.profiles_changed.is_empty());
    assert_eq!(diff.objective.a, diff.objective.b);
    assert!(diff.memory.values().all(|m| m.delta == 0 && m.a == m.b));
}

#[test]
fn the_diff_of_two_objectives_lists_exactly_the_nodes_whose_provider_differs() {
    let a = build(decoder(), &options("seed-lex"));
    let b = build(decoder(), &options("min-penalty"));
    let diff = diff_plans(&a, &b).unwrap();
    let expected: Vec<(String, String, String)> = a
        .payload
        .nodes
        .iter()
        .zip(&b.payload.nodes)
        .filter(|(x, y)| x.selection.selected_provider != y.selection.selected_provider)
        .map(|(x, y)| {
            (
                x.id.to_string(),
                x.selection.selected_provider.to_string(),
                y.selection.selected_provider.to_string(),
            )
        })
        .collect();
    assert!(
        !expected.is_empty(),
        "the objectives must differ on decoder-2layer"
    );
    let listed: Vec<(String, String, String)> = diff
        .nodes_changed
        .iter()
        .map(|c| (c.node.to_string(), c.a.to_string(), c.b.to_string()))
        .collect();
    assert_eq!(listed, expected);
    let grouped: usize = diff.patterns.iter().map(|p| p.count).sum();
    assert_eq!(grouped, expected.len());
    for pattern in &diff.patterns {
        let members: BTreeSet<&str> = pattern.nodes.iter().map(NodeId::as_str).collect();
        let from_plans: BTreeSet<&str> = expected
            .iter()
            .filter(|(_, x, y)| *x == pattern.a.as_str() && *y == pattern.b.as_str())
            .map(|(n, _, _)| n.as_str())
            .collect();
        assert_eq!(members, from_plans);
    }
    // The KV cache's profile is one of the changes, read from the two memory plans.
    let kv = |p: &ExecutionPlan| {
        p.payload
            .memory
            .dynamic_descriptors
            .iter()
            .find(|d| d.base_resource_id.as_str() == "resource/state/kv-cache")
            .map(|d| d.storage.profile.to_string())
    };
    assert_ne!(kv(&a), kv(&b));
    let change = diff
        .profiles_changed
        .iter()
        .find(|c| c.resource.as_str() == "resource/state/kv-cache")
        .unwrap();
    assert_eq!((change.a.clone(), change.b.clone()), (kv(&a), kv(&b)));
    let m = &diff.memory["static_bytes"];
    assert_eq!(m.a as u64, a.payload.memory.static_bytes);
    assert_eq!(m.b as u64, b.payload.memory.static_bytes);
    let m = &diff.memory["minimum_runnable_request_bytes"];
    assert_eq!(
        m.delta,
        b.payload.memory.minimum_runnable_request_bytes as i64
            - a.payload.memory.minimum_runnable_request_bytes as i64
    );
    assert_eq!(diff.objective.a.objective, "seed-lex");
    assert_eq!(diff.objective.b.objective, "min-penalty");
}

#[test]
fn plans_of_different_programs_are_refused() {
    let a = build(decoder(), &options("seed-lex"));
    let b = build(&common::models::tiny(), &options("seed-lex"));
    let error = diff_plans(&a, &b).unwrap_err();
    assert!(
        matches!(error, ResearchError::DifferentPrograms { .. }),
        "{error}"
    );
    assert_eq!(error.kind(), jointplan::ErrorKind::BadInput);
}

#[test]
fn why_not_re_solves_with_the_pin_and_names_the_first_worse_key() {
    let plan = build(decoder(), &options("seed-lex"));
    let node = id("node.layer.1.attention");
    assert_eq!(
        plan.payload
            .nodes
            .iter()
            .find(|n| n.id == node)
            .unwrap()
            .selection
            .selected_provider
            .as_str(),
        F16
    );
    let answer = why_not(
        decoder(),
        &plan,
        &node,
        &provider(FLASH),
        &options("seed-lex"),
        None,
    )
    .unwrap();
    let WhyNot::Feasible {
        plan_id,
        first_difference,
        diff,
        ..
    } = answer
    else {
        panic!("the pin must be feasible: {answer:?}")
    };
    // The oracle: the same request built with the pin, independently.
    let mut pinned_options = options("seed-lex");
    pinned_options.pins.insert(node.clone(), provider(FLASH));
    let pinned = build(decoder(), &pinned_options);
    assert_eq!(plan_id, pinned.payload.plan_id);
    assert_eq!(*diff, diff_plans(&plan, &pinned).unwrap());
    assert!(diff
        .nodes_changed
        .iter()
        .any(|c| c.node == node && c.b.as_str() == FLASH));
    let change = first_difference.expect("the optimum must be strictly better on some key");
    assert!(change.worse, "{change:?}");
    assert_eq!(change.key, "preferred_in_node_order");
    // Asking for the chosen provider is answered without a build.
    let chosen = why_not(
        decoder(),
        &plan,
        &node,
        &provider(F16),
        &options("seed-lex"),
        None,
    )
    .unwrap();
    assert!(matches!(chosen, WhyNot::AlreadyChosen));
    // A plan of another request is refused.
    let other = build(decoder(), &options("min-penalty"));
    let mut tampered = other.clone();
    tampered.payload.selection_settings.objective = None;
    let error = why_not(
        decoder(),
        &tampered,
        &node,
        &provider(F16),
        &options("seed-lex"),
        None,
    )
    .unwrap_err();
    assert!(
        matches!(error, ResearchError::PlanNotOfRequest { .. }),
        "{error}"
    );
}

#[test]
fn why_not_an_impossible_pin_gives_the_minimal_reason() {
    // The plan pins layer 1 to the paged kernel; layer 0 on the contiguous one cannot share
    // the KV cache with it.
    let mut recorded = options("seed-lex");
    recorded
        .pins
        .insert(id("node.layer.1.attention"), provider(F16));
    let plan = build(decoder(), &recorded);
    let answer = why_not(
        decoder(),
        &plan,
        &id("node.layer.0.attention"),
        &provider(FLASH),
        &options("seed-lex"),
        None,
    )
    .unwrap();
    let WhyNot::Infeasible { reason } = answer else {
        panic!("the pin must be infeasible: {answer:?}")
    };
    assert_eq!(reason.kind, "selection");
    let pins: BTreeSet<(String, String)> = reason
        .core
        .iter()
        .filter_map(|f| match f {
            Fact::Pin { node, provider } => Some((node.to_string(), provider.to_string())),
            _ => None,
        })
        .collect();
    assert_eq!(
        pins,
        BTreeSet::from([
            ("node.layer.0.attention".to_owned(), FLASH.to_owned()),
            ("node.layer.1.attention".to_owned(), F16.to_owned()),
        ])
    );
    let nodes: BTreeSet<String> = reason
        .core
        .iter()
        .filter_map(|f| match f {
            Fact::Node { node, .. } => Some(node.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(
        nodes,
        BTreeSet::from([
            "node.layer.0.attention".to_owned(),
            "node.layer.1.attention".to_owned()
        ])
    );
}

#[test]
fn a_selection_core_is_rechecked_by_building_without_each_pin() {
    let pins = [
        ("node.layer.0.attention", FLASH),
        ("node.layer.1.attention", F16),
    ];
    let with = |kept: &[(&str, &str)]| {
        let mut o = options("seed-lex");
        for (n, p) in kept {
            o.pins.insert(id(n), provider(p));
        }
        o
    };
    let all = with(&pins);
    assert!(ExecutionPlan::build(decoder(), &all).is_err());
    let reason = analyze(decoder(), &all).unwrap().expect("infeasible");
    assert_eq!(reason.status, "infeasible");
    assert_eq!(reason.core.len(), 4, "{:?}", reason.core);
    // Without either pin the request builds: each pin fact is necessary (the node facts are
    // checked against brute force in the selection tests).
    for dropped in 0..pins.len() {
        let kept: Vec<(&str, &str)> = pins
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != dropped)
            .map(|(_, p)| *p)
            .collect();
        ExecutionPlan::build(decoder(), &with(&kept))
            .unwrap_or_else(|e| panic!("without pin {dropped}: {e}"));
    }
    assert_eq!(reason.relaxations.len(), 2);
    // A feasible request has no reason.
    assert!(analyze(decoder(), &options("seed-lex")).unwrap().is_none());
}

/// The decoder with a policy capacity 64 MiB short of what its plan needs (reserve
/// included).
fn short_of_capacity() -> jointplan::request::PlanRequest {
    let mut request = decoder().clone();
    let plan = build(&request, &options("seed-lex"));
    let needed =
        plan.payload.memory.static_bytes + plan.payload.memory.minimum_runnable_request_bytes;
    request.policy.memory_capacity_bytes =
        needed + request.policy.memory_reserve_bytes - (64 << 20);
    request
}

#[test]
fn capacity_relaxations_are_exact_by_building_at_the_answer_and_next_to_it() {
    let request = short_of_capacity();
    let o = options("seed-lex");
    let reason = analyze(&request, &o)
        .unwrap()
        .expect("the plan must not fit");
    assert_eq!(reason.kind, "capacity");
    assert!(reason
        .core
        .iter()
        .any(|f| matches!(f, Fact::Capacity { .. })));
    assert!(reason
        .core
        .iter()
        .any(|f| matches!(f, Fact::Allocation { .. })));
    assert!(!reason.relaxations.is_empty());
    for r in &reason.relaxations {
        let at = |value: u64| {
            let mut changed = request.clone();
            match r.field.as_str() {
                "policy.memory_capacity_bytes" => {
                    changed.policy.memory_capacity_bytes = value;
                    let d = &mut changed.catalog.device.total_memory_bytes;
                    *d = (*d).max(value);
                }
                "policy.memory_reserve_bytes" => changed.policy.memory_reserve_bytes = value,
                "policy.maximum_active_sequences" => {
                    changed.policy.maximum_active_sequences = value as u32
                }
                "policy.maximum_scheduled_tokens" => {
                    changed.policy.maximum_scheduled_tokens = value
                }
                other => panic!("unexpected field {other}"),
            }
            ExecutionPlan::build(&changed, &o).is_ok()
        };
        assert!(at(r.to), "{}: {} must build", r.field, r.to);
        let next = if r.to > r.from { r.to - 1 } else { r.to + 1 };
        assert!(!at(next), "{}: {next} must not build ({})", r.field, r.text);
    }
    let capacity = reason
        .relaxations
        .iter()
        .find(|r| r.field == "policy.memory_capacity_bytes")
        .unwrap();
    assert_eq!(capacity.to - capacity.from, 64 << 20);
    let reserve = reason
        .relaxations
        .iter()
        .find(|r| r.field == "policy.memory_reserve_bytes")
        .unwrap();
    assert_eq!(reserve.from - reserve.to, 64 << 20);
}

#[test]
fn the_diff_with_requests_carries_the_memory_report_of_each_side() {
    use jointplan::study::diff::diff_plans_with_reports;
    use jointplan::study::ServingReport;
    let a = build(decoder(), &options("seed-lex"));
    let b = build(decoder(), &options("min-penalty"));
    let diff = diff_plans_with_reports((&a, decoder()), (&b, decoder())).unwrap();
    let (ra, rb) = (
        ServingReport::of(decoder(), &a).unwrap(),
        ServingReport::of(decoder(), &b).unwrap(),
    );
    let item = &diff.memory["report.weights_bytes"];
    assert_eq!(
        (item.a as u64, item.b as u64),
        (ra.weights_bytes, rb.weights_bytes)
    );
    let item = &diff.memory["report.headroom_bytes"];
    assert_eq!(
        (i128::from(item.a), i128::from(item.b)),
        (ra.headroom_bytes, rb.headroom_bytes)
    );
    let item = &diff.memory["report.worst_case_fits"];
    assert_eq!(
        (item.a == 1, item.b == 1),
        (ra.worst_case_fits, rb.worst_case_fits)
    );
    // The plan-only figures are all still there.
    let plain = diff_plans(&a, &b).unwrap();
    assert!(plain
        .memory
        .iter()
        .all(|(k, v)| diff.memory.get(k) == Some(v)));
    // A request of another program is refused.
    let error =
        diff_plans_with_reports((&a, decoder()), (&b, &common::models::tiny())).unwrap_err();
    assert!(
        matches!(error, ResearchError::PlanNotOfRequest { .. }),
        "{error}"
    );
}

#[test]
fn a_spent_search_budget_lists_the_fields_unsearched_and_keeps_the_core() {
    let request = short_of_capacity();
    let o = options("seed-lex");
    let error = ExecutionPlan::build(&request, &o).unwrap_err();
    let reason = jointplan::study::capacity::capacity_infeasibility_within(
        &request,
        &o,
        &error,
        std::time::Duration::ZERO,
    )
    .unwrap()
    .expect("a capacity failure has a reason");
    assert_eq!(reason.kind, "capacity");
    assert!(reason.relaxations.is_empty());
    // The decoder's minimum runnable bytes are below the 64 MiB it is short by: the static
    // bytes alone overflow, which the sequence and token ceilings do not size, so those are
    // answered without a build (a note, not "unsearched"); the reserve covers the shortfall
    // and is searched like the capacity.
    assert!(matches!(
        error,
        jointplan::builder::error::PlanError::Memory(
            jointplan::memory::MemoryError::StaticExceedsUsable { .. }
        )
    ));
    assert_eq!(
        reason.unsearched,
        [
            "policy.memory_capacity_bytes",
            "policy.memory_reserve_bytes"
        ]
    );
    assert!(
        reason.notes[0].contains("static allocations alone"),
        "{:?}",
        reason.notes
    );
    assert!(reason
        .core
        .iter()
        .any(|f| matches!(f, Fact::Capacity { .. })));
    // With the default budget the same request is searched in full.
    let full = analyze(&request, &o).unwrap().unwrap();
    assert!(full.unsearched.is_empty());
    assert!(!full.relaxations.is_empty());
}

#[test]
fn a_priced_diff_splits_each_change_by_node_and_the_parts_add_up() {
    use jointplan::study::diff::{add_time, diff_plans_with_reports, DiffPricers};
    use jointplan::study::timing::{Load, Pricer};
    let device = jointplan::synth::DeviceDescription::read(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/devices/h100-sxm-80gb.json"),
    )
    .unwrap();
    let load = Load {
        concurrency: 4,
        input_tokens: 300,
        output_tokens: 8,
        engine: "vllm".to_owned(),
        lengths: jointplan::perf::Lengths::Fixed,
    };
    let pricer = Pricer::on_device(load, &device, Default::default()).unwrap();
    // llama-3.2-1b's first two layers under the server policy: `min-penalty` moves the
    // linear nodes to the reference kernels (another efficiency class).
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let source = jointplan::synth::ModelSource {
        layers: Some(2),
        policy: Some("server".to_owned()),
        ..jointplan::synth::ModelSource::folder(root.join("models/llama-3.2-1b"))
    };
    let request = &source.synthesize().unwrap().request;
    let (a, b) = (
        build(request, &options("seed-lex")),
        build(request, &options("min-penalty")),
    );
    let mut diff = diff_plans_with_reports((&a, request), (&b, request)).unwrap();
    let pricers = DiffPricers {
        a: pricer.clone(),
        b: pricer.clone(),
        source: "test".to_owned(),
    };
    add_time(&mut diff, (&a, request), (&b, request), &pricers).unwrap();
    let close = |x: f64, y: f64| (x - y).abs() <= 1e-6 * x.abs().max(y.abs()) + 1e-12;
    assert!(!diff.patterns.is_empty());
    for pattern in &diff.patterns {
        let time = pattern.time.as_ref().expect("each change is priced");
        assert_eq!(pattern.node_times.len(), pattern.nodes.len());
        // The nodes' candidate costs (whole picoseconds) add up to the change's step time.
        let prefill: f64 = pattern.node_times.iter().map(|t| t.prefill_seconds).sum();
        let decode: f64 = pattern
            .node_times
            .iter()
            .map(|t| t.decode_step_seconds)
            .sum();
        assert!(
            close(prefill, time.prefill_seconds),
            "{prefill} vs {time:?}"
        );
        assert!(
            close(decode, time.decode_step_seconds),
            "{decode} vs {time:?}"
        );
    }
    // Each side is priced as the plan alone is.
    let t = diff.time.as_ref().unwrap();
    assert_eq!(
        t.tpot_seconds.a,
        pricer.price(request, &a).unwrap().tpot_seconds
    );
    assert_eq!(
        t.ttft_seconds.b,
        pricer.price(request, &b).unwrap().ttft_seconds
    );
}
