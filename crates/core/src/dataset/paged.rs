//! Track objects in both forms: a single object, or a root with pages
//! (`docs/FORMAT.md`, Paged Tracks). Loading fetches the pages a root names
//! and checks each against its id; storing writes the pages a commit
//! changed, then the root.

use std::collections::HashSet;
use std::sync::Arc;

use bytes::Bytes;
use futures::{FutureExt, StreamExt, TryStreamExt};
use packfs_format::{
    read_pack_page, FragmentEntry, ObjectId, PackLengths, PagedTrack, Placement, Track, TrackItem,
    TrackRoot,
};

use super::{check_content, Dataset, DatasetError, METADATA_CONCURRENCY};

/// Some of a Track's items ([`Dataset::track_part`]), and what gives the
/// length of each of its packs.
pub(crate) struct TrackPart {
    pub(crate) items: Vec<TrackItem>,
    /// The root of a paged Track, whose pack pages give the lengths.
    root: Option<TrackRoot>,
    /// Every pack's length, of a single-object Track.
    lengths: PackLengths,
}

/// A Track object as fetched and checked against its id.
pub(crate) enum TrackObject {
    /// A single object: its bytes.
    Single(Bytes),
    /// The root of a paged Track.
    Paged(TrackRoot),
}

/// A Track object as fetched: its bytes (checked against its id), and its
/// pages' when it is a paged root.
pub(crate) enum TrackBytes {
    Single(Bytes),
    Paged {
        root: TrackRoot,
        /// Name pages, in the root's order.
        names: Vec<Bytes>,
        /// Pack pages, in the root's order.
        packs: Vec<Bytes>,
    },
}

/// The ids in both `a` and `b`: of two Tracks' pages, those holding the
/// same rows on both.
pub(crate) fn shared_ids(
    a: impl Iterator<Item = ObjectId>,
    b: impl Iterator<Item = ObjectId>,
) -> HashSet<ObjectId> {
    let b: HashSet<ObjectId> = b.collect();
    a.filter(|id| b.contains(id)).collect()
}

impl Dataset {
    /// Fetches the Track object `id` that `referrer` names, checked
    /// against its id: its bytes, or its root when it is paged, with the
    /// refs of its index pages read.
    pub(crate) async fn track_object(
        &self,
        id: &ObjectId,
        referrer: &str,
    ) -> Result<TrackObject, DatasetError> {
        let object = self.track_object_unindexed(id, referrer).await?;
        let TrackObject::Paged(mut root) = object else {
            return Ok(object);
        };
        if root.needs_index() {
            let referrer = format!("track {}", self.store().layout().track(id));
            let ids = root.index.iter().map(|i| i.id).collect();
            let index = self.pages(ids, &referrer).await?;
            let layout = self.store().layout();
            root.fill_index(index.iter().map(|b| &b[..]), |id| {
                format!("page {}", layout.page(id))
            })?;
        }
        Ok(TrackObject::Paged(root))
    }

    /// [`Dataset::track_object`] without reading the index pages of a
    /// root that has them: its name page refs are left to the caller.
    pub(crate) async fn track_object_unindexed(
        &self,
        id: &ObjectId,
        referrer: &str,
    ) -> Result<TrackObject, DatasetError> {
        let path = self.store().layout().track(id);
        let bytes = self.fetch(&path, "track", id, referrer).await?;
        let (id, what) = (*id, format!("track {path}"));
        // A single-object Track can be hundreds of MB: hashed off the
        // async threads.
        tokio::task::spawn_blocking(move || {
            check_content(&path, &id, &bytes)?;
            if !TrackRoot::is_paged(&bytes) {
                return Ok(TrackObject::Single(bytes));
            }
            Ok(TrackObject::Paged(TrackRoot::decode(&bytes, &what)?))
        })
        .await
        .expect("track hashing panicked")
    }

    /// Fetches the Track object `id` that `referrer` names and, when it is
    /// a paged root, all its pages, each checked against its id.
    pub(crate) async fn track_bytes(
        &self,
        id: &ObjectId,
        referrer: &str,
    ) -> Result<TrackBytes, DatasetError> {
        let root = match self.track_object(id, referrer).await? {
            TrackObject::Single(bytes) => return Ok(TrackBytes::Single(bytes)),
            TrackObject::Paged(root) => root,
        };
        let referrer = format!("track {}", self.store().layout().track(id));
        // Ids collected first: a future holding a closure over borrowed
        // pages would not be `Send`.
        let name_ids: Vec<ObjectId> = root.pages.iter().map(|p| p.id).collect();
        let pack_ids: Vec<ObjectId> = root.pack_pages.iter().map(|p| p.id).collect();
        let names = self.pages(name_ids, &referrer);
        let packs = self.pages(pack_ids, &referrer);
        let (names, packs) = futures::try_join!(names, packs)?;
        Ok(TrackBytes::Paged { root, names, packs })
    }

    /// Sends the pages `ids` to `to` in order, each checked against its
    /// id, fetching a few ahead: a reader decodes each as it comes and
    /// drops it, so a Track's pages are never all in memory at once.
    /// Stops early, without an error, if `to` is closed.
    pub(crate) async fn send_pages(
        &self,
        ids: Vec<ObjectId>,
        referrer: &str,
        to: tokio::sync::mpsc::Sender<Bytes>,
    ) -> Result<(), DatasetError> {
        let mut pages = futures::stream::iter(ids)
            .map(|id| self.page(id, referrer))
            .buffered(METADATA_CONCURRENCY);
        while let Some(page) = pages.next().await {
            if to.send(page?).await.is_err() {
                break;
            }
        }
        Ok(())
    }

    /// Page `id`, checked against its id.
    pub(super) async fn page(&self, id: ObjectId, referrer: &str) -> Result<Bytes, DatasetError> {
        let path = self.store().layout().page(&id);
        let bytes = self.fetch(&path, "page", &id, referrer).await?;
        check_content(&path, &id, &bytes)?;
        Ok(bytes)
    }

    /// The pages `ids`, in order, each checked against its id.
    pub(crate) async fn pages(
        &self,
        ids: Vec<ObjectId>,
        referrer: &str,
    ) -> Result<Vec<Bytes>, DatasetError> {
        futures::stream::iter(ids)
            .map(|id| self.page(id, referrer))
            .buffered(METADATA_CONCURRENCY)
            .try_collect()
            .await
    }

    /// The single-object Track `id`, fetched as `bytes`, decoded (off the
    /// async threads: it can be hundreds of MB).
    pub(crate) async fn decode_single(
        &self,
        id: &ObjectId,
        bytes: Bytes,
    ) -> Result<Track, DatasetError> {
        let what = format!("track {}", self.store().layout().track(id));
        let decoded = tokio::task::spawn_blocking(move || Track::decode_owned(bytes, &what));
        Ok(decoded.await.expect("track decode panicked")?)
    }

    /// The Track object `id`, decoded from either form.
    pub async fn track(&self, id: &ObjectId, referrer: &str) -> Result<Track, DatasetError> {
        Ok(self.track_with_pages(id, referrer).await?.0)
    }

    /// The Track object `id`, decoded from either form, and the pages it
    /// names (none for a single object).
    pub(crate) async fn track_with_pages(
        &self,
        id: &ObjectId,
        referrer: &str,
    ) -> Result<(Track, Vec<ObjectId>), DatasetError> {
        let fetched = self.track_bytes(id, referrer).await?;
        let what = format!("track {}", self.store().layout().track(id));
        let layout = self.store().layout().clone();
        tokio::task::spawn_blocking(move || match fetched {
            TrackBytes::Single(bytes) => Ok((Track::decode_owned(bytes, &what)?, Vec::new())),
            TrackBytes::Paged { root, names, packs } => {
                let track = Track::decode_paged(
                    &root,
                    names.iter().map(|b| &b[..]),
                    packs.iter().map(|b| &b[..]),
                    &what,
                    |id| format!("page {}", layout.page(id)),
                )?;
                Ok((track, root.page_ids().collect()))
            }
        })
        .await
        .expect("track decode panicked")
    }

    /// The root of the Track object `id`, or `None` when it is a single
    /// object.
    pub(crate) async fn track_root(
        &self,
        id: &ObjectId,
        referrer: &str,
    ) -> Result<Option<TrackRoot>, DatasetError> {
        Ok(match self.track_object(id, referrer).await? {
            TrackObject::Single(_) => None,
            TrackObject::Paged(root) => Some(root),
        })
    }

    /// The pages of the Tracks `ids` (paged roots; single objects have
    /// none): pages a commit replacing one of them need not store again.
    pub(crate) async fn pages_of(
        &self,
        ids: impl IntoIterator<Item = ObjectId>,
        referrer: &str,
    ) -> Result<HashSet<ObjectId>, DatasetError> {
        let mut pages = HashSet::new();
        for id in ids {
            if let Some(root) = self.track_root(&id, referrer).await? {
                pages.extend(root.page_ids());
            }
        }
        Ok(pages)
    }

    /// The items of the Track `id`, already fetched as `object`, but those
    /// on name pages in `skip` (pages another Track lists too, which hold
    /// the same items there). A single-object Track gives all its items.
    pub(crate) async fn track_part(
        &self,
        id: &ObjectId,
        object: TrackObject,
        skip: &HashSet<ObjectId>,
    ) -> Result<TrackPart, DatasetError> {
        let root = match object {
            TrackObject::Paged(root) => root,
            TrackObject::Single(bytes) => {
                let (items, lengths, _) = self.decode_single(id, bytes).await?.into_parts();
                return Ok(TrackPart {
                    items,
                    root: None,
                    lengths,
                });
            }
        };
        let referrer = format!("track {}", self.store().layout().track(id));
        let wanted: Vec<usize> = (0..root.pages.len())
            .filter(|&i| !skip.contains(&root.pages[i].id))
            .collect();
        let names = self
            .pages(
                wanted.iter().map(|&i| root.pages[i].id).collect(),
                &referrer,
            )
            .await?;
        let layout = self.store().layout().clone();
        tokio::task::spawn_blocking(move || {
            let mut items = Vec::new();
            for (&i, bytes) in wanted.iter().zip(&names) {
                let what = format!("page {}", layout.page(&root.pages[i].id));
                items.extend(root.name_page(i, bytes, &what)?.items);
            }
            Ok(TrackPart {
                items,
                root: Some(root),
                lengths: PackLengths::default(),
            })
        })
        .await
        .expect("page decode panicked")
    }

    /// Lists in `root.pages` the name pages of the index pages of `root`
    /// that are not in `shared` (all its name pages when it has no index):
    /// what a comparison with another Track needs, as an index page both
    /// list lists the same name pages on both. The range of the last page
    /// of a run read is then checked against the first page of the next
    /// run read, not of the next index page: looser, and only the pages
    /// that differ are read.
    pub(crate) async fn list_unshared(
        &self,
        root: &mut TrackRoot,
        shared: &HashSet<ObjectId>,
        referrer: &str,
    ) -> Result<(), DatasetError> {
        if !root.needs_index() {
            return Ok(());
        }
        let wanted: Vec<usize> = (0..root.index.len())
            .filter(|&k| !shared.contains(&root.index[k].id))
            .collect();
        let ids = wanted.iter().map(|&k| root.index[k].id).collect();
        let bytes = self.pages(ids, referrer).await?;
        let layout = self.store().layout();
        let mut pages = Vec::new();
        for (&k, bytes) in wanted.iter().zip(&bytes) {
            let what = format!("page {}", layout.page(&root.index[k].id));
            pages.extend(root.index_page(k, bytes, &what)?);
        }
        root.pages = pages;
        Ok(())
    }

    /// Hands `each` every entry on the pages of the paged Track `id` (its
    /// root already fetched) that `seen` does not hold: live items' on name
    /// pages, retired ones' on pack pages. Every page it reads goes into
    /// `seen`, and the name pages of an index page in `seen` are not
    /// listed: a page holds the same entries wherever it is named, so a
    /// walk over many Tracks of one history reads each page once. Pages
    /// are fetched and decoded a few at a time, and dropped once handed.
    pub(crate) async fn unseen_entries(
        &self,
        id: &ObjectId,
        mut root: TrackRoot,
        seen: &mut HashSet<ObjectId>,
        each: &mut (dyn FnMut(&FragmentEntry) + Send),
    ) -> Result<(), DatasetError> {
        let referrer = format!("track {}", self.store().layout().track(id));
        self.list_unshared(&mut root, seen, &referrer).await?;
        seen.extend(root.index.iter().map(|i| i.id));
        let names: Vec<usize> = (0..root.pages.len())
            .filter(|&i| seen.insert(root.pages[i].id))
            .collect();
        let packs: Vec<ObjectId> = root
            .pack_pages
            .iter()
            .map(|p| p.id)
            .filter(|&id| seen.insert(id))
            .collect();
        let root = Arc::new(root);
        let layout = self.store().layout().clone();
        let name_entries = names.into_iter().map(|i| {
            let (root, layout, referrer) = (root.clone(), layout.clone(), &referrer);
            async move {
                let bytes = self.page(root.pages[i].id, referrer).await?;
                let decoded = tokio::task::spawn_blocking(move || {
                    let what = format!("page {}", layout.page(&root.pages[i].id));
                    let page = root.name_page(i, &bytes, &what)?;
                    Ok::<_, DatasetError>(page.items.into_iter().map(|i| i.entry).collect())
                });
                decoded.await.expect("page decode panicked")
            }
            .boxed()
        });
        let retired_entries = packs.into_iter().map(|id| {
            let (layout, referrer) = (layout.clone(), &referrer);
            async move {
                let bytes = self.page(id, referrer).await?;
                let what = format!("page {}", layout.page(&id));
                let records = read_pack_page(&bytes, &what)?;
                Ok(records.into_iter().flat_map(|r| r.retired).collect())
            }
            .boxed()
        });
        let mut pages = futures::stream::iter(name_entries.chain(retired_entries))
            .buffer_unordered(METADATA_CONCURRENCY);
        while let Some(entries) = pages.next().await {
            let entries: Vec<FragmentEntry> = entries?;
            entries.iter().for_each(&mut *each);
        }
        Ok(())
    }

    /// The lengths of the packs `items` of `part` are packed in: from the
    /// pack pages that record them, fetched for a paged Track.
    pub(crate) async fn pack_lengths(
        &self,
        part: &TrackPart,
        items: &[&TrackItem],
        referrer: &str,
    ) -> Result<PackLengths, DatasetError> {
        let Some(root) = &part.root else {
            return Ok(part.lengths.clone());
        };
        let mut wanted: Vec<usize> = items
            .iter()
            .filter(|i| matches!(i.entry.placement, Placement::Packed { .. }))
            .filter_map(|i| root.pack_page_of(&i.entry.address))
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        let ids = wanted.iter().map(|&i| root.pack_pages[i].id).collect();
        let mut lengths = PackLengths::default();
        for (&i, bytes) in wanted.iter().zip(self.pages(ids, referrer).await?) {
            let what = format!(
                "page {}",
                self.store().layout().page(&root.pack_pages[i].id)
            );
            for r in read_pack_page(&bytes, &what)? {
                lengths.insert(r.address, r.length);
            }
        }
        Ok(lengths)
    }

    /// Encodes `track` in the paged form.
    pub(crate) async fn encode_track(&self, track: Track) -> (Track, PagedTrack) {
        let shape = self.page_shape;
        tokio::task::spawn_blocking(move || {
            let paged = track.encode_paged(&shape);
            (track, paged)
        })
        .await
        .expect("track encode panicked")
    }

    /// Stores the paged Track `paged`: its pages not in `stored` (the pages
    /// of the Tracks it replaces, which the commit's parent still names),
    /// then its root, each page before the root; keeps the root, its name
    /// pages listed, for an edit of it. Returns the root's id.
    pub(crate) async fn put_paged(
        &self,
        paged: PagedTrack,
        stored: &HashSet<ObjectId>,
    ) -> Result<ObjectId, DatasetError> {
        let layout = self.store().layout();
        futures::stream::iter(
            paged
                .pages
                .into_iter()
                .filter(|(id, _)| !stored.contains(id)),
        )
        .map(|(id, bytes)| async move {
            self.store()
                .put_immutable(&layout.page(&id), Bytes::from(bytes))
                .await
        })
        .buffer_unordered(METADATA_CONCURRENCY)
        .try_collect::<Vec<bool>>()
        .await?;
        self.store()
            .put_immutable(&layout.track(&paged.id), Bytes::from(paged.root))
            .await?;
        self.roots.lock().insert(paged.id, Arc::new(paged.listed));
        Ok(paged.id)
    }

    /// Stores `track` in the paged form, skipping the pages in `stored`.
    pub(crate) async fn put_track(
        &self,
        track: Track,
        stored: &HashSet<ObjectId>,
    ) -> Result<ObjectId, DatasetError> {
        let (_, paged) = self.encode_track(track).await;
        self.put_paged(paged, stored).await
    }
}
