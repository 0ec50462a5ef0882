//! Copy-up: the bytes a write session starts from, copied into its spool
//! file (a spool version by the kernel, a stored item through the cache).
//! File I/O runs on blocking threads.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

use packfs_core::blocking::spawn;

use super::{PinnedFile, Spool, WriteError, Writer};
use crate::namespace::{Content, SpoolFile};

impl Writer {
    /// Copies the bytes of version `old` into spool file `to` (open as
    /// `file`): a spool version by the kernel (`copy_file_range`), a
    /// stored item through the cache. File I/O runs on blocking threads.
    pub(super) async fn copy_up(
        &self,
        from: CopyFrom,
        to: &SpoolFile,
        file: &Arc<File>,
    ) -> Result<(), WriteError> {
        const STEP: u64 = 8 << 20;
        let item = match from {
            CopyFrom::Spool(old, path) => {
                let file = file.clone();
                let copied = spawn(move || {
                    std::io::copy(&mut &*old, &mut file.as_ref()).map_err(WriteError::file(&path))
                })
                .await?;
                self.spool.resized(copied, 0);
                return Ok(());
            }
            CopyFrom::Item(item) => item,
        };
        let mut offset = 0;
        while offset < item.size {
            let bytes = self.reader.read_item(&item, offset, STEP).await?;
            let (file, path, len) = (file.clone(), to.path.clone(), bytes.len() as u64);
            spawn(move || {
                file.write_all_at(&bytes, offset)
                    .map_err(WriteError::file(&path))
            })
            .await?;
            offset += len;
        }
        self.spool.resized(item.size, 0);
        Ok(())
    }
}

/// The bytes a write session copies.
pub(super) enum CopyFrom {
    /// A spool version, opened (it may be deleted while it is copied).
    Spool(PinnedFile, PathBuf),
    Item(packfs_core::dataset::ItemData),
}

/// Where the bytes of `content` are to be copied from.
pub(super) fn copy_from(
    spool: &Spool,
    tree: &packfs_core::tree::Tree,
    content: &Content,
) -> Result<CopyFrom, WriteError> {
    Ok(match content {
        Content::Spool(s) => {
            let file = spool.open_pinned(s).map_err(WriteError::file(&s.path))?;
            CopyFrom::Spool(file, s.path.clone())
        }
        Content::Base(i) => CopyFrom::Item(tree.item_data(*i)?),
        Content::Committed(c) => CopyFrom::Item(c.item.data()),
    })
}

/// Copies spool file `from` (open pinned) into `to` (`copy_file_range`: a
/// reflink or an in-kernel copy); returns the bytes copied.
pub(super) fn copy_file(
    from: Result<PinnedFile, std::io::Error>,
    from_path: std::path::PathBuf,
    to: File,
) -> impl FnOnce() -> Result<u64, WriteError> {
    move || {
        let from = from.map_err(WriteError::file(&from_path))?;
        std::io::copy(&mut &*from, &mut &to).map_err(WriteError::file(&from_path))
    }
}
