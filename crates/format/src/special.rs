//! Items that are not regular files: symbolic links, FIFOs, sockets and
//! device nodes. A Track records one as an item whose media type names its
//! kind (the `inode/…` types of the shared MIME database): a symbolic
//! link's bytes are its target as written; the others have no bytes, and
//! a device node's media type carries its device number. A reader that
//! does not know these types serves them as regular files, which loses
//! nothing: a link's bytes are still its target.

/// What a non-regular item is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Special {
    /// A symbolic link; the item's bytes are its target.
    Symlink,
    Fifo,
    Socket,
    /// A character device, with its device number (`st_rdev`).
    CharDevice(u64),
    /// A block device, with its device number (`st_rdev`).
    BlockDevice(u64),
}

const SYMLINK: &str = "inode/symlink";
const FIFO: &str = "inode/fifo";
const SOCKET: &str = "inode/socket";
const CHAR_DEVICE: &str = "inode/chardevice";
const BLOCK_DEVICE: &str = "inode/blockdevice";
/// The longest target a symbolic link may have (Linux's `PATH_MAX` less
/// its NUL).
pub const SYMLINK_MAX: u64 = 4095;

impl Special {
    /// The media type that records it: `inode/symlink`, `inode/fifo`,
    /// `inode/socket`, `inode/chardevice; rdev=N`, `inode/blockdevice;
    /// rdev=N`.
    pub fn media_type(self) -> String {
        match self {
            Special::Symlink => SYMLINK.into(),
            Special::Fifo => FIFO.into(),
            Special::Socket => SOCKET.into(),
            Special::CharDevice(rdev) => format!("{CHAR_DEVICE}; rdev={rdev}"),
            Special::BlockDevice(rdev) => format!("{BLOCK_DEVICE}; rdev={rdev}"),
        }
    }

    /// The kind a media type records; `None` for a regular file (any
    /// other type, or an `inode/…` device type without a valid `rdev`).
    pub fn of_media_type(media_type: &str) -> Option<Special> {
        if !media_type.starts_with("inode/") {
            return None;
        }
        let (kind, params) = media_type
            .split_once(';')
            .map_or((media_type, ""), |(k, p)| (k, p));
        let rdev = || {
            params
                .split(';')
                .find_map(|p| p.trim().strip_prefix("rdev="))
                .and_then(|n| n.parse().ok())
        };
        match kind.trim() {
            SYMLINK => Some(Special::Symlink),
            FIFO => Some(Special::Fifo),
            SOCKET => Some(Special::Socket),
            CHAR_DEVICE => rdev().map(Special::CharDevice),
            BLOCK_DEVICE => rdev().map(Special::BlockDevice),
            _ => None,
        }
    }

    /// The file-type bits of `st_mode` (`S_IFLNK`, …).
    pub fn mode_type(self) -> u32 {
        match self {
            Special::Symlink => 0o120000,
            Special::Fifo => 0o010000,
            Special::Socket => 0o140000,
            Special::CharDevice(_) => 0o020000,
            Special::BlockDevice(_) => 0o060000,
        }
    }

    /// The kind a `mknod` mode and device number make; `None` for a
    /// regular file or a type `mknod` cannot make.
    pub fn of_mode(mode: u32, rdev: u64) -> Option<Special> {
        match mode & 0o170000 {
            0o010000 => Some(Special::Fifo),
            0o140000 => Some(Special::Socket),
            0o020000 => Some(Special::CharDevice(rdev)),
            0o060000 => Some(Special::BlockDevice(rdev)),
            _ => None,
        }
    }

    /// The device number, for device nodes.
    pub fn rdev(self) -> u64 {
        match self {
            Special::CharDevice(rdev) | Special::BlockDevice(rdev) => rdev,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types_name_each_kind_and_read_back() {
        for special in [
            Special::Symlink,
            Special::Fifo,
            Special::Socket,
            Special::CharDevice(0x0103),
            Special::BlockDevice(u64::MAX),
        ] {
            let media_type = special.media_type();
            assert_eq!(Special::of_media_type(&media_type), Some(special));
            let mode = special.mode_type();
            if special != Special::Symlink {
                assert_eq!(
                    Special::of_mode(mode | 0o640, special.rdev()),
                    Some(special)
                );
            }
        }
        assert_eq!(
            Special::of_media_type("inode/chardevice; rdev=259"),
            Some(Special::CharDevice(259))
        );
        for regular in [
            "image/jpeg",
            "application/octet-stream",
            "inode/chardevice",
            "inode/blockdevice; rdev=x",
            "inode/directory",
        ] {
            assert_eq!(Special::of_media_type(regular), None, "{regular}");
        }
        assert_eq!(Special::of_mode(0o100644, 0), None);
    }
}
