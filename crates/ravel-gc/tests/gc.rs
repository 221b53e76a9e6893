//! `gc` deletes unreferenced objects older than the retention, reports the younger ones and
//! never deletes a referenced object: on a local store (whose file times a test can set) and on
//! a real S3 server (s3s-fs, in-process).

use std::time::{Duration, SystemTime};

use object_store::ObjectStoreExt;
use object_store::path::Path;
use ravel_gc::{GcOptions, gc};
use ravel_manifest::{MANIFEST_FORMAT, Manifest, ObjectEntry};
use ravel_store::Store;

fn entry(key: &str) -> ObjectEntry {
    ObjectEntry {
        key: key.into(),
        rows: 1,
        bytes: 3,
        run: 0,
        first_key: None,
        last_key: None,
        ranges: Default::default(),
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
    GcOptions {
        older_than: Duration::from_secs(older_than_s),
        dry_run,
    }
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
