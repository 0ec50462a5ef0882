//! The Track of one (timeline, modality) of an import, written as its
//! files are packed: the source's rows are read on a blocking thread and
//! cut into uploads, and the packer's outputs, in the Track's order, go to
//! a [`TrackWriter`]. A new Track is written page by page, each page
//! stored as it is cut; an existing one is edited in batches of
//! [`EDIT_BATCH_PAGES`] pages' rows. Either way an import of any number of files holds
//! what is in flight, never a record per file.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use packfs_format::{
    Attrs, FragmentEntry, ObjectId, PageShape, PagedWriter, Placement, Special, Track, TrackDir,
    TrackEdit, TrackItem,
};
use tokio::task::JoinSet;

use super::source::{SourceRow, TrackSource};
use super::ImportError;
use crate::dataset::{Dataset, DatasetError, Separated};
use crate::packer::{media_type, FileReader, Input, Output, PackOptions, Packer, Stored, Units};
use crate::progress::Progress;
use crate::store::StoreError;

/// Upload units read ahead of the packer.
const UNITS_AHEAD: usize = 16;
/// Pages of a new Track being stored at once.
const PAGE_PUTS: usize = 16;
/// Pages' worth of rows an edit of an existing Track takes at a time
/// (65,536 rows, ~10 MB, with the default page shape): the pages a batch
/// falls in are edited once per batch, and a batch is what is held.
const EDIT_BATCH_PAGES: u64 = 16;

/// A Track an import stored, not committed yet.
pub(super) struct WrittenTrack {
    /// (timeline, modality).
    pub(super) key: Arc<(String, String)>,
    /// The Track of the Manifest it was built on.
    pub(super) base: Option<ObjectId>,
    pub(super) track: ObjectId,
    /// Its new items are those numbered `first..first + new` (`t_start`).
    pub(super) first: i64,
    pub(super) new: u64,
}

/// What writing Tracks cost.
#[derive(Debug, Default)]
pub(super) struct Counts {
    pub(super) items: u64,
    pub(super) bytes: u64,
    /// Data objects uploaded.
    pub(super) written: usize,
    /// Data objects the store held already.
    pub(super) reused: usize,
    /// Items stored apart from a pack the Track held cut another way.
    pub(super) separated: Separated,
}

/// A row of a Track as it goes through the packer.
enum Row {
    Dir {
        name: String,
        attrs: Attrs,
    },
    Item {
        name: String,
        attrs: Attrs,
        special: Option<Special>,
        hard_link: Option<(u64, u64)>,
    },
    /// Another name of the file of an `Item` row before it.
    Link {
        name: String,
        attrs: Attrs,
        of: (u64, u64),
    },
}

fn input(row: SourceRow) -> Input<Row> {
    match row {
        SourceRow::Dir { name, attrs } => Input::Pass(Row::Dir { name, attrs }),
        SourceRow::File {
            name,
            attrs,
            file,
            hard_link,
        } => {
            let special = file.special;
            Input::File(
                file,
                Row::Item {
                    name,
                    attrs,
                    special,
                    hard_link,
                },
            )
        }
        SourceRow::Link { name, attrs, of } => Input::Pass(Row::Link { name, attrs, of }),
    }
}

/// Packs the files of `source` and stores its Track: `base` (the Track of
/// the parent Manifest) with them added, or a new one.
pub(super) async fn write_track(
    dataset: &Dataset,
    reader: &dyn FileReader,
    source: &mut TrackSource,
    base: Option<ObjectId>,
    options: &PackOptions,
    progress: &dyn Progress,
    counts: &mut Counts,
) -> Result<WrittenTrack, ImportError> {
    let rows = source.rows();
    let (to_packer, mut units) = tokio::sync::mpsc::channel(UNITS_AHEAD);
    let pack = options.clone();
    let walk = tokio::task::spawn_blocking(move || {
        let mut failed = None;
        let inputs = rows.map_while(|row| match row {
            Ok(row) => Some(input(row)),
            Err(e) => {
                failed = Some(e);
                None
            }
        });
        for unit in Units::new(inputs, &pack) {
            // Closed: the packer failed, and says why.
            if to_packer.blocking_send(unit).is_err() {
                break;
            }
        }
        failed.map_or(Ok(()), Err)
    });
    let units = futures::stream::poll_fn(move |cx| units.poll_recv(cx));
    let mut packer = Packer::new(dataset, reader, options, progress, units);
    let mut writer = TrackWriter::new(match base {
        None => Target::New(NewTrack::new(dataset.page_shape())),
        Some(id) => Target::Edit(EditTrack::new(dataset, id)),
    });
    while let Some(out) = packer.next().await? {
        counts.bytes += out.stored.as_ref().map_or(0, |s| s.entry.byte_size);
        writer.add(dataset, &source.key, out).await?;
    }
    // A walk cut short by a problem must not leave a Track that lacks
    // the files after it.
    walk.await.expect("source walk panicked")?;
    counts.written += packer.written;
    counts.reused += packer.reused;
    let (track, first, new) = writer.finish(dataset, &source.key, counts).await?;
    Ok(WrittenTrack {
        key: source.key.clone(),
        base,
        track,
        first,
        new,
    })
}

/// Where the rows of a Track being imported go.
struct TrackWriter {
    to: Target,
    media_types: MediaTypes,
    /// The stored bytes of each file of several names met so far (by
    /// device and inode), for its other names.
    hard_links: HashMap<(u64, u64), (FragmentEntry, u64)>,
}

enum Target {
    New(NewTrack),
    Edit(EditTrack),
}

impl TrackWriter {
    fn new(target: Target) -> Self {
        TrackWriter {
            to: target,
            media_types: MediaTypes::default(),
            hard_links: HashMap::new(),
        }
    }

    /// Adds the item `name` of stored bytes `entry` (in a pack of
    /// `pack_length` bytes).
    async fn item(
        &mut self,
        dataset: &Dataset,
        key: &(String, String),
        (name, media_type, attrs): (String, Arc<str>, Attrs),
        (entry, pack_length): (FragmentEntry, u64),
    ) -> Result<(), ImportError> {
        let item = TrackItem {
            name,
            media_type,
            entry,
            attrs,
        };
        match &mut self.to {
            Target::New(track) => {
                track.item(item, pack_length)?;
                track.store_pages(dataset).await
            }
            Target::Edit(track) => track.item(dataset, key, item).await,
        }
    }

    async fn add(
        &mut self,
        dataset: &Dataset,
        key: &(String, String),
        out: Output<Row>,
    ) -> Result<(), ImportError> {
        let (name, media_type, attrs, stored) = match out.tag {
            Row::Dir { name, attrs } => {
                let dir = TrackDir { name, attrs };
                return match &mut self.to {
                    Target::New(track) => {
                        track.writer.dir(dir)?;
                        track.store_pages(dataset).await
                    }
                    Target::Edit(track) => track.dir(dataset, key, dir).await,
                };
            }
            Row::Item {
                name,
                attrs,
                special,
                hard_link,
            } => {
                let Stored { entry, pack_length } =
                    out.stored.expect("the packer stores every file");
                if let Some(id) = hard_link {
                    self.hard_links.insert(id, (entry.clone(), pack_length));
                }
                let media_type = match special {
                    Some(special) => special.media_type().into(),
                    None => self.media_types.of(&name),
                };
                (name, media_type, attrs, (entry, pack_length))
            }
            Row::Link { name, attrs, of } => {
                let stored = self.hard_links.get(&of).cloned().ok_or_else(|| {
                    ImportError::Changed(format!(
                        "{name}: a hard link whose first name was not imported before it"
                    ))
                })?;
                let media_type = self.media_types.of(&name);
                (name, media_type, attrs, stored)
            }
        };
        self.item(dataset, key, (name, media_type, attrs), stored)
            .await
    }

    /// Stores the rest of the Track: its id, the number of its first new
    /// item and how many there are.
    async fn finish(
        self,
        dataset: &Dataset,
        key: &(String, String),
        counts: &mut Counts,
    ) -> Result<(ObjectId, i64, u64), ImportError> {
        match self.to {
            Target::New(track) => {
                let new = track.next as u64;
                counts.items += new;
                Ok((track.finish(dataset).await?, 0, new))
            }
            Target::Edit(mut track) => {
                track.flush(dataset, key).await?;
                counts.items += track.items_in;
                counts.separated += track.separated;
                Ok((track.id, track.first.unwrap_or(0), track.new))
            }
        }
    }
}

/// One shared copy of each media type.
#[derive(Default)]
struct MediaTypes(HashMap<&'static str, Arc<str>>);

impl MediaTypes {
    fn of(&mut self, name: &str) -> Arc<str> {
        let media_type = media_type(name);
        self.0
            .entry(media_type)
            .or_insert_with(|| media_type.into())
            .clone()
    }
}

/// A new Track, written page by page: items are numbered in its order
/// from 0.
struct NewTrack {
    writer: PagedWriter<'static>,
    next: i64,
    /// Pages being stored.
    puts: JoinSet<Result<bool, StoreError>>,
}

impl NewTrack {
    fn new(shape: PageShape) -> Self {
        NewTrack {
            writer: PagedWriter::new(&shape),
            next: 0,
            puts: JoinSet::new(),
        }
    }

    /// Adds the next item, numbering it; `pack_length` is its pack's.
    fn item(&mut self, mut item: TrackItem, pack_length: u64) -> Result<(), ImportError> {
        item.entry.t_start = self.next;
        item.entry.t_end = self.next + 1;
        self.next += 1;
        if let Placement::Packed { .. } = item.entry.placement {
            self.writer.pack(item.entry.address, pack_length);
        }
        Ok(self.writer.item(item)?)
    }

    /// Starts storing the pages cut so far, waiting for earlier ones while
    /// [`PAGE_PUTS`] are in flight.
    async fn store_pages(&mut self, dataset: &Dataset) -> Result<(), ImportError> {
        for (id, bytes) in self.writer.take_pages() {
            while self.puts.len() >= PAGE_PUTS {
                self.stored_one().await?;
            }
            let store = dataset.store().clone();
            self.puts.spawn(async move {
                let path = store.layout().page(&id);
                store.put_immutable(&path, Bytes::from(bytes)).await
            });
        }
        Ok(())
    }

    async fn stored_one(&mut self) -> Result<(), ImportError> {
        if let Some(put) = self.puts.join_next().await {
            put.expect("page store panicked")
                .map_err(DatasetError::from)?;
        }
        Ok(())
    }

    /// Stores the last pages, then the root once every page is stored.
    async fn finish(mut self, dataset: &Dataset) -> Result<ObjectId, ImportError> {
        while !self.puts.is_empty() {
            self.stored_one().await?;
        }
        let paged = self.writer.finish()?;
        Ok(dataset.put_paged(paged, &HashSet::new()).await?)
    }
}

/// An existing Track, edited a batch of rows at a time.
pub(super) struct EditTrack {
    /// The Track as edited so far.
    pub(super) id: ObjectId,
    /// The number of the first new item, once one is added.
    pub(super) first: Option<i64>,
    /// Items given to it.
    pub(super) items_in: u64,
    /// Items it added: those given but for the ones the Track held as
    /// they are.
    pub(super) new: u64,
    /// Rows a batch takes.
    batch: usize,
    items: Vec<TrackItem>,
    /// Directories of the batch that record nothing.
    implied: Vec<String>,
    /// Directories of the batch with a mode or mtime.
    dirs: Vec<TrackDir>,
    /// The packs its earlier batches added items in, as the packer cut
    /// them: the packer stores a pack cut another way apart, so a later
    /// batch's items in one of them cut it the same way.
    packs: HashSet<ObjectId>,
    pub(super) separated: Separated,
}

impl EditTrack {
    pub(super) fn new(dataset: &Dataset, id: ObjectId) -> Self {
        let batch = dataset.page_shape().rows() * EDIT_BATCH_PAGES;
        EditTrack {
            id,
            first: None,
            items_in: 0,
            new: 0,
            batch: usize::try_from(batch).unwrap_or(usize::MAX),
            items: Vec::new(),
            implied: Vec::new(),
            dirs: Vec::new(),
            packs: HashSet::new(),
            separated: Separated::default(),
        }
    }

    /// Adds a directory; a batch of directories alone is stored once it
    /// is full, without the items pending (a Track of many empty
    /// directories).
    async fn dir(
        &mut self,
        dataset: &Dataset,
        key: &(String, String),
        dir: TrackDir,
    ) -> Result<(), ImportError> {
        // The modality directory is every Track's.
        if dir.name.is_empty() {
            return Ok(());
        }
        match dir.attrs == Attrs::default() {
            true => self.implied.push(dir.name),
            false => self.dirs.push(dir),
        }
        if self.implied.len() + self.dirs.len() >= self.batch {
            self.store(dataset, key, Vec::new()).await?;
        }
        Ok(())
    }

    /// Adds a new item, its entry not numbered yet. A full batch is
    /// stored first, unless the item is packed in the pack of the one
    /// before it: an edit takes a new pack's items all at once (they give
    /// its length).
    pub(super) async fn item(
        &mut self,
        dataset: &Dataset,
        key: &(String, String),
        item: TrackItem,
    ) -> Result<(), ImportError> {
        let packed = |i: &TrackItem| match i.entry.placement {
            Placement::Packed { .. } => Some(i.entry.address),
            _ => None,
        };
        let same_pack = self
            .items
            .last()
            .is_some_and(|last| packed(last).is_some() && packed(last) == packed(&item));
        if self.items.len() >= self.batch && !same_pack {
            self.flush(dataset, key).await?;
        }
        self.items_in += 1;
        self.items.push(item);
        Ok(())
    }

    /// Stores the Track with the batch added.
    pub(super) async fn flush(
        &mut self,
        dataset: &Dataset,
        key: &(String, String),
    ) -> Result<(), ImportError> {
        let items = std::mem::take(&mut self.items);
        self.store(dataset, key, items).await
    }

    /// Stores the Track with `items` and the directories pending added.
    async fn store(
        &mut self,
        dataset: &Dataset,
        (timeline, modality): &(String, String),
        items: Vec<TrackItem>,
    ) -> Result<(), ImportError> {
        if items.is_empty() && self.implied.is_empty() && self.dirs.is_empty() {
            return Ok(());
        }
        let mut implied: HashSet<String> = self.implied.drain(..).collect();
        implied.extend(ancestors(&items));
        for dir in &self.dirs {
            implied.remove(&dir.name);
        }
        let edit = TrackEdit {
            implied: implied.into_iter().collect(),
            dirs: std::mem::take(&mut self.dirs),
            ..TrackEdit::default()
        };
        let at = (timeline.as_str(), modality.as_str());
        let edited = dataset
            .edit_track_with(at, &self.id, edit, items, &self.packs)
            .await?;
        self.id = edited.id;
        let packed = edited.fresh.iter().filter_map(|i| match i.entry.placement {
            Placement::Packed { .. } => Some(i.entry.address),
            _ => None,
        });
        self.packs.extend(packed);
        if !edited.fresh.is_empty() {
            self.first.get_or_insert(edited.first);
        }
        self.new += edited.fresh.len() as u64;
        self.separated += edited.separated;
        Ok(())
    }
}

/// The id of a Track with no items, stored: what an import's new items
/// are added to when the modality they were imported into is gone.
pub(super) async fn empty_track(dataset: &Dataset) -> Result<ObjectId, DatasetError> {
    let empty = Track::new(Vec::new(), Vec::new(), "an empty Track")?;
    dataset.put_track(empty, &HashSet::new()).await
}

/// The directories above `items`, each once, but the modality directory.
fn ancestors(items: &[TrackItem]) -> HashSet<String> {
    let mut dirs = HashSet::new();
    for item in items {
        let mut name = item.name.as_str();
        while let Some((parent, _)) = name.rsplit_once('/') {
            if !dirs.insert(parent.to_owned()) {
                break;
            }
            name = parent;
        }
    }
    dirs
}
