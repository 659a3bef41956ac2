//! Strict JSON input: the one way jointplan reads a JSON document.
//!
//! `serde_json` on its own accepts two things a file that is hashed and verified must not
//! carry:
//!
//! * **duplicate keys** in one object, read last-key-wins. A plan file could then carry a
//!   forged first copy of a key that a first-key-wins reader (Python's `json`, many others)
//!   sees while jointplan sees, hashes and verifies the clean copy;
//! * **trailing bytes** after the value, unless the caller remembers `Deserializer::end()`.
//!
//! [`parse_strict`] rejects both, with the JSON path of the culprit, and then deserializes.
//! It also enforces the [`InputLimits`]: a file's size is checked while it is read
//! ([`read_text`], so `/dev/zero` or a runaway generator cannot fill memory), and string
//! lengths, array and object sizes and nesting depth are checked as the typed parse reads
//! them ([`parse_strictly`]: one pass, an array refused at its first element past the
//! limit, so what is built stays within the limits). A text that pass refuses is read
//! again in two passes to name the culprit: the duplicate and limit check as a streaming
//! pass over the text ([`document_check`]), which keeps only the keys of the objects
//! currently open (borrowed from the text where they have no escapes) and builds no
//! `Value` tree, so a 100-million-element array in an opaque field costs one scan of its
//! text, not a tree of it; then the typed parse. The path of a failure is assembled only
//! when one happens, while the error unwinds.
//!
//! A large request or plan is mostly one array; its one pass runs on every core
//! (`split_parse`, for the documents that name their array with
//! `LargeArray`) and accepts exactly what the one-core pass accepts.

use std::fmt;
use std::io::Read;
use std::path::Path;
use std::sync::RwLock;

mod document_check;
mod split_parse;
mod strict_parse;
#[cfg(test)]
mod tests;

use document_check::check_document_counting;
pub(crate) use document_check::ObjectKeys;
#[cfg(test)]
pub(crate) use split_parse::parse_split_from;
pub(crate) use split_parse::{parse_strictly_split, LargeArray};
pub(crate) use strict_parse::{parse_strictly, parse_strictly_at};

/// A JSON document that is malformed, has a duplicate key or trailing bytes, breaks an
/// input limit, or does not match the expected format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at {json_path}: {message}")]
pub struct StrictJsonError {
    /// JSON path of the culprit, in `serde_path_to_error`'s notation (`.` for the document,
    /// `a.b[3].c` below it).
    pub json_path: String,
    /// What is wrong.
    pub message: String,
    /// The input limit that was exceeded, if that is the problem.
    pub limit: Option<LimitBreach>,
}

/// An input limit that an input exceeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitBreach {
    /// The limit.
    pub limit: Limit,
    /// Its value when the input was read.
    pub allowed: u64,
}

impl fmt::Display for LimitBreach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "over the input limit `{}` ({} {}); if the input is genuine, raise it with \
             `--limit {}=N`",
            self.limit.name(),
            self.allowed,
            self.limit.unit(),
            self.limit.name()
        )
    }
}

/// One kind of input limit. The names are those of the command line's `--limit NAME=N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Limit {
    /// Bytes of one input file.
    FileBytes,
    /// Nesting depth of arrays and objects.
    Depth,
    /// Bytes of one JSON string (keys included).
    StringBytes,
    /// Elements of one JSON array.
    ArrayElements,
    /// Members of one JSON object.
    ObjectMembers,
    /// Nodes of a program or a selection problem.
    Nodes,
    /// Candidates (providers) of one selection-problem node.
    CandidatesPerNode,
    /// Shared resources of a selection problem.
    Resources,
}

impl Limit {
    /// Every limit, in the order the documentation lists them.
    pub const ALL: [Limit; 8] = [
        Limit::FileBytes,
        Limit::Depth,
        Limit::StringBytes,
        Limit::ArrayElements,
        Limit::ObjectMembers,
        Limit::Nodes,
        Limit::CandidatesPerNode,
        Limit::Resources,
    ];

    /// The limit's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Limit::FileBytes => "file-bytes",
            Limit::Depth => "depth",
            Limit::StringBytes => "string-bytes",
            Limit::ArrayElements => "array-elements",
            Limit::ObjectMembers => "object-members",
            Limit::Nodes => "nodes",
            Limit::CandidatesPerNode => "candidates-per-node",
            Limit::Resources => "resources",
        }
    }

    fn unit(self) -> &'static str {
        match self {
            Limit::FileBytes | Limit::StringBytes => "bytes",
            Limit::Depth => "levels",
            Limit::ArrayElements => "elements",
            Limit::ObjectMembers => "members",
            Limit::Nodes => "nodes",
            Limit::CandidatesPerNode => "candidates",
            Limit::Resources => "resources",
        }
    }
}

/// What an input may hold before jointplan refuses it. The defaults are a few times what
/// the largest shipped model needs (DeepSeek-V3: a 286 MB plan, 15,580 nodes) and every
/// one can be raised; see `docs/security.md` for each figure and the memory a valid input
/// may need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputLimits {
    /// Bytes of one input file.
    pub file_bytes: u64,
    /// Nesting depth of arrays and objects (at most 127: the JSON reader's own bound).
    pub depth: u64,
    /// Bytes of one JSON string.
    pub string_bytes: u64,
    /// Elements of one JSON array.
    pub array_elements: u64,
    /// Members of one JSON object.
    pub object_members: u64,
    /// Nodes of a program or a selection problem.
    pub nodes: u64,
    /// Candidates of one selection-problem node.
    pub candidates_per_node: u64,
    /// Shared resources of a selection problem.
    pub resources: u64,
}

impl Default for InputLimits {
    fn default() -> Self {
        InputLimits::DEFAULT
    }
}

static CURRENT: RwLock<InputLimits> = RwLock::new(InputLimits::DEFAULT);

impl InputLimits {
    /// The default limits.
    pub const DEFAULT: InputLimits = InputLimits {
        file_bytes: 1 << 30,
        depth: 64,
        string_bytes: 1 << 20,
        array_elements: 1_000_000,
        object_members: 1_000_000,
        nodes: 250_000,
        candidates_per_node: 1_024,
        resources: 1_000_000,
    };

    /// The limits in force for this process (the defaults unless [`InputLimits::install`]
    /// changed them).
    pub fn current() -> InputLimits {
        *CURRENT
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Makes these the limits of every later read in this process (the command line's
    /// `--limit` flags do this once, at start-up).
    pub fn install(self) {
        *CURRENT
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = self;
    }

    /// The value of one limit.
    pub fn get(&self, limit: Limit) -> u64 {
        match limit {
            Limit::FileBytes => self.file_bytes,
            Limit::Depth => self.depth,
            Limit::StringBytes => self.string_bytes,
            Limit::ArrayElements => self.array_elements,
            Limit::ObjectMembers => self.object_members,
            Limit::Nodes => self.nodes,
            Limit::CandidatesPerNode => self.candidates_per_node,
            Limit::Resources => self.resources,
        }
    }

    /// Sets one limit; `depth` is capped at 127.
    pub fn set(&mut self, limit: Limit, value: u64) {
        let slot = match limit {
            Limit::FileBytes => &mut self.file_bytes,
            Limit::Depth => &mut self.depth,
            Limit::StringBytes => &mut self.string_bytes,
            Limit::ArrayElements => &mut self.array_elements,
            Limit::ObjectMembers => &mut self.object_members,
            Limit::Nodes => &mut self.nodes,
            Limit::CandidatesPerNode => &mut self.candidates_per_node,
            Limit::Resources => &mut self.resources,
        };
        *slot = if limit == Limit::Depth {
            value.min(127)
        } else {
            value
        };
    }

    /// Applies one `NAME=N` setting (as given to `--limit`); N may end in `K`, `M` or `G`
    /// (powers of 1024).
    pub fn apply(&mut self, setting: &str) -> Result<(), String> {
        let names = || {
            Limit::ALL
                .iter()
                .map(|l| l.name())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (name, value) = setting
            .split_once('=')
            .ok_or_else(|| format!("`{setting}`: expected NAME=N with NAME one of {}", names()))?;
        let limit = Limit::ALL
            .into_iter()
            .find(|l| l.name() == name)
            .ok_or_else(|| format!("`{name}` is not a limit (one of {})", names()))?;
        let (digits, scale) = match value.as_bytes().last() {
            Some(b'K' | b'k') => (&value[..value.len() - 1], 1u64 << 10),
            Some(b'M' | b'm') => (&value[..value.len() - 1], 1 << 20),
            Some(b'G' | b'g') => (&value[..value.len() - 1], 1 << 30),
            _ => (value, 1),
        };
        let number = digits
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(scale))
            .filter(|&n| n > 0)
            .ok_or_else(|| {
                format!("`{setting}`: expected a positive whole number, optionally with K, M or G")
            })?;
        self.set(limit, number);
        Ok(())
    }

    /// The error for a count that exceeds `limit`, at `json_path`.
    pub fn breach(&self, limit: Limit, json_path: &str, found: u64) -> StrictJsonError {
        let breach = LimitBreach {
            limit,
            allowed: self.get(limit),
        };
        StrictJsonError {
            json_path: json_path.to_owned(),
            message: format!("{found} {}, {breach}", limit.unit()),
            limit: Some(breach),
        }
    }

    /// Checks a count against `limit`.
    pub fn check(&self, limit: Limit, json_path: &str, found: u64) -> Result<(), StrictJsonError> {
        if found > self.get(limit) {
            return Err(self.breach(limit, json_path, found));
        }
        Ok(())
    }
}

/// Longest identifier, in bytes.
pub const MAX_NAME_BYTES: usize = 160;

/// Why `text` cannot be an identifier (a node, provider, resource, profile, block or any
/// other id an input names things by), or `None` when it can. Every identifier follows this
/// rule: 1 to 160 bytes, no control characters, and no invisible formatting characters that
/// make text display differently from its bytes (bidirectional overrides and isolates, zero
/// width joiners and spaces, the byte-order mark). Plan requests narrow it further to portable
/// ids (ASCII letters, digits and `. _ - : /`).
pub fn name_problem(text: &str) -> Option<String> {
    if text.is_empty() {
        return Some("is empty".to_owned());
    }
    if text.len() > MAX_NAME_BYTES {
        return Some(format!(
            "is {} bytes long (at most {MAX_NAME_BYTES})",
            text.len()
        ));
    }
    // Printable ASCII (nearly every identifier) holds neither a control nor an invisible
    // formatting character: one pass over the bytes instead of decoding chars.
    if text.bytes().all(|byte| matches!(byte, 0x20..=0x7e)) {
        return None;
    }
    text.chars()
        .find(|&c| c.is_control() || is_invisible_format(c))
        .map(|c| {
            format!(
                "contains the character U+{:04X}, a control or invisible formatting character",
                c as u32
            )
        })
}

/// Unicode format characters that change how text displays without showing themselves.
fn is_invisible_format(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
}

/// Why a file could not be read as text.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The operating system failed the read.
    #[error("cannot read: {0}")]
    Io(#[from] std::io::Error),
    /// The file is larger than the `file-bytes` limit (measured while reading, so a device
    /// or a pipe that never ends is stopped at the limit).
    #[error("the file is {0}")]
    TooLarge(LimitBreach),
    /// The file is not JSON text: its first non-blank byte cannot start a JSON value, or
    /// it is not UTF-8.
    #[error("is not a JSON document: {0}")]
    NotJson(String),
}

/// Bytes read before the first non-blank byte is judged.
const FIRST_BLOCK: u64 = 64 * 1024;

/// Reads a whole input file as UTF-8 text, stopping at the `file-bytes` limit, and fails
/// early (after the first block) when the text cannot be JSON at all.
pub fn read_text(file: &Path, limits: &InputLimits) -> Result<String, ReadError> {
    let handle = std::fs::File::open(file)?;
    let metadata = handle.metadata()?;
    if metadata.is_dir() {
        return Err(ReadError::Io(std::io::Error::other(
            "is a directory (expected a JSON file)",
        )));
    }
    // Sized once from the file's length (within the limit; one byte more to see the end
    // of input): growing by doubling copied and faulted in a large file about twice over.
    // A file that grows while it is read still grows the buffer, up to the limit. The
    // reads go straight into the buffer (no intermediate block to copy from).
    let expected = metadata.len().min(limits.file_bytes).saturating_add(1);
    let mut bytes = Vec::with_capacity(usize::try_from(expected).unwrap_or(0));
    let mut reader = handle.take(limits.file_bytes.saturating_add(1));
    // The first block alone, to refuse a file that cannot be JSON before reading it all.
    (&mut reader).take(FIRST_BLOCK).read_to_end(&mut bytes)?;
    let start = bytes
        .iter()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
    if let Some(&byte) = start {
        if !matches!(
            byte,
            b'{' | b'[' | b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n'
        ) {
            return Err(ReadError::NotJson(format!(
                "it starts with the byte 0x{byte:02x}"
            )));
        }
    }
    reader.read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limits.file_bytes {
        return Err(ReadError::TooLarge(LimitBreach {
            limit: Limit::FileBytes,
            allowed: limits.file_bytes,
        }));
    }
    String::from_utf8(bytes).map_err(|e| {
        ReadError::NotJson(format!(
            "the byte at offset {} is not UTF-8",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// Parses `text` into `T`: the text must be exactly one JSON value (whitespace around it
/// allowed) with no object holding the same key twice, and match `T`'s format. The error
/// names the JSON path of the first problem.
pub fn parse_strict<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, StrictJsonError> {
    parse_strict_within(text, &InputLimits::current())
}

/// An array whose length a domain limit bounds, counted by the streaming pass before any
/// typed value is built (so a selection problem with ten million nodes is refused after one
/// scan of its text, not after building ten million nodes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountedArray {
    /// The object keys that lead from the document's root to the array.
    pub path: &'static [&'static str],
    /// The limit its length is held to (besides `array-elements`).
    pub limit: Limit,
}

/// [`parse_strict`] under explicit `limits`.
pub fn parse_strict_within<T: serde::de::DeserializeOwned>(
    text: &str,
    limits: &InputLimits,
) -> Result<T, StrictJsonError> {
    parse_strict_counting(text, limits, None)
}

/// [`parse_strict_within`], with the length of one array held to a domain limit.
pub fn parse_strict_counting<T: serde::de::DeserializeOwned>(
    text: &str,
    limits: &InputLimits,
    counted: Option<CountedArray>,
) -> Result<T, StrictJsonError> {
    parse_strict_with(text, limits, counted, parse_strictly)
}

/// [`parse_strict_counting`] of a document whose bulk is one array, read on every core
/// ([`parse_strictly_split`]) when the text is large.
pub(crate) fn parse_large_strict_counting<T: LargeArray>(
    text: &str,
    limits: &InputLimits,
    counted: Option<CountedArray>,
) -> Result<T, StrictJsonError> {
    parse_strict_with(text, limits, counted, parse_strictly_split)
}

/// [`parse_strict_counting`] with `one_pass` as the strict one-pass reading.
fn parse_strict_with<T: serde::de::DeserializeOwned>(
    text: &str,
    limits: &InputLimits,
    counted: Option<CountedArray>,
    one_pass_reading: fn(&str, &InputLimits) -> Option<T>,
) -> Result<T, StrictJsonError> {
    // One pass first: the typed parse under the strict rules ([`parse_strictly`]). The
    // counted array's own limit holds every array there (stricter, never looser: an input
    // with a longer array elsewhere only takes the two-pass way below). Only a text that
    // pass refuses is scanned and then parsed, to name the culprit; on DeepSeek-V3's
    // request the scan was a quarter of the reading.
    let mut one_pass = *limits;
    if let Some(counted) = counted {
        one_pass.array_elements = one_pass.array_elements.min(limits.get(counted.limit));
    }
    if let Some(value) = one_pass_reading(text, &one_pass) {
        return Ok(value);
    }
    check_document_counting(text, limits, counted)?;
    let mut deserializer = serde_json::Deserializer::from_str(text);
    // The fast path parses without tracking the JSON path (the tracking wraps every value
    // and was about a third of parsing a large request); only a document that fails is
    // parsed again with the path tracked, to name where it fails. Parsing is deterministic,
    // so the second parse fails at the same place with the same message.
    let value: T = match T::deserialize(&mut deserializer) {
        Ok(value) => value,
        Err(fast) => return Err(located_parse_error::<T>(text, fast)),
    };
    // `check_document` already saw the end of input; kept so that this function alone is
    // the whole contract.
    deserializer.end().map_err(|err| StrictJsonError {
        json_path: ".".to_owned(),
        message: err.to_string(),
        limit: None,
    })?;
    Ok(value)
}

/// The error of a document the fast parse rejected with `fast`, with its JSON path: the
/// path-tracking parse's error (or `fast` at the document, should that parse not fail).
pub(crate) fn located_parse_error<T: serde::de::DeserializeOwned>(
    text: &str,
    fast: serde_json::Error,
) -> StrictJsonError {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    match serde_path_to_error::deserialize::<_, T>(&mut deserializer) {
        Err(err) => StrictJsonError {
            json_path: err.path().to_string(),
            message: err.inner().to_string(),
            limit: None,
        },
        Ok(_) => StrictJsonError {
            json_path: ".".to_owned(),
            message: fast.to_string(),
            limit: None,
        },
    }
}

/// Checks that `text` is one well-formed JSON value with no duplicate key in any object,
/// nothing but whitespace after it, and within the current [`InputLimits`].
pub fn check_document(text: &str) -> Result<(), StrictJsonError> {
    check_document_within(text, &InputLimits::current())
}

/// [`check_document`] under explicit `limits`.
pub fn check_document_within(text: &str, limits: &InputLimits) -> Result<(), StrictJsonError> {
    check_document_counting(text, limits, None)
}
