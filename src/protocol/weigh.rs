//! About how many bytes a wire value takes as JSON, found without encoding it: the queues of
//! lines waiting for a client are bounded by bytes, and a line is weighed as it is queued
//! (maybe while the agent holds its state lock) and may be replaced by a newer snapshot before
//! it is ever written, so weighing costs a walk over the value's fields, never a pass over its
//! text.
//!
//! Hand-written: the serializers that count (bincode's) count their own binary format, not
//! JSON's. This one is a counting [`Serializer`] that adds string lengths (unescaped) and a
//! little for each scalar and punctuation, which is close for the text-heavy lines nova writes.

use serde::Serialize;
use serde::ser::{self, Serializer};
use std::fmt;

/// About how long `value` is as JSON (an underestimate only by its escapes).
pub fn json_len(value: &impl Serialize) -> usize {
    let mut count = Count(0);
    // Counting cannot fail; an error would come from a Serialize impl refusing the value, and
    // then what was counted so far is still the best guess.
    let _ = value.serialize(&mut count);
    count.0
}

/// Bytes counted so far.
struct Count(usize);

impl Count {
    fn add(&mut self, n: usize) -> Result<(), fmt::Error> {
        self.0 = self.0.saturating_add(n);
        Ok(())
    }
}

/// A number or literal's length, near enough without formatting it.
const SCALAR: usize = 8;

impl fmt::Write for Count {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.add(s.len())
    }
}

impl Serializer for &mut Count {
    type Ok = ();
    type Error = fmt::Error;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = Self;
    type SerializeMap = Self;
    type SerializeStruct = Self;
    type SerializeStructVariant = Self;

    fn serialize_bool(self, _: bool) -> Result<(), fmt::Error> {
        self.add(5)
    }
    fn serialize_i8(self, _: i8) -> Result<(), fmt::Error> {
        self.add(SCALAR)
    }
    fn serialize_i16(self, _: i16) -> Result<(), fmt::Error> {
        self.add(SCALAR)
    }
    fn serialize_i32(self, _: i32) -> Result<(), fmt::Error> {
        self.add(SCALAR)
    }
    fn serialize_i64(self, _: i64) -> Result<(), fmt::Error> {
        self.add(SCALAR)
    }
    fn serialize_u8(self, _: u8) -> Result<(), fmt::Error> {
        self.add(SCALAR)
    }
    fn serialize_u16(self, _: u16) -> Result<(), fmt::Error> {
        self.add(SCALAR)
    }
    fn serialize_u32(self, _: u32) -> Result<(), fmt::Error> {
        self.add(SCALAR)
    }
    fn serialize_u64(self, _: u64) -> Result<(), fmt::Error> {
        self.add(SCALAR)
    }
    fn serialize_f32(self, _: f32) -> Result<(), fmt::Error> {
        self.add(SCALAR)
    }
    fn serialize_f64(self, _: f64) -> Result<(), fmt::Error> {
        self.add(SCALAR)
    }
    fn serialize_char(self, _: char) -> Result<(), fmt::Error> {
        self.add(6)
    }
    fn serialize_str(self, v: &str) -> Result<(), fmt::Error> {
        self.add(v.len() + 2)
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), fmt::Error> {
        // An array of numbers, as serde_json writes bytes.
        self.add(v.len() * 4 + 2)
    }
    fn serialize_none(self) -> Result<(), fmt::Error> {
        self.add(4)
    }
    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result<(), fmt::Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), fmt::Error> {
        self.add(4)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), fmt::Error> {
        self.add(4)
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), fmt::Error> {
        self.add(variant.len() + 2)
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), fmt::Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), fmt::Error> {
        self.add(variant.len() + 5)?;
        value.serialize(self)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self, fmt::Error> {
        self.add(2)?;
        Ok(self)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self, fmt::Error> {
        self.add(2)?;
        Ok(self)
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self, fmt::Error> {
        self.add(2)?;
        Ok(self)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Self, fmt::Error> {
        self.add(variant.len() + 7)?;
        Ok(self)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self, fmt::Error> {
        self.add(2)?;
        Ok(self)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, fmt::Error> {
        self.add(2)?;
        Ok(self)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Self, fmt::Error> {
        self.add(variant.len() + 7)?;
        Ok(self)
    }
    fn collect_str<T: ?Sized + fmt::Display>(self, value: &T) -> Result<(), fmt::Error> {
        // Counted as it is formatted, never collected into a string.
        fmt::Write::write_fmt(self, format_args!("{value}"))?;
        self.add(2)
    }
}

impl ser::SerializeSeq for &mut Count {
    type Ok = ();
    type Error = fmt::Error;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), fmt::Error> {
        self.add(1)?;
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<(), fmt::Error> {
        Ok(())
    }
}

impl ser::SerializeTuple for &mut Count {
    type Ok = ();
    type Error = fmt::Error;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), fmt::Error> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<(), fmt::Error> {
        Ok(())
    }
}

impl ser::SerializeTupleStruct for &mut Count {
    type Ok = ();
    type Error = fmt::Error;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), fmt::Error> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<(), fmt::Error> {
        Ok(())
    }
}

impl ser::SerializeTupleVariant for &mut Count {
    type Ok = ();
    type Error = fmt::Error;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), fmt::Error> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<(), fmt::Error> {
        Ok(())
    }
}

impl ser::SerializeMap for &mut Count {
    type Ok = ();
    type Error = fmt::Error;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Result<(), fmt::Error> {
        self.add(1)?;
        key.serialize(&mut **self)
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), fmt::Error> {
        self.add(1)?;
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<(), fmt::Error> {
        Ok(())
    }
}

impl ser::SerializeStruct for &mut Count {
    type Ok = ();
    type Error = fmt::Error;
    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), fmt::Error> {
        self.add(key.len() + 4)?;
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<(), fmt::Error> {
        Ok(())
    }
}

impl ser::SerializeStructVariant for &mut Count {
    type Ok = ();
    type Error = fmt::Error;
    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), fmt::Error> {
        ser::SerializeStruct::serialize_field(self, key, value)
    }
    fn end(self) -> Result<(), fmt::Error> {
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::protocol::Event;
    use std::sync::Arc;

    /// The estimate is within a few percent of the real length for text-heavy lines and never
    /// far off for small ones.
    #[test]
    fn close_to_the_encoded_length() {
        let texts: Vec<Arc<str>> = (0..100).map(|i| "q".repeat(1000 + i).into()).collect();
        let events = [
            Event::QueueUpdate {
                steering: Vec::new(),
                follow_up: texts,
                pending_message_count: 100,
            },
            Event::TurnStart,
            Event::SessionError {
                error: "disk full".into(),
            },
            Event::EntryAppended {
                entry: serde_json::json!({"type": "x", "n": [1, 2.5, null, true], "s": "ü"}),
            },
        ];
        for event in events {
            let real = serde_json::to_vec(&event).unwrap().len();
            let guess = json_len(&event);
            assert!(
                guess * 10 >= real * 8 && guess * 10 <= real * 12 + 200,
                "{guess} for {real}: {event:?}"
            );
        }
    }
}
