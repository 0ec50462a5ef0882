//! FragmentEntry: the positional CBOR array of DreamDB 0022 §3.3.

use ciborium::value::Value;

use super::cbor::{self, Stream, StreamError};
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

    /// Reads one entry from `s`; `what` locates it for error messages,
    /// which are only formatted on error: a Track holds millions of these.
    pub(crate) fn read(s: &mut Stream, what: &dyn Fn() -> String) -> Result<Self, FormatError> {
        if let Some(entry) = s.fast(Self::read_common) {
            return Ok(entry);
        }
        let shape = |detail: String| FormatError::shape(what(), detail);
        let at =
            |e: StreamError, i: usize, name: &str| e.at(&what(), &format!("element {i} ({name})"));
        let unknown = |n: u64| {
            shape(format!(
                "unknown FragmentEntry shape: {n} elements (expected 4, 5 or 6)"
            ))
        };
        let declared = s.array().map_err(|e| e.at(&what(), ""))?;
        if let Some(n) = declared.filter(|n| !(4..=6).contains(n)) {
            return Err(unknown(n));
        }
        // Whether element `i` exists (an indefinite array says so as it goes).
        let more = |s: &mut Stream, i: u64| -> Result<bool, FormatError> {
            match declared {
                Some(n) => Ok(i < n),
                None => Ok(!s.at_end().map_err(|e| e.at(&what(), ""))?),
            }
        };
        let mut times = [0i64; 2];
        for (i, t) in times.iter_mut().enumerate() {
            if !more(s, i as u64)? {
                return Err(unknown(i as u64));
            }
            *t = s.i64().map_err(|e| at(e, i, ["t_start", "t_end"][i]))?;
        }
        if !more(s, 2)? {
            return Err(unknown(2));
        }
        let byte_size = s.u64().map_err(|e| at(e, 2, "byte_size"))?;
        if !more(s, 3)? {
            return Err(unknown(3));
        }
        let address = s.object_id().map_err(|e| at(e, 3, "fragment_address"))?;
        let mut placement = Placement::Whole;
        if more(s, 4)? {
            let is_manifest = s.bool().map_err(|e| at(e, 4, "is_manifest"))?;
            if more(s, 5)? {
                if is_manifest {
                    return Err(shape(
                        "is_manifest=true with 6 elements: chunked and packed are mutually exclusive"
                            .into(),
                    ));
                }
                let offset = s.u64().map_err(|e| at(e, 5, "pack_offset"))?;
                if offset > u64::from(u32::MAX) {
                    return Err(shape(format!("pack_offset {offset} exceeds u32::MAX")));
                }
                if offset.checked_add(byte_size).is_none() {
                    return Err(shape("pack_offset + byte_size overflows".into()));
                }
                placement = Placement::Packed { offset };
                if more(s, 6)? {
                    // Only an indefinite array gets here: count the rest.
                    let mut n = 7;
                    s.skip().map_err(|e| e.at(&what(), ""))?;
                    while more(s, n)? {
                        s.skip().map_err(|e| e.at(&what(), ""))?;
                        n += 1;
                    }
                    return Err(unknown(n));
                }
            } else if is_manifest {
                // is_manifest=false without a pack_offset is a
                // single-item fragment (`docs/FORMAT.md`), like the 4-element shape.
                placement = Placement::Chunked;
            }
        }
        Ok(FragmentEntry {
            t_start: times[0],
            t_end: times[1],
            byte_size,
            address,
            placement,
        })
    }

    /// The entries packfs writes (a definite array of 4 to 6 elements, the
    /// address as 32 bytes), read without a type check per element: a
    /// Track holds millions, and a mount decodes pages of them as it is
    /// asked. `None` for any other shape or a value [`FragmentEntry::read`]
    /// refuses, which then reads it and says why.
    fn read_common(d: &mut minicbor::Decoder<'_>) -> Option<FragmentEntry> {
        let n = d.array().ok()??;
        if !(4..=6).contains(&n) {
            return None;
        }
        let (t_start, t_end) = (d.i64().ok()?, d.i64().ok()?);
        let byte_size = d.u64().ok()?;
        let address = ObjectId(<[u8; 32]>::try_from(d.bytes().ok()?).ok()?);
        let placement = match (n, if n > 4 { d.bool().ok()? } else { false }) {
            (4, _) | (5, false) => Placement::Whole,
            (5, true) => Placement::Chunked,
            (_, true) => return None,
            (_, false) => {
                let offset = d.u64().ok()?;
                if offset > u64::from(u32::MAX) || offset.checked_add(byte_size).is_none() {
                    return None;
                }
                Placement::Packed { offset }
            }
        };
        Some(FragmentEntry {
            t_start,
            t_end,
            byte_size,
            address,
            placement,
        })
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
        let mut s = Stream::new(bytes);
        let entry = FragmentEntry::read(&mut s, &|| "entry".to_string())?;
        s.finish().map_err(|e| e.at("entry", ""))?;
        Ok(entry)
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
