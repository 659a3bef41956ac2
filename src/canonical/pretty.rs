//! The pretty JSON of the plan file form, byte for byte `serde_json::to_writer_pretty`
//! (two spaces per level, `": "` after a key), written by a serializer of its own into one
//! buffer that goes to the sink in large chunks.
//!
//! Why not serde_json's own pretty printer: it escapes every string byte by byte through a
//! table, writes each level of indentation as a separate two-byte write and each token as
//! a separate write into the sink; on a 286 MB plan those small steps cost more than the
//! bytes themselves (the pretty file write was the longest pass beside the checks). Here a
//! string that needs no escape (every id and digest) is copied at once
//! ([`super::json_string`]), a line's indentation is one copy, and every scalar but strings
//! is still printed by serde_json itself, so numbers cannot differ.
//!
//! Map keys follow serde_json's rules: strings, chars, unit variants and newtypes of them
//! as strings; booleans and numbers quoted; a non-finite float or any other key is an error.

use std::io::Write;
use std::ops::Range;

use rayon::prelude::*;
use serde::ser::{self, Error as _, Serialize};
use serde_json::Error;

use super::compound::compound_traits;
use super::json_string::write_json_string;
use super::map_key::{write_key, KeyRules};

/// The buffer is sent to the sink once it holds this many bytes (at the end of a value).
const CHUNK: usize = 256 * 1024;

/// A line break and 64 levels of indentation, copied in one piece per line.
const INDENT: [u8; 129] = {
    let mut line = [b' '; 129];
    line[0] = b'\n';
    line
};

/// Writes the pretty JSON of `value` (without a final newline) to `sink` and returns the
/// sink, not flushed. The sink sees writes of about [`CHUNK`] bytes.
pub fn write_pretty<T: Serialize + ?Sized, W: Write>(value: &T, sink: W) -> Result<W, Error> {
    write_pretty_with(value, sink, &[])
}

/// The value of one struct field written otherwise than by the field's own `Serialize`:
/// the field `field` of the struct named `struct_name` (serde's name, the type's name
/// unless renamed), the first such field met (depth first, in order).
pub struct Replacement<'r> {
    /// The struct's serde name.
    pub struct_name: &'static str,
    /// The field's name.
    pub field: &'static str,
    /// What is written as its value.
    pub value: FieldValue<'r>,
}

/// What a [`Replacement`] writes as a field's value.
pub enum FieldValue<'r> {
    /// The JSON string of this text.
    ///
    /// Why: the builder writes a plan's file while the plan is still being checked, from
    /// the payload the checks read, before the plan id is set in it (the plan id is the
    /// payload's hash, which is not yet known when the checks start). The file gets the id
    /// by this replacement; the bytes are those of the sealed plan's own [`write_pretty`].
    Text(&'r str),
    /// The field's own value, a sequence of these elements, with its elements printed on
    /// the rayon pool a window at a time: the same bytes.
    ///
    /// Why: a plan's nodes are three quarters of its file (700 MB for 50,000 nodes), and
    /// printing them on one core was the last phase of `plan` still running alone.
    Elements(&'r (dyn PrintedElements + 'r)),
}

/// A sequence whose elements can be printed apart from one another: a vector of values.
pub trait PrintedElements: Sync {
    /// The number of elements.
    fn count(&self) -> usize;
    /// Appends the elements `range` to `out` as they stand in their array at `depth`: each
    /// after a comma (but the array's first), a line break and the indentation of `depth`.
    fn print(&self, range: Range<usize>, depth: usize, out: &mut Vec<u8>) -> Result<(), Error>;
}

impl<T: Serialize + Sync> PrintedElements for Vec<T> {
    fn count(&self) -> usize {
        self.len()
    }

    fn print(&self, range: Range<usize>, depth: usize, out: &mut Vec<u8>) -> Result<(), Error> {
        // Printed straight into `out`: a writer that never sends a chunk.
        let mut writer = PrettyWriter {
            sink: std::io::sink(),
            out: std::mem::take(out),
            depth,
            key_text: Vec::new(),
            replacements: &[],
            used: Vec::new(),
            split: Split::DEFAULT,
            chunk: usize::MAX,
        };
        for index in range {
            let element = self.get(index).ok_or_else(|| {
                Error::custom(format!(
                    "no element {index} in a sequence of {}",
                    self.len()
                ))
            })?;
            if index > 0 {
                writer.out.push(b',');
            }
            push_line(&mut writer.out, depth);
            element.serialize(&mut writer)?;
        }
        *out = writer.out;
        Ok(())
    }
}

/// The elements `range` printed in pieces of `piece` elements on the pool, in order.
fn print_window(
    elements: &dyn PrintedElements,
    range: Range<usize>,
    piece: usize,
    depth: usize,
    room: usize,
) -> Vec<Result<Vec<u8>, Error>> {
    let end = range.end;
    let pieces: Vec<Range<usize>> = range
        .step_by(piece)
        .map(|first| first..end.min(first.saturating_add(piece)))
        .collect();
    pieces
        .into_par_iter()
        .map(|piece| {
            let mut out = Vec::with_capacity(room);
            elements.print(piece, depth, &mut out)?;
            Ok(out)
        })
        .collect()
}

/// [`write_pretty`], with the values of the [`Replacement`]s' fields written as they say;
/// an error if a replacement's field is never met. The elements of a
/// [`FieldValue::Elements`] reach the sink one write a piece.
pub fn write_pretty_with<T: Serialize + ?Sized, W: Write>(
    value: &T,
    sink: W,
    replacements: &[Replacement<'_>],
) -> Result<W, Error> {
    write_pretty_split(value, sink, replacements, Split::DEFAULT)
}

/// How [`FieldValue::Elements`] are cut: `window` elements printed at once (the memory
/// held), in pieces of `piece` elements (the pool's tasks).
#[derive(Clone, Copy)]
struct Split {
    window: usize,
    piece: usize,
}

impl Split {
    /// About 4 MB of a plan's nodes at once, in pieces of a quarter megabyte.
    const DEFAULT: Split = Split {
        window: 256,
        piece: 16,
    };
}

fn write_pretty_split<T: Serialize + ?Sized, W: Write>(
    value: &T,
    sink: W,
    replacements: &[Replacement<'_>],
    split: Split,
) -> Result<W, Error> {
    let mut writer = PrettyWriter {
        sink,
        out: Vec::with_capacity(CHUNK + CHUNK / 4),
        depth: 0,
        key_text: Vec::new(),
        replacements,
        used: vec![false; replacements.len()],
        split,
        chunk: CHUNK,
    };
    value.serialize(&mut writer)?;
    if let Some(missing) = replacements
        .iter()
        .zip(&writer.used)
        .find_map(|(replacement, used)| (!used).then_some(replacement))
    {
        return Err(Error::custom(format!(
            "no field {} of a struct {} to write a replacement for",
            missing.field, missing.struct_name
        )));
    }
    writer.sink.write_all(&writer.out).map_err(Error::io)?;
    Ok(writer.sink)
}

/// The pretty JSON writer over a sink: the bytes not yet sent and the current depth.
struct PrettyWriter<'r, W: Write> {
    sink: W,
    out: Vec<u8>,
    depth: usize,
    /// Scratch for a map key's text.
    key_text: Vec<u8>,
    /// The fields written otherwise, and which of them were written.
    replacements: &'r [Replacement<'r>],
    used: Vec<bool>,
    split: Split,
    /// The buffer goes to the sink once it holds this many bytes.
    chunk: usize,
}

/// Appends a line break and the indentation of `depth`.
fn push_line(out: &mut Vec<u8>, depth: usize) {
    let mut spaces = 2 * depth;
    let first = spaces.min(INDENT.len() - 1);
    out.extend_from_slice(&INDENT[..=first]);
    spaces -= first;
    while spaces > 0 {
        let more = spaces.min(INDENT.len() - 1);
        out.extend_from_slice(&INDENT[1..=more]);
        spaces -= more;
    }
}

impl<W: Write> PrettyWriter<'_, W> {
    /// A line break and the indentation of the current depth.
    fn new_line(&mut self) {
        push_line(&mut self.out, self.depth);
    }

    /// Sends the buffer to the sink once it holds a chunk.
    fn send_full_chunk(&mut self) -> Result<(), Error> {
        if self.out.len() >= self.chunk {
            self.sink.write_all(&self.out).map_err(Error::io)?;
            self.out.clear();
        }
        Ok(())
    }

    /// A scalar printed by serde_json (numbers, so that their digits are serde_json's).
    fn scalar<T: Serialize>(&mut self, value: T) -> Result<(), Error> {
        serde_json::to_writer(&mut self.out, &value)
    }

    /// Opens an array or object; a known length of zero closes it at once.
    fn open(&mut self, open: u8, close: u8, len: Option<usize>) -> State {
        self.out.push(open);
        if len == Some(0) {
            self.out.push(close);
            State::Empty
        } else {
            self.depth += 1;
            State::First
        }
    }

    /// Opens the one-key object `{"variant": ...}` of a variant with data, up to its value.
    fn open_variant(&mut self, variant: &str) -> Result<(), Error> {
        self.out.push(b'{');
        self.depth += 1;
        self.new_line();
        write_json_string(&mut self.out, variant)?;
        self.out.extend_from_slice(b": ");
        Ok(())
    }

    /// Writes the array of `elements` at the current depth, its elements printed on the
    /// pool a window at a time (see [`FieldValue::Elements`]): the bytes serde_json's
    /// printer writes for the sequence. A window is sent to the sink while the next one is
    /// printed.
    fn write_elements(&mut self, elements: &dyn PrintedElements) -> Result<(), Error> {
        let count = elements.count();
        if count == 0 {
            self.out.extend_from_slice(b"[]");
            return Ok(());
        }
        self.out.push(b'[');
        let depth = self.depth + 1;
        let Split { window, piece } = self.split;
        let windows = (0..count)
            .step_by(window)
            .map(|first| first..count.min(first.saturating_add(window)));
        // Each window's pieces go to the sink as they are (after what the buffer holds),
        // while the next window is printed; a piece is given the room the largest piece
        // before it took.
        let mut printed = Vec::new();
        let mut room = 0;
        for next in windows.map(Some).chain([None]) {
            let mut next_printed = Vec::new();
            rayon::in_place_scope(|scope| {
                if let Some(range) = next {
                    let slot = &mut next_printed;
                    scope.spawn(move |_| *slot = print_window(elements, range, piece, depth, room));
                }
                if printed.is_empty() {
                    return Ok(());
                }
                self.sink.write_all(&self.out).map_err(Error::io)?;
                self.out.clear();
                printed
                    .drain(..)
                    .try_for_each(|text: Result<Vec<u8>, Error>| {
                        let text = text?;
                        room = room.max(text.len());
                        self.sink.write_all(&text).map_err(Error::io)
                    })
            })?;
            printed = next_printed;
        }
        self.new_line();
        self.out.push(b']');
        Ok(())
    }

    /// Closes what [`PrettyWriter::open_variant`] opened.
    fn close_variant(&mut self) {
        self.depth -= 1;
        self.new_line();
        self.out.push(b'}');
    }
}

/// Where a compound value stands: closed at its opening (a known length of zero), before
/// its first entry, or after one.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Empty,
    First,
    Rest,
}

/// A sequence or an object being written, possibly inside a variant's one-key object.
struct Compound<'a, 'r, W: Write> {
    writer: &'a mut PrettyWriter<'r, W>,
    state: State,
    /// Inside a `{"variant": ...}` object that closes with the compound.
    wrapped: bool,
    /// The serde name of the struct whose fields these are (empty for anything else).
    name: &'static str,
}

impl<W: Write> Compound<'_, '_, W> {
    /// The separator and line of the next element or key.
    fn next_line(&mut self) {
        if self.state == State::Rest {
            self.writer.out.push(b',');
        }
        self.state = State::Rest;
        self.writer.new_line();
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.next_line();
        value.serialize(&mut *self.writer)?;
        self.writer.send_full_chunk()
    }

    fn key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        self.next_line();
        let writer = &mut *self.writer;
        write_key(
            key,
            KeyRules::Printer,
            &mut writer.key_text,
            &mut writer.out,
        )
    }

    fn value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.writer.out.extend_from_slice(b": ");
        value.serialize(&mut *self.writer)?;
        self.writer.send_full_chunk()
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
        self.next_line();
        write_json_string(&mut self.writer.out, key)?;
        let replacements = self.writer.replacements;
        let replaced = (0..replacements.len()).find(|&k| {
            let replacement = &replacements[k];
            !self.writer.used[k] && replacement.struct_name == self.name && replacement.field == key
        });
        let Some(k) = replaced else {
            return self.value(value);
        };
        self.writer.used[k] = true;
        match replacements[k].value {
            FieldValue::Text(text) => self.value(text),
            FieldValue::Elements(elements) => {
                self.writer.out.extend_from_slice(b": ");
                self.writer.write_elements(elements)?;
                self.writer.send_full_chunk()
            }
        }
    }

    fn end_sequence(self) -> Result<(), Error> {
        self.close(b']');
        Ok(())
    }

    fn end_object(self) -> Result<(), Error> {
        self.close(b'}');
        Ok(())
    }

    /// Closes the array or object with `close`, then the variant's object if any.
    fn close(self, close: u8) {
        if self.state != State::Empty {
            self.writer.depth -= 1;
            if self.state == State::Rest {
                self.writer.new_line();
            }
            self.writer.out.push(close);
        }
        if self.wrapped {
            self.writer.close_variant();
        }
    }
}

impl<'a, 'r, W: Write> ser::Serializer for &'a mut PrettyWriter<'r, W> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'a, 'r, W>;
    type SerializeTuple = Compound<'a, 'r, W>;
    type SerializeTupleStruct = Compound<'a, 'r, W>;
    type SerializeTupleVariant = Compound<'a, 'r, W>;
    type SerializeMap = Compound<'a, 'r, W>;
    type SerializeStruct = Compound<'a, 'r, W>;
    type SerializeStructVariant = Compound<'a, 'r, W>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.scalar(v)
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.scalar(v)
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.scalar(v)
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        self.scalar(v)
    }
    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        self.scalar(v)
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.scalar(v)
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.scalar(v)
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.scalar(v)
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        self.scalar(v)
    }
    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        self.scalar(v)
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        // serde_json prints an f32 with the f32 formatter, a non-finite one as `null`.
        self.scalar(v)
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        self.scalar(v)
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        write_json_string(&mut self.out, v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        write_json_string(&mut self.out, v)
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        // serde_json writes bytes as an array of numbers.
        use ser::SerializeSeq;
        let mut seq = self.serialize_seq(Some(v.len()))?;
        for byte in v {
            seq.serialize_element(byte)?;
        }
        seq.end()
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.serialize_none()
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        self.serialize_none()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        write_json_string(&mut self.out, variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.open_variant(variant)?;
        value.serialize(&mut *self)?;
        self.close_variant();
        Ok(())
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Compound<'a, 'r, W>, Error> {
        let state = self.open(b'[', b']', len);
        Ok(Compound {
            writer: self,
            state,
            wrapped: false,
            name: "",
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Compound<'a, 'r, W>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Compound<'a, 'r, W>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Compound<'a, 'r, W>, Error> {
        self.open_variant(variant)?;
        let state = self.open(b'[', b']', Some(len));
        Ok(Compound {
            writer: self,
            state,
            wrapped: true,
            name: "",
        })
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Compound<'a, 'r, W>, Error> {
        let state = self.open(b'{', b'}', len);
        Ok(Compound {
            writer: self,
            state,
            wrapped: false,
            name: "",
        })
    }
    fn serialize_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Compound<'a, 'r, W>, Error> {
        let mut compound = self.serialize_map(Some(len))?;
        compound.name = name;
        Ok(compound)
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Compound<'a, 'r, W>, Error> {
        self.open_variant(variant)?;
        let state = self.open(b'{', b'}', Some(len));
        Ok(Compound {
            writer: self,
            state,
            wrapped: true,
            name: "",
        })
    }
}

compound_traits!([W: Write] Compound<'_, '_, W>, Error);

#[cfg(test)]
mod tests;
