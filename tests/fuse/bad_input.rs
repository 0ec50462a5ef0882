//! Damaged datasets and bad import sources give clear errors naming what is
//! wrong, through the `packfs` binary, and never a panic.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use packfs_format::{Manifest, ObjectId};

use crate::common;

/// What a run of the binary did.
struct Run {
    code: Option<i32>,
    stdout: Vec<u8>,
    stderr: String,
}

impl Run {
    fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    fn describe(&self) -> String {
        format!(
            "exit {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.code,
            self.stdout_text(),
            self.stderr
        )
    }

    fn assert_ok(&self) -> &Self {
        assert_eq!(self.code, Some(0), "expected success: {}", self.describe());
        self
    }

    /// Failed with a normal error exit (not a panic, not a signal) and an
    /// error message.
    fn assert_failed(&self) -> &Self {
        assert_eq!(self.code, Some(1), "expected exit 1: {}", self.describe());
        assert!(
            !self.stderr.contains("panicked"),
            "panic: {}",
            self.describe()
        );
        self
    }

    /// Asserts stderr contains every needle.
    fn stderr_has(&self, needles: &[&str]) -> &Self {
        for n in needles {
            assert!(
                self.stderr.contains(n),
                "stderr lacks {n:?}: {}",
                self.describe()
            );
        }
        self
    }
}

fn packfs(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_packfs"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run packfs");
    Run {
        code: out.status.code(),
        stdout: out.stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn s(p: &Path) -> &str {
    p.to_str().expect("temp paths are UTF-8")
}

fn import(src: &Path, dataset: &Path) -> Run {
    packfs(&[
        "import",
        s(src),
        s(dataset),
        "--pack-items",
        "2",
        "--chunk-bytes",
        "1MiB",
        "--no-progress",
    ])
}

/// Deterministic, distinct content for a source file.
fn content(name: &str, len: usize) -> Vec<u8> {
    let seed = format!("<{name}>");
    seed.bytes().cycle().take(len).collect()
}

/// The source files of the test dataset: (path below SRC, content).
/// With `--pack-items 2`, train/image is packed as [a,b] [c,d] [e].
fn source_files() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("train/image/a.jpg", content("a", 300)),
        ("train/image/b.jpg", content("b", 500)),
        ("train/image/c.jpg", content("c", 700)),
        ("train/image/d.jpg", content("d", 110)),
        ("train/image/e.jpg", content("e", 90)),
        ("train/label/x.txt", content("x", 40)),
        ("train/video/big.bin", content("big", (1 << 20) + 12345)),
        ("val/image/z.jpg", content("z", 64)),
    ]
}

fn write_tree(src: &Path, files: &[(&str, Vec<u8>)]) {
    for (rel, bytes) in files {
        let path = src.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
    }
}

fn file_bytes(name: &str) -> Vec<u8> {
    source_files()
        .into_iter()
        .find(|(n, _)| *n == name)
        .unwrap()
        .1
}

/// A temp dir with SRC imported into DATASET.
struct Fixture {
    tmp: tempfile::TempDir,
    src: PathBuf,
    ds: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        let ds = tmp.path().join("dataset");
        write_tree(&src, &source_files());
        import(&src, &ds)
            .assert_ok()
            .stderr_has(&["imported 8 files", "committed manifest"]);
        Fixture { tmp, src, ds }
    }

    fn ds(&self) -> &str {
        s(&self.ds)
    }

    fn manifest_hex(&self) -> String {
        let text = fs::read_to_string(self.ds.join("_packfs/refs/main")).unwrap();
        text.trim_end().to_string()
    }

    /// `_packfs/manifests/<hex>`, as the store names it.
    fn manifest_object(&self) -> String {
        format!("_packfs/manifests/{}", self.manifest_hex())
    }

    /// The object path and length of the pack holding `members` (in order).
    fn pack(&self, timeline: &str, modality: &str, members: &[&str]) -> (String, u64) {
        let mut body = Vec::new();
        for m in members {
            body.extend(file_bytes(&format!("{timeline}/{modality}/{m}")));
        }
        let object = format!("{timeline}/{modality}/0/{}", ObjectId::of(&body).to_hex());
        let on_disk = fs::read(self.ds.join(&object)).expect("pack exists where expected");
        assert_eq!(on_disk, body, "pack {object} holds its members in order");
        (object, body.len() as u64)
    }

    fn cat(&self, path: &str) -> Run {
        packfs(&["cat", self.ds(), path])
    }
}

/// Every file under `dir` (relative, `/`-separated) with its content,
/// except ref lock files, which are not data.
fn files_under(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_str()
                .unwrap()
                .replace('\\', "/");
            if rel == "_packfs/locks" || rel.starts_with("_packfs/locks/") {
                continue;
            }
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                out.insert(rel, fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// The decimal numbers appearing in `text`, as whole tokens.
fn numbers(text: &str) -> Vec<u64> {
    text.split(|c: char| !c.is_ascii_digit())
        .filter_map(|t| t.parse().ok())
        .collect()
}

#[test]
fn intact_dataset_reads_and_verifies() {
    let f = Fixture::new();
    for (name, bytes) in source_files() {
        let run = f.cat(name);
        run.assert_ok();
        assert!(run.stdout == bytes, "cat {name}: wrong bytes");
    }
    let ls = packfs(&["ls", f.ds(), "train/image"]);
    ls.assert_ok();
    assert_eq!(ls.stdout_text(), "a.jpg\nb.jpg\nc.jpg\nd.jpg\ne.jpg\n");
    let verify = packfs(&["verify", f.ds()]);
    verify.assert_ok();
    assert!(
        verify.stdout_text().contains("OK ref main"),
        "{}",
        verify.describe()
    );
}

/// `packfs verify DS | head -1` and the like: a reader that went away
/// before a command wrote is no error and never a panic.
#[test]
fn a_closed_stdout_ends_commands_quietly() {
    use std::os::fd::{FromRawFd, OwnedFd};
    let f = Fixture::new();
    let commands: [&[&str]; 5] = [
        &["verify", f.ds()],
        &["ls", f.ds(), "train/image"],
        &["cat", f.ds(), "train/image/a.jpg"],
        &["log", f.ds()],
        &["info", f.ds()],
    ];
    for args in commands {
        let mut fds = [0; 2];
        // SAFETY: pipe(2) fills both descriptors, owned right below.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: fresh descriptors from pipe(2), each owned once.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        drop(read);
        let out = std::process::Command::new(crate::common::PACKFS)
            .args(args)
            .stdout(write)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && !stderr.contains("panicked"),
            "packfs {args:?} into a closed pipe: {:?}\n{stderr}",
            out.status
        );
    }
}

/// `ls`, `cat` and (with `log`) `log` of `f` fail with stderr holding
/// every needle and print nothing; `verify` fails and names them too; a
/// mount fails with them and does not start.
fn assert_refused(f: &Fixture, variant: &str, needles: &[&str], log: bool) {
    let mut commands = vec![
        vec!["ls", f.ds()],
        vec!["ls", f.ds(), "train/image", "-l"],
        vec!["cat", f.ds(), "train/image/a.jpg"],
    ];
    if log {
        commands.push(vec!["log", f.ds()]);
    }
    assert_each_refused(&commands, variant, needles);
    assert_verify_names(f, variant, needles);

    common::require_fuse();
    let mnt = f.tmp.path().join("mnt");
    fs::create_dir_all(&mnt).unwrap();
    let run = packfs(&["mount", f.ds(), s(&mnt)]);
    let mounted = common::is_mounted(&mnt);
    if mounted {
        Command::new("umount").arg(&mnt).status().unwrap();
    }
    run.assert_failed().stderr_has(needles);
    assert!(!mounted, "{variant}: mounted");
}

/// Each of `commands` fails with stderr holding every needle and prints
/// nothing.
fn assert_each_refused(commands: &[Vec<&str>], variant: &str, needles: &[&str]) {
    for args in commands {
        let run = packfs(args);
        run.assert_failed().stderr_has(needles);
        assert!(
            run.stdout.is_empty(),
            "{variant} {args:?}: {}",
            run.describe()
        );
    }
}

/// `verify` of `f` fails naming every needle and passes no ref.
fn assert_verify_names(f: &Fixture, variant: &str, needles: &[&str]) {
    let verify = packfs(&["verify", f.ds()]);
    verify.assert_failed();
    let out = verify.stdout_text() + &verify.stderr;
    assert!(
        needles.iter().all(|n| out.contains(n)),
        "{variant}: verify must name {needles:?}: {}",
        verify.describe()
    );
    assert!(!out.contains("OK ref"), "{variant}: {}", verify.describe());
}

/// A damaged page or ItemManifest fails what needs it and nothing else:
/// `cat` of `held` (a file that needs it) fails naming `needles` and prints
/// nothing, and so does `ls -l` of its directory when `lists` (a name page
/// holds the listing); the rest of the dataset lists and reads; `verify`
/// fails naming it; a mount starts, answers `EIO` for `held` and reads the
/// other files.
fn assert_fails_what_it_holds(
    f: &Fixture,
    variant: &str,
    needles: &[&str],
    held: &str,
    lists: bool,
) {
    let dir = held.rsplit_once('/').unwrap().0;
    let mut refused = vec![vec!["cat", f.ds(), held]];
    let mut served = vec![vec!["ls", f.ds()], vec!["cat", f.ds(), "train/label/x.txt"]];
    match lists {
        true => refused.push(vec!["ls", f.ds(), dir, "-l"]),
        false => served.push(vec!["ls", f.ds(), dir, "-l"]),
    }
    assert_each_refused(&refused, variant, needles);
    for args in served {
        let run = packfs(&args);
        run.assert_ok();
        assert!(
            !run.stdout.is_empty(),
            "{variant} {args:?}: {}",
            run.describe()
        );
    }
    assert_verify_names(f, variant, needles);

    common::require_fuse();
    let mnt = f.tmp.path().join("mnt");
    fs::create_dir_all(&mnt).unwrap();
    packfs(&["mount", f.ds(), s(&mnt), "--read-only"]).assert_ok();
    let damaged = fs::read(mnt.join(held));
    let intact = fs::read(mnt.join("train/label/x.txt"));
    Command::new("umount").arg(&mnt).status().unwrap();
    let e = damaged.expect_err("a file whose index or ItemManifest is damaged");
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{variant}: {e}");
    assert_eq!(intact.unwrap(), content("x", 40), "{variant}");
}

/// A Manifest damaged in place: its bytes no longer hash to its name.
fn assert_damaged_manifest(f: &Fixture, variant: &str) {
    let object = f.manifest_object();
    assert_refused(f, variant, &[object.as_str(), "is damaged"], true);
}

#[test]
fn truncated_manifest_is_damaged() {
    let f = Fixture::new();
    let path = f.ds.join(f.manifest_object());
    let bytes = fs::read(&path).unwrap();
    fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    assert_damaged_manifest(&f, "truncated");
}

#[test]
fn garbage_manifest_is_damaged() {
    let f = Fixture::new();
    let path = f.ds.join(f.manifest_object());
    // 0xff is a "break" with no indefinite-length item open: never valid.
    fs::write(&path, b"\xff\x00garbage, not a manifest").unwrap();
    assert_damaged_manifest(&f, "garbage");
}

#[test]
fn manifest_with_trailing_bytes_is_damaged() {
    let f = Fixture::new();
    let path = f.ds.join(f.manifest_object());
    let mut bytes = fs::read(&path).unwrap();
    bytes.extend_from_slice(b"\x00\x01");
    fs::write(&path, &bytes).unwrap();
    assert_damaged_manifest(&f, "trailing bytes");
}

#[test]
fn truncated_pack_names_pack_and_lengths() {
    let f = Fixture::new();
    let (pack, pack_len) = f.pack("train", "image", &["a.jpg", "b.jpg"]);
    let a_len = file_bytes("train/image/a.jpg").len() as u64;
    // Still longer than a.jpg, so a.jpg's own range is readable: the length
    // check alone must catch it. b.jpg's range runs past the end.
    let cut = a_len + 100;
    assert!(cut < pack_len);
    let file = fs::OpenOptions::new()
        .write(true)
        .open(f.ds.join(&pack))
        .unwrap();
    file.set_len(cut).unwrap();
    drop(file);

    for item in ["train/image/a.jpg", "train/image/b.jpg"] {
        let run = f.cat(item);
        run.assert_failed().stderr_has(&[pack.as_str()]);
        let nums = numbers(&run.stderr);
        assert!(
            nums.contains(&pack_len) && nums.contains(&cut),
            "cat {item}: stderr must give expected length {pack_len} and actual {cut}: {}",
            run.describe()
        );
        assert!(
            run.stdout.is_empty(),
            "cat {item}: no partial output: {}",
            run.describe()
        );
    }

    // Items in intact packs, chunked items and other tracks still read.
    for item in [
        "train/image/c.jpg",
        "train/image/d.jpg",
        "train/image/e.jpg",
        "train/video/big.bin",
        "val/image/z.jpg",
    ] {
        let run = f.cat(item);
        run.assert_ok();
        assert!(run.stdout == file_bytes(item), "cat {item}: wrong bytes");
    }
    // Metadata is intact, so listing still works.
    packfs(&["ls", f.ds(), "train/image", "-l"]).assert_ok();

    let verify = packfs(&["verify", f.ds()]);
    verify.assert_failed();
    let out = verify.stdout_text();
    let line = out
        .lines()
        .find(|l| l.contains(&pack))
        .unwrap_or_else(|| panic!("verify must name {pack}: {}", verify.describe()));
    let nums = numbers(line);
    assert!(
        line.starts_with("FAIL") && nums.contains(&pack_len) && nums.contains(&cut),
        "verify line for the pack must give both lengths: {line}"
    );
    assert_eq!(
        out.lines().filter(|l| l.starts_with("FAIL")).count(),
        1,
        "only the damaged pack is a problem: {}",
        verify.describe()
    );

    // Through a mount: EIO for the damaged pack's items, the rest reads.
    common::require_fuse();
    let m = common::Mounted::new(&f.ds, &f.tmp.path().join("mnt"), &[]);
    for item in ["train/image/a.jpg", "train/image/b.jpg"] {
        let err = fs::read(m.path.join(item)).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EIO), "{item}");
    }
    for item in [
        "train/image/c.jpg",
        "train/video/big.bin",
        "val/image/z.jpg",
    ] {
        assert!(
            fs::read(m.path.join(item)).unwrap() == file_bytes(item),
            "{item}"
        );
    }
}

/// The Track object of `timeline/modality` in the fixture's Manifest.
fn track_object(f: &Fixture, timeline: &str, modality: &str) -> String {
    let bytes = fs::read(f.ds.join(f.manifest_object())).unwrap();
    let manifest = Manifest::decode(&bytes, "the fixture's manifest").unwrap();
    let entry = manifest
        .tracks
        .iter()
        .find(|t| t.timeline == timeline && t.modality == modality)
        .unwrap();
    format!("_packfs/tracks/{}", entry.track.to_hex())
}

/// A Track object whose bytes are not those its name is the hash of, but
/// still a valid Track (a whole other Track copied over it), and a page of
/// a paged Track with one byte of a name changed. Every command that needs
/// it refuses it, naming the object, its id and the hash of what is there;
/// a damaged page fails only what it holds.
#[test]
fn track_or_page_that_does_not_hash_to_its_name_is_refused() {
    for variant in ["another track", "a page with one byte changed"] {
        let f = Fixture::new();
        let object = match variant {
            "another track" => track_object(&f, "train", "image"),
            _ => page_holding(&f, b"a.jpg"),
        };
        let expected = object.rsplit('/').next().unwrap().to_string();
        let path = f.ds.join(&object);
        let damaged = if variant == "another track" {
            fs::read(f.ds.join(track_object(&f, "train", "label"))).unwrap()
        } else {
            let mut bytes = fs::read(&path).unwrap();
            let at = bytes.windows(5).position(|w| w == b"a.jpg").unwrap();
            bytes[at] = b'q';
            bytes
        };
        let found = ObjectId::of(&damaged).to_hex();
        fs::write(&path, &damaged).unwrap();
        let needles = [object.as_str(), "is damaged", &found, &expected];
        match variant {
            // The root: nothing of the dataset can be shown.
            "another track" => assert_refused(&f, variant, &needles, false),
            _ => assert_fails_what_it_holds(&f, variant, &needles, "train/image/a.jpg", true),
        }
    }
}

/// The page object (`_packfs/pages/<hex>`) whose bytes contain `needle`.
fn page_holding(f: &Fixture, needle: &[u8]) -> String {
    let pages = f.ds.join("_packfs/pages");
    let found = fs::read_dir(&pages)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            let bytes = fs::read(p).unwrap();
            bytes.windows(needle.len()).any(|w| w == needle)
        })
        .unwrap_or_else(|| panic!("no page under {} holds {needle:?}", pages.display()));
    format!(
        "_packfs/pages/{}",
        found.file_name().unwrap().to_str().unwrap()
    )
}

#[test]
fn item_manifest_that_does_not_hash_to_its_name_is_refused() {
    let f = Fixture::new();
    // The smallest object of train/video is the ItemManifest (the other
    // two are its 1 MiB and 12345-byte chunks).
    let dir = f.ds.join("train/video/0");
    let path = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .min_by_key(|p| fs::metadata(p).unwrap().len())
        .unwrap();
    let expected = path.file_name().unwrap().to_str().unwrap().to_string();
    let object = format!("train/video/0/{expected}");
    let mut manifest: ciborium::Value =
        ciborium::from_reader(&fs::read(&path).unwrap()[..]).unwrap();
    let ciborium::Value::Map(fields) = &mut manifest else {
        panic!("an ItemManifest is a map")
    };
    let (_, ciborium::Value::Array(chunks)) = fields
        .iter_mut()
        .find(|(k, _)| k.as_text() == Some("chunks"))
        .unwrap()
    else {
        panic!("chunks is an array")
    };
    assert_eq!(chunks.len(), 2);
    chunks.swap(0, 1);
    let mut damaged = Vec::new();
    ciborium::into_writer(&manifest, &mut damaged).unwrap();
    let found = ObjectId::of(&damaged).to_hex();
    fs::write(&path, &damaged).unwrap();
    let needles = [object.as_str(), "is damaged", &found, &expected];
    assert_fails_what_it_holds(&f, "chunks swapped", &needles, "train/video/big.bin", false);
}

#[test]
fn missing_pack_is_named() {
    let f = Fixture::new();
    let (pack, _) = f.pack("train", "image", &["c.jpg", "d.jpg"]);
    fs::remove_file(f.ds.join(&pack)).unwrap();
    f.cat("train/image/c.jpg")
        .assert_failed()
        .stderr_has(&[pack.as_str(), "does not exist"]);
    let run = f.cat("train/image/a.jpg");
    run.assert_ok();
    assert!(run.stdout == file_bytes("train/image/a.jpg"));
    let verify = packfs(&["verify", f.ds()]);
    verify.assert_failed();
    assert!(
        verify
            .stdout_text()
            .lines()
            .any(|l| l.starts_with("FAIL") && l.contains(&pack) && l.contains("missing")),
        "{}",
        verify.describe()
    );
}

#[test]
fn ref_to_missing_manifest_names_ref_and_path() {
    let f = Fixture::new();
    let bogus = ObjectId::of(b"no such manifest").to_hex();
    assert!(!f.ds.join(format!("_packfs/manifests/{bogus}")).exists());
    fs::write(f.ds.join("_packfs/refs/main"), format!("{bogus}\n")).unwrap();
    let missing = format!("_packfs/manifests/{bogus}");
    for args in [
        vec!["ls", f.ds()],
        vec!["cat", f.ds(), "train/image/a.jpg"],
        vec!["log", f.ds()],
    ] {
        packfs(&args).assert_failed().stderr_has(&[
            "ref \"main\"",
            missing.as_str(),
            "does not exist",
        ]);
    }
    let verify = packfs(&["verify", f.ds()]);
    verify.assert_failed();
    let out = verify.stdout_text() + &verify.stderr;
    assert!(
        out.contains("ref \"main\"") && out.contains(&missing),
        "{}",
        verify.describe()
    );
}

#[test]
fn malformed_ref_is_named() {
    let f = Fixture::new();
    fs::write(f.ds.join("_packfs/refs/main"), "not a manifest id\n").unwrap();
    packfs(&["ls", f.ds()])
        .assert_failed()
        .stderr_has(&["ref \"main\"", "not a 64-hex-digit manifest id"]);
    // Truncated: the newline is missing.
    let hex = ObjectId::of(b"x").to_hex();
    fs::write(f.ds.join("_packfs/refs/main"), &hex[..40]).unwrap();
    packfs(&["cat", f.ds(), "train/image/a.jpg"])
        .assert_failed()
        .stderr_has(&["ref \"main\"", "truncated"]);
}

#[test]
fn missing_ref_does_not_exist() {
    let f = Fixture::new();
    for args in [
        vec!["ls", f.ds(), "--ref", "nope"],
        vec!["cat", f.ds(), "--ref", "nope", "train/image/a.jpg"],
        vec!["log", f.ds(), "--ref", "nope"],
        vec!["verify", f.ds(), "--ref", "nope"],
    ] {
        let run = packfs(&args);
        run.assert_failed()
            .stderr_has(&["ref \"nope\"", "does not exist"]);
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.describe());
    }
    // An invalid ref name is refused as such, as a usage error.
    let run = packfs(&["ls", f.ds(), "--ref", "../main"]);
    assert_eq!(run.code, Some(2), "{}", run.describe());
    run.stderr_has(&["\"../main\"", "ref"]);
}

#[test]
fn missing_dataset_directory_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let nowhere = tmp.path().join("nowhere");
    packfs(&["ls", s(&nowhere)])
        .assert_failed()
        .stderr_has(&[s(&nowhere)]);
    assert!(!nowhere.exists(), "readers must not create the dataset");
}

/// Importing `files` fails, naming each of `needles`, and writes nothing
/// into a fresh dataset.
fn assert_import_rejected(files: &[(&str, Vec<u8>)], needles: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let ds = tmp.path().join("dataset");
    write_tree(&src, files);
    let run = import(&src, &ds);
    run.assert_failed().stderr_has(needles);
    run.stderr_has(&["nothing was written"]);
    assert!(!ds.join("_packfs/refs/main").exists(), "{}", run.describe());
    let written = files_under(&ds);
    assert!(
        written.is_empty(),
        "a rejected import wrote {:?}",
        written.keys().collect::<Vec<_>>()
    );
}

#[test]
fn import_rejects_file_at_wrong_depth() {
    let files = vec![
        ("train/image/ok.jpg", content("ok", 100)),
        ("train/file.jpg", content("f", 100)),
    ];
    assert_import_rejected(&files, &["train/file.jpg", "wrong depth"]);
    // A file directly in SRC is at the wrong depth too.
    assert_import_rejected(
        &[
            ("train/image/ok.jpg", content("ok", 100)),
            ("top.jpg", content("t", 10)),
        ],
        &["top.jpg", "wrong depth"],
    );
}

#[test]
fn import_rejects_wrong_depth_with_full_path() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let ds = tmp.path().join("dataset");
    write_tree(&src, &[("train/file.jpg", content("f", 100))]);
    let full = src.join("train/file.jpg");
    import(&src, &ds)
        .assert_failed()
        .stderr_has(&[s(&full), "wrong depth"]);
}

#[test]
fn import_rejects_reserved_names() {
    assert_import_rejected(
        &[
            ("train/image/ok.jpg", content("ok", 100)),
            ("train/_packfsX/a.jpg", content("a", 100)),
        ],
        &["\"_packfsX\"", "modality", "reserved"],
    );
    // A timeline named _packfs would land among the dataset's metadata.
    assert_import_rejected(
        &[("_packfs/refs/main", content("r", 65))],
        &["\"_packfs\"", "timeline", "reserved"],
    );
}

#[test]
fn rejected_import_leaves_existing_dataset_unchanged() {
    let f = Fixture::new();
    let before = files_under(&f.ds);
    write_tree(&f.src, &[("train/stray.jpg", content("stray", 10))]);
    fs::write(f.src.join("train/image/new.jpg"), content("new", 10)).unwrap();
    import(&f.src, &f.ds).assert_failed().stderr_has(&[
        "stray.jpg",
        "wrong depth",
        "nothing was written",
    ]);
    assert_eq!(
        files_under(&f.ds),
        before,
        "a rejected import must not touch the dataset"
    );
}

#[test]
fn reimporting_identical_tree_writes_nothing() {
    let f = Fixture::new();
    let before = files_under(&f.ds);
    assert!(before.contains_key("_packfs/refs/main"));
    let run = import(&f.src, &f.ds);
    run.assert_ok()
        .stderr_has(&["0 objects written", "nothing committed"]);
    let after = files_under(&f.ds);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "re-import must not add or remove objects"
    );
    assert!(before == after, "re-import must not rewrite any object");
    let log = packfs(&["log", f.ds()]);
    log.assert_ok();
    assert_eq!(
        log.stdout_text().matches("manifest ").count(),
        1,
        "{}",
        log.describe()
    );
}
