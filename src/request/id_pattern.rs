//! Id patterns: the numbered segments of ids, and patterns that select ids the way plan
//! summaries print groups of them (`node.layer.[0-31].attention`).
//!
//! A **numbered segment** is a segment of ASCII digits (at most 18, so that it fits a `u64`)
//! between separators (any of `. / _ - :`, the punctuation an id may hold) or at either
//! end, written without leading zeros (`007` is literal: a pattern never stands for an id
//! that does not exist); a segment of 64 hex digits is a content digest and stands as
//! `<digest>`. Everything else is literal (`layer.3a`).
//!
//! A **pattern** ([`IdPattern`]) is an id whose numbered segments may be number sets, as
//! summaries print them: `[0-31]`, `[0-2,5]`, `[0-40 step 2]`, `[3,17,29]`, or `*` for any
//! number; `<digest>` stands for any digest. It selects the ids with the same literal
//! segments whose numbers lie in the sets. A summary's `[64 values in 0-255]` and
//! `(k of n combinations)` name sets they do not list, so they are refused with a hint.

use std::fmt;

/// The separators between segments of an id.
pub const SEPARATORS: [char; 5] = ['.', '/', '_', '-', ':'];

/// What a content digest (64 hex digits) stands as in a pattern: content-addressed ids
/// (scratch and binding resources, pools) group by what precedes their digest.
pub const DIGEST: &str = "<digest>";

/// The number a segment of an id stands for, if it is a numbered segment: at most 18 ASCII
/// digits, without leading zeros.
pub fn segment_number(segment: &str) -> Option<u64> {
    let numbered = !segment.is_empty()
        && segment.len() <= 18
        && segment.bytes().all(|b| b.is_ascii_digit())
        && (segment.len() == 1 || !segment.starts_with('0'));
    numbered.then(|| segment.parse().ok()).flatten()
}

fn is_digest(segment: &str) -> bool {
    segment.len() == 64 && segment.bytes().all(|b| b.is_ascii_hexdigit())
}

/// An id split into its shape (numbered segments replaced by `*`, digests by `<digest>`)
/// and its numbers, one per `*`.
pub fn split(id: &str) -> (String, Vec<u64>) {
    let mut pattern = String::with_capacity(id.len());
    let mut numbers = Vec::new();
    let mut rest = id;
    loop {
        let end = rest.find(SEPARATORS).unwrap_or(rest.len());
        let segment = &rest[..end];
        match segment_number(segment) {
            Some(number) => {
                pattern.push('*');
                numbers.push(number);
            }
            None if is_digest(segment) => pattern.push_str(DIGEST),
            None => pattern.push_str(segment),
        }
        if end == rest.len() {
            break;
        }
        // Separators are one byte (ASCII).
        pattern.push_str(&rest[end..=end]);
        rest = &rest[end + 1..];
    }
    (pattern, numbers)
}

/// One run of numbers of a set: `first..=last` in steps of `step`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Run {
    first: u64,
    last: u64,
    step: u64,
}

/// The numbers a position of a pattern admits: any (`*`) or a union of runs.
#[derive(Clone, Debug, PartialEq, Eq)]
enum NumberSet {
    Any,
    Runs(Vec<Run>),
}

impl NumberSet {
    fn contains(&self, n: u64) -> bool {
        match self {
            NumberSet::Any => true,
            NumberSet::Runs(runs) => runs
                .iter()
                .any(|r| r.first <= n && n <= r.last && (n - r.first) % r.step == 0),
        }
    }
}

/// A pattern of ids (see the module documentation), parsed once and matched against many.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdPattern {
    text: String,
    /// The shape every matching id splits into (see [`split`]).
    shape: String,
    /// One set per `*` of the shape.
    sets: Vec<NumberSet>,
}

/// Why a pattern could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("id pattern {pattern}: {detail}")]
pub struct IdPatternError {
    /// The pattern as given.
    pub pattern: String,
    /// What is wrong and what to write instead.
    pub detail: String,
}

impl IdPattern {
    /// Whether `text` is a pattern rather than a plain id (it has a number set, `*` or
    /// `<digest>`): plain ids are used as they are.
    pub fn is_pattern(text: &str) -> bool {
        text.contains('[')
            || text.contains(DIGEST)
            || text.split(SEPARATORS).any(|segment| segment == "*")
    }

    /// Reads a pattern.
    pub fn parse(text: &str) -> Result<IdPattern, IdPatternError> {
        let error = |detail: String| IdPatternError {
            pattern: text.to_owned(),
            detail,
        };
        if let Some(at) = text.find(" (") {
            return Err(error(format!(
                "`{}` says how many of the listed combinations exist, which a pattern cannot \
                 select; give the pattern without it to select every combination, or name \
                 the ids (`jointplan plan --full` lists them)",
                &text[at + 1..]
            )));
        }
        let mut shape = String::with_capacity(text.len());
        let mut sets = Vec::new();
        let mut depth = 0usize;
        let mut start = 0;
        let mut segments: Vec<(&str, Option<char>)> = Vec::new();
        for (i, c) in text.char_indices() {
            match c {
                '[' => depth += 1,
                ']' => depth = depth.saturating_sub(1),
                c if depth == 0 && SEPARATORS.contains(&c) => {
                    segments.push((&text[start..i], Some(c)));
                    start = i + 1;
                }
                _ => {}
            }
        }
        segments.push((&text[start..], None));
        for (segment, separator) in segments {
            if let Some(inner) = segment.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
                shape.push('*');
                sets.push(NumberSet::Runs(parse_set(inner).map_err(error)?));
            } else if segment.contains(['[', ']']) {
                return Err(error(format!(
                    "segment {segment:?}: a number set [..] is a whole segment between separators (. / _ - :)"
                )));
            } else if segment == "*" {
                shape.push('*');
                sets.push(NumberSet::Any);
            } else if let Some(n) = segment_number(segment) {
                shape.push('*');
                sets.push(NumberSet::Runs(vec![Run {
                    first: n,
                    last: n,
                    step: 1,
                }]));
            } else if is_digest(segment) {
                shape.push_str(DIGEST);
            } else {
                shape.push_str(segment);
            }
            if let Some(separator) = separator {
                shape.push(separator);
            }
        }
        Ok(IdPattern {
            text: text.to_owned(),
            shape,
            sets,
        })
    }

    /// Whether `id` is one of the ids the pattern selects.
    pub fn matches(&self, id: &str) -> bool {
        let (shape, numbers) = split(id);
        shape == self.shape
            && numbers.len() == self.sets.len()
            && self
                .sets
                .iter()
                .zip(numbers)
                .all(|(set, n)| set.contains(n))
    }

    /// The pattern as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for IdPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A number of a set, with the set's text in the error.
fn number(text: &str, set: &str) -> Result<u64, String> {
    segment_number(text.trim())
        .ok_or_else(|| format!("[{set}]: {text:?} is not a number (digits, no leading zeros)"))
}

/// The runs of a number set's text (between its brackets): `0-31`, `0-2,5`, `0-40 step 2`.
fn parse_set(inner: &str) -> Result<Vec<Run>, String> {
    if inner.contains("values in") {
        return Err(format!(
            "[{inner}] summarises a set without listing it; list its numbers ([3,17,29]), \
             give a range ([0-255]) or `*` for any number (`jointplan plan --full` lists every id)"
        ));
    }
    let (ranges, step) = match inner.split_once(" step ") {
        Some((ranges, step)) => {
            let step = number(step, inner)?;
            if step == 0 {
                return Err(format!("[{inner}]: a step is at least 1"));
            }
            (ranges, step)
        }
        None => (inner, 1),
    };
    let mut runs = Vec::new();
    for item in ranges.split(',') {
        let (first, last) = match item.split_once('-') {
            Some((a, b)) => (number(a, inner)?, number(b, inner)?),
            None => {
                let n = number(item, inner)?;
                (n, n)
            }
        };
        if first > last {
            return Err(format!("[{inner}]: the range {item} runs backwards"));
        }
        runs.push(Run { first, last, step });
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_select_what_summaries_print() {
        let p = IdPattern::parse("node.layer.[0-31].attention").unwrap();
        assert!(p.matches("node.layer.0.attention"));
        assert!(p.matches("node.layer.31.attention"));
        assert!(!p.matches("node.layer.32.attention"));
        assert!(!p.matches("node.layer.3.mlp"));
        assert!(!p.matches("node.layer.03.attention"));
        let p = IdPattern::parse("node.layer.[0-40 step 2].e.[1,3-4]").unwrap();
        assert!(p.matches("node.layer.40.e.4"));
        assert!(!p.matches("node.layer.41.e.4"));
        assert!(!p.matches("node.layer.2.e.2"));
        let p = IdPattern::parse("node.layer.*.attention").unwrap();
        assert!(p.matches("node.layer.12.attention"));
        let digest = "ab".repeat(32);
        let p = IdPattern::parse("resource/scratch/sha256/<digest>").unwrap();
        assert!(p.matches(&format!("resource/scratch/sha256/{digest}")));
        // A plain id is a pattern of itself.
        assert!(IdPattern::parse("node.embedding")
            .unwrap()
            .matches("node.embedding"));
        assert!(!IdPattern::is_pattern("node.layer.3.attention"));
        assert!(IdPattern::is_pattern("node.layer.[0-3].attention"));
    }

    #[test]
    fn summaries_that_do_not_list_their_numbers_are_refused() {
        let e = IdPattern::parse("l.[64 values in 0-255].x").unwrap_err();
        assert!(e.detail.contains("summarises a set"), "{e}");
        let e = IdPattern::parse("l.[0-2].e.[0-3] (11 of 12 combinations)").unwrap_err();
        assert!(e.detail.contains("combinations"), "{e}");
        assert!(IdPattern::parse("l.[3-1]").is_err());
        assert!(IdPattern::parse("l.[0-3]x").is_err());
        assert!(IdPattern::parse("l.[a]").is_err());
        assert!(IdPattern::parse("l.[0-8 step 0]").is_err());
    }
}
