//! JSON strings as serde_json writes them, without its byte-by-byte escaper when nothing
//! needs an escape: every id, digest and name of a request or a plan. Shared by the
//! canonical writer ([`super::writer`]) and the plan file's pretty writer
//! ([`super::pretty`]), whose bytes must both equal serde_json's.

use serde_json::Error;

/// Appends `text` as a JSON string, byte-identical to `serde_json::to_writer(out, text)`.
pub(crate) fn write_json_string(out: &mut Vec<u8>, text: &str) -> Result<(), Error> {
    if needs_escape(text.as_bytes()) {
        return serde_json::to_writer(out, text);
    }
    out.reserve(text.len() + 2);
    out.push(b'"');
    out.extend_from_slice(text.as_bytes());
    out.push(b'"');
    Ok(())
}

/// Whether serde_json escapes any byte of `bytes`: a control byte (below 0x20), a quote or
/// a backslash. Eight bytes at a time: a word has a byte below 0x20 when subtracting 0x20
/// from every byte borrows into a byte whose top bit was clear, and a byte equal to `c` when
/// the word XOR `c` repeated has a zero byte (the same test with 0x01). The last bytes are
/// one more word, not a byte loop (ids are mostly a few words long and rarely a multiple
/// of eight): the last eight bytes of the text when it has eight, read again where they
/// overlap the words before (a test of bytes, so a byte seen twice changes nothing), or
/// the short text padded with bytes that need no escape.
pub(crate) fn needs_escape(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let escaped = |word: [u8; 8]| {
        let word = u64::from_le_bytes(word);
        let below = |word: u64, n: u64| word.wrapping_sub(ONES * n) & !word & HIGHS != 0;
        below(word, 0x20)
            || below(word ^ (ONES * u64::from(b'"')), 1)
            || below(word ^ (ONES * u64::from(b'\\')), 1)
    };
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        if escaped(word) {
            return true;
        }
    }
    let tail = chunks.remainder();
    if tail.is_empty() {
        return false;
    }
    let mut word = [b'a'; 8];
    match bytes.len().checked_sub(8) {
        Some(start) => word.copy_from_slice(&bytes[start..]),
        None => word[..tail.len()].copy_from_slice(tail),
    }
    escaped(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The oracle: serde_json's own escaper.
    fn serde_json_string(text: &str) -> Vec<u8> {
        serde_json::to_vec(text).unwrap()
    }

    #[test]
    fn every_byte_at_every_position_of_a_word_is_escaped_as_serde_json_escapes_it() {
        assert!(!needs_escape(b""));
        for byte in 0u8..=0x7f {
            let needs = byte < 0x20 || byte == b'"' || byte == b'\\';
            for length in 1..=17 {
                for position in 0..length {
                    let mut bytes = vec![b'a'; length];
                    bytes[position] = byte;
                    let text = std::str::from_utf8(&bytes).unwrap();
                    assert_eq!(
                        needs_escape(text.as_bytes()),
                        needs,
                        "{byte:#x} at {position}"
                    );
                    let mut out = Vec::new();
                    write_json_string(&mut out, text).unwrap();
                    assert_eq!(out, serde_json_string(text), "{byte:#x} at {position}");
                }
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn any_string_is_written_as_serde_json_writes_it(text in "\\PC*|[\\x00-\\x7f]{0,40}|[a-z\"\\\\\u{1}é€]{0,40}") {
            let mut out = Vec::new();
            write_json_string(&mut out, &text).unwrap();
            proptest::prop_assert_eq!(out, serde_json_string(&text));
        }
    }
}
