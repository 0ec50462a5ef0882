//! When a file can be forgotten: a file without a name stays while a
//! handle has it open, and its spool files are freed only then.

use super::content::Content;
use super::overlay::spool_files;
use super::{Ino, Namespace, SpoolFile};

impl Namespace {
    /// Files with a name whose bytes are written and not committed yet,
    /// and those bytes.
    pub(crate) fn uncommitted(&self) -> (usize, u64) {
        let Some(o) = &self.overlay else {
            return (0, 0);
        };
        let o = o.read();
        o.files
            .values()
            .filter(|f| f.link.is_some() && matches!(f.content, Content::Spool(_)))
            .fold((0, 0), |(n, bytes), f| (n + 1, bytes + f.size))
    }

    /// How many files the overlay holds (changed, created or open ones).
    pub fn overlay_files(&self) -> usize {
        self.overlay.as_ref().map_or(0, |o| o.read().files.len())
    }

    /// Counts a handle reading `ino`: a file with readers keeps its bytes
    /// when it loses its name. Kept apart from the overlay, so reading a
    /// stored file neither copies it there nor takes the overlay's lock.
    pub(crate) fn add_reader(&self, ino: Ino) {
        *self.readers.lock().entry(ino).or_default() += 1;
    }

    /// Uncounts a handle reading `ino`.
    pub(crate) fn remove_reader(&self, ino: Ino) {
        let mut readers = self.readers.lock();
        if let Some(n) = readers.get_mut(&ino) {
            *n -= 1;
            if *n == 0 {
                readers.remove(&ino);
            }
        }
    }

    fn is_read(&self, ino: Ino) -> bool {
        self.readers.lock().contains_key(&ino)
    }

    /// Forgets file `ino` if it has no name and no open handle; returns
    /// the spool files that held its bytes, now unused.
    pub(crate) fn release_if_unused(&self, ino: Ino) -> Vec<SpoolFile> {
        let Some(overlay) = &self.overlay else {
            return Vec::new();
        };
        // Most calls are closes of files that keep their name: a shared
        // lock tells, so readers closing files do not queue for the
        // exclusive one.
        if overlay
            .read()
            .files
            .get(&ino)
            .is_none_or(|f| f.link.is_some())
        {
            return Vec::new();
        }
        let mut o = overlay.write();
        match o.files.get(&ino) {
            Some(f) if f.link.is_none() && f.writers == 0 && !self.is_read(ino) => {
                let f = o.files.remove(&ino).expect("present");
                spool_files(&f)
            }
            _ => Vec::new(),
        }
    }
}
