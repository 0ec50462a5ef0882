//! ItemManifest: the chunk list of an item too large for one object
//! (the object a 5-element, `is_manifest = true` entry addresses).
//!
//! CBOR: `{"v": 1, "chunks": [[address, size], ...]}`; the item is the
//! concatenation of its chunks in order.

use ciborium::value::Value;

use super::cbor::{self, as_array, as_object_id, as_u64, MapReader};
use super::{FormatError, ObjectId};

const VERSION: u64 = 1;

/// One chunk object of a chunked item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub address: ObjectId,
    pub size: u64,
}

/// The ordered chunk objects of one item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ItemManifest {
    pub chunks: Vec<Chunk>,
}

impl ItemManifest {
    /// Sum of the chunk sizes: the item's size.
    pub fn total_size(&self) -> u64 {
        self.chunks.iter().map(|c| c.size).sum()
    }

    pub fn encode(&self) -> Vec<u8> {
        let chunks = self
            .chunks
            .iter()
            .map(|c| Value::Array(vec![cbor::id(&c.address), cbor::uint(c.size)]))
            .collect();
        cbor::encode(&Value::Map(vec![
            (cbor::text("v"), cbor::uint(VERSION)),
            (cbor::text("chunks"), Value::Array(chunks)),
        ]))
    }

    /// Decodes an ItemManifest; `what` names the object for errors.
    pub fn decode(bytes: &[u8], what: &str) -> Result<Self, FormatError> {
        let value = cbor::decode(bytes, what)?;
        let map = MapReader::versioned(&value, what, VERSION)?;
        let mut total: u64 = 0;
        let chunks = as_array(map.required("chunks")?, &format!("{what} chunks"))?
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let at = format!("{what} chunks[{i}]");
                match as_array(c, &at)? {
                    [address, size] => {
                        let chunk = Chunk {
                            address: as_object_id(address, &at)?,
                            size: as_u64(size, &at)?,
                        };
                        total = total
                            .checked_add(chunk.size)
                            .ok_or_else(|| FormatError::shape(&at, "total size overflows"))?;
                        Ok(chunk)
                    }
                    other => Err(FormatError::shape(
                        &at,
                        format!("expected [address, size], found {} elements", other.len()),
                    )),
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(ItemManifest { chunks })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_shape_errors() {
        let m = ItemManifest {
            chunks: vec![
                Chunk {
                    address: ObjectId::of(b"a"),
                    size: 10,
                },
                Chunk {
                    address: ObjectId::of(b"b"),
                    size: 3,
                },
            ],
        };
        let back = ItemManifest::decode(&m.encode(), "im").unwrap();
        assert_eq!(back, m);
        assert_eq!(back.total_size(), 13);
        let bad = cbor::encode(&Value::Map(vec![
            (cbor::text("v"), cbor::uint(1)),
            (
                cbor::text("chunks"),
                Value::Array(vec![Value::Array(vec![cbor::uint(1)])]),
            ),
        ]));
        let e = ItemManifest::decode(&bad, "im X").unwrap_err().to_string();
        assert!(
            e.contains("im X chunks[0]") && e.contains("1 elements"),
            "{e}"
        );
    }
}
