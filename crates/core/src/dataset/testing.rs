//! Items for the dataset layer's tests.

use packfs_format::{FragmentEntry, ObjectId, Placement, TrackItem};

/// An item of `size` bytes at `offset` of the pack whose bytes are `pack`.
pub(super) fn item(name: &str, pack: &[u8], offset: u64, size: u64) -> TrackItem {
    TrackItem {
        name: name.into(),
        media_type: "image/jpeg".into(),
        attrs: Default::default(),
        entry: FragmentEntry {
            t_start: 0,
            t_end: 1,
            byte_size: size,
            address: ObjectId::of(pack),
            placement: Placement::Packed { offset },
        },
    }
}
