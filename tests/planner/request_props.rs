//! Property tests over randomly generated valid plan requests (issue 2, item 9).
//!
//! Each case is a Qwen3-style decoder from `common::request_generator`: one to three
//! layers, each with a paged attention and its token-scaled KV-cache state, a gated-delta
//! linear attention with zero-initialised recurrent states, or no mixer; a catalog with the
//! paged, the flash or both attention kernels; per-layer preferences; a policy profile order
//! with or without the paged profile, a device with or without it; a shared or per-layer KV
//! cache; in-place or separate residuals; varied sizes, ceilings, reusable execution and
//! retention. Every generated request must:
//!
//! - build, under rayon pools of 1 and 2 threads, to byte-identical canonical plan JSON;
//! - verify against its own plan;
//! - select exactly what brute force, the reference frontier and the closure frontier
//!   choose on the selection problem plan building derives (`jointplan::candidates`);
//! - explain every preferred provider it did not choose with typed rejection evidence;
//! - give every resource the lowest-ranked profile all its chosen candidates allow;
//! - fail `verify` once any one leaf field of the plan is tampered with (three random leaves
//!   per case), naming that field's JSON path when the tampered plan still parses.
//!
//! `REQUEST_PROPS_CASES` overrides the case count (default 200).

use crate::common;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::common::verify_tree as verify;
use common::model_parts::{FLASH, PAGED};
use common::request_generator::*;
use jointplan::builder::BuildOptions;
use jointplan::candidates::{derive_candidates, selection_problem};
use jointplan::canonical::canonical_json;
use jointplan::plan::{ExecutionPlan, SelectionReason};
use jointplan::request::{NodeId, NodeResolution, PlanRequest, ProgramNode, StorageProfile};
use jointplan::selection::{
    brute_force, frontier_solve, FrontierKind, FrontierResult, SeedLex, SelectionProblem,
};
use jointplan::verify::VerifyError;
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::Value;

fn cases() -> u32 {
    std::env::var("REQUEST_PROPS_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

fn layer() -> impl Strategy<Value = LayerSpec> {
    (
        prop_oneof![
            3 => Just(Mixer::Attention),
            1 => Just(Mixer::GatedDelta),
            1 => Just(Mixer::Nothing)
        ],
        prop_oneof![
            Just(Preference::Neither),
            Just(Preference::Paged),
            Just(Preference::Flash)
        ],
        any::<bool>(),
    )
        .prop_map(|(mixer, preferred, in_place_residual)| LayerSpec {
            mixer,
            preferred,
            in_place_residual,
        })
}

pub(crate) fn decoder_spec() -> impl Strategy<Value = DecoderSpec> {
    let shape = (
        prop::collection::vec(layer(), 1..=3),
        prop::sample::select(vec![256u64, 512, 1024]),
        prop::sample::select(vec![64u64, 128]),
        prop::sample::select(vec![1u64, 2, 4]),
        prop::sample::select(vec![2u64, 3, 4]),
        prop::sample::select(vec![1024u64, 32_000, 151_936]),
        prop::sample::select(vec![1u64, 8, 16, 64]),
        prop::sample::select(vec![2048u64, 8192, 32_768]),
    );
    let catalog = (
        prop_oneof![
            Just(AttentionKernels::Paged),
            Just(AttentionKernels::Flash),
            Just(AttentionKernels::Both)
        ],
        prop_oneof![
            Just(ProfileOrder::LinearOnly),
            Just(ProfileOrder::LinearThenPaged),
            Just(ProfileOrder::PagedThenLinear)
        ],
        prop::bool::weighted(0.8),
        any::<bool>(),
    );
    let policy = (
        prop::sample::select(vec![1u32, 4, 8]),
        prop::sample::select(vec![64u64, 512, 2048]),
        any::<bool>(),
        any::<bool>(),
    );
    (shape, catalog, policy)
        .prop_map(
            |(
                (layers, hidden, head_dim, kv_group, intermediate_factor, vocab, tokens, context),
                (kernels, order, device_paged, shared_kv),
                (sequences, scheduled_tokens, reusable, retain_final_hidden),
            )| DecoderSpec {
                layers,
                hidden,
                head_dim,
                kv_group,
                intermediate_factor,
                vocab,
                tokens,
                context,
                kernels,
                order,
                device_paged,
                shared_kv,
                sequences,
                scheduled_tokens,
                reusable,
                retain_final_hidden,
            },
        )
        .prop_filter("some attention kernel must be usable", |s| s.plannable())
}

fn build_in(threads: usize, request: &PlanRequest) -> Result<ExecutionPlan, String> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| e.to_string())?;
    pool.install(|| ExecutionPlan::build(request, &BuildOptions::default()))
        .map_err(|e| format!("build under {threads} thread(s): {e}"))
}

/// The selection problem exactly as plan building derives it (rules 3.1), and the
/// profile each resource must get once `chosen` (node id → provider) is fixed: the
/// lowest-ranked profile of the policy order that every chosen candidate touching the
/// resource allows (rules 3.2).
fn derived_selection(
    request: &PlanRequest,
    chosen: &BTreeMap<String, String>,
) -> (SelectionProblem, BTreeMap<String, StorageProfile>) {
    let by_node: HashMap<&NodeId, &NodeResolution> = request
        .node_resolutions
        .iter()
        .map(|r| (&r.node_id, r))
        .collect();
    let pairs: Vec<(&ProgramNode, &NodeResolution)> = request
        .family
        .program
        .nodes()
        .map(|n| (n, by_node[&n.id]))
        .collect();
    let candidates = derive_candidates(&request.catalog, &request.policy, &pairs)
        .unwrap_or_else(|e| panic!("candidates of a generated request: {e}"));
    let mut allowed: BTreeMap<String, BTreeSet<StorageProfile>> = BTreeMap::new();
    for node in &candidates {
        let provider = &chosen[node.node.as_str()];
        let candidate = node
            .candidates
            .iter()
            .find(|c| c.plan.provider_id.as_str() == provider)
            .unwrap_or_else(|| panic!("{}: {provider} is no candidate", node.node));
        for (resource, profiles) in &candidate.allowed {
            let entry = allowed
                .entry(resource.to_string())
                .or_insert_with(|| profiles.clone());
            *entry = entry.intersection(profiles).copied().collect();
        }
    }
    let order = &request.policy.dynamic_storage_profile_order;
    let profiles = allowed
        .into_iter()
        .map(|(resource, set)| {
            let best = order
                .iter()
                .find(|p| set.contains(p))
                .unwrap_or_else(|| panic!("{resource}: no common profile"));
            (resource, *best)
        })
        .collect();
    (selection_problem(&request.policy, &candidates), profiles)
}

/// Every leaf of a JSON tree: its JSON pointer and its path as `verify` names it.
fn leaves(value: &Value, pointer: String, path: String, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let plain = key
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                let child_path = match (plain, path.is_empty()) {
                    (true, true) => key.clone(),
                    (true, false) => format!("{path}.{key}"),
                    (false, _) => format!("{path}[{key:?}]"),
                };
                let escaped = key.replace('~', "~0").replace('/', "~1");
                leaves(child, format!("{pointer}/{escaped}"), child_path, out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                leaves(child, format!("{pointer}/{i}"), format!("{path}[{i}]"), out);
            }
        }
        _ => out.push((pointer, path)),
    }
}

/// A different value of the same JSON kind where possible.
fn tampered(value: &Value) -> Value {
    match value {
        Value::Bool(b) => Value::Bool(!b),
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => Value::from(if u == u64::MAX { u - 1 } else { u + 1 }),
            (None, Some(i), _) => Value::from(i.wrapping_add(1)),
            (_, _, Some(f)) => Value::from(f + 1.0),
            _ => Value::from(0),
        },
        Value::String(text) => {
            let mut chars: Vec<char> = text.chars().collect();
            match chars.last_mut() {
                // Flip the last character (a hex digit stays a hex digit, a digit a digit).
                Some(c) if c.is_ascii_hexdigit() => {
                    *c = if *c == '0' { '1' } else { '0' };
                    chars.into_iter().collect()
                }
                _ => format!("{text}x"),
            }
            .into()
        }
        Value::Null => Value::from(0),
        other => other.clone(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn generated_requests_plan_verify_select_exactly_and_reject_tampering(
        spec in decoder_spec(),
        picks in prop::collection::vec(any::<Index>(), 3),
    ) {
        let request = spec.request();
        let plan = build_in(1, &request).map_err(TestCaseError::fail)?;
        let one = canonical_json("plan", &plan).unwrap();
        let two = canonical_json("plan", &build_in(2, &request).map_err(TestCaseError::fail)?)
            .unwrap();
        prop_assert!(one == two, "1 and 2 threads give different plans");

        let tree = plan.to_json_tree().unwrap();
        let verified = verify(&request, &tree, &BuildOptions::default());
        prop_assert!(verified.is_ok(), "verify of its own plan: {:?}", verified.err());

        // The plan's choices are the exact optimum of the derived selection problem.
        let chosen: BTreeMap<String, String> = plan
            .payload
            .nodes
            .iter()
            .map(|n| (n.id.to_string(), n.selection.selected_provider.to_string()))
            .collect();
        let (problem, expected_profiles) = derived_selection(&request, &chosen);
        let expected = FrontierResult::Optimal(chosen);
        let brute = brute_force(&problem, &SeedLex, 100_000).unwrap();
        prop_assert_eq!(&brute, &expected, "brute force");
        for kind in [FrontierKind::Reference, FrontierKind::Closure] {
            let frontier = frontier_solve(&problem, &SeedLex, kind, 1_000_000).unwrap();
            prop_assert_eq!(&frontier, &expected, "{:?} frontier", kind);
        }

        // Every resource of the chosen candidates has the forced profile (rules 3.2).
        let memory = &plan.payload.memory;
        let planned: BTreeMap<String, StorageProfile> = memory
            .static_allocations
            .iter()
            .map(|a| (a.resource_id.to_string(), a.storage.profile))
            .chain(
                memory
                    .dynamic_descriptors
                    .iter()
                    .map(|d| (d.base_resource_id.to_string(), d.storage.profile)),
            )
            .collect();
        for (resource, profile) in &expected_profiles {
            prop_assert_eq!(planned.get(resource), Some(profile), "profile of {}", resource);
        }

        // A preferred provider that lost is explained with typed evidence.
        for node in &plan.payload.nodes {
            let selection = &node.selection;
            match &selection.requested_provider {
                None => prop_assert_eq!(
                    selection.selection_reason,
                    SelectionReason::CanonicalCompatible
                ),
                Some(p) if *p == selection.selected_provider => prop_assert_eq!(
                    selection.selection_reason,
                    SelectionReason::PreferredCompatible
                ),
                Some(p) => {
                    prop_assert_eq!(
                        selection.selection_reason,
                        SelectionReason::FallbackFromPreferred
                    );
                    prop_assert!(
                        selection.rejected_providers.iter().any(|r| &r.provider_id == p),
                        "node {}: no evidence for the preferred {}", node.id, p
                    );
                }
            }
        }

        // Tampering with any one leaf fails verify, naming the leaf when the plan parses.
        let mut all = Vec::new();
        leaves(&tree, String::new(), String::new(), &mut all);
        for pick in &picks {
            let (pointer, path) = pick.get(&all).clone();
            let mut bad = tree.clone();
            let slot = bad.pointer_mut(&pointer).unwrap();
            *slot = tampered(slot);
            match verify(&request, &bad, &BuildOptions::default()) {
                Ok(_) => prop_assert!(false, "tampering {} was not detected", path),
                Err(VerifyError::Differs { difference, .. }) => {
                    prop_assert_eq!(difference.path, path)
                }
                Err(VerifyError::Malformed { .. } | VerifyError::NonCanonical(_)) => {}
                Err(other) => prop_assert!(false, "tampering {}: unexpected {}", path, other),
            }
        }
    }
}

/// A two-layer spec with a shared KV cache, both kernels and linear-then-paged order.
fn base_spec() -> DecoderSpec {
    let layer = |preferred| LayerSpec {
        mixer: Mixer::Attention,
        preferred,
        in_place_residual: true,
    };
    DecoderSpec {
        layers: vec![layer(Preference::Paged), layer(Preference::Flash)],
        hidden: 512,
        head_dim: 64,
        kv_group: 2,
        intermediate_factor: 3,
        vocab: 32_000,
        tokens: 8,
        context: 8192,
        kernels: AttentionKernels::Both,
        order: ProfileOrder::LinearThenPaged,
        device_paged: true,
        shared_kv: true,
        sequences: 4,
        scheduled_tokens: 512,
        reusable: true,
        retain_final_hidden: false,
    }
}

/// The rejection evidence of node `node` for `provider` in the plan of `spec`.
fn evidence(spec: &DecoderSpec, node: &str, provider: &str) -> (SelectionReason, Value) {
    let plan = build_in(1, &spec.request()).unwrap_or_else(|e| panic!("{e}"));
    let node = plan
        .payload
        .nodes
        .iter()
        .find(|n| n.id.as_str() == node)
        .unwrap_or_else(|| panic!("no node {node}"));
    let rejected = node
        .selection
        .rejected_providers
        .iter()
        .find(|r| r.provider_id.as_str() == provider)
        .unwrap_or_else(|| panic!("no evidence for {provider}: {:?}", node.selection));
    (
        node.selection.selection_reason,
        serde_json::to_value(&rejected.reasons).unwrap(),
    )
}

// The property's generator reaches every kind of fallback evidence; these pin one spec each.

#[test]
fn generator_reaches_a_storage_conflict_on_the_shared_kv_cache() {
    let (reason, reasons) = evidence(&base_spec(), "node.layer.1.attention", FLASH);
    assert_eq!(reason, SelectionReason::FallbackFromPreferred);
    assert_eq!(
        reasons,
        serde_json::json!({"storage_incompatible": {"resource_ids": ["resource/state/kv-cache"]}})
    );
}

#[test]
fn generator_reaches_a_resolution_local_rejection() {
    let spec = DecoderSpec {
        order: ProfileOrder::LinearOnly,
        ..base_spec()
    };
    let (reason, reasons) = evidence(&spec, "node.layer.0.attention", PAGED);
    assert_eq!(reason, SelectionReason::FallbackFromPreferred);
    assert_eq!(
        reasons,
        serde_json::json!({"storage_incompatible": {"resource_ids": ["resource/state/kv-cache"]}})
    );
}

#[test]
fn generator_reaches_a_not_registered_preference() {
    let spec = DecoderSpec {
        kernels: AttentionKernels::Paged,
        ..base_spec()
    };
    let (reason, reasons) = evidence(&spec, "node.layer.1.attention", FLASH);
    assert_eq!(reason, SelectionReason::FallbackFromPreferred);
    assert_eq!(reasons, serde_json::json!("not_registered"));
}

#[test]
fn generator_with_separate_kv_caches_keeps_each_preference() {
    let spec = DecoderSpec {
        shared_kv: false,
        ..base_spec()
    };
    let plan = build_in(1, &spec.request()).unwrap_or_else(|e| panic!("{e}"));
    for node in plan
        .payload
        .nodes
        .iter()
        .filter(|n| n.id.as_str().ends_with(".attention"))
    {
        assert_eq!(
            node.selection.selection_reason,
            SelectionReason::PreferredCompatible,
            "{}",
            node.id
        );
    }
}

#[test]
fn generator_reaches_zero_initialised_recurrent_states() {
    let mut spec = base_spec();
    spec.layers[1].mixer = Mixer::GatedDelta;
    let plan = build_in(1, &spec.request()).unwrap_or_else(|e| panic!("{e}"));
    let zeroed: Vec<String> = plan
        .payload
        .memory
        .dynamic_descriptors
        .iter()
        .filter(|d| serde_json::to_value(d).unwrap()["initialization"] == "zero")
        .map(|d| d.base_resource_id.to_string())
        .collect();
    assert_eq!(
        zeroed,
        [
            "resource/state/layer.1.conv",
            "resource/state/layer.1.delta"
        ]
    );
}
