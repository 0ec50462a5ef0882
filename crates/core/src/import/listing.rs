//! The files of an import source, held from the scan on as the Track items
//! they become, so that an import of millions of files keeps one record of
//! each: the item its Track will hold.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use packfs_format::{Attrs, FragmentEntry, ObjectId, Placement, TrackItem};

use crate::packer::{media_type, SourceFiles};

/// Files grouped by the (timeline, modality) they join, as they are found;
/// `T` is what is kept of each (a [`TrackItem`], with whatever else its
/// reader needs).
pub(super) struct Groups<T> {
    groups: Vec<(String, String, Vec<T>)>,
    index: HashMap<(String, String), usize>,
    /// The group used last: files come directory by directory, so it is
    /// nearly always the next one's too.
    last: usize,
    /// One shared copy of each media type.
    media_types: HashMap<&'static str, Arc<str>>,
}

impl<T> Groups<T> {
    pub(super) fn new() -> Self {
        Groups {
            groups: Vec::new(),
            index: HashMap::new(),
            last: 0,
            media_types: HashMap::new(),
        }
    }

    /// The files of (`timeline`, `modality`) so far.
    pub(super) fn group(&mut self, timeline: &str, modality: &str) -> &mut Vec<T> {
        let hit = self
            .groups
            .get(self.last)
            .is_some_and(|(t, m, _)| t == timeline && m == modality);
        if !hit {
            let key = (timeline.to_owned(), modality.to_owned());
            let next = self.groups.len();
            self.last = *self.index.entry(key).or_insert(next);
            if self.last == next {
                self.groups
                    .push((timeline.to_owned(), modality.to_owned(), Vec::new()));
            }
        }
        &mut self.groups[self.last].2
    }

    /// The item of a file `name` of `size` bytes, its entry to be filled in
    /// once it is uploaded.
    pub(super) fn item(&mut self, name: String, size: u64, attrs: Attrs) -> TrackItem {
        let media_type = media_type(&name);
        let media_type = self
            .media_types
            .entry(media_type)
            .or_insert_with(|| media_type.into())
            .clone();
        TrackItem {
            name,
            media_type,
            entry: FragmentEntry {
                t_start: 0,
                t_end: 0,
                byte_size: size,
                address: ObjectId([0; 32]),
                placement: Placement::Whole,
            },
            attrs,
        }
    }

    /// The groups sorted by (timeline, modality), the files of each by
    /// `name`.
    pub(super) fn sorted(self, name: impl Fn(&T) -> &str) -> Vec<(String, String, Vec<T>)> {
        let mut groups = self.groups;
        groups.sort_unstable_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        for (.., files) in &mut groups {
            // Paths are unique, so an unstable sort (which needs no scratch
            // copy) orders them as a stable one would.
            files.sort_unstable_by(|a, b| name(a).cmp(name(b)));
            files.shrink_to_fit();
        }
        groups
    }
}

/// The new items of one (timeline, modality), in name order.
pub(super) struct NewItems {
    pub timeline: String,
    pub modality: String,
    pub items: Vec<TrackItem>,
}

/// The files of a source, sorted by (timeline, modality, name), as the
/// items they become: until they are uploaded, an item's
/// `entry.byte_size` is the file's size and the rest of the entry a
/// placeholder. The packer reads them as [`SourceFiles`]; a file's path is
/// rebuilt from the root and its item rather than kept.
pub(super) struct Listing {
    /// The source directory (or bundle location) paths are below.
    root: PathBuf,
    /// Whether paths start with the timeline (they do unless the import
    /// is given one).
    timeline_dirs: bool,
    /// The new items of each Track; none is empty.
    tracks: Vec<NewItems>,
    /// The index of each Track's first file among all files.
    starts: Vec<usize>,
    count: usize,
}

impl Listing {
    /// The listing of `tracks` (sorted, as [`Groups::sorted`] returns
    /// them), files found below `root`.
    pub(super) fn new(
        root: PathBuf,
        timeline_dirs: bool,
        tracks: Vec<(String, String, Vec<TrackItem>)>,
    ) -> Self {
        let tracks: Vec<NewItems> = tracks
            .into_iter()
            .map(|(timeline, modality, items)| NewItems {
                timeline,
                modality,
                items,
            })
            .collect();
        let mut starts = Vec::with_capacity(tracks.len());
        let mut count = 0;
        for track in &tracks {
            starts.push(count);
            count += track.items.len();
        }
        Listing {
            root,
            timeline_dirs,
            tracks,
            starts,
            count,
        }
    }

    /// The total size of the files.
    pub(super) fn bytes(&self) -> u64 {
        self.items().map(|i| i.entry.byte_size).sum()
    }

    /// The new items of each Track, given the entries the packer returned
    /// (parallel to the files).
    pub(super) fn into_tracks(mut self, entries: Vec<FragmentEntry>) -> Vec<NewItems> {
        let items = self.tracks.iter_mut().flat_map(|t| &mut t.items);
        for (item, entry) in items.zip(entries) {
            item.entry = entry;
        }
        self.tracks
    }

    fn items(&self) -> impl Iterator<Item = &TrackItem> {
        self.tracks.iter().flat_map(|t| &t.items)
    }

    /// The Track of file `i` and its item.
    fn locate(&self, i: usize) -> (&NewItems, &TrackItem) {
        let t = self.starts.partition_point(|&start| start <= i) - 1;
        let track = &self.tracks[t];
        (track, &track.items[i - self.starts[t]])
    }
}

impl SourceFiles for Listing {
    fn count(&self) -> usize {
        self.count
    }

    fn track(&self, i: usize) -> (&str, &str) {
        let track = self.locate(i).0;
        (&track.timeline, &track.modality)
    }

    fn size(&self, i: usize) -> u64 {
        self.locate(i).1.entry.byte_size
    }

    fn path(&self, i: usize) -> PathBuf {
        let (track, item) = self.locate(i);
        let mut path = self.root.clone();
        if self.timeline_dirs {
            path.push(&track.timeline);
        }
        path.push(&track.modality);
        path.push(&item.name);
        path
    }
}
