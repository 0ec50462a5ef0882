//! [`LocalFiles`]: the packer's reader of local files, each opened by
//! its name in its directory and checked against the size it was listed
//! with. A symbolic link kept as a link is read with `readlink`; other
//! files that are no regular ones are never opened.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::ops::Range;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use futures::future::{BoxFuture, FutureExt};

use packfs_format::Special;

use super::{FileReader, PackError, PackFile};

/// Local files, read at their `path` on the blocking pool. A file whose
/// size is not the one listed is an error: the bytes packed would not be
/// the file listed.
pub struct LocalFiles;

/// A range of a local file to read, and the file's size when listed.
struct LocalPart {
    path: PathBuf,
    size: u64,
    range: Range<u64>,
    special: Option<Special>,
}

impl FileReader for LocalFiles {
    fn read<'a>(
        &'a self,
        parts: Vec<(&'a PackFile, Range<u64>)>,
    ) -> BoxFuture<'a, Result<Vec<u8>, PackError>> {
        let parts: Vec<LocalPart> = parts
            .into_iter()
            .map(|(file, range)| LocalPart {
                path: file.path.clone(),
                size: file.size,
                range,
                special: file.special,
            })
            .collect();
        tokio::task::spawn_blocking(move || read_body(&parts))
            .map(|joined| joined.expect("file reader panicked"))
            .boxed()
    }
}

/// The concatenated bytes of each local file's range. A file whose size
/// changed since the scan is an error.
fn read_body(parts: &[LocalPart]) -> Result<Vec<u8>, PackError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| PackError::Read { path, source }
    };
    let total = parts
        .iter()
        .map(|p| p.range.end - p.range.start)
        .sum::<u64>();
    let mut body = Vec::with_capacity(total as usize);
    let mut dir = None;
    for LocalPart {
        path,
        size,
        range,
        special,
    } in parts
    {
        match special {
            None => {}
            Some(Special::Symlink) => {
                let target = std::fs::read_link(path).map_err(io(path))?;
                let target = target.as_os_str().as_bytes();
                if target.len() as u64 != *size {
                    return Err(PackError::Changed {
                        path: path.clone(),
                        expected: *size,
                        actual: target.len() as u64,
                    });
                }
                let (start, end) = (range.start as usize, range.end as usize);
                body.extend_from_slice(&target[start..end]);
                continue;
            }
            Some(_) => continue,
        }
        let mut file = open_in_dir(&mut dir, path).map_err(io(path))?;
        let actual = file.metadata().map_err(io(path))?.len();
        if actual != *size {
            return Err(PackError::Changed {
                path: path.clone(),
                expected: *size,
                actual,
            });
        }
        let (start, len) = (range.start, range.end - range.start);
        if start > 0 {
            file.seek(SeekFrom::Start(start)).map_err(io(path))?;
        }
        let before = body.len();
        file.take(len).read_to_end(&mut body).map_err(io(path))?;
        let got = (body.len() - before) as u64;
        if got != len {
            return Err(PackError::Changed {
                path: path.clone(),
                expected: *size,
                actual: start + got,
            });
        }
    }
    Ok(body)
}

/// Opens `path` by its name in its directory, which is kept open in `dir`
/// for the next file: the files of a pack are consecutive names, mostly of
/// one directory, and looking up each one's whole path was much of an
/// import's CPU.
fn open_in_dir(dir: &mut Option<(PathBuf, OwnedFd)>, path: &Path) -> std::io::Result<File> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return File::open(path);
    };
    if dir.as_ref().is_none_or(|(open, _)| open != parent) {
        let at = match parent.as_os_str().is_empty() {
            true => Path::new("."),
            false => parent,
        };
        // O_PATH: looking names up in it needs no read permission on it.
        let parent_fd = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open(at)?;
        *dir = Some((parent.to_path_buf(), parent_fd.into()));
    }
    let (_, parent_fd) = dir.as_ref().expect("just opened");
    let name = CString::new(name.as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: a valid directory descriptor and a NUL-terminated name.
    let fd = unsafe {
        libc::openat(
            parent_fd.as_raw_fd(),
            name.as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(path: &Path, size: u64, range: Range<u64>) -> LocalPart {
        LocalPart {
            path: path.to_path_buf(),
            size,
            range,
            special: None,
        }
    }

    #[test]
    fn local_files_are_read_by_name_in_their_directory_and_checked() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b, link) = (
            tmp.path().join("d1/a"),
            tmp.path().join("d2/b"),
            tmp.path().join("d2/link"),
        );
        std::fs::create_dir_all(a.parent().unwrap()).unwrap();
        std::fs::create_dir_all(b.parent().unwrap()).unwrap();
        std::fs::write(&a, b"hello").unwrap();
        std::fs::write(&b, b"world!").unwrap();
        std::os::unix::fs::symlink(&a, &link).unwrap();
        // Directories change between files; a link is followed; a range
        // past the start is read from its offset.
        let parts = [
            part(&a, 5, 0..5),
            part(&b, 6, 1..6),
            part(&link, 5, 0..5),
            part(&a, 5, 3..5),
        ];
        assert_eq!(read_body(&parts).unwrap(), b"helloorld!hellolo");

        match read_body(&[part(&a, 4, 0..4)]) {
            Err(PackError::Changed {
                path,
                expected: 4,
                actual: 5,
            }) => assert_eq!(path, a),
            other => panic!("expected Changed, got {:?}", other.map(|_| ())),
        }
        let missing = tmp.path().join("d1/missing");
        match read_body(&[part(&missing, 1, 0..1)]) {
            Err(PackError::Read { path, source }) => {
                assert_eq!(path, missing);
                assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
            }
            other => panic!("expected Read, got {:?}", other.map(|_| ())),
        }
    }
}
