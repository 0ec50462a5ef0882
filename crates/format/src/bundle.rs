//! DataBundle: the index's keys and values, the shard header, and record
//! compression. Codecs only; `docs/DATABUNDLE.md` is the specification
//! and `proto/databundle.proto` the schema
//! of the values, which the messages here mirror field for field.

use std::io::{Read, Write};

use prost::Message;

use super::FormatError;

/// `BundleConfig::magic` of every bundle.
pub const MAGIC: &str = "packfs.DataBundle";
/// The format version this code writes and the newest it reads.
pub const VERSION: u32 = 1;
/// The index: a SQLite database, relative to the bundle's directory.
pub const INDEX_PATH: &str = "index/bundle.sqlite";
/// SQLite `application_id` of the index (ASCII "PFDB").
pub const APPLICATION_ID: i32 = 0x5046_4442;
/// First bytes of every shard file.
pub(crate) const SHARD_MAGIC: [u8; 8] = *b"PFDBSHRD";
/// Bytes of the shard header that carry data; the header is padded with
/// zeros to `block_size`, where the first record starts.
pub const SHARD_HEADER_LEN: usize = 16;
/// A file larger than this starts a record of its own.
pub const LARGE_FILE: u64 = 1 << 20;
/// `Any::type_url` of [`FileAttributes`] in `FileMetadata::user_data`.
pub(crate) const ATTRIBUTES_TYPE_URL: &str =
    "type.googleapis.com/packfs.databundle.v1.FileAttributes";

/// The singleton key of the bundle's configuration.
pub const CONFIG_KEY: &str = "BUNDLE_CONFIG #";
/// The prefix of every `FILE_METADATA` key.
pub const FILE_PREFIX: &str = "FILE_METADATA # ";
const SHARD_PREFIX: &str = "SHARD_METADATA # ";

/// Name of shard file `index` in the bundle's directory.
pub fn shard_name(index: u32) -> String {
    format!("shard-{index:08}")
}

/// Whether `name` is the name of a shard file (`shard-` and digits).
pub fn is_shard_name(name: &str) -> bool {
    name.strip_prefix("shard-")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether `name` is the name of one of the shards of a bundle of
/// `shard_count` shards.
pub fn is_shard_of(name: &str, shard_count: u32) -> bool {
    name.strip_prefix("shard-")
        .and_then(|n| n.parse::<u32>().ok())
        .is_some_and(|n| n < shard_count && shard_name(n) == name)
}

/// How records are compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// No records: a shard holds the stream as is.
    None,
    /// One zstd frame per record, with its content checksum.
    Zstd,
    /// One gzip member (RFC 1952) per record.
    Gzip,
}

impl Compression {
    /// The name stored in `BundleConfig::compression_algorithm`.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Zstd => "zstd",
            Compression::Gzip => "gzip",
        }
    }

    /// The algorithm called `name`.
    pub fn from_name(name: &str) -> Result<Self, FormatError> {
        match name {
            "none" => Ok(Compression::None),
            "zstd" => Ok(Compression::Zstd),
            "gzip" => Ok(Compression::Gzip),
            other => Err(FormatError::shape(
                "bundle config",
                format!("unknown compression_algorithm {other:?} (known: none, zstd, gzip)"),
            )),
        }
    }

    /// `record` compressed at `level` (the algorithm's default for `None`).
    pub fn compress(self, record: &[u8], level: Option<i32>) -> Vec<u8> {
        match self {
            Compression::None => record.to_vec(),
            Compression::Zstd => {
                // The frame's content checksum makes a flipped byte an
                // error instead of wrong bytes.
                let mut zstd = zstd::bulk::Compressor::new(level.unwrap_or(3))
                    .expect("zstd accepts every level (it clamps)");
                zstd.include_checksum(true)
                    .and_then(|()| zstd.compress(record))
                    .expect("zstd compression into a growable buffer cannot fail")
            }
            Compression::Gzip => {
                let level = flate2::Compression::new(level.unwrap_or(6).clamp(0, 9) as u32);
                let mut out = flate2::write::GzEncoder::new(Vec::new(), level);
                out.write_all(record)
                    .and_then(|()| out.finish())
                    .expect("gzip compression into a Vec cannot fail")
            }
        }
    }

    /// A record of `len` bytes decompressed from `data`; `what` names it
    /// in errors. Fails unless `data` is exactly one zstd frame (with its
    /// content checksum) or gzip member, with nothing after it, that
    /// decodes to exactly `len` bytes.
    pub fn decompress(self, data: &[u8], len: u64, what: &str) -> Result<Vec<u8>, FormatError> {
        let bad = |detail: String| FormatError::shape(what, detail);
        let after = |kind: &str, left: usize| {
            bad(format!(
                "{left} bytes after its {kind} within compressed_size \
                 (a record is exactly one {kind})"
            ))
        };
        let mut out = Vec::with_capacity(len as usize);
        match self {
            Compression::None => out.extend_from_slice(data),
            Compression::Zstd => {
                // Frame header descriptor, bit 2: the content checksum flag.
                if data.len() > 4 && data[4] & 0x04 == 0 {
                    return Err(bad("zstd frame without its content checksum".into()));
                }
                let mut decoder = zstd::stream::read::Decoder::with_buffer(data)
                    .map_err(|e| bad(format!("bad zstd data: {e}")))?
                    .single_frame();
                // One byte past `len` tells a longer record from a right one.
                (&mut decoder)
                    .take(len + 1)
                    .read_to_end(&mut out)
                    .map_err(|e| bad(format!("bad zstd data: {e}")))?;
                let left = decoder.finish().len();
                if left > 0 && out.len() as u64 <= len {
                    return Err(after("zstd frame", left));
                }
            }
            Compression::Gzip => {
                let mut decoder = flate2::bufread::GzDecoder::new(data);
                (&mut decoder)
                    .take(len + 1)
                    .read_to_end(&mut out)
                    .map_err(|e| bad(format!("bad gzip data: {e}")))?;
                let left = decoder.into_inner().len();
                if left > 0 && out.len() as u64 <= len {
                    return Err(after("gzip member", left));
                }
            }
        }
        if out.len() as u64 != len {
            return Err(bad(format!(
                "decodes to {}{} bytes, the index says {len}",
                out.len(),
                if out.len() as u64 > len { "+" } else { "" }
            )));
        }
        Ok(out)
    }
}

/// The value of [`CONFIG_KEY`].
#[derive(Clone, PartialEq, Message)]
pub struct BundleConfig {
    #[prost(string, tag = "1")]
    pub magic: String,
    #[prost(uint32, tag = "2")]
    pub version: u32,
    #[prost(uint64, tag = "3")]
    pub block_size: u64,
    #[prost(uint64, tag = "4")]
    pub record_size: u64,
    #[prost(string, tag = "5")]
    pub compression_algorithm: String,
    #[prost(uint32, tag = "6")]
    pub shard_count: u32,
}

impl BundleConfig {
    /// Decodes and checks a config: magic, version, sizes, algorithm.
    pub fn decode_checked(bytes: &[u8]) -> Result<(Self, Compression), FormatError> {
        let what = "bundle config";
        let config = Self::decode(bytes).map_err(|e| protobuf_error(what, e))?;
        if config.magic != MAGIC {
            return Err(FormatError::shape(
                what,
                format!(
                    "magic is {:?}, not {MAGIC:?}: not a DataBundle",
                    config.magic
                ),
            ));
        }
        if config.version == 0 || config.version > VERSION {
            return Err(FormatError::shape(
                what,
                format!(
                    "format version {} (this packfs reads 1 to {VERSION})",
                    config.version
                ),
            ));
        }
        if !config.block_size.is_power_of_two() || config.block_size < SHARD_HEADER_LEN as u64 {
            return Err(FormatError::shape(
                what,
                format!(
                    "block_size {} is not a power of two of at least {SHARD_HEADER_LEN}",
                    config.block_size
                ),
            ));
        }
        if config.record_size == 0 || config.record_size > 64 << 20 {
            return Err(FormatError::shape(
                what,
                format!(
                    "record_size {} is not between 1 byte and 64 MiB",
                    config.record_size
                ),
            ));
        }
        let compression = Compression::from_name(&config.compression_algorithm)?;
        Ok((config, compression))
    }
}

/// `FileMetadata::type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, prost::Enumeration)]
#[repr(i32)]
pub enum FileType {
    File = 0,
    Directory = 1,
}

/// The value of a `FILE_METADATA` key: one file or directory.
#[derive(Clone, PartialEq, Message)]
pub struct FileMetadata {
    #[prost(enumeration = "FileType", tag = "1")]
    pub r#type: i32,
    #[prost(uint32, tag = "2")]
    pub shard_index: u32,
    /// Offset of the file's first byte in its shard's uncompressed stream.
    #[prost(uint64, tag = "3")]
    pub shard_offset: u64,
    #[prost(uint64, tag = "4")]
    pub size: u64,
    /// CRC32C (Castagnoli) of the file's bytes.
    #[prost(fixed32, tag = "5")]
    pub checksum: u32,
    #[prost(message, optional, tag = "6")]
    pub user_data: Option<Any>,
}

impl FileMetadata {
    /// Decodes the value of key `key` (named in errors).
    pub fn decode_checked(key: &str, bytes: &[u8]) -> Result<Self, FormatError> {
        let meta = Self::decode(bytes).map_err(|e| protobuf_error(key, e))?;
        match FileType::try_from(meta.r#type) {
            Ok(FileType::Directory) if meta.size != 0 => Err(FormatError::shape(
                key,
                format!("a directory with size {}", meta.size),
            )),
            Ok(_) => Ok(meta),
            Err(_) => Err(FormatError::shape(
                key,
                format!("unknown type {}", meta.r#type),
            )),
        }
    }

    /// Whether this is a directory.
    pub fn is_dir(&self) -> bool {
        self.r#type == FileType::Directory as i32
    }

    /// The [`FileAttributes`] in `user_data`, if that is what it holds.
    pub fn attributes(&self) -> Option<FileAttributes> {
        let any = self.user_data.as_ref()?;
        (any.type_url == ATTRIBUTES_TYPE_URL)
            .then(|| FileAttributes::decode(any.value.as_slice()).ok())
            .flatten()
    }
}

/// `google.protobuf.Any`: `user_data`'s type.
#[derive(Clone, PartialEq, Message)]
pub struct Any {
    #[prost(string, tag = "1")]
    pub type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

/// What packfs puts in `user_data`: the source file's mode and mtime.
#[derive(Clone, PartialEq, Message)]
pub struct FileAttributes {
    /// Nanoseconds since the Unix epoch.
    #[prost(int64, tag = "1")]
    pub mtime_ns: i64,
    /// Permission bits (`0o7777` at most).
    #[prost(uint32, tag = "2")]
    pub mode: u32,
}

impl FileAttributes {
    /// As `user_data`.
    pub fn to_any(&self) -> Any {
        Any {
            type_url: ATTRIBUTES_TYPE_URL.to_owned(),
            value: self.encode_to_vec(),
        }
    }
}

/// The value of a `SHARD_METADATA` key: one record of a compressed shard.
#[derive(Clone, PartialEq, Message)]
pub struct ShardMetadata {
    /// Offset in the shard file where the record's compressed bytes start
    /// (a multiple of `block_size`).
    #[prost(uint64, tag = "1")]
    pub compressed_offset: u64,
    /// Length of the compressed bytes (0 for a `zeros` record).
    #[prost(uint64, tag = "2")]
    pub compressed_size: u64,
    /// Length of the record's uncompressed bytes.
    #[prost(uint64, tag = "3")]
    pub uncompressed_size: u64,
    /// Every byte of the record is zero; nothing is stored for it.
    #[prost(bool, tag = "4")]
    pub zeros: bool,
}

impl ShardMetadata {
    /// Decodes the value of key `key` (named in errors).
    pub fn decode_checked(key: &str, bytes: &[u8]) -> Result<Self, FormatError> {
        let meta = Self::decode(bytes).map_err(|e| protobuf_error(key, e))?;
        if meta.zeros && meta.compressed_size != 0 {
            return Err(FormatError::shape(key, "a zeros record with stored bytes"));
        }
        if meta.uncompressed_size == 0 {
            return Err(FormatError::shape(key, "an empty record"));
        }
        if meta
            .compressed_offset
            .checked_add(meta.compressed_size)
            .is_none()
        {
            return Err(FormatError::shape(
                key,
                format!(
                    "compressed_offset {} + compressed_size {} overflows 64 bits",
                    meta.compressed_offset, meta.compressed_size
                ),
            ));
        }
        Ok(meta)
    }
}

fn protobuf_error(what: &str, e: prost::DecodeError) -> FormatError {
    FormatError::shape(what, format!("malformed protobuf: {e}"))
}

/// Key of the entry `name` in directory `dir` (`""` is the root; no
/// leading or trailing `/`).
pub fn file_key(dir: &str, name: &str) -> String {
    format!("{}{name}", dir_prefix(dir))
}

/// The prefix every key of an entry of directory `dir` starts with.
pub fn dir_prefix(dir: &str) -> String {
    format!("{FILE_PREFIX}{dir}/ # ")
}

/// The rule for names, as messages name it.
pub const NAME_RULE: &str = "a name is non-empty, without `/` or NUL, and neither `.` nor `..`";

/// The directory and name of a `FILE_METADATA` key. The name is the text
/// after the last `"/ # "`: a name has no `/`, so the directory ends
/// there. Fails, naming the key and the rule, for a key that is not
/// UTF-8, not a `FILE_METADATA` key, or has an empty name.
pub fn parse_file_key(key: &[u8]) -> Result<(&str, &str), FormatError> {
    let bad = |detail: String| FormatError::shape(key_name(key), detail);
    let text =
        std::str::from_utf8(key).map_err(|_| bad("not UTF-8 (keys are UTF-8 text)".into()))?;
    let cut = text
        .strip_prefix(FILE_PREFIX)
        .and_then(|rest| rest.rfind("/ # "))
        .ok_or_else(|| {
            bad(format!(
                "not a FILE_METADATA key (`{FILE_PREFIX}<dir>/ # <name>`)"
            ))
        })?;
    let rest = &text[FILE_PREFIX.len()..];
    let (dir, name) = (&rest[..cut], &rest[cut + 4..]);
    match name.is_empty() {
        true => Err(bad(format!("an empty name ({NAME_RULE})"))),
        false => Ok((dir, name)),
    }
}

/// Whether `name` may name an entry: non-empty, without `/` or NUL, and
/// neither `.` nor `..`.
pub fn is_valid_name(name: &str) -> bool {
    !matches!(name, "" | "." | "..") && !name.contains(['/', '\0'])
}

/// Key of the record starting at `offset` of shard `shard`'s stream.
/// Numbers are zero-padded so that key order is numeric order.
pub fn shard_key(shard: u32, offset: u64) -> String {
    format!("{}{offset:020}", shard_prefix(shard))
}

/// The prefix every record key of shard `shard` starts with.
pub fn shard_prefix(shard: u32) -> String {
    format!("{SHARD_PREFIX}{shard:08} # ")
}

/// The shard whose record keys' range (`SHARD_METADATA # <shard:08> # `)
/// holds `key`, whether or not the rest of it parses.
pub fn record_key_shard(key: &str) -> Option<u32> {
    let rest = key.strip_prefix(SHARD_PREFIX)?;
    let digits = rest.get(..8)?;
    let all_digits = digits.bytes().all(|b| b.is_ascii_digit());
    (all_digits && rest[8..].starts_with(" # "))
        .then(|| digits.parse().ok())
        .flatten()
}

/// Key `key` as messages name it: quoted, and escaped (bytes that are
/// not printable ASCII as `\xNN`), since a damaged key may hold anything.
pub fn key_name(key: &[u8]) -> String {
    format!("index key \"{}\"", key.escape_ascii())
}

/// The shard and uncompressed offset of a `SHARD_METADATA` key, whose
/// numbers are zero-padded to 8 and 20 digits: unpadded ones would sort
/// out of their numeric order, which readers scan records in.
pub fn parse_shard_key(key: &str) -> Option<(u32, u64)> {
    let rest = key.strip_prefix(SHARD_PREFIX)?;
    let (shard, offset) = rest.split_once(" # ")?;
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(shard, 8) || !digits(offset, 20) {
        return None;
    }
    Some((shard.parse().ok()?, offset.parse().ok()?))
}

/// The smallest string greater than every string starting with `prefix`
/// (for range scans: `prefix <= key < prefix_end(prefix)`).
pub fn prefix_end(prefix: &str) -> String {
    // Every prefix here ends in ASCII, so bumping its last byte stays UTF-8.
    let mut bytes = prefix.as_bytes().to_vec();
    let last = bytes.last_mut().expect("prefixes are not empty");
    assert!(*last < 0x7f, "prefix ends in ASCII below DEL");
    *last += 1;
    String::from_utf8(bytes).expect("an ASCII byte bumped stays ASCII")
}

/// The header of shard `index`: magic, version and index, little-endian,
/// padded with zeros to `block_size`.
pub fn shard_header(index: u32, block_size: u64) -> Vec<u8> {
    let mut header = vec![0; block_size as usize];
    header[..8].copy_from_slice(&SHARD_MAGIC);
    header[8..12].copy_from_slice(&VERSION.to_le_bytes());
    header[12..16].copy_from_slice(&index.to_le_bytes());
    header
}

/// Checks that `bytes` begin the header of shard `index`.
pub fn check_shard_header(bytes: &[u8], index: u32) -> Result<(), FormatError> {
    let what = shard_name(index);
    if bytes.len() < SHARD_HEADER_LEN || bytes[..8] != SHARD_MAGIC {
        return Err(FormatError::shape(what, "no shard header (bad magic)"));
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    let found = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes"));
    if version == 0 || version > VERSION {
        return Err(FormatError::shape(
            what,
            format!("shard format version {version} (this packfs reads 1 to {VERSION})"),
        ));
    }
    if found != index {
        return Err(FormatError::shape(
            what,
            format!("header says it is shard {found}"),
        ));
    }
    Ok(())
}

/// CRC32C of `bytes`, continuing `crc` (0 to start).
pub fn crc32c(crc: u32, bytes: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_sort_numerically() {
        assert_eq!(file_key("", "a # b"), "FILE_METADATA # / # a # b");
        assert_eq!(
            parse_file_key(b"FILE_METADATA # / # a # b"),
            Ok(("", "a # b"))
        );
        let key = file_key("x # y/ü", "f.txt");
        assert_eq!(parse_file_key(key.as_bytes()), Ok(("x # y/ü", "f.txt")));
        for (key, says) in [
            (&b"FILE_METADATA # / # "[..], "empty name"),
            (b"FILE_METADATA # a", "not a FILE_METADATA key"),
            (b"FILE_METADATA # / # \xff", "not UTF-8"),
        ] {
            let err = parse_file_key(key).unwrap_err().to_string();
            assert!(
                err.starts_with("index key \"FILE_METADATA") && err.contains(says),
                "{err}"
            );
        }
        assert!(key.starts_with(&dir_prefix("x # y/ü")));
        assert!(!key.starts_with(&dir_prefix("x # y")));
        assert!(key.as_str() < prefix_end(&dir_prefix("x # y/ü")).as_str());
        assert_eq!(parse_shard_key(&shard_key(7, 262_144)), Some((7, 262_144)));
        assert!(shard_key(1, 9) < shard_key(1, 10));
        assert!(shard_key(1, u64::MAX) < shard_key(2, 0));
        assert_eq!(parse_shard_key("SHARD_METADATA # 1 # -3"), None);
        // Numbers not padded to 8 and 20 digits sort out of order.
        assert_eq!(parse_shard_key("SHARD_METADATA # 00000007 # 262144"), None);
        assert_eq!(
            parse_shard_key("SHARD_METADATA # 7 # 00000000000000262144"),
            None
        );
        assert_eq!(record_key_shard(&shard_key(7, 9)), Some(7));
        assert_eq!(record_key_shard("SHARD_METADATA # 7 # 9"), None);
        assert!(is_shard_of("shard-00000001", 2));
        assert!(!is_shard_of("shard-00000002", 2) && !is_shard_of("shard-1", 2));
        assert_eq!(key_name(b"a\"\xff"), r#"index key "a\"\xff""#);
    }

    #[test]
    fn records_round_trip_and_wrong_lengths_fail() {
        let record: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        for c in [Compression::None, Compression::Zstd, Compression::Gzip] {
            let packed = c.compress(&record, None);
            let len = record.len() as u64;
            assert_eq!(c.decompress(&packed, len, "r").unwrap(), record);
            assert!(
                c.decompress(&packed, len - 1, "r").is_err(),
                "{c:?} too long"
            );
            assert!(
                c.decompress(&packed, len + 1, "r").is_err(),
                "{c:?} too short"
            );
        }
        for c in [Compression::Zstd, Compression::Gzip] {
            let mut packed = c.compress(&record, None);
            let len = record.len() as u64;
            packed.push(0);
            let err = c.decompress(&packed, len, "r").unwrap_err().to_string();
            assert!(err.contains("1 bytes after"), "{c:?}: {err}");
            packed.pop();
            for at in [packed.len() / 2, packed.len() - 1] {
                let mut flipped = packed.clone();
                flipped[at] ^= 0x10;
                let len = record.len() as u64;
                assert!(c.decompress(&flipped, len, "r").is_err(), "{c:?} at {at}");
            }
        }
        assert!(Compression::from_name("lz4").is_err());
    }

    #[test]
    fn config_is_checked() {
        let good = BundleConfig {
            magic: MAGIC.into(),
            version: VERSION,
            block_size: 4096,
            record_size: 256 << 10,
            compression_algorithm: "zstd".into(),
            shard_count: 2,
        };
        let (decoded, c) = BundleConfig::decode_checked(&good.encode_to_vec()).unwrap();
        assert_eq!((decoded, c), (good.clone(), Compression::Zstd));
        let bad = |f: fn(&mut BundleConfig)| {
            let mut config = good.clone();
            f(&mut config);
            BundleConfig::decode_checked(&config.encode_to_vec())
                .unwrap_err()
                .to_string()
        };
        assert!(bad(|c| c.magic = "zip".into()).contains("not a DataBundle"));
        assert!(bad(|c| c.version = 9).contains("version 9"));
        assert!(bad(|c| c.block_size = 1000).contains("block_size"));
        assert!(bad(|c| c.compression_algorithm = "lz4".into()).contains("lz4"));
    }

    #[test]
    fn shard_header_is_checked() {
        let header = shard_header(3, 4096);
        assert_eq!(header.len(), 4096);
        check_shard_header(&header, 3).unwrap();
        assert!(check_shard_header(&header, 4).is_err());
        assert!(check_shard_header(b"PK\x03\x04", 3).is_err());
    }
}
