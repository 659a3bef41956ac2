//! A serde serializer that writes canonical JSON straight to a byte sink, without building
//! a [`serde_json::Value`] tree first.
//!
//! The bytes are exactly those of `serde_json::to_string(&serde_json::to_value(x)?)`:
//! object keys sorted byte-wise at every depth (a repeated key keeps its last value, as a
//! `Value` map does), `f32` widened to `f64` before printing, non-finite floats as `null`,
//! 128-bit integers only when they fit 64 bits, and map keys converted to strings the way
//! `serde_json`'s value serializer converts them.
//!
//! How: the entries of every open object are written in arrival order into one arena,
//! each entry's byte range and raw key recorded; when the object closes, its entries are
//! re-emitted in key order (nothing moves when they already arrived sorted). Bytes outside
//! any open object go to the sink at once, and the outermost object is emitted to the sink
//! directly from the arena, so the peak extra memory is one copy of the compact text of the
//! largest top-level value, never a tree of it.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::Write;

use serde::ser::{self, Error as _, Serialize};
use serde_json::Error;

use super::compound::compound_traits;
use super::json_string::write_json_string;
use super::map_key::{append_key_text, key_str, KeyRules};

/// One entry of an open object: its raw key and `"key":value` bytes (in `out`).
#[derive(Clone, Copy, Debug)]
struct Entry {
    key: Key,
    start: usize,
    end: usize,
}

/// The raw text of an entry's key.
#[derive(Clone, Copy, Debug)]
enum Key {
    /// A struct field's or a variant's static name (borrowed, never copied).
    Static(&'static str),
    /// A map key, converted to text in `keys[start..end]`.
    Map { start: usize, end: usize },
}

/// The address and length of a `&'static str`: equal identities are equal texts.
type StaticKey = (usize, usize);

/// The identity of no static text (map keys, variant names).
const NO_STATIC_KEY: StaticKey = (0, 0);

fn static_key(text: &'static str) -> StaticKey {
    (text.as_ptr() as usize, text.len())
}

/// An open object: where its entries, keys and bytes begin.
#[derive(Clone, Copy, Debug)]
struct Frame {
    /// The identity of the struct's `&'static str` name ([`NO_STATIC_KEY`] for a map).
    struct_name: StaticKey,
    entries_base: usize,
    keys_base: usize,
    out_start: usize,
    /// The outermost struct of a writer made by [`CanonicalWriter::streaming_sorted`]: its
    /// fields go to the sink as they are written, each checked to follow the one before.
    streamed: bool,
}

/// The growable buffers of a writer. They hold nothing between values but capacity and
/// the remembered field orders of the structs seen, so one set serves any number of values
/// written one after another (see [`super::reused_buffers`]): writing the estimator input
/// of every node of a large plan with fresh buffers spent about a third of that time in
/// the allocator, growing and freeing them.
#[derive(Default)]
pub(crate) struct WriterBuffers {
    out: Vec<u8>,
    keys: Vec<u8>,
    entries: Vec<Entry>,
    frames: Vec<Frame>,
    scratch: Vec<u8>,
    order: Vec<usize>,
    kept: Vec<Entry>,
    /// Per struct name, the field order last seen and the entries it emits, in output
    /// order: a struct serialized again with the same fields is reordered without
    /// comparing keys. A cache checked on every use (the arrival order must match), so it
    /// stays valid from one value to the next.
    struct_orders: HashMap<StaticKey, StructOrder, BuildHasherDefault<AddressHasher>>,
}

impl WriterBuffers {
    /// Empties every buffer (keeping its capacity, unless it grew past `keep_bytes`) and
    /// keeps the remembered struct orders.
    pub(crate) fn reset(&mut self, keep_bytes: usize) {
        for bytes in [&mut self.out, &mut self.keys, &mut self.scratch] {
            bytes.clear();
            if bytes.capacity() > keep_bytes {
                *bytes = Vec::new();
            }
        }
        self.entries.clear();
        self.frames.clear();
        self.order.clear();
        self.kept.clear();
    }
}

/// The canonical JSON writer over a sink.
pub(crate) struct CanonicalWriter<W: Write> {
    sink: W,
    /// The buffers it grows, lent by the caller and handed back by [`Self::write_value`].
    buf: WriterBuffers,
    /// Whether the outermost struct is streamed (its fields arrive in key order).
    stream_outermost: bool,
}

/// Hashes a [`StaticKey`] (an address and a length) by one multiplication: the keys are a
/// few hundred distinct addresses looked up once per struct serialized, where SipHash was
/// about 2% of a large plan's CPU.
#[derive(Default)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(u64::from(byte));
        }
    }

    fn write_usize(&mut self, value: usize) {
        self.write_u64(value as u64);
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = (self.0.rotate_left(5) ^ value).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// A struct's field names in arrival order (by address) and the emitted entry indices.
#[derive(Debug, Default)]
struct StructOrder {
    arrival: Vec<StaticKey>,
    emitted: Vec<usize>,
}

impl<W: Write> CanonicalWriter<W> {
    /// A writer over `sink` that grows `buffers` (empty ones, as [`WriterBuffers::reset`]
    /// leaves them). `streaming_sorted`: the value is a struct whose fields are declared
    /// (so serialized) in key order, and each field goes to the sink as soon as it is
    /// written, so the arena holds one field's text at a time instead of the whole value's;
    /// a field whose name does not follow the one before it is an error (never different
    /// bytes).
    pub(crate) fn with_buffers(sink: W, buffers: WriterBuffers, streaming_sorted: bool) -> Self {
        CanonicalWriter {
            sink,
            buf: buffers,
            stream_outermost: streaming_sorted,
        }
    }

    /// Serializes one value; returns the sink (or the error) and the buffers, to be reused.
    pub(crate) fn write_value<T: Serialize + ?Sized>(
        mut self,
        value: &T,
    ) -> (Result<W, Error>, WriterBuffers) {
        let written = value.serialize(&mut self).and_then(|()| self.flush_free());
        (written.map(|()| self.sink), self.buf)
    }

    /// Sends the arena to the sink when no object is open but a streamed outermost struct.
    fn flush_free(&mut self) -> Result<(), Error> {
        let free = match self.buf.frames.as_slice() {
            [] => true,
            [outermost] => outermost.streamed,
            _ => false,
        };
        if free && !self.buf.out.is_empty() {
            self.sink.write_all(&self.buf.out).map_err(Error::io)?;
            self.buf.out.clear();
        }
        Ok(())
    }

    fn push_json<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        serde_json::to_writer(&mut self.buf.out, value)?;
        self.flush_free()
    }

    /// Writes `text` as a JSON string: the bytes serde_json writes, copied at once when
    /// nothing in it needs an escape (every id and digest), through serde_json's escaper
    /// otherwise. Strings were about a quarter of the plan hash's time in that escaper,
    /// which looks every byte up in a table.
    fn push_str(&mut self, text: &str) -> Result<(), Error> {
        write_json_string(&mut self.buf.out, text)?;
        self.flush_free()
    }

    fn push_raw(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.buf.out.extend_from_slice(bytes);
        self.flush_free()
    }

    fn open_object(&mut self, struct_name: Option<&'static str>) {
        self.buf.out.push(b'{');
        let streamed = self.stream_outermost && self.buf.frames.is_empty() && struct_name.is_some();
        self.buf.frames.push(Frame {
            streamed,
            struct_name: struct_name.map_or(NO_STATIC_KEY, static_key),
            entries_base: self.buf.entries.len(),
            keys_base: self.buf.keys.len(),
            out_start: self.buf.out.len(),
        });
    }

    /// Writes the comma before an entry of the innermost object, if it is not the first.
    fn separate_entry(&mut self) -> Result<(), Error> {
        let frame = self
            .buf
            .frames
            .last()
            .ok_or_else(|| Error::custom("object entry outside an object"))?;
        if self.buf.entries.len() > frame.entries_base {
            self.buf.out.push(b',');
        }
        Ok(())
    }

    /// Starts a map entry: a comma if needed, the key (raw and escaped) and the colon.
    fn begin_entry<K: Serialize + ?Sized>(&mut self, key: &K) -> Result<(), Error> {
        self.separate_entry()?;
        let key_start = self.buf.keys.len();
        append_key_text(key, KeyRules::Canonical, &mut self.buf.keys)?;
        let text = key_str(&self.buf.keys[key_start..])?;
        let start = self.buf.out.len();
        write_json_string(&mut self.buf.out, text)?;
        let key = Key::Map {
            start: key_start,
            end: self.buf.keys.len(),
        };
        self.push_entry(key, start);
        Ok(())
    }

    /// Starts an entry named by a struct field's or a variant's static name.
    fn begin_named_entry(&mut self, key: &'static str) -> Result<(), Error> {
        if let Some(frame) = self.buf.frames.last().filter(|frame| frame.streamed) {
            let previous = self.buf.entries[frame.entries_base..].last();
            if previous.is_some_and(|entry| key_of(&self.buf.keys, entry) >= key.as_bytes()) {
                return Err(Error::custom(format!(
                    "field {key:?} is declared after a field that sorts after it: a streamed \
                     struct must declare its fields in key order"
                )));
            }
        }
        self.separate_entry()?;
        let start = self.buf.out.len();
        write_json_string(&mut self.buf.out, key)?;
        self.push_entry(Key::Static(key), start);
        Ok(())
    }

    /// Records an entry whose escaped key is written from `start`, and writes the colon.
    fn push_entry(&mut self, key: Key, start: usize) {
        self.buf.out.push(b':');
        self.buf.entries.push(Entry {
            key,
            start,
            end: start,
        });
    }

    fn end_entry(&mut self) {
        let end = self.buf.out.len();
        if let Some(entry) = self.buf.entries.last_mut() {
            entry.end = end;
        }
    }

    /// Closes the innermost object: its entries in key order, the last of equal keys kept.
    fn close_object(&mut self) -> Result<(), Error> {
        let frame = self
            .buf
            .frames
            .pop()
            .ok_or_else(|| Error::custom("object end outside an object"))?;
        if frame.streamed {
            // Every field went out in order as it was written.
            self.buf.entries.truncate(frame.entries_base);
            self.buf.keys.truncate(frame.keys_base);
            return self.push_raw(b"}");
        }
        if !self.order_entries(frame) {
            let kept = std::mem::take(&mut self.buf.kept);
            if self.buf.frames.is_empty() {
                // The outermost object: emit straight from the arena to the sink.
                let sink = &mut self.sink;
                sink.write_all(&self.buf.out[..frame.out_start])
                    .map_err(Error::io)?;
                for (position, entry) in kept.iter().enumerate() {
                    if position > 0 {
                        sink.write_all(b",").map_err(Error::io)?;
                    }
                    sink.write_all(&self.buf.out[entry.start..entry.end])
                        .map_err(Error::io)?;
                }
                self.buf.out.clear();
            } else {
                self.buf.scratch.clear();
                self.buf
                    .scratch
                    .extend_from_slice(&self.buf.out[frame.out_start..]);
                self.buf.out.truncate(frame.out_start);
                for (position, entry) in kept.iter().enumerate() {
                    if position > 0 {
                        self.buf.out.push(b',');
                    }
                    let start = entry.start - frame.out_start;
                    let end = entry.end - frame.out_start;
                    self.buf
                        .out
                        .extend_from_slice(&self.buf.scratch[start..end]);
                }
            }
            self.buf.kept = kept;
        }
        self.buf.entries.truncate(frame.entries_base);
        self.buf.keys.truncate(frame.keys_base);
        self.push_raw(b"}")
    }
}

impl<W: Write> CanonicalWriter<W> {
    /// Puts the entries of `frame` in output order into `self.buf.kept`, unless they already
    /// are in order (then returns true and `kept` is left empty).
    fn order_entries(&mut self, frame: Frame) -> bool {
        let entries = &self.buf.entries[frame.entries_base..];
        self.buf.kept.clear();
        let all_static = frame.struct_name != NO_STATIC_KEY
            && entries.iter().all(|e| matches!(e.key, Key::Static(_)));
        if all_static {
            if let Some(remembered) = self.buf.struct_orders.get(&frame.struct_name) {
                let same_fields = remembered.arrival.len() == entries.len()
                    && remembered
                        .arrival
                        .iter()
                        .zip(entries)
                        .all(|(&name, entry)| name == entry_static_key(entry));
                if same_fields {
                    if remembered.emitted.is_empty() {
                        return true;
                    }
                    self.buf
                        .kept
                        .extend(remembered.emitted.iter().map(|&index| entries[index]));
                    return false;
                }
            }
        }
        let keys = &self.buf.keys;
        let sorted = entries
            .windows(2)
            .all(|pair| key_of(keys, &pair[0]) < key_of(keys, &pair[1]));
        let order = &mut self.buf.order;
        order.clear();
        if !sorted {
            order.extend(0..entries.len());
            // Stable: equal keys keep arrival order; the last of each run of equal keys is
            // the one emitted, as a `Value` map keeps the last insert.
            order.sort_by(|&a, &b| key_of(keys, &entries[a]).cmp(key_of(keys, &entries[b])));
            let mut position = 0;
            while position < order.len() {
                let index = order[position];
                let last_of_run = order.get(position + 1).is_none_or(|&next| {
                    key_of(keys, &entries[next]) != key_of(keys, &entries[index])
                });
                if last_of_run {
                    position += 1;
                } else {
                    order.remove(position);
                }
            }
            self.buf
                .kept
                .extend(order.iter().map(|&index| entries[index]));
        }
        if all_static {
            // Remember the order (empty `emitted`: already sorted) for the next struct of
            // this name with the same fields.
            let remembered = self.buf.struct_orders.entry(frame.struct_name).or_default();
            remembered.arrival.clear();
            remembered
                .arrival
                .extend(entries.iter().map(entry_static_key));
            remembered.emitted.clear();
            remembered.emitted.extend_from_slice(order);
        }
        sorted
    }
}

/// The identity of an entry's static name ([`NO_STATIC_KEY`] for a map key).
fn entry_static_key(entry: &Entry) -> StaticKey {
    match entry.key {
        Key::Static(text) => static_key(text),
        Key::Map { .. } => NO_STATIC_KEY,
    }
}

/// The raw key of an entry.
fn key_of<'k>(keys: &'k [u8], entry: &Entry) -> &'k [u8] {
    match entry.key {
        Key::Static(text) => text.as_bytes(),
        Key::Map { start, end } => &keys[start..end],
    }
}

/// A compound value being written: a sequence, an object, or a one-key variant wrapper.
pub(crate) struct Compound<'a, W: Write> {
    writer: &'a mut CanonicalWriter<W>,
    first: bool,
    /// Inside a one-key `{"variant": ...}` object that closes with the compound.
    wrapped: bool,
}

impl<W: Write> Compound<'_, W> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        if !self.first {
            self.writer.buf.out.push(b',');
        }
        self.first = false;
        value.serialize(&mut *self.writer)
    }

    fn end_sequence(self) -> Result<(), Error> {
        self.writer.push_raw(b"]")?;
        if self.wrapped {
            self.writer.end_entry();
            self.writer.close_object()?;
        }
        Ok(())
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
        self.writer.begin_named_entry(key)?;
        value.serialize(&mut *self.writer)?;
        self.writer.end_entry();
        Ok(())
    }

    fn key<K: Serialize + ?Sized>(&mut self, key: &K) -> Result<(), Error> {
        self.writer.begin_entry(key)
    }

    fn value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        value.serialize(&mut *self.writer)?;
        self.writer.end_entry();
        Ok(())
    }

    fn end_object(self) -> Result<(), Error> {
        self.writer.close_object()?;
        if self.wrapped {
            self.writer.end_entry();
            self.writer.close_object()?;
        }
        Ok(())
    }
}

impl<'a, W: Write> ser::Serializer for &'a mut CanonicalWriter<W> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'a, W>;
    type SerializeTuple = Compound<'a, W>;
    type SerializeTupleStruct = Compound<'a, W>;
    type SerializeTupleVariant = Compound<'a, W>;
    type SerializeMap = Compound<'a, W>;
    type SerializeStruct = Compound<'a, W>;
    type SerializeStructVariant = Compound<'a, W>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.push_json(&v)
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.push_json(&v)
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.push_json(&v)
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.push_json(&v)
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        self.push_json(&v)
    }
    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        if let Ok(v) = u64::try_from(v) {
            self.push_json(&v)
        } else if let Ok(v) = i64::try_from(v) {
            self.push_json(&v)
        } else {
            Err(Error::custom("number out of range"))
        }
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.push_json(&v)
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.push_json(&v)
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.push_json(&v)
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        self.push_json(&v)
    }
    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        let v = u64::try_from(v).map_err(|_| Error::custom("number out of range"))?;
        self.push_json(&v)
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        // A `Value` stores an f32 widened to f64 and prints that.
        self.push_json(&f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        self.push_json(&v)
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.push_json(&v)
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        self.push_str(v)
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        self.push_json(v)
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.push_raw(b"null")
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.push_raw(b"null")
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        self.push_raw(b"null")
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.push_str(variant)
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
        self.open_object(None);
        self.begin_named_entry(variant)?;
        value.serialize(&mut *self)?;
        self.end_entry();
        self.close_object()
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'a, W>, Error> {
        self.buf.out.push(b'[');
        Ok(Compound {
            writer: self,
            first: true,
            wrapped: false,
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Compound<'a, W>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Compound<'a, W>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a, W>, Error> {
        self.open_object(None);
        self.begin_named_entry(variant)?;
        self.buf.out.push(b'[');
        Ok(Compound {
            writer: self,
            first: true,
            wrapped: true,
        })
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Compound<'a, W>, Error> {
        self.open_object(None);
        Ok(Compound {
            writer: self,
            first: true,
            wrapped: false,
        })
    }
    fn serialize_struct(self, name: &'static str, _len: usize) -> Result<Compound<'a, W>, Error> {
        self.open_object(Some(name));
        Ok(Compound {
            writer: self,
            first: true,
            wrapped: false,
        })
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a, W>, Error> {
        self.open_object(None);
        self.begin_named_entry(variant)?;
        self.open_object(Some(variant));
        Ok(Compound {
            writer: self,
            first: true,
            wrapped: true,
        })
    }
}

compound_traits!([W: Write] Compound<'_, W>, Error);
