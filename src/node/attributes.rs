//! Node attributes against the operation's attribute schema (rules 1.3, 2.2): no unknown
//! keys, the declared value kind, the constraint, every required key present.

use std::collections::BTreeMap;

use super::NodeError;
use crate::request::{
    AttributeConstraint, AttributeId, NodeId, OperationDescriptor, SemanticValue,
};

fn constraint_problem(constraint: &AttributeConstraint, value: &SemanticValue) -> Option<String> {
    match (constraint, value) {
        (AttributeConstraint::None, _) => None,
        (AttributeConstraint::BoolEquals(required), SemanticValue::Bool(b)) => {
            (b != required).then(|| format!("is {b}, but must be {required}"))
        }
        (AttributeConstraint::IntegerRange { minimum, maximum }, SemanticValue::Integer(i)) => {
            (i < minimum || i > maximum).then(|| format!("{i} is outside [{minimum}, {maximum}]"))
        }
        (AttributeConstraint::UnsignedRange { minimum, maximum }, SemanticValue::Unsigned(u)) => {
            (u < minimum || u > maximum).then(|| format!("{u} is outside [{minimum}, {maximum}]"))
        }
        (AttributeConstraint::RationalRange { minimum, maximum }, SemanticValue::Rational(r)) => {
            (r.cmp_value(minimum).is_lt() || r.cmp_value(maximum).is_gt()).then(|| {
                format!(
                    "{}/{} is outside [{}/{}, {}/{}]",
                    r.numerator,
                    r.denominator,
                    minimum.numerator,
                    minimum.denominator,
                    maximum.numerator,
                    maximum.denominator
                )
            })
        }
        (AttributeConstraint::TextChoices(choices), SemanticValue::Text(t)) => {
            (!choices.contains(t)).then(|| format!("{t:?} is none of {choices:?}"))
        }
        (
            AttributeConstraint::IntegerListLength { minimum, maximum },
            SemanticValue::Integers(l),
        ) => {
            let len = l.len() as u64;
            (len < u64::from(*minimum) || len > u64::from(*maximum))
                .then(|| format!("has {len} entries, outside [{minimum}, {maximum}]"))
        }
        (constraint, _) => Some(format!(
            "the schema's constraint {constraint:?} does not apply to this value kind"
        )),
    }
}

/// Validates a node's attributes against its operation's schema.
pub fn validate_attributes(
    node: &NodeId,
    operation: &OperationDescriptor,
    attributes: &BTreeMap<AttributeId, SemanticValue>,
) -> Result<(), NodeError> {
    for (key, value) in attributes {
        let Some(spec) = operation.attributes.get(key) else {
            return Err(NodeError::UnknownAttribute {
                node: node.clone(),
                operation: operation.id.clone(),
                attribute: key.to_string(),
            });
        };
        let value_error = |detail: String| NodeError::AttributeValue {
            node: node.clone(),
            attribute: key.to_string(),
            detail,
        };
        if let Some(problem) = value.problem() {
            return Err(value_error(problem));
        }
        if value.kind() != spec.value_kind {
            return Err(value_error(format!(
                "is a {:?} value, but operation {} declares {:?}",
                value.kind(),
                operation.id,
                spec.value_kind
            )));
        }
        if let Some(problem) = constraint_problem(&spec.constraint, value) {
            return Err(value_error(problem));
        }
    }
    if let Some((key, _)) = operation
        .attributes
        .iter()
        .find(|(key, spec)| spec.required && !attributes.contains_key(*key))
    {
        return Err(NodeError::MissingAttribute {
            node: node.clone(),
            operation: operation.id.clone(),
            attribute: key.to_string(),
        });
    }
    Ok(())
}
