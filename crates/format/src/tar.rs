//! Tar member headers (POSIX ustar, with a PAX extended header where ustar
//! cannot hold a value), for archives synthesized from stored items.
//!
//! A member is its header blocks, its data, and zero padding to the next
//! 512-byte block; an archive ends with two zero blocks. Only the headers
//! are built here: data and padding are ranges of the archive that the
//! reader maps to stored bytes and PAD.
//!
//! What ustar cannot hold goes into one PAX header (`typeflag 'x'`) before
//! the member's ustar header: a path that does not split into ustar's
//! 155-byte prefix and 100-byte name, or that is not ASCII (PAX paths are
//! UTF-8 by definition; ustar's are bytes of no stated encoding); a size of
//! 8 GiB or more (11 octal digits); an mtime before 1970 or past 2^33 s.
//! Every value is then still written to the ustar header as well as it
//! fits (a truncated path; a size in GNU base-256), so readers that ignore
//! PAX see a usable entry.

/// Bytes of a tar block: headers and data padding are multiples of it.
pub const BLOCK: u64 = 512;

/// The two zero blocks that end an archive.
pub const END_OF_ARCHIVE: u64 = 2 * BLOCK;

/// Largest value of an 11-digit octal field (size, mtime).
const OCTAL_11_MAX: u64 = 0o777_7777_7777;

/// Name PAX headers are given (what Python's `tarfile` writes).
const PAX_HEADER_NAME: &str = "././@PaxHeader";

/// One regular-file member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Member<'a> {
    /// Path inside the archive (`/`-separated, relative).
    pub path: &'a str,
    pub size: u64,
    /// Permission bits.
    pub mode: u16,
    /// Modification time, seconds since the Unix epoch.
    pub mtime: i64,
}

/// Zero bytes after `size` bytes of data, up to the next block.
pub fn padding(size: u64) -> u64 {
    (BLOCK - size % BLOCK) % BLOCK
}

/// The header blocks of `member`: a ustar header, preceded by a PAX
/// extended header when ustar cannot hold its path, size or mtime.
pub fn header(member: &Member) -> Vec<u8> {
    let mut out = Vec::with_capacity(BLOCK as usize);
    if let Some(records) = pax_records(member) {
        let pax = Member {
            path: PAX_HEADER_NAME,
            size: records.len() as u64,
            mode: 0o644,
            mtime: member.mtime.clamp(0, OCTAL_11_MAX as i64),
        };
        out.extend_from_slice(&ustar(&pax, b'x'));
        out.extend_from_slice(&records);
        out.resize(out.len() + padding(records.len() as u64) as usize, 0);
    }
    out.extend_from_slice(&ustar(member, b'0'));
    out
}

/// The length of [`header`]`(member)`, without building it.
pub fn header_len(member: &Member) -> u64 {
    match pax_records_len(member) {
        Some(len) => 2 * BLOCK + len + padding(len),
        None => BLOCK,
    }
}

/// The 512-byte ustar header of `member` with `typeflag`.
fn ustar(member: &Member, typeflag: u8) -> [u8; BLOCK as usize] {
    let mut h = [0u8; BLOCK as usize];
    let (prefix, name) = split_path(member.path).unwrap_or(("", truncate(member.path, 100)));
    h[..name.len()].copy_from_slice(name.as_bytes());
    octal(&mut h[100..108], u64::from(member.mode & 0o7777));
    octal(&mut h[108..116], 0); // uid
    octal(&mut h[116..124], 0); // gid
    if member.size <= OCTAL_11_MAX {
        octal(&mut h[124..136], member.size);
    } else {
        base256(&mut h[124..136], member.size);
    }
    octal(
        &mut h[136..148],
        member.mtime.clamp(0, OCTAL_11_MAX as i64) as u64,
    );
    h[156] = typeflag;
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[345..345 + prefix.len()].copy_from_slice(prefix.as_bytes());
    // The checksum is taken with its own field as spaces.
    h[148..156].fill(b' ');
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    octal(&mut h[148..155], u64::from(sum));
    h
}

/// `path` as ustar's (prefix, name) if it fits them: ASCII, and either at
/// most 100 bytes or split at a `/` into at most 155 and 100 bytes.
fn split_path(path: &str) -> Option<(&str, &str)> {
    if !path.is_ascii() {
        return None;
    }
    if path.len() <= 100 {
        return Some(("", path));
    }
    // The shortest name that fits leaves the most room for the prefix.
    let from = path.len().saturating_sub(101);
    let slash = from + path[from..].find('/')?;
    let (prefix, name) = (&path[..slash], &path[slash + 1..]);
    (prefix.len() <= 155 && !name.is_empty() && name.len() <= 100).then_some((prefix, name))
}

/// At most `max` bytes of `s`, cut at a character boundary.
fn truncate(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The PAX records `member` needs, if any.
fn pax_records(member: &Member) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    for (key, value) in pax_values(member) {
        out.extend_from_slice(record(key, &value).as_bytes());
    }
    (!out.is_empty()).then_some(out)
}

fn pax_records_len(member: &Member) -> Option<u64> {
    let len: usize = pax_values(member)
        .map(|(key, value)| record_len(key, &value))
        .sum();
    (len > 0).then_some(len as u64)
}

/// The values ustar cannot hold, as PAX keywords and values.
fn pax_values<'a>(member: &'a Member) -> impl Iterator<Item = (&'static str, String)> + 'a {
    let path = split_path(member.path)
        .is_none()
        .then(|| ("path", member.path.to_string()));
    let size = (member.size > OCTAL_11_MAX).then(|| ("size", member.size.to_string()));
    let mtime = !(0..=OCTAL_11_MAX as i64).contains(&member.mtime);
    let mtime = mtime.then(|| ("mtime", member.mtime.to_string()));
    [path, size, mtime].into_iter().flatten()
}

/// One PAX record, `"<len> <key>=<value>\n"`, whose decimal length counts
/// the digits of the length itself.
fn record(key: &str, value: &str) -> String {
    format!("{} {key}={value}\n", record_len(key, value))
}

fn record_len(key: &str, value: &str) -> usize {
    let rest = 1 + key.len() + 1 + value.len() + 1; // ' ', '=', '\n'
    let mut len = rest + 1;
    while rest + digits(len) != len {
        len = rest + digits(len);
    }
    len
}

fn digits(n: usize) -> usize {
    n.checked_ilog10().unwrap_or(0) as usize + 1
}

/// `value` as zero-padded octal filling `field` but its last byte (NUL).
fn octal(field: &mut [u8], value: u64) {
    let width = field.len() - 1;
    let text = format!("{value:0width$o}");
    field[..width].copy_from_slice(&text.as_bytes()[text.len() - width..]);
    field[width] = 0;
}

/// GNU base-256: the top bit of the first byte set, the value big-endian.
fn base256(field: &mut [u8], value: u64) {
    field.fill(0);
    let n = field.len();
    field[n - 8..].copy_from_slice(&value.to_be_bytes());
    field[0] |= 0x80;
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use proptest::prelude::*;

    use super::*;

    /// `member`'s header followed by its data (zeros) and padding, then
    /// the end of the archive, as the `tar` crate parses it.
    fn parse(member: &Member, data_len: usize) -> (String, u64, u32, u64, Vec<u8>) {
        let mut archive = header(member);
        assert_eq!(archive.len() as u64, header_len(member));
        assert_eq!(archive.len() as u64 % BLOCK, 0);
        archive.extend(std::iter::repeat_n(7u8, data_len));
        archive.resize(archive.len() + padding(data_len as u64) as usize, 0);
        archive.resize(archive.len() + END_OF_ARCHIVE as usize, 0);
        let mut parsed = tar::Archive::new(&archive[..]);
        let mut entries = parsed.entries().unwrap();
        let mut entry = entries.next().expect("one member").unwrap();
        let path = entry.path().unwrap().to_str().unwrap().to_string();
        let header = entry.header();
        let (size, mode, mtime) = (
            entry.size(),
            header.mode().unwrap(),
            header.mtime().unwrap(),
        );
        let mut data = Vec::new();
        if member.size as usize == data_len {
            entry.read_to_end(&mut data).unwrap();
            drop(entry);
            assert!(entries.next().is_none(), "one member, then the end");
        }
        (path, size, mode, mtime, data)
    }

    #[test]
    fn short_ascii_path_is_one_ustar_block() {
        let m = Member {
            path: "cat/0001.jpg",
            size: 5,
            mode: 0o640,
            mtime: 1_700_000_000,
        };
        assert_eq!(header_len(&m), BLOCK);
        let (path, size, mode, mtime, data) = parse(&m, 5);
        assert_eq!(
            (path.as_str(), size, mode, mtime),
            ("cat/0001.jpg", 5, 0o640, 1_700_000_000)
        );
        assert_eq!(data, vec![7; 5]);
    }

    #[test]
    fn long_paths_use_the_ustar_prefix_then_pax() {
        let split = format!("{}/{}", "d".repeat(150), "f".repeat(99));
        let m = Member {
            path: &split,
            size: 0,
            mode: 0o644,
            mtime: 0,
        };
        assert_eq!(header_len(&m), BLOCK, "fits prefix + name");
        assert_eq!(parse(&m, 0).0, split);

        let long = format!("{}/{}", "d".repeat(300), "f".repeat(120));
        let m = Member { path: &long, ..m };
        assert!(header_len(&m) > BLOCK);
        assert_eq!(parse(&m, 0).0, long);
    }

    #[test]
    fn non_ascii_paths_use_pax() {
        let m = Member {
            path: "chat/été/🐈.jpg",
            size: 3,
            mode: 0o644,
            mtime: 1,
        };
        assert_eq!(header_len(&m), 3 * BLOCK);
        assert_eq!(parse(&m, 3).0, "chat/été/🐈.jpg");
    }

    #[test]
    fn sizes_past_8_gib_use_pax_and_base256() {
        let m = Member {
            path: "big.bin",
            size: 9 << 30,
            mode: 0o644,
            mtime: 1,
        };
        let h = header(&m);
        assert_eq!(h.len() as u64, 3 * BLOCK);
        assert_eq!(&h[..14], PAX_HEADER_NAME.as_bytes());
        assert_eq!(h[2 * BLOCK as usize + 124], 0x80, "base-256 size in ustar");
        let (path, size, ..) = parse(&m, 0);
        assert_eq!((path.as_str(), size), ("big.bin", 9 << 30));
    }

    #[test]
    fn padding_reaches_the_next_block() {
        assert_eq!(padding(0), 0);
        assert_eq!(padding(1), 511);
        assert_eq!(padding(512), 0);
        assert_eq!(padding(513), 511);
    }

    #[test]
    fn pax_record_lengths_count_their_own_digits() {
        for value_len in 0..2000 {
            let value = "v".repeat(value_len);
            let r = record("path", &value);
            let (len, _) = r.split_once(' ').unwrap();
            assert_eq!(len.parse::<usize>().unwrap(), r.len(), "{value_len}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Whatever the path, size, mode and mtime, a tar reader parses
        /// back exactly them.
        #[test]
        fn every_member_parses_back(
            parts in prop::collection::vec("[a-zA-Z0-9._é🐈-]{1,60}", 1..8),
            size in prop_oneof![0u64..2000, (1u64 << 33) - 2..(1u64 << 33) + 2, Just(u64::MAX >> 1)],
            mode in 0u16..0o7777,
            mtime in prop_oneof![0i64..(1 << 33), Just(-1i64), Just(1i64 << 34)],
        ) {
            let path = parts.join("/");
            let m = Member { path: &path, size, mode, mtime };
            let data_len = if size < 2000 { size as usize } else { 0 };
            let (p, s, md, mt, data) = parse(&m, data_len);
            prop_assert_eq!(p, path.clone());
            prop_assert_eq!(s, size);
            prop_assert_eq!(md, u32::from(mode));
            if (0..1 << 33).contains(&mtime) {
                prop_assert_eq!(mt, mtime as u64);
            }
            if size < 2000 {
                prop_assert_eq!(data, vec![7; data_len]);
            }
        }
    }
}
