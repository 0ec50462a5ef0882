//! On-store formats: pure codecs and validation, no I/O.
//!
//! Every type here encodes to and decodes from bytes; nothing here touches a
//! store. A dataset's objects are CBOR, specified in `docs/FORMAT.md`; a
//! DataBundle's index values are protobuf, specified in
//! `docs/DATABUNDLE.md` ([`bundle`]).

pub mod bundle;
mod cbor;
mod entry;
mod error;
mod item_manifest;
mod manifest;
mod name;
mod object_id;
mod reference;
pub mod tar;
pub mod tiledb;
mod time;
mod track;

pub use entry::{FragmentEntry, Placement};
pub use error::FormatError;
pub use item_manifest::{Chunk, ItemManifest};
pub use manifest::{Manifest, MergeConflict, TrackEntry};
pub use name::{
    validate_item_name, validate_ref_name, validate_segment, CONTROL_DIR, RESERVED_PREFIX,
};
pub use object_id::ObjectId;
pub use reference::{decode_ref, encode_ref};
pub use time::{ns_of_time, time_of_ns};
#[cfg(test)]
pub(crate) use track::tests::item as packed_track_item;
pub(crate) use track::{check_pack, read_columns, Columns, DEFAULT_MEDIA_TYPE};
pub use track::{Attrs, PackLengths, Track, TrackDir, TrackItem, TRACK_KIND_FRAGMENT};
