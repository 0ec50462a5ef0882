//! Small helpers over `ciborium::Value` so each codec reads as a list of
//! fields rather than a thicket of matches.

use ciborium::value::{Integer, Value};
use serde::de::DeserializeOwned;

use super::{FormatError, ObjectId};

/// Decodes exactly one CBOR data item into a value tree; trailing bytes are
/// an error because a content-addressed object must have one meaning.
pub(crate) fn decode(bytes: &[u8], what: &str) -> Result<Value, FormatError> {
    decode_with(bytes, what, |e| FormatError::Cbor {
        what: what.to_string(),
        detail: describe(&e, bytes.len()),
    })
}

/// Like [`decode`], straight into a type whose `Deserialize` checks the
/// structure as it streams: errors it reports are [`FormatError::Shape`].
pub(crate) fn decode_typed<T: DeserializeOwned>(
    bytes: &[u8],
    what: &str,
) -> Result<T, FormatError> {
    decode_with(bytes, what, |e| match e {
        ciborium::de::Error::Semantic(_, detail) => FormatError::shape(what, detail),
        e => FormatError::Cbor {
            what: what.to_string(),
            detail: describe(&e, bytes.len()),
        },
    })
}

fn decode_with<T: DeserializeOwned>(
    bytes: &[u8],
    what: &str,
    error: impl FnOnce(ciborium::de::Error<std::io::Error>) -> FormatError,
) -> Result<T, FormatError> {
    let mut cursor = std::io::Cursor::new(bytes);
    let value: T = ciborium::from_reader(&mut cursor).map_err(error)?;
    let used = cursor.position() as usize;
    if used != bytes.len() {
        return Err(FormatError::Cbor {
            what: what.to_string(),
            detail: format!("{} trailing bytes after the CBOR item", bytes.len() - used),
        });
    }
    Ok(value)
}

fn describe(e: &ciborium::de::Error<std::io::Error>, len: usize) -> String {
    use ciborium::de::Error;
    match e {
        Error::Io(_) => format!("truncated: the {len} bytes end inside a CBOR item"),
        Error::Syntax(at) => format!("invalid CBOR at byte {at}"),
        Error::Semantic(_, msg) => msg.clone(),
        Error::RecursionLimitExceeded => "nested too deeply".to_string(),
    }
}

pub(crate) fn encode(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    ciborium::into_writer(value, &mut out).expect("writing CBOR into a Vec cannot fail");
    out
}

pub(crate) fn text(s: &str) -> Value {
    Value::Text(s.to_string())
}

pub(crate) fn uint(n: u64) -> Value {
    Value::Integer(Integer::from(n))
}

pub(crate) fn int(n: i64) -> Value {
    Value::Integer(Integer::from(n))
}

pub(crate) fn id(id: &ObjectId) -> Value {
    Value::Bytes(id.0.to_vec())
}

/// A CBOR map being decoded, with the object kind for error messages.
pub(crate) struct MapReader<'a> {
    what: &'a str,
    entries: &'a [(Value, Value)],
}

impl<'a> MapReader<'a> {
    pub(crate) fn new(value: &'a Value, what: &'a str) -> Result<Self, FormatError> {
        match value {
            Value::Map(entries) => Ok(MapReader { what, entries }),
            other => Err(FormatError::shape(
                what,
                format!("expected a CBOR map, found {}", kind(other)),
            )),
        }
    }

    pub(crate) fn get(&self, key: &str) -> Option<&'a Value> {
        self.entries
            .iter()
            .find(|(k, _)| matches!(k, Value::Text(t) if t == key))
            .map(|(_, v)| v)
    }

    /// Decodes `bytes` as a map whose `"v"` field must be `version`.
    pub(crate) fn versioned(
        value: &'a Value,
        what: &'a str,
        version: u64,
    ) -> Result<Self, FormatError> {
        let map = MapReader::new(value, what)?;
        let found = as_u64(map.required("v")?, &format!("{what} v"))?;
        if found != version {
            return Err(FormatError::shape(
                what,
                format!("unsupported version {found} (expected {version})"),
            ));
        }
        Ok(map)
    }

    pub(crate) fn required(&self, key: &str) -> Result<&'a Value, FormatError> {
        self.get(key)
            .ok_or_else(|| FormatError::shape(self.what, format!("missing field {key:?}")))
    }
}

pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Integer(_) => "an integer",
        Value::Bytes(_) => "a byte string",
        Value::Float(_) => "a float",
        Value::Text(_) => "a text string",
        Value::Bool(_) => "a bool",
        Value::Null => "null",
        Value::Tag(..) => "a tagged value",
        Value::Array(_) => "an array",
        Value::Map(_) => "a map",
        _ => "an unsupported CBOR value",
    }
}

fn wrong(what: &str, expected: &str, found: &Value) -> FormatError {
    FormatError::shape(what, format!("expected {expected}, found {}", kind(found)))
}

pub(crate) fn as_u64(value: &Value, what: &str) -> Result<u64, FormatError> {
    match value {
        Value::Integer(i) => u64::try_from(i128::from(*i)).map_err(|_| {
            FormatError::shape(
                what,
                format!("{} is not an unsigned 64-bit integer", i128::from(*i)),
            )
        }),
        other => Err(wrong(what, "an unsigned integer", other)),
    }
}

pub(crate) fn as_i64(value: &Value, what: &str) -> Result<i64, FormatError> {
    match value {
        Value::Integer(i) => i64::try_from(i128::from(*i)).map_err(|_| {
            FormatError::shape(
                what,
                format!("{} does not fit a signed 64-bit integer", i128::from(*i)),
            )
        }),
        other => Err(wrong(what, "an integer", other)),
    }
}

pub(crate) fn as_text<'a>(value: &'a Value, what: &str) -> Result<&'a str, FormatError> {
    match value {
        Value::Text(t) => Ok(t),
        other => Err(wrong(what, "a text string", other)),
    }
}

pub(crate) fn as_array<'a>(value: &'a Value, what: &str) -> Result<&'a [Value], FormatError> {
    match value {
        Value::Array(items) => Ok(items),
        other => Err(wrong(what, "an array", other)),
    }
}

pub(crate) fn as_bool(value: &Value, what: &str) -> Result<bool, FormatError> {
    match value {
        Value::Bool(b) => Ok(*b),
        other => Err(wrong(what, "a bool", other)),
    }
}

/// An object address: a 32-byte CBOR byte string (what packfs writes) or,
/// for interoperability with writers that store addresses as text, 64 hex
/// digits.
pub(crate) fn as_object_id(value: &Value, what: &str) -> Result<ObjectId, FormatError> {
    match value {
        Value::Bytes(b) => <[u8; 32]>::try_from(b.as_slice())
            .map(ObjectId)
            .map_err(|_| {
                FormatError::shape(what, format!("address is {} bytes, expected 32", b.len()))
            }),
        Value::Text(t) => ObjectId::from_hex(t)
            .map_err(|_| FormatError::shape(what, format!("address {t:?} is not 64 hex digits"))),
        other => Err(wrong(what, "an address (32-byte byte string)", other)),
    }
}
