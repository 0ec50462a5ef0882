//! New items packed in a pack that a Track already holds cut another way.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::sync::Mutex;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use packfs_format::{check_pack, FragmentEntry, ObjectId, Placement, TrackItem};
use tracing::info;

use super::{check_hash, Dataset, DatasetError};
use crate::store::StoreError;

/// Items copied out of packs at once (each holds its bytes until stored)…
const COPY_CONCURRENCY: usize = 8;
/// …fewer where they are big: about this many bytes in flight at most
/// (one item at a time above it), as an item in a pack may be as big as
/// the pack size limit.
const COPY_BUDGET: u64 = 64 << 20;

/// What [`Dataset::separate_twin_packs`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Separated {
    /// New items given an object of their own.
    pub items: usize,
    /// Objects uploaded for them.
    pub written: usize,
    /// Objects for them that were stored already.
    pub reused: usize,
}

impl std::ops::AddAssign for Separated {
    fn add_assign(&mut self, other: Separated) {
        self.items += other.items;
        self.written += other.written;
        self.reused += other.reused;
    }
}

impl Dataset {
    /// Stores apart the items of `new` whose pack the `existing` entries
    /// (live and retired, of the Track being extended) already use, cut
    /// another way.
    ///
    /// A pack is the plain concatenation of its items' bytes and is named
    /// by the hash of those bytes, so packs of different files can be one
    /// object: 1024 files of 4 KiB of zeros and 512 files of 8 KiB of
    /// zeros are both the same 4 MiB of zeros. A Track cannot hold one
    /// object cut two ways (a pack's entries are disjoint and tile it; `Track::new` refuses "entries overlap"), so a flush,
    /// import or rebase that adds such a pack to a Track already holding
    /// it would fail every time. The packer keeps the packs of one upload
    /// apart (`separate_twin_packs` in `packer.rs`); this does it against
    /// a Track's existing entries: where the union of both sets of
    /// (offset, size) ranges of a pack does not tile it (equal ranges are
    /// the same bytes and do), each new item in that pack is copied from
    /// the store (a ranged GET of the pack, which is durably written
    /// already, so no source file is needed) into an object of its own
    /// under its content address, and its entry becomes a whole-object
    /// one. Existing entries are left as they are. Every object is written
    /// before this returns, so before any Track names it. When the copied
    /// items cover their whole pack, the pack's hash is checked too, so a
    /// damaged pack is not copied into objects that look sound.
    ///
    /// `existing` is read before this returns its future, which so does
    /// not hold it.
    pub fn separate_twin_packs<'a, 'e>(
        &'a self,
        timeline: &'a str,
        modality: &'a str,
        existing: impl IntoIterator<Item = &'e FragmentEntry>,
        new: &'a mut [TrackItem],
    ) -> impl Future<Output = Result<Separated, DatasetError>> + Send + 'a {
        let twins = twin_packs(existing, new);
        self.store_apart(timeline, modality, twins, new)
    }

    /// Copies the items of `new` packed in one of `twins` (a pack with its
    /// length, if known) into objects of their own; see
    /// [`Dataset::separate_twin_packs`].
    pub(super) async fn store_apart(
        &self,
        timeline: &str,
        modality: &str,
        twins: HashMap<ObjectId, Option<u64>>,
        new: &mut [TrackItem],
    ) -> Result<Separated, DatasetError> {
        if twins.is_empty() {
            return Ok(Separated::default());
        }
        // The distinct ranges to copy, by pack, in offset order.
        let mut copies: BTreeMap<ObjectId, Vec<(u64, u64)>> = BTreeMap::new();
        for i in new.iter() {
            if let Placement::Packed { offset } = i.entry.placement {
                if twins.contains_key(&i.entry.address) {
                    copies
                        .entry(i.entry.address)
                        .or_default()
                        .push((offset, i.entry.byte_size));
                }
            }
        }
        let mut done = Separated::default();
        let mut moved: HashMap<(ObjectId, u64, u64), ObjectId> = HashMap::new();
        let stored = Mutex::new(HashSet::new());
        for (pack, mut ranges) in copies {
            ranges.sort_unstable();
            ranges.dedup();
            let copied = self
                .copy_out_of_pack(timeline, modality, pack, twins[&pack], &ranges, &stored)
                .await?;
            for ((offset, size), (address, fresh)) in ranges.iter().zip(copied) {
                moved.insert((pack, *offset, *size), address);
                match fresh {
                    Some(true) => done.written += 1,
                    Some(false) => done.reused += 1,
                    None => {}
                }
            }
            info!(
                "pack {} of {timeline}/{modality} is already in its Track cut another way; \
                 its {} new items are stored as objects of their own",
                pack.short(),
                new.iter()
                    .filter(|i| i.entry.address == pack
                        && matches!(i.entry.placement, Placement::Packed { .. }))
                    .count()
            );
        }
        for i in new.iter_mut() {
            if let Placement::Packed { offset } = i.entry.placement {
                let key = (i.entry.address, offset, i.entry.byte_size);
                if let Some(address) = moved.get(&key) {
                    i.entry.address = *address;
                    i.entry.placement = Placement::Whole;
                    done.items += 1;
                }
            }
        }
        Ok(done)
    }

    /// Copies the `ranges` (sorted, distinct) of `pack`, whose length is
    /// `len` if known, into objects of their own. Returns each one's
    /// address and whether it was uploaded (`None`: another range of this
    /// separation, with the same bytes, stored it).
    async fn copy_out_of_pack(
        &self,
        timeline: &str,
        modality: &str,
        pack: ObjectId,
        len: Option<u64>,
        ranges: &[(u64, u64)],
        stored: &Mutex<HashSet<ObjectId>>,
    ) -> Result<Vec<(ObjectId, Option<bool>)>, DatasetError> {
        let layout = self.store.layout();
        let pack_path = layout.data_object(timeline, modality, &pack);
        let largest = ranges.iter().map(|&(_, size)| size).max().unwrap_or(0);
        let at_once = usize::try_from(COPY_BUDGET / largest.max(1))
            .unwrap_or(usize::MAX)
            .clamp(1, COPY_CONCURRENCY);
        let copies = futures::stream::iter(ranges.iter().copied())
            .map(|(offset, size)| {
                let pack_path = &pack_path;
                async move {
                    let bytes = match size {
                        0 => Bytes::new(),
                        _ => {
                            self.read_pack_range(pack_path, pack, len, offset, size)
                                .await?
                        }
                    };
                    let address = ObjectId::of(&bytes);
                    let first = stored.lock().expect("not poisoned").insert(address);
                    let fresh = match first {
                        true => {
                            let path = layout.data_object(timeline, modality, &address);
                            Some(self.store.put_immutable(&path, bytes.clone()).await?)
                        }
                        false => None,
                    };
                    Ok::<_, DatasetError>((offset, bytes, address, fresh))
                }
            })
            .buffered(at_once);
        futures::pin_mut!(copies);
        let mut hasher = blake3::Hasher::new();
        let mut next = 0;
        let mut out = Vec::with_capacity(ranges.len());
        while let Some((offset, bytes, address, fresh)) = copies.try_next().await? {
            if offset == next {
                hasher.update(&bytes);
                next += bytes.len() as u64;
            }
            out.push((address, fresh));
        }
        if len == Some(next) {
            check_hash(&pack_path, &pack, ObjectId::from_hasher(&hasher))?;
        }
        Ok(out)
    }

    /// Bytes `offset..offset + size` of the pack at `path`, checked
    /// against its length `len` (if known) and the size asked for.
    async fn read_pack_range(
        &self,
        path: &object_store::path::Path,
        pack: ObjectId,
        len: Option<u64>,
        offset: u64,
        size: u64,
    ) -> Result<Bytes, DatasetError> {
        let read = self
            .store
            .get_range(path, offset..offset + size)
            .await
            .map_err(|e| match e {
                StoreError::NotFound { path } => DatasetError::Missing {
                    referrer: "a Track being extended".into(),
                    what: "pack",
                    id: pack,
                    path,
                },
                e => e.into(),
            })?;
        let expected = len.unwrap_or(read.object_size);
        if read.object_size != expected || read.bytes.len() as u64 != size {
            return Err(DatasetError::Length {
                path: path.to_string(),
                expected,
                actual: match read.object_size != expected {
                    true => read.object_size,
                    false => offset + read.bytes.len() as u64,
                },
            });
        }
        Ok(read.bytes)
    }
}

/// The packs of `new` items whose ranges, with those the `existing`
/// entries cut them into, do not tile them, each with the length its
/// existing entries give it (`None` if they do not tile it either).
pub(super) fn twin_packs<'e>(
    existing: impl IntoIterator<Item = &'e FragmentEntry>,
    new: &[TrackItem],
) -> HashMap<ObjectId, Option<u64>> {
    let mut cuts: HashMap<ObjectId, Vec<(u64, u64)>> = new
        .iter()
        .filter(|i| matches!(i.entry.placement, Placement::Packed { .. }))
        .map(|i| (i.entry.address, Vec::new()))
        .collect();
    let mut twins = HashMap::new();
    if cuts.is_empty() {
        return twins;
    }
    for e in existing {
        if let (Placement::Packed { offset }, Some(ranges)) =
            (e.placement, cuts.get_mut(&e.address))
        {
            ranges.push((offset, e.byte_size));
        }
    }
    for (pack, mut ranges) in cuts {
        if ranges.is_empty() {
            continue;
        }
        let len = check_pack(&mut ranges.clone()).ok();
        ranges.extend(new.iter().filter_map(|i| match i.entry.placement {
            Placement::Packed { offset } if i.entry.address == pack => {
                Some((offset, i.entry.byte_size))
            }
            _ => None,
        }));
        if check_pack(&mut ranges).is_err() {
            twins.insert(pack, len);
        }
    }
    twins
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::testing::item;

    #[test]
    fn only_packs_the_existing_entries_cut_another_way_are_twins() {
        let zeros = [0u8; 16];
        let existing: Vec<FragmentEntry> =
            (0..4).map(|i| item("x", &zeros, i * 4, 4).entry).collect();
        let same: Vec<TrackItem> = (0..4).map(|i| item("s", &zeros, i * 4, 4)).collect();
        assert!(twin_packs(&existing, &same).is_empty(), "the same cut");
        let part = [item("p", &zeros, 4, 4)];
        assert!(twin_packs(&existing, &part).is_empty(), "a range of it");
        let other = [item("a", &zeros, 0, 8), item("b", &zeros, 8, 8)];
        let twins = twin_packs(&existing, &other);
        assert_eq!(twins, HashMap::from([(ObjectId::of(&zeros), Some(16))]));
        let elsewhere = [item("a", b"other", 0, 8), item("b", b"other", 8, 8)];
        assert!(twin_packs(&existing, &elsewhere).is_empty(), "another pack");
        let mut whole = item("w", &zeros, 0, 16);
        whole.entry.placement = Placement::Whole;
        assert!(twin_packs(&existing, &[whole]).is_empty(), "not packed");
    }
}
