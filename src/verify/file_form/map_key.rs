//! Object keys for [`Comparison`](super::Comparison): serde_json prints a map's key as a
//! string whatever its type, so keys get a serializer of their own.

use serde::ser::{self, Serialize};

use super::{Comparison, Differs};

/// An object key as serde_json prints it: a string as itself, an integer or a boolean as a
/// string of its digits or its name; any other key is taken as a difference (the caller
/// then compares canonical hashes).
pub(super) struct MapKey<'c, 't>(pub(super) &'c mut Comparison<'t>);

impl MapKey<'_, '_> {
    /// A key printed as the string of a scalar's JSON text.
    fn quoted<T: Serialize>(self, value: T) -> Result<(), Differs> {
        self.0.expect(b"\"")?;
        value.serialize(&mut *self.0)?;
        self.0.expect(b"\"")
    }
}

impl ser::Serializer for MapKey<'_, '_> {
    type Ok = ();
    type Error = Differs;
    type SerializeSeq = ser::Impossible<(), Differs>;
    type SerializeTuple = ser::Impossible<(), Differs>;
    type SerializeTupleStruct = ser::Impossible<(), Differs>;
    type SerializeTupleVariant = ser::Impossible<(), Differs>;
    type SerializeMap = ser::Impossible<(), Differs>;
    type SerializeStruct = ser::Impossible<(), Differs>;
    type SerializeStructVariant = ser::Impossible<(), Differs>;

    fn serialize_str(self, v: &str) -> Result<(), Differs> {
        self.0.string(v)
    }
    fn serialize_char(self, v: char) -> Result<(), Differs> {
        self.0.string(v.encode_utf8(&mut [0u8; 4]))
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), Differs> {
        self.0.string(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Differs> {
        value.serialize(self)
    }
    fn serialize_bool(self, v: bool) -> Result<(), Differs> {
        self.quoted(v)
    }
    fn serialize_i8(self, v: i8) -> Result<(), Differs> {
        self.quoted(v)
    }
    fn serialize_i16(self, v: i16) -> Result<(), Differs> {
        self.quoted(v)
    }
    fn serialize_i32(self, v: i32) -> Result<(), Differs> {
        self.quoted(v)
    }
    fn serialize_i64(self, v: i64) -> Result<(), Differs> {
        self.quoted(v)
    }
    fn serialize_i128(self, v: i128) -> Result<(), Differs> {
        self.quoted(v)
    }
    fn serialize_u8(self, v: u8) -> Result<(), Differs> {
        self.quoted(v)
    }
    fn serialize_u16(self, v: u16) -> Result<(), Differs> {
        self.quoted(v)
    }
    fn serialize_u32(self, v: u32) -> Result<(), Differs> {
        self.quoted(v)
    }
    fn serialize_u64(self, v: u64) -> Result<(), Differs> {
        self.quoted(v)
    }
    fn serialize_u128(self, v: u128) -> Result<(), Differs> {
        self.quoted(v)
    }
    fn serialize_f32(self, _: f32) -> Result<(), Differs> {
        Err(Differs)
    }
    fn serialize_f64(self, _: f64) -> Result<(), Differs> {
        Err(Differs)
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), Differs> {
        Err(Differs)
    }
    fn serialize_none(self) -> Result<(), Differs> {
        Err(Differs)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<(), Differs> {
        Err(Differs)
    }
    fn serialize_unit(self) -> Result<(), Differs> {
        Err(Differs)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Differs> {
        Err(Differs)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), Differs> {
        Err(Differs)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Differs> {
        Err(Differs)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Differs> {
        Err(Differs)
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, Differs> {
        Err(Differs)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Differs> {
        Err(Differs)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Differs> {
        Err(Differs)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, Differs> {
        Err(Differs)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Differs> {
        Err(Differs)
    }
}
