//! Loads against a real S3 server (s3s-fs, in-process) through a fault-injecting store:
//! transient faults (failed requests, lost responses, bodies cut short, latency) are retried
//! and every row lands once; a permanent fault fails the load, names the key and publishes no
//! manifest.

use std::sync::Arc;
use std::time::Duration;

use arrow::array::RecordBatch;
use arrow::compute::{concat_batches, sort_to_indices, take_record_batch};
use futures::TryStreamExt;
use object_store::ObjectStoreExt;
use object_store::path::Path;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use ravel_hits::{GenOptions, generate};
use ravel_layout::{Layout, LayoutStore};
use ravel_loader::{LoadError, LoadOptions, Loader, Manifest};
use ravel_store::Store;
use ravel_testkit::{FaultStore, S3Server};

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

fn by_watch_id(b: &RecordBatch) -> RecordBatch {
    let idx = sort_to_indices(b.column_by_name("WatchID").unwrap(), None, None).unwrap();
    take_record_batch(b, &idx).unwrap()
}

async fn set_hits_layout(store: &Store) {
    ravel_testkit::set_layout(store, "hits", &Layout::hits()).await;
}

async fn load(
    store: &Store,
    batches: &[RecordBatch],
) -> Result<ravel_loader::LoadReport, LoadError> {
    let mut loader = Loader::new(store, "hits", options()).await?;
    for b in batches {
        if let Err(e) = loader.push(b.clone()).await {
            return Err(loader.abandon(e));
        }
    }
    loader.finish().await
}

async fn manifests(store: &Store) -> Vec<Manifest> {
    let listed: Vec<_> = store
        .object_store()
        .list(Some(&Path::from("hits/manifests")))
        .try_collect()
        .await
        .unwrap();
    let mut out = Vec::new();
    for m in listed {
        let bytes = store
            .object_store()
            .get(&m.location)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        out.push(serde_json::from_slice(&bytes).unwrap());
    }
    out
}

/// Every row of every manifest's objects, read through `store`.
async fn table_rows(store: &Store, manifest: &Manifest) -> RecordBatch {
    let mut all = Vec::new();
    for o in &manifest.objects {
        let bytes = store
            .object_store()
            .get(&Path::from(o.key.as_str()))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
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
            .seed(7);
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
    // exactly the objects and the load's Bloom sidecar.
    let data: Vec<object_store::ObjectMeta> = clean
        .object_store()
        .list(Some(&Path::from("hits/data")))
        .try_collect()
        .await
        .unwrap();
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
async fn a_server_without_conditional_create_is_detected_once_loads_proceed_layout_changes_are_refused()
 {
    let server = S3Server::start();
    let clean = server.store("w");
    set_hits_layout(&clean).await;
    assert!(clean.capabilities().await.unwrap().conditional_create);
    // The record of the probe is what later commands read: remove it so that the next handle
    // probes the server without conditions.
    let record = Path::from("_ravel/capabilities.json");
    clean.object_store().delete(&record).await.unwrap();
    let store = server.store_with("w", |s3| {
        Arc::new(FaultStore::new(s3).ignore_put_conditions())
    });

    let (schema, batches) = generate(GenOptions {
        rows: 20_000,
        seed: 8,
        batch_rows: 5_000,
        ..GenOptions::default()
    });
    let report = load(&store, &batches).await.unwrap();
    assert_eq!(report.rows, 20_000);
    let recorded: ravel_store::Capabilities = serde_json::from_slice(
        &clean
            .object_store()
            .get(&record)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap(),
    )
    .unwrap();
    assert!(!recorded.conditional_create);
    let published = manifests(&clean).await;
    assert_eq!(published.len(), 1);
    let input = concat_batches(&schema, &batches).unwrap();
    assert_eq!(
        by_watch_id(&table_rows(&clean, &published[0]).await),
        by_watch_id(&input)
    );

    // A layout change is refused, saying why, and writes nothing.
    let err = LayoutStore::new(&store, "hits")
        .unwrap()
        .update(|l| {
            l.bloom.fpp = 0.05;
            Ok(())
        })
        .await
        .unwrap_err();
    let chain = error_chain(&err);
    assert!(
        chain.contains("does not support conditional create"),
        "{chain}"
    );
    assert!(!err.is_invalid_input());
    let layouts: Vec<_> = clean
        .object_store()
        .list(Some(&Path::from("hits/_layout")))
        .try_collect()
        .await
        .unwrap();
    assert_eq!(layouts.len(), 1, "still generation 1 only");
}
