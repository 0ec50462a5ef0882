//! `packfs info`: the counts it prints are the dataset's, as a table and
//! as JSON, at a ref and at an older revision.

use crate::common::*;

#[test]
fn info_counts_items_storage_packs_and_history() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    for i in 0..10 {
        write_file(&src.join(format!("train/image/{i}.jpg")), &[i as u8; 100]);
    }
    write_file(&src.join("train/caption/0.txt"), b"zero");
    write_file(&src.join("val/video/big.bin"), &[7u8; 3000]);
    let ds = dir.path().join("ds");
    import(&src, &ds, &["--pack-items", "4", "--chunk-bytes", "1024"]);
    // A second commit replaces one image: its old bytes stay in a pack.
    let v2 = dir.path().join("v2");
    write_file(&v2.join("train/image/3.jpg"), &[9u8; 50]);
    import(&v2, &ds, &[]);
    let ds = ds.to_str().unwrap();

    let json = packfs_ok(&["info", ds, "--json"]).stdout;
    let info: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(info["revision"], "main");
    assert_eq!(info["history_depth"], 2);
    let track = |timeline: &str, modality: &str| {
        info["tracks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["timeline"] == timeline && t["modality"] == modality)
            .unwrap()
            .clone()
    };
    let image = track("train", "image");
    assert_eq!(image["items"], 10);
    assert_eq!(image["bytes"], 9 * 100 + 50);
    // A lone small file is stored whole, not as a pack of one.
    assert_eq!(
        (image["packed_items"].clone(), image["whole_items"].clone()),
        (9.into(), 1.into())
    );
    // ⌈10/4⌉ packs of the first import, the old 3.jpg still in one.
    assert_eq!(image["packs"], 3);
    assert_eq!(image["pack_bytes"], 1000);
    let fill = image["pack_fill"].as_f64().unwrap();
    assert!((fill - 0.9).abs() < 1e-9, "{fill}");
    let video = track("val", "video");
    assert_eq!(video["chunked_items"], 1);
    assert_eq!(video["chunks"], 3);
    assert_eq!(video["packs"], 0);
    assert_eq!(info["totals"]["items"], 12);
    assert_eq!(info["totals"]["bytes"], 950 + 4 + 3000);

    let old: serde_json::Value =
        serde_json::from_slice(&packfs_ok(&["info", ds, "--ref", "main~1", "--json"]).stdout)
            .unwrap();
    assert_eq!(old["history_depth"], 1);
    assert_eq!(old["totals"]["bytes"], 1000 + 4 + 3000);

    let table = String::from_utf8(packfs_ok(&["info", ds]).stdout).unwrap();
    assert!(
        table.contains("history   2 Manifests along first parents"),
        "{table}"
    );
    let row = table
        .lines()
        .find(|l| l.starts_with("train     image"))
        .unwrap();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[2..5], ["10", "950", "B"], "{row}");
    assert!(row.ends_with("90%"), "{row}");
    let video = table.lines().find(|l| l.starts_with("val")).unwrap();
    assert!(video.contains("1 (3 chunks)"), "{video}");
    failed_with(&packfs(&["info", ds, "--ref", "nosuchref"]), &["nosuchref"]);
}

/// `verify` and `gc` draw a progress bar on a terminal (run under
/// `script`, which gives them one), and nothing when output is a pipe.
#[test]
fn verify_and_gc_show_progress_on_a_terminal_only() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..20 {
        write_file(&dir.path().join(format!("src/t/m/{i}")), &[i as u8; 10]);
    }
    let ds = dir.path().join("ds");
    import(&dir.path().join("src"), &ds, &["--pack-items", "2"]);
    let ds = ds.to_str().unwrap();
    let on_terminal = |args: &str| -> String {
        let command = format!("{PACKFS} {args} {ds}");
        let out = run_ok("script", &["-qec", &command, "/dev/null"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let verify = on_terminal("verify");
    assert!(verify.contains("verifying objects ["), "{verify}");
    assert!(
        verify.contains("/14"),
        "10 packs, a Track's root, name page and pack page, a Manifest: {verify}"
    );
    assert!(verify.contains("OK ref main"), "{verify}");
    let gc = on_terminal("gc --dry-run");
    assert!(gc.contains("gc ["), "{gc}");

    let piped = packfs_ok(&["verify", ds]);
    assert!(!String::from_utf8_lossy(&piped.stderr).contains("verifying"));
    assert!(String::from_utf8_lossy(&piped.stdout).starts_with("OK ref main"));
}
