//! The bottom layer of packfs: on-store formats and the byte-range engine,
//! pure code with no I/O.
//!
//! Every format type here encodes to and decodes from bytes; nothing here
//! touches a store. A dataset's objects are CBOR, specified in
//! `docs/FORMAT.md`; a DataBundle's index values are protobuf, specified in
//! `docs/DATABUNDLE.md` ([`bundle`]); TileDB's fragments and tiles are in
//! [`tiledb`], tar member headers in [`tar`]. The [`engine`] turns a
//! description of which source bytes make up a destination (byte-range maps
//! with explicit PAD) into few coalesced reads, and executes them against
//! any [`engine::SeekableSource`].

pub mod bundle;
mod cbor;
pub mod engine;
mod entry;
mod error;
mod expiry;
mod item_manifest;
mod lease;
mod manifest;
mod name;
mod object_id;
mod reference;
mod special;
pub mod tar;
pub mod tiledb;
mod time;
mod track;

pub use entry::{FragmentEntry, Placement};
pub use error::FormatError;
pub use expiry::ExpiryRecord;
pub use item_manifest::{Chunk, ItemManifest};
pub use lease::Lease;
pub use manifest::{Manifest, MergeConflict, TrackEntry};
pub use name::{
    validate_item_name, validate_ref_name, validate_segment, CONTROL_DIR, RESERVED_PREFIX,
};
pub use object_id::ObjectId;
pub use reference::{decode_ref, encode_ref};
pub use special::{Special, SYMLINK_MAX};
pub use time::{ns_of_time, time_of_ns};
pub use track::{
    check_lengths, name_order, pages_to_edit, read_pack_page, EditError, IndexRef, NamePage,
    PackPageRef, PackRecord, PageRef, PageShape, PageSource, PagedReader, PagedTrack, PagedWriter,
    Survey, TrackEdit, TrackRoot,
};
pub use track::{check_pack, read_columns, Columns, TrackLayout, DEFAULT_MEDIA_TYPE};
pub use track::{Attrs, PackLengths, Track, TrackDir, TrackItem, TRACK_KIND_FRAGMENT};
