//! `gc` racing a load, and publications that count rows twice: gc deletes nothing while a load
//! holds its lease (and collects once the holder is gone), verify fails a table whose object is
//! added twice by the log, a rerun after gc deleted published objects publishes no second
//! manifest, and gc and verify agree on what a table is.

use std::path::{Path, PathBuf};

use crate::common::{fails, ok, p, run, versions};

/// A local store with the hits table's schema and layout set.
fn hits_store(dir: &Path) -> PathBuf {
    let store = dir.join("store");
    let layout = |args: &str| ok(&format!("layout --store {} --table hits {args}", p(&store)));
    layout("schema set --hits");
    layout("clustering-key set --column EventDate --column UserID --bucket-width 1d");
    store
}

/// A generated hits file of 20,000 rows.
fn generated(dir: &Path) -> PathBuf {
    let out = dir.join("in.parquet");
    ok(&format!("gen --rows 20000 --seed 9 --out {}", p(&out)));
    out
}

fn load(store: &Path, input: &Path) -> serde_json::Value {
    serde_json::from_str(&ok(&format!(
        "load --store {} --table hits --input {} --object-bytes 300000 --json",
        p(store),
        p(input)
    )))
    .unwrap()
}

fn gc_now(store: &Path) -> String {
    ok(&format!(
        "gc --store {} --table hits --older-than 0s",
        p(store)
    ))
}

/// A lease as a load on `host` with process `pid` writes it.
fn write_lease(store: &Path, id: &str, host: &str, pid: u32) -> PathBuf {
    let dir = store.join("hits/_leases");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{id}.json"));
    let lease = serde_json::json!({
        "format": 1, "id": id, "host": host, "pid": pid, "started_ms": 0, "heartbeat_ms": 0,
    });
    std::fs::write(&path, lease.to_string()).unwrap();
    path
}

#[test]
fn gc_deletes_nothing_while_a_load_holds_its_lease_and_collects_after_its_process_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let store = hits_store(dir.path());
    let orphan = store.join("hits/data/left-by-a-load.parquet");
    std::fs::create_dir_all(orphan.parent().unwrap()).unwrap();
    std::fs::write(&orphan, b"PAR1").unwrap();

    // A load running on another machine: its objects are unreferenced until it commits. The
    // blocked gc exits 3, so that a scheduled one notices.
    let running = write_lease(&store, "running", "another-host", 1);
    let gc = format!("gc --store {} --table hits --older-than 0s", p(&store));
    let blocked = run(&gc);
    let out = String::from_utf8_lossy(&blocked.stdout).into_owned();
    let err = String::from_utf8_lossy(&blocked.stderr).into_owned();
    assert_eq!(blocked.status.code(), Some(3), "{out}{err}");
    assert!(err.contains("a load is running"), "{err}");
    assert!(
        orphan.exists(),
        "gc deleted an object of a running load: {out}"
    );
    assert!(out.contains("kept: a load is running"), "{out}");
    assert!(out.contains("lease hits/_leases/running.json"), "{out}");
    assert!(out.contains("0 deleted"), "{out}");

    // The same lease dated a year ahead (a hand, a copy or a wrong clock): no running load
    // wrote it, so it is stale and blocks nothing.
    let year = std::time::Duration::from_secs(365 * 86_400);
    std::fs::File::options()
        .write(true)
        .open(&running)
        .unwrap()
        .set_modified(std::time::SystemTime::now() + year)
        .unwrap();
    let out = gc_now(&store);
    assert!(!orphan.exists(), "{out}");
    assert!(out.contains("ahead of the store's clock: deleted"), "{out}");
    assert!(!running.exists(), "{out}");
    std::fs::create_dir_all(orphan.parent().unwrap()).unwrap();
    std::fs::write(&orphan, b"PAR1").unwrap();

    // The same load killed on this machine: its process is gone, its lease stale at once.
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    let killed = write_lease(&store, "killed", host.trim(), pid);
    let out = gc_now(&store);
    assert!(!orphan.exists(), "{out}");
    assert!(!killed.exists(), "the stale lease is deleted: {out}");
}

#[test]
fn verify_fails_a_table_whose_log_adds_an_object_twice() {
    let dir = tempfile::tempdir().unwrap();
    let store = hits_store(dir.path());
    let report = load(&store, &generated(dir.path()));
    ok(&format!("verify --store {} --table hits", p(&store)));
    // A second version that adds the same objects again, as a broken writer would.
    std::fs::copy(
        store.join("hits/_delta_log/00000000000000000000.json"),
        store.join("hits/_delta_log/00000000000000000001.json"),
    )
    .unwrap();
    let out = run(&format!("verify --store {} --table hits", p(&store)));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let object = report["objects"][0]["key"].as_str().unwrap();
    let relative = object.strip_prefix("hits/").unwrap();
    assert!(
        stdout.contains(&format!(
            "VIOLATION log entry 1: adds {relative}, which the table holds already: its rows count twice"
        )),
        "{stdout}"
    );
}

#[test]
fn a_rerun_after_gc_deleted_published_objects_publishes_no_second_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let store = hits_store(dir.path());
    let input = generated(dir.path());
    let first = load(&store, &input);
    let objects = first["objects"].as_array().unwrap();
    assert!(objects.len() >= 2, "{first}");
    // What gc of a build without leases left: a manifest naming objects that are gone.
    for o in &objects[..2] {
        std::fs::remove_file(store.join(o["key"].as_str().unwrap())).unwrap();
    }
    fails(1, &format!("verify --store {} --table hits", p(&store)));

    // The version that consumed the input is found in the log: nothing is read or published
    // again (the missing objects stay missing, and verify keeps saying so).
    let again = load(&store, &input);
    assert_eq!(again["already_published"], true, "{again}");
    assert_eq!(again["load_id"], first["load_id"]);
    assert_eq!(again["version"], 0);
    assert_eq!(versions(&store.join("hits/_delta_log")), 1);
    let err = fails(1, &format!("verify --store {} --table hits", p(&store)));
    assert!(err.contains("violation"), "{err}");
}

#[test]
fn gc_and_verify_agree_on_what_a_table_is() {
    let dir = tempfile::tempdir().unwrap();
    let store = hits_store(dir.path());
    // Layout and schema, no loads: a table, empty.
    ok(&format!("verify --store {} --table hits", p(&store)));
    let out = gc_now(&store);
    assert!(out.contains("0 manifest(s), 0 object(s)"), "{out}");
    // Only a recorded schema: a table too.
    ok(&format!(
        "layout --store {} --table flat schema set --hits",
        p(&store)
    ));
    ok(&format!("verify --store {} --table flat", p(&store)));
    ok(&format!("gc --store {} --table flat", p(&store)));
    // Nothing under its prefix: no such table, for both.
    for command in ["verify", "gc"] {
        let err = fails(2, &format!("{command} --store {} --table nope", p(&store)));
        assert!(
            err.contains("nothing stored under its prefix"),
            "{command}: {err}"
        );
    }
}

#[test]
fn gc_collects_the_staging_files_and_scratch_objects_that_killed_writers_left() {
    let dir = tempfile::tempdir().unwrap();
    let store = hits_store(dir.path());
    load(&store, &generated(dir.path()));
    // A local write killed before its rename; a merge killed before it cleared its scratch.
    let staging = store.join("hits/data/0123abcd.parquet#1");
    std::fs::write(&staging, vec![7u8; 4096]).unwrap();
    let scratch = store.join("hits/_ravel/tmp/0000000000001-1-0-00000000/4567.parquet");
    std::fs::create_dir_all(scratch.parent().unwrap()).unwrap();
    std::fs::write(&scratch, b"PAR1").unwrap();
    let kept = ok(&format!(
        "gc --store {} --table hits --older-than 1h",
        p(&store)
    ));
    assert!(
        kept.contains("hits/data/0123abcd.parquet#1 (staging file) 4096 bytes"),
        "{kept}"
    );
    assert!(kept.contains("_ravel/tmp/0000000000001-1-0-00000000/4567.parquet"));
    assert!(
        staging.exists() && scratch.exists(),
        "younger than the retention"
    );
    let out = gc_now(&store);
    assert!(out.contains("2 deleted (4100 bytes)"), "{out}");
    assert!(!staging.exists() && !scratch.exists());
    ok(&format!("verify --store {} --table hits --deep", p(&store)));
}
