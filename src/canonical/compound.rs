//! serde's seven compound-serializer traits for the writers of exact JSON bytes.
//!
//! serde asks a serializer for one type per compound shape (sequence, tuple, tuple
//! struct, tuple variant, map, struct, struct variant). Every serializer of jointplan that
//! writes or compares serde_json's bytes (the canonical writer, the plan file's pretty
//! writer, the file-form comparison of a stored plan) handles the seven with one
//! `Compound` type, so their trait impls are pure forwarding; [`compound_traits`] writes
//! them once.

/// Implements serde's seven compound-serializer traits for a `Compound` type by
/// forwarding to its inherent methods:
///
/// - `element(&mut self, value)`: an element of a sequence, tuple or tuple struct/variant;
/// - `key(&mut self, key)` then `value(&mut self, value)`: a map entry;
/// - `field(&mut self, name, value)`: a field of a struct or struct variant;
/// - `end_sequence(self)` and `end_object(self)`: closing a sequence-like or an
///   object-like compound.
///
/// Each returns `Result<(), $error>`. Use: `compound_traits!([W: Write] Compound<'_, W>,
/// Error);` (the generics of the impl in brackets, possibly empty).
macro_rules! compound_traits {
    ([$($generics:tt)*] $compound:ty, $error:ty) => {
        impl<$($generics)*> serde::ser::SerializeSeq for $compound {
            type Ok = ();
            type Error = $error;
            fn serialize_element<T: serde::Serialize + ?Sized>(
                &mut self,
                value: &T,
            ) -> Result<(), $error> {
                self.element(value)
            }
            fn end(self) -> Result<(), $error> {
                self.end_sequence()
            }
        }

        impl<$($generics)*> serde::ser::SerializeTuple for $compound {
            type Ok = ();
            type Error = $error;
            fn serialize_element<T: serde::Serialize + ?Sized>(
                &mut self,
                value: &T,
            ) -> Result<(), $error> {
                self.element(value)
            }
            fn end(self) -> Result<(), $error> {
                self.end_sequence()
            }
        }

        impl<$($generics)*> serde::ser::SerializeTupleStruct for $compound {
            type Ok = ();
            type Error = $error;
            fn serialize_field<T: serde::Serialize + ?Sized>(
                &mut self,
                value: &T,
            ) -> Result<(), $error> {
                self.element(value)
            }
            fn end(self) -> Result<(), $error> {
                self.end_sequence()
            }
        }

        impl<$($generics)*> serde::ser::SerializeTupleVariant for $compound {
            type Ok = ();
            type Error = $error;
            fn serialize_field<T: serde::Serialize + ?Sized>(
                &mut self,
                value: &T,
            ) -> Result<(), $error> {
                self.element(value)
            }
            fn end(self) -> Result<(), $error> {
                self.end_sequence()
            }
        }

        impl<$($generics)*> serde::ser::SerializeMap for $compound {
            type Ok = ();
            type Error = $error;
            fn serialize_key<T: serde::Serialize + ?Sized>(
                &mut self,
                key: &T,
            ) -> Result<(), $error> {
                self.key(key)
            }
            fn serialize_value<T: serde::Serialize + ?Sized>(
                &mut self,
                value: &T,
            ) -> Result<(), $error> {
                self.value(value)
            }
            fn end(self) -> Result<(), $error> {
                self.end_object()
            }
        }

        impl<$($generics)*> serde::ser::SerializeStruct for $compound {
            type Ok = ();
            type Error = $error;
            fn serialize_field<T: serde::Serialize + ?Sized>(
                &mut self,
                name: &'static str,
                value: &T,
            ) -> Result<(), $error> {
                self.field(name, value)
            }
            fn end(self) -> Result<(), $error> {
                self.end_object()
            }
        }

        impl<$($generics)*> serde::ser::SerializeStructVariant for $compound {
            type Ok = ();
            type Error = $error;
            fn serialize_field<T: serde::Serialize + ?Sized>(
                &mut self,
                name: &'static str,
                value: &T,
            ) -> Result<(), $error> {
                self.field(name, value)
            }
            fn end(self) -> Result<(), $error> {
                self.end_object()
            }
        }
    };
}

pub(crate) use compound_traits;
