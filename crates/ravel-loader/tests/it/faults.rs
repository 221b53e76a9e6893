//! Loads against a real S3 server (s3s-fs, in-process) through a fault-injecting store:
//! transient faults (failed requests, lost responses, bodies cut short, latency) are retried
//! and every row lands once; a permanent fault fails the load, names the key and publishes no
//! manifest.
//!
//! A load and `gc` side by side: `gc` deletes nothing while a load holds its lease; an object
//! deleted behind a load's back fails its commit; a rerun recognizes its earlier publication even
//! when objects of it were deleted and stored again, and refuses to list an object that a
//! manifest of other objects lists.

use std::sync::Arc;
use std::time::Duration;

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use futures::TryStreamExt;
use object_store::ObjectStoreExt;
use object_store::path::Path;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use ravel_gc::GcOptions;
use ravel_hits::{GenOptions, generate};
use ravel_layout::LayoutStore;
use ravel_loader::{LoadError, LoadOptions, Loader, Manifest};
use ravel_store::Store;
use ravel_testkit::{FaultStore, S3Server};

use crate::common::{by_watch_id, stored};

fn options() -> LoadOptions {
    LoadOptions {
        object_bytes: 600_000,
        target_bytes: Some(6_000_000),
        pipeline_depth: 4,
        load_budget: 200_000_000,
        max_flush_delay: Duration::from_secs(3600),
        zstd_level: 1,
    }
}

async fn set_hits_layout(store: &Store) {
    ravel_testkit::set_layout(store, "hits", &ravel_hits::layout()).await;
}

async fn load(
    store: &Store,
    batches: &[RecordBatch],
) -> Result<ravel_loader::LoadReport, LoadError> {
    let mut loader = Loader::new(store, "hits", options()).await?;
    for b in batches {
        if let Err(e) = loader.push(b.clone()).await {
            return Err(loader.abandon(e).await);
        }
    }
    loader.finish().await
}

async fn manifests(store: &Store) -> Vec<Manifest> {
    ravel_testkit::published(store, "hits").await
}

/// Every row of every manifest's objects, read through `store`.
async fn table_rows(store: &Store, manifest: &Manifest) -> RecordBatch {
    let mut all = Vec::new();
    for o in &manifest.objects {
        let bytes = stored(store, &Path::from(o.key.as_str())).await;
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes).unwrap();
        for b in reader.build().unwrap() {
            all.push(b.unwrap());
        }
    }
    concat_batches(&Arc::new(manifest.schema.clone()), &all).unwrap()
}

fn error_chain(err: &dyn std::error::Error) -> String {
    let mut s = err.to_string();
    let mut src = err.source();
    while let Some(e) = src {
        s.push_str(&format!(": {e}"));
        src = e.source();
    }
    s
}

#[tokio::test(flavor = "multi_thread")]
async fn transient_faults_are_retried_and_every_row_lands_once() {
    let server = S3Server::start();
    let mut injected = None;
    // A fifth of all requests under the table fail (half before reaching the server, half
    // after it carried them out), a fifth of get bodies end halfway, each request waits 2 ms.
    // A get then fails an attempt with p = 0.36; twelve attempts all fail with p < 1e-5.
    let store = server.store_with("w", |s3| {
        let f = FaultStore::new(s3)
            .on_prefix("w/hits/")
            .transient(0.2)
            .truncate_gets(0.2)
            .latency(Duration::from_millis(2))
            .seed(8);
        injected = Some(f.injected());
        Arc::new(f)
    });
    let injected = injected.unwrap();
    let clean = server.store("w");

    set_hits_layout(&store).await;
    let (schema, batches) = generate(GenOptions {
        rows: 60_000,
        seed: 5,
        batch_rows: 5_000,
        ..GenOptions::default()
    });
    let report = load(&store, &batches).await.unwrap();
    assert_eq!(report.rows, 60_000);
    assert!(
        report.objects.len() >= 4,
        "{} objects",
        report.objects.len()
    );

    // One manifest, listing the report's objects; read back through the faults too.
    let published = manifests(&clean).await;
    assert_eq!(published.len(), 1);
    assert_eq!(published[0].objects, report.objects);
    let through_faults = table_rows(&store, &published[0]).await;
    let input = concat_batches(&schema, &batches).unwrap();
    assert_eq!(by_watch_id(&through_faults), by_watch_id(&input));
    assert_eq!(
        by_watch_id(&table_rows(&clean, &published[0]).await),
        by_watch_id(&input)
    );

    // The faults happened: each kind at least once.
    let n = injected.get();
    assert!(n.transient_before > 0, "{n:?}");
    assert!(n.transient_after > 0, "{n:?}");
    assert!(n.truncated > 0, "{n:?}");
    assert_eq!(n.permanent, 0);
    // No stray objects: a retried create of an object found its own bytes. Under data/ are
    // exactly the objects, under _ravel/blooms/ the load's Bloom sidecar.
    let mut data: Vec<object_store::ObjectMeta> = Vec::new();
    for dir in ["hits/data", "hits/_ravel/blooms"] {
        let listed: Vec<object_store::ObjectMeta> = clean
            .object_store()
            .list(Some(&Path::from(dir)))
            .try_collect()
            .await
            .unwrap();
        data.extend(listed);
    }
    let mut stored: Vec<String> = data.iter().map(|m| m.location.to_string()).collect();
    stored.sort();
    let sidecar = published[0].blooms.as_ref().expect("a Bloom sidecar");
    let mut expected: Vec<String> = report
        .objects
        .iter()
        .map(|o| o.key.clone())
        .chain([sidecar.key.clone()])
        .collect();
    expected.sort();
    assert_eq!(stored, expected);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_permanent_fault_fails_the_load_names_the_key_and_publishes_nothing() {
    let server = S3Server::start();
    let clean = server.store("w");
    set_hits_layout(&clean).await;
    let store = server.store_with("w", |s3| {
        Arc::new(
            FaultStore::new(s3)
                .on_prefix("w/hits/data/")
                .permanent(0.5)
                .transient(0.2)
                .seed(3),
        )
    });
    let (_, batches) = generate(GenOptions {
        rows: 60_000,
        seed: 6,
        batch_rows: 5_000,
        ..GenOptions::default()
    });
    let err = load(&store, &batches).await.unwrap_err();
    let chain = error_chain(&err);
    assert!(chain.contains("storing hits/data/"), "{chain}");
    assert!(chain.contains("access denied"), "{chain}");
    assert!(!err.is_invalid_input());
    assert!(manifests(&clean).await.is_empty(), "nothing published");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_without_conditional_create_is_detected_once_and_creates_stay_exclusive() {
    let server = S3Server::start();
    let clean = server.store("w");
    set_hits_layout(&clean).await;
    assert!(clean.capabilities().await.unwrap().atomic_create());
    // The record of the probe is what later commands read: remove it so that the next handle
    // probes the server without conditions.
    let record = Path::from("_ravel/capabilities.json");
    clean.object_store().delete(&record).await.unwrap();
    let store = server.store_with("w", |s3| {
        Arc::new(FaultStore::new(s3).ignore_put_conditions())
    });
    let caps = store.capabilities().await.unwrap();
    assert!(
        !caps.conditional_create && !caps.atomic_create(),
        "{caps:?}"
    );
    let recorded: ravel_store::Capabilities =
        serde_json::from_slice(&stored(&clean, &record).await).unwrap();
    assert_eq!(recorded, caps);

    // Creates of one key at once, each with its own bytes: exactly one wins, and the key
    // holds its bytes.
    let key = Path::from("w-race/doc.json");
    let creates = (0..8).map(|i| {
        let store = store.clone();
        let key = key.clone();
        tokio::spawn(async move {
            let bytes = bytes::Bytes::from(format!("writer {i}"));
            ravel_store::create_or_confirm(store.object_store().as_ref(), &key, bytes.clone())
                .await
                .ok()
                .map(|()| bytes)
        })
    });
    let won: Vec<bytes::Bytes> = futures::future::join_all(creates)
        .await
        .into_iter()
        .filter_map(|r| r.unwrap())
        .collect();
    assert_eq!(won.len(), 1, "exactly one create wins");
    assert_eq!(stored(&store, &key).await, won[0]);

    // Loads and layout changes work, through claims.
    let (_, batches) = generate(GenOptions {
        rows: 20_000,
        seed: 8,
        batch_rows: 5_000,
        ..GenOptions::default()
    });
    load(&store, &batches).await.unwrap();
    assert_eq!(manifests(&clean).await.len(), 1);
    LayoutStore::new(&store, "hits")
        .unwrap()
        .update(|l| {
            l.bloom.fpp = 0.05;
            Ok(())
        })
        .await
        .unwrap();
    let claims: Vec<_> = clean
        .object_store()
        .list(Some(&Path::from("_ravel/claims")))
        .try_collect()
        .await
        .unwrap();
    assert!(claims.is_empty(), "every claim taken back: {claims:?}");
}

/// A loader that has pushed `batches` until its first objects are stored (at least one run
/// flushed); returns it with the batches not yet pushed.
async fn loader_with_objects_stored<'a>(
    store: &Store,
    batches: &'a [RecordBatch],
) -> (Loader, &'a [RecordBatch]) {
    let mut loader = Loader::new(store, "hits", options()).await.unwrap();
    for (i, b) in batches.iter().enumerate() {
        loader.push(b.clone()).await.unwrap();
        if loader.objects_stored() > 0 {
            return (loader, &batches[i + 1..]);
        }
    }
    panic!("no run was flushed before the end of the input");
}

async fn data_keys(store: &Store) -> Vec<String> {
    let listed: Vec<object_store::ObjectMeta> = store
        .object_store()
        .list(Some(&Path::from("hits/data")))
        .try_collect()
        .await
        .unwrap();
    let mut keys: Vec<String> = listed.iter().map(|m| m.location.to_string()).collect();
    keys.sort();
    keys
}

async fn exists(store: &Store, key: &str) -> bool {
    store.object_store().head(&Path::from(key)).await.is_ok()
}

fn hits_batches(rows: u64, seed: u64) -> (arrow::datatypes::SchemaRef, Vec<RecordBatch>) {
    generate(GenOptions {
        rows,
        seed,
        batch_rows: 5_000,
        ..GenOptions::default()
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn gc_during_a_load_deletes_none_of_its_objects() {
    let server = S3Server::start();
    let store = server.store("w");
    set_hits_layout(&store).await;
    let (schema, batches) = hits_batches(60_000, 11);
    let (mut loader, rest) = loader_with_objects_stored(&store, &batches).await;
    let uploaded = data_keys(&store).await;
    assert!(!uploaded.is_empty());

    // gc with no retention at all while the load runs.
    let gc = GcOptions::new(Duration::ZERO, false);
    let report = ravel_gc::gc(&store, "hits", &gc).await.unwrap();
    assert_eq!(report.deleted, 0, "{report:?}");
    assert_eq!(report.blocked_by.len(), 1, "the load's lease blocks gc");
    assert_eq!(
        data_keys(&store).await,
        uploaded,
        "nothing of the load deleted"
    );

    for b in rest {
        loader.push(b.clone()).await.unwrap();
    }
    let loaded = loader.finish().await.unwrap();
    let published = manifests(&store).await;
    assert_eq!(published.len(), 1);
    for o in &published[0].objects {
        assert!(
            exists(&store, &o.key).await,
            "{} is listed and stored",
            o.key
        );
    }
    let input = concat_batches(&schema, &batches).unwrap();
    assert_eq!(
        by_watch_id(&table_rows(&store, &published[0]).await),
        by_watch_id(&input)
    );
    // The commit released the lease: gc runs again, and keeps every referenced object.
    let after = ravel_gc::gc(&store, "hits", &gc).await.unwrap();
    assert!(after.blocked_by.is_empty() && after.leases.is_empty());
    assert_eq!(
        after.referenced,
        loaded.objects.len() + 2,
        "objects, sidecar and manifest"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_object_deleted_behind_the_loads_back_fails_its_commit_naming_it() {
    let server = S3Server::start();
    let store = server.store("w");
    set_hits_layout(&store).await;
    let (_, batches) = hits_batches(60_000, 12);
    let (mut loader, rest) = loader_with_objects_stored(&store, &batches).await;
    let victim = data_keys(&store).await.remove(0);
    store
        .object_store()
        .delete(&Path::from(victim.as_str()))
        .await
        .unwrap();
    for b in rest {
        loader.push(b.clone()).await.unwrap();
    }
    let err = loader.finish().await.unwrap_err();
    let chain = error_chain(&err);
    assert!(chain.contains(&format!("object {victim}")), "{chain}");
    assert!(chain.contains("is missing"), "{chain}");
    assert!(chain.contains("nothing was published"), "{chain}");
    assert!(!err.is_invalid_input(), "a failure, not bad input");
    assert!(manifests(&store).await.is_empty(), "nothing published");
    let leases: Vec<_> = store
        .object_store()
        .list(Some(&Path::from("hits/_leases")))
        .try_collect()
        .await
        .unwrap();
    assert!(leases.is_empty(), "the failed load released its lease");

    // Its rerun stores the object again and publishes every row.
    let report = load(&store, &batches).await.unwrap();
    assert!(!report.already_published);
    assert!(exists(&store, &victim).await);
    assert_eq!(manifests(&store).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rerun_after_objects_of_its_publication_were_deleted_publishes_nothing_new() {
    let server = S3Server::start();
    let store = server.store("w");
    set_hits_layout(&store).await;
    let (schema, batches) = hits_batches(60_000, 13);
    let first = load(&store, &batches).await.unwrap();
    assert!(first.objects.len() >= 3, "{} objects", first.objects.len());
    // As gc of a build without leases did: two of the published objects are gone.
    let gone: Vec<String> = first.objects[..2].iter().map(|o| o.key.clone()).collect();
    for key in &gone {
        store
            .object_store()
            .delete(&Path::from(key.as_str()))
            .await
            .unwrap();
    }

    let again = load(&store, &batches).await.unwrap();
    assert!(
        again.already_published,
        "the rerun recognizes the publication"
    );
    assert_eq!(again.load_id, first.load_id);
    let published = manifests(&store).await;
    assert_eq!(published.len(), 1, "no second manifest");
    for key in &gone {
        assert!(exists(&store, key).await, "{key} stored again");
    }
    let rows = table_rows(&store, &published[0]).await;
    assert_eq!(rows.num_rows(), 60_000, "every row once");
    let input = concat_batches(&schema, &batches).unwrap();
    assert_eq!(by_watch_id(&rows), by_watch_id(&input));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_load_sharing_objects_with_a_manifest_of_other_objects_is_refused() {
    let server = S3Server::start();
    let store = server.store("w");
    set_hits_layout(&store).await;
    let (_, batches) = hits_batches(60_000, 14);
    let first = load(&store, &batches).await.unwrap();
    // The table is now one written before the log, whose one manifest lists all but the
    // last object of the same load.
    let mut m = manifests(&store).await.remove(0);
    m.objects.pop();
    m.load_id = "0000000000001-partial".into();
    for dir in ["hits/_delta_log", "hits/_ravel"] {
        let listed: Vec<_> = store
            .object_store()
            .list(Some(&Path::from(dir)))
            .try_collect()
            .await
            .unwrap();
        for o in listed {
            store.object_store().delete(&o.location).await.unwrap();
        }
    }
    let partial = "hits/manifests/0000000000001-partial.json";
    store
        .object_store()
        .put(&Path::from(partial), serde_json::to_vec(&m).unwrap().into())
        .await
        .unwrap();

    let err = load(&store, &batches).await.unwrap_err();
    let chain = error_chain(&err);
    assert!(chain.contains(&format!("manifest {partial}")), "{chain}");
    assert!(
        chain.contains(&format!("object {}", first.objects[0].key)),
        "{chain}"
    );
    assert!(!err.is_invalid_input());
    assert_eq!(manifests(&store).await.len(), 1, "no object listed twice");
}
