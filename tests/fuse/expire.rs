//! Storage proportional to live data, through the kernel: a read-write
//! mount holds a lease while it runs and keeps committing (and merging)
//! across an expiry and a gc; an SQLite database written a row per
//! transaction leaves a store that shrinks back to about the database once
//! its history is expired; and a large database's history grows by the
//! chunks each transaction changed, not by the database.

use std::path::Path;
use std::process::Command;

use crate::common::*;
use crate::seeded_dataset;

/// Bytes of every file below `dir`.
fn du(dir: &Path) -> u64 {
    let files = walk(dir).1;
    files
        .iter()
        .map(|f| dir.join(f).metadata().unwrap().len())
        .sum()
}

/// `packfs ARGS…` allowed a grace and a kept history below their floors
/// (nobody else writes to the test's store).
fn unsafe_ok(args: &[&str]) -> String {
    let out = packfs_with_env(&[(packfs_core::gc::UNSAFE_GRACE_ENV, "1".into())], args);
    let out = succeeded(&format!("packfs {args:?}"), out);
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn leases(ds: &Path) -> Vec<String> {
    let dir = ds.join("_packfs/leases");
    match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[test]
fn a_mount_commits_across_expiry_and_gc_and_the_store_shrinks_to_the_database() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let ds = seeded_dataset(dir);
    let dss = ds.to_str().unwrap();
    let before = du(&ds);

    let m = Mounted::writable_in(dir, &ds, &[]);
    let held = leases(&ds);
    assert_eq!(held.len(), 1, "{held:?}");
    assert!(held[0].contains("ref main\n") && held[0].ends_with("writes yes\n"));

    // 100 rows, each its own transaction: SQLite fsyncs each, and each
    // fsync commits.
    let db = m.path.join("t/m/rows.db");
    let insert = |from: usize, to: usize| {
        let script = format!(
            "import sqlite3\n\
             db = sqlite3.connect({db:?}, isolation_level=None)\n\
             db.execute('CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT)')\n\
             for i in range({from}, {to}):\n    db.execute('INSERT INTO t (v) VALUES (?)', (f'row {{i}}',))\n\
             db.close()\n"
        );
        let out = Command::new("python3")
            .args(["-c", &script])
            .output()
            .unwrap();
        succeeded("python3 sqlite3", out);
    };
    insert(0, 100);
    let db_bytes = std::fs::metadata(&db).unwrap().len();
    let with_history = du(&ds) - before;

    // Another writer moves main meanwhile; the history is expired to one
    // Manifest and collected while the mount is still up.
    for i in 0..3 {
        write_file(
            &dir.join(format!("other{i}/t/m/other{i}")),
            b"from another writer",
        );
        import(&dir.join(format!("other{i}")), &ds, &[]);
    }
    let keep = ["--keep-last", "1", "--keep-within", "0s"];
    let expired = unsafe_ok(&[&["expire", dss][..], &keep].concat());
    assert!(expired.contains("1 mounts' leases"), "{expired}");
    unsafe_ok(&["gc", dss, "--grace", "0s"]);

    // The mount goes on: its next commit merges onto the moved ref.
    insert(100, 101);
    packfs_ok(&["sync", m.path.to_str().unwrap()]);
    m.unmount();
    assert!(leases(&ds).is_empty(), "an unmount releases its lease");

    // A dry run lists what would go, a line each, and changes nothing.
    let env = [(packfs_core::gc::UNSAFE_GRACE_ENV, "1".to_string())];
    let records = || std::fs::read_dir(ds.join("_packfs/expiry")).map_or(0, |d| d.count());
    let before_dry = records();
    let dry = packfs_with_env(&env, &[&["expire", dss, "--dry-run"][..], &keep].concat());
    let dry = succeeded("packfs expire --dry-run", dry);
    let listed = String::from_utf8_lossy(&dry.stdout).into_owned();
    assert!(listed.lines().count() > 100, "{listed}");
    assert!(
        listed
            .lines()
            .all(|l| l.starts_with("would expire manifest ")),
        "{listed}"
    );
    assert_eq!(records(), before_dry);
    let expired = unsafe_ok(&[&["expire", dss][..], &keep].concat());
    assert!(expired.contains("0 mounts' leases"), "{expired}");
    assert!(
        expired.contains(&format!("expired {}", listed.lines().count())),
        "{expired}"
    );
    unsafe_ok(&["gc", dss, "--grace", "0s"]);
    let after = du(&ds) - before;
    eprintln!(
        "SQLite database {db_bytes} bytes; store growth after 100 commits {with_history} bytes \
         ({:.1}x), after expire and gc {after} bytes ({:.2}x)",
        with_history as f64 / db_bytes as f64,
        after as f64 / db_bytes as f64
    );
    assert!(
        after <= 2 * db_bytes + 3 * 1024,
        "{after} bytes of store growth after expiry for a {db_bytes}-byte database"
    );

    let verified = packfs_ok(&["verify", dss]);
    assert!(verified.status.success());
    let m = Mounted::new(&ds, &dir.join("mnt"), &[]);
    let count = format!(
        "import sqlite3\nprint(sqlite3.connect('file:{}?mode=ro', uri=True).execute('SELECT count(*) FROM t').fetchone()[0])",
        m.path.join("t/m/rows.db").display()
    );
    let out = succeeded(
        "count",
        Command::new("python3")
            .args(["-c", &count])
            .output()
            .unwrap(),
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "101");
    for i in 0..3 {
        assert!(m.path.join(format!("t/m/other{i}")).exists());
    }
    let log = packfs_ok(&["log", dss]);
    assert!(String::from_utf8_lossy(&log.stdout).contains("expired by packfs expire"));
}

/// Runs `script` (Python) with `db` as the path of an SQLite database.
fn sqlite(db: &Path, script: &str) -> String {
    let program =
        format!("import sqlite3\ndb = sqlite3.connect({db:?}, isolation_level=None)\n{script}");
    let out = Command::new("python3")
        .args(["-c", &program])
        .output()
        .unwrap();
    String::from_utf8_lossy(&succeeded("python3 sqlite3", out).stdout).into_owned()
}

#[test]
fn a_large_database_written_row_by_row_stores_the_chunks_each_row_changed() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let ds = seeded_dataset(dir);
    let m = Mounted::writable_in(dir, &ds, &[]);
    let db = m.path.join("t/m/big.db");
    // ~6 MiB of rows in one transaction: the database is then chunked.
    sqlite(
        &db,
        "db.execute('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)')\n\
         db.execute('BEGIN')\n\
         for i in range(30000):\n    db.execute('INSERT INTO t (v) VALUES (?)', ('x' * 180 + str(i),))\n\
         db.execute('COMMIT')\n",
    );
    packfs_ok(&["sync", m.path.to_str().unwrap()]);
    let db_bytes = std::fs::metadata(&db).unwrap().len();
    assert!(db_bytes > 5 << 20, "{db_bytes} bytes");
    let before = du(&ds);

    // 100 rows, each its own transaction (each fsync commits).
    sqlite(
        &db,
        "for i in range(100):\n    db.execute('INSERT INTO t (v) VALUES (?)', (f'row {i}',))\n",
    );
    packfs_ok(&["sync", m.path.to_str().unwrap()]);
    let growth = du(&ds) - before;
    let commits = packfs_ok(&["log", ds.to_str().unwrap(), "-n", "1000"]);
    let commits = String::from_utf8_lossy(&commits.stdout)
        .matches("manifest ")
        .count();
    eprintln!(
        "SQLite database {db_bytes} bytes: 100 single-row transactions ({commits} Manifests in all) \
         grew the store by {growth} bytes ({:.2}x the database)",
        growth as f64 / db_bytes as f64
    );
    assert!(
        growth <= 10 * db_bytes,
        "{growth} bytes of growth for 100 rows of a {db_bytes}-byte database"
    );
    m.unmount();
    let m = Mounted::new(&ds, &dir.join("mnt"), &[]);
    let count = sqlite(
        &m.path.join("t/m/big.db"),
        "print(db.execute('SELECT count(*) FROM t').fetchone()[0])",
    );
    assert_eq!(count.trim(), "30100");
    drop(m);
    packfs_ok(&["verify", ds.to_str().unwrap()]);
}

/// A mount killed with SIGKILL leaves its lease (its Manifest must stay
/// for its spool); the next mount of that spool commits what it left and
/// deletes that lease, so only its own remains.
#[test]
fn the_mount_that_recovers_a_spool_releases_the_dead_mounts_lease() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let ds = seeded_dataset(dir);
    let m = Mounted::writable_in(dir, &ds, &["--idle-flush", "3600"]);
    std::fs::write(m.path.join("t/m/left"), b"left in the spool").unwrap();
    let dead = leases(&ds);
    assert_eq!(dead.len(), 1);
    m.kill();
    m.unmount(); // clears the dead mount
    assert_eq!(leases(&ds), dead, "a dead mount's lease stays");

    let m = Mounted::writable_in(dir, &ds, &[]);
    assert_eq!(
        std::fs::read(m.path.join("t/m/left")).unwrap(),
        b"left in the spool"
    );
    let held = leases(&ds);
    assert_eq!(held.len(), 1, "{held:?}");
    m.unmount();
    assert!(leases(&ds).is_empty());
}
