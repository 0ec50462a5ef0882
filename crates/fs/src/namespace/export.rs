//! The flush handshake: what a flush commits ([`Namespace::export`]), and
//! the files it committed ([`Namespace::mark_committed`]).

use std::sync::Arc;

use packfs_core::kind::Kind;
use packfs_core::tree::NodeKind;
use packfs_format::{ns_of_time, Attrs, TrackDir};

use super::change::Change;
use super::overlay::FileNode;
use super::{tree_ino, CommittedItem, Content, Ino, Namespace, NsError, SpoolFile, ROOT_INO};

/// A file of a modality, as a flush sees it.
#[derive(Clone, Debug)]
pub struct ExportedFile {
    pub ino: Ino,
    /// Path below the modality directory.
    pub name: String,
    pub content: Content,
    /// `u64::MAX` for a spool version kept while the file is open (the
    /// namespace tracks only the open version's size).
    pub size: u64,
    pub generation: u64,
    /// Some version of it is committed (`stored`): leaving a
    /// file that is not out of a commit loses nothing (a partial flush may
    /// wait for a fuller pack).
    pub stored: bool,
    /// Its mode and mtime, to record.
    pub attrs: Attrs,
}

/// A modality directory at flush time; `files` and `dirs` only if it changed.
#[derive(Clone, Debug)]
pub struct ExportedModality {
    pub ino: Ino,
    pub timeline: String,
    pub modality: String,
    pub files: Option<Vec<ExportedFile>>,
    /// The directories to record: the modality directory itself (`""`)
    /// and those below it that are empty or have attributes.
    pub dirs: Vec<TrackDir>,
}

/// What a flush commits.
#[derive(Debug)]
pub struct Export {
    pub modalities: Vec<ExportedModality>,
    /// The modalities marked changed, to mark again if the flush fails.
    pub dirty: Vec<Ino>,
    /// The change counter this export covers.
    pub changes: u64,
}

impl Namespace {
    /// What a flush commits: every modality directory, with the files of
    /// those changed since the last export. Files open for writing appear
    /// as their last complete version, or not at all if they have none.
    pub(crate) fn export(&self, known: &std::collections::HashSet<Ino>) -> Result<Export, NsError> {
        let overlay = self.overlay.as_ref().ok_or(NsError::ReadOnly)?;
        let mut o = overlay.write();
        let dirty: Vec<Ino> = o.dirty.drain().collect();
        let changes = o.changes;
        let c = Change {
            ns: self,
            overlay: &mut o,
        };
        let mut modalities = Vec::new();
        for (timeline, t_ino, t_kind) in c.named_children(ROOT_INO)? {
            if t_kind != Kind::Dir {
                continue;
            }
            for (modality, m_ino, m_kind) in c.named_children(t_ino)? {
                if m_kind != Kind::Dir {
                    continue;
                }
                // Unknown modalities (new, or without a committed Track) are
                // exported whole as well.
                let (files, dirs) = match dirty.contains(&m_ino) || !known.contains(&m_ino) {
                    true => {
                        let (files, dirs) = c.contents_below(m_ino)?;
                        (Some(files), dirs)
                    }
                    false => (None, Vec::new()),
                };
                modalities.push(ExportedModality {
                    ino: m_ino,
                    timeline: timeline.clone(),
                    modality,
                    files,
                    dirs,
                });
            }
        }
        Ok(Export {
            modalities,
            dirty,
            changes,
        })
    }

    /// Marks modalities changed again (their flush failed).
    pub(crate) fn restore_dirty(&self, dirty: &[Ino]) {
        if let Some(o) = &self.overlay {
            o.write().dirty.extend(dirty.iter().copied());
        }
    }

    /// The change counter: equal across two calls means nothing changed.
    pub(crate) fn changes(&self) -> u64 {
        self.overlay.as_ref().map_or(0, |o| o.read().changes)
    }

    /// After a commit: files whose uploaded spool version (`generation`)
    /// is still theirs now read from the committed item. Returns the spool
    /// files no longer needed.
    pub(crate) fn mark_committed(
        &self,
        done: Vec<(Ino, SpoolFile, u64, Arc<CommittedItem>)>,
    ) -> Vec<SpoolFile> {
        let Some(overlay) = &self.overlay else {
            return Vec::new();
        };
        let mut o = overlay.write();
        let mut unused = Vec::new();
        for (ino, spool, generation, committed) in done {
            let Some(f) = o.files.get_mut(&ino) else {
                continue;
            };
            let is_it = |c: &Content| matches!(c, Content::Spool(s) if *s == spool);
            if f.writers == 0 && f.generation == generation && is_it(&f.content) {
                f.content = Content::Committed(committed);
                f.stored = true;
                unused.push(spool);
            } else if f.origin.as_ref().is_some_and(is_it) {
                f.origin = Some(Content::Committed(committed));
                f.stored = true;
                unused.push(spool);
            }
        }
        unused
    }
}

impl Change<'_> {
    /// The children of `dir` with names and kinds.
    pub(super) fn named_children(&self, dir: Ino) -> Result<Vec<(String, Ino, Kind)>, NsError> {
        if let Some(d) = self.overlay.dirs.get(&dir) {
            return d
                .children
                .iter()
                .map(|(n, i)| Ok((n.to_string(), i, self.kind(i)?)))
                .collect();
        }
        let (_, node) = self.ns.tree_node(dir).ok_or(NsError::NotFound)?;
        let NodeKind::Dir(children) = node.kind else {
            return Err(NsError::NotADirectory);
        };
        children
            .iter()
            .map(|&c| {
                let ino = tree_ino(c);
                let name = self.ns.tree.node(c).expect("child exists").name.to_string();
                Ok((name, ino, self.kind(ino)?))
            })
            .collect()
    }

    /// Every file below modality directory `dir`, as a flush commits it,
    /// and the directories to record (see [`ExportedModality::dirs`]).
    pub(super) fn contents_below(
        &self,
        dir: Ino,
    ) -> Result<(Vec<ExportedFile>, Vec<TrackDir>), NsError> {
        let (mut files, mut dirs) = (Vec::new(), Vec::new());
        let mut pending = vec![(dir, String::new())];
        while let Some((d, path)) = pending.pop() {
            let children = self.named_children(d)?;
            let attrs = self.dir_attrs(d)?;
            if path.is_empty() || children.is_empty() || attrs != Attrs::default() {
                dirs.push(TrackDir {
                    name: path.clone(),
                    attrs,
                });
            }
            let prefix = if path.is_empty() { path } else { path + "/" };
            for (name, ino, kind) in children {
                let path = format!("{prefix}{name}");
                if kind == Kind::Dir {
                    pending.push((ino, path));
                    continue;
                }
                let recorded = |f: &FileNode| Attrs {
                    mode: Some(f.perm),
                    mtime_ns: Some(ns_of_time(f.mtime)),
                };
                let (content, size, generation, stored, attrs) = match self.overlay.files.get(&ino)
                {
                    Some(f) if f.writers > 0 => match &f.origin {
                        Some(origin) => {
                            let size = self.size_of(origin);
                            (origin.clone(), size, 0, f.stored, recorded(f))
                        }
                        None => continue, // never complete yet
                    },
                    Some(f) => (
                        f.content.clone(),
                        f.size,
                        f.generation,
                        f.stored,
                        recorded(f),
                    ),
                    None => match self.ns.tree_node(ino).map(|(_, n)| n.kind) {
                        Some(NodeKind::File(index)) => {
                            let item = self.ns.tree.item(index);
                            (Content::Base(index), item.size(), 0, true, item.attrs())
                        }
                        _ => return Err(NsError::NotFound),
                    },
                };
                files.push(ExportedFile {
                    ino,
                    name: path,
                    content,
                    size,
                    generation,
                    stored,
                    attrs,
                });
            }
        }
        Ok((files, dirs))
    }

    /// The attributes to record for directory `dir`: what a change set
    /// (the overlay), else what its Track recorded.
    pub(super) fn dir_attrs(&self, dir: Ino) -> Result<Attrs, NsError> {
        if let Some(d) = self.overlay.dirs.get(&dir) {
            return Ok(Attrs {
                mode: Some(d.perm),
                mtime_ns: Some(ns_of_time(d.mtime)),
            });
        }
        let (id, _) = self.ns.tree_node(dir).ok_or(NsError::NotFound)?;
        Ok(self.ns.tree.dir_attrs(id))
    }

    /// The size of a complete version (spool versions record none here:
    /// the flush stats the file).
    pub(super) fn size_of(&self, content: &Content) -> u64 {
        match content {
            Content::Base(i) => self.ns.tree.item(*i).size(),
            Content::Committed(c) => c.item.size,
            Content::Spool(_) => u64::MAX,
        }
    }
}
