//! One test per rule of rules 2.1-2.6 (policy, resolutions, `build_nodes`, binding
//! contracts, aliases, work contracts, state effects): each mutates the valid fixture in one
//! place and asserts the exact `PlanError` variant. Evidence, estimates, candidates and
//! selection are in `tests/planner/build_evidence.rs`.

#![allow(clippy::result_large_err)]

use crate::common::build_fixture;
use jointplan::node::NodeError;

use build_fixture::*;
use jointplan::builder::error::PlanError;
use jointplan::request::*;

#[test]
fn fixture_builds() {
    let core = build(&request()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(core.nodes.len(), 4);
}
// ---- 2.1 -------------------------------------------------------------------------------

#[test]
fn request_validation_runs_first() {
    let err = fails(|r| r.policy.maximum_active_sequences = 0);
    assert_variant!(err, PlanError::Request(_));
}

#[test]
fn duplicate_resolution() {
    let err = fails(|r| {
        let copy = r.node_resolutions[0].clone();
        r.node_resolutions.push(copy);
    });
    assert_variant!(err, PlanError::DuplicateResolution { ref node, .. } if node.as_str() == "node/a");
}

#[test]
fn missing_resolution() {
    let err = fails(|r| {
        r.node_resolutions
            .retain(|n| n.node_id.as_str() != "node/c");
    });
    assert_variant!(err, PlanError::MissingResolution { ref node, .. } if node.as_str() == "node/c");
}

#[test]
fn unknown_resolution() {
    let err = fails(|r| {
        let mut copy = r.node_resolutions[0].clone();
        copy.node_id = id("node/ghost");
        r.node_resolutions.push(copy);
    });
    assert_variant!(err, PlanError::UnknownResolutions { ref nodes } if nodes[0].as_str() == "node/ghost");
}

// ---- 2.2 build_nodes -----------------------------------------------------------------

#[test]
fn unknown_operation() {
    let err = fails(|r| node_mut(r, "node/a").operation_id = id("operation.missing"));
    assert_node_error!(err, NodeError::UnknownOperation { .. });
}

#[test]
fn incompatible_operation_version() {
    let err = fails(|r| node_mut(r, "node/a").required_version = ContractVersion::new(1, 1));
    assert_node_error!(err, NodeError::IncompatibleOperationVersion { ref node, .. } if node.as_str() == "node/a");
}

#[test]
fn unknown_attribute() {
    let err = fails(|r| {
        node_mut(r, "node/a")
            .attributes
            .insert(id("bogus"), SemanticValue::Unsigned(1));
    });
    assert_node_error!(err, NodeError::UnknownAttribute { .. });
}

#[test]
fn attribute_constraint_and_kind() {
    let err = fails(|r| {
        node_mut(r, "node/a")
            .attributes
            .insert(id("layer_index"), SemanticValue::Unsigned(65));
    });
    assert_node_error!(err, NodeError::AttributeValue { .. });
    let err = fails(|r| {
        node_mut(r, "node/a")
            .attributes
            .insert(id("layer_index"), SemanticValue::Integer(1));
    });
    assert_node_error!(err, NodeError::AttributeValue { .. });
}

#[test]
fn missing_required_attribute() {
    let err = fails(|r| {
        let op = r.catalog.operations.get_mut("operation.main").unwrap();
        op.attributes.get_mut("layer_index").unwrap().required = true;
    });
    assert_node_error!(err, NodeError::MissingAttribute { .. });
}

#[test]
fn bindings_mirror_the_program_node() {
    let err = fails(|r| resolution_mut(r, "node/c").values[0].value_id = value_id("value.hidden"));
    assert_node_error!(err, NodeError::BindingMirror { ref node, .. } if node.as_str() == "node/c");
}

// ---- 2.3 binding contracts ---------------------------------------------------------

#[test]
fn binding_count() {
    let err = fails(|r| {
        resolution_mut(r, "node/a").values.pop();
    });
    assert_node_error!(
        err,
        NodeError::BindingCount {
            expected: 3,
            found: 2,
            ..
        }
    );
}

#[test]
fn duplicate_binding_position() {
    let err = fails(|r| resolution_mut(r, "node/a").values[1].ordinal = 0);
    assert_node_error!(err, NodeError::DuplicateBindingPosition { .. });
}

#[test]
fn binding_position() {
    let err = fails(|r| resolution_mut(r, "node/a").values.swap(0, 1));
    assert_node_error!(err, NodeError::BindingPosition { .. });
}

#[test]
fn repeated_value_must_be_identical_reads() {
    let err = fails(|r| {
        let values = &mut resolution_mut(r, "node/c").values;
        values[1] = values[0].clone();
        values[1].ordinal = 1;
        values[1].tensor.dimensions = vec![2, 8];
    });
    assert_node_error!(err, NodeError::RepeatedValue { .. });
}

#[test]
fn binding_access_equals_contract() {
    let err = fails(|r| resolution_mut(r, "node/c").values[1].access = TensorAccess::ReadWrite);
    assert_node_error!(err, NodeError::BindingAccess { .. });
}

#[test]
fn binding_alias_equals_contract() {
    let err = fails(|r| resolution_mut(r, "node/b").values[2].alias = AliasPolicy::NoAlias);
    assert_node_error!(err, NodeError::BindingAlias { .. });
}

#[test]
fn binding_rank() {
    let err = fails(|r| resolution_mut(r, "node/a").values[0].tensor.dimensions = vec![4, 8, 1]);
    assert_node_error!(
        err,
        NodeError::BindingRank {
            expected: 2,
            found: 3,
            ..
        }
    );
}

#[test]
fn binding_element_type() {
    let err = fails(|r| {
        let b = &mut resolution_mut(r, "node/a").values[0];
        b.tensor.element_type = ElementType::F32;
        b.storage.components[0].element_type = ElementType::F32;
        b.storage.components[0].length_bytes = 128;
    });
    assert_node_error!(err, NodeError::BindingElementType { .. });
}

#[test]
fn binding_exact_dimension() {
    let err = fails(|r| {
        let b = &mut resolution_mut(r, "node/b").values[1];
        b.tensor.dimensions = vec![3, 8];
        b.storage.components[0].length_bytes = 48;
    });
    assert_node_error!(
        err,
        NodeError::BindingDimension {
            axis: 0,
            extent: 3,
            ..
        }
    );
}

#[test]
fn dimension_symbols_are_node_wide() {
    let err = fails(|r| {
        let b = &mut resolution_mut(r, "node/a").values[0];
        b.tensor.dimensions = vec![4, 16];
        b.storage.components[0].length_bytes = 128;
    });
    assert_node_error!(err, NodeError::DimensionSymbolConflict { ref symbol, .. } if symbol == "hidden");
}

#[test]
fn binding_layout() {
    let err = fails(|r| {
        resolution_mut(r, "node/a").values[0].tensor.layout = TensorLayout::Strided {
            byte_strides: vec![16, 2],
        };
    });
    assert_node_error!(err, NodeError::BindingLayout { .. });
}

#[test]
fn inputs_may_not_overlap() {
    let err = fails(|r| {
        let b = &mut resolution_mut(r, "node/c").values[1];
        b.storage.components[0].resource_id = id("resource/activation-a");
    });
    assert_node_error!(err, NodeError::InputOverlap { .. });
}

#[test]
fn no_alias_output_may_not_overlap_an_input() {
    let err = fails(|r| {
        resolution_mut(r, "node/a").values[2].storage.components[0].resource_id =
            id("resource/activation-input");
    });
    assert_node_error!(err, NodeError::OutputInputOverlap { .. });
}

#[test]
fn may_alias_overlap_must_be_identical() {
    let err = fails(|r| {
        let c = &mut resolution_mut(r, "node/b").values[2].storage.components[0];
        c.offset_bytes = 16;
    });
    assert_node_error!(err, NodeError::OutputInputOverlap { .. });
}

#[test]
fn must_alias_lost() {
    let err = fails(|r| {
        let op = r
            .catalog
            .operations
            .get_mut("operation.state_update")
            .unwrap();
        op.outputs[0].alias = AliasPolicy::MustAlias { tensor_index: 0 };
        for node in ["node/b", "node/d"] {
            resolution_mut(r, node).values[2].alias = AliasPolicy::MustAlias { tensor_index: 0 };
        }
    });
    assert_node_error!(err, NodeError::LostMandatoryAlias { ref node, .. } if node.as_str() == "node/d");
}

#[test]
fn outputs_never_overlap() {
    let err = fails(|r| {
        let op = r.catalog.operations.get_mut("operation.main").unwrap();
        let second = op.outputs[0].clone();
        op.outputs.push(second);
        node_mut(r, "node/a").outputs.push(value_id("value.extra"));
        for p in providers_mut(r, "operation.main") {
            let mut slot = p.dynamic_storage_bindings[2].clone();
            slot.ordinal = 1;
            p.dynamic_storage_bindings.push(slot);
        }
        let values = &mut resolution_mut(r, "node/a").values;
        let mut extra = values[2].clone();
        extra.value_id = value_id("value.extra");
        extra.ordinal = 1;
        values.push(extra);
    });
    assert_node_error!(err, NodeError::OutputsOverlap { .. });
}

// ---- 2.4 aliases ------------------------------------------------------------------

#[test]
fn exact_alias_is_recorded() {
    let core = build(&request()).unwrap();
    let b = &core.nodes[1];
    assert_eq!(b.exact_aliases.len(), 1);
    assert_eq!(b.exact_aliases[0].input_value_id.as_str(), "value.hidden");
    assert!(
        core.nodes[3].exact_aliases.is_empty(),
        "node/d stores its output elsewhere"
    );
}

#[test]
fn alias_of_a_program_output() {
    let err = fails(|r| r.family.program.outputs.insert(0, value_id("value.hidden")));
    assert_node_error!(err, NodeError::AliasesProgramOutput { .. });
}

#[test]
fn alias_of_a_live_input() {
    // node/c also reads value.hidden, so node/b may not overwrite it in place.
    let err = fails(|r| {
        let op = r
            .catalog
            .operations
            .get_mut("operation.state_read")
            .unwrap();
        let extra = op.inputs[0].clone();
        op.inputs.push(extra);
        node_mut(r, "node/c").inputs.push(value_id("value.hidden"));
        for p in providers_mut(r, "operation.state_read") {
            let mut slot = p.dynamic_storage_bindings[0].clone();
            slot.ordinal = 2;
            p.dynamic_storage_bindings.insert(2, slot);
        }
        let hidden = resolution_mut(r, "node/a").values[2].clone();
        let values = &mut resolution_mut(r, "node/c").values;
        let mut input = hidden;
        input.role = ValueRole::Input;
        input.ordinal = 2;
        input.access = TensorAccess::Read;
        input.alias = AliasPolicy::NoAlias;
        values.insert(2, input);
    });
    assert_node_error!(err, NodeError::AliasInputStillLive { ref later_consumer, .. } if later_consumer.as_str() == "node/c");
}

#[test]
fn global_storage_aliasing() {
    let err = fails(|r| {
        for (node, index) in [("node/c", 2), ("node/d", 0)] {
            resolution_mut(r, node).values[index].storage.components[0].resource_id =
                id("resource/activation-input");
        }
    });
    assert_node_error!(err, NodeError::StorageOverlap { ref resource, .. } if resource.as_str() == "resource/activation-input");
}

// ---- 2.5 work contract -------------------------------------------------------------

#[test]
fn work_contract_projections() {
    let core = build(&request()).unwrap();
    match &core.nodes[0].work {
        jointplan::plan::NodeWorkContract::Tokens {
            source,
            projections,
        } => {
            assert_eq!(source.value_id.as_str(), "value.input");
            assert_eq!(source.canonical_extent, 4);
            assert_eq!(projections.len(), 2, "input and output carry tokens");
        }
        other => panic!("expected a tokens contract, got {other:?}"),
    }
}

#[test]
fn work_axis_must_be_a_symbol() {
    let err = fails(|r| {
        let op = r.catalog.operations.get_mut("operation.main").unwrap();
        op.inputs[0].dimensions[0] = DimensionConstraint::Exact(4);
    });
    assert_node_error!(err, NodeError::WorkAxisNotSymbol { .. });
}

#[test]
fn work_symbol_on_two_axes() {
    let err = fails(|r| {
        node_mut(r, "node/a").work = WorkSpec::Tokens {
            value_id: value_id("value.input"),
            axis: 1,
        };
    });
    assert_node_error!(err, NodeError::WorkSymbolRepeated { .. });
}

// ---- 2.6 state effects and dependencies -------------------------------------------

#[test]
fn state_effects_and_hazard_dependencies() {
    let core = build(&request()).unwrap();
    let deps = |i: usize| -> Vec<&str> {
        core.nodes[i]
            .dependencies
            .iter()
            .map(|n| n.as_str())
            .collect()
    };
    assert_eq!(deps(0), Vec::<&str>::new());
    assert_eq!(deps(1), vec!["node/a"]);
    // read after write: node/c reads the state node/b wrote.
    assert_eq!(deps(2), vec!["node/b"]);
    // write after read (node/c) and write after write (node/b).
    assert_eq!(deps(3), vec!["node/b", "node/c"]);
    let effect = &core.nodes[2].state_effects[0];
    assert_eq!(effect.access, TensorAccess::Read);
    assert_eq!(effect.resource_ids[0].as_str(), "resource/shared-state");
    assert_eq!(
        core.nodes[1].state_effects[0].access,
        TensorAccess::ReadWrite
    );
}

// ---- 2.2 semantic bindings -------------------------------------------------------

#[test]
fn weight_usage() {
    let err = fails(|r| {
        let b = &mut resolution_mut(r, "node/a").values[1];
        b.usage = BufferUsage::Activations;
        b.weight = None;
        b.storage.components[0].component_id = None;
    });
    assert_node_error!(
        err,
        NodeError::SemanticUsage {
            class: "weight",
            ..
        }
    );
}

#[test]
fn weight_binding_equals_execution_schema() {
    let err = fails(|r| {
        let b = &mut resolution_mut(r, "node/a").values[1];
        if let Some(w) = b.weight.as_mut() {
            w.layout_id = id("weight-layout.other");
        }
    });
    assert_node_error!(err, NodeError::SemanticWeight { .. });
}

#[test]
fn state_usage() {
    let err = fails(|r| resolution_mut(r, "node/c").values[1].usage = BufferUsage::Activations);
    assert_node_error!(err, NodeError::SemanticUsage { class: "state", .. });
}

#[test]
fn token_bindings_are_activations() {
    let err = fails(|r| resolution_mut(r, "node/d").values[2].usage = BufferUsage::Persistent);
    assert_node_error!(err, NodeError::WorkProjection { .. });
}

#[test]
fn activation_usage() {
    let err = fails(|r| {
        node_mut(r, "node/d").work = WorkSpec::Fixed;
        resolution_mut(r, "node/d").values[2].usage = BufferUsage::Persistent;
    });
    assert_node_error!(
        err,
        NodeError::SemanticUsage {
            class: "activation",
            ..
        }
    );
}

#[test]
fn cross_node_value_consistency() {
    let err =
        fails(|r| resolution_mut(r, "node/c").values[1].storage.components[0].length_bytes = 48);
    assert_node_error!(err, NodeError::CrossNodeInconsistency { ref node, .. } if node.as_str() == "node/c");
}

/// Each node's own checks run beside the other nodes'; the cross-node consistency of the
/// values it binds is checked after, in program order. The error is still the first in
/// the reference order: for each binding its semantic check, then its consistency with
/// the node that bound it first; the node's own later checks after all of its bindings;
/// an earlier node before a later one.
#[test]
fn node_errors_keep_the_reference_order() {
    fn inconsistent_state(r: &mut PlanRequest) {
        resolution_mut(r, "node/c").values[1].storage.components[0].length_bytes = 48;
    }
    fn misaligned(r: &mut PlanRequest, node: &str) {
        for candidate in &mut resolution_mut(r, node).provider_resource_candidates {
            candidate.value_alignment_bytes = 8;
        }
    }
    fn unknown_attribute(r: &mut PlanRequest, node: &str) {
        node_mut(r, node)
            .attributes
            .insert(id("bogus"), SemanticValue::Unsigned(1));
    }
    let cross_at_c = |err: PlanError| {
        assert_node_error!(err, NodeError::CrossNodeInconsistency { ref node, ref value, .. }
            if node.as_str() == "node/c" && value.as_str() == "value.state");
    };
    // Alone, each change is its own error.
    assert_node_error!(fails(|r| misaligned(r, "node/c")),
        NodeError::ValueAlignment { ref node, .. } if node.as_str() == "node/c");
    assert_node_error!(fails(|r| unknown_attribute(r, "node/d")),
        NodeError::UnknownAttribute { ref node, .. } if node.as_str() == "node/d");
    // A binding's consistency comes before the node's estimate checks.
    cross_at_c(fails(|r| {
        inconsistent_state(r);
        misaligned(r, "node/c");
    }));
    // A binding's own semantic check comes before its consistency.
    assert_node_error!(
        fails(|r| {
            inconsistent_state(r);
            resolution_mut(r, "node/c").values[1].usage = BufferUsage::Activations;
        }),
        NodeError::SemanticUsage { ref node, class: "state", .. } if node.as_str() == "node/c"
    );
    // An earlier binding's consistency comes before a later binding's own semantic check
    // (`value.mid` is bound first by node/b; binding 1 is the state).
    assert_node_error!(
        fails(|r| {
            resolution_mut(r, "node/c").values[0].storage.components[0].length_bytes = 72;
            resolution_mut(r, "node/c").values[1].usage = BufferUsage::Activations;
        }),
        NodeError::CrossNodeInconsistency { ref node, ref value, .. }
            if node.as_str() == "node/c" && value.as_str() == "value.mid"
    );
    // The node's checks before its bindings come first.
    assert_node_error!(
        fails(|r| {
            inconsistent_state(r);
            unknown_attribute(r, "node/c");
        }),
        NodeError::UnknownAttribute { ref node, .. } if node.as_str() == "node/c"
    );
    // An earlier node's consistency comes before a later node's own first check, and an
    // earlier node's own checks before a later node's consistency.
    cross_at_c(fails(|r| {
        inconsistent_state(r);
        unknown_attribute(r, "node/d");
        misaligned(r, "node/d");
    }));
    assert_node_error!(
        fails(|r| {
            misaligned(r, "node/b");
            inconsistent_state(r);
        }),
        NodeError::ValueAlignment { ref node, .. } if node.as_str() == "node/b"
    );
}

#[test]
fn semantic_coverage() {
    let err = fails(|r| r.family.program.inputs.push(value_id("value.unused")));
    assert_node_error!(
        err,
        NodeError::UncoveredValue {
            class: "program input",
            ..
        }
    );
}
