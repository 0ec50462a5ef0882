use thiserror::Error;

/// Why bytes could not be decoded into, or a value could not be encoded as,
/// one of the on-store objects.
///
/// `what` names the object kind being decoded and, where known, the position
/// inside it (for example `track object_index[17]`), so a message points at
/// the exact offending element.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FormatError {
    /// The bytes are not well-formed CBOR.
    #[error("{what}: malformed CBOR: {detail}")]
    Cbor { what: String, detail: String },
    /// The CBOR is well formed but does not have the expected structure.
    #[error("{what}: {detail}")]
    Shape { what: String, detail: String },
    /// A name is not allowed as an item, timeline, modality or ref name.
    #[error("invalid name {name:?} in {what}: {reason}")]
    Name {
        what: String,
        name: String,
        reason: &'static str,
    },
    /// Packed entries that share one pack violate the pack invariants
    /// (disjoint, tiling the pack from offset 0; `docs/FORMAT.md`).
    #[error("{what}: pack {pack}: {detail}")]
    Pack {
        what: String,
        pack: String,
        detail: String,
    },
}

impl FormatError {
    pub fn shape(what: impl Into<String>, detail: impl Into<String>) -> Self {
        FormatError::Shape {
            what: what.into(),
            detail: detail.into(),
        }
    }
}
