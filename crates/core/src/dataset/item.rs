//! One item of a dataset as a value: its name, size, attributes and where
//! its bytes are.

use std::sync::Arc;

use object_store::path::Path;
use packfs_format::Attrs;

/// One chunk object of a chunked item.
#[derive(Clone, Debug)]
pub struct ChunkRef {
    pub object: Arc<Path>,
    pub size: u64,
}

/// Where an item's bytes are.
#[derive(Clone, Debug)]
pub enum ItemSource {
    /// The whole object is the item.
    Whole { object: Arc<Path> },
    /// `[offset, offset + size)` of a pack whose length must be `pack_len`.
    Packed {
        pack: Arc<Path>,
        offset: u64,
        pack_len: u64,
    },
    /// The concatenation of chunk objects.
    Chunked { chunks: Arc<[ChunkRef]> },
}

/// One item of a loaded Track, as an owned value (a mount keeps its items
/// in an `ItemTable` and makes these only where one is kept).
#[derive(Clone, Debug)]
pub struct Item {
    /// Path below the modality directory.
    pub name: String,
    pub size: u64,
    pub media_type: Arc<str>,
    pub source: ItemSource,
    /// Mode and mtime its writer recorded.
    pub attrs: Attrs,
}

impl Item {
    /// What reading it needs.
    pub fn data(&self) -> ItemData {
        ItemData {
            size: self.size,
            source: self.source.clone(),
        }
    }
}

/// An item's size and where its bytes are: what reading it needs.
#[derive(Clone, Debug)]
pub struct ItemData {
    pub size: u64,
    pub source: ItemSource,
}
