//! Capability catalog rules: device, sizes, operations and their contracts, oracle graph
//! and engines (rules 1.3); each operation's provider row is checked by [`super::providers`]
//! (rules 1.4).

use std::collections::{BTreeSet, HashMap};

use crate::request::fingerprints::operation_fingerprint;
use crate::request::{
    AliasPolicy, AttributeConstraint, CapabilityCatalog, CapabilityId, DimensionConstraint,
    ElementType, LayoutConstraint, OperationDescriptor, OperationId, OracleSpec, Sha256Hex,
    StrideConstraint, TensorContract,
};

use super::providers::validate_provider_row;
use super::{key, RequestError};

/// Most operations a catalog may hold.
pub const MAX_OPERATIONS: usize = 4096;
/// Most provider rows (over all operations) a catalog may hold.
pub const MAX_PROVIDER_ROWS: usize = 16384;
/// Most engines a catalog may hold.
pub const MAX_ENGINES: usize = 4096;
/// Longest oracle reference chain.
pub const MAX_ORACLE_DEPTH: usize = 64;

/// Checks the whole catalog.
pub(super) fn validate_catalog(catalog: &CapabilityCatalog) -> Result<(), RequestError> {
    validate_device(catalog)?;
    validate_sizes(catalog)?;
    let mut fingerprints: HashMap<&OperationId, Sha256Hex> = HashMap::new();
    for (id, operation) in &catalog.operations {
        let path = format!("catalog.operations{}", key(id.as_str()));
        if &operation.id != id {
            return Err(RequestError::CatalogKeyMismatch {
                path: format!("{path}.id"),
                detail: format!(
                    "operation {:?} is stored under key {:?}",
                    operation.id.as_str(),
                    id.as_str()
                ),
            });
        }
        validate_operation(&path, operation)?;
        subset_of_device(
            &operation.provider.required_capabilities,
            catalog,
            || format!("{path}.provider.required_capabilities"),
            &format!("operation {:?} requires", id.as_str()),
        )?;
        let fingerprint =
            operation_fingerprint(operation).map_err(|e| RequestError::fingerprint(&path, e))?;
        fingerprints.insert(id, fingerprint);
    }
    validate_oracles(catalog)?;
    for (id, row) in &catalog.providers {
        let path = format!("catalog.providers{}", key(id.as_str()));
        let (Some(operation), Some(fingerprint)) =
            (catalog.operations.get(id), fingerprints.get(id))
        else {
            return Err(RequestError::OperationProviderKeysDiffer {
                path,
                detail: format!(
                    "providers are listed for operation {:?}, which catalog.operations does not have",
                    id.as_str()
                ),
            });
        };
        validate_provider_row(&path, operation, fingerprint, row, catalog)?;
    }
    if let Some(id) = catalog
        .operations
        .keys()
        .find(|id| !catalog.providers.contains_key(*id))
    {
        return Err(RequestError::OperationProviderKeysDiffer {
            path: format!("catalog.operations{}", key(id.as_str())),
            detail: format!(
                "operation {:?} has no row in catalog.providers",
                id.as_str()
            ),
        });
    }
    for (id, engine) in &catalog.engine_providers {
        let path = format!("catalog.engine_providers{}", key(id.as_str()));
        if &engine.provider_id != id {
            return Err(RequestError::CatalogKeyMismatch {
                path: format!("{path}.provider_id"),
                detail: format!(
                    "engine {:?} is stored under key {:?}",
                    engine.provider_id.as_str(),
                    id.as_str()
                ),
            });
        }
        if engine.device_id != catalog.device.id {
            return Err(RequestError::DeviceMismatch {
                path: format!("{path}.device_id"),
                detail: format!(
                    "engine {:?} drives device {:?}, the catalog device is {:?}",
                    id.as_str(),
                    engine.device_id.as_str(),
                    catalog.device.id.as_str()
                ),
            });
        }
        subset_of_device(
            &engine.capabilities,
            catalog,
            || format!("{path}.capabilities"),
            &format!("engine {:?} has", id.as_str()),
        )?;
    }
    for (id, materializer) in &catalog.weight_materializers {
        if &materializer.id != id {
            return Err(RequestError::CatalogKeyMismatch {
                path: format!("catalog.weight_materializers{}.id", key(id.as_str())),
                detail: format!(
                    "materializer {:?} is stored under key {:?}",
                    materializer.id.as_str(),
                    id.as_str()
                ),
            });
        }
    }
    Ok(())
}

fn validate_device(catalog: &CapabilityCatalog) -> Result<(), RequestError> {
    let device = &catalog.device;
    let name = device.id.as_str();
    if device.total_memory_bytes == 0 {
        return Err(RequestError::InvalidDevice {
            path: "catalog.device.total_memory_bytes".to_owned(),
            detail: format!("device {name:?} has no memory"),
        });
    }
    if device.dynamic_storage_profiles.is_empty() {
        return Err(RequestError::InvalidDevice {
            path: "catalog.device.dynamic_storage_profiles".to_owned(),
            detail: format!("device {name:?} offers no storage profile"),
        });
    }
    for (i, profile) in device.dynamic_storage_profiles.iter().enumerate() {
        if let Some(problem) = profile.problem() {
            return Err(RequestError::InvalidDevice {
                path: format!("catalog.device.dynamic_storage_profiles[{i}]"),
                detail: format!("device {name:?} offers {profile}: {problem}"),
            });
        }
    }
    Ok(())
}

fn validate_sizes(catalog: &CapabilityCatalog) -> Result<(), RequestError> {
    let rows: usize = catalog.providers.values().map(Vec::len).sum();
    let tables = [
        ("operations", catalog.operations.len(), MAX_OPERATIONS),
        ("providers", catalog.providers.len(), MAX_OPERATIONS),
        (
            "engine_providers",
            catalog.engine_providers.len(),
            MAX_ENGINES,
        ),
    ];
    for (field, count, limit) in tables {
        if count == 0 {
            return Err(RequestError::EmptyCatalog {
                path: format!("catalog.{field}"),
                detail: format!("catalog.{field} has no entries"),
            });
        }
        if count > limit {
            return Err(RequestError::CatalogTooLarge {
                path: format!("catalog.{field}"),
                detail: format!("catalog.{field} has {count} entries (at most {limit})"),
            });
        }
    }
    if rows > MAX_PROVIDER_ROWS {
        return Err(RequestError::CatalogTooLarge {
            path: "catalog.providers".to_owned(),
            detail: format!(
                "catalog.providers has {rows} provider rows (at most {MAX_PROVIDER_ROWS})"
            ),
        });
    }
    Ok(())
}

pub(super) fn subset_of_device(
    capabilities: &BTreeSet<CapabilityId>,
    catalog: &CapabilityCatalog,
    path: impl FnOnce() -> String,
    owner: &str,
) -> Result<(), RequestError> {
    let offered = &catalog.device.capabilities;
    match capabilities
        .iter()
        .enumerate()
        .find(|(_, c)| !offered.contains(*c))
    {
        None => Ok(()),
        Some((i, capability)) => Err(RequestError::UnofferedCapability {
            path: format!("{}[{i}]", path()),
            detail: format!(
                "{owner} capability {:?}, which device {:?} does not offer",
                capability.as_str(),
                catalog.device.id.as_str()
            ),
        }),
    }
}

fn validate_operation(path: &str, operation: &OperationDescriptor) -> Result<(), RequestError> {
    let name = operation.id.as_str();
    let bad = |field: &str, detail: String| RequestError::InvalidOperation {
        path: format!("{path}.{field}"),
        detail: format!("operation {name:?}: {detail}"),
    };
    if !operation.version.is_stable() {
        return Err(bad(
            "version.major",
            format!("version {} is unstable", operation.version),
        ));
    }
    if operation.outputs.is_empty() {
        return Err(bad("outputs", "it has no outputs".to_owned()));
    }
    for (key, spec) in &operation.attributes {
        if let Some(problem) = constraint_problem(&spec.constraint) {
            return Err(bad(
                &format!("attributes.{key}.constraint"),
                format!("attribute {key:?}: {problem}"),
            ));
        }
    }
    for (i, contract) in operation.inputs.iter().enumerate() {
        let slot = format!("{path}.inputs[{i}]");
        validate_contract(&slot, name, &format!("input {i}"), contract)?;
        if !contract.access.reads() {
            return Err(bad(
                &format!("inputs[{i}].access"),
                format!("input {i} does not read (access write)"),
            ));
        }
        if contract.alias != AliasPolicy::NoAlias {
            return Err(bad(
                &format!("inputs[{i}].alias"),
                format!("input {i} aliases another tensor (inputs must be no_alias)"),
            ));
        }
    }
    for (i, contract) in operation.outputs.iter().enumerate() {
        let slot = format!("{path}.outputs[{i}]");
        validate_contract(&slot, name, &format!("output {i}"), contract)?;
        if !contract.access.writes() {
            return Err(bad(
                &format!("outputs[{i}].access"),
                format!("output {i} does not write (access read)"),
            ));
        }
        if let AliasPolicy::MayAlias { tensor_index } | AliasPolicy::MustAlias { tensor_index } =
            contract.alias
        {
            if tensor_index as usize >= operation.inputs.len() {
                return Err(bad(
                    &format!("outputs[{i}].alias"),
                    format!(
                        "output {i} aliases input {tensor_index}, but the operation has {} inputs",
                        operation.inputs.len()
                    ),
                ));
            }
        }
    }
    let alignment = operation.resources.minimum_value_alignment_bytes;
    if !alignment.is_power_of_two() {
        return Err(bad(
            "resources.minimum_value_alignment_bytes",
            format!("minimum value alignment {alignment} is not a non-zero power of two"),
        ));
    }
    if let OracleSpec::AbsoluteTolerance(tolerance) | OracleSpec::RelativeTolerance(tolerance) =
        &operation.oracle
    {
        let field = match &operation.oracle {
            OracleSpec::AbsoluteTolerance(_) => "oracle.absolute_tolerance",
            _ => "oracle.relative_tolerance",
        };
        let problem = tolerance.problem().or_else(|| {
            (tolerance.numerator < 0).then(|| {
                format!(
                    "tolerance {}/{} is negative",
                    tolerance.numerator, tolerance.denominator
                )
            })
        });
        if let Some(problem) = problem {
            return Err(RequestError::InvalidOracle {
                path: format!("{path}.{field}"),
                detail: format!("operation {name:?}: {problem}"),
            });
        }
        if let Some(i) = operation
            .outputs
            .iter()
            .position(|o| o.element_types.contains(&ElementType::Bool))
        {
            return Err(RequestError::InvalidOracle {
                path: format!("{path}.{field}"),
                detail: format!(
                    "operation {name:?} applies a numeric tolerance, but output {i} may be bool"
                ),
            });
        }
    }
    let minimum = operation.provider.minimum_version;
    if !minimum.is_stable() || minimum.major != operation.version.major {
        return Err(bad(
            "provider.minimum_version",
            format!(
                "provider minimum version {minimum} is unstable or not of major {}",
                operation.version.major
            ),
        ));
    }
    Ok(())
}

fn validate_contract(
    path: &str,
    operation: &str,
    slot: &str,
    contract: &TensorContract,
) -> Result<(), RequestError> {
    let bad = |field: String, detail: String| RequestError::InvalidTensorContract {
        path: format!("{path}.{field}"),
        detail: format!("operation {operation:?} {slot}: {detail}"),
    };
    let rank = contract.dimensions.len();
    for (axis, dimension) in contract.dimensions.iter().enumerate() {
        let problem = match dimension {
            DimensionConstraint::Exact(0) => Some("exact extent 0".to_owned()),
            DimensionConstraint::Symbol(symbol) if symbol.trim().is_empty() => {
                Some("blank symbol".to_owned())
            }
            DimensionConstraint::Range { minimum, maximum }
                if *minimum == 0 || maximum < minimum =>
            {
                Some(format!(
                    "range {minimum}..={maximum} (minimum ≥ 1, maximum ≥ minimum)"
                ))
            }
            _ => None,
        };
        if let Some(problem) = problem {
            return Err(bad(
                format!("dimensions[{axis}]"),
                format!("axis {axis}: {problem}"),
            ));
        }
    }
    if contract.element_types.is_empty() {
        return Err(bad(
            "element_types".to_owned(),
            "accepts no element type".to_owned(),
        ));
    }
    if contract.layouts.is_empty() {
        return Err(bad("layouts".to_owned(), "accepts no layout".to_owned()));
    }
    for (i, layout) in contract.layouts.iter().enumerate() {
        if i > 0 && contract.layouts[i - 1] >= *layout {
            return Err(bad(
                format!("layouts[{i}]"),
                format!("layout {i} is not after layout {} (sorted, unique)", i - 1),
            ));
        }
        match layout {
            LayoutConstraint::Contiguous => {}
            LayoutConstraint::Strided { strides } => {
                if strides.len() != rank {
                    return Err(bad(
                        format!("layouts[{i}].strided.strides"),
                        format!("{} strides for rank {rank}", strides.len()),
                    ));
                }
                for (axis, stride) in strides.iter().enumerate() {
                    let blank = match stride {
                        StrideConstraint::ExactBytes(bytes) => *bytes == 0,
                        StrideConstraint::Symbol(symbol) => symbol.trim().is_empty(),
                    };
                    if blank {
                        return Err(bad(
                            format!("layouts[{i}].strided.strides[{axis}]"),
                            format!("stride of axis {axis} is zero or a blank symbol"),
                        ));
                    }
                }
            }
            LayoutConstraint::Blocked { block, axis_order } => {
                if block.len() != rank || block.contains(&0) {
                    return Err(bad(
                        format!("layouts[{i}].blocked.block"),
                        format!("block {block:?} for rank {rank} (one non-zero extent per axis)"),
                    ));
                }
                let mut seen = vec![false; rank];
                let permutation = axis_order.len() == rank
                    && axis_order.iter().all(|&a| match seen.get_mut(a as usize) {
                        Some(slot) if !*slot => {
                            *slot = true;
                            true
                        }
                        _ => false,
                    });
                if !permutation {
                    return Err(bad(
                        format!("layouts[{i}].blocked.axis_order"),
                        format!("axis order {axis_order:?} is not a permutation of 0..{rank}"),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Reference chains resolve, are acyclic, at most [`MAX_ORACLE_DEPTH`] deep, and reach
/// operations with the same inputs, outputs and attributes.
fn validate_oracles(catalog: &CapabilityCatalog) -> Result<(), RequestError> {
    for (id, operation) in &catalog.operations {
        let OracleSpec::ReferenceOperation { .. } = operation.oracle else {
            continue;
        };
        let path = format!(
            "catalog.operations{}.oracle.reference_operation",
            key(id.as_str())
        );
        let mut current = operation;
        let mut chain = vec![id.as_str()];
        while let OracleSpec::ReferenceOperation {
            operation_id,
            version,
        } = &current.oracle
        {
            let Some(next) = catalog.operations.get(operation_id) else {
                return Err(RequestError::InvalidOracle {
                    path: format!("{path}.operation_id"),
                    detail: format!(
                        "operation {:?} is checked against operation {:?}, which the catalog does not have",
                        current.id.as_str(),
                        operation_id.as_str()
                    ),
                });
            };
            if next.version != *version {
                return Err(RequestError::InvalidOracle {
                    path: format!("{path}.version"),
                    detail: format!(
                        "operation {:?} is checked against {:?} version {version}, the catalog has version {}",
                        current.id.as_str(),
                        operation_id.as_str(),
                        next.version
                    ),
                });
            }
            if !same_signature(operation, next) {
                return Err(RequestError::InvalidOracle {
                    path: format!("{path}.operation_id"),
                    detail: format!(
                        "operation {:?} is checked against {:?}, whose inputs, outputs or attributes differ",
                        id.as_str(),
                        operation_id.as_str()
                    ),
                });
            }
            if chain.contains(&operation_id.as_str()) {
                chain.push(operation_id.as_str());
                return Err(RequestError::InvalidOracle {
                    path: format!("{path}.operation_id"),
                    detail: format!("oracle references form a cycle: {}", chain.join(" -> ")),
                });
            }
            chain.push(operation_id.as_str());
            if chain.len() > MAX_ORACLE_DEPTH + 1 {
                return Err(RequestError::InvalidOracle {
                    path: format!("{path}.operation_id"),
                    detail: format!(
                        "the oracle reference chain of operation {:?} is deeper than {MAX_ORACLE_DEPTH}",
                        id.as_str()
                    ),
                });
            }
            current = next;
        }
    }
    Ok(())
}

fn same_signature(a: &OperationDescriptor, b: &OperationDescriptor) -> bool {
    a.inputs == b.inputs && a.outputs == b.outputs && a.attributes == b.attributes
}

/// Why an attribute constraint can accept nothing or is malformed: a rational bound with a
/// zero or negative denominator (the same rule as a rational value), or a range whose
/// minimum exceeds its maximum, or an empty set of choices.
fn constraint_problem(constraint: &AttributeConstraint) -> Option<String> {
    match constraint {
        AttributeConstraint::None | AttributeConstraint::BoolEquals(_) => None,
        AttributeConstraint::IntegerRange { minimum, maximum } => (minimum > maximum)
            .then(|| format!("integer_range minimum {minimum} exceeds maximum {maximum}")),
        AttributeConstraint::UnsignedRange { minimum, maximum } => (minimum > maximum)
            .then(|| format!("unsigned_range minimum {minimum} exceeds maximum {maximum}")),
        AttributeConstraint::RationalRange { minimum, maximum } => {
            for (bound, value) in [("minimum", minimum), ("maximum", maximum)] {
                if let Some(problem) = value.problem() {
                    return Some(format!("rational_range {bound}: {problem}"));
                }
            }
            (minimum.cmp_value(maximum) == std::cmp::Ordering::Greater).then(|| {
                format!(
                    "rational_range minimum {}/{} exceeds maximum {}/{}",
                    minimum.numerator, minimum.denominator, maximum.numerator, maximum.denominator
                )
            })
        }
        AttributeConstraint::TextChoices(choices) => choices
            .is_empty()
            .then(|| "text_choices lists no choice".to_owned()),
        AttributeConstraint::IntegerListLength { minimum, maximum } => (minimum > maximum)
            .then(|| format!("integer_list_length minimum {minimum} exceeds maximum {maximum}")),
    }
}
