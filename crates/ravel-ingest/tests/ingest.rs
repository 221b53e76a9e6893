//! The ingestion call: a load followed by the table's maintenance policy, one report; a rerun
//! names the load that published the rows; a table without a clustering key is loaded and
//! has nothing to maintain.

use std::path::{Path, PathBuf};

use ravel_hits::{GenOptions, write_generated};
use ravel_ingest::{IngestOptions, Loaded, Maintained, ingest};
use ravel_layout::{Maintenance, MaintenanceMode};
use ravel_loader::{Files, InputFormat, LoadOptions};
use ravel_store::Store;

fn hits(dir: &Path, name: &str, rows: u64, seed: u64) -> PathBuf {
    let path = dir.join(name);
    let opts = GenOptions {
        rows,
        seed,
        batch_rows: 4096,
        ..GenOptions::default()
    };
    write_generated(opts, &path, |_| {}).unwrap();
    path
}

fn options() -> IngestOptions {
    let mut load = LoadOptions::from_tier(&ravel_tier::Tier::detect().unwrap());
    load.object_bytes = 100_000;
    load.load_budget = 200_000_000;
    IngestOptions::new(load)
}

async fn store_with(dir: &Path, policy: Option<MaintenanceMode>) -> Store {
    let store = Store::create(dir.join("store").to_str().unwrap()).unwrap();
    let mut layout = ravel_hits::layout();
    if let Some(policy) = policy {
        layout.maintenance = Maintenance {
            policy,
            ..layout.maintenance
        };
    } else {
        layout.clustering_key = None;
    }
    ravel_testkit::set_layout(&store, "hits", &layout).await;
    store
}

#[tokio::test(flavor = "multi_thread")]
async fn a_load_is_maintained_and_its_rerun_names_the_load_that_published_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), Some(MaintenanceMode::Full)).await;
    let first = [hits(dir.path(), "a.parquet", 6_000, 1)];
    let second = [hits(dir.path(), "b.parquet", 6_000, 2)];
    let opts = options();
    let a = ingest(
        &store,
        "hits",
        &Files::new(&first, InputFormat::Parquet),
        &opts,
        |_, _| {},
    )
    .await
    .unwrap();
    let b = ingest(
        &store,
        "hits",
        &Files::new(&second, InputFormat::Parquet),
        &opts,
        |_, _| {},
    )
    .await
    .unwrap();
    assert_eq!((a.rows, b.rows), (6_000, 6_000));
    assert!(matches!(b.loaded, Loaded::Runs(_)));
    // The full policy merged the two loads into one sequence.
    let merged = b.maintenance.report().expect("the policy ran");
    assert_eq!(merged.depth_after, 1, "{merged:?}");
    assert!(merged.steps > 0);
    // Run again, sorted this time: nothing published, and the published load is named.
    let again = ingest(
        &store,
        "hits",
        &Files::new(&second, InputFormat::Parquet),
        &opts.clone().sorted(true),
        |_, _| {},
    )
    .await
    .unwrap();
    assert!(again.already_published);
    assert_eq!((again.rows, again.objects), (0, 0));
    assert_eq!(again.load_id, b.load_id);
    assert_eq!(again.version, b.version);
    assert!(matches!(again.loaded, Loaded::Sorted(_)));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_table_without_a_clustering_key_is_loaded_and_has_nothing_to_maintain() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), None).await;
    let input = [hits(dir.path(), "a.parquet", 3_000, 3)];
    let files = Files::new(&input, InputFormat::Parquet);
    let report = ingest(&store, "hits", &files, &options(), |_, _| {})
        .await
        .unwrap();
    assert_eq!(report.rows, 3_000);
    assert!(matches!(report.maintenance, Maintained::NotClustered));
    // Sorted needs a clustering key: refused as bad input, nothing published.
    let input = [hits(dir.path(), "b.parquet", 3_000, 4)];
    let files = Files::new(&input, InputFormat::Parquet);
    let err = ingest(&store, "hits", &files, &options().sorted(true), |_, _| {})
        .await
        .unwrap_err();
    assert!(err.is_invalid_input(), "{err}");
    assert!(err.to_string().contains("clustering key"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_that_fails_is_named_by_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), Some(MaintenanceMode::Tiered)).await;
    let bad = dir.path().join("bad.parquet");
    std::fs::write(&bad, b"not parquet").unwrap();
    let inputs = [hits(dir.path(), "a.parquet", 2_000, 5), bad.clone()];
    let files = Files::new(&inputs, InputFormat::Parquet);
    let err = ingest(&store, "hits", &files, &options(), |_, _| {})
        .await
        .unwrap_err();
    assert_eq!(err.failed_input(), Some(bad.to_str().unwrap()), "{err}");
    assert!(!err.is_conflict());
}
