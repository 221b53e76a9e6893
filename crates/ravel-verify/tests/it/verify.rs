//! A table loaded through the library verifies; each kind of damage is found and named.

use std::path::{Path as FsPath, PathBuf};
use std::time::Duration;

use arrow::array::{RecordBatch, UInt32Array};
use arrow::compute::{concat_batches, take_record_batch};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::properties::WriterProperties;
use ravel_hits::{GenOptions, generate};
use ravel_loader::{LoadOptions, Loader};
use ravel_store::Store;
use ravel_verify::{Problem, VerifyOptions, verify};

/// A hits table of 60k rows in several runs and objects in a local store; returns the store
/// and the objects' file paths.
async fn table(dir: &FsPath) -> (Store, Vec<PathBuf>) {
    let store = Store::create(dir.to_str().unwrap()).unwrap();
    let keys = load(&store).await;
    let files = keys.iter().map(|k| dir.join(k)).collect();
    (store, files)
}

/// Loads 60k hits rows with the hits layout into `store`; returns the objects' keys.
async fn load(store: &Store) -> Vec<String> {
    ravel_testkit::set_layout(store, "hits", &ravel_hits::layout()).await;
    let (_, batches) = generate(GenOptions {
        rows: 60_000,
        seed: 21,
        batch_rows: 5_000,
        ..GenOptions::default()
    });
    let opts = LoadOptions {
        object_bytes: 600_000,
        target_bytes: Some(30_000_000),
        pipeline_depth: 4,
        load_budget: 400_000_000,
        max_flush_delay: Duration::from_secs(3600),
        zstd_level: 3,
    };
    let mut loader = Loader::new(store, "hits", opts).await.unwrap();
    for b in batches {
        loader.push(b).await.unwrap();
    }
    let report = loader.finish().await.unwrap();
    assert!(
        report.objects.len() >= 4 && report.runs >= 2,
        "{} objects",
        report.objects.len()
    );
    report.objects.iter().map(|o| o.key.clone()).collect()
}

fn read(path: &FsPath) -> RecordBatch {
    let bytes = bytes::Bytes::from(std::fs::read(path).unwrap());
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes).unwrap();
    let schema = reader.schema().clone();
    let batches: Vec<_> = reader.build().unwrap().map(|b| b.unwrap()).collect();
    concat_batches(&schema, &batches).unwrap()
}

fn write(path: &FsPath, batch: &RecordBatch, props: WriterProperties) {
    let mut w = ArrowWriter::try_new(Vec::new(), batch.schema(), Some(props)).unwrap();
    w.write(batch).unwrap();
    std::fs::write(path, w.into_inner().unwrap()).unwrap();
}

fn deep() -> VerifyOptions {
    VerifyOptions::deep()
}

/// The problems reported for one object.
fn problems(report: &ravel_verify::VerifyReport, file: &FsPath) -> Vec<Problem> {
    let name = file.file_name().unwrap().to_str().unwrap();
    report
        .violations
        .iter()
        .filter(|v| v.object.ends_with(name))
        .map(|v| v.problem.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_loaded_table_verifies_with_its_figures() {
    let dir = tempfile::tempdir().unwrap();
    let (store, files) = table(dir.path()).await;
    let report = verify(&store, "hits", &deep()).await.unwrap();
    assert!(report.holds(), "{:#?}", report.violations);
    assert_eq!(report.rows, 60_000);
    assert_eq!(report.objects, files.len());
    assert_eq!(report.manifests, 1);
    assert!(report.orphans.is_empty());
    let clustering = report.overlap.unwrap();
    // Several runs over the same counters: some keys lie in more than one object.
    assert!(
        clustering.max_depth >= 2 && clustering.average_depth > 1.0,
        "{clustering:?}"
    );
    assert!(clustering.average_overlaps > 0.0, "{clustering:?}");
    assert_eq!(clustering.total_objects, files.len());
    assert_eq!(
        clustering.depth_histogram.values().sum::<usize>(),
        files.len()
    );
    let sizes = report.sizes.unwrap();
    assert!(sizes.min <= sizes.median && sizes.median <= sizes.max);

    // An object no manifest lists is an orphan, not a violation.
    let orphan = dir.path().join("hits/data/left-behind.parquet");
    std::fs::copy(&files[0], &orphan).unwrap();
    let report = verify(&store, "hits", &VerifyOptions::default())
        .await
        .unwrap();
    assert!(report.holds());
    assert_eq!(
        report.orphans,
        vec!["hits/data/left-behind.parquet".to_string()]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unsorted_object_fails_deep_verification() {
    let dir = tempfile::tempdir().unwrap();
    let (store, files) = table(dir.path()).await;
    let batch = read(&files[1]);
    let reversed = UInt32Array::from_iter_values((0..batch.num_rows() as u32).rev());
    write(
        &files[1],
        &take_record_batch(&batch, &reversed).unwrap(),
        WriterProperties::default(),
    );
    let report = verify(&store, "hits", &deep()).await.unwrap();
    assert!(!report.holds());
    let found = problems(&report, &files[1]);
    assert!(
        found
            .iter()
            .any(|p| matches!(p, Problem::OutOfOrder { .. })),
        "{found:?}"
    );
    // The footer alone does not show the order; the other objects are fine.
    assert!(problems(&report, &files[0]).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_object_with_two_row_groups_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (store, files) = table(dir.path()).await;
    let batch = read(&files[0]);
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(batch.num_rows().div_ceil(2)))
        .build();
    write(&files[0], &batch, props);
    let report = verify(&store, "hits", &VerifyOptions::default())
        .await
        .unwrap();
    let found = problems(&report, &files[0]);
    assert!(
        found.contains(&Problem::RowGroups { count: 2 }),
        "{found:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_object_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (store, files) = table(dir.path()).await;
    std::fs::remove_file(&files[2]).unwrap();
    let report = verify(&store, "hits", &VerifyOptions::default())
        .await
        .unwrap();
    let found = problems(&report, &files[2]);
    assert!(
        matches!(found.as_slice(), [Problem::Missing { .. }]),
        "{found:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bloom_filter_outside_the_scope_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (store, files) = table(dir.path()).await;
    let batch = read(&files[0]);
    let props = WriterProperties::builder()
        .set_bloom_filter_enabled(true)
        .build();
    write(&files[0], &batch, props);
    let report = verify(&store, "hits", &VerifyOptions::default())
        .await
        .unwrap();
    let found = problems(&report, &files[0]);
    assert!(
        found.iter().any(|p| matches!(
            p,
            Problem::BloomOutsideScope { column, scope } if column == "WatchID" && scope == "text"
        )),
        "{found:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_table_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().to_str().unwrap()).unwrap();
    let err = verify(&store, "nope", &VerifyOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_invalid_input(), "{err}");
    assert!(err.to_string().contains("\"nope\""), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_table_in_s3_verifies_deeply() {
    let server = ravel_testkit::S3Server::start();
    let store = server.store("warehouse");
    let keys = load(&store).await;
    let report = verify(&store, "hits", &deep()).await.unwrap();
    assert!(report.holds(), "{:#?}", report.violations);
    assert_eq!((report.objects, report.rows), (keys.len(), 60_000));
    assert!(report.orphans.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bloom_sidecar_that_misses_a_value_fails_deep_verification() {
    let dir = tempfile::tempdir().unwrap();
    let (store, files) = table(dir.path()).await;
    let manifests: Vec<_> = std::fs::read_dir(dir.path().join("hits/_ravel/manifests"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(manifests.len(), 1);
    let m: ravel_manifest::Manifest =
        serde_json::from_slice(&std::fs::read(&manifests[0]).unwrap()).unwrap();
    let index = m
        .blooms
        .expect("the hits layout's Bloom scope covers the text columns");
    assert!(
        index.columns.contains_key("URL"),
        "{:?}",
        index.columns.keys()
    );
    assert!(!index.columns.contains_key("WatchID"));
    assert!(index.key.ends_with(".blooms"));

    // Swap the URL filters of the first two objects: the structure stays valid, the filters
    // no longer hold their objects' values.
    let path = dir.path().join(&index.key);
    let mut bytes = std::fs::read(&path).unwrap();
    let s = index.columns["URL"];
    let (from, to) = (s.offset as usize, (s.offset + s.len) as usize);
    let mut parts = Vec::new();
    let mut at = from;
    while at < to {
        let n = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        parts.push(bytes[at..at + 4 + n].to_vec());
        at += 4 + n;
    }
    assert_eq!(parts.len(), files.len());
    parts.swap(0, 1);
    bytes.splice(from..to, parts.concat());
    std::fs::write(&path, bytes).unwrap();

    let shallow = verify(&store, "hits", &VerifyOptions::default())
        .await
        .unwrap();
    assert!(shallow.holds(), "{:#?}", shallow.violations);
    let report = verify(&store, "hits", &deep()).await.unwrap();
    let found = problems(&report, &files[0]);
    assert!(
        found
            .iter()
            .any(|p| matches!(p, Problem::NotInBloom { column, .. } if column == "URL")),
        "{found:?}"
    );

    // A sidecar cut short is found without reading rows.
    std::fs::write(&path, ravel_bloom::MAGIC).unwrap();
    let report = verify(&store, "hits", &VerifyOptions::default())
        .await
        .unwrap();
    assert!(
        report
            .violations
            .iter()
            .any(|v| v.object == index.key && matches!(v.problem, Problem::SidecarSize { .. })),
        "{:#?}",
        report.violations
    );
}

/// A load whose schema says a NOT NULL column of the table is nullable (as an older build
/// published an input's nullability) breaks the table's promise; field metadata does not.
#[tokio::test(flavor = "multi_thread")]
async fn a_load_whose_nullability_differs_from_the_tables_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = table(dir.path()).await;
    let manifests = dir.path().join("hits/_ravel/manifests");
    let path = std::fs::read_dir(&manifests)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    for f in m["schema"]["fields"].as_array_mut().unwrap() {
        match f["name"].as_str().unwrap() {
            "UserID" => f["nullable"] = true.into(),
            "WatchID" => f["metadata"] = serde_json::json!({"a": "b"}),
            _ => {}
        }
    }
    std::fs::write(&path, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    let report = verify(&store, "hits", &VerifyOptions::default())
        .await
        .unwrap();
    let found: Vec<&Problem> = report.violations.iter().map(|v| &v.problem).collect();
    assert_eq!(
        found,
        [&Problem::NullableColumn {
            column: "UserID".into()
        }],
        "{found:?}"
    );
}

/// Loads `rows` hits rows (seed `seed`) into `store` as one version.
async fn load_small(store: &Store, rows: u64, seed: u64) {
    let (_, batches) = generate(GenOptions {
        rows,
        seed,
        batch_rows: 1_000,
        ..GenOptions::default()
    });
    let opts = LoadOptions {
        object_bytes: 200_000,
        ..LoadOptions::default()
    };
    let mut loader = Loader::new(store, "hits", opts).await.unwrap();
    for b in batches {
        loader.push(b).await.unwrap();
    }
    loader.finish().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn every_checksum_file_that_disagrees_with_the_log_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().to_str().unwrap()).unwrap();
    ravel_testkit::set_layout(&store, "hits", &ravel_hits::layout()).await;
    for seed in 1..=3 {
        load_small(&store, 1_000, seed).await;
    }
    let crc = |version: u64| {
        dir.path()
            .join(format!("hits/_delta_log/{version:020}.crc"))
    };
    let wrong = |version: u64, field: &str| {
        let path = crc(version);
        let mut json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        json[field] = serde_json::json!(json[field].as_u64().unwrap() + 1);
        std::fs::write(&path, serde_json::to_vec(&json).unwrap()).unwrap();
    };
    // An older version's file, then the newest one's: the entries are the ones they were
    // written for, so the log reads, and each file is a violation of its own.
    wrong(1, "numFiles");
    wrong(2, "tableSizeBytes");
    let report = verify(&store, "hits", &VerifyOptions::default())
        .await
        .unwrap();
    assert_eq!(report.rows, 3_000, "{:#?}", report.violations);
    let found: Vec<(String, String)> = report
        .violations
        .iter()
        .map(|v| (v.object.clone(), v.problem.to_string()))
        .collect();
    assert_eq!(found.len(), 2, "{found:#?}");
    for ((object, problem), (version, figure)) in
        found.iter().zip([(1, "numFiles"), (2, "tableSizeBytes")])
    {
        assert!(object.ends_with(&format!("{version:020}.crc")), "{object}");
        assert!(
            problem.starts_with(&format!("records {figure} "))
                && problem.contains(&format!("for version {version}"))
                && problem.contains("the checksum file is wrong"),
            "{problem}"
        );
    }
    assert!(
        report
            .violations
            .iter()
            .all(|v| v.problem.kind() == "checksum_mismatch")
    );
}

/// Commits `n` versions that record a setting of their own (no objects change).
async fn settings_versions(log: &ravel_log::TableLog, from: usize, n: usize) {
    for i in from..from + n {
        let config = std::collections::BTreeMap::from([("ravel.test.step".into(), i.to_string())]);
        log.commit_settings(&config).await.unwrap();
    }
}

/// A log the log window cleaned verifies from the checkpoint it starts at; a newest checkpoint
/// that lost a live object is still caught against that checkpoint and the entries after it.
#[tokio::test(flavor = "multi_thread")]
async fn a_cleaned_log_verifies_and_a_checkpoint_that_lost_an_object_is_still_caught() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = table(dir.path()).await;
    let log = ravel_log::TableLog::new(
        store.object_store().clone(),
        ravel_store::TablePaths::new("hits").unwrap(),
    );
    settings_versions(&log, 1, 14).await;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    let a_day_ahead = now.unwrap().as_millis() as i64 + 86_400_000;
    let expired = log.expired_log(a_day_ahead, 3_600_000).await.unwrap();
    assert_eq!(expired.checkpoint, Some(10));
    log.delete_expired(&expired).await.unwrap();
    let report = verify(&store, "hits", &deep()).await.unwrap();
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    assert_eq!((report.version, report.versions), (Some(14), 5));

    // Checkpoint 20, rewritten without one of the table's objects.
    settings_versions(&log, 15, 6).await;
    let mut actions = log.checkpoint_entry(20).await.unwrap().actions;
    let dropped = actions.iter().position(|a| a.add.is_some()).unwrap();
    actions.remove(dropped);
    let bytes = ravel_log::encode_checkpoint(&actions).unwrap();
    std::fs::write(
        dir.path()
            .join("hits/_delta_log/00000000000000000020.checkpoint.parquet"),
        bytes,
    )
    .unwrap();
    let report = verify(&store, "hits", &deep()).await.unwrap();
    let caught = report
        .violations
        .iter()
        .any(|v| matches!(v.problem, Problem::CheckpointFiles { .. }));
    assert!(caught, "{:?}", report.violations);
}
