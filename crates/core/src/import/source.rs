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
    /// A file, to be the item `name`.
    File {
        name: String,
        attrs: Attrs,
        file: PackFile,
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
            RowSource::Dir(dir) => Box::new(Walk::new(dir.clone()).map(move |row| {
                match row? {
                    // A directory's import records no mode or mtime.
                    Walked::Dir(name) => Ok(SourceRow::Dir {
                        name,
                        attrs: Attrs::default(),
                    }),
                    Walked::File {
                        name,
                        path,
                        size,
                        special,
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
                    }),
                    Walked::Problem(problem) => Err(ImportError::Changed(problem)),
                }
            })),
        }
    }
}
