//! Where each kind of object lives under the dataset prefix
//! (see `docs/FORMAT.md`, "Object layout").

use object_store::path::Path;
use packfs_format::{ObjectId, RESERVED_PREFIX};

/// Fragment Tracks always use time bucket 0 (DreamDB 0022 §4).
const TIME_BUCKET: &str = "0";

/// Object paths of one dataset.
#[derive(Clone, Debug)]
pub struct Layout {
    root: Path,
}

impl Layout {
    pub(crate) fn new(root: Path) -> Self {
        Layout { root }
    }

    fn meta(&self, dir: &str, leaf: &str) -> Path {
        self.root.clone().join(RESERVED_PREFIX).join(dir).join(leaf)
    }

    /// A pack, single-item fragment, chunk or ItemManifest:
    /// `<timeline>/<modality>/0/<hash>`.
    pub fn data_object(&self, timeline: &str, modality: &str, id: &ObjectId) -> Path {
        self.root
            .clone()
            .join(timeline)
            .join(modality)
            .join(TIME_BUCKET)
            .join(id.to_hex())
    }

    /// `_packfs/manifests/<hash>`
    pub fn manifest(&self, id: &ObjectId) -> Path {
        self.meta("manifests", &id.to_hex())
    }

    /// `_packfs/tracks/<hash>`
    pub fn track(&self, id: &ObjectId) -> Path {
        self.meta("tracks", &id.to_hex())
    }

    /// `_packfs/pages/<hash>`: a page of a paged Track.
    pub fn page(&self, id: &ObjectId) -> Path {
        self.meta("pages", &id.to_hex())
    }

    /// `_packfs/refs/<name>`
    pub fn reference(&self, name: &str) -> Path {
        self.meta("refs", name)
    }

    /// `_packfs/expiry/<hash>`: a record of parent links `packfs expire`
    /// cut.
    pub fn expiry(&self, id: &ObjectId) -> Path {
        self.meta("expiry", &id.to_hex())
    }

    /// `_packfs/expiry`
    pub(crate) fn expiry_dir(&self) -> Path {
        self.root.clone().join(RESERVED_PREFIX).join("expiry")
    }

    /// `_packfs/leases/<name>`: a running mount's lease.
    pub fn lease(&self, name: &str) -> Path {
        self.meta("leases", name)
    }

    /// `_packfs/leases`
    pub(crate) fn leases_dir(&self) -> Path {
        self.root.clone().join(RESERVED_PREFIX).join("leases")
    }

    /// `_packfs/locks/<leaf>`: scratch objects (the conditional-put probe).
    pub fn lock(&self, leaf: &str) -> Path {
        self.meta("locks", leaf)
    }

    /// `_packfs/refs`
    pub(crate) fn refs_dir(&self) -> Path {
        self.root.clone().join(RESERVED_PREFIX).join("refs")
    }

    /// `_packfs/manifests`
    pub(crate) fn manifests_dir(&self) -> Path {
        self.root.clone().join(RESERVED_PREFIX).join("manifests")
    }

    /// The dataset's root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// What the object at `path` is, by where it lives.
    pub(crate) fn classify(&self, path: &Path) -> ObjectKind {
        let rel: Vec<String> = match path.prefix_match(&self.root) {
            Some(parts) => parts.map(|p| p.as_ref().to_string()).collect(),
            None => return ObjectKind::Other,
        };
        let rel: Vec<&str> = rel.iter().map(String::as_str).collect();
        let hex = |s: &str| ObjectId::from_hex(s).ok();
        match rel[..] {
            [RESERVED_PREFIX, "manifests", leaf] => {
                hex(leaf).map_or(ObjectKind::Other, ObjectKind::Manifest)
            }
            [RESERVED_PREFIX, "tracks", leaf] => {
                hex(leaf).map_or(ObjectKind::Other, ObjectKind::Track)
            }
            [RESERVED_PREFIX, "pages", leaf] => {
                hex(leaf).map_or(ObjectKind::Other, ObjectKind::Page)
            }
            [tl, _, TIME_BUCKET, leaf] if tl != RESERVED_PREFIX => {
                hex(leaf).map_or(ObjectKind::Other, |_| ObjectKind::Data)
            }
            _ => ObjectKind::Other,
        }
    }
}

/// The kinds of object a dataset holds, for garbage collection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ObjectKind {
    Manifest(ObjectId),
    Track(ObjectId),
    /// A page of a paged Track.
    Page(ObjectId),
    /// A pack, whole object, chunk or ItemManifest.
    Data,
    /// Refs, locks and anything packfs did not write.
    Other,
}
