//! Property tests over randomly generated valid plan requests (issue 2, item 9).
//!
//! Each case is a Qwen3-style decoder from `common::request_generator`: one to three
//! layers, each with or without a token-scaled KV-cache state, a catalog with the paged,
//! the flash or both attention kernels, per-layer preferences, a policy profile order with
//! or without the paged profile, a device with or without it, a shared or per-layer KV
//! cache, in-place or separate residuals, varied sizes, ceilings, reusable execution and
//! retention. Every generated request must:
//!
//! - build, under rayon pools of 1 and 2 threads, to byte-identical canonical plan JSON;
//! - verify against its own plan;
//! - select exactly what brute force, the reference frontier and the closure frontier
//!   choose on the selection problem plan building derives (`jointplan::candidates`);
//! - explain every preferred provider it did not choose with typed rejection evidence;
//! - fail `verify` once any one leaf field of the plan is tampered with, naming that field's
//!   JSON path when the tampered plan still parses.
//!
//! `REQUEST_PROPS_CASES` overrides the case count (default 48).

mod common;

use std::collections::{BTreeMap, HashMap};

use common::request_generator::*;
use jointplan::candidates::{derive_candidates, selection_problem};
use jointplan::canonical::canonical_json;
use jointplan::plan::build::BuildOptions;
use jointplan::plan::verify::{verify, VerifyError};
use jointplan::plan::{ExecutionPlan, SelectionReason};
use jointplan::request::{NodeId, NodeResolution, PlanRequest, ProgramNode};
use jointplan::selection::{brute_force, frontier_solve, FrontierKind, FrontierResult, SeedLex};
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::Value;

fn cases() -> u32 {
    std::env::var("REQUEST_PROPS_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48)
}

fn layer() -> impl Strategy<Value = LayerSpec> {
    (
        prop::bool::weighted(0.75),
        prop_oneof![
            Just(Preference::Neither),
            Just(Preference::Paged),
            Just(Preference::Flash)
        ],
        any::<bool>(),
    )
        .prop_map(|(attention, preferred, in_place_residual)| LayerSpec {
            attention,
            preferred,
            in_place_residual,
        })
}

fn decoder_spec() -> impl Strategy<Value = DecoderSpec> {
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

/// The selection problem exactly as plan building derives it (domain.md 3.1).
fn derived_problem(request: &PlanRequest) -> jointplan::selection::SelectionProblem {
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
    selection_problem(&request.policy, &candidates)
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
        leaf in any::<Index>(),
    ) {
        let request = spec.request();
        let plan = build_in(1, &request).map_err(TestCaseError::fail)?;
        let one = canonical_json("plan", &plan).unwrap();
        let two = canonical_json("plan", &build_in(2, &request).map_err(TestCaseError::fail)?)
            .unwrap();
        prop_assert!(one == two, "1 and 2 threads give different plans");

        let tree = serde_json::to_value(&plan).unwrap();
        let verified = verify(&request, &tree, &BuildOptions::default());
        prop_assert!(verified.is_ok(), "verify of its own plan: {:?}", verified.err());

        // The plan's choices are the exact optimum of the derived selection problem.
        let chosen: BTreeMap<String, String> = plan
            .payload
            .nodes
            .iter()
            .map(|n| (n.id.to_string(), n.selection.selected_provider.to_string()))
            .collect();
        let problem = derived_problem(&request);
        let expected = FrontierResult::Optimal(chosen);
        let brute = brute_force(&problem, &SeedLex, 100_000).unwrap();
        prop_assert_eq!(&brute, &expected, "brute force");
        for kind in [FrontierKind::Reference, FrontierKind::Closure] {
            let frontier = frontier_solve(&problem, &SeedLex, kind, 1_000_000).unwrap();
            prop_assert_eq!(&frontier, &expected, "{:?} frontier", kind);
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
        let (pointer, path) = leaf.get(&all).clone();
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
