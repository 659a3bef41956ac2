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
//! pass over the text ([`DocumentCheck`]), which keeps only the keys of the objects
//! currently open (borrowed from the text where they have no escapes) and builds no
//! `Value` tree, so a 100-million-element array in an opaque field costs one scan of its
//! text, not a tree of it; then the typed parse. The path of a failure is assembled only
//! when one happens, while the error unwinds.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;
use std::io::Read;
use std::path::Path;
use std::sync::RwLock;

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

mod strict_parse;

pub(crate) use strict_parse::parse_strictly;

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
    // One pass first: the typed parse under the strict rules ([`parse_strictly`]). The
    // counted array's own limit holds every array there (stricter, never looser: an input
    // with a longer array elsewhere only takes the two-pass way below). Only a text that
    // pass refuses is scanned and then parsed, to name the culprit; on DeepSeek-V3's
    // request the scan was a quarter of the reading.
    let mut one_pass = *limits;
    if let Some(counted) = counted {
        one_pass.array_elements = one_pass.array_elements.min(limits.get(counted.limit));
    }
    if let Some(value) = parse_strictly(text, &one_pass) {
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

fn check_document_counting(
    text: &str,
    limits: &InputLimits,
    counted: Option<CountedArray>,
) -> Result<(), StrictJsonError> {
    let failure = RefCell::new(Failure::default());
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let checked = DocumentCheck {
        failure: &failure,
        limits,
        depth: 0,
        counted,
        matched: 0,
    }
    .deserialize(&mut deserializer)
    .and_then(|()| deserializer.end());
    checked.map_err(|err| {
        let Failure {
            mut segments,
            limit,
        } = failure.into_inner();
        segments.reverse();
        StrictJsonError {
            json_path: render_path(&segments),
            message: err.to_string(),
            limit,
        }
    })
}

/// What the streaming pass learns about a failure while it unwinds.
#[derive(Debug, Default)]
struct Failure {
    /// Path segments, innermost first.
    segments: Vec<Segment>,
    /// The limit exceeded, if that is the failure.
    limit: Option<LimitBreach>,
}

/// One step of a JSON path, recorded while a failure unwinds.
#[derive(Debug)]
enum Segment {
    Key(String),
    Index(usize),
}

fn render_path(segments: &[Segment]) -> String {
    if segments.is_empty() {
        return ".".to_owned();
    }
    let mut path = String::new();
    for segment in segments {
        match segment {
            Segment::Key(key) => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
            }
            Segment::Index(index) => {
                path.push('[');
                path.push_str(&index.to_string());
                path.push(']');
            }
        }
    }
    path
}

/// Walks any JSON value, checking every object for duplicate keys and every string, array,
/// object and nesting level against the limits. On failure each level adds its own path
/// segment to `failure` (innermost first).
#[derive(Clone, Copy)]
struct DocumentCheck<'f> {
    failure: &'f RefCell<Failure>,
    limits: &'f InputLimits,
    depth: u64,
    /// The array held to a domain limit, if any.
    counted: Option<CountedArray>,
    /// How many keys of `counted.path` lead to this value (`usize::MAX`: off the path).
    matched: usize,
}

impl DocumentCheck<'_> {
    /// Fails with a limit breach (the message names the limit and the flag).
    fn exceed<E: serde::de::Error>(&self, limit: Limit, found: impl fmt::Display) -> E {
        let breach = LimitBreach {
            limit,
            allowed: self.limits.get(limit),
        };
        self.failure.borrow_mut().limit = Some(breach);
        E::custom(format_args!("{found} {}, {breach}", limit.unit()))
    }

    fn string<E: serde::de::Error>(&self, text: &str) -> Result<(), E> {
        if text.len() as u64 > self.limits.string_bytes {
            return Err(self.exceed(
                Limit::StringBytes,
                format_args!("a string of {}", text.len()),
            ));
        }
        Ok(())
    }

    /// The check of a value one level deeper.
    fn nested<E: serde::de::Error>(self) -> Result<Self, E> {
        let depth = self.depth + 1;
        if depth > self.limits.depth {
            return Err(self.exceed(
                Limit::Depth,
                format_args!("nesting deeper than {}", self.limits.depth),
            ));
        }
        Ok(DocumentCheck {
            depth,
            matched: usize::MAX,
            ..self
        })
    }

    /// The check of the member `key` of an object checked by `self`.
    fn member(self, inner: Self, key: &str) -> Self {
        let on_path = self
            .counted
            .is_some_and(|counted| counted.path.get(self.matched) == Some(&key));
        DocumentCheck {
            matched: if on_path {
                self.matched + 1
            } else {
                usize::MAX
            },
            ..inner
        }
    }

    /// The element limit of an array checked by `self`: `array-elements`, or the counted
    /// array's own limit when this is it and that limit is lower.
    fn array_limit(&self) -> (Limit, u64) {
        let general = (Limit::ArrayElements, self.limits.array_elements);
        match self.counted {
            Some(counted) if counted.path.len() == self.matched => {
                let own = self.limits.get(counted.limit);
                if own < general.1 {
                    (counted.limit, own)
                } else {
                    general
                }
            }
            _ => general,
        }
    }
}

impl<'de> DeserializeSeed<'de> for DocumentCheck<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for DocumentCheck<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<(), E> {
        self.string(text)
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let inner = self.nested()?;
        let (limit, allowed) = self.array_limit();
        let mut index = 0usize;
        loop {
            if index as u64 >= allowed {
                // One more element would exceed the limit: fail if there is one.
                match seq.next_element::<IgnoredAny>() {
                    Ok(None) => return Ok(()),
                    Ok(Some(_)) => {
                        self.failure
                            .borrow_mut()
                            .segments
                            .push(Segment::Index(index));
                        return Err(self.exceed(limit, format_args!("more than {index}")));
                    }
                    Err(err) => {
                        self.failure
                            .borrow_mut()
                            .segments
                            .push(Segment::Index(index));
                        return Err(err);
                    }
                }
            }
            match seq.next_element_seed(inner) {
                Ok(Some(())) => index += 1,
                Ok(None) => return Ok(()),
                Err(err) => {
                    self.failure
                        .borrow_mut()
                        .segments
                        .push(Segment::Index(index));
                    return Err(err);
                }
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let inner = self.nested()?;
        let mut keys = ObjectKeys::default();
        let mut last_key: Option<Cow<'de, str>> = None;
        loop {
            let key = match map.next_key_seed(KeyText) {
                Ok(Some(key)) => key,
                Ok(None) => return Ok(()),
                Err(err) => {
                    // A syntax error between members: name the object's last good key.
                    if let Some(last) = last_key {
                        self.failure
                            .borrow_mut()
                            .segments
                            .push(Segment::Key(last.into_owned()));
                    }
                    return Err(err);
                }
            };
            if let Err(err) = self.string::<A::Error>(&key) {
                let _ = map.next_value::<IgnoredAny>();
                self.failure
                    .borrow_mut()
                    .segments
                    .push(Segment::Key(truncated(&key)));
                return Err(err);
            }
            if keys.len() as u64 >= self.limits.object_members {
                let _ = map.next_value::<IgnoredAny>();
                self.failure
                    .borrow_mut()
                    .segments
                    .push(Segment::Key(truncated(&key)));
                return Err(self.exceed(
                    Limit::ObjectMembers,
                    format_args!("more than {}", keys.len()),
                ));
            }
            if keys.contains(&key) {
                self.failure
                    .borrow_mut()
                    .segments
                    .push(Segment::Key(key.clone().into_owned()));
                // Consume the value so the error is about the key, not a parse state.
                let _ = map.next_value::<IgnoredAny>();
                return Err(serde::de::Error::custom(format_args!(
                    "duplicate key `{key}` (each key may appear once per object; a reader \
                     that keeps the first copy would see a different document)"
                )));
            }
            if let Err(err) = map.next_value_seed(self.member(inner, &key)) {
                self.failure
                    .borrow_mut()
                    .segments
                    .push(Segment::Key(key.into_owned()));
                return Err(err);
            }
            keys.insert(key.clone());
            last_key = Some(key);
        }
    }
}

/// The keys seen so far in one object, to find a duplicate: a short list compared in
/// place while the object has at most [`FEW_KEYS`] keys (nearly every object of a request:
/// hashing each key with SipHash cost more than comparing it, about a third of this pass
/// on a large request), a hash set beyond.
pub(crate) enum ObjectKeys<'de> {
    Few(Vec<Cow<'de, str>>),
    Many(HashSet<Cow<'de, str>>),
}

/// The most keys [`ObjectKeys`] compares one by one.
const FEW_KEYS: usize = 16;

impl Default for ObjectKeys<'_> {
    fn default() -> Self {
        ObjectKeys::Few(Vec::new())
    }
}

impl<'de> ObjectKeys<'de> {
    pub(crate) fn len(&self) -> usize {
        match self {
            ObjectKeys::Few(keys) => keys.len(),
            ObjectKeys::Many(keys) => keys.len(),
        }
    }

    pub(crate) fn contains(&self, key: &str) -> bool {
        match self {
            ObjectKeys::Few(keys) => keys.iter().any(|seen| seen.as_ref() == key),
            ObjectKeys::Many(keys) => keys.contains(key),
        }
    }

    pub(crate) fn insert(&mut self, key: Cow<'de, str>) {
        match self {
            ObjectKeys::Few(keys) if keys.len() < FEW_KEYS => keys.push(key),
            ObjectKeys::Few(keys) => {
                let mut many: HashSet<Cow<'de, str>> = keys.drain(..).collect();
                many.insert(key);
                *self = ObjectKeys::Many(many);
            }
            ObjectKeys::Many(keys) => {
                keys.insert(key);
            }
        }
    }
}

/// A key for a path in a message: at most 64 characters, marked when cut.
fn truncated(key: &str) -> String {
    match key.char_indices().nth(64) {
        Some((cut, _)) => format!("{}…", &key[..cut]),
        None => key.to_owned(),
    }
}

/// An object key, borrowed from the text when it has no escapes.
struct KeyText;

impl<'de> DeserializeSeed<'de> for KeyText {
    type Value = Cow<'de, str>;

    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyText {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(key))
    }

    fn visit_str<E>(self, key: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(key.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_a_clean_document() {
        assert_eq!(
            check_document(r#" {"a": [1, {"b": 2}], "c": "x"} "#),
            Ok(())
        );
        let value: serde_json::Value = parse_strict(r#"{"a":1}"#).unwrap();
        assert_eq!(value, serde_json::json!({"a": 1}));
    }

    #[test]
    fn a_duplicate_key_is_named_by_its_path() {
        let err = check_document(r#"{"a": [0, {"b": 1, "b": 2}]}"#).unwrap_err();
        assert_eq!(err.json_path, "a[1].b");
        assert!(err.message.contains("duplicate key `b`"), "{err}");
        let top = check_document(r#"{"x": 1, "x": 1}"#).unwrap_err();
        assert_eq!(top.json_path, "x");
    }

    #[test]
    fn a_duplicate_is_found_among_few_keys_and_among_many() {
        // Objects of every size around the switch from a list to a hash set, with the
        // duplicate of every earlier key as the last member: always found and named.
        for size in 1..=(2 * FEW_KEYS + 2) {
            let members: Vec<String> = (0..size).map(|i| format!("\"k{i}\": {i}")).collect();
            check_document(&format!("{{{}}}", members.join(", "))).unwrap();
            for earlier in 0..size {
                let text = format!("{{{}, \"k{earlier}\": 0}}", members.join(", "));
                let err = check_document(&text).unwrap_err();
                assert_eq!(err.json_path, format!("k{earlier}"), "{size} keys");
                assert!(err.message.contains("duplicate key"), "{err}");
            }
        }
    }

    #[test]
    fn escaped_spellings_of_one_key_are_the_same_key() {
        let err = check_document(r#"{"ab": 1, "\u0061b": 2}"#).unwrap_err();
        assert_eq!(err.json_path, "ab");
    }

    #[test]
    fn the_same_key_in_sibling_objects_is_fine() {
        assert_eq!(check_document(r#"[{"a":1},{"a":2}]"#), Ok(()));
    }

    #[test]
    fn trailing_bytes_are_rejected() {
        let err = check_document(r#"{"a": 1} this is not JSON"#).unwrap_err();
        assert_eq!(err.json_path, ".");
        assert!(err.message.contains("trailing characters"), "{err}");
        assert!(parse_strict::<serde_json::Value>("[1] [2]").is_err());
    }

    #[test]
    fn a_syntax_error_inside_names_where() {
        let err = check_document(r#"{"a": {"b": [1, 2,]}}"#).unwrap_err();
        assert_eq!(err.json_path, "a.b[2]");
    }

    #[test]
    fn names_follow_one_rule() {
        assert_eq!(name_problem("layer0.attention"), None);
        assert_eq!(name_problem("Ünïcode ok"), None);
        assert!(name_problem("").is_some());
        assert!(name_problem(&"x".repeat(161)).is_some());
        assert!(name_problem("a\u{202E}b").unwrap().contains("U+202E"));
        assert!(name_problem("a\nb").unwrap().contains("U+000A"));
        assert!(name_problem("a\u{200B}b").is_some());
        for byte in 0u8..0x80 {
            let text = format!("a{}b", char::from(byte));
            let control = byte < 0x20 || byte == 0x7f;
            assert_eq!(name_problem(&text).is_some(), control, "{text:?}");
        }
    }

    #[test]
    fn limits_name_the_limit_and_the_flag() {
        let mut limits = InputLimits::DEFAULT;
        limits.apply("array-elements=3").unwrap();
        assert!(check_document_within("[1,2,3]", &limits).is_ok());
        let err = check_document_within(r#"{"a": {"b": [1,2,3,4]}}"#, &limits).unwrap_err();
        assert_eq!(err.json_path, "a.b[3]");
        assert!(err.message.contains("--limit array-elements=N"), "{err}");
        assert_eq!(err.limit.map(|b| b.limit), Some(Limit::ArrayElements));
        limits.apply("string-bytes=4").unwrap();
        let err = check_document_within(r#"{"k": "12345"}"#, &limits).unwrap_err();
        assert_eq!(err.json_path, "k");
        assert_eq!(err.limit.map(|b| b.limit), Some(Limit::StringBytes));
        let err = check_document_within(r#"{"long-key": 1}"#, &limits).unwrap_err();
        assert_eq!(err.limit.map(|b| b.limit), Some(Limit::StringBytes));
        limits.apply("object-members=1").unwrap();
        let err = check_document_within(r#"{"a": 1, "b": 2}"#, &limits).unwrap_err();
        assert_eq!(err.limit.map(|b| b.limit), Some(Limit::ObjectMembers));
        limits.apply("depth=2").unwrap();
        assert!(check_document_within("[[1]]", &limits).is_ok());
        let err = check_document_within("[[[1]]]", &limits).unwrap_err();
        assert_eq!(err.json_path, "[0][0]");
        assert_eq!(err.limit.map(|b| b.limit), Some(Limit::Depth));
        assert!(limits.apply("nodes=0").is_err());
        assert!(limits.apply("bogus=1").unwrap_err().contains("file-bytes"));
        limits.apply("file-bytes=2K").unwrap();
        assert_eq!(limits.file_bytes, 2048);
    }

    #[test]
    fn a_counted_array_is_held_to_its_domain_limit_before_parsing() {
        let mut limits = InputLimits::DEFAULT;
        limits.apply("nodes=2").unwrap();
        let counted = Some(CountedArray {
            path: &["nodes"],
            limit: Limit::Nodes,
        });
        let ok: Result<serde_json::Value, _> =
            parse_strict_counting(r#"{"nodes": [1, 2], "other": [1, 2, 3]}"#, &limits, counted);
        assert!(ok.is_ok());
        let err = parse_strict_counting::<serde_json::Value>(
            r#"{"x": {"nodes": [1, 2, 3]}, "nodes": [1, 2, 3]}"#,
            &limits,
            counted,
        )
        .unwrap_err();
        assert_eq!(err.json_path, "nodes[2]");
        assert_eq!(err.limit.map(|b| b.limit), Some(Limit::Nodes));
        assert!(err.message.contains("--limit nodes=N"), "{err}");
    }

    #[test]
    fn the_one_pass_reads_the_shipped_requests_as_the_two_passes_do() {
        for model in ["tiny", "decoder-2layer", "hybrid-block"] {
            let file = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("models")
                .join(model)
                .join("request.json");
            let text = std::fs::read_to_string(file).unwrap();
            let one: serde_json::Value = parse_strictly(&text, &InputLimits::DEFAULT).unwrap();
            check_document(&text).unwrap();
            let two: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(one, two, "{model}");
            // A duplicate key the typed parse alone would take: refused by the one pass,
            // named by the two-pass reading.
            let doubled = text.replacen('{', "{\"family\": 1, ", 1);
            assert_eq!(
                parse_strictly::<serde_json::Value>(&doubled, &InputLimits::DEFAULT),
                None
            );
            let err = parse_strict::<serde_json::Value>(&doubled).unwrap_err();
            assert!(err.message.contains("duplicate key `family`"), "{err}");
        }
    }

    #[test]
    fn a_file_is_read_only_up_to_its_limit_and_non_json_fails_at_once() {
        let mut limits = InputLimits::DEFAULT;
        limits.file_bytes = 10;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("big.json");
        std::fs::write(&file, "[1,2,3,4,5,6,7]").unwrap();
        assert!(matches!(
            read_text(&file, &limits),
            Err(ReadError::TooLarge(_))
        ));
        #[cfg(unix)]
        {
            let zero = read_text(Path::new("/dev/zero"), &InputLimits::DEFAULT);
            assert!(matches!(zero, Err(ReadError::NotJson(_))), "{zero:?}");
        }
        std::fs::write(&file, [b' ', 0xff]).unwrap();
        assert!(matches!(
            read_text(&file, &InputLimits::DEFAULT),
            Err(ReadError::NotJson(_))
        ));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let text = "[".repeat(100_000);
        assert!(check_document(&text).is_err());
    }
}
