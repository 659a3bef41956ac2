//! Whether a stored text is, byte for byte, the plan file form of the plan parsed from it.
//!
//! Why: a stored plan is in canonical form when its text and the typed plan parsed from it
//! have the same canonical JSON. Every plan file jointplan writes is
//! [`ExecutionPlan::write_json`] of its plan, so for the plans `check` usually reads, the
//! text *is* the typed plan's own serialization: the typed plan is serialized once more
//! and compared with the text as it streams out, which costs a serialization and a
//! `memcmp`, instead of the canonical pass over the text (parse, sort every object's keys,
//! SHA-256) that [`payload_text`](super::payload_text) makes. A text that is the
//! serialization of a plan has that plan's canonical JSON (the serialization of a value
//! parses back to the same value: strings, integers and the finite numbers a JSON text can
//! hold all round-trip), so an equal text needs nothing more. A text that differs (another
//! layout, key order or number form, or a change) is not rejected here: the caller then
//! establishes the form the general way, through the canonical hashes.

use std::io::{self, Write};

use crate::plan::ExecutionPlan;

/// Whether `text` is exactly `plan.write_json` (pretty JSON and the final newline). Stops
/// at the first byte that differs.
pub(super) fn is_file_form(plan: &ExecutionPlan, text: &str) -> bool {
    match plan.write_json(Comparison {
        rest: text.as_bytes(),
    }) {
        Ok(comparison) => comparison.rest.is_empty(),
        Err(_) => false,
    }
}

/// An `io::Write` that holds what it is written against the bytes still expected, and
/// fails at the first difference (so the serialization stops there).
struct Comparison<'t> {
    /// The stored bytes not yet matched.
    rest: &'t [u8],
}

impl Write for Comparison<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.rest.strip_prefix(buf) {
            Some(rest) => {
                self.rest = rest;
                Ok(buf.len())
            }
            None => Err(io::Error::other(
                "the stored text differs from the plan file form",
            )),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> ExecutionPlan {
        let request = crate::request::PlanRequest::read(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/models/decoder-2layer/request.json"
        )))
        .unwrap();
        ExecutionPlan::build(&request, &crate::builder::BuildOptions::default()).unwrap()
    }

    #[test]
    fn the_written_file_is_its_plans_file_form_and_nothing_else_is() {
        let plan = plan();
        let text = String::from_utf8(plan.write_json(Vec::new()).unwrap()).unwrap();
        assert!(is_file_form(&plan, &text));
        // Without the final newline, with a byte more, compact, or with one value changed:
        // not the file form (the caller then compares canonical hashes).
        assert!(!is_file_form(&plan, text.trim_end()));
        assert!(!is_file_form(&plan, &format!("{text} ")));
        assert!(!is_file_form(
            &plan,
            &format!("{}\n", serde_json::to_string(&plan).unwrap())
        ));
        let changed = text.replacen(
            &format!("\"{}\"", plan.payload.nodes[0].id),
            "\"node.other\"",
            1,
        );
        assert_ne!(changed, text);
        assert!(!is_file_form(&plan, &changed));
        assert!(!is_file_form(&plan, ""));
    }
}
