//! The catalog's providers (rules 1.4).

use super::*;

// ---------------------------------------------------------------- catalog: providers (1.4)

const MAIN_ROW: &str = "catalog.providers[\"operation.main\"]";

rejects!(
    empty_provider_row,
    |r| {
        row(&mut r, "operation.residual_add").clear();
    },
    EmptyProviderRow,
    "catalog.providers[\"operation.residual_add\"]",
    "operation.residual_add"
);
rejects!(
    unsorted_provider_row,
    |r| {
        row(&mut r, "operation.main").swap(0, 1);
    },
    UnsortedProviderRow,
    &format!("{MAIN_ROW}[1].provider_id"),
    "provider.operation.reference"
);
rejects!(
    repeated_provider,
    |r| {
        let mut again = row(&mut r, "operation.main")[1].clone();
        again.version = ContractVersion::new(1, 1);
        row(&mut r, "operation.main").push(again);
    },
    UnsortedProviderRow,
    &format!("{MAIN_ROW}[2].provider_id"),
    "provider.operation.secondary"
);
rejects!(
    provider_of_another_operation,
    |r| {
        row(&mut r, "operation.main")[0].operation_id = id("operation.residual_add");
    },
    ProviderOperationMismatch,
    &format!("{MAIN_ROW}[0].operation_id"),
    "operation.residual_add"
);
rejects!(
    provider_with_stale_operation_fingerprint,
    |r| {
        row(&mut r, "operation.main")[1].operation_fingerprint = hex('9');
    },
    ProviderOperationMismatch,
    &format!("{MAIN_ROW}[1].operation_fingerprint"),
    "provider.operation.secondary"
);
rejects!(
    provider_on_another_device,
    |r| {
        row(&mut r, "operation.main")[0].device_id = id("device.metal.0");
    },
    DeviceMismatch,
    &format!("{MAIN_ROW}[0].device_id"),
    "device.metal.0"
);
rejects!(
    provider_of_another_major,
    |r| {
        row(&mut r, "operation.main")[0].version = ContractVersion::new(2, 0);
    },
    ProviderVersionMismatch,
    &format!("{MAIN_ROW}[0].version"),
    "provider.operation.reference"
);
rejects!(
    provider_below_minimum_version,
    |r| {
        op(&mut r, "operation.main").provider.minimum_version = ContractVersion::new(1, 2);
        row(&mut r, "operation.main")[0].version = ContractVersion::new(1, 1);
        reseal(&mut r);
    },
    ProviderVersionMismatch,
    &format!("{MAIN_ROW}[0].version"),
    "provider minimum version 1.2"
);
rejects!(
    provider_with_unoffered_capability,
    |r| {
        row(&mut r, "operation.main")[0]
            .capabilities
            .insert(id("capability.missing"));
    },
    UnofferedCapability,
    &format!("{MAIN_ROW}[0].capabilities[1]"),
    "capability.missing"
);
rejects!(
    provider_missing_required_capability,
    |r| {
        row(&mut r, "operation.main")[1].capabilities.clear();
    },
    ProviderMissingCapability,
    &format!("{MAIN_ROW}[1].capabilities"),
    "capability.compute"
);
rejects!(
    provider_with_future_execution_contract,
    |r| {
        row(&mut r, "operation.main")[0]
            .execution_semantics
            .contract_version = ContractVersion::new(1, 1);
    },
    InvalidExecutionSemantics,
    &format!("{MAIN_ROW}[0].execution_semantics.contract_version"),
    "1.1"
);
rejects!(
    provider_with_wrong_contract_fingerprint,
    |r| {
        row(&mut r, "operation.main")[0]
            .execution_semantics
            .replay_equivalence = ReplayEquivalence::Ineligible;
    },
    InvalidExecutionSemantics,
    &format!("{MAIN_ROW}[0].execution_semantics.contract_fingerprint"),
    "provider.operation.reference"
);
rejects!(
    provider_without_storage_bindings,
    |r| {
        row(&mut r, "operation.main")[0]
            .dynamic_storage_bindings
            .clear();
    },
    InvalidStorageBindings,
    &format!("{MAIN_ROW}[0].dynamic_storage_bindings"),
    "no slot"
);
rejects!(
    provider_with_unsorted_storage_bindings,
    |r| {
        row(&mut r, "operation.main")[0]
            .dynamic_storage_bindings
            .swap(1, 2);
    },
    InvalidStorageBindings,
    &format!("{MAIN_ROW}[0].dynamic_storage_bindings[2]"),
    "Input, 2"
);
rejects!(
    provider_slot_without_profiles,
    |r| {
        row(&mut r, "operation.main")[1].dynamic_storage_bindings[0]
            .storage
            .accepted_profiles
            .clear();
    },
    InvalidStorageBindings,
    &format!("{MAIN_ROW}[1].dynamic_storage_bindings[0].storage.accepted_profiles"),
    "accepts no storage profile"
);
rejects!(
    provider_slot_with_unsorted_profiles,
    |r| {
        row(&mut r, "operation.main")[1].dynamic_storage_bindings[1]
            .storage
            .accepted_profiles = vec![paged(), linear()];
    },
    InvalidStorageBindings,
    &format!("{MAIN_ROW}[1].dynamic_storage_bindings[1].storage.accepted_profiles"),
    "sorted"
);
rejects!(
    provider_with_unstable_estimator,
    |r| {
        row(&mut r, "operation.main")[0].resource_estimator_version = ContractVersion::new(0, 1);
    },
    InvalidEstimatorIdentity,
    &format!("{MAIN_ROW}[0].resource_estimator_version.major"),
    "resource-estimator.reference"
);
rejects!(
    engine_under_another_key,
    |r| {
        let engine = r.catalog.engine_providers.values().next().unwrap().clone();
        r.catalog
            .engine_providers
            .insert(id("provider.engine.other"), engine);
    },
    CatalogKeyMismatch,
    "catalog.engine_providers[\"provider.engine.other\"].provider_id",
    "provider.engine.reference"
);
rejects!(
    engine_on_another_device,
    |r| {
        r.catalog
            .engine_providers
            .values_mut()
            .next()
            .unwrap()
            .device_id = id("device.metal.0");
    },
    DeviceMismatch,
    "catalog.engine_providers[\"provider.engine.reference\"].device_id",
    "device.metal.0"
);
rejects!(
    engine_with_unoffered_capability,
    |r| {
        r.catalog
            .engine_providers
            .values_mut()
            .next()
            .unwrap()
            .capabilities
            .insert(id("capability.zzz"));
    },
    UnofferedCapability,
    "catalog.engine_providers[\"provider.engine.reference\"].capabilities[1]",
    "capability.zzz"
);
rejects!(
    materializer_under_another_key,
    |r| {
        r.catalog.weight_materializers.insert(
            id("weight-materializer.a"),
            WeightMaterializerDescriptor {
                id: id("weight-materializer.b"),
                version: ContractVersion::new(1, 0),
                implementation_fingerprint: hex('5'),
            },
        );
    },
    CatalogKeyMismatch,
    "catalog.weight_materializers[\"weight-materializer.a\"].id",
    "weight-materializer.b"
);
