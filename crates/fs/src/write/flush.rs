//! A flush: export the namespace's changes, upload the closed spool files
//! as packs, edit the changed modalities' Tracks (or build a new
//! modality's), commit, and point the committed files at their new items.

use std::collections::{HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures::FutureExt;
use packfs_core::dataset::{
    writer_string, ChunkRef, Dataset, DatasetError, Item, ItemSource, TrackContent, TrackUpdate,
    MAX_COMMIT_ATTEMPTS,
};
use packfs_core::packer::{media_type, upload, LocalFiles, PackOptions, SourceFile};
use packfs_core::progress::Quiet;
use packfs_core::store::StoreError;
use packfs_format::{FormatError, FragmentEntry, ObjectId, Placement, Track, TrackEdit, TrackItem};
use tracing::{info, warn};

use super::journal::{Journal, Record};
use super::{WriteError, WriteOptions};
use crate::namespace::{
    CommittedItem, Content, EditScope, Export, ExportedFile, ExportedModality, Ino, Namespace,
    SpoolFile, Taken, ROOT_INO,
};

/// A spooled file just committed: its inode, the uploaded version and its
/// generation, and the item it now is.
type Committed = (Ino, SpoolFile, u64, Arc<CommittedItem>);

/// What the last commit of this mount left.
struct State {
    /// The Manifest this mount's namespace corresponds to: its own last
    /// commit (never a merge made on its behalf), so the next commit's
    /// changes are exactly this mount's.
    own_tip: ObjectId,
    /// The Track of each modality directory in `own_tip`.
    tracks: HashMap<Ino, ObjectId>,
}

/// Commits a read-write mount's changes, one flush at a time.
pub(super) struct Flusher {
    ns: Arc<Namespace>,
    dataset: Dataset,
    ref_name: String,
    upload_options: PackOptions,
    state: tokio::sync::Mutex<State>,
    /// The namespace change counter the last commit covered.
    committed_changes: AtomicU64,
    journal: Arc<Journal>,
}

impl Flusher {
    pub(super) fn new(
        ns: Arc<Namespace>,
        dataset: Dataset,
        ref_name: &str,
        journal: Arc<Journal>,
        options: &WriteOptions,
    ) -> Self {
        let tree = ns.tree().clone();
        let tracks = tree
            .tracks()
            .iter()
            .filter_map(|span| {
                let t = ns.lookup(ROOT_INO, span.timeline.as_bytes()).ok()?;
                Some((ns.lookup(t, span.modality.as_bytes()).ok()?, span.track))
            })
            .collect();
        Flusher {
            upload_options: PackOptions::default()
                .pack_items(options.pack_items)
                .pack_bytes(options.pack_bytes)
                .chunk_bytes(options.chunk_bytes)
                .chunk_above(Some(options.chunk_above))
                .min_chunk_bytes(Some(options.min_chunk_bytes)),
            state: tokio::sync::Mutex::new(State {
                own_tip: tree.manifest_id(),
                tracks,
            }),
            committed_changes: AtomicU64::new(ns.changes()),
            journal,
            ns,
            dataset,
            ref_name: ref_name.to_string(),
        }
    }

    /// The Manifest the next commit goes onto: this mount's last commit,
    /// or the one it mounted.
    pub(super) async fn base(&self) -> ObjectId {
        self.state.lock().await.own_tip
    }

    /// Whether anything changed since the last commit.
    pub(super) fn has_changes(&self) -> bool {
        self.ns.changes() != self.committed_changes.load(Ordering::SeqCst)
    }

    /// Commits every change so far; returns the spool files it made unused.
    /// Unless `full`, new files that would only fill a partial pack wait for
    /// a later flush (the one after the next idle delay at the latest), so
    /// a stream of files becomes full packs.
    /// `session_records` gives the journal records of files open for
    /// writing, to carry across the journal's compaction.
    pub(super) async fn flush(
        &self,
        full: bool,
        session_records: impl FnOnce() -> Vec<Record>,
    ) -> Result<Vec<SpoolFile>, WriteError> {
        let mut state = self.state.lock().await;
        let known: HashSet<Ino> = state.tracks.keys().copied().collect();
        // Journal records up to the mark are exactly those this export
        // covers.
        let ((export, open), mark) = self
            .journal
            .snapshot(|| (self.ns.export(&known), session_records()));
        let mut export = export?;
        if export.changes == self.committed_changes.load(Ordering::SeqCst) {
            // Records of write sessions that ended without a change (an
            // mmap's pages written back after the close, an open for
            // writing closed unwritten) need no commit: dropped, so a
            // clean unmount leaves a journal with nothing to replay.
            if self.journal.differs(mark, &open) {
                if let Err(e) = self.compact(state.own_tip, open, mark).await {
                    warn!("rewriting the spool journal: {e}");
                }
            }
            return Ok(Vec::new());
        }
        let (deferred, deferred_puts) = match full {
            true => (Taken::default(), Vec::new()),
            false => self.defer_partial_packs(&mut export),
        };
        // A panic is a failed commit too: the changes stay marked for the
        // next attempt, and whoever waits for this flush hears of it.
        let started = std::time::Instant::now();
        let committed = AssertUnwindSafe(self.commit(&mut state, &export))
            .catch_unwind()
            .await
            .unwrap_or_else(|panic| Err(WriteError::Panicked(panic_message(&*panic))));
        let files = committed.as_ref().map_or(0, Vec::len);
        packfs_core::metrics::global().commit(committed.is_ok(), files, started.elapsed());
        let done = match committed {
            Ok(done) => done,
            Err(e) => {
                self.ns.restore(&export.taken);
                return Err(e);
            }
        };
        if deferred.dirty.is_empty() {
            self.committed_changes
                .store(export.changes, Ordering::SeqCst);
        } else {
            self.ns.restore(&deferred);
        }
        // The journal moves to the new base before committed spool files
        // go: a crash in between replays nothing that is gone. Deferred
        // files are journaled again, as they were at the export.
        let mut carried = deferred_puts;
        carried.extend(open);
        if let Err(e) = self.compact(state.own_tip, carried, mark).await {
            warn!("rewriting the spool journal after a commit: {e}");
            self.ns.restore(&export.taken);
            return Ok(Vec::new()); // keep the spool files the journal names
        }
        Ok(self.ns.mark_committed(done))
    }

    /// Rewrites the journal as `base`, `carried` and the records after
    /// `mark` ([`Journal::compact`]), on the blocking pool.
    async fn compact(
        &self,
        base: ObjectId,
        carried: Vec<Record>,
        mark: u64,
    ) -> std::io::Result<()> {
        let journal = self.journal.clone();
        packfs_core::blocking::spawn(move || journal.compact(base, &carried, mark)).await
    }

    /// Leaves out of `export` the new spooled files beyond the last full
    /// pack of each modality; returns the changes to put back for them
    /// (their modalities and the files), and journal records of the files
    /// left out.
    fn defer_partial_packs(&self, export: &mut Export) -> (Taken, Vec<Record>) {
        let per_pack = self.upload_options.pack_items.max(1);
        let (mut deferred, mut puts) = (Taken::default(), Vec::new());
        for m in &mut export.modalities {
            let Some(files) = &mut m.files else { continue };
            let mut fresh: Vec<&str> = files
                .iter()
                .filter(|f| !f.stored && matches!(f.content, Content::Spool(_)))
                .map(|f| f.name.as_str())
                .collect();
            let wait = fresh.len() % per_pack;
            if wait == 0 {
                continue;
            }
            // The packer packs in name order: the last names would fill
            // the partial pack.
            fresh.sort_unstable();
            let later: HashSet<String> = fresh[fresh.len() - wait..]
                .iter()
                .map(|n| n.to_string())
                .collect();
            files.retain(|f| {
                if !later.contains(&f.name) {
                    return true;
                }
                deferred.touched.push(f.ino);
                if let Content::Spool(spool) = &f.content {
                    let file = spool.path.file_name().unwrap_or_default();
                    // The export does not know the size of a version kept
                    // for a file still open; the spool file does.
                    let size = std::fs::metadata(&spool.path).map_or(f.size, |m| m.len());
                    puts.push(Record::Put {
                        path: format!("{}/{}/{}", m.timeline, m.modality, f.name),
                        file: file.to_string_lossy().into_owned(),
                        size,
                        attrs: f.attrs,
                        special: f.special,
                    });
                }
                false
            });
            deferred.dirty.push(m.ino);
        }
        (deferred, puts)
    }

    /// Uploads, builds Tracks, commits; returns the files now committed.
    async fn commit(
        &self,
        state: &mut State,
        export: &Export,
    ) -> Result<Vec<Committed>, WriteError> {
        // 1. Upload the spool versions, sorted as the packer wants them.
        let mut uploads: Vec<(SourceFile, Ino, SpoolFile, u64, Arc<str>)> = Vec::new();
        // A file of several names (hard links) is uploaded once: every
        // name's item gets its entry.
        let mut uploaded_inos = HashSet::new();
        for m in &export.modalities {
            for f in m.files.iter().flatten() {
                if !uploaded_inos.insert(f.ino) {
                    continue;
                }
                if let Content::Spool(spool) = &f.content {
                    let size = std::fs::metadata(&spool.path)
                        .map_err(WriteError::file(&spool.path))?
                        .len();
                    let source = SourceFile {
                        timeline: m.timeline.clone(),
                        modality: m.modality.clone(),
                        name: f.name.clone(),
                        path: spool.path.clone(),
                        size,
                    };
                    uploads.push((source, f.ino, spool.clone(), f.generation, media_type_of(f)));
                }
            }
        }
        uploads.sort_by(|a, b| {
            (&a.0.timeline, &a.0.modality, &a.0.name).cmp(&(
                &b.0.timeline,
                &b.0.modality,
                &b.0.name,
            ))
        });
        let sources: Vec<SourceFile> = uploads.iter().map(|u| u.0.clone()).collect();
        let uploaded = upload(
            &self.dataset,
            &sources,
            &LocalFiles,
            &self.upload_options,
            &Quiet,
        )
        .await?;
        let mut new_entries: HashMap<Ino, FragmentEntry> = HashMap::new();
        for (u, entry) in uploads.iter().zip(&uploaded.entries) {
            new_entries.insert(u.1, entry.clone());
        }

        // 2. New Tracks for the changed modalities.
        let mut updates = Vec::new();
        for m in &export.modalities {
            let content = match (&m.files, &m.edit) {
                (None, _) => TrackContent::Existing(state.tracks[&m.ino]),
                (Some(files), Some(scope)) => {
                    let track = state.tracks[&m.ino];
                    let id = self
                        .edit_track(m, files, scope, track, &mut new_entries)
                        .await?;
                    TrackContent::Existing(id)
                }
                (Some(files), None) => {
                    TrackContent::New(self.build_track(m, files, &mut new_entries).await?)
                }
            };
            updates.push(TrackUpdate {
                timeline: m.timeline.clone(),
                modality: m.modality.clone(),
                content,
            });
        }

        // 3. Commit; merge onto the ref if another writer moved it.
        let writer = writer_string("mount");
        let (id, manifest) = self
            .dataset
            .write_manifest(vec![state.own_tip], updates, &writer)
            .await?;
        self.move_ref(state.own_tip, id, &writer).await?;
        info!(
            "committed manifest {} to ref {} ({} files uploaded)",
            id.short(),
            self.ref_name,
            uploads.len()
        );
        let ino_of: HashMap<(&str, &str), Ino> = export
            .modalities
            .iter()
            .map(|m| ((m.timeline.as_str(), m.modality.as_str()), m.ino))
            .collect();
        state.own_tip = id;
        state.tracks = manifest
            .tracks
            .iter()
            .filter_map(|t| {
                Some((
                    *ino_of.get(&(t.timeline.as_str(), t.modality.as_str()))?,
                    t.track,
                ))
            })
            .collect();

        // 4. Committed files now read from their items.
        let mut pack_lens: HashMap<ObjectId, u64> = HashMap::new();
        for e in &uploaded.entries {
            if let Placement::Packed { .. } = e.placement {
                *pack_lens.entry(e.address).or_default() += e.byte_size;
            }
        }
        let mut done = Vec::with_capacity(uploads.len());
        for (source, ino, spool, generation, media_type) in uploads {
            let entry = new_entries[&ino].clone();
            let item = self.item(&source, &entry, media_type, &pack_lens).await?;
            done.push((
                ino,
                spool,
                generation,
                Arc::new(CommittedItem { item, entry }),
            ));
        }
        Ok(done)
    }

    /// The Track of modality `m`, which this mount has no Track of yet,
    /// holding `files`: stored ones with their entries, spooled ones with
    /// those just uploaded (`new_entries`), numbered after the others.
    async fn build_track(
        &self,
        m: &ExportedModality,
        files: &[ExportedFile],
        new_entries: &mut HashMap<Ino, FragmentEntry>,
    ) -> Result<Track, WriteError> {
        let base = self.base_items(files).await?;
        let mut items = Vec::with_capacity(files.len());
        let mut fresh = Vec::new();
        for f in files {
            match self.stored_item(m, f, &base)? {
                Some(item) => items.push(item),
                None => fresh.push(f),
            }
        }
        let first = items.iter().map(|i| i.entry.t_end).max().unwrap_or(0);
        let stored = items.len();
        for (t, f) in (first..).zip(&fresh) {
            let entry = new_entries
                .get_mut(&f.ino)
                .expect("every spooled file was uploaded");
            entry.t_start = t;
            entry.t_end = t + 1;
            items.push(TrackItem {
                name: f.name.clone(),
                media_type: media_type_of(f),
                entry: entry.clone(),
                attrs: f.attrs,
            });
        }
        // A new pack the Track already holds cut another way: its files
        // become objects of their own, and are read from those once
        // committed.
        let (old, new) = items.split_at_mut(stored);
        let apart = self
            .dataset
            .separate_twin_packs(&m.timeline, &m.modality, old.iter().map(|i| &i.entry), new)
            .await?;
        if apart.items > 0 {
            for (f, item) in fresh.iter().zip(&*new) {
                new_entries.insert(f.ino, item.entry.clone());
            }
        }
        let what = format!("track {}/{}", m.timeline, m.modality);
        let track =
            Track::new(items, Vec::new(), &what).and_then(|t| t.with_dirs(m.dirs.clone(), &what));
        Ok(track.map_err(DatasetError::from)?)
    }

    /// Stores the Track `track` (this mount's last commit of modality `m`)
    /// changed as the export says: `scope`'s rows removed, then `files`
    /// and `m.dirs` recorded. Spooled files get the entries just uploaded
    /// (`new_entries`, numbered by the edit after the Track's items).
    async fn edit_track(
        &self,
        m: &ExportedModality,
        files: &[ExportedFile],
        scope: &EditScope,
        track: ObjectId,
        new_entries: &mut HashMap<Ino, FragmentEntry>,
    ) -> Result<ObjectId, WriteError> {
        if files.is_empty() && m.dirs.is_empty() && scope == &EditScope::default() {
            return Ok(track);
        }
        let base = self.base_items(files).await?;
        let mut edit = TrackEdit {
            cleared: scope.cleared.clone(),
            removed: scope.removed.clone(),
            items: Vec::with_capacity(files.len()),
            dirs: m.dirs.clone(),
            // The export lists every directory it adds.
            implied: Vec::new(),
            retired: Vec::new(),
        };
        let (mut fresh, mut fresh_inos) = (Vec::new(), HashMap::new());
        for f in files {
            match self.stored_item(m, f, &base)? {
                Some(item) => edit.items.push(item),
                None => {
                    fresh.push(TrackItem {
                        name: f.name.clone(),
                        media_type: media_type_of(f),
                        entry: new_entries[&f.ino].clone(),
                        attrs: f.attrs,
                    });
                    fresh_inos.insert(f.name.clone(), f.ino);
                }
            }
        }
        let edited = self
            .dataset
            .edit_track(&m.timeline, &m.modality, &track, edit, fresh)
            .await?;
        for item in edited.fresh.into_iter().chain(edited.unchanged) {
            new_entries.insert(fresh_inos[&item.name], item.entry);
        }
        Ok(edited.id)
    }

    /// The Track item of file `f` of modality `m` if some version of it is
    /// stored (`base`: the tree files' items), `None` for a spooled one.
    fn stored_item(
        &self,
        m: &ExportedModality,
        f: &ExportedFile,
        base: &HashMap<u32, TrackItem>,
    ) -> Result<Option<TrackItem>, WriteError> {
        let (media_type, entry) = match &f.content {
            Content::Base(i) => {
                let Some(item) = base.get(i) else {
                    let name = self.ns.tree().item(*i)?.name().to_string();
                    let what = format!("the mounted Track of {}/{}", m.timeline, m.modality);
                    let detail = format!("{name:?} is not on the page that would hold it");
                    return Err(DatasetError::from(FormatError::shape(what, detail)).into());
                };
                (item.media_type.clone(), item.entry.clone())
            }
            Content::Committed(c) => (c.item.media_type.clone(), c.entry.clone()),
            Content::Spool(_) => return Ok(None),
        };
        Ok(Some(TrackItem {
            name: f.name.clone(),
            media_type,
            entry,
            attrs: f.attrs,
        }))
    }

    /// The Track items of the tree files among `files`, from the name
    /// pages of the mounted Tracks that hold them, by tree item.
    async fn base_items(
        &self,
        files: &[ExportedFile],
    ) -> Result<HashMap<u32, TrackItem>, WriteError> {
        let tree = self.ns.tree();
        let mut by_track: HashMap<ObjectId, Vec<u32>> = HashMap::new();
        for f in files {
            if let Content::Base(i) = f.content {
                by_track.entry(tree.track_of(i).track).or_default().push(i);
            }
        }
        let mut items = HashMap::new();
        for (track, indexes) in by_track {
            let names: Vec<String> = indexes
                .iter()
                .map(|&i| Ok(tree.item(i)?.name().to_string()))
                .collect::<Result<_, WriteError>>()?;
            let wanted: Vec<&str> = names.iter().map(String::as_str).collect();
            let mut found = self
                .dataset
                .track_items(&track, &wanted, "the mounted manifest")
                .await?;
            for (i, name) in indexes.into_iter().zip(&names) {
                if let Some(item) = found.remove(name.as_str()) {
                    items.insert(i, item);
                }
            }
        }
        Ok(items)
    }

    /// Moves the ref from `parent` to `id`, or merges `id` onto wherever
    /// another writer moved it.
    async fn move_ref(
        &self,
        parent: ObjectId,
        id: ObjectId,
        writer: &str,
    ) -> Result<(), WriteError> {
        let store = self.dataset.store();
        match store.update_ref(&self.ref_name, Some(parent), id).await {
            Err(StoreError::RefConflict { .. }) => {}
            other => return Ok(other.map_err(DatasetError::from)?),
        }
        for attempt in 1.. {
            let head = self.dataset.resolve(&self.ref_name).await?;
            info!(
                "ref {} moved (now {}); merging this mount's commit",
                self.ref_name,
                head.short()
            );
            match self
                .dataset
                .merge_into(&self.ref_name, head, &[id], writer)
                .await
            {
                Err(DatasetError::Store(StoreError::RefConflict { .. }))
                    if attempt < MAX_COMMIT_ATTEMPTS => {}
                result => {
                    let report = result?;
                    for c in &report.conflicts {
                        tracing::warn!(
                            "{}/{}/{} was also written by another writer; this mount's version is {}",
                            c.timeline, c.modality, c.name, c.renamed_to
                        );
                    }
                    return Ok(());
                }
            }
        }
        unreachable!("the loop returns")
    }

    /// How to read a file just committed as `entry`.
    async fn item(
        &self,
        source: &SourceFile,
        entry: &FragmentEntry,
        media_type: Arc<str>,
        pack_lens: &HashMap<ObjectId, u64>,
    ) -> Result<Item, WriteError> {
        let layout = self.dataset.store().layout();
        let path =
            |id: &ObjectId| Arc::new(layout.data_object(&source.timeline, &source.modality, id));
        let source_of = match entry.placement {
            Placement::Whole => ItemSource::Whole {
                object: path(&entry.address),
            },
            Placement::Packed { offset } => ItemSource::Packed {
                pack: path(&entry.address),
                offset,
                pack_len: pack_lens[&entry.address],
            },
            Placement::Chunked => {
                let manifest = self
                    .dataset
                    .item_manifest(
                        &source.timeline,
                        &source.modality,
                        &entry.address,
                        "a flush",
                    )
                    .await?;
                ItemSource::Chunked {
                    chunks: manifest
                        .chunks
                        .iter()
                        .map(|c| ChunkRef {
                            object: path(&c.address),
                            size: c.size,
                        })
                        .collect(),
                }
            }
        };
        Ok(Item {
            name: source.name.clone(),
            size: entry.byte_size,
            media_type,
            source: source_of,
            // The file's node in the overlay keeps showing its own.
            attrs: Default::default(),
        })
    }
}

/// The media type file `f` is recorded with: what it is if not a regular
/// file, else what its name's extension says.
fn media_type_of(f: &ExportedFile) -> Arc<str> {
    match f.special {
        Some(special) => special.media_type().into(),
        None => media_type(&f.name).into(),
    }
}

/// The message of a caught panic.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}
