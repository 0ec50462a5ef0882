//! The pages of a paged Track one at a time, for a reader that loads them
//! as it needs them (a mount's tree): a name page as an [`ItemTable`] whose
//! names, sizes and attributes come from the page alone, and a pack page's
//! lengths, which reading an item needs besides.

use packfs_format::{read_pack_page, ObjectId, PackLengths, TrackDir, TrackEntry, TrackRoot};

use super::items::ItemTable;
use super::{Dataset, DatasetError};

impl Dataset {
    /// Name page `index` of `root`, the root of the Track `entry` names:
    /// fetched, checked against its id and the root, and decoded. Its
    /// packs have no length (the pack pages have them) and its chunked
    /// items no chunks (their ItemManifests have them): its rows answer
    /// for names, sizes and attributes only.
    pub(crate) async fn name_page_table(
        &self,
        root: &TrackRoot,
        index: usize,
        entry: &TrackEntry,
    ) -> Result<(ItemTable, Vec<TrackDir>), DatasetError> {
        let layout = self.store().layout();
        let referrer = format!("track {}", layout.track(&entry.track));
        let id = root.pages[index].id;
        let bytes = self.page(id, &referrer).await?;
        let what = format!("page {}", layout.page(&id));
        let data_path = |a: &ObjectId| layout.data_object(&entry.timeline, &entry.modality, a);
        Ok(ItemTable::decode_page(
            root, index, &bytes, &what, data_path,
        )?)
    }

    /// The lengths of the packs pack page `index` of `root` (the root of
    /// the Track `entry` names) records.
    pub(crate) async fn pack_page_lengths(
        &self,
        root: &TrackRoot,
        index: usize,
        entry: &TrackEntry,
    ) -> Result<PackLengths, DatasetError> {
        let layout = self.store().layout();
        let referrer = format!("track {}", layout.track(&entry.track));
        let id = root.pack_pages[index].id;
        let bytes = self.page(id, &referrer).await?;
        let what = format!("page {}", layout.page(&id));
        let records = read_pack_page(&bytes, &what)?;
        Ok(records.into_iter().map(|r| (r.address, r.length)).collect())
    }
}
