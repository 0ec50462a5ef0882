//! The flush handshake: what a flush commits ([`Namespace::export`]), and
//! the files it committed ([`Namespace::mark_committed`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use packfs_core::kind::Kind;
use packfs_core::tree::NodeKind;
use packfs_format::{ns_of_time, Attrs, Special, TrackDir};

use super::change::Change;
use super::overlay::{FileNode, Vacated};
use super::{join, tree_ino, CommittedItem, Content, Ino, Namespace, NsError, SpoolFile, ROOT_INO};

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
    /// What it is if not a regular file.
    pub special: Option<Special>,
}

/// A modality directory at flush time; `files` and `dirs` only if it changed.
#[derive(Clone, Debug)]
pub struct ExportedModality {
    pub ino: Ino,
    pub timeline: String,
    pub modality: String,
    /// Its files, or with `edit` those added or changed since the last
    /// export; `None`: unchanged.
    pub files: Option<Vec<ExportedFile>>,
    /// The directories to record: the modality directory itself (`""`)
    /// and those below it that are empty or have attributes; with `edit`,
    /// every directory added or changed.
    pub dirs: Vec<TrackDir>,
    /// Set when `files` and `dirs` change the Track this mount last
    /// committed rather than replace it: the rows that go first.
    pub edit: Option<EditScope>,
}

/// The rows of a committed Track that a flush removes before it adds the
/// files and directories exported.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EditScope {
    /// Directories moved or removed: every row below them goes.
    pub cleared: Vec<String>,
    /// Paths removed, moved away or replaced.
    pub removed: Vec<String>,
}

/// The record of changes an export took from the namespace, to put back
/// if its flush fails.
#[derive(Clone, Debug, Default)]
pub struct Taken {
    /// Modalities marked changed.
    pub dirty: Vec<Ino>,
    pub touched: Vec<Ino>,
    pub moved: Vec<Ino>,
    pub vacated: Vec<Vacated>,
}

/// What a flush commits.
#[derive(Debug)]
pub struct Export {
    pub modalities: Vec<ExportedModality>,
    /// What it took from the record of changes.
    pub taken: Taken,
    /// The change counter this export covers.
    pub changes: u64,
}

/// A modality's changes since the last export, as rows.
#[derive(Default)]
struct ModalityRows {
    files: BTreeMap<String, ExportedFile>,
    dirs: BTreeMap<String, TrackDir>,
    scope: EditScope,
}

impl Namespace {
    /// What a flush commits: every modality directory; those changed since
    /// the last export with their rows changed since (`known`: modalities
    /// with a Track this mount committed or mounted), or all their files
    /// (the others). Files open for writing appear as their last complete
    /// version, or not at all if they have none.
    pub(crate) fn export(&self, known: &HashSet<Ino>) -> Result<Export, NsError> {
        let overlay = self.overlay.as_ref().ok_or(NsError::ReadOnly)?;
        let mut o = overlay.write();
        let taken = Taken {
            dirty: o.dirty.drain().collect(),
            touched: o.touched.drain().collect(),
            moved: o.moved.drain().collect(),
            vacated: std::mem::take(&mut o.vacated),
        };
        let changes = o.changes;
        let c = Change {
            ns: self,
            overlay: &mut o,
        };
        let dirty = &taken.dirty;
        let edited: HashSet<Ino> = dirty
            .iter()
            .copied()
            .filter(|m| known.contains(m))
            .collect();
        let mut rows = c.changed_rows(&taken, &edited)?;
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
                let (files, dirs, edit) = if !known.contains(&m_ino) {
                    let (files, dirs) = c.contents_below(m_ino, "", false)?;
                    (Some(files), dirs, None)
                } else if edited.contains(&m_ino) {
                    let r = rows.remove(&m_ino).unwrap_or_default();
                    let files = r.files.into_values().collect();
                    (Some(files), r.dirs.into_values().collect(), Some(r.scope))
                } else {
                    (None, Vec::new(), None)
                };
                modalities.push(ExportedModality {
                    ino: m_ino,
                    timeline: timeline.clone(),
                    modality,
                    files,
                    dirs,
                    edit,
                });
            }
        }
        // A file still being written is exported again next time: its
        // session's version is not the one exported.
        let open: Vec<Ino> = taken
            .touched
            .iter()
            .copied()
            .filter(|i| o.files.get(i).is_some_and(|f| f.writers > 0))
            .collect();
        o.touched.extend(open);
        Ok(Export {
            modalities,
            taken,
            changes,
        })
    }

    /// Puts back what an export took (its flush failed, or left files
    /// for a later one).
    pub(crate) fn restore(&self, taken: &Taken) {
        if let Some(o) = &self.overlay {
            let mut o = o.write();
            o.dirty.extend(taken.dirty.iter().copied());
            o.touched.extend(taken.touched.iter().copied());
            o.moved.extend(taken.moved.iter().copied());
            o.vacated.extend(taken.vacated.iter().cloned());
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
        let (id, node) = self.ns.tree_node(dir)?;
        if node.kind != NodeKind::Dir {
            return Err(NsError::NotADirectory);
        }
        let tree = &self.ns.tree;
        let kind = |c| match tree.is_dir(c) {
            true => Kind::Dir,
            false => Kind::File,
        };
        let children = tree.list(id)?;
        Ok(children
            .into_iter()
            .map(|(c, name)| (name, tree_ino(c), kind(c)))
            .collect())
    }

    /// The rows changed since the last export of the modalities `edited`
    /// (see [`ExportedModality::edit`]), by modality.
    fn changed_rows(
        &self,
        taken: &Taken,
        edited: &HashSet<Ino>,
    ) -> Result<HashMap<Ino, ModalityRows>, NsError> {
        let mut rows: HashMap<Ino, ModalityRows> = HashMap::new();
        if edited.is_empty() {
            return Ok(rows);
        }
        for v in taken
            .vacated
            .iter()
            .filter(|v| edited.contains(&v.modality))
        {
            let scope = &mut rows.entry(v.modality).or_default().scope;
            scope.removed.push(v.path.clone());
            if v.dir {
                scope.cleared.push(v.path.clone());
            }
        }
        let moved: HashSet<Ino> = taken.moved.iter().copied().collect();
        for &ino in &taken.touched {
            if let Some(f) = self.overlay.files.get(&ino) {
                // Each of its names (none once unlinked) is an item.
                for (parent, name) in f.names() {
                    let Some((m, at)) = self.location(*parent)? else {
                        continue;
                    };
                    if !edited.contains(&m) {
                        continue;
                    }
                    let path = join(&at, name);
                    if let Some(file) = self.exported_file(ino, path.clone())? {
                        rows.entry(m).or_default().files.insert(path, file);
                    }
                }
                continue;
            }
            if !matches!(self.kind(ino), Ok(Kind::Dir)) {
                continue; // removed
            }
            let Some((m, path)) = self.location(ino)? else {
                continue;
            };
            if !edited.contains(&m) {
                continue;
            }
            let r = rows.entry(m).or_default();
            let attrs = self.dir_attrs(ino)?;
            r.dirs.insert(
                path.clone(),
                TrackDir {
                    name: path.clone(),
                    attrs,
                },
            );
            if moved.contains(&ino) {
                let (files, dirs) = self.contents_below(ino, &path, true)?;
                r.files
                    .extend(files.into_iter().map(|f| (f.name.clone(), f)));
                r.dirs.extend(dirs.into_iter().map(|d| (d.name.clone(), d)));
            }
        }
        Ok(rows)
    }

    /// Every file below directory `dir` (at `path` below its modality),
    /// as a flush commits it, and the directories to record: every one
    /// with `all_dirs`, else those [`ExportedModality::dirs`] lists.
    pub(super) fn contents_below(
        &self,
        dir: Ino,
        path: &str,
        all_dirs: bool,
    ) -> Result<(Vec<ExportedFile>, Vec<TrackDir>), NsError> {
        let (mut files, mut dirs) = (Vec::new(), Vec::new());
        let mut pending = vec![(dir, path.to_string())];
        while let Some((d, path)) = pending.pop() {
            let children = self.named_children(d)?;
            let attrs = self.dir_attrs(d)?;
            if all_dirs || path.is_empty() || children.is_empty() || attrs != Attrs::default() {
                dirs.push(TrackDir {
                    name: path.clone(),
                    attrs,
                });
            }
            for (name, ino, kind) in children {
                let path = join(&path, &name);
                if kind == Kind::Dir {
                    pending.push((ino, path));
                    continue;
                }
                files.extend(self.exported_file(ino, path)?);
            }
        }
        Ok((files, dirs))
    }

    /// File `ino` at `path`, as a flush commits it; `None` while it is
    /// being written and has no complete version yet.
    fn exported_file(&self, ino: Ino, path: String) -> Result<Option<ExportedFile>, NsError> {
        let recorded = |f: &FileNode| Attrs {
            mode: Some(f.perm),
            mtime_ns: Some(ns_of_time(f.mtime)),
        };
        let (content, size, generation, stored, attrs, special) = match self.overlay.files.get(&ino)
        {
            Some(f) if f.writers > 0 => match &f.origin {
                Some(origin) => {
                    let size = self.size_of(origin)?;
                    (origin.clone(), size, 0, f.stored, recorded(f), f.special)
                }
                None => return Ok(None), // never complete yet
            },
            Some(f) => (
                f.content.clone(),
                f.size,
                f.generation,
                f.stored,
                recorded(f),
                f.special,
            ),
            None => match self.ns.tree_node(ino)?.1.kind {
                NodeKind::File(index) => {
                    let item = self.ns.tree.item(index)?;
                    let special = item.special();
                    (
                        Content::Base(index),
                        item.size(),
                        0,
                        true,
                        item.attrs(),
                        special,
                    )
                }
                NodeKind::Dir => return Err(NsError::NotFound),
            },
        };
        Ok(Some(ExportedFile {
            ino,
            name: path,
            content,
            size,
            generation,
            stored,
            attrs,
            special,
        }))
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
        let (id, _) = self.ns.tree_node(dir)?;
        Ok(self.ns.tree.dir_attrs(id)?)
    }

    /// The size of a complete version (spool versions record none here:
    /// the flush stats the file).
    pub(super) fn size_of(&self, content: &Content) -> Result<u64, NsError> {
        Ok(match content {
            Content::Base(i) => self.ns.tree.item(*i)?.size(),
            Content::Committed(c) => c.item.size,
            Content::Spool(_) => u64::MAX,
        })
    }
}
