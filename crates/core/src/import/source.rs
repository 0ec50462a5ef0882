//! An import source as its Tracks, each with what the check before the
//! import found in it and a way to read its rows again, in the Track's
//! order, while it is packed.

use std::path::PathBuf;
use std::sync::Arc;

use packfs_format::Attrs;

use super::walk::{Walk, Walked};
use super::ImportError;
use crate::packer::PackFile;

/// A row of a Track being imported.
pub(super) enum SourceRow {
    /// A directory, by its name below the modality directory (`""` is
    /// that one).
    Dir { name: String, attrs: Attrs },
    /// A file, to be the item `name`; `hard_link`: its device and inode,
    /// if it has other names, which are `Link` rows after it.
    File {
        name: String,
        attrs: Attrs,
        file: PackFile,
        hard_link: Option<(u64, u64)>,
    },
    /// Another name of the file a `File` row before it stored (a hard
    /// link): the item `name`, of the same stored bytes.
    Link {
        name: String,
        attrs: Attrs,
        of: (u64, u64),
    },
}

/// The rows of a Track, in its order.
pub(super) type Rows = Box<dyn Iterator<Item = Result<SourceRow, ImportError>> + Send>;

/// Where a Track's rows are read from.
pub(super) enum RowSource {
    /// A modality directory, walked again and checked as it is read.
    Dir(PathBuf),
    /// Rows listed whole (a bundle's, from its index), in order.
    Listed(Vec<SourceRow>),
}

/// One (timeline, modality) of a source.
pub(super) struct TrackSource {
    /// (timeline, modality).
    pub(super) key: Arc<(String, String)>,
    /// Files found by the check.
    pub(super) files: u64,
    /// Their bytes.
    pub(super) bytes: u64,
    pub(super) rows: RowSource,
}

impl TrackSource {
    /// Its rows, read again: a problem a directory has now that the check
    /// did not find means the source changed since.
    pub(super) fn rows(&mut self) -> Rows {
        let key = self.key.clone();
        match &mut self.rows {
            RowSource::Listed(rows) => Box::new(std::mem::take(rows).into_iter().map(Ok)),
            RowSource::Dir(dir) => {
                let mut linked = std::collections::HashSet::new();
                Box::new(Walk::new(dir.clone()).map(move |row| {
                    match row? {
                        // A directory's import records no mode or mtime.
                        Walked::Dir(name) => Ok(SourceRow::Dir {
                            name,
                            attrs: Attrs::default(),
                        }),
                        // A name of a file met before (the guard records the
                        // first): its bytes are stored once.
                        Walked::File {
                            hard_link: Some(id),
                            name,
                            ..
                        } if !linked.insert(id) => Ok(SourceRow::Link {
                            name,
                            attrs: Attrs::default(),
                            of: id,
                        }),
                        Walked::File {
                            name,
                            path,
                            size,
                            special,
                            hard_link,
                        } => Ok(SourceRow::File {
                            name,
                            attrs: Attrs::default(),
                            file: PackFile {
                                track: key.clone(),
                                path,
                                size,
                                id: 0,
                                special,
                            },
                            hard_link,
                        }),
                        Walked::Problem(problem) => Err(ImportError::Changed(problem)),
                    }
                }))
            }
        }
    }
}
