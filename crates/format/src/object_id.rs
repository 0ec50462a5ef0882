use std::fmt;

use super::FormatError;

/// The content address of an immutable object: the BLAKE3-256 digest of its
/// bytes. Rendered as 64 lower-case hex digits in object paths.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId(pub [u8; 32]);

impl ObjectId {
    /// The address of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        ObjectId(*blake3::hash(bytes).as_bytes())
    }

    /// Finishes an incremental hash into an address.
    pub fn from_hasher(hasher: &blake3::Hasher) -> Self {
        ObjectId(*hasher.finalize().as_bytes())
    }

    /// Lower-case hex, as used in object paths.
    pub fn to_hex(&self) -> String {
        blake3::Hash::from_bytes(self.0).to_hex().to_string()
    }

    /// Parses 64 hex digits.
    pub fn from_hex(s: &str) -> Result<Self, FormatError> {
        blake3::Hash::from_hex(s)
            .map(|h| ObjectId(*h.as_bytes()))
            .map_err(|_| FormatError::shape("object id", format!("{s:?} is not 64 hex digits")))
    }

    /// The first 12 hex digits, for human-facing listings.
    pub fn short(&self) -> String {
        self.to_hex()[..12].to_string()
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectId({})", self.short())
    }
}
