//! Views: a snapshot's items shown in the layouts training loaders read,
//! synthesized from the packs that hold them (nothing is copied).
//!
//! Both views group a timeline's items into *samples* the way WebDataset
//! does: an item's key is its path below the modality directory up to the
//! first dot of its base name (`cat/0001.jpg` → `cat/0001`), and every item
//! of the timeline with that key, across modalities, is a member of the
//! sample. [`webdataset`] shows the samples as tar shards, [`per_sample`]
//! as one directory per sample. `docs/SEMANTICS.md` states the rules.

pub mod per_sample;
mod samples;
mod shuffle;
pub mod webdataset;

use std::fmt;
use std::str::FromStr;

use crate::catalog::CatalogError;
use crate::tree::{Tree, TreeError};

/// A view and its options, as its spelling (`webdataset:bytes=256MiB`,
/// `samples`) names them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ViewSpec {
    /// `webdataset[:samples=N|bytes=B][,shuffle=SEED]`: tar shards.
    WebDataset(ShardOptions),
    /// `samples`: `/<timeline>/<key>/<member>`.
    PerSample,
}

crate::options! {
/// How samples are cut into shards and in which order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardOptions {
    pub cut: ShardCut,
    /// Samples in a seeded global permutation instead of sample order.
    pub shuffle: Option<u64>,
}
}

/// When a shard is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardCut {
    /// This many samples a shard (the last may hold fewer).
    Samples(u64),
    /// A shard takes samples while it stays within this many tar bytes; a
    /// sample larger than that is a shard of its own.
    Bytes(u64),
}

impl Default for ShardOptions {
    /// 1 GiB shards in sample order: WebDataset's advice is shards of a few
    /// hundred MB to a few GB, large enough to stream, small enough that
    /// many loader workers each have their own.
    fn default() -> Self {
        ShardOptions {
            cut: ShardCut::Bytes(1 << 30),
            shuffle: None,
        }
    }
}

/// A spelling that is not a view.
#[derive(Debug, thiserror::Error)]
#[error("view {spec:?}: {reason} (expected 'webdataset[:samples=N|bytes=SIZE][,shuffle=SEED]' or 'samples')")]
#[non_exhaustive]
pub struct ViewSpecError {
    spec: String,
    reason: String,
}

impl FromStr for ViewSpec {
    type Err = ViewSpecError;

    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let fail = |reason: String| ViewSpecError {
            spec: spec.to_string(),
            reason,
        };
        let (kind, options) = spec.split_once(':').unwrap_or((spec, ""));
        let options: Vec<(&str, &str)> = options
            .split(',')
            .filter(|o| !o.is_empty())
            .map(|o| {
                o.split_once('=')
                    .ok_or_else(|| fail(format!("option {o:?} has no value")))
            })
            .collect::<Result<_, _>>()?;
        match kind {
            "samples" => match options.first() {
                None => Ok(ViewSpec::PerSample),
                Some((key, _)) => Err(fail(format!("the samples view takes no option {key:?}"))),
            },
            "webdataset" => {
                let mut shards = ShardOptions::default();
                let mut cut = None;
                for (key, value) in options {
                    let number = || {
                        crate::units::parse_size(value)
                            .ok()
                            .filter(|&n| n > 0)
                            .ok_or_else(|| fail(format!("{key}={value} is not a positive number")))
                    };
                    match key {
                        "samples" | "bytes" if cut.is_some() => {
                            return Err(fail("give samples= or bytes=, not both".into()))
                        }
                        "samples" => cut = Some(ShardCut::Samples(number()?)),
                        "bytes" => cut = Some(ShardCut::Bytes(number()?)),
                        "shuffle" => {
                            let seed = value.parse().map_err(|_| {
                                fail(format!("shuffle={value} is not a seed (0 to 2^64-1)"))
                            })?;
                            shards.shuffle = Some(seed);
                        }
                        _ => return Err(fail(format!("unknown option {key:?}"))),
                    }
                }
                shards.cut = cut.unwrap_or(shards.cut);
                Ok(ViewSpec::WebDataset(shards))
            }
            _ => Err(fail(format!("unknown view {kind:?}"))),
        }
    }
}

impl fmt::Display for ViewSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ViewSpec::PerSample => write!(f, "samples"),
            ViewSpec::WebDataset(o) => {
                match o.cut {
                    ShardCut::Samples(n) => write!(f, "webdataset:samples={n}")?,
                    ShardCut::Bytes(n) => write!(f, "webdataset:bytes={n}")?,
                }
                match o.shuffle {
                    Some(seed) => write!(f, ",shuffle={seed}"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// The catalog of view `spec` over `tree`. Nothing is read until the
/// view is looked into.
pub fn open(
    tree: std::sync::Arc<Tree>,
    spec: &ViewSpec,
) -> std::sync::Arc<dyn crate::catalog::Catalog> {
    match spec {
        ViewSpec::WebDataset(options) => {
            std::sync::Arc::new(webdataset::ShardCatalog::new(tree, *options))
        }
        ViewSpec::PerSample => std::sync::Arc::new(per_sample::PerSampleCatalog::new(tree)),
    }
}

/// What `stat` shows of a view's directory.
fn dir_entry(mtime: std::time::SystemTime) -> crate::catalog::Entry {
    crate::catalog::Entry {
        kind: crate::kind::Kind::Dir,
        size: 0,
        perm: 0o555,
        mtime,
        volatile: false,
    }
}

/// A view's entry whose item's index page cannot be read (`EIO`).
fn catalog_error(e: TreeError) -> CatalogError {
    tracing::error!("{e}");
    CatalogError(e.to_string())
}

/// A view and where a mount shows it: the whole mount (`SPEC`), or a directory
/// of the mount's root (`.NAME=SPEC`: a hidden name, so `find`, `cp -r`
/// and `tar` of the mount see only the dataset).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedView {
    /// `None`: the view is the mount's root.
    pub name: Option<String>,
    pub spec: ViewSpec,
}

impl FromStr for NamedView {
    type Err = ViewSpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let Some(named) = s.strip_prefix('.') else {
            return Ok(NamedView {
                name: None,
                spec: s.parse()?,
            });
        };
        let fail = |reason: &str| ViewSpecError {
            spec: s.to_string(),
            reason: reason.to_string(),
        };
        let (name, spec) = named
            .split_once('=')
            .ok_or_else(|| fail("a named view is .NAME=SPEC"))?;
        let name = format!(".{name}");
        if name == "." || name == ".." || name.contains('/') || name == packfs_format::CONTROL_DIR {
            return Err(fail(&format!("{name:?} cannot name a view")));
        }
        Ok(NamedView {
            name: Some(name),
            spec: spec.parse()?,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use bytes::Bytes;
    use object_store::memory::InMemory;
    use object_store::path::Path;

    use super::*;
    use crate::cache::CacheOptions;
    use crate::catalog::Catalog;
    use crate::dataset::{Item, ItemSource, Snapshot, SnapshotTrack};
    use crate::kind::Kind;
    use crate::reader::Reader;
    use crate::store::Store;
    use packfs_format::{Attrs, Manifest, ObjectId};

    /// Items of timeline `train` by modality, their bytes, and a timeline
    /// `val`: names with dirs, without, long, non-ASCII, 0 bytes, two
    /// modalities with one extension, a sample missing a modality.
    pub(crate) fn items() -> Vec<(&'static str, &'static str, String, Vec<u8>)> {
        let mut out = Vec::new();
        let mut add = |t, m, n: String, len: usize| {
            let bytes = (0..len).map(|i| (i * 7 + n.len()) as u8).collect();
            out.push((t, m, n, bytes));
        };
        for i in 0..6 {
            add("train", "image", format!("cat/{i:04}.jpg"), 300 + i * 211);
            add("train", "caption", format!("cat/{i:04}.txt"), 20 + i);
        }
        add("train", "image", "dog/0001.jpg".into(), 513);
        add("train", "image", "x.seg.png".into(), 512);
        add("train", "caption", "x.txt".into(), 0);
        add("train", "thumb", "cat/0001.jpg".into(), 50);
        add(
            "train",
            "image",
            format!("{}/{}.jpg", "d".repeat(120), "f".repeat(110)),
            9,
        );
        add("train", "image", "chat/été/🐈.jpg".into(), 1000);
        add("val", "image", "0001.jpg".into(), 70);
        out
    }

    /// A snapshot of [`items`] and a reader of its store.
    pub(crate) async fn tree_and_reader() -> (Arc<Tree>, Reader) {
        let (tree, store) = tree_and_store().await;
        (tree, Reader::new(store, CacheOptions::default(), None))
    }

    /// A snapshot of [`items`] with each modality's items in one pack of a
    /// memory store, and the store.
    pub(crate) async fn tree_and_store() -> (Arc<Tree>, Store) {
        tree_and_store_of(items()).await
    }

    /// A snapshot of `items` (as [`items`] gives them) with each
    /// modality's items in one pack of a memory store, and the store.
    pub(crate) async fn tree_and_store_of(
        items: Vec<(&'static str, &'static str, String, Vec<u8>)>,
    ) -> (Arc<Tree>, Store) {
        let store = Store::from_object_store(Arc::new(InMemory::new()), Path::default(), "memory");
        // Items by (timeline, modality): one pack each.
        let mut packs = BTreeMap::new();
        for (t, m, n, bytes) in items {
            packs
                .entry((t, m))
                .or_insert_with(Vec::new)
                .push((n, bytes));
        }
        let mut tracks = Vec::new();
        for ((timeline, modality), mut list) in packs {
            // In the order a Track lists names.
            list.sort_by(|a, b| packfs_format::name_order(&a.0, &b.0));
            let path = Arc::new(Path::from(format!("packs/{timeline}-{modality}")));
            let pack: Vec<u8> = list.iter().flat_map(|(_, b)| b.clone()).collect();
            store
                .put_overwrite(&path, Bytes::from(pack.clone()))
                .await
                .unwrap();
            let mut offset = 0;
            let items = list
                .into_iter()
                .map(|(name, bytes)| {
                    let item = Item {
                        name,
                        size: bytes.len() as u64,
                        media_type: "application/octet-stream".into(),
                        source: ItemSource::Packed {
                            pack: path.clone(),
                            offset,
                            pack_len: pack.len() as u64,
                        },
                        attrs: Attrs {
                            mode: Some(0o640),
                            mtime_ns: Some(1_700_000_000_123_456_789),
                        },
                    };
                    offset += bytes.len() as u64;
                    item
                })
                .collect();
            tracks.push(SnapshotTrack {
                timeline: timeline.into(),
                modality: modality.into(),
                track_id: ObjectId::of(modality.as_bytes()),
                what: format!("track {modality}"),
                items,
                dirs: Vec::new(),
                pages: Vec::new(),
            });
        }
        let tree = Tree::build(Snapshot {
            manifest_id: ObjectId::of(b"m"),
            manifest: Manifest {
                parents: vec![],
                timelines: vec!["train".into(), "val".into()],
                tracks: vec![],
                ts_unix_ns: 1_000_000_000,
                writer: "test".into(),
            },
            tracks,
        })
        .unwrap();
        (Arc::new(tree), store)
    }

    /// Every file of `catalog` below `dir` as (path, id), depth first.
    /// Every child is also found by `lookup`, and a directory's `parent`
    /// is the directory listing it.
    pub(crate) fn files(catalog: &dyn Catalog, dir: u64, path: &str) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        let mut i = 0;
        while let Some((id, name)) = catalog.child(dir, i) {
            let child = format!("{path}/{name}");
            assert_eq!(catalog.lookup(dir, name.as_bytes()).unwrap(), Some(id));
            match catalog.entry(id).unwrap().unwrap().kind {
                Kind::Dir => {
                    assert_eq!(catalog.parent(id), Some(dir), "{child}");
                    out.extend(files(catalog, id, &child));
                }
                Kind::File => out.push((child, id)),
            }
            i += 1;
        }
        out
    }

    /// The whole of file `id`.
    pub(crate) async fn read(
        catalog: &dyn Catalog,
        reader: &Reader,
        id: u64,
        range: std::ops::Range<u64>,
    ) -> Vec<u8> {
        let extents = catalog.extents(id, range).unwrap().unwrap();
        reader.read(extents).await.unwrap().to_vec()
    }

    #[test]
    fn specs_parse_and_print_back() {
        for (text, printed) in [
            ("webdataset", "webdataset:bytes=1073741824"),
            ("webdataset:samples=100", "webdataset:samples=100"),
            (
                "webdataset:bytes=64MiB,shuffle=7",
                "webdataset:bytes=67108864,shuffle=7",
            ),
            (
                "webdataset:shuffle=18446744073709551615",
                "webdataset:bytes=1073741824,shuffle=18446744073709551615",
            ),
            ("samples", "samples"),
        ] {
            let spec: ViewSpec = text.parse().unwrap();
            assert_eq!(spec.to_string(), printed);
            assert_eq!(printed.parse::<ViewSpec>().unwrap(), spec);
        }
        for bad in [
            "tar",
            "webdataset:samples=0",
            "webdataset:samples=10,bytes=5",
            "webdataset:shuffle=-1",
            "webdataset:colour=red",
            "webdataset:samples",
            "samples:shuffle=1",
        ] {
            let e = bad.parse::<ViewSpec>().unwrap_err().to_string();
            assert!(e.contains(bad), "{e}");
        }
    }
}
