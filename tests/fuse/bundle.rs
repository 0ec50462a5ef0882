//! DataBundles damaged by hand, as another writer might leave them: what
//! `cat`, `ls`, `verify` and a mount make of bytes that disagree with their
//! CRC32C, offsets past 2^64, names and parents the format forbids, bytes
//! after a record, and shards left without an index.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use packfs_format::bundle::{FileMetadata, ShardMetadata};
use prost::Message;

use crate::common::*;

/// A bundle of `compression` in one shard: `s/00`…`s/09` (20,000 bytes
/// each), `top`, `z/big` (over 1 MiB: a record of its own) and the empty directory `e`. Returns the
/// source tree and the bundle.
fn small_bundle(dir: &Path, compression: &str) -> (PathBuf, PathBuf) {
    let src = dir.join("src");
    let mut rng = Rng::new(21);
    for i in 0..10 {
        write_file(&src.join(format!("s/{i:02}")), &rng.bytes(20_000));
    }
    write_file(&src.join("top"), b"a file at the root");
    write_file(&src.join("z/big"), &rng.bytes((1 << 20) + 1000));
    std::fs::create_dir_all(src.join("e")).unwrap();
    let bundle = dir.join(format!("bundle-{compression}"));
    packfs_ok(&[
        "bundle",
        "create",
        src.to_str().unwrap(),
        bundle.to_str().unwrap(),
        "--no-progress",
        "--shards",
        "1",
        "--compression",
        compression,
    ]);
    (src, bundle)
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// The bundle's index, open for changes.
fn index(bundle: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(bundle.join("index/bundle.sqlite")).unwrap()
}

fn value(bundle: &Path, key: &str) -> Vec<u8> {
    index(bundle)
        .query_row("SELECT value FROM bundle WHERE key = ?1", [key], |r| {
            r.get(0)
        })
        .unwrap()
}

fn file_meta(bundle: &Path, key: &str) -> FileMetadata {
    FileMetadata::decode(value(bundle, key).as_slice()).unwrap()
}

/// Sets (or adds) `key` to `value`.
fn put(bundle: &Path, key: &str, value: &impl Message) {
    index(bundle)
        .execute(
            "INSERT OR REPLACE INTO bundle (key, value) VALUES (?1, ?2)",
            rusqlite::params![key, value.encode_to_vec()],
        )
        .unwrap();
}

/// The records of shard 0: their keys and values.
fn records(bundle: &Path) -> Vec<(String, ShardMetadata)> {
    let conn = index(bundle);
    let mut stmt = conn
        .prepare("SELECT key, value FROM bundle WHERE key LIKE 'SHARD_METADATA # %' ORDER BY key")
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
        })
        .unwrap();
    rows.map(|r| {
        let (key, value) = r.unwrap();
        (key, ShardMetadata::decode(value.as_slice()).unwrap())
    })
    .collect()
}

#[test]
fn cat_and_whole_reads_check_crc32c() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    // A flipped byte of an uncompressed bundle: nothing but the CRC32C
    // can tell.
    let (src, bundle) = small_bundle(tmp.path(), "none");
    let flipped = file_meta(&bundle, "FILE_METADATA # s/ # 03");
    let big = file_meta(&bundle, "FILE_METADATA # z/ # big");
    let shard = bundle.join("shard-00000000");
    flip(&shard, 4096 + flipped.shard_offset + 5);
    flip(&shard, 4096 + big.shard_offset + 10);
    let out = packfs(&["cat", s(&bundle), "s/03"]);
    failed_with(&out, &["s/03", "checksum disagrees"]);
    assert_eq!(out.status.code(), Some(1));
    packfs_ok(&["cat", s(&bundle), "s/04"]);

    let mnt = Mounted::new(&bundle, &tmp.path().join("mnt"), &[]);
    assert!(eio(&mnt.path, "s/03"), "a whole read of s/03 is checked");
    assert!(eio(&mnt.path, "s/03"), "and again by the next handle");
    assert!(!eio(&mnt.path, "s/04"));
    // A partial read, not from offset 0, is not checked.
    let f = std::fs::File::open(mnt.path.join("z/big")).unwrap();
    let mut buf = vec![0; 4096];
    f.read_exact_at(&mut buf, 512 << 10).unwrap();
    let want = std::fs::read(src.join("z/big")).unwrap();
    assert!(buf[..] == want[512 << 10..(512 << 10) + 4096]);
    drop(f);
    drop(mnt);

    // A record wrongly marked `zeros` in a compressed bundle.
    let (_, bundle) = small_bundle(tmp.path(), "zstd");
    let (key, mut record) = records(&bundle).remove(0);
    record.zeros = true;
    record.compressed_size = 0;
    put(&bundle, &key, &record);
    let out = packfs(&["cat", s(&bundle), "s/00"]);
    failed_with(&out, &["s/00", "checksum disagrees"]);
    let mnt = Mounted::new(&bundle, &tmp.path().join("mnt2"), &[]);
    assert!(eio(&mnt.path, "s/00"));
    assert!(!eio(&mnt.path, "z/big"));
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn offsets_past_2_64_are_refused_naming_the_file_and_values() {
    let tmp = tempfile::tempdir().unwrap();
    // Uncompressed: the header's block plus the offset wraps around to the
    // shard's header.
    let (_, bundle) = small_bundle(tmp.path(), "none");
    let key = "FILE_METADATA # / # top";
    let mut meta = file_meta(&bundle, key);
    meta.shard_offset = u64::MAX - 4000;
    put(&bundle, key, &meta);
    let out = packfs(&["cat", s(&bundle), "top"]);
    failed_with(&out, &["top", "overflows", &meta.shard_offset.to_string()]);
    assert_eq!(out.status.code(), Some(1));

    // Compressed: the file's offset plus its size, and a record's stored
    // offset plus its size.
    let (_, bundle) = small_bundle(tmp.path(), "zstd");
    let key = "FILE_METADATA # s/ # 01";
    let mut meta = file_meta(&bundle, key);
    meta.shard_offset = u64::MAX - 10;
    put(&bundle, key, &meta);
    let out = packfs(&["cat", s(&bundle), "s/01"]);
    failed_with(&out, &["s/01", "overflows", &meta.shard_offset.to_string()]);
    assert_eq!(out.status.code(), Some(1));
    let (key, mut record) = records(&bundle).remove(0);
    record.compressed_offset = u64::MAX - 4095;
    put(&bundle, &key, &record);
    let out = packfs(&["cat", s(&bundle), "s/00"]);
    failed_with(
        &out,
        &["s/00", "overflows", &record.compressed_offset.to_string()],
    );
    assert_eq!(out.status.code(), Some(1));
    let out = packfs(&["verify", s(&bundle)]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(
        text.contains("FAIL s/01:") && text.contains(&record.compressed_offset.to_string()),
        "{text}"
    );
}

/// Writes 3 bytes after the compressed bytes of the bundle's first record
/// (in its padding) and counts them in its `compressed_size`.
fn append_to_first_record(bundle: &Path) {
    let (key, mut record) = records(bundle).remove(0);
    assert!(record.compressed_size % 4096 < 4000, "room in the padding");
    let shard = bundle.join("shard-00000000");
    let f = std::fs::OpenOptions::new().write(true).open(shard).unwrap();
    f.write_all_at(b"xyz", record.compressed_offset + record.compressed_size)
        .unwrap();
    record.compressed_size += 3;
    put(bundle, &key, &record);
}

/// The lines of `text` that start with `start`.
fn lines_starting(text: &str, start: &str) -> usize {
    text.lines().filter(|l| l.starts_with(start)).count()
}

#[test]
fn verify_names_each_broken_invariant_once() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let (_, bundle) = small_bundle(tmp.path(), "zstd");
    let dir = file_meta(&bundle, "FILE_METADATA # / # e");
    let file = file_meta(&bundle, "FILE_METADATA # / # top");
    put(&bundle, "FILE_METADATA # / # ..", &dir);
    put(&bundle, "FILE_METADATA # / # .", &dir);
    put(&bundle, "FILE_METADATA # gone/ # orphan", &file);
    put(&bundle, "FILE_METADATA # top/ # child", &file);
    index(&bundle)
        .execute(
            "UPDATE bundle SET value = X'ffffffff' WHERE key = 'FILE_METADATA # s/ # 07'",
            [],
        )
        .unwrap();
    // Bytes after the first record's zstd frame, in its padding.
    append_to_first_record(&bundle);

    let out = packfs(&["verify", s(&bundle)]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    for start in [
        "FAIL ..:",
        "FAIL .:",
        "FAIL gone/orphan:",
        "FAIL top/child:",
        "FAIL s/07:",
    ] {
        assert_eq!(lines_starting(&text, start), 1, "{start} in {text}");
    }
    let after = text
        .lines()
        .filter(|l| l.contains("record at uncompressed offset 0:") && l.contains("after"))
        .count();
    assert_eq!(after, 1, "{text}");
    let named = text.matches("s/07").count() + text.matches("s/ # 07").count();
    assert_eq!(named, 1, "the damaged entry named once: {text}");

    // A mount lists neither `.` nor `..` from the index.
    let mnt = Mounted::new(&bundle, &tmp.path().join("mnt"), &[]);
    let ls = std::process::Command::new("ls")
        .arg("-a")
        .arg(&mnt.path)
        .output()
        .unwrap();
    let names = stdout(&ls);
    assert_eq!(names.lines().filter(|&n| n == "..").count(), 1, "{names}");
    assert_eq!(names.lines().filter(|&n| n == ".").count(), 1, "{names}");
}

#[test]
fn trailing_bytes_after_a_gzip_member_are_found() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, bundle) = small_bundle(tmp.path(), "gzip");
    append_to_first_record(&bundle);
    let out = packfs(&["verify", s(&bundle)]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("after"), "{text}");
}

#[test]
fn ls_lists_a_damaged_entry_like_a_mount_and_exits_1() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, bundle) = small_bundle(tmp.path(), "zstd");
    index(&bundle)
        .execute(
            "UPDATE bundle SET value = X'ffffffff' WHERE key = 'FILE_METADATA # s/ # 07'",
            [],
        )
        .unwrap();
    let want: Vec<String> = (0..10).map(|i| format!("{i:02}")).collect();
    for long in [false, true] {
        let args = match long {
            true => vec!["ls", "-l", s(&bundle), "s"],
            false => vec!["ls", s(&bundle), "s"],
        };
        let out = packfs(&args);
        assert_eq!(ls_names(&out), want, "{}", stdout(&out));
        failed_with(&out, &["FILE_METADATA # s/ # 07", "malformed"]);
        assert_eq!(out.status.code(), Some(1));
    }
}
#[test]
fn shards_without_an_index_are_said_to_be_an_unfinished_bundle() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, bundle) = small_bundle(tmp.path(), "zstd");
    std::fs::remove_file(bundle.join("index/bundle.sqlite")).unwrap();
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    for args in [
        vec!["ls", s(&bundle)],
        vec!["cat", s(&bundle), "top"],
        vec!["verify", s(&bundle)],
        vec!["mount", s(&bundle), s(&mnt)],
    ] {
        let out = packfs(&args);
        failed_with(
            &out,
            &[
                s(&bundle),
                "looks like a DataBundle whose index was never written",
            ],
        );
    }
    assert!(!is_mounted(&mnt));
}

/// What docs/DATABUNDLE.md says packfs's writer does where the format
/// leaves a choice: a `zeros` record at a shard's end has the shard's
/// length as its offset, every all-zero record is `zeros`, an empty file
/// names a shard of the bundle, a directory's numbers are 0; and verify
/// passes such a bundle.
#[test]
fn the_writer_does_what_the_format_states_where_it_chooses() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    write_file(&src.join("a/data"), &Rng::new(3).bytes(300_000));
    write_file(&src.join("a/empty"), b"");
    write_file(&src.join("b/zeros"), &vec![0; 600_000]);
    let bundle = tmp.path().join("bundle");
    packfs_ok(&[
        "bundle",
        "create",
        s(&src),
        s(&bundle),
        "--no-progress",
        "--shards",
        "1",
    ]);
    let shard_len = std::fs::metadata(bundle.join("shard-00000000"))
        .unwrap()
        .len();
    let records = records(&bundle);
    let (_, last) = records.last().unwrap();
    assert!(
        last.zeros && last.compressed_offset == shard_len,
        "{last:?}"
    );
    assert_eq!(records.iter().filter(|(_, r)| r.zeros).count(), 2);
    let empty = file_meta(&bundle, "FILE_METADATA # a/ # empty");
    assert_eq!((empty.size, empty.checksum, empty.shard_index), (0, 0, 0));
    let dir = file_meta(&bundle, "FILE_METADATA # / # a");
    assert!(dir.is_dir());
    assert_eq!(
        (dir.size, dir.shard_index, dir.shard_offset, dir.checksum),
        (0, 0, 0, 0)
    );
    let out = packfs_ok(&["verify", s(&bundle)]);
    assert!(stdout(&out).starts_with("OK bundle"), "{}", stdout(&out));
}

/// What opening a bundle does not check, `verify` does: the header's
/// padding, that every key is of a kind the format defines, and that no
/// shard file lies past `shard_count`. One line each, naming the shard or
/// key and the rule.
#[test]
fn verify_checks_header_padding_key_kinds_and_shard_files() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, bundle) = small_bundle(tmp.path(), "zstd");
    let shard = bundle.join("shard-00000000");
    flip(&shard, 100);
    let (_, record) = records(&bundle).remove(0);
    put(&bundle, "OTHER # x", &record);
    put(
        &bundle,
        "SHARD_METADATA # 00000007 # 00000000000000000000",
        &record,
    );
    // An offset not padded to 20 digits sorts out of numeric order.
    put(&bundle, "SHARD_METADATA # 00000000 # 5", &record);
    std::fs::copy(&shard, bundle.join("shard-00000001")).unwrap();

    let out = packfs(&["verify", s(&bundle)]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let fail = |parts: &[&str]| {
        let found = text
            .lines()
            .filter(|l| l.starts_with("FAIL ") && parts.iter().all(|p| l.contains(p)))
            .count();
        assert_eq!(found, 1, "{parts:?} in {text}");
    };
    fail(&[
        "shard-00000000",
        "header byte 100 is 0x10",
        "header bytes 16 to block_size − 1 are zeros",
    ]);
    fail(&[r#"index key "OTHER # x""#, "no kind the format defines"]);
    fail(&[
        r#"index key "SHARD_METADATA # 00000007 # 00000000000000000000""#,
        "no kind the format defines",
    ]);
    fail(&[
        "shard-00000001",
        "shard_count is 1",
        "shards are numbered 0 to shard_count − 1",
    ]);
    fail(&["SHARD_METADATA # 00000000 # 5", "not a SHARD_METADATA key"]);
    assert_eq!(lines_starting(&text, "FAIL "), 5, "{text}");
}

/// The names in `packfs ls` output (`-l` or not), without a directory's
/// `/`.
fn ls_names(out: &std::process::Output) -> Vec<String> {
    stdout(out)
        .lines()
        .map(|l| {
            l.rsplit(' ')
                .next()
                .unwrap()
                .trim_end_matches('/')
                .to_owned()
        })
        .collect()
}

/// Keys in the `FILE_METADATA` range that name no entry (an empty name,
/// no `/ # `, bytes that are not UTF-8) spoil only themselves: `verify`
/// names each once, escaped, with the rule; `ls` and a mount list every
/// other entry of their directory, and `ls` exits 1 naming the key.
#[test]
fn keys_that_do_not_parse_spoil_no_listing() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let (_, bundle) = small_bundle(tmp.path(), "zstd");
    let file = file_meta(&bundle, "FILE_METADATA # / # top");
    put(&bundle, "FILE_METADATA # s/ # ", &file);
    put(&bundle, "FILE_METADATA # no separator", &file);
    let mut not_utf8 = b"FILE_METADATA # / # ".to_vec();
    not_utf8.push(0xff);
    index(&bundle)
        .execute(
            "INSERT INTO bundle (key, value) VALUES (CAST(?1 AS TEXT), ?2)",
            rusqlite::params![not_utf8, file.encode_to_vec()],
        )
        .unwrap();

    let out = packfs(&["verify", s(&bundle)]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    for (key, rule) in [
        (
            r#"index key "FILE_METADATA # s/ # ""#,
            "a name is non-empty",
        ),
        (
            r#"index key "FILE_METADATA # no separator""#,
            "<dir>/ # <name>",
        ),
        (r#"index key "FILE_METADATA # / # \xff""#, "keys are UTF-8"),
    ] {
        let lines = text
            .lines()
            .filter(|l| l.starts_with(&format!("FAIL {key}: ")) && l.contains(rule))
            .count();
        assert_eq!(lines, 1, "{key} in {text}");
    }
    assert_eq!(lines_starting(&text, "FAIL "), 3, "{text}");

    let s_names: Vec<String> = (0..10).map(|i| format!("{i:02}")).collect();
    let root_names = ["e", "s", "top", "z"];
    for long in [false, true] {
        let flag = if long { vec!["-l"] } else { vec![] };
        let out = packfs(&[&["ls"][..], &flag, &[s(&bundle), "s"]].concat());
        assert_eq!(ls_names(&out), s_names, "{}", stdout(&out));
        failed_with(
            &out,
            &[r#"index key "FILE_METADATA # s/ # ""#, "empty name"],
        );
        assert_eq!(out.status.code(), Some(1));
        let out = packfs(&[&["ls"][..], &flag, &[s(&bundle)]].concat());
        assert_eq!(ls_names(&out), root_names, "{}", stdout(&out));
        failed_with(&out, &[r#"index key "FILE_METADATA # / # \xff""#, "UTF-8"]);
        assert_eq!(out.status.code(), Some(1));
    }

    let mnt = Mounted::new(&bundle, &tmp.path().join("mnt"), &[]);
    let listed = |dir: &str| {
        let mut names: Vec<String> = std::fs::read_dir(mnt.path.join(dir))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    };
    assert_eq!(listed("s"), s_names);
    assert_eq!(listed(""), root_names);
}
