//! Small helpers over `ciborium::Value` so each codec reads as a list of
//! fields rather than a thicket of matches, and [`Stream`], which reads
//! one item token by token for objects too big to hold as `Value`s.

use ciborium::value::{Integer, Value};

use super::{FormatError, ObjectId};

/// Decodes exactly one CBOR data item into a value tree; trailing bytes are
/// an error because a content-addressed object must have one meaning.
pub(crate) fn decode(bytes: &[u8], what: &str) -> Result<Value, FormatError> {
    let mut cursor = std::io::Cursor::new(bytes);
    let value: Value = ciborium::from_reader(&mut cursor).map_err(|e| FormatError::Cbor {
        what: what.to_string(),
        detail: describe(&e, bytes.len()),
    })?;
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
            FormatError::shape(what, format!("{} is not a 64-bit integer", i128::from(*i)))
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

/// Reads one CBOR data item token by token, borrowing text from the input:
/// for objects too large to build as a tree of [`Value`]s (a Track of
/// millions of entries). Errors are the `detail` of a
/// [`FormatError::Shape`] or [`FormatError::Cbor`]; the caller says where.
pub(crate) struct Stream<'b> {
    d: minicbor::Decoder<'b>,
}

/// What went wrong reading a [`Stream`]: the input is not CBOR (or ends
/// early), or it is CBOR of the wrong type.
pub(crate) enum StreamError {
    Syntax(String),
    Shape(String),
}

impl StreamError {
    /// The error as the format error of object `what` at `at` (a position
    /// such as `object_index[3]`, or empty).
    pub(crate) fn at(self, what: &str, at: &str) -> FormatError {
        let what = if at.is_empty() {
            what.to_string()
        } else if what.is_empty() {
            at.to_string()
        } else {
            format!("{what} {at}")
        };
        match self {
            StreamError::Syntax(detail) => FormatError::Cbor { what, detail },
            StreamError::Shape(detail) => FormatError::Shape { what, detail },
        }
    }
}

impl<'b> Stream<'b> {
    pub(crate) fn new(bytes: &'b [u8]) -> Self {
        Stream {
            d: minicbor::Decoder::new(bytes),
        }
    }

    /// The type of the next item, or a syntax error at the end of input.
    fn next_type(&self) -> Result<minicbor::data::Type, StreamError> {
        self.d.datatype().map_err(|e| self.syntax(&e))
    }

    fn syntax(&self, e: &minicbor::decode::Error) -> StreamError {
        let len = self.d.input().len();
        StreamError::Syntax(if e.is_end_of_input() {
            format!("truncated: the {len} bytes end inside a CBOR item")
        } else {
            format!(
                "invalid CBOR at byte {}",
                e.position().unwrap_or(self.d.position())
            )
        })
    }

    fn wrong(&self, expected: &str) -> StreamError {
        match self.next_type() {
            Ok(found) => {
                StreamError::Shape(format!("expected {expected}, found {}", type_name(found)))
            }
            Err(e) => e,
        }
    }

    /// Reads the next item with `read` if its type is one of `types`.
    fn typed<T>(
        &mut self,
        expected: &str,
        accepts: impl Fn(minicbor::data::Type) -> bool,
        read: impl FnOnce(&mut minicbor::Decoder<'b>) -> Result<T, minicbor::decode::Error>,
    ) -> Result<T, StreamError> {
        if !accepts(self.next_type()?) {
            return Err(self.wrong(expected));
        }
        read(&mut self.d).map_err(|e| self.syntax(&e))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, StreamError> {
        use minicbor::data::Type;
        if matches!(
            self.next_type()?,
            Type::I8 | Type::I16 | Type::I32 | Type::I64 | Type::Int
        ) {
            let n = i128::from(self.d.int().map_err(|e| self.syntax(&e))?);
            return Err(StreamError::Shape(format!(
                "{n} is not an unsigned 64-bit integer"
            )));
        }
        self.typed("an unsigned integer", is_unsigned, |d| d.u64())
    }

    pub(crate) fn i64(&mut self) -> Result<i64, StreamError> {
        use minicbor::data::Type;
        let ty = self.next_type()?;
        if !(is_unsigned(ty)
            || matches!(ty, Type::I8 | Type::I16 | Type::I32 | Type::I64 | Type::Int))
        {
            return Err(self.wrong("an integer"));
        }
        let n = i128::from(self.d.int().map_err(|e| self.syntax(&e))?);
        i64::try_from(n)
            .map_err(|_| StreamError::Shape(format!("{n} does not fit a signed 64-bit integer")))
    }

    pub(crate) fn bool(&mut self) -> Result<bool, StreamError> {
        self.typed("a bool", |t| t == minicbor::data::Type::Bool, |d| d.bool())
    }

    /// Text, borrowed unless it was sent in (indefinite-length) pieces.
    pub(crate) fn text(&mut self) -> Result<std::borrow::Cow<'b, str>, StreamError> {
        use minicbor::data::Type;
        match self.next_type()? {
            Type::String => Ok(self.d.str().map_err(|e| self.syntax(&e))?.into()),
            Type::StringIndef => {
                let mut s = String::new();
                let len = self.d.input().len();
                let pieces = self.d.str_iter().map_err(|e| {
                    StreamError::Syntax(format!("invalid text in {len} bytes: {e}"))
                })?;
                for piece in pieces {
                    s.push_str(piece.map_err(|e| StreamError::Syntax(e.to_string()))?);
                }
                Ok(s.into())
            }
            _ => Err(self.wrong("a text string")),
        }
    }

    /// An object address: 32 bytes, or (from other writers) 64 hex digits.
    pub(crate) fn object_id(&mut self) -> Result<ObjectId, StreamError> {
        use minicbor::data::Type;
        match self.next_type()? {
            Type::Bytes => {
                let b = self.d.bytes().map_err(|e| self.syntax(&e))?;
                <[u8; 32]>::try_from(b).map(ObjectId).map_err(|_| {
                    StreamError::Shape(format!("address is {} bytes, expected 32", b.len()))
                })
            }
            Type::String | Type::StringIndef => {
                let t = self.text()?;
                ObjectId::from_hex(&t)
                    .map_err(|_| StreamError::Shape(format!("address {t:?} is not 64 hex digits")))
            }
            _ => Err(self.wrong("an address (32-byte byte string)")),
        }
    }

    /// Whether the next item is text.
    pub(crate) fn next_is_text(&self) -> Result<bool, StreamError> {
        use minicbor::data::Type;
        Ok(matches!(
            self.next_type()?,
            Type::String | Type::StringIndef
        ))
    }

    /// Consumes a null and says so; anything else is left to be read.
    pub(crate) fn null(&mut self) -> Result<bool, StreamError> {
        let null = self.next_type()? == minicbor::data::Type::Null;
        if null {
            self.d.null().map_err(|e| self.syntax(&e))?;
        }
        Ok(null)
    }

    /// Starts an array: its length, or `None` when it is indefinite (then
    /// [`Stream::at_end`] says when it ends).
    pub(crate) fn array(&mut self) -> Result<Option<u64>, StreamError> {
        self.typed(
            "an array",
            |t| {
                matches!(
                    t,
                    minicbor::data::Type::Array | minicbor::data::Type::ArrayIndef
                )
            },
            |d| d.array(),
        )
    }

    /// Starts a map, like [`Stream::array`].
    pub(crate) fn map(&mut self) -> Result<Option<u64>, StreamError> {
        self.typed(
            "a map",
            |t| {
                matches!(
                    t,
                    minicbor::data::Type::Map | minicbor::data::Type::MapIndef
                )
            },
            |d| d.map(),
        )
    }

    /// Whether an indefinite array or map has ended (its break is consumed).
    pub(crate) fn at_end(&mut self) -> Result<bool, StreamError> {
        let end = self.next_type()? == minicbor::data::Type::Break;
        if end {
            self.d.set_position(self.d.position() + 1);
        }
        Ok(end)
    }

    /// Calls `element` for each element of the array that starts here.
    pub(crate) fn elements(
        &mut self,
        mut element: impl FnMut(&mut Self, usize) -> Result<(), FormatError>,
        what: &str,
        field: &str,
    ) -> Result<usize, FormatError> {
        let len = self.array().map_err(|e| e.at(what, field))?;
        let mut i = 0usize;
        loop {
            let more = match len {
                Some(len) => (i as u64) < len,
                None => !self.at_end().map_err(|e| e.at(what, field))?,
            };
            if !more {
                return Ok(i);
            }
            element(self, i)?;
            i += 1;
        }
    }

    /// Reads with `read` straight from the decoder, for a fast path over
    /// the common shape of a frequent item: when `read` gives up (`None`:
    /// another shape, or bad input), the stream is back where it was, for
    /// the checked path to read it and say what is wrong.
    pub(crate) fn fast<T>(
        &mut self,
        read: impl FnOnce(&mut minicbor::Decoder<'b>) -> Option<T>,
    ) -> Option<T> {
        let at = self.d.position();
        let read = read(&mut self.d);
        if read.is_none() {
            self.d.set_position(at);
        }
        read
    }

    /// Skips the next item, whatever it is.
    pub(crate) fn skip(&mut self) -> Result<(), StreamError> {
        self.d.skip().map_err(|e| self.syntax(&e))
    }

    /// Fails unless the whole input was one item: a content-addressed
    /// object must have exactly one meaning.
    pub(crate) fn finish(&self) -> Result<(), StreamError> {
        let rest = self.d.input().len() - self.d.position();
        if rest != 0 {
            return Err(StreamError::Syntax(format!(
                "{rest} trailing bytes after the CBOR item"
            )));
        }
        Ok(())
    }
}

fn is_unsigned(t: minicbor::data::Type) -> bool {
    use minicbor::data::Type;
    matches!(t, Type::U8 | Type::U16 | Type::U32 | Type::U64)
}

/// The CBOR type as [`kind`] names it for a [`Value`].
fn type_name(t: minicbor::data::Type) -> &'static str {
    use minicbor::data::Type;
    match t {
        Type::U8 | Type::U16 | Type::U32 | Type::U64 => "an integer",
        Type::I8 | Type::I16 | Type::I32 | Type::I64 | Type::Int => "an integer",
        Type::Bytes | Type::BytesIndef => "a byte string",
        Type::F16 | Type::F32 | Type::F64 => "a float",
        Type::String | Type::StringIndef => "a text string",
        Type::Bool => "a bool",
        Type::Null => "null",
        Type::Tag => "a tagged value",
        Type::Array | Type::ArrayIndef => "an array",
        Type::Map | Type::MapIndef => "a map",
        _ => "an unsupported CBOR value",
    }
}
