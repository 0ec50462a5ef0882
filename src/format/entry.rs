//! FragmentEntry: the positional CBOR array of DreamDB 0022 §3.3.

use ciborium::value::Value;

use super::cbor::{self, as_bool, as_i64, as_object_id, as_u64};
use super::{FormatError, ObjectId};

/// Where an item's bytes are, relative to the object its entry addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// 4 elements: the item is the whole object.
    Whole,
    /// 5 elements with `is_manifest = true`: the object is an ItemManifest
    /// listing the chunk objects of the item (DreamDB 0014).
    Chunked,
    /// 6 elements with `is_manifest = false`: the item is
    /// `[offset, offset + byte_size)` of a pack (DreamDB 0022).
    Packed { offset: u64 },
}

/// One item in a Track's `object_index`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FragmentEntry {
    pub t_start: i64,
    pub t_end: i64,
    /// Size of this item (not of the pack that holds it).
    pub byte_size: u64,
    /// Content address of the whole object, the pack or the ItemManifest.
    pub address: ObjectId,
    pub placement: Placement,
}

impl FragmentEntry {
    /// Encodes as the positional array whose length selects the shape.
    pub fn to_cbor(&self) -> Value {
        let mut items = vec![
            cbor::int(self.t_start),
            cbor::int(self.t_end),
            cbor::uint(self.byte_size),
            cbor::id(&self.address),
        ];
        match self.placement {
            Placement::Whole => {}
            Placement::Chunked => items.push(Value::Bool(true)),
            Placement::Packed { offset } => {
                items.push(Value::Bool(false));
                items.push(cbor::uint(offset));
            }
        }
        Value::Array(items)
    }

    /// Decodes one entry; `what` locates it for error messages. Messages are
    /// only formatted on error: a Track decodes a million of these.
    pub fn from_cbor(value: &Value, what: &str) -> Result<Self, FormatError> {
        let items = cbor::as_array(value, what)?;
        let at = |e: FormatError, i: usize, name: &str| match e {
            FormatError::Shape { detail, .. } => {
                FormatError::shape(format!("{what} element {i} ({name})"), detail)
            }
            e => e,
        };
        let placement = match items.len() {
            4 => Placement::Whole,
            // Seed §5: is_manifest=false without a pack_offset is a
            // single-item fragment, like the 4-element shape.
            5 if as_bool(&items[4], "").map_err(|e| at(e, 4, "is_manifest"))? => Placement::Chunked,
            5 => Placement::Whole,
            6 => {
                if as_bool(&items[4], "").map_err(|e| at(e, 4, "is_manifest"))? {
                    return Err(FormatError::shape(
                        what,
                        "is_manifest=true with 6 elements: chunked and packed are mutually exclusive",
                    ));
                }
                let offset = as_u64(&items[5], "").map_err(|e| at(e, 5, "pack_offset"))?;
                if offset > u64::from(u32::MAX) {
                    return Err(FormatError::shape(
                        what,
                        format!("pack_offset {offset} exceeds u32::MAX"),
                    ));
                }
                Placement::Packed { offset }
            }
            n => {
                return Err(FormatError::shape(
                    what,
                    format!("unknown FragmentEntry shape: {n} elements (expected 4, 5 or 6)"),
                ))
            }
        };
        let entry = FragmentEntry {
            t_start: as_i64(&items[0], "").map_err(|e| at(e, 0, "t_start"))?,
            t_end: as_i64(&items[1], "").map_err(|e| at(e, 1, "t_end"))?,
            byte_size: as_u64(&items[2], "").map_err(|e| at(e, 2, "byte_size"))?,
            address: as_object_id(&items[3], "").map_err(|e| at(e, 3, "fragment_address"))?,
            placement,
        };
        if let Placement::Packed { offset } = placement {
            if offset.checked_add(entry.byte_size).is_none() {
                return Err(FormatError::shape(
                    what,
                    "pack_offset + byte_size overflows",
                ));
            }
        }
        Ok(entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(placement: Placement) -> FragmentEntry {
        FragmentEntry {
            t_start: 3,
            t_end: 4,
            byte_size: 1234,
            address: ObjectId::of(b"pack"),
            placement,
        }
    }

    fn bytes_of(value: &Value) -> Vec<u8> {
        cbor::encode(value)
    }

    fn decode(bytes: &[u8]) -> Result<FragmentEntry, FormatError> {
        FragmentEntry::from_cbor(&cbor::decode(bytes, "entry")?, "entry")
    }

    #[test]
    fn all_three_shapes_round_trip_with_their_element_counts() {
        for (placement, len) in [
            (Placement::Whole, 4),
            (Placement::Chunked, 5),
            (Placement::Packed { offset: 77 }, 6),
        ] {
            let e = entry(placement);
            let value = e.to_cbor();
            assert_eq!(value.as_array().unwrap().len(), len);
            assert_eq!(decode(&bytes_of(&value)).unwrap(), e);
        }
    }

    #[test]
    fn packed_entry_encoding_is_the_positional_array_of_the_seed() {
        // [3, 4, 1234, h'..32 bytes..', false, 77]
        let bytes = bytes_of(&entry(Placement::Packed { offset: 77 }).to_cbor());
        assert_eq!(bytes[0], 0x86, "array of 6");
        assert_eq!(&bytes[1..4], &[0x03, 0x04, 0x19]);
        assert_eq!(&bytes[bytes.len() - 3..], &[0xf4, 0x18, 77]); // false, uint8 77
    }

    #[test]
    fn text_hex_addresses_from_other_writers_decode() {
        let id = ObjectId::of(b"x");
        let value = Value::Array(vec![
            cbor::int(0),
            cbor::int(1),
            cbor::uint(5),
            cbor::text(&id.to_hex()),
        ]);
        assert_eq!(decode(&bytes_of(&value)).unwrap().address, id);
    }

    fn with_tail(tail: Vec<Value>) -> Vec<u8> {
        let mut items = vec![
            cbor::int(0),
            cbor::int(1),
            cbor::uint(5),
            cbor::id(&ObjectId::of(b"x")),
        ];
        items.extend(tail);
        bytes_of(&Value::Array(items))
    }

    fn err(bytes: &[u8]) -> String {
        decode(bytes).unwrap_err().to_string()
    }

    #[test]
    fn five_elements_with_is_manifest_false_is_a_single_item_fragment() {
        let e = decode(&with_tail(vec![Value::Bool(false)])).unwrap();
        assert_eq!(e.placement, Placement::Whole);
    }

    #[test]
    fn rejects_pack_offset_beyond_u32() {
        let e = err(&with_tail(vec![Value::Bool(false), cbor::uint(1 << 32)]));
        assert!(e.contains("exceeds u32::MAX"), "{e}");
    }

    #[test]
    fn rejects_is_manifest_true_with_six_elements() {
        let e = err(&with_tail(vec![Value::Bool(true), cbor::uint(0)]));
        assert!(e.contains("is_manifest=true with 6 elements"), "{e}");
    }

    #[test]
    fn rejects_unknown_shapes() {
        let e = err(&bytes_of(&Value::Array(vec![
            cbor::int(0),
            cbor::int(1),
            cbor::uint(5),
        ])));
        assert!(e.contains("unknown FragmentEntry shape: 3 elements"), "{e}");
        let e = err(&with_tail(vec![
            Value::Bool(false),
            cbor::uint(0),
            cbor::uint(0),
        ]));
        assert!(e.contains("7 elements"), "{e}");
        let e = err(&with_tail(vec![cbor::uint(1)]));
        assert!(e.contains("element 4 (is_manifest)"), "{e}");
        let e = err(&bytes_of(&cbor::text("nope")));
        assert!(e.contains("expected an array"), "{e}");
    }

    #[test]
    fn rejects_bad_field_types_naming_the_element() {
        let mut items = vec![
            cbor::int(0),
            cbor::int(1),
            cbor::text("5"),
            cbor::id(&ObjectId::of(b"x")),
        ];
        let e = err(&bytes_of(&Value::Array(items.clone())));
        assert!(e.contains("element 2 (byte_size)"), "{e}");
        items[2] = cbor::uint(5);
        items[3] = Value::Bytes(vec![1, 2, 3]);
        let e = err(&bytes_of(&Value::Array(items)));
        assert!(e.contains("address is 3 bytes"), "{e}");
    }

    #[test]
    fn rejects_malformed_cbor() {
        let e = err(&[0x86, 0x01]);
        assert!(e.contains("malformed CBOR"), "{e}");
        let mut ok = with_tail(vec![]);
        ok.push(0x00);
        assert!(err(&ok).contains("trailing bytes"));
    }
}
