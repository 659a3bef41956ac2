//! A small valid plan request for build-rule tests, built in Rust, with every derived
//! fingerprint recomputed by [`seal`] so a test can change one thing and re-seal.
//!
//! The program: `node/a` (operation.main: input × weight → hidden, tokens work),
//! `node/b` (operation.state_update: hidden, state read_write → mid, stored in place of
//! hidden), `node/c` (operation.state_read: mid, state read → out), `node/d`
//! (operation.state_update: out, state read_write → output, the program output).
#![allow(dead_code, clippy::too_many_arguments)]

use jointplan::builder::error::PlanError;
use jointplan::builder::{build_core, BuildOptions, PlanCore};
use jointplan::request::fingerprints::{
    estimate_fingerprint, family_fingerprint, node_estimator_input_fingerprint,
    operation_fingerprint,
};
use jointplan::request::*;
use serde_json::{json, Value};

/// `fixed_block(4096)+paged(4096)`.
pub fn paged() -> StorageProfile {
    StorageProfile {
        allocator: StorageAllocator::FixedBlockArena { block_bytes: 4096 },
        view: StorageView::PagedRegions { block_bytes: 4096 },
    }
}

/// `linear+contiguous`.
pub const LINEAR: StorageProfile = StorageProfile::STATIC_CONTIGUOUS;

/// Parses an id.
pub fn id<T: TryFrom<String, Error = String>>(text: &str) -> T {
    match T::try_from(text.to_owned()) {
        Ok(v) => v,
        Err(e) => panic!("fixture id: {e}"),
    }
}

fn f(c: char) -> String {
    c.to_string().repeat(64)
}

fn tensor(dims: &[u64]) -> Value {
    json!({"dimensions": dims, "element_type": "f16", "layout": "contiguous"})
}

fn contract(dims: Value, access: &str, alias: Value) -> Value {
    json!({"dimensions": dims, "element_types": ["f16"], "layouts": ["contiguous"],
           "access": access, "alias": alias})
}

fn operation(id: &str, state_access: Option<&str>, output_alias: Value) -> Value {
    let x = contract(
        json!([{"symbol": "tokens"}, {"symbol": "hidden"}]),
        "read",
        json!("no_alias"),
    );
    let second = match state_access {
        None => contract(
            json!([{"symbol": "hidden"}, {"symbol": "hidden"}]),
            "read",
            json!("no_alias"),
        ),
        Some(access) => contract(
            json!([{"exact": 2}, {"symbol": "hidden"}]),
            access,
            json!("no_alias"),
        ),
    };
    let y = contract(
        json!([{"symbol": "tokens"}, {"symbol": "hidden"}]),
        "write",
        output_alias,
    );
    json!({
        "id": id, "version": {"major": 1, "minor": 0},
        "inputs": [x, second], "outputs": [y],
        "attributes": {"layer_index": {"value_kind": "unsigned", "required": false,
                        "constraint": {"unsigned_range": {"minimum": 0, "maximum": 64}}}},
        "resources": {"minimum_value_alignment_bytes": 16, "scratch": "optional",
                      "binding": "forbidden", "persistent": "forbidden"},
        "oracle": "exact",
        "provider": {"minimum_version": {"major": 1, "minor": 0},
                     "required_capabilities": ["capability.compute"]}
    })
}

fn profile_json(p: &StorageProfile) -> Value {
    serde_json::to_value(p).unwrap()
}

fn provider(op: &str, provider: &str) -> Value {
    let both = json!({"accepted_profiles": [profile_json(&LINEAR), profile_json(&paged())]});
    let slots: Vec<Value> = [("input", 0), ("input", 1), ("output", 0)]
        .iter()
        .map(|(role, ordinal)| json!({"role": role, "ordinal": ordinal, "storage": both}))
        .collect();
    json!({
        "provider_id": provider, "operation_id": op, "operation_fingerprint": f('0'),
        "provider_implementation_fingerprint": f('2'),
        "execution_semantics": serde_json::to_value(ExecutionSemantics::new(ReplayEquivalence::BitwiseEagerEquivalent)).unwrap(),
        "version": {"major": 1, "minor": 0}, "device_id": "device.reference.0",
        "capabilities": ["capability.compute"], "accepted_weight_formats": ["weight-format.dense"],
        "accepted_quantization_formats": [], "dynamic_storage_bindings": slots,
        "resource_estimator_id": "resource-estimator.reference",
        "resource_estimator_version": {"major": 1, "minor": 0},
        "resource_estimator_implementation_fingerprint": f('3')
    })
}

fn component(resource: &str, offset: u64, length: u64) -> Value {
    json!({"component_id": null, "resource_id": resource, "offset_bytes": offset,
           "length_bytes": length, "element_type": "f16"})
}

fn binding(
    value: &str,
    role: &str,
    ordinal: u32,
    dims: &[u64],
    access: &str,
    alias: Value,
    usage: &str,
    resource: &str,
) -> Value {
    let bytes: u64 = dims.iter().product::<u64>() * 2;
    json!({"value_id": value, "role": role, "ordinal": ordinal, "tensor": tensor(dims),
           "access": access, "alias": alias, "usage": usage, "weight": null,
           "storage": {"components": [component(resource, 0, bytes)]}})
}

fn candidate(provider: &str) -> Value {
    json!({"provider_id": provider, "estimator_id": "resource-estimator.reference",
           "estimator_version": {"major": 1, "minor": 0},
           "estimator_implementation_fingerprint": f('3'),
           "estimator_input_fingerprint": f('0'), "estimate_fingerprint": f('0'),
           "value_alignment_bytes": 16, "scratch": null, "binding": null, "persistent": null})
}

fn resolution(node: &str, values: Vec<Value>) -> Value {
    json!({"node_id": node, "values": values, "required_capabilities": [],
           "preferred_provider": "provider/preferred",
           "provider_resource_candidates": [candidate("provider/fallback"), candidate("provider/preferred")],
           "provider_resolution_rejections": {}})
}

/// The request as JSON, before sealing.
pub fn request_json() -> Value {
    let t = [4u64, 8];
    let no = json!("no_alias");
    let may0 = json!({"may_alias": {"tensor_index": 0}});
    let weight_binding = {
        let resolved = json!({"weight_id": "weight.matrix", "format_id": "weight-format.dense",
            "layout_id": "weight-layout.dense", "schema_version": {"major": 1, "minor": 0},
            "components": [{"component_id": "weight.matrix", "role": "values",
                            "physical_dimensions": [8, 8], "encoding": {"dense": {"element_type": "f16"}}}]});
        json!({"value_id": "value.weight", "role": "input", "ordinal": 1, "tensor": tensor(&[8, 8]),
               "access": "read", "alias": "no_alias", "usage": "weights", "weight": resolved,
               "storage": {"components": [{"component_id": "weight.matrix", "resource_id": "resource/weights",
                           "offset_bytes": 0, "length_bytes": 128, "element_type": "f16"}]}})
    };
    let state = |access: &str| {
        binding(
            "value.state",
            "input",
            1,
            &[2, 8],
            access,
            json!("no_alias"),
            "state",
            "resource/shared-state",
        )
    };
    let node = |id: &str, op: &str, work: &str, inputs: [&str; 2], output: &str| {
        json!({"id": id, "operation_id": op, "required_version": {"major": 1, "minor": 0},
               "work": {"tokens": {"value_id": work, "axis": 0}},
               "inputs": inputs, "outputs": [output], "attributes": {}})
    };
    json!({
      "family": {
        "family_id": "family.test",
        "canonical_config": {"hidden_size": 8},
        "weight_schema": {
          "format_id": "weight-format.dense", "layout_id": "weight-layout.dense",
          "version": {"major": 1, "minor": 0},
          "components": [{"id": "weight.matrix", "role": "values", "external_names": ["matrix"],
                          "dimensions": [8, 8], "encoding": {"dense": {"element_type": "f16"}}, "required": true}],
          "tensors": [{"id": "weight.matrix", "dimensions": [8, 8], "logical_element_type": "f16",
                       "components": ["weight.matrix"], "required": true}]
        },
        "program": {
          "family_id": "family.test",
          "inputs": ["value.input"],
          "blocks": [{"id": "block.main", "nodes": [
            node("node/a", "operation.main", "value.input", ["value.input", "value.weight"], "value.hidden"),
            node("node/b", "operation.state_update", "value.hidden", ["value.hidden", "value.state"], "value.mid"),
            node("node/c", "operation.state_read", "value.mid", ["value.mid", "value.state"], "value.out"),
            node("node/d", "operation.state_update", "value.out", ["value.out", "value.state"], "value.output")
          ]}],
          "states": [{"id": "state.cache", "value_id": "value.state", "tensor": tensor(&[2, 8]),
                      "lifetime": "sequence", "capacity_demand": "fixed_per_scope", "initialization": "zero"}],
          "weights": [{"weight_id": "weight.matrix", "value_id": "value.weight", "tensor": tensor(&[8, 8])}],
          "outputs": ["value.output"]
        }
      },
      "catalog": {
        "device": {"id": "device.reference.0", "class": "reference", "ordinal": 0,
                   "total_memory_bytes": 1u64 << 20, "runtime_implementation_fingerprint": f('1'),
                   "capabilities": ["capability.compute"],
                   "dynamic_storage_profiles": [profile_json(&LINEAR), profile_json(&paged())]},
        "operations": {
          "operation.main": operation("operation.main", None, no.clone()),
          "operation.state_read": operation("operation.state_read", Some("read"), may0.clone()),
          "operation.state_update": operation("operation.state_update", Some("read_write"), may0.clone())
        },
        "providers": {
          "operation.main": [provider("operation.main", "provider/fallback"), provider("operation.main", "provider/preferred")],
          "operation.state_read": [provider("operation.state_read", "provider/fallback"), provider("operation.state_read", "provider/preferred")],
          "operation.state_update": [provider("operation.state_update", "provider/fallback"), provider("operation.state_update", "provider/preferred")]
        },
        "engine_providers": {"provider.engine.reference": {"provider_id": "provider.engine.reference",
            "contract_version": {"major": 1, "minor": 0}, "implementation_fingerprint": f('4'),
            "device_id": "device.reference.0", "capabilities": ["capability.compute"]}},
        "weight_materializers": {}
      },
      "policy": {"policy_id": "runtime-policy.test", "version": {"major": 1, "minor": 0},
                 "memory_capacity_bytes": 1u64 << 20, "memory_reserve_bytes": 128,
                 "maximum_active_sequences": 3, "maximum_scheduled_tokens": 4096,
                 "execution_determinism": "bitwise_same_runtime",
                 "dynamic_storage_profile_order": [profile_json(&LINEAR)],
                 "reusable_execution": null},
      "node_resolutions": [
        resolution("node/a", vec![binding("value.input", "input", 0, &t, "read", no.clone(), "activations", "resource/activation-input"),
                                  weight_binding,
                                  binding("value.hidden", "output", 0, &t, "write", no.clone(), "activations", "resource/activation-a")]),
        resolution("node/b", vec![binding("value.hidden", "input", 0, &t, "read", no.clone(), "activations", "resource/activation-a"),
                                  state("read_write"),
                                  binding("value.mid", "output", 0, &t, "write", may0.clone(), "activations", "resource/activation-a")]),
        resolution("node/c", vec![binding("value.mid", "input", 0, &t, "read", no.clone(), "activations", "resource/activation-a"),
                                  state("read"),
                                  binding("value.out", "output", 0, &t, "write", may0.clone(), "activations", "resource/activation-b")]),
        resolution("node/d", vec![binding("value.out", "input", 0, &t, "read", no.clone(), "activations", "resource/activation-b"),
                                  state("read_write"),
                                  binding("value.output", "output", 0, &t, "write", may0.clone(), "activations", "resource/activation-out")])
      ],
      "completion_retention": {"values": []},
      "execution_weights": null
    })
}

/// The sealed request.
pub fn request() -> PlanRequest {
    let mut request = match PlanRequest::from_json_tree(request_json()) {
        Ok(r) => r,
        Err(e) => panic!("fixture does not parse: {e}"),
    };
    seal(&mut request);
    request
}

/// Recomputes every derived fingerprint: provider operation and execution-contract
/// fingerprints, each candidate's estimator input and estimate fingerprints.
pub fn seal(request: &mut PlanRequest) {
    let operations = request.catalog.operations.clone();
    for (op_id, row) in request.catalog.providers.iter_mut() {
        let Some(op) = operations.get(op_id) else {
            continue;
        };
        let fp = operation_fingerprint(op).unwrap();
        for p in row {
            p.operation_fingerprint = fp.clone();
            p.execution_semantics.contract_fingerprint =
                p.execution_semantics.expected_fingerprint();
        }
    }
    let family = family_fingerprint(&request.family).unwrap();
    let nodes: Vec<ProgramNode> = request.family.program.nodes().cloned().collect();
    for resolution in request.node_resolutions.iter_mut() {
        let Some(node) = nodes.iter().find(|n| n.id == resolution.node_id) else {
            continue;
        };
        let Some(op) = operations.get(&node.operation_id) else {
            continue;
        };
        let snapshot = resolution.clone();
        for candidate in resolution.provider_resource_candidates.iter_mut() {
            candidate.estimator_input_fingerprint = node_estimator_input_fingerprint(
                &family,
                op,
                &jointplan::request::fingerprints::operation_fingerprint(op).unwrap(),
                node,
                &snapshot,
                &candidate.provider_id,
            )
            .unwrap();
            candidate.estimate_fingerprint = estimate_fingerprint(candidate).unwrap();
        }
    }
}

/// The resolution of a node.
pub fn resolution_mut<'a>(request: &'a mut PlanRequest, node: &str) -> &'a mut NodeResolution {
    request
        .node_resolutions
        .iter_mut()
        .find(|r| r.node_id.as_str() == node)
        .unwrap()
}

/// The program node with this id.
pub fn node_mut<'a>(request: &'a mut PlanRequest, node: &str) -> &'a mut ProgramNode {
    request
        .family
        .program
        .blocks
        .iter_mut()
        .flat_map(|b| b.nodes.iter_mut())
        .find(|n| n.id.as_str() == node)
        .unwrap()
}

/// Every provider descriptor of an operation.
pub fn providers_mut<'a>(
    request: &'a mut PlanRequest,
    op: &str,
) -> &'a mut Vec<ProviderDescriptor> {
    request.catalog.providers.get_mut(op).unwrap()
}

/// A provider descriptor.
pub fn provider_mut<'a>(
    request: &'a mut PlanRequest,
    op: &str,
    provider: &str,
) -> &'a mut ProviderDescriptor {
    providers_mut(request, op)
        .iter_mut()
        .find(|p| p.provider_id.as_str() == provider)
        .unwrap()
}

/// Sets the storage a provider accepts for one slot.
pub fn set_slot_storage(
    request: &mut PlanRequest,
    op: &str,
    provider: &str,
    role: ValueRole,
    ordinal: u32,
    profiles: &[StorageProfile],
) {
    let p = provider_mut(request, op, provider);
    let slot = p
        .dynamic_storage_bindings
        .iter_mut()
        .find(|b| b.role == role && b.ordinal == ordinal)
        .unwrap();
    let mut list = profiles.to_vec();
    list.sort();
    slot.storage.accepted_profiles = list;
}

/// Builds steps 1-16 of a request with default options.
pub fn build(request: &PlanRequest) -> Result<PlanCore, PlanError> {
    build_core(request, &BuildOptions::default())
}

/// `request` changed by `change`, then sealed.
pub fn sealed(mut request: PlanRequest, change: impl FnOnce(&mut PlanRequest)) -> PlanRequest {
    change(&mut request);
    seal(&mut request);
    request
}

/// The error of building the fixture changed by `change` (a panic if it builds).
pub fn fails(change: impl FnOnce(&mut PlanRequest)) -> PlanError {
    match build(&sealed(request(), change)) {
        Ok(_) => panic!("the request built, but a rule should have rejected it"),
        Err(e) => e,
    }
}

/// Asserts that an error matches a pattern (printing it if not) and returns it.
#[allow(unused_macros)]
macro_rules! assert_variant {
    ($err:expr, $pat:pat $(if $guard:expr)?) => {{
        let err = $err;
        assert!(matches!(err, $pat $(if $guard)?), "unexpected error: {err:?}\n{err}");
        err
    }};
}

/// Asserts that a build failed on a per-node rule (`PlanError::Node`, which boxes its
/// `NodeError`) matching a `NodeError` pattern (printing the error if not) and returns it.
#[allow(unused_macros)]
macro_rules! assert_node_error {
    ($err:expr, $pat:pat $(if $guard:expr)?) => {{
        let err = $err;
        assert!(
            matches!(&err, PlanError::Node(boxed) if matches!(**boxed, $pat $(if $guard)?)),
            "unexpected error: {err:?}\n{err}"
        );
        err
    }};
}

/// A program value id.
pub fn value_id(text: &str) -> ProgramValueId {
    id(text)
}

/// Sets the policy's profile order.
pub fn order(request: &mut PlanRequest, profiles: &[StorageProfile]) {
    request.policy.dynamic_storage_profile_order = profiles.to_vec();
}
