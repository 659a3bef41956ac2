//! The one-pass strict reading ([`parse_strictly`]) of a large document on every core.
//!
//! Why: a request or a stored plan is mostly one array (DeepSeek-V3's request of 102 MB
//! is 70% `node_resolutions`; its plan is 77% `payload.nodes`), and reading it was the one
//! long phase of `plan`, `check` and `explain` that ran on one core (2.3 s of a 50,000-node
//! plan's 11 s).
//!
//! How: a structural scan finds where that array starts (the members before it skipped
//! exactly: strings whole, brackets counted). The array is cut into pieces at the commas
//! where the separator between its first two elements recurs (`},{"node_id":` in a compact
//! request, the same with the pretty printer's indentation in a plan file), found by a
//! substring search near evenly spaced offsets, and only the last piece is scanned to find
//! the array's end. The rest of the document, with the array written as `[]`, and every
//! piece, as an array of its own, are parsed on the pool under the same strict rules, each
//! at its own nesting depth; the pieces' elements, in order, then take the empty array's
//! place.
//!
//! Why this reads exactly what the one-core pass reads: the document is the rest's text
//! with `[]` replaced by `[` + the pieces joined by `,` + `]`. The rest parses as one
//! strict document (so every key is once in its object, the array's key included), and the
//! exact scan of the text before the array, which lexes a valid prefix as the parser does,
//! put `[]` where the array's value stands. Each piece parses as a strict array of at least
//! one element at the depth the array has in the document, so joined by commas they are
//! one valid array of all their elements, whose count is held to the array limit. A cut
//! that is not between two elements (a guess inside a string or a nested value) leaves a
//! piece that does not parse. A valid array in the place of `[]` leaves a valid document,
//! equal to the original text, with the same value. Anything the scan does not find falls
//! back to the one-core pass, and so does any piece or rest that does not parse: the
//! one-core pass is the reference, and the split reading only saves its time.

use std::ops::Range;

use serde::de::DeserializeOwned;

use super::{parse_strictly, parse_strictly_at, InputLimits};

/// A document whose bulk is one array at a fixed path of object members.
pub(crate) trait LargeArray: DeserializeOwned + Send {
    /// The array's elements.
    type Element: DeserializeOwned + Send;
    /// The member names from the document's top object down to the array.
    const PATH: &'static [&'static str];
    /// The array in a parsed document.
    fn elements_mut(&mut self) -> &mut Vec<Self::Element>;
}

/// Documents smaller than this are read on one core: a handoff to the pool costs more
/// than it saves below a few megabytes.
const SPLIT_FROM_BYTES: usize = 4 << 20;

/// Pieces per thread of the pool: enough for the pool to even out pieces of unequal cost.
const PIECES_PER_THREAD: usize = 4;

/// [`parse_strictly`] of `text`, with the array at `T::PATH` parsed on the pool when the
/// text is large (see the module documentation).
pub(crate) fn parse_strictly_split<T: LargeArray>(text: &str, limits: &InputLimits) -> Option<T> {
    parse_split_from(text, limits, SPLIT_FROM_BYTES)
}

/// [`parse_strictly_split`] splitting texts of at least `from_bytes` bytes.
pub(crate) fn parse_split_from<T: LargeArray>(
    text: &str,
    limits: &InputLimits,
    from_bytes: usize,
) -> Option<T> {
    if text.len() < from_bytes {
        return parse_strictly(text, limits);
    }
    let bytes = text.as_bytes();
    let pieces = rayon::current_num_threads() * PIECES_PER_THREAD;
    let Some(array) = member_start(bytes, T::PATH).and_then(|start| cut(bytes, start, pieces))
    else {
        return parse_strictly(text, limits);
    };
    split_reading(text, limits, &array).or_else(|| parse_strictly(text, limits))
}

/// The array found in the text: its byte range (brackets included) and its pieces (each
/// between `[` or a comma and a comma or `]`, exclusive).
struct CutArray {
    range: Range<usize>,
    pieces: Vec<Range<usize>>,
}

/// The parse of the rest and the pieces on the pool; `None` if any of them fails.
fn split_reading<T: LargeArray>(text: &str, limits: &InputLimits, array: &CutArray) -> Option<T> {
    use rayon::prelude::*;
    let mut rest = String::with_capacity(text.len() - array.range.len() + 2);
    rest.push_str(&text[..array.range.start]);
    rest.push_str("[]");
    rest.push_str(&text[array.range.end..]);
    // The array is inside the objects of the path.
    let depth = T::PATH.len() as u64;
    let (document, pieces) = rayon::join(
        || parse_strictly::<T>(&rest, limits),
        || {
            array
                .pieces
                .par_iter()
                .map(|piece| {
                    let mut own = String::with_capacity(piece.len() + 2);
                    own.push('[');
                    own.push_str(&text[piece.clone()]);
                    own.push(']');
                    parse_strictly_at::<Vec<T::Element>>(&own, limits, depth)
                        .filter(|elements| !elements.is_empty())
                })
                .collect::<Option<Vec<_>>>()
        },
    );
    let mut document = document?;
    let pieces = pieces?;
    let count: usize = pieces.iter().map(Vec::len).sum();
    if count as u64 > limits.array_elements {
        return None;
    }
    let slot = document.elements_mut();
    if !slot.is_empty() {
        return None;
    }
    slot.reserve_exact(count);
    for piece in pieces {
        slot.extend(piece);
    }
    Some(document)
}

/// The offset of the value at `path` (member names from the top object down), if the
/// text's structure leads there; the first member of each name is taken (a repeated one
/// fails the parse of the rest).
fn member_start(text: &[u8], path: &[&str]) -> Option<usize> {
    let mut at = skip_whitespace(text, 0);
    for name in path {
        if text.get(at) != Some(&b'{') {
            return None;
        }
        at = skip_whitespace(text, at + 1);
        at = loop {
            if text.get(at) != Some(&b'"') {
                return None;
            }
            let key_end = string_end(text, at)?;
            let key = &text[at + 1..key_end - 1];
            at = skip_whitespace(text, key_end);
            if text.get(at) != Some(&b':') {
                return None;
            }
            let start = skip_whitespace(text, at + 1);
            if key == name.as_bytes() {
                break start;
            }
            at = skip_whitespace(text, value_end(text, start)?);
            match text.get(at) {
                Some(b',') => at = skip_whitespace(text, at + 1),
                _ => return None,
            }
        };
    }
    Some(at)
}

/// The array that starts at `start`, cut into about `pieces` pieces (see the module
/// documentation); `None` if it is not an array of objects the scan can follow.
fn cut(text: &[u8], start: usize, pieces: usize) -> Option<CutArray> {
    if text.get(start) != Some(&b'[') {
        return None;
    }
    let first = skip_whitespace(text, start + 1);
    if text.get(first) == Some(&b']') {
        return Some(CutArray {
            range: start..first + 1,
            pieces: Vec::new(),
        });
    }
    if text.get(first) != Some(&b'{') {
        return None;
    }
    let first_end = value_end(text, first)?;
    let comma = skip_whitespace(text, first_end);
    // The separator: from the first element's closing brace through the second's first key.
    let separator = match text.get(comma)? {
        b',' => {
            let second = skip_whitespace(text, comma + 1);
            if text.get(second) != Some(&b'{') {
                return None;
            }
            let key = skip_whitespace(text, second + 1);
            if text.get(key) != Some(&b'"') {
                return None;
            }
            Some(&text[first_end - 1..string_end(text, key)?])
        }
        b']' => None,
        _ => return None,
    };
    let comma_offset = comma - (first_end - 1);
    let mut cuts = Vec::new();
    if let Some(separator) = separator {
        let finder = memchr::memmem::Finder::new(separator);
        let span = text.len() - start;
        // Where the next separator may begin: the first is the first element's last byte.
        let mut from = first_end - 1;
        for k in 1..pieces {
            let target = (start + span / pieces * k).max(from);
            let Some(found) = finder.find(&text[target..]) else {
                break;
            };
            cuts.push(target + found + comma_offset);
            from = target + found + 1;
        }
    }
    // The last piece is scanned, element by element, to find the array's end.
    let mut at = cuts.last().map_or(start, |&last| last) + 1;
    let end = loop {
        at = skip_whitespace(text, value_end(text, skip_whitespace(text, at))?);
        match text.get(at)? {
            b',' => at += 1,
            b']' => break at,
            _ => return None,
        }
    };
    let mut bounds = vec![start];
    bounds.extend(cuts);
    bounds.push(end);
    Some(CutArray {
        range: start..end + 1,
        pieces: bounds.windows(2).map(|w| w[0] + 1..w[1]).collect(),
    })
}

fn is_whitespace(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r')
}

fn skip_whitespace(text: &[u8], at: usize) -> usize {
    let rest = text.get(at..).unwrap_or_default();
    at + rest
        .iter()
        .position(|&byte| !is_whitespace(byte))
        .unwrap_or(rest.len())
}

/// The offset just past the string that opens at `at` (a `"`).
fn string_end(text: &[u8], at: usize) -> Option<usize> {
    let mut i = at + 1;
    loop {
        i += memchr::memchr2(b'"', b'\\', text.get(i..)?)?;
        if text[i] == b'"' {
            return Some(i + 1);
        }
        i += 2;
    }
}

/// What a byte is to the scan of an array or object.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Other,
    Quote,
    Open,
    Close,
}

/// [`Class`] of every byte value.
const CLASSES: [Class; 256] = {
    let mut table = [Class::Other; 256];
    table[b'"' as usize] = Class::Quote;
    table[b'{' as usize] = Class::Open;
    table[b'[' as usize] = Class::Open;
    table[b'}' as usize] = Class::Close;
    table[b']' as usize] = Class::Close;
    table
};

/// The offset just past the value that starts at `at`. Brackets are counted, not matched:
/// a text they do not describe fails a later parse.
fn value_end(text: &[u8], at: usize) -> Option<usize> {
    match *text.get(at)? {
        b'"' => string_end(text, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            loop {
                let skipped = text
                    .get(i..)?
                    .iter()
                    .position(|&byte| CLASSES[usize::from(byte)] != Class::Other)?;
                i += skipped;
                match CLASSES[usize::from(text[i])] {
                    Class::Quote => i = string_end(text, i)?,
                    Class::Open => {
                        depth += 1;
                        i += 1;
                    }
                    // A closing bracket: nothing else stops the skip above.
                    _ => {
                        depth -= 1;
                        i += 1;
                        if depth == 0 {
                            return Some(i);
                        }
                    }
                }
            }
        }
        _ => {
            let rest = &text[at..];
            let length = rest
                .iter()
                .position(|&byte| is_whitespace(byte) || matches!(byte, b',' | b'}' | b']'))
                .unwrap_or(rest.len());
            (length > 0).then_some(at + length)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Doc {
        name: String,
        inner: Inner,
    }

    #[derive(Debug, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        items: Vec<Item>,
        #[serde(default)]
        tail: Option<u32>,
    }

    #[derive(Debug, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Item {
        id: String,
        values: Vec<u64>,
        #[serde(default)]
        children: Vec<Item>,
    }

    impl LargeArray for Doc {
        type Element = Item;
        const PATH: &'static [&'static str] = &["inner", "items"];
        fn elements_mut(&mut self) -> &mut Vec<Item> {
            &mut self.inner.items
        }
    }

    fn split(text: &str, limits: &InputLimits) -> Option<Doc> {
        parse_split_from(text, limits, 0)
    }

    fn whole(text: &str, limits: &InputLimits) -> Option<Doc> {
        parse_strictly(text, limits)
    }

    const DOCUMENTS: &[&str] = &[
        r#"{"name":"a","inner":{"items":[{"id":"x","values":[1,2]},{"id":"y,]\"[","values":[]}],"tail":3}}"#,
        r#" { "inner" : { "tail" : 1 , "items" : [ ] } , "name" : "b" } "#,
        r#"{"name":"c","inner":{"items":[ {"id":"z","values":[3]} ]}}"#,
        // Broken in many ways: each must be refused by both readings.
        r#"{"name":"d","inner":{"items":[{"id":"x","values":[1]},]}}"#,
        r#"{"name":"d","inner":{"items":[,{"id":"x","values":[1]}]}}"#,
        r#"{"name":"d","inner":{"items":[{"id":"x","values":[1]}}]}}"#,
        r#"{"name":"d","inner":{"items":[{"id":"x","values":[1]]]}}"#,
        r#"{"name":"d","inner":{"items":[{"id":"x","values":[1]}],"items":[]}}"#,
        r#"{"name":"d","name":"e","inner":{"items":[]}}"#,
        r#"{"name":"d","inner":{"items":[{"id":"x","id":"y","values":[1]}]}}"#,
        r#"{"name":"d","inner":{"items":[{"id":"x","values":[1],"extra":0}]}}"#,
        r#"{"name":"d","inner":{"items":{"id":"x"}}}"#,
        r#"{"name":"d","inner":{"items":[{"id":"x","values":[1]}]}} trailing"#,
        r#"{"name":"d","inner":{"items":[{"id":"x","values":[1]} {"id":"y","values":[]}]}}"#,
        r#"{"name":"d","inner":{"items":[{"id":"x","values":[1]}]"#,
        r#"{"name":"d","inner":{"items":["#,
        r#"{"name":"d\"","inner":{"items":[]}}"#,
        r#"{"inner":{"items":[{"id":"x","values":[1,2,3,4]}]},"name":"f"}"#,
    ];

    #[test]
    fn the_split_reading_reads_what_the_whole_reading_reads() {
        let mut tight = InputLimits::DEFAULT;
        tight.array_elements = 3;
        tight.depth = 4;
        for limits in [InputLimits::DEFAULT, tight] {
            for text in DOCUMENTS {
                assert_eq!(split(text, &limits), whole(text, &limits), "{text}");
            }
        }
        assert!(split(DOCUMENTS[0], &InputLimits::DEFAULT).is_some());
    }

    #[test]
    fn every_prefix_and_every_one_byte_change_is_read_alike() {
        let text = DOCUMENTS[0];
        for end in 0..text.len() {
            let prefix = &text[..end];
            assert_eq!(split(prefix, &InputLimits::DEFAULT), None, "{prefix}");
        }
        for at in 0..text.len() {
            for byte in [b'[', b']', b'{', b'}', b',', b'"', b'\\', b' ', b'1', b'x'] {
                let mut bytes = text.as_bytes().to_vec();
                bytes[at] = byte;
                let Ok(changed) = String::from_utf8(bytes) else {
                    continue;
                };
                assert_eq!(
                    split(&changed, &InputLimits::DEFAULT),
                    whole(&changed, &InputLimits::DEFAULT),
                    "{changed}"
                );
            }
        }
    }

    #[test]
    fn the_array_limit_and_the_depth_hold_inside_the_split_array() {
        let four = r#"{"name":"a","inner":{"items":[{"id":"a","values":[]},{"id":"b","values":[]},{"id":"c","values":[]},{"id":"d","values":[]}]}}"#;
        let mut limits = InputLimits::DEFAULT;
        limits.array_elements = 3;
        assert_eq!(split(four, &limits), None);
        limits.array_elements = 4;
        assert_eq!(split(four, &limits).map(|d| d.inner.items.len()), Some(4));
        // An element's `values` array is at depth 4 (top object, inner, items, element).
        limits.depth = 3;
        assert_eq!(split(four, &limits), None);
        assert_eq!(whole(four, &limits), None);
    }

    #[test]
    fn the_scan_finds_the_array_and_cuts_it_between_elements() {
        let text = DOCUMENTS[0].as_bytes();
        let start = member_start(text, Doc::PATH).unwrap();
        let array = cut(text, start, 1).unwrap();
        assert_eq!(&text[array.range.clone()][..2], b"[{");
        let pieces: Vec<&str> = array
            .pieces
            .iter()
            .map(|r| std::str::from_utf8(&text[r.clone()]).unwrap())
            .collect();
        assert_eq!(
            pieces,
            [r#"{"id":"x","values":[1,2]},{"id":"y,]\"[","values":[]}"#]
        );
        // Cut wherever the separator recurs: here between every two elements.
        let many = r#"{"name":"a","inner":{"items":[{"id":"a","values":[]},{"id":"b","values":[]},{"id":"c","values":[]}]}}"#;
        let bytes = many.as_bytes();
        let array = cut(bytes, member_start(bytes, Doc::PATH).unwrap(), 64).unwrap();
        assert_eq!(array.pieces.len(), 3);
        assert_eq!(
            split(many, &InputLimits::DEFAULT).map(|d| d.inner.items.len()),
            Some(3)
        );
        assert_eq!(member_start(text, &["missing"]), None);
        assert_eq!(member_start(br#"{"a":1}"#, &["a", "b"]), None);
    }

    #[test]
    fn a_cut_inside_a_nested_value_is_refused() {
        // The separator `},{"id":` recurs inside an element (its children): a piece cut
        // there does not parse, and the one-core reading decides.
        let text = r#"{"name":"a","inner":{"items":[{"id":"a","values":[]},{"id":"b","values":[],"children":[{"id":"c","values":[]},{"id":"d","values":[]},{"id":"e","values":[]}]},{"id":"f","values":[1]}]}}"#;
        let bytes = text.as_bytes();
        let array = cut(bytes, member_start(bytes, Doc::PATH).unwrap(), 64).unwrap();
        assert!(array.pieces.len() > 3, "{}", array.pieces.len());
        assert!(split_reading::<Doc>(text, &InputLimits::DEFAULT, &array).is_none());
        let read = split(text, &InputLimits::DEFAULT);
        assert_eq!(read, whole(text, &InputLimits::DEFAULT));
        assert_eq!(read.map(|d| d.inner.items.len()), Some(3));
        // An escaped quote in a string is skipped whole by the scan.
        let escaped =
            r#"{"name":"a","inner":{"items":[{"id":"a\"],","values":[]},{"id":"b","values":[]}]}}"#;
        assert_eq!(
            split(escaped, &InputLimits::DEFAULT).map(|d| d.inner.items[0].id.clone()),
            Some("a\"],".to_owned())
        );
    }
}
