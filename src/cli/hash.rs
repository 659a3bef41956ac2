//! `jointplan hash FILE [--json]`: the canonical SHA-256 of any JSON file.
//!
//! The canonical form is the one every jointplan fingerprint and the plan hash use
//! ([`jointplan::canonical`]): every object's keys sorted byte-wise at every depth, printed
//! compactly (no whitespace). Reformatting a file or reordering its keys does not change
//! its canonical hash; changing any value does. Parsing a request and computing this hash is
//! the floor that plan time is measured against.
//!
//! Text output is `sha256:<64 hex digits>  FILE`, one line; `--json` prints
//! `{"file": FILE, "sha256": "<hex>", "canonical_bytes": N}`. For a plan file this is the
//! hash of the whole file, not its `plan_hash` (which covers the payload with `plan_id`
//! unset).

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::Error;
use jointplan::request::LoadError;

/// Arguments of `jointplan hash`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Any JSON file (a request, a plan, a selection problem).
    pub file: PathBuf,
    /// Print `{"file", "sha256", "canonical_bytes"}` as JSON instead of the text line.
    #[arg(long)]
    pub json: bool,
}

/// The canonical hash of one file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FileHash {
    /// The file, as given.
    pub file: String,
    /// SHA-256 of its canonical JSON, lowercase hex.
    pub sha256: String,
    /// Length of its canonical JSON in bytes.
    pub canonical_bytes: u64,
}

/// Feeds written bytes into a SHA-256 and counts them, so the canonical text of a large
/// file is never held in memory as a whole.
struct HashWriter {
    hasher: Sha256,
    bytes: u64,
}

impl Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.hasher.update(buf);
        let length = u64::try_from(buf.len())
            .map_err(|_| std::io::Error::other("write longer than u64 bytes"))?;
        self.bytes = self
            .bytes
            .checked_add(length)
            .ok_or_else(|| std::io::Error::other("canonical text longer than u64 bytes"))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The canonical SHA-256 of JSON `text` read from `file` (named in errors, with the JSON
/// path and the line and column of a syntax error).
pub fn hash_json_text(file: &Path, text: &str) -> Result<FileHash, LoadError> {
    // Strict reading first (each key once, nothing after the value, input limits), then the
    // text is streamed through the canonical writer: no tree of the document is built.
    jointplan::json_input::check_document(text).map_err(|e| LoadError::from_strict(file, e))?;
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let writer = jointplan::canonical::write_canonical(
        "document",
        &serde_transcode::Transcoder::new(&mut deserializer),
        HashWriter {
            hasher: Sha256::new(),
            bytes: 0,
        },
    )
    .map_err(|e| LoadError::Json {
        file: file.to_path_buf(),
        json_path: ".".to_owned(),
        message: format!("cannot print canonically: {e}"),
    })?;
    let digest = writer.hasher.finalize();
    let mut sha256 = String::with_capacity(64);
    for byte in digest {
        sha256.push_str(&format!("{byte:02x}"));
    }
    Ok(FileHash {
        file: file.display().to_string(),
        sha256,
        canonical_bytes: writer.bytes,
    })
}

/// Reads `file` and returns its canonical hash.
pub fn hash_file(file: &Path) -> Result<FileHash, LoadError> {
    hash_json_text(file, &jointplan::request::read_json_text(file)?)
}

/// Runs `jointplan hash`.
pub fn run(args: &Args) -> Result<(), Error> {
    let hash = hash_file(&args.file)?;
    if args.json {
        let text = super::output::pretty_json(&hash)
            .map_err(|e| Error::Usage(format!("cannot serialize the hash: {e}")))?;
        super::output::write_stdout(&text)?;
    } else {
        super::output::write_stdout(&format!("sha256:{}  {}\n", hash.sha256, hash.file))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equals_the_canonical_fingerprint_and_ignores_layout() {
        let file = Path::new("t.json");
        let a = hash_json_text(file, r#"{"b": [1, {"z": null, "a": "x"}], "a": 2.5}"#).unwrap();
        let b = hash_json_text(
            file,
            "{\n  \"a\": 2.5,\n  \"b\": [1, {\"a\": \"x\", \"z\": null}]\n}",
        )
        .unwrap();
        assert_eq!(a, b);
        let canonical = r#"{"a":2.5,"b":[1,{"a":"x","z":null}]}"#;
        assert_eq!(a.canonical_bytes, canonical.len() as u64);
        let tree: serde_json::Value = serde_json::from_str(canonical).unwrap();
        assert_eq!(
            a.sha256,
            jointplan::canonical::canonical_fingerprint("t", &tree)
                .unwrap()
                .as_str()
        );
        assert_eq!(
            a.sha256,
            jointplan::canonical::sha256_hex(canonical.as_bytes()).as_str()
        );
        let changed =
            hash_json_text(file, r#"{"a": 2.5, "b": [1, {"a": "y", "z": null}]}"#).unwrap();
        assert_ne!(a.sha256, changed.sha256);
    }

    #[test]
    fn bad_json_names_file_line_and_column() {
        let error = hash_json_text(Path::new("bad.json"), "{\n  \"a\": 1,\n  \"b\" 2\n}")
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("bad.json: "), "{error}");
        assert!(error.contains("line 3 column"), "{error}");
    }
}
