//! The core, driven as the kernel would: the harness stands in for the
//! kernel where the kernel answers without asking the filesystem (path
//! walks, `EEXIST` on create and mkdir of a name it found, `rename` of an
//! entry onto itself, kind mismatches of rename, unlink and rmdir).

use std::time::Duration;

use packfs_core::kind::Kind;
use packfs_fs::fs::{Opened, SetAttr, Stat};
use packfs_fs::namespace::{Ino, ROOT_INO};
use packfs_fs::write::WriteOptions;

use crate::common::core::{Core, Fixture};
use crate::errno::E;
use crate::model::{mtime, name_of, parent_of, within, Model};
use crate::operations::{Data, Op, H};

fn write_options() -> WriteOptions {
    WriteOptions::default().idle_flush(Duration::from_secs(3600))
}

pub fn mount(fixture: &Fixture) -> Core {
    fixture.mount_with(1, write_options())
}

/// The node at `path`.
pub fn resolve(core: &Core, path: &str) -> Result<Stat, E> {
    let fs = core.fs();
    let mut stat = fs.getattr(ROOT_INO)?;
    for name in path.split('/').filter(|n| !n.is_empty()) {
        stat = fs.lookup(stat.attr.ino, name.as_bytes())?;
    }
    Ok(stat)
}

/// The directory holding `path`, and the entry `path` names in it.
fn resolve_entry<'a>(core: &Core, path: &'a str) -> Result<(Ino, &'a [u8], Option<Stat>), E> {
    let parent = resolve(core, parent_of(path))?;
    if parent.attr.kind != Kind::Dir {
        return Err(E::NotDir);
    }
    let name = name_of(path).as_bytes();
    match core.fs().lookup(parent.attr.ino, name) {
        Ok(stat) => Ok((parent.attr.ino, name, Some(stat))),
        Err(e) => match E::from(e) {
            E::NoEnt => Ok((parent.attr.ino, name, None)),
            e => Err(e),
        },
    }
}

/// A file to open: the kernel opens no directory for writing.
fn resolve_file(core: &Core, path: &str) -> Result<Ino, E> {
    match resolve(core, path)? {
        s if s.attr.kind == Kind::Dir => Err(E::IsDir),
        s => Ok(s.attr.ino),
    }
}

pub fn handle(opened: Opened) -> u64 {
    match opened {
        Opened::Handle { fh, .. } => fh,
        Opened::Stateless | Opened::Backing { .. } => {
            panic!("a read-write mount opened a file without a daemon handle")
        }
    }
}

/// A handle opened by an operation.
pub struct NewHandle {
    pub fh: u64,
    pub ino: Ino,
}

pub fn close(core: &Core, fh: u64) -> Result<(), E> {
    core.fs().flush(fh)?;
    core.fs().release(fh);
    Ok(())
}

fn write_all(core: &Core, fh: u64, offset: u64, data: Data) -> Result<(), E> {
    if data.len > 0 {
        let written = core.block_on(core.fs().write(fh, offset, &data.bytes()))?;
        assert_eq!(written, u32::from(data.len));
    }
    Ok(())
}

/// Reads up to `len` bytes of `ino` at `offset`.
pub fn read(core: &Core, ino: Ino, offset: u64, len: u32) -> Result<Vec<u8>, E> {
    Ok(core
        .block_on(core.fs().read(ino, 0, offset, len, &mut Vec::new()))?
        .to_vec())
}

/// Runs `op` on the core; `model` (as before the operation) names the
/// handles. Returns bytes read and a handle opened, if any.
pub fn run_on_core(
    core: &Core,
    model: &Model,
    op: &Op,
) -> Result<(Option<Vec<u8>>, Option<NewHandle>), E> {
    let fs = core.fs();
    let picked = |h: &H, write: bool| model.pick(h, write).map(|i| &model.handles[i]);
    let mut bytes = None;
    let mut opened = None;
    match op {
        Op::Create {
            path,
            data,
            perm,
            keep_open,
        } => {
            let (parent, name, existing) = resolve_entry(core, path.path())?;
            if existing.is_some() {
                return Err(E::Exist); // O_EXCL: the kernel found it
            }
            let (stat, fh) = fs.create(parent, name, *perm)?;
            write_all(core, fh, 0, *data)?;
            match keep_open {
                true => {
                    opened = Some(NewHandle {
                        fh,
                        ino: stat.attr.ino,
                    })
                }
                false => close(core, fh)?,
            }
        }
        Op::Write { path, offset, data } => {
            let ino = resolve_file(core, path.path())?;
            let fh = handle(core.block_on(fs.open(ino, true, false))?);
            write_all(core, fh, u64::from(*offset), *data)?;
            close(core, fh)?;
        }
        Op::OpenWrite { path, truncate } => {
            let ino = resolve_file(core, path.path())?;
            let fh = handle(core.block_on(fs.open(ino, true, *truncate))?);
            opened = Some(NewHandle { fh, ino });
        }
        Op::OpenRead { path } => {
            let stat = resolve(core, path.path())?;
            let fh = handle(core.block_on(fs.open(stat.attr.ino, false, false))?);
            match stat.volatile {
                true => close(core, fh)?, // the stats file
                false => {
                    opened = Some(NewHandle {
                        fh,
                        ino: stat.attr.ino,
                    })
                }
            }
        }
        Op::HandleWrite { h, offset, data } => {
            if let Some(h) = picked(h, true) {
                write_all(core, h.fh, u64::from(*offset), *data)?;
            }
        }
        Op::HandleRead { h, offset, len } => {
            if let Some(h) = picked(h, false) {
                bytes = Some(read(core, h.ino, u64::from(*offset), u32::from(*len))?);
            }
        }
        Op::HandleTruncate { h, size } => {
            if let Some(h) = picked(h, true) {
                let set = SetAttr {
                    size: Some(u64::from(*size)),
                    ..SetAttr::default()
                };
                core.block_on(fs.setattr(h.ino, Some(h.fh), set))?;
            }
        }
        Op::HandleFlush { h } => {
            if let Some(h) = picked(h, false) {
                fs.flush(h.fh)?;
            }
        }
        Op::HandleClose { h } => {
            if let Some(h) = picked(h, false) {
                close(core, h.fh)?;
            }
        }
        Op::Truncate { path, size } => {
            let ino = resolve_file(core, path.path())?;
            let set = SetAttr {
                size: Some(u64::from(*size)),
                ..SetAttr::default()
            };
            core.block_on(fs.setattr(ino, None, set))?;
        }
        Op::Rename { from, to } => {
            let (from_dir, from_name, source) = resolve_entry(core, from.path())?;
            let (to_dir, to_name, target) = resolve_entry(core, to.path())?;
            let source = source.ok_or(E::NoEnt)?;
            // The kernel's own checks, made before it asks the filesystem.
            let is_dir = |s: &Stat| s.attr.kind == Kind::Dir;
            if target.is_some_and(|t| t.attr.ino == source.attr.ino) {
                return Ok((None, None));
            }
            if is_dir(&source) && within(to.path(), from.path()) {
                return Err(E::Inval);
            }
            if target.is_some() && within(from.path(), to.path()) {
                return Err(E::NotEmpty);
            }
            match (is_dir(&source), target.as_ref().map(is_dir)) {
                (true, Some(false)) => return Err(E::NotDir),
                (false, Some(true)) => return Err(E::IsDir),
                _ => {}
            }
            fs.rename((from_dir, from_name), (to_dir, to_name), Default::default())?;
        }
        Op::Unlink { path } => {
            let (parent, name, node) = resolve_entry(core, path.path())?;
            match node {
                None => return Err(E::NoEnt),
                Some(s) if s.attr.kind == Kind::Dir => return Err(E::IsDir),
                Some(_) => fs.unlink(parent, name)?,
            }
        }
        Op::Mkdir { path, perm } => {
            let (parent, name, existing) = resolve_entry(core, path.path())?;
            if existing.is_some() {
                return Err(E::Exist);
            }
            fs.mkdir(parent, name, *perm)?;
        }
        Op::Rmdir { path } => {
            let (parent, name, node) = resolve_entry(core, path.path())?;
            match node {
                None => return Err(E::NoEnt),
                Some(s) if s.attr.kind != Kind::Dir => return Err(E::NotDir),
                Some(_) => fs.rmdir(parent, name)?,
            }
        }
        Op::Chmod { path, perm } => {
            let ino = resolve(core, path.path())?.attr.ino;
            let set = SetAttr {
                perm: Some(*perm),
                ..SetAttr::default()
            };
            core.block_on(fs.setattr(ino, None, set))?;
        }
        Op::Utimens { path, secs } => {
            let ino = resolve(core, path.path())?.attr.ino;
            let set = SetAttr {
                mtime: Some(mtime(*secs)),
                ..SetAttr::default()
            };
            core.block_on(fs.setattr(ino, None, set))?;
        }
        Op::Fsync { path } => {
            let stat = resolve(core, path.path())?;
            let ino = (stat.attr.kind == Kind::File).then_some(stat.attr.ino);
            core.block_on(fs.fsync(ino))?;
        }
        Op::Read { path, offset, len } => {
            let ino = resolve_file(core, path.path())?;
            bytes = Some(read(core, ino, u64::from(*offset), u32::from(*len))?);
        }
        Op::ReadAll { path } => {
            let ino = resolve_file(core, path.path())?;
            let size = fs.getattr(ino)?.attr.size;
            bytes = Some(read(core, ino, 0, size as u32 + 1)?);
        }
        Op::Stats => {
            let stats = resolve(core, ".packfs/stats")?;
            let opened = core.block_on(fs.open(stats.attr.ino, false, false))?;
            assert!(
                matches!(
                    opened,
                    Opened::Handle {
                        direct_io: true,
                        ..
                    }
                ),
                "the stats file opened as {opened:?}"
            );
            let text = read(core, stats.attr.ino, 0, 1 << 16)?;
            let text = String::from_utf8(text).expect("the stats file is text");
            assert!(text.contains("gets"), "stats: {text}");
            close(core, handle(opened))?;
        }
        Op::Commit | Op::Crash | Op::Remount => unreachable!("the runner does these"),
    }
    Ok((bytes, opened))
}
