//! The spool's journal: the changes of a read-write mount not committed
//! yet, appended as they happen, so a mount that dies (`kill -9`, a crash)
//! loses nothing that was closed: the next mount of the same spool replays
//! the journal onto the Manifest it names and commits.
//!
//! The file is a sequence of CBOR arrays, one per record, appended with one
//! `write` each (a process crash keeps every completed `write`; `fsync`
//! through the mount commits to the store, which is the durable copy). A
//! torn last record is ignored. After each commit the journal is rewritten
//! as `base` (the new commit) followed by the records made since the
//! flush's snapshot.

use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use ciborium::value::Value;
use packfs_format::{Attrs, ObjectId, Special};
use parking_lot::{Mutex, RwLock, RwLockReadGuard};

/// One journaled change. Paths are `/`-separated from the mount's root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Record {
    /// The Manifest the records after it apply to.
    Base(ObjectId),
    /// The file at `path` is being written in spool file `file`; unless a
    /// `Put` of that file follows, it was never closed.
    Open {
        path: String,
        file: String,
    },
    /// The write session writing spool file `file` ended without changing
    /// its file (which keeps the version it had): the `Open` of `file`
    /// leaves nothing to recover.
    Ended {
        file: String,
    },
    /// The file at `path` is complete with the bytes of spool file `file`,
    /// with mode and mtime `attrs`; `special` if it is not a regular file
    /// (a link's bytes are its target).
    Put {
        path: String,
        file: String,
        size: u64,
        attrs: Attrs,
        special: Option<Special>,
    },
    Unlink {
        path: String,
    },
    Mkdir {
        path: String,
        mode: Option<u16>,
    },
    Rmdir {
        path: String,
    },
    Rename {
        from: String,
        to: String,
    },
    /// The file at `from` has the name `to` too (a hard link).
    Link {
        from: String,
        to: String,
    },
    /// `chmod`/`utimens` of the file or directory at `path`.
    SetAttr {
        path: String,
        mode: Option<u16>,
        mtime_ns: Option<i64>,
    },
}

impl Record {
    fn to_cbor(&self) -> Value {
        let text = |s: &str| Value::Text(s.to_string());
        Value::Array(match self {
            Record::Base(id) => vec![text("base"), text(&id.to_hex())],
            Record::Put {
                path,
                file,
                size,
                attrs,
                special,
            } => {
                let mut record = vec![
                    text("put"),
                    text(path),
                    text(file),
                    Value::Integer((*size).into()),
                    optional(attrs.mode),
                    optional(attrs.mtime_ns),
                ];
                if let Some(special) = special {
                    record.push(text(&special.media_type()));
                }
                record
            }
            Record::Open { path, file } => vec![text("open"), text(path), text(file)],
            Record::Ended { file } => vec![text("ended"), text(file)],
            Record::Unlink { path } => vec![text("unlink"), text(path)],
            Record::Mkdir { path, mode } => vec![text("mkdir"), text(path), optional(*mode)],
            Record::Rmdir { path } => vec![text("rmdir"), text(path)],
            Record::Rename { from, to } => vec![text("rename"), text(from), text(to)],
            Record::Link { from, to } => vec![text("link"), text(from), text(to)],
            Record::SetAttr {
                path,
                mode,
                mtime_ns,
            } => vec![
                text("setattr"),
                text(path),
                optional(*mode),
                optional(*mtime_ns),
            ],
        })
    }

    fn from_cbor(v: &Value) -> Option<Record> {
        let items = v.as_array()?;
        let text = |i: usize| items.get(i)?.as_text().map(str::to_string);
        // An optional integer: null or missing (a record written before the
        // field existed) is `None`; anything else must fit `T`.
        fn int<T: TryFrom<i128>>(items: &[Value], i: usize) -> Option<Option<T>> {
            match items.get(i) {
                None | Some(Value::Null) => Some(None),
                Some(v) => Some(Some(T::try_from(v.as_integer()?.into()).ok()?)),
            }
        }
        Some(match text(0)?.as_str() {
            "base" => Record::Base(ObjectId::from_hex(&text(1)?).ok()?),
            "put" => Record::Put {
                path: text(1)?,
                file: text(2)?,
                size: u64::try_from(items.get(3)?.as_integer()?).ok()?,
                attrs: Attrs {
                    mode: int(items, 4)?,
                    mtime_ns: int(items, 5)?,
                },
                special: match items.get(6) {
                    None => None,
                    Some(v) => Some(Special::of_media_type(v.as_text()?)?),
                },
            },
            "open" => Record::Open {
                path: text(1)?,
                file: text(2)?,
            },
            "ended" => Record::Ended { file: text(1)? },
            "unlink" => Record::Unlink { path: text(1)? },
            "mkdir" => Record::Mkdir {
                path: text(1)?,
                mode: int(items, 2)?,
            },
            "rmdir" => Record::Rmdir { path: text(1)? },
            "rename" => Record::Rename {
                from: text(1)?,
                to: text(2)?,
            },
            "link" => Record::Link {
                from: text(1)?,
                to: text(2)?,
            },
            "setattr" => Record::SetAttr {
                path: text(1)?,
                mode: int(items, 2)?,
                mtime_ns: int(items, 3)?,
            },
            _ => return None,
        })
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        ciborium::into_writer(&self.to_cbor(), &mut out).expect("writing to a Vec cannot fail");
        out
    }
}

fn optional<T: Into<ciborium::value::Integer>>(value: Option<T>) -> Value {
    value.map_or(Value::Null, |v| Value::Integer(v.into()))
}

/// The records of the journal at `path` (empty if there is none), up to
/// the first one that does not decode (a torn append).
pub(super) fn read(path: &Path) -> std::io::Result<Vec<Record>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut reader = BufReader::new(file);
    let mut records = Vec::new();
    while let Ok(value) = ciborium::from_reader::<Value, _>(&mut reader) {
        match Record::from_cbor(&value) {
            Some(r) => records.push(r),
            None => break,
        }
    }
    Ok(records)
}

/// An open journal, appended to by one mount.
#[derive(Debug)]
pub(crate) struct Journal {
    path: PathBuf,
    /// The file and its length (records before a length are covered by a
    /// flush that took that length as its mark).
    file: Mutex<(File, u64)>,
    /// Its length when last rewritten (0: unknown) and the records then
    /// carried after its base, so a flush can tell whether it holds what a
    /// rewrite now would.
    rewritten: Mutex<(u64, Vec<Record>)>,
    /// Held shared around a change and its record, and exclusively by a
    /// flush taking its snapshot and mark (see [`Journal::snapshot`]).
    gate: RwLock<()>,
}

impl Journal {
    /// Starts the journal at `path` afresh: one `Base(base)` record.
    pub(super) fn create(path: &Path, base: ObjectId) -> std::io::Result<Journal> {
        let bytes = Record::Base(base).encode();
        let file = replace(path, &bytes)?;
        Ok(Journal {
            path: path.to_path_buf(),
            file: Mutex::new((file, bytes.len() as u64)),
            rewritten: Mutex::new((bytes.len() as u64, Vec::new())),
            gate: RwLock::new(()),
        })
    }

    /// Opens the journal at `path` to append to what it holds.
    pub(super) fn open(path: &Path) -> std::io::Result<Journal> {
        let file = OpenOptions::new().append(true).open(path)?;
        let len = file.metadata()?.len();
        Ok(Journal {
            path: path.to_path_buf(),
            file: Mutex::new((file, len)),
            rewritten: Mutex::new((0, Vec::new())),
            gate: RwLock::new(()),
        })
    }

    /// Appends `record`.
    pub(super) fn append(&self, record: &Record) -> std::io::Result<()> {
        let bytes = record.encode();
        let mut guard = self.file.lock();
        guard.0.write_all(&bytes)?;
        guard.1 += bytes.len() as u64;
        Ok(())
    }

    /// Hold this around a change of the namespace (or of what the journal
    /// says about an open file) and the append of its record: a flush's
    /// snapshot then sees either both or neither, so no record after its
    /// mark repeats a change the snapshot already holds (replaying a
    /// `Rename` twice would move whatever took the old name since).
    pub(crate) fn changing(&self) -> RwLockReadGuard<'_, ()> {
        self.gate.read()
    }

    /// Runs `snapshot` (a flush's export) while no change is under way,
    /// and returns it with the journal's length then: the records the
    /// snapshot covers are exactly those before that mark.
    pub(super) fn snapshot<T>(&self, snapshot: impl FnOnce() -> T) -> (T, u64) {
        let _quiet = self.gate.write();
        let taken = snapshot();
        (taken, self.file.lock().1)
    }

    /// Whether the journal up to `mark` holds other records than a
    /// rewrite carrying `carried` would: records appended since it was
    /// last rewritten, or other carried ones (of write sessions since
    /// ended).
    pub(super) fn differs(&self, mark: u64, carried: &[Record]) -> bool {
        let rewritten = self.rewritten.lock();
        mark != rewritten.0 || carried != rewritten.1.as_slice()
    }

    /// After a commit of everything up to `mark`: `Base(base)`, then
    /// `carried` (changes of the snapshot the commit left for later), then
    /// the records appended since `mark`.
    pub(crate) fn compact(
        &self,
        base: ObjectId,
        carried: &[Record],
        mark: u64,
    ) -> std::io::Result<()> {
        let mut guard = self.file.lock();
        let mut tail = Vec::new();
        let mut old = File::open(&self.path)?;
        std::io::copy(&mut (&mut old).take(mark), &mut std::io::sink())?;
        old.read_to_end(&mut tail)?;
        let mut bytes = Record::Base(base).encode();
        for r in carried {
            bytes.extend_from_slice(&r.encode());
        }
        let rewritten = bytes.len() as u64;
        bytes.extend_from_slice(&tail);
        let file = replace(&self.path, &bytes)?;
        *guard = (file, bytes.len() as u64);
        *self.rewritten.lock() = (rewritten, carried.to_vec());
        Ok(())
    }
}

/// Writes `bytes` as the new content of `path` (a synced temporary file
/// renamed over it) and opens it for appending.
fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<File> {
    let tmp = path.with_extension("tmp");
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    OpenOptions::new().append(true).open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_a_torn_tail_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal");
        let base = ObjectId::of(b"base");
        let j = Journal::create(&path, base).unwrap();
        let records = [
            Record::Mkdir {
                path: "t/m/d".into(),
                mode: None,
            },
            Record::Open {
                path: "t/m/d/f".into(),
                file: "7".into(),
            },
            Record::Ended { file: "6".into() },
            Record::Put {
                path: "t/m/d/f".into(),
                file: "7".into(),
                size: 1234,
                attrs: Attrs {
                    mode: Some(0o640),
                    mtime_ns: None,
                },
                special: None,
            },
            Record::Put {
                path: "t/m/dev".into(),
                file: "8".into(),
                size: 0,
                attrs: Attrs::default(),
                special: Some(Special::BlockDevice(2049)),
            },
            Record::Rename {
                from: "t/m/d/f".into(),
                to: "t/m/g".into(),
            },
            Record::Link {
                from: "t/m/g".into(),
                to: "t/m/h".into(),
            },
            Record::Unlink {
                path: "t/m/x".into(),
            },
            Record::Rmdir {
                path: "t/m/d".into(),
            },
            Record::SetAttr {
                path: "t/m/g".into(),
                mode: Some(0o600),
                mtime_ns: Some(-5),
            },
            Record::SetAttr {
                path: "t/m".into(),
                mode: None,
                mtime_ns: Some(1_700_000_000_000_000_000),
            },
        ];
        for r in &records {
            j.append(r).unwrap();
        }
        let mut expected = vec![Record::Base(base)];
        expected.extend(records.iter().cloned());
        assert_eq!(read(&path).unwrap(), expected);

        // A crash in the middle of an append leaves a torn record.
        let mut torn = Record::Unlink {
            path: "t/m/y".into(),
        }
        .encode();
        torn.truncate(torn.len() - 2);
        OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(&torn)
            .unwrap();
        assert_eq!(read(&path).unwrap(), expected);
    }

    #[test]
    fn compaction_keeps_carried_records_and_those_after_the_mark() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal");
        let j = Journal::create(&path, ObjectId::of(b"a")).unwrap();
        j.append(&Record::Mkdir {
            path: "t/m/1".into(),
            mode: None,
        })
        .unwrap();
        let ((), mark) = j.snapshot(|| ());
        j.append(&Record::Mkdir {
            path: "t/m/2".into(),
            mode: None,
        })
        .unwrap();
        let new_base = ObjectId::of(b"b");
        let carried = Record::Unlink {
            path: "t/m/c".into(),
        };
        j.compact(new_base, std::slice::from_ref(&carried), mark)
            .unwrap();
        j.append(&Record::Mkdir {
            path: "t/m/3".into(),
            mode: None,
        })
        .unwrap();
        assert_eq!(
            read(&path).unwrap(),
            vec![
                Record::Base(new_base),
                carried,
                Record::Mkdir {
                    path: "t/m/2".into(),
                    mode: None,
                },
                Record::Mkdir {
                    path: "t/m/3".into(),
                    mode: None,
                },
            ]
        );
    }
}
