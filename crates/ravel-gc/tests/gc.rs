//! `gc` deletes unreferenced objects older than the retention, reports the younger ones and
//! never deletes a referenced object: on a local store (whose file times a test can set) and on
//! a real S3 server (s3s-fs, in-process). A live lease (a load running) keeps `gc` from
//! deleting anything; a stale one does not, and `gc` deletes it. A table is whatever is stored
//! under its prefix.

use std::time::{Duration, SystemTime};

use object_store::ObjectStoreExt;
use object_store::path::Path;
use ravel_gc::lease::{LEASE_FORMAT, Lease, this_host};
use ravel_gc::{GcError, GcOptions, HeldLease, gc};
use ravel_manifest::{MANIFEST_FORMAT, Manifest, ObjectEntry};
use ravel_store::{Store, TablePaths};

fn entry(key: &str) -> ObjectEntry {
    ObjectEntry {
        key: key.into(),
        rows: 1,
        bytes: 3,
        run: 0,
        first_key: None,
        last_key: None,
        ranges: Default::default(),
        delta_stats: None,
    }
}

async fn put(store: &Store, key: &str, bytes: &[u8]) {
    store
        .object_store()
        .put(&Path::from(key), bytes.to_vec().into())
        .await
        .unwrap();
}

async fn publish(store: &Store, load_id: &str, keys: &[&str], blooms: Option<&str>) {
    let m = Manifest {
        format: MANIFEST_FORMAT,
        load_id: load_id.into(),
        committed_at_ms: 0,
        layout_generation: 1,
        sort_key: vec![],
        schema: arrow::datatypes::Schema::empty(),
        objects: keys.iter().map(|k| entry(k)).collect(),
        blooms: blooms.map(|key| ravel_manifest::BloomIndex {
            key: key.into(),
            bytes: 3,
            format: 2,
            fpp: 0.01,
            columns: Default::default(),
        }),
    };
    put(
        store,
        &format!("t/manifests/{load_id}.json"),
        &serde_json::to_vec(&m).unwrap(),
    )
    .await;
}

async fn exists(store: &Store, key: &str) -> bool {
    store.object_store().head(&Path::from(key)).await.is_ok()
}

const DAY: u64 = 86_400;

fn opts(older_than_s: u64, dry_run: bool) -> GcOptions {
    GcOptions::new(Duration::from_secs(older_than_s), dry_run)
}

fn set_age(dir: &std::path::Path, key: &str, age: Duration) {
    std::fs::File::options()
        .write(true)
        .open(dir.join(key))
        .unwrap()
        .set_modified(SystemTime::now() - age)
        .unwrap();
}

/// A lease as a load of `host` and process `pid` writes it.
async fn put_lease(store: &Store, id: &str, host: &str, pid: u32) -> String {
    let lease = Lease {
        format: LEASE_FORMAT,
        id: id.into(),
        host: host.into(),
        pid,
        started_ms: 0,
        heartbeat_ms: 0,
    };
    let key = format!("t/_leases/{id}.json");
    put(store, &key, &serde_json::to_vec(&lease).unwrap()).await;
    key
}

/// The process id of a process that ran and was reaped: no process of this host has it now
/// (unless the system reused it meanwhile, which would only make the lease look live).
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

#[tokio::test]
async fn deletes_old_unreferenced_objects_and_never_a_referenced_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().to_str().unwrap()).unwrap();
    for k in ["a", "b", "c", "d"] {
        put(&store, &format!("t/data/{k}.parquet"), b"abc").await;
    }
    // A load's Bloom sidecar is referenced by its manifest like the load's objects.
    put(&store, "t/data/s.blooms", b"abc").await;
    publish(&store, "0001-x", &["t/data/a.parquet"], None).await;
    publish(
        &store,
        "0002-y",
        &["t/data/d.parquet"],
        Some("t/data/s.blooms"),
    )
    .await;
    // a (referenced), b (unreferenced), d and s (referenced) were written two days ago.
    let two_days_ago = SystemTime::now() - Duration::from_secs(2 * 86_400);
    for k in ["a.parquet", "b.parquet", "d.parquet", "s.blooms"] {
        std::fs::File::options()
            .write(true)
            .open(dir.path().join(format!("t/data/{k}")))
            .unwrap()
            .set_modified(two_days_ago)
            .unwrap();
    }

    let dry = gc(&store, "t", &opts(DAY, true)).await.unwrap();
    assert_eq!((dry.manifests, dry.objects, dry.referenced), (2, 5, 3));
    let keys: Vec<_> = dry.unreferenced.iter().map(|u| u.key.as_str()).collect();
    assert_eq!(keys, ["t/data/b.parquet", "t/data/c.parquet"]);
    assert!(dry.unreferenced[0].age_s >= 2 * 86_400 - 60);
    assert!(dry.unreferenced[1].age_s < 60);
    assert_eq!(dry.deleted, 0);
    assert!(exists(&store, "t/data/b.parquet").await);

    let r = gc(&store, "t", &opts(DAY, false)).await.unwrap();
    assert_eq!(r.deleted, 1);
    assert_eq!(r.deleted_bytes, 3);
    assert!(r.unreferenced[0].deleted && !r.unreferenced[1].deleted);
    assert!(!exists(&store, "t/data/b.parquet").await);
    assert!(exists(&store, "t/data/c.parquet").await, "younger than 24h");

    let r = gc(&store, "t", &opts(0, false)).await.unwrap();
    assert_eq!(r.deleted, 1);
    for k in ["a", "d"] {
        assert!(
            exists(&store, &format!("t/data/{k}.parquet")).await,
            "{k} is referenced"
        );
    }
    assert!(!exists(&store, "t/data/c.parquet").await);
    assert!(
        exists(&store, "t/data/s.blooms").await,
        "the sidecar is referenced"
    );

    let none = gc(&store, "t", &opts(0, false)).await.unwrap();
    assert!(none.unreferenced.is_empty());
    let err = gc(&store, "nope", &opts(0, false)).await.unwrap_err();
    assert!(err.is_invalid_input(), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn on_s3() {
    let server = ravel_testkit::S3Server::start();
    let store = server.store("w");
    put(&store, "t/data/kept.parquet", b"abc").await;
    put(&store, "t/data/orphan.parquet", b"abc").await;
    publish(&store, "0001-x", &["t/data/kept.parquet"], None).await;
    let young = gc(&store, "t", &opts(DAY, false)).await.unwrap();
    assert_eq!(young.deleted, 0);
    assert_eq!(young.unreferenced.len(), 1);
    let r = gc(&store, "t", &opts(0, false)).await.unwrap();
    assert_eq!(r.deleted, 1);
    assert!(exists(&store, "t/data/kept.parquet").await);
    assert!(!exists(&store, "t/data/orphan.parquet").await);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_running_loads_lease_keeps_gc_from_deleting_and_its_release_lets_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().to_str().unwrap()).unwrap();
    put(&store, "t/data/o.parquet", b"abc").await;
    set_age(dir.path(), "t/data/o.parquet", Duration::from_secs(2 * DAY));
    let held = HeldLease::acquire(store.object_store().clone(), &TablePaths::new("t").unwrap())
        .await
        .unwrap();
    let key = held.key().to_string();
    assert!(
        key.starts_with("t/_leases/") && key.ends_with(".json"),
        "{key}"
    );
    let stored: Lease = serde_json::from_slice(
        &store
            .object_store()
            .get(held.key())
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(stored.pid, std::process::id());

    for dry_run in [true, false] {
        let r = gc(&store, "t", &opts(0, dry_run)).await.unwrap();
        assert_eq!(r.blocked_by, std::slice::from_ref(&key));
        assert_eq!(r.deleted, 0);
        assert_eq!(r.leases.len(), 1);
        assert!(r.leases[0].live && !r.leases[0].holder_dead && !r.leases[0].deleted);
        assert!(
            exists(&store, "t/data/o.parquet").await,
            "a load is running"
        );
        assert!(exists(&store, &key).await, "a live lease is kept");
    }

    held.release().await;
    assert!(!exists(&store, &key).await, "released");
    let r = gc(&store, "t", &opts(0, false)).await.unwrap();
    assert!(r.blocked_by.is_empty() && r.leases.is_empty());
    assert_eq!(r.deleted, 1);
    assert!(!exists(&store, "t/data/o.parquet").await);
}

#[tokio::test]
async fn stale_leases_and_leases_of_dead_processes_do_not_block_and_are_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().to_str().unwrap()).unwrap();
    put(&store, "t/data/o.parquet", b"abc").await;
    // Not rewritten for an hour: its load is gone, wherever it ran.
    let old = put_lease(&store, "old", "elsewhere", 1).await;
    set_age(dir.path(), &old, Duration::from_secs(3600));
    // Fresh, but its process on this host no longer runs (a load killed here).
    let dead = put_lease(&store, "dead", &this_host(), dead_pid()).await;
    let r = gc(&store, "t", &opts(DAY, true)).await.unwrap();
    assert!(r.blocked_by.is_empty(), "{:?}", r.leases);
    let states: Vec<(bool, bool)> = r.leases.iter().map(|l| (l.live, l.holder_dead)).collect();
    assert_eq!(states, [(false, true), (false, false)], "dead, then old");

    // Kept while younger than the retention, like orphans; deleted past it.
    let r = gc(&store, "t", &opts(DAY, false)).await.unwrap();
    assert!(r.leases.iter().all(|l| !l.deleted));
    let r = gc(&store, "t", &opts(0, false)).await.unwrap();
    assert!(r.leases.iter().all(|l| l.deleted));
    assert_eq!(r.deleted, 1);
    assert!(!exists(&store, &old).await && !exists(&store, &dead).await);

    // A fresh lease of another host, or one this build cannot read, blocks until stale.
    put(&store, "t/data/p.parquet", b"abc").await;
    let other = put_lease(&store, "other", "elsewhere", 1).await;
    put(
        &store,
        "t/_leases/newer.json",
        b"{not a lease of this build",
    )
    .await;
    let r = gc(&store, "t", &opts(0, false)).await.unwrap();
    assert_eq!(r.blocked_by, ["t/_leases/newer.json".to_string(), other]);
    assert!(exists(&store, "t/data/p.parquet").await);
    let quick = GcOptions {
        stale_lease_after: Duration::ZERO,
        ..opts(0, false)
    };
    let r = gc(&store, "t", &quick).await.unwrap();
    assert!(r.blocked_by.is_empty());
    assert!(!exists(&store, "t/data/p.parquet").await);
}

#[tokio::test]
async fn a_table_with_a_layout_or_objects_but_no_manifests_is_a_table() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().to_str().unwrap()).unwrap();
    put(&store, "t/_layout/00000000000000000001.json", b"{}").await;
    put(&store, "s/_schema.json", b"{}").await;
    for table in ["t", "s"] {
        let r = gc(&store, table, &opts(0, false)).await.unwrap();
        assert_eq!((r.manifests, r.objects, r.deleted), (0, 0, 0), "{table}");
    }
    // Orphans of a table without manifests are collected.
    put(&store, "o/data/x.parquet", b"abc").await;
    let r = gc(&store, "o", &opts(0, false)).await.unwrap();
    assert_eq!((r.manifests, r.deleted), (0, 1));
    // Nothing under its prefix, not even a similar name's: no such table (bad input).
    put(&store, "tt/data/x.parquet", b"abc").await;
    for table in ["nope", "o"] {
        let err = gc(&store, table, &opts(0, false)).await.unwrap_err();
        assert!(matches!(err, GcError::NoSuchTable(_)), "{table}: {err}");
        assert!(err.is_invalid_input());
    }
}
