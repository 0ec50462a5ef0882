//! Hostile names in a Track (`..`, absolute paths, NUL, 10,000-byte names,
//! duplicates) written straight into the store by someone who bypassed
//! packfs: mount, ls and verify refuse the Track with an error naming it,
//! the name and the rule, and nothing appears outside the mount or spool.

use std::path::Path;

use ciborium::Value;
use packfs_core::dataset::Dataset;
use packfs_format::ObjectId;

use crate::common::*;

/// Replaces every byte string equal to `old` in `value` with `new`.
fn replace_bytes(value: &mut Value, old: &[u8], new: &[u8]) {
    match value {
        Value::Bytes(b) if b.as_slice() == old => *b = new.to_vec(),
        Value::Array(items) => items.iter_mut().for_each(|v| replace_bytes(v, old, new)),
        Value::Map(pairs) => pairs.iter_mut().for_each(|(k, v)| {
            replace_bytes(k, old, new);
            replace_bytes(v, old, new);
        }),
        Value::Tag(_, v) => replace_bytes(v, old, new),
        _ => {}
    }
}

fn encode(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    ciborium::into_writer(value, &mut out).unwrap();
    out
}

/// Writes a copy of `main` whose only Track has its names changed by
/// `edit`, and points ref `name` at it, as a tool that ignores packfs's
/// rules could. Returns the tampered Track's object path.
fn tamper(dataset: &Dataset, name: &str, edit: impl FnOnce(&mut Vec<Value>)) -> String {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = dataset.store();
        let manifest_id = dataset.resolve("main").await.unwrap();
        let manifest_path = store.layout().manifest(&manifest_id);
        let manifest = dataset.manifest(&manifest_id, "main").await.unwrap();
        let track_id = manifest.tracks[0].track;
        // Tampered in the single-object form, which every packfs reads.
        let track_bytes = dataset.track(&track_id, "main").await.unwrap().encode();

        let mut track: Value = ciborium::from_reader(&track_bytes[..]).unwrap();
        let Value::Map(fields) = &mut track else {
            panic!("a Track is a map")
        };
        let names = fields
            .iter_mut()
            .find(|(k, _)| k.as_text() == Some("names"))
            .map(|(_, v)| v)
            .unwrap();
        let Value::Array(names) = names else {
            panic!("names is an array")
        };
        edit(names);
        let track_bytes = encode(&track);
        let new_track = ObjectId::of(&track_bytes);
        let track_path = store.layout().track(&new_track);
        store
            .put_immutable(&track_path, track_bytes.into())
            .await
            .unwrap();

        let mut manifest: Value =
            ciborium::from_reader(&store.get(&manifest_path).await.unwrap()[..]).unwrap();
        replace_bytes(&mut manifest, &track_id.0, &new_track.0);
        let manifest_bytes = encode(&manifest);
        let new_manifest = ObjectId::of(&manifest_bytes);
        store
            .put_immutable(
                &store.layout().manifest(&new_manifest),
                manifest_bytes.into(),
            )
            .await
            .unwrap();
        store.update_ref(name, None, new_manifest).await.unwrap();
        track_path.to_string()
    })
}

/// Every file and directory below `dir`, but the dataset's metadata
/// (where the tampering itself writes).
fn everything_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let (dirs, files) = walk(dir);
    let mut all: Vec<_> = dirs.into_iter().map(|(d, _)| d).collect();
    all.extend(files);
    all.retain(|p| !p.starts_with("ds/_packfs"));
    all
}

#[test]
fn hostile_names_are_refused_and_never_escape() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    for name in ["a", "b", "c"] {
        write_file(&src.join("t/m").join(name), name.as_bytes());
    }
    let home = Home::local(tmp.path());
    home.import(&src, &[]);
    let dataset = Dataset::open(home.location(), false).unwrap();

    let long_component = "c".repeat(256);
    let ten_k = "x".repeat(10_000);
    let deep = "d/".repeat(3_000) + "leaf";
    let cases: Vec<(&str, String, &str)> = vec![
        ("dotdot", "../../../escaped".into(), "'..' components"),
        ("absolute", "/tmp/escaped".into(), "starts with '/'"),
        ("nul", "a\0b".into(), "contains NUL"),
        ("dot", "./a".into(), "'.' and '..' components"),
        ("empty", String::new(), "empty name"),
        ("empty-component", "a//b".into(), "empty path component"),
        ("long-component", long_component, "longer than 255 bytes"),
        ("ten-k", ten_k, "longer than 4096 bytes"),
        ("deep", deep, "longer than 4096 bytes"),
        ("duplicate", "a".into(), "duplicate name"),
    ];
    let before = everything_under(tmp.path());
    for (i, (case, name, rule)) in cases.iter().enumerate() {
        let ref_name = format!("hostile-{case}");
        let track = tamper(&dataset, &ref_name, |names| {
            names[1] = Value::Text(name.clone());
        });
        let mnt = tmp.path().join(format!("mnt{i}"));
        std::fs::create_dir(&mnt).unwrap();
        let spool = tmp.path().join(format!("spool{i}"));
        let mount = home.packfs(&[
            "mount",
            home.location(),
            mnt.to_str().unwrap(),
            "--ref",
            &ref_name,
            "--spool-dir",
            spool.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&mount.stderr);
        assert!(!mount.status.success(), "{case}: mounted");
        assert!(!is_mounted(&mnt), "{case}: mounted");
        for needle in [track.as_str(), rule] {
            assert!(
                stderr.contains(needle),
                "{case}: {needle:?} missing from {stderr}"
            );
        }
        assert!(
            !stderr.contains('\0'),
            "{case}: a raw NUL reached the terminal"
        );
        for command in ["ls", "verify"] {
            let out = home.packfs(&[command, home.location(), "--ref", &ref_name]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(!out.status.success(), "{case}: {command} accepted it");
            assert!(
                stderr.contains(rule) || stdout.contains(rule),
                "{case}: {command}: {stderr}{stdout}"
            );
        }
        std::fs::remove_dir(&mnt).unwrap();
        let _ = std::fs::remove_dir_all(&spool);
    }
    // Nothing was created anywhere: not beside the mounts, not among the
    // dataset's data objects, not outside.
    assert_eq!(everything_under(tmp.path()), before);
    assert!(!Path::new("/tmp/escaped").exists());
    // The untampered ref still mounts and reads.
    let m = home.mount(&tmp.path().join("mnt"), &[]);
    assert_eq!(std::fs::read(m.path.join("t/m/b")).unwrap(), b"b");
    m.unmount();
}

#[test]
fn a_name_that_is_not_text_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    write_file(&src.join("t/m/a"), b"a");
    write_file(&src.join("t/m/b"), b"b");
    let home = Home::local(tmp.path());
    home.import(&src, &[]);
    let dataset = Dataset::open(home.location(), false).unwrap();
    let track = tamper(&dataset, "bytes-name", |names| {
        names[0] = Value::Bytes(b"../escaped".to_vec());
    });
    let out = home.packfs(&["ls", home.location(), "--ref", "bytes-name"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains(&track), "{stderr}");
}
