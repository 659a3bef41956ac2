//! The catalog: device, tables and operations (rules 1.3).

use super::*;

// ---------------------------------------------------------------- catalog: device, tables

rejects!(
    device_without_memory,
    |r| {
        r.catalog.device.total_memory_bytes = 0;
    },
    InvalidDevice,
    "catalog.device.total_memory_bytes",
    "device.reference.0"
);
rejects!(
    device_without_profiles,
    |r| {
        r.catalog.device.dynamic_storage_profiles.clear();
    },
    InvalidDevice,
    "catalog.device.dynamic_storage_profiles",
    "device.reference.0"
);
rejects!(
    device_with_linear_paged_profile,
    |r| {
        r.catalog
            .device
            .dynamic_storage_profiles
            .insert(StorageProfile {
                allocator: StorageAllocator::LinearArena,
                view: StorageView::PagedRegions { block_bytes: 4096 },
            });
    },
    InvalidDevice,
    "catalog.device.dynamic_storage_profiles[1]",
    "linear+paged(4096)"
);
rejects!(
    catalog_without_operations,
    |r| {
        r.catalog.operations.clear();
        r.catalog.providers.clear();
    },
    EmptyCatalog,
    "catalog.operations",
    "no entries"
);
rejects!(
    catalog_without_engines,
    |r| {
        r.catalog.engine_providers.clear();
    },
    EmptyCatalog,
    "catalog.engine_providers",
    "no entries"
);
rejects!(
    catalog_with_too_many_operations,
    |r| {
        let template = op(&mut r, "operation.residual_add").clone();
        for i in 0..4095 {
            let mut extra = template.clone();
            extra.id = id(&format!("operation.extra.{i:04}"));
            r.catalog.operations.insert(extra.id.clone(), extra);
        }
    },
    CatalogTooLarge,
    "catalog.operations",
    "4097"
);
rejects!(
    catalog_with_too_many_provider_rows,
    |r| {
        let template = row(&mut r, "operation.residual_add")[0].clone();
        let extra: Vec<_> = (0..16384)
            .map(|i| {
                let mut p = template.clone();
                p.provider_id = id(&format!("provider.extra.{i:05}"));
                p
            })
            .collect();
        row(&mut r, "operation.residual_add").extend(extra);
    },
    CatalogTooLarge,
    "catalog.providers",
    "16387"
);
rejects!(
    operation_under_another_key,
    |r| {
        let main = op(&mut r, "operation.main").clone();
        r.catalog.operations.insert(id("operation.alias"), main);
    },
    CatalogKeyMismatch,
    "catalog.operations[\"operation.alias\"].id",
    "operation.main"
);
rejects!(
    operation_without_provider_row,
    |r| {
        r.catalog.providers.remove("operation.residual_add");
    },
    OperationProviderKeysDiffer,
    "catalog.operations[\"operation.residual_add\"]",
    "operation.residual_add"
);
rejects!(
    provider_row_without_operation,
    |r| {
        let extra = row(&mut r, "operation.main").clone();
        r.catalog.providers.insert(id("operation.unknown"), extra);
    },
    OperationProviderKeysDiffer,
    "catalog.providers[\"operation.unknown\"]",
    "operation.unknown"
);

// ---------------------------------------------------------------- catalog: operations (1.3)

const MAIN: &str = "catalog.operations[\"operation.main\"]";
const RESIDUAL: &str = "catalog.operations[\"operation.residual_add\"]";

rejects!(
    unstable_operation,
    |r| {
        op(&mut r, "operation.main").version = ContractVersion::new(0, 9);
        op(&mut r, "operation.main").provider.minimum_version = ContractVersion::new(0, 9);
    },
    InvalidOperation,
    &format!("{MAIN}.version.major"),
    "operation.main"
);
rejects!(
    operation_without_outputs,
    |r| {
        op(&mut r, "operation.main").outputs.clear();
    },
    InvalidOperation,
    &format!("{MAIN}.outputs"),
    "no outputs"
);
rejects!(
    operation_input_that_writes,
    |r| {
        op(&mut r, "operation.main").inputs[0].access = TensorAccess::Write;
    },
    InvalidOperation,
    &format!("{MAIN}.inputs[0].access"),
    "input 0"
);
rejects!(
    operation_input_that_aliases,
    |r| {
        op(&mut r, "operation.main").inputs[1].alias = AliasPolicy::MayAlias { tensor_index: 0 };
    },
    InvalidOperation,
    &format!("{MAIN}.inputs[1].alias"),
    "input 1"
);
rejects!(
    operation_output_that_only_reads,
    |r| {
        op(&mut r, "operation.main").outputs[0].access = TensorAccess::Read;
    },
    InvalidOperation,
    &format!("{MAIN}.outputs[0].access"),
    "output 0"
);
rejects!(
    operation_output_aliasing_a_missing_input,
    |r| {
        op(&mut r, "operation.residual_add").outputs[0].alias =
            AliasPolicy::MustAlias { tensor_index: 1 };
    },
    InvalidOperation,
    &format!("{RESIDUAL}.outputs[0].alias"),
    "input 1"
);
rejects!(
    operation_alignment_not_power_of_two,
    |r| {
        op(&mut r, "operation.main")
            .resources
            .minimum_value_alignment_bytes = 24;
    },
    InvalidOperation,
    &format!("{MAIN}.resources.minimum_value_alignment_bytes"),
    "24"
);
rejects!(
    operation_alignment_zero,
    |r| {
        op(&mut r, "operation.main")
            .resources
            .minimum_value_alignment_bytes = 0;
    },
    InvalidOperation,
    &format!("{MAIN}.resources.minimum_value_alignment_bytes"),
    "operation.main"
);
rejects!(
    operation_provider_minimum_of_other_major,
    |r| {
        op(&mut r, "operation.main").provider.minimum_version = ContractVersion::new(2, 0);
    },
    InvalidOperation,
    &format!("{MAIN}.provider.minimum_version"),
    "2.0"
);
rejects!(
    contract_exact_zero,
    |r| {
        op(&mut r, "operation.main").inputs[0].dimensions[0] = DimensionConstraint::Exact(0);
    },
    InvalidTensorContract,
    &format!("{MAIN}.inputs[0].dimensions[0]"),
    "exact extent 0"
);
rejects!(
    contract_blank_symbol,
    |r| {
        op(&mut r, "operation.main").outputs[0].dimensions[1] =
            DimensionConstraint::Symbol("  ".to_owned());
    },
    InvalidTensorContract,
    &format!("{MAIN}.outputs[0].dimensions[1]"),
    "blank symbol"
);
rejects!(
    contract_empty_range,
    |r| {
        op(&mut r, "operation.main").inputs[2].dimensions[1] = DimensionConstraint::Range {
            minimum: 8,
            maximum: 4,
        };
    },
    InvalidTensorContract,
    &format!("{MAIN}.inputs[2].dimensions[1]"),
    "8..=4"
);
rejects!(
    contract_range_from_zero,
    |r| {
        op(&mut r, "operation.main").inputs[2].dimensions[1] = DimensionConstraint::Range {
            minimum: 0,
            maximum: 4,
        };
    },
    InvalidTensorContract,
    &format!("{MAIN}.inputs[2].dimensions[1]"),
    "input 2"
);
rejects!(
    contract_without_element_types,
    |r| {
        op(&mut r, "operation.main").inputs[0].element_types.clear();
    },
    InvalidTensorContract,
    &format!("{MAIN}.inputs[0].element_types"),
    "no element type"
);
rejects!(
    contract_without_layouts,
    |r| {
        op(&mut r, "operation.main").inputs[0].layouts.clear();
    },
    InvalidTensorContract,
    &format!("{MAIN}.inputs[0].layouts"),
    "no layout"
);
rejects!(
    contract_repeated_layout,
    |r| {
        op(&mut r, "operation.main").inputs[0]
            .layouts
            .push(LayoutConstraint::Contiguous);
    },
    InvalidTensorContract,
    &format!("{MAIN}.inputs[0].layouts[1]"),
    "sorted, unique"
);
rejects!(
    contract_strided_rank_mismatch,
    |r| {
        op(&mut r, "operation.main").inputs[0].layouts = vec![LayoutConstraint::Strided {
            strides: vec![
                StrideConstraint::ExactBytes(4),
                StrideConstraint::ExactBytes(4),
            ],
        }];
    },
    InvalidTensorContract,
    &format!("{MAIN}.inputs[0].layouts[0].strided.strides"),
    "rank 1"
);
rejects!(
    contract_zero_stride,
    |r| {
        op(&mut r, "operation.main").inputs[0].layouts = vec![LayoutConstraint::Strided {
            strides: vec![StrideConstraint::ExactBytes(0)],
        }];
    },
    InvalidTensorContract,
    &format!("{MAIN}.inputs[0].layouts[0].strided.strides[0]"),
    "axis 0"
);
rejects!(
    contract_blocked_zero_block,
    |r| {
        op(&mut r, "operation.main").inputs[1].layouts = vec![LayoutConstraint::Blocked {
            block: vec![4, 0],
            axis_order: vec![0, 1],
        }];
    },
    InvalidTensorContract,
    &format!("{MAIN}.inputs[1].layouts[0].blocked.block"),
    "block"
);
rejects!(
    contract_blocked_axis_order_not_permutation,
    |r| {
        op(&mut r, "operation.main").inputs[1].layouts = vec![LayoutConstraint::Blocked {
            block: vec![4, 4],
            axis_order: vec![1, 1],
        }];
    },
    InvalidTensorContract,
    &format!("{MAIN}.inputs[1].layouts[0].blocked.axis_order"),
    "permutation"
);
rejects!(
    operation_requires_unoffered_capability,
    |r| {
        op(&mut r, "operation.main")
            .provider
            .required_capabilities
            .insert(id("capability.missing"));
    },
    UnofferedCapability,
    &format!("{MAIN}.provider.required_capabilities[1]"),
    "capability.missing"
);
rejects!(
    oracle_reference_dangling,
    |r| {
        op(&mut r, "operation.residual_add").oracle = OracleSpec::ReferenceOperation {
            operation_id: id("operation.missing"),
            version: ContractVersion::new(1, 0),
        };
    },
    InvalidOracle,
    &format!("{RESIDUAL}.oracle.reference_operation.operation_id"),
    "operation.missing"
);
rejects!(
    oracle_reference_other_version,
    |r| {
        let mut reference = op(&mut r, "operation.residual_add").clone();
        reference.id = id("operation.residual_add.reference");
        r.catalog.operations.insert(reference.id.clone(), reference);
        op(&mut r, "operation.residual_add").oracle = OracleSpec::ReferenceOperation {
            operation_id: id("operation.residual_add.reference"),
            version: ContractVersion::new(1, 2),
        };
    },
    InvalidOracle,
    &format!("{RESIDUAL}.oracle.reference_operation.version"),
    "1.2"
);
rejects!(
    oracle_reference_other_signature,
    |r| {
        op(&mut r, "operation.residual_add").oracle = OracleSpec::ReferenceOperation {
            operation_id: id("operation.main"),
            version: ContractVersion::new(1, 0),
        };
    },
    InvalidOracle,
    &format!("{RESIDUAL}.oracle.reference_operation.operation_id"),
    "operation.main"
);
rejects!(
    oracle_reference_cycle,
    |r| {
        let mut other = op(&mut r, "operation.residual_add").clone();
        other.id = id("operation.residual_ref");
        other.oracle = OracleSpec::ReferenceOperation {
            operation_id: id("operation.residual_add"),
            version: ContractVersion::new(1, 0),
        };
        r.catalog.operations.insert(other.id.clone(), other);
        op(&mut r, "operation.residual_add").oracle = OracleSpec::ReferenceOperation {
            operation_id: id("operation.residual_ref"),
            version: ContractVersion::new(1, 0),
        };
    },
    InvalidOracle,
    &format!("{RESIDUAL}.oracle.reference_operation.operation_id"),
    "cycle"
);
rejects!(
    oracle_reference_self,
    |r| {
        op(&mut r, "operation.residual_add").oracle = OracleSpec::ReferenceOperation {
            operation_id: id("operation.residual_add"),
            version: ContractVersion::new(1, 0),
        };
    },
    InvalidOracle,
    &format!("{RESIDUAL}.oracle.reference_operation.operation_id"),
    "cycle"
);
rejects!(
    oracle_reference_too_deep,
    |r| {
        let template = op(&mut r, "operation.residual_add").clone();
        for i in 0..66 {
            let mut link = template.clone();
            link.id = id(&format!("operation.chain.{i:03}"));
            if i < 65 {
                link.oracle = OracleSpec::ReferenceOperation {
                    operation_id: id(&format!("operation.chain.{:03}", i + 1)),
                    version: ContractVersion::new(1, 0),
                };
            }
            r.catalog.operations.insert(link.id.clone(), link);
        }
    },
    InvalidOracle,
    "catalog.operations[\"operation.chain.000\"].oracle.reference_operation.operation_id",
    "deeper than 64"
);
rejects!(
    oracle_negative_tolerance,
    |r| {
        op(&mut r, "operation.main").oracle = OracleSpec::AbsoluteTolerance(Rational {
            numerator: -1,
            denominator: 100,
        });
    },
    InvalidOracle,
    &format!("{MAIN}.oracle.absolute_tolerance"),
    "negative"
);
rejects!(
    oracle_tolerance_on_bool_output,
    |r| {
        op(&mut r, "operation.main").outputs[0]
            .element_types
            .insert(ElementType::Bool);
    },
    InvalidOracle,
    &format!("{MAIN}.oracle.relative_tolerance"),
    "bool"
);

#[test]
fn oracle_chain_of_64_is_allowed() {
    let mut r = valid_request();
    let template = op(&mut r, "operation.residual_add").clone();
    for i in 0..65 {
        let mut link = template.clone();
        link.id = id(&format!("operation.chain.{i:03}"));
        if i < 64 {
            link.oracle = OracleSpec::ReferenceOperation {
                operation_id: id(&format!("operation.chain.{:03}", i + 1)),
                version: ContractVersion::new(1, 0),
            };
        }
        let provider = ProviderDescriptor {
            operation_id: link.id.clone(),
            ..row(&mut r, "operation.residual_add")[0].clone()
        };
        r.catalog.providers.insert(link.id.clone(), vec![provider]);
        r.catalog.operations.insert(link.id.clone(), link);
    }
    reseal(&mut r);
    validate_request(&r).unwrap();
}
