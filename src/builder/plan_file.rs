//! The plan file form written while the finished plan is checked: one pretty serialization
//! that both measures the file against the `maximum_plan_json_bytes` wire limit and streams
//! it to its destination, instead of one pass to count and another to write.
//!
//! The serialization runs beside the plan's checks (see [`crate::builder`]), so it must not
//! decide anything the checks would have decided first: a failed write is recorded, not
//! returned, and the counting goes on to the end, so the caller learns the file's exact size
//! (the wire limit's measurement) and reports the write failure only after every check and
//! every earlier refusal. Only the bytes within the limit are forwarded: past it the plan
//! is refused anyway, and its partial file (the first `limit` bytes) is the caller's to
//! remove.

use std::io::Write;

use serde::Serialize;

use crate::canonical::{write_pretty_with, FieldValue, Replacement, Sha256Hex};
use crate::plan::{ExecutionPlan, ExecutionPlanPayload};

/// What streaming the plan file form produced.
#[derive(Debug)]
pub struct PlanFileWrite {
    /// Bytes of the plan file form (pretty JSON and its final newline), all counted even when
    /// the write failed or the limit was passed.
    pub bytes: u64,
    /// The first error of the destination, if a write or the final flush failed (the rest
    /// of the file was counted, not written).
    pub write_error: Option<std::io::Error>,
}

/// Counts every byte; forwards those within the limit to the destination while no write
/// has failed.
struct LimitedFile<W> {
    destination: W,
    bytes: u64,
    limit: u64,
    write_error: Option<std::io::Error>,
}

impl<W: Write> Write for LimitedFile<W> {
    fn write(&mut self, chunk: &[u8]) -> std::io::Result<usize> {
        // A count past u64::MAX is past every limit: saturating keeps it there.
        let added = u64::try_from(chunk.len()).unwrap_or(u64::MAX);
        let before = self.bytes;
        self.bytes = before.saturating_add(added);
        if self.write_error.is_none() && before < self.limit {
            // The chunks are large (a quarter megabyte): forward the part within the limit.
            let room = usize::try_from(self.limit - before).unwrap_or(usize::MAX);
            if let Err(error) = self.destination.write_all(&chunk[..chunk.len().min(room)]) {
                self.write_error = Some(error);
            }
        }
        Ok(chunk.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.write_error.is_none() && self.bytes <= self.limit {
            if let Err(error) = self.destination.flush() {
                self.write_error = Some(error);
            }
        }
        Ok(())
    }
}

/// Streams the plan file form of `plan` ([`ExecutionPlan::write_json`]: pretty JSON and a
/// final newline, written in chunks of a quarter megabyte, so no `BufWriter` is needed)
/// into `destination`, counting its bytes; forwards only the first `limit` bytes.
pub fn write_plan_file<W: Write>(
    plan: &ExecutionPlan,
    destination: W,
    limit: u64,
) -> Result<PlanFileWrite, serde_json::Error> {
    write_counted(destination, limit, |counted| plan.write_json(counted))
}

/// [`write_plan_file`] of the plan `payload` is sealed into (its plan id `plan_id`, its plan
/// hash `plan_hash`), written from the payload before the plan id is set in it, so that the
/// checks of the payload run beside the file's serialization: the same bytes.
pub fn write_sealing_plan_file<W: Write>(
    payload: &ExecutionPlanPayload,
    plan_id: &str,
    plan_hash: &Sha256Hex,
    destination: W,
    limit: u64,
) -> Result<PlanFileWrite, serde_json::Error> {
    /// [`ExecutionPlan`]'s fields, in its order, borrowed.
    #[derive(Serialize)]
    struct FileForm<'p> {
        payload: &'p ExecutionPlanPayload,
        plan_hash: &'p Sha256Hex,
    }
    let form = FileForm { payload, plan_hash };
    write_counted(destination, limit, |counted| {
        let replacements = [
            Replacement {
                struct_name: "ExecutionPlanPayload",
                field: "plan_id",
                value: FieldValue::Text(plan_id),
            },
            payload.nodes_printed_on_the_pool(),
        ];
        let mut counted = write_pretty_with(&form, counted, &replacements)?;
        counted.write_all(b"\n").map_err(serde_json::Error::io)?;
        Ok(counted)
    })
}

/// Runs `write` into a [`LimitedFile`] over `destination` and reports what it counted.
fn write_counted<W: Write>(
    destination: W,
    limit: u64,
    write: impl FnOnce(LimitedFile<W>) -> Result<LimitedFile<W>, serde_json::Error>,
) -> Result<PlanFileWrite, serde_json::Error> {
    let counted = LimitedFile {
        destination,
        bytes: 0,
        limit,
        write_error: None,
    };
    let mut counted = write(counted)?;
    // The counter never fails; a failed flush of the destination is recorded.
    counted.flush().map_err(serde_json::Error::io)?;
    Ok(PlanFileWrite {
        bytes: counted.bytes,
        write_error: counted.write_error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A destination that accepts `room` bytes, then fails every write.
    struct Full {
        taken: Vec<u8>,
        room: usize,
    }

    impl Write for Full {
        fn write(&mut self, chunk: &[u8]) -> std::io::Result<usize> {
            if self.taken.len() + chunk.len() > self.room {
                return Err(std::io::Error::other("device full"));
            }
            self.taken.extend_from_slice(chunk);
            Ok(chunk.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_limited_file_counts_everything_and_forwards_within_the_limit() {
        let mut file = LimitedFile {
            destination: Vec::new(),
            bytes: 0,
            limit: 5,
            write_error: None,
        };
        file.write_all(b"abc").unwrap();
        file.write_all(b"de").unwrap();
        file.write_all(b"fgh").unwrap();
        file.flush().unwrap();
        assert_eq!(file.bytes, 8);
        assert_eq!(file.destination, b"abcde");
        assert!(file.write_error.is_none());
        // A chunk across the limit: its part within the limit is forwarded.
        let mut file = LimitedFile {
            destination: Vec::new(),
            bytes: 0,
            limit: 5,
            write_error: None,
        };
        file.write_all(b"abc").unwrap();
        file.write_all(b"defgh").unwrap();
        file.write_all(b"ij").unwrap();
        assert_eq!(file.bytes, 10);
        assert_eq!(file.destination, b"abcde");
    }

    #[test]
    fn the_file_written_while_sealing_is_the_sealed_plans_file() {
        let request = crate::request::PlanRequest::read(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("models/decoder-2layer/request.json"),
        )
        .unwrap();
        let plan =
            ExecutionPlan::build(&request, &crate::builder::BuildOptions::default()).unwrap();
        let mut unsealed = plan.payload.clone();
        unsealed.plan_id = crate::plan::hash::UNSET_PLAN_ID.to_owned();
        let mut sealed_file = Vec::new();
        let written = write_sealing_plan_file(
            &unsealed,
            &plan.payload.plan_id,
            &plan.plan_hash,
            &mut sealed_file,
            u64::MAX,
        )
        .unwrap();
        assert_eq!(sealed_file, plan.write_json(Vec::new()).unwrap());
        assert_eq!(written.bytes, sealed_file.len() as u64);
        assert!(written.write_error.is_none());
    }

    #[test]
    fn a_failed_write_is_recorded_and_the_count_goes_on() {
        let mut file = LimitedFile {
            destination: Full {
                taken: Vec::new(),
                room: 4,
            },
            bytes: 0,
            limit: u64::MAX,
            write_error: None,
        };
        file.write_all(b"abc").unwrap();
        file.write_all(b"de").unwrap();
        file.write_all(b"f").unwrap();
        assert_eq!(file.bytes, 6);
        assert_eq!(file.destination.taken, b"abc");
        let error = file.write_error.expect("the second write failed");
        assert_eq!(error.to_string(), "device full");
    }
}
