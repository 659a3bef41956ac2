//! The catalog's provider rules (rules 1.4): each operation's provider row and each
//! provider in it, against its operation, the device and the engines.

use std::collections::HashMap;

use crate::request::{
    CapabilityCatalog, ContractVersion, OperationDescriptor, ProviderDescriptor, Sha256Hex,
};

use super::catalog::subset_of_device;
use super::RequestError;

/// Checks one operation's provider row: sorted by provider id and version, no provider
/// twice, each provider valid.
pub(super) fn validate_provider_row(
    row_path: &str,
    operation: &OperationDescriptor,
    fingerprint: &Sha256Hex,
    row: &[ProviderDescriptor],
    catalog: &CapabilityCatalog,
) -> Result<(), RequestError> {
    let op = operation.id.as_str();
    if row.is_empty() {
        return Err(RequestError::EmptyProviderRow {
            path: row_path.to_owned(),
            detail: format!("operation {op:?} has an empty provider row"),
        });
    }
    let mut ids = HashMap::new();
    for (i, provider) in row.iter().enumerate() {
        let path = format!("{row_path}[{i}]");
        let name = provider.provider_id.as_str();
        if i > 0 {
            let previous = &row[i - 1];
            if (&previous.provider_id, previous.version) > (&provider.provider_id, provider.version)
            {
                return Err(RequestError::UnsortedProviderRow {
                    path: format!("{path}.provider_id"),
                    detail: format!(
                        "provider {name:?} {} comes after {:?} {} (sort by provider id, version)",
                        provider.version,
                        previous.provider_id.as_str(),
                        previous.version
                    ),
                });
            }
        }
        if let Some(first) = ids.insert(&provider.provider_id, i) {
            return Err(RequestError::UnsortedProviderRow {
                path: format!("{path}.provider_id"),
                detail: format!("provider {name:?} is listed twice for operation {op:?} (also at {row_path}[{first}])"),
            });
        }
        validate_provider(&path, operation, fingerprint, provider, catalog)?;
    }
    Ok(())
}

/// Checks one provider against its operation (whose fingerprint is `fingerprint`) and the
/// catalog's device and engines.
fn validate_provider(
    path: &str,
    operation: &OperationDescriptor,
    fingerprint: &Sha256Hex,
    provider: &ProviderDescriptor,
    catalog: &CapabilityCatalog,
) -> Result<(), RequestError> {
    let op = operation.id.as_str();
    let name = provider.provider_id.as_str();
    if provider.operation_id != operation.id {
        return Err(RequestError::ProviderOperationMismatch {
            path: format!("{path}.operation_id"),
            detail: format!(
                "provider {name:?} implements {:?} but is listed under {op:?}",
                provider.operation_id.as_str()
            ),
        });
    }
    if &provider.operation_fingerprint != fingerprint {
        return Err(RequestError::ProviderOperationMismatch {
            path: format!("{path}.operation_fingerprint"),
            detail: format!(
                "provider {name:?} quotes operation fingerprint {}, operation {op:?} is {fingerprint} \
                 (run `jointplan seal` after editing the operation)",
                provider.operation_fingerprint
            ),
        });
    }
    if provider.device_id != catalog.device.id {
        return Err(RequestError::DeviceMismatch {
            path: format!("{path}.device_id"),
            detail: format!(
                "provider {name:?} runs on device {:?}, the catalog device is {:?}",
                provider.device_id.as_str(),
                catalog.device.id.as_str()
            ),
        });
    }
    let version_problem = |required: ContractVersion, what: &str| {
        (!provider.version.satisfies(required)).then(|| RequestError::ProviderVersionMismatch {
            path: format!("{path}.version"),
            detail: format!(
                "provider {name:?} version {} does not satisfy {what} {required} of operation {op:?}",
                provider.version
            ),
        })
    };
    if let Some(error) = version_problem(operation.version, "version").or_else(|| {
        version_problem(
            operation.provider.minimum_version,
            "provider minimum version",
        )
    }) {
        return Err(error);
    }
    subset_of_device(
        &provider.capabilities,
        catalog,
        || format!("{path}.capabilities"),
        &format!("provider {name:?} has"),
    )?;
    if let Some(missing) = operation
        .provider
        .required_capabilities
        .iter()
        .find(|c| !provider.capabilities.contains(*c))
    {
        return Err(RequestError::ProviderMissingCapability {
            path: format!("{path}.capabilities"),
            detail: format!(
                "provider {name:?} lacks capability {:?}, which operation {op:?} requires",
                missing.as_str()
            ),
        });
    }
    let semantics = &provider.execution_semantics;
    if semantics.contract_version != ContractVersion::new(1, 0) {
        return Err(RequestError::InvalidExecutionSemantics {
            path: format!("{path}.execution_semantics.contract_version"),
            detail: format!(
                "provider {name:?} declares execution contract {} (only 1.0 exists)",
                semantics.contract_version
            ),
        });
    }
    let expected = semantics.expected_fingerprint();
    if semantics.contract_fingerprint != expected {
        return Err(RequestError::InvalidExecutionSemantics {
            path: format!("{path}.execution_semantics.contract_fingerprint"),
            detail: format!(
                "provider {name:?} quotes contract fingerprint {}, its semantics give {expected}",
                semantics.contract_fingerprint
            ),
        });
    }
    if provider.dynamic_storage_bindings.is_empty() {
        return Err(RequestError::InvalidStorageBindings {
            path: format!("{path}.dynamic_storage_bindings"),
            detail: format!("provider {name:?} can bind no slot"),
        });
    }
    for (i, binding) in provider.dynamic_storage_bindings.iter().enumerate() {
        let binding_path = format!("{path}.dynamic_storage_bindings[{i}]");
        if i > 0 {
            let previous = &provider.dynamic_storage_bindings[i - 1];
            if (previous.role, previous.ordinal) >= (binding.role, binding.ordinal) {
                return Err(RequestError::InvalidStorageBindings {
                    path: binding_path,
                    detail: format!(
                        "provider {name:?}: slot ({:?}, {}) is not after ({:?}, {}) (sorted by role, ordinal; unique)",
                        binding.role, binding.ordinal, previous.role, previous.ordinal
                    ),
                });
            }
        }
        if let Some(problem) = binding.storage.problem() {
            return Err(RequestError::InvalidStorageBindings {
                path: format!("{binding_path}.storage.accepted_profiles"),
                detail: format!(
                    "provider {name:?} slot ({:?}, {}): {problem}",
                    binding.role, binding.ordinal
                ),
            });
        }
    }
    if !provider.resource_estimator_version.is_stable() {
        return Err(RequestError::InvalidEstimatorIdentity {
            path: format!("{path}.resource_estimator_version.major"),
            detail: format!(
                "provider {name:?} estimator {:?} has unstable version {}",
                provider.resource_estimator_id.as_str(),
                provider.resource_estimator_version
            ),
        });
    }
    Ok(())
}
