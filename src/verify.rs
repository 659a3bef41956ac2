//! Verification of a stored plan against its request (rules 5, "revalidation of
//! a wire plan").
//!
//! [`verify_text`] reads the stored plan strictly (one JSON value, each key once, unknown
//! fields rejected, every field present in its canonical form), rebuilds the plan from the
//! request, compares the two canonical JSON texts and reports the **first differing field by
//! its JSON path**, then checks the hash and re-runs [`validate_internal`] and the
//! independent checker on the stored plan.
//!
//! Cost: before the rebuild the stored text is scanned strictly and its recorded selection
//! settings are read by a partial parse ([`recorded`]). After it, the text is held against
//! the rebuilt plan's file form without printing it ([`file_form`]: every plan file
//! jointplan writes is that form, and an equal text is the rebuilt plan byte for byte).
//! Any other text has its payload hashed as plan-hash material by streaming it through the
//! canonical writer (no `Value` tree, no typed plan: [`payload_text`]); the rebuilt plan
//! carries its own plan hash, so the text is the rebuilt plan's canonical form when that
//! hash, its `plan_hash` and its `plan_id` agree with the rebuilt plan's (and it has no
//! other top-level member); equal hashes mean equal canonical texts. Only when they differ
//! is the stored text parsed whole into a typed plan (a malformed plan is reported as
//! such), its form checked (its own file form, or else the canonical hash of its text), and,
//! to name the first differing field, the two typed plans compared node by node
//! ([`difference`]: a tree of each plan without its nodes, then one pair of node trees at a
//! time): rejections pay for the diagnosis, acceptances do not.
//!
//! Order of the checks: the rebuild-and-compare runs before the internal checks because a
//! tampered field almost always also breaks the plan hash, and "the hash does not match" is
//! far less useful than the path of the field that was changed. When the plans differ, the
//! internal finding on the stored plan (if any) is attached as context.

mod difference;
mod file_form;
mod node_view;
#[cfg(test)]
mod one_pass_reading;
mod payload_text;
mod recorded;

pub use difference::first_difference;
pub use node_view::{read_node_view, PlanNodeView};

use std::fmt;

use serde_json::Value;

use crate::canonical::CanonicalError;
use crate::request::PlanRequest;

use crate::builder::error::PlanError;
use crate::builder::internal::{validate_internal, InternalError};
use crate::builder::BuildOptions;
use crate::plan::ExecutionPlan;

/// One field that differs between the stored and the rebuilt plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldDifference {
    /// JSON path from the plan root, e.g. `payload.nodes[3].selection.selected_provider`.
    pub path: String,
    /// The stored value, compact JSON (`<absent>` if the stored plan lacks the field).
    pub stored: String,
    /// The rebuilt value, compact JSON (`<absent>` if the rebuilt plan lacks the field).
    pub rebuilt: String,
}

impl fmt::Display for FieldDifference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: stored {}, rebuilt {}",
            self.path, self.stored, self.rebuilt
        )
    }
}

/// Why a stored plan was rejected.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// The stored file is not a strict JSON document (a duplicate key, trailing bytes, an
    /// input limit): bad input, not a rejected plan.
    #[error(transparent)]
    Input(#[from] crate::request::LoadError),
    /// The stored plan is not a plan: wrong shape, unknown field, bad id.
    #[error("stored plan at {json_path}: {message}")]
    Malformed {
        /// JSON path of the culprit.
        json_path: String,
        /// What is wrong.
        message: String,
    },
    /// The stored plan parses, but not in canonical form (a field missing or written in a
    /// form jointplan never writes).
    #[error("stored plan is not canonical at {0}")]
    NonCanonical(FieldDifference),
    /// The plan cannot be rebuilt from the request (boxed: the build's errors are large and
    /// this is the cold path).
    #[error("the request does not build: {0}")]
    Rebuild(Box<PlanError>),
    /// The stored plan differs from the rebuilt one.
    #[error("stored plan differs from the plan rebuilt from the request at {difference}{}", context_text(.internal))]
    Differs {
        /// The first differing field.
        difference: FieldDifference,
        /// What the internal checks say about the stored plan, if they reject it.
        internal: Option<Box<InternalError>>,
    },
    /// A plan could not be serialized canonically.
    #[error(transparent)]
    Canonical(#[from] CanonicalError),
}

fn context_text(internal: &Option<Box<InternalError>>) -> String {
    match internal {
        Some(error) => format!(" (the stored plan also fails an internal check: {error})"),
        None => String::new(),
    }
}

impl VerifyError {
    /// The JSON path of the first differing or malformed field, if the error has one.
    pub fn json_path(&self) -> Option<&str> {
        match self {
            VerifyError::Malformed { json_path, .. } => Some(json_path),
            VerifyError::NonCanonical(d) | VerifyError::Differs { difference: d, .. } => {
                Some(&d.path)
            }
            VerifyError::Input(
                crate::request::LoadError::Json { json_path, .. }
                | crate::request::LoadError::Limit { json_path, .. },
            ) => Some(json_path),
            _ => None,
        }
    }

    /// The kind of failure: the rebuild's kind when the request itself does not build,
    /// [`ErrorKind::Rejected`](crate::error_kind::ErrorKind::Rejected) when the stored plan is rejected.
    pub fn kind(&self) -> crate::error_kind::ErrorKind {
        match self {
            VerifyError::Rebuild(error) => error.kind(),
            VerifyError::Input(_) => crate::error_kind::ErrorKind::BadInput,
            _ => crate::error_kind::ErrorKind::Rejected,
        }
    }
}

/// A stored plan read from its text by [`read_stored_plan_to_rebuild`]: its recorded
/// selection settings and the text; the text is hashed only if it is not the rebuilt
/// plan's file form, and parsed whole only if the rebuilt plan differs.
#[derive(Debug)]
pub struct StoredPlan<'t> {
    /// The recorded selection settings (`payload.selection_settings`).
    settings: crate::plan::SelectionSettings,
    /// The stored text.
    text: &'t str,
}

/// The canonical hash of JSON text, streamed through the canonical writer.
fn canonical_text_hash(text: &str) -> Result<crate::canonical::Sha256Hex, VerifyError> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    Ok(crate::canonical::canonical_fingerprint(
        "stored plan",
        &serde_transcode::Transcoder::new(&mut deserializer),
    )?)
}

fn tree(text: &str) -> Result<Value, VerifyError> {
    serde_json::from_str(text).map_err(|err| VerifyError::Malformed {
        json_path: ".".to_owned(),
        message: err.to_string(),
    })
}

fn to_tree(plan: &ExecutionPlan) -> Result<Value, VerifyError> {
    serde_json::to_value(plan).map_err(|err| VerifyError::Malformed {
        json_path: ".".to_owned(),
        message: err.to_string(),
    })
}

/// Reads a stored plan strictly from its text (`file` names it in errors) and runs the
/// independent checker on it: the text must be one JSON value with each key once and
/// within the input limits (else bad input), parse into a plan with no unknown field, and
/// be in canonical form (the typed plan serializes back to the same document, else
/// [`VerifyError::NonCanonical`]); the checker's report says whether the plan is valid.
///
/// Cost: the text is parsed into the typed plan under the strict rules in one pass
/// ([`read_plan_as_stored`]); the checker hashes
/// the typed payload for its rule 2 while the typed plan is serialized once more and
/// compared with the text ([`file_form`]): a text that is byte for byte its plan's file
/// form (every plan file jointplan writes) is in canonical form without hashing the text.
/// Any other text has its payload hashed as plan-hash material ([`payload_text`]), which
/// agrees with the checker's hash exactly when the text is the plan's canonical form; only
/// when it does not is the whole document hashed (and, when it differs, walked) to name the
/// first non-canonical field.
pub fn check_stored_plan(
    file: &std::path::Path,
    text: &str,
) -> Result<(ExecutionPlan, crate::check::CheckReport), VerifyError> {
    let plan = read_plan_as_stored(file, text)?;
    let ((report, payload_hash), file_form) = rayon::join(
        || crate::check::check_plan_and_hash(&plan),
        || file_form::is_file_form(&plan, text),
    );
    if !file_form {
        let text_hash = payload_text::stored_identity(text).map(|identity| identity.payload_hash);
        if text_hash.is_none() || text_hash != payload_hash {
            check_form(&plan, text, &canonical_text_hash(text)?)?;
        }
    }
    Ok((plan, report))
}

/// Reads a stored plan for [`verify_stored`]: the text must be one JSON value with each key
/// once and within the input limits (else bad input), and its recorded selection settings
/// are read. Whether it parses strictly into a plan (no unknown field) and is that plan's
/// canonical form is left to [`verify_stored`]: when the text is the rebuilt plan's file
/// form, or its identity is the rebuilt plan's, the text is a plan the builder made, so it
/// is not parsed whole (for DeepSeek-V3, a 286 MB text).
pub fn read_stored_plan_to_rebuild<'t>(
    file: &std::path::Path,
    text: &'t str,
) -> Result<StoredPlan<'t>, VerifyError> {
    crate::json_input::check_document(text)
        .map_err(|err| crate::request::LoadError::from_strict(file, err))?;
    let settings = match recorded::recorded_settings(text) {
        Ok(settings) => settings,
        // The whole parse names the culprit by its path; should it pass, the partial
        // parse's own message stands.
        Err(partial) => {
            parse_plan(text)?;
            return Err(VerifyError::Malformed {
                json_path: "payload.selection_settings".to_owned(),
                message: partial.to_string(),
            });
        }
    };
    Ok(StoredPlan { settings, text })
}

/// Checks that the typed plan serializes back to the stored document whose canonical hash
/// is `canonical` (else the first differing path, as non-canonical).
fn check_form(
    plan: &ExecutionPlan,
    text: &str,
    canonical: &crate::canonical::Sha256Hex,
) -> Result<(), VerifyError> {
    if crate::canonical::canonical_fingerprint("plan", plan)? != *canonical {
        let reserialized = to_tree(plan)?;
        let difference = first_difference(&tree(text)?, &reserialized).unwrap_or(FieldDifference {
            path: ".".to_owned(),
            stored: "the stored document".to_owned(),
            rebuilt: "its canonical form".to_owned(),
        });
        return Err(VerifyError::NonCanonical(difference));
    }
    Ok(())
}

/// Reads a plan as stored, for commands that only read it (`explain`, `diff`): the text
/// must be one JSON value with each key once and within the input limits, and parse into a
/// plan with no unknown field; it is not hashed (whether the plan is intact is what
/// [`check_stored_plan`], or `verify`, establish).
///
/// Cost: one pass of the JSON reader, the typed parse under the strict rules with the
/// plan's nodes read on every core ([`crate::json_input::parse_strictly_split`]); only a
/// text that pass does not accept is scanned strictly and then parsed, to name the
/// culprit (first a broken strict rule, then a parse error, by its JSON path).
pub fn read_plan_as_stored(
    file: &std::path::Path,
    text: &str,
) -> Result<ExecutionPlan, VerifyError> {
    if let Some(plan) =
        crate::json_input::parse_strictly_split(text, &crate::json_input::InputLimits::current())
    {
        return Ok(plan);
    }
    crate::json_input::check_document(text)
        .map_err(|err| crate::request::LoadError::from_strict(file, err))?;
    parse_plan(text)
}

/// The typed plan of a text `check_document` accepted. The fast parse tracks no JSON path
/// (tracking wraps every value); only a text that fails is parsed again with the path
/// tracked, to name where it fails.
fn parse_plan(text: &str) -> Result<ExecutionPlan, VerifyError> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    serde::Deserialize::deserialize(&mut deserializer).map_err(|fast| {
        let located = crate::json_input::located_parse_error::<ExecutionPlan>(text, fast);
        VerifyError::Malformed {
            json_path: located.json_path,
            message: located.message,
        }
    })
}

/// Verifies a stored plan (the text of a plan file) against its request: strict read,
/// rebuild under the plan's recorded selection settings, canonical comparison (the first
/// differing JSON path on a difference), hash, internal checks, independent checker.
/// Returns the verified plan.
pub fn verify_text(
    request: &PlanRequest,
    text: &str,
    options: &BuildOptions,
) -> Result<ExecutionPlan, VerifyError> {
    let stored = read_stored_plan_to_rebuild(std::path::Path::new("stored plan"), text)?;
    verify_stored(request, stored, options)
}

/// Verifies a plan already read by [`read_stored_plan_to_rebuild`].
///
/// When the stored text is the rebuilt plan's file form ([`file_form`]), or else the
/// rebuilt plan's plan hash, `plan_hash` and `plan_id` are the stored text's
/// ([`payload_text`]), the stored document
/// is, field for field, the plan the builder has just made and checked (its internal
/// checks and the independent checker run inside the build), so the plan returned is the
/// rebuilt one and those checks do not run a second time on an identical plan. On a
/// difference the stored text is parsed whole (a malformed plan is reported as such), its
/// form is checked (a non-canonical document is reported as such), then the first
/// differing path is named with the stored plan's internal-check finding beside it. A
/// request that does not build is reported as such, unless the stored plan is malformed
/// too, which is reported first.
pub fn verify_stored(
    request: &PlanRequest,
    stored: StoredPlan<'_>,
    options: &BuildOptions,
) -> Result<ExecutionPlan, VerifyError> {
    let mut unreadable_choices = None;
    let options = options
        .with_recorded_settings(&stored.settings, || {
            recorded::recorded_choices(stored.text).unwrap_or_else(|error| {
                unreadable_choices = Some(error);
                std::collections::BTreeMap::new()
            })
        })
        .map_err(|e| VerifyError::Malformed {
            json_path: "payload.selection_settings".to_owned(),
            message: e.to_string(),
        })?;
    if let Some(error) = unreadable_choices {
        parse_plan(stored.text)?;
        return Err(VerifyError::Malformed {
            json_path: "payload.nodes".to_owned(),
            message: error.to_string(),
        });
    }
    let rebuilt = match ExecutionPlan::build(request, &options) {
        Ok(rebuilt) => rebuilt,
        Err(error) => {
            parse_plan(stored.text)?;
            return Err(error.into());
        }
    };
    if file_form::is_file_form(&rebuilt, stored.text)
        || payload_text::stored_identity(stored.text)
            .is_some_and(|identity| identity.is_plan(&rebuilt))
    {
        return Ok(rebuilt);
    }
    let mut plan = parse_plan(stored.text)?;
    // A text that is its typed plan's file form is in canonical form; any other is
    // established the general way, through the canonical hash of the text.
    if !file_form::is_file_form(&plan, stored.text) {
        check_form(&plan, stored.text, &canonical_text_hash(stored.text)?)?;
    }
    // The stored text is the typed plan's canonical form (`is_file_form` or `check_form`), so the two typed
    // plans are compared, one node at a time: no tree of either whole plan.
    let mut rebuilt = rebuilt;
    let difference =
        difference::first_plan_difference(&mut plan, &mut rebuilt)?.unwrap_or(FieldDifference {
            path: ".".to_owned(),
            stored: "the stored plan".to_owned(),
            rebuilt: "the rebuilt plan".to_owned(),
        });
    let internal = validate_internal(&plan, request).err().map(Box::new);
    Err(VerifyError::Differs {
        difference,
        internal,
    })
}

// Wrappers displayed with context are not also returned as `source()` (a reporter that
// walks the chain would print the inner error twice), hence these hand-written `From`s.

impl From<PlanError> for VerifyError {
    fn from(error: PlanError) -> Self {
        VerifyError::Rebuild(Box::new(error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reports_the_first_differing_path_in_sorted_key_order() {
        let stored = json!({"payload": {"nodes": [{"id": "a"}, {"selection": {"selected_provider": "a", "z": 1}}], "b": 1}, "plan_hash": "x"});
        let rebuilt = json!({"payload": {"nodes": [{"id": "a"}, {"selection": {"selected_provider": "b", "z": 2}}], "b": 1}, "plan_hash": "y"});
        let d = first_difference(&stored, &rebuilt).unwrap();
        assert_eq!(d.path, "payload.nodes[1].selection.selected_provider");
        assert_eq!(
            d.to_string(),
            "payload.nodes[1].selection.selected_provider: stored \"a\", rebuilt \"b\""
        );
    }

    #[test]
    fn missing_keys_and_array_lengths_differ_at_their_position() {
        let d = first_difference(&json!({"a": [1, 2]}), &json!({"a": [1, 2, 3]})).unwrap();
        assert_eq!((d.path.as_str(), d.stored.as_str()), ("a[2]", "<absent>"));
        let d = first_difference(&json!({"m": {"operation.x": 1}}), &json!({"m": {}})).unwrap();
        assert_eq!(d.path, "m[\"operation.x\"]");
        assert_eq!(d.rebuilt, "<absent>");
        assert!(first_difference(
            &json!({"a": [1, {"b": null}]}),
            &json!({"a": [1, {"b": null}]})
        )
        .is_none());
    }

    #[test]
    fn unknown_fields_are_malformed_with_their_path() {
        let text = json!({"payload": {}, "plan_hash": "0", "extra": 1}).to_string();
        let file = std::path::Path::new("plan.json");
        for err in [
            read_plan_as_stored(file, &text).unwrap_err(),
            check_stored_plan(file, &text).unwrap_err(),
        ] {
            assert!(matches!(err, VerifyError::Malformed { .. }), "{err}");
        }
    }
}
