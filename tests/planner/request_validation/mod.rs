//! Load-time validation (rules 1.1-1.8): a valid request passes, and every rule rejects a
//! request that breaks exactly that rule with its own error variant, at the JSON path of the
//! culprit, naming it.

use crate::common::request_fixture;

use jointplan::request::fingerprints::identity_materializer;
use jointplan::request::validate::{validate_request, RequestError};
use jointplan::request::*;
use request_fixture::*;

/// Resolves a validation path (`a.b[0]["k"]`) in the serialized request.
fn resolve<'a>(document: &'a serde_json::Value, path: &str) -> Option<&'a serde_json::Value> {
    let mut current = document;
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("[\"") {
            let end = after.find("\"]")?;
            current = current.get(&after[..end])?;
            rest = &after[end + 2..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']')?;
            current = current.get(after[..end].parse::<usize>().ok()?)?;
            rest = &after[end + 1..];
        } else {
            let after = rest.strip_prefix('.').unwrap_or(rest);
            let end = after.find(['.', '[']).unwrap_or(after.len());
            current = current.get(&after[..end])?;
            rest = &after[end..];
        }
    }
    Some(current)
}

fn check(
    request: &PlanRequest,
    is_variant: fn(&RequestError) -> bool,
    variant: &str,
    path: &str,
    needle: &str,
) {
    let error = match validate_request(request) {
        Ok(()) => panic!("expected {variant} at {path}, the request passed"),
        Err(error) => error,
    };
    assert!(is_variant(&error), "expected {variant}, got {error:?}");
    assert_eq!(error.path(), path, "wrong path for {error}");
    let message = error.to_string();
    assert!(message.starts_with(path), "{message}");
    assert!(
        message.contains(needle),
        "{message:?} does not name {needle:?}"
    );
    let document = request.to_json_tree().unwrap();
    assert!(
        resolve(&document, path).is_some(),
        "path {path} does not exist in the request document"
    );
}

macro_rules! rejects {
    ($name:ident, |$r:ident| $edit:block, $variant:ident, $path:expr, $needle:expr) => {
        #[test]
        fn $name() {
            #[allow(unused_mut)]
            let mut $r = valid_request();
            $edit
            check(
                &$r,
                |e| matches!(e, RequestError::$variant { .. }),
                stringify!($variant),
                $path,
                $needle,
            );
        }
    };
}

fn node(r: &mut PlanRequest, n: usize) -> &mut ProgramNode {
    &mut r.family.program.blocks[0].nodes[n]
}

fn op<'a>(r: &'a mut PlanRequest, name: &str) -> &'a mut OperationDescriptor {
    r.catalog.operations.get_mut(name).unwrap()
}

fn row<'a>(r: &'a mut PlanRequest, name: &str) -> &'a mut Vec<ProviderDescriptor> {
    r.catalog.providers.get_mut(name).unwrap()
}

fn values(r: &mut PlanRequest) -> &mut Vec<ValueBinding> {
    &mut r.node_resolutions[0].values
}

fn candidates(r: &mut PlanRequest) -> &mut Vec<ProviderResourcePlan> {
    &mut r.node_resolutions[0].provider_resource_candidates
}

fn scratch(r: &mut PlanRequest) -> &mut WorkspaceRequirement {
    candidates(r)[0].scratch.as_mut().unwrap()
}

fn buckets(r: &mut PlanRequest) -> &mut Vec<ReusableExecutionBucket> {
    &mut r.policy.reusable_execution.as_mut().unwrap().buckets
}

fn quantized(
    bits: u8,
    group: u32,
    scale: ElementType,
    zero: Option<ElementType>,
) -> WeightEncoding {
    WeightEncoding::Quantized(QuantizationSpec {
        format_id: id("quantization.synthetic.int4"),
        bits_per_weight: bits,
        group_size: group,
        packing: QuantizationPacking::Linear,
        scale_type: scale,
        zero_point_type: zero,
    })
}

fn weight_component(name: &str, resource: &str, offset: u64, length: u64) -> StorageComponent {
    StorageComponent {
        component_id: Some(id(name)),
        ..component(resource, offset, length, ElementType::F16)
    }
}

// ---------------------------------------------------------------- valid requests

#[test]
fn the_fixture_is_valid() {
    validate_request(&valid_request()).unwrap();
    valid_request().validate().unwrap();
}

#[test]
fn the_fixture_survives_a_json_round_trip() {
    let text = valid_request().to_json_text(true).unwrap();
    let parsed = PlanRequest::parse(std::path::Path::new("fixture.json"), &text).unwrap();
    assert_eq!(parsed, valid_request());
    validate_request(&parsed).unwrap();
}

#[test]
fn absent_execution_weights_are_valid() {
    let mut r = valid_request();
    r.execution_weights = None;
    validate_request(&r).unwrap();
}

#[test]
fn a_materializer_the_catalog_trusts_is_valid() {
    let mut r = valid_request();
    let custom = WeightMaterializerDescriptor {
        id: id("weight-materializer.repack"),
        version: ContractVersion::new(2, 1),
        implementation_fingerprint: hex('7'),
    };
    r.catalog
        .weight_materializers
        .insert(custom.id.clone(), custom.clone());
    let plan = r.execution_weights.as_mut().unwrap();
    plan.materializer_id = custom.id;
    plan.materializer_version = custom.version;
    plan.materializer_implementation_fingerprint = custom.implementation_fingerprint;
    reseal(&mut r);
    validate_request(&r).unwrap();
}

#[test]
fn sequence_scoped_workspaces_may_use_single_sequence_buckets() {
    let mut r = valid_request();
    candidates(&mut r)[1].persistent = Some(WorkspaceRequirement {
        size_formula: WorkspaceSizeFormula::BoundedShapeBuckets {
            buckets: vec![
                ShapeBucket {
                    maximum_sequences: 1,
                    maximum_tokens: 1,
                    maximum_pages: 1,
                    bytes: 64,
                },
                ShapeBucket {
                    maximum_sequences: 1,
                    maximum_tokens: 64,
                    maximum_pages: 1,
                    bytes: 128,
                },
            ],
        },
        alignment_bytes: 64,
        scope: WorkspaceScope::Sequence,
        storage: StorageRequirement {
            accepted_profiles: vec![linear(), paged()],
        },
    });
    reseal(&mut r);
    validate_request(&r).unwrap();
}

#[test]
fn multi_component_weights_are_valid() {
    let mut r = valid_request();
    add_scales_component(&mut r);
    validate_request(&r).unwrap();
}

/// Splits the weight into values + scales components (schema, program stays the same).
fn add_scales_component(r: &mut PlanRequest) {
    let schema = &mut r.family.weight_schema;
    schema.components.push(WeightComponentSpec {
        id: id("weight.matrix.scales"),
        role: WeightComponentRole::Scales,
        external_names: vec![],
        dimensions: vec![8],
        encoding: WeightEncoding::Dense {
            element_type: ElementType::F16,
        },
        required: true,
    });
    schema.tensors[0]
        .components
        .push(id("weight.matrix.scales"));
    let schema = schema.clone();
    r.execution_weights =
        Some(jointplan::request::fingerprints::identity_execution_weights(&schema).unwrap());
    let binding = &mut values(r)[1];
    binding.weight = schema.resolved_binding(&id("weight.matrix"));
    binding.storage.components.push(weight_component(
        "weight.matrix.scales",
        "resource/weight-matrix",
        128,
        16,
    ));
    reseal(r);
}

#[test]
fn a_valid_rejection_passes() {
    let mut r = valid_request();
    r.node_resolutions[1].provider_resolution_rejections.insert(
        id("provider/fallback"),
        ResolutionRejection::StorageIncompatible {
            resource_ids: vec![id("resource/activation-a"), id("resource/shared-state")],
        },
    );
    validate_request(&r).unwrap();
}

#[test]
fn errors_map_to_exit_code_two() {
    let mut r = valid_request();
    r.policy.maximum_scheduled_tokens = 0;
    let error: jointplan::Error = validate_request(&r).unwrap_err().into();
    assert_eq!(error.kind(), jointplan::ErrorKind::BadInput);
    assert!(
        error
            .to_string()
            .starts_with("policy.maximum_scheduled_tokens: "),
        "{error}"
    );
}

#[test]
fn error_accessors_agree_with_the_message() {
    let mut r = valid_request();
    node(&mut r, 0).inputs[0] = id("value.nowhere");
    let error = validate_request(&r).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("{}: {}: {}", error.path(), error.rule(), error.detail())
    );
    assert!(
        error
            .detail()
            .contains("node \"node.main\" reads value \"value.nowhere\""),
        "{error}"
    );
}

/// A long chain of nodes validates (issue 4 plans 50k-node requests; the checks use index
/// maps, so this stays fast, but no timing is asserted here).
#[test]
fn a_long_program_validates() {
    let mut r = valid_request();
    let template = node(&mut r, 1).clone();
    let resolution = r.node_resolutions[1].clone();
    let mut previous = id::<ProgramValueId>("value.output");
    for i in 0..5000 {
        let output: ProgramValueId = id(&format!("value.chain.{i}"));
        let mut next = template.clone();
        next.id = id(&format!("node.chain.{i}"));
        next.inputs = vec![previous.clone()];
        next.outputs = vec![output.clone()];
        next.work = WorkSpec::Tokens {
            value_id: previous.clone(),
            axis: 0,
        };
        r.family.program.blocks[0].nodes.push(next);
        let mut res = resolution.clone();
        res.node_id = id(&format!("node.chain.{i}"));
        r.node_resolutions.push(res);
        previous = output;
    }
    r.family.program.outputs = vec![previous];
    reseal(&mut r);
    validate_request(&r).unwrap();
}

/// The complete example of `docs/format.md` is the tiny fixture, and it is valid.
#[test]
fn the_format_example_is_valid_and_current() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/format.md")).unwrap();
    let start = doc
        .find("<!-- example:begin -->")
        .expect("example marker in docs/format.md");
    let end = doc
        .find("<!-- example:end -->")
        .expect("example end marker in docs/format.md");
    let block = &doc[start..end];
    let json = &block[block.find("```json").unwrap() + 7..block.rfind("```").unwrap()];
    let expected = tiny_request().to_json_text(true).unwrap();
    if std::env::var_os("JOINTPLAN_BLESS").is_some_and(|v| v == "1") {
        let fresh = format!(
            "{}<!-- example:begin -->\n```json\n{expected}\n```\n{}",
            &doc[..start],
            &doc[end..]
        );
        std::fs::write(
            concat!(env!("CARGO_MANIFEST_DIR"), "/docs/format.md"),
            fresh,
        )
        .unwrap();
        return;
    }
    let parsed = PlanRequest::parse(std::path::Path::new("docs/format.md"), json).unwrap();
    validate_request(&parsed).unwrap();
    assert!(
        json.trim() == expected.trim(),
        "the example of docs/format.md drifted from tests/common/request_fixture.rs::tiny_request; \
         regenerate it with `JOINTPLAN_BLESS=1 cargo test --test planner request_validation`"
    );
}

/// The node resolutions are validated in parallel: of several bad ones, the error is the
/// first in index order whatever the thread count (the oracle: the sequential order).
#[test]
fn of_several_bad_resolutions_the_first_is_reported_whatever_the_threads() {
    let mut request = crate::common::models::decoder_2layer();
    assert!(request.node_resolutions.len() > 7);
    for index in [7, 3, 5] {
        request.node_resolutions[index].values.clear();
    }
    for threads in [1, 2, 3] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        match pool.install(|| validate_request(&request)) {
            Err(RequestError::EmptyResolutionValues { path, .. }) => {
                assert_eq!(path, "node_resolutions[3].values", "{threads} threads")
            }
            other => panic!("{threads} threads: expected EmptyResolutionValues, got {other:?}"),
        }
    }
}

// The rules, one module per part of the request (after the helpers and the macro above,
// which they use).
mod bindings;
mod candidates;
mod catalog;
mod policy;
mod program;
mod providers;
mod weights;
