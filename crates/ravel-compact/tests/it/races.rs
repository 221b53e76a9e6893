//! Compaction racing other writers at its commit: a compaction is held just before its log
//! entry (a gate on the store) while a load, another compaction or gc acts. The load and the
//! compaction races run on a local store and on a real S3 server (s3s-fs, in-process).

use std::sync::Arc;
use std::time::Duration;

use arrow::array::{AsArray, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, TimeUnit};
use futures::StreamExt;
use object_store::ObjectStoreExt;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use ravel_compact::{CompactOptions, CompactReport, compact, maintain};
use ravel_layout::{BucketWidth, ClusteringKey, Layout, Maintenance, MaintenanceMode};
use ravel_loader::{LoadOptions, Loader};
use ravel_store::Store;
use ravel_testkit::{FaultStore, Gate};

/// Where a table lives.
enum Backend {
    Local(tempfile::TempDir),
    S3(ravel_testkit::S3Server),
}

struct Table {
    backend: Backend,
    store: Store,
}

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new(
            "time",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            false,
        ),
        Field::new("seq", DataType::Int64, false),
        Field::new("s", DataType::Utf8, false),
    ]))
}

/// Rows `from..to` (their `seq`), keys spread over the key space.
fn rows(from: i64, to: i64) -> RecordBatch {
    let seq: Vec<i64> = (from..to).collect();
    let k: Vec<i64> = seq.iter().map(|i| (i * 7919) % 1000).collect();
    let time: Vec<i64> = seq.iter().map(|i| 1_700_000_000_000 + i % 97).collect();
    let s: Vec<String> = seq.iter().map(|i| format!("value-{}", i % 13)).collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(k)),
            Arc::new(TimestampMillisecondArray::from(time)),
            Arc::new(Int64Array::from(seq)),
            Arc::new(StringArray::from(s)),
        ],
    )
    .unwrap()
}

fn load_options() -> LoadOptions {
    LoadOptions {
        object_bytes: 4_000,
        target_bytes: None,
        pipeline_depth: 2,
        load_budget: 64_000_000,
        max_flush_delay: Duration::from_secs(3600),
        zstd_level: 1,
    }
}

fn compact_options() -> CompactOptions {
    CompactOptions {
        load: load_options(),
        fan_in: None,
        max_input_bytes: None,
        dry_run: false,
        max_steps: None,
    }
}

/// A table of three loads of 1,500 rows, each across the key space, on a local store.
async fn table() -> Table {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().to_str().unwrap()).unwrap();
    filled(Backend::Local(dir), store).await
}

/// The same table on an S3 server.
async fn table_on_s3() -> Table {
    let server = ravel_testkit::S3Server::start();
    let store = server.store("");
    filled(Backend::S3(server), store).await
}

async fn filled(backend: Backend, store: Store) -> Table {
    filled_with(backend, store, Maintenance::default()).await
}

/// The table of [`table_on_s3`] with a policy that merges its three loads (a tier of two, at
/// most two runs).
async fn maintained_table_on_s3() -> Table {
    let server = ravel_testkit::S3Server::start();
    let store = server.store("");
    let policy = Maintenance {
        policy: MaintenanceMode::Tiered,
        size_ratio: 2,
        max_depth: 2,
    };
    filled_with(Backend::S3(server), store, policy).await
}

async fn filled_with(backend: Backend, store: Store, maintenance: Maintenance) -> Table {
    let layout = Layout {
        maintenance,
        time: Some("time".into()),
        clustering_key: Some(ClusteringKey {
            columns: vec!["k".into()],
            bucket_width: BucketWidth::from_seconds(86_400).unwrap(),
        }),
        ..Layout::default()
    };
    ravel_testkit::set_layout(&store, "t", &layout).await;
    let t = Table { backend, store };
    for i in 0..3 {
        t.load(i * 1500, (i + 1) * 1500).await;
    }
    t
}

/// Which run a test holds at its commit.
#[derive(Debug, Clone, Copy)]
enum Run {
    Compaction,
    Maintenance,
}

/// A run held at its log entry until `gate` opens.
struct Held {
    task: tokio::task::JoinHandle<Result<CompactReport, ravel_compact::CompactError>>,
    gate: Gate,
}

impl Table {
    async fn load(&self, from: i64, to: i64) {
        let mut loader = Loader::new(&self.store, "t", load_options()).await.unwrap();
        loader.push(rows(from, to)).await.unwrap();
        loader.finish().await.unwrap();
    }

    /// The same store, every put under the log held until the gate opens.
    fn gated(&self) -> (Store, Gate) {
        match &self.backend {
            Backend::Local(dir) => {
                let local = LocalFileSystem::new_with_prefix(dir.path()).unwrap();
                let (faulty, gate) = FaultStore::new(local).gate_puts("t/_delta_log/");
                (Store::new("gated", faulty.into_arc()), gate)
            }
            Backend::S3(server) => {
                let mut gate = None;
                let store = server.store_with("", |s3| {
                    let (faulty, g) = FaultStore::new(s3).gate_puts("t/_delta_log/");
                    gate = Some(g);
                    faulty.into_arc()
                });
                (store, gate.expect("set by the wrapper"))
            }
        }
    }

    /// `run` (a compaction or maintenance) through the gated store, running until it reaches
    /// its log entry.
    async fn held(&self, run: Run) -> Held {
        let (gated, gate) = self.gated();
        let task = tokio::spawn(async move {
            match run {
                Run::Compaction => compact(&gated, "t", &compact_options()).await,
                Run::Maintenance => maintain(&gated, "t", &compact_options()).await,
            }
        });
        tokio::time::timeout(Duration::from_secs(60), gate.reached())
            .await
            .unwrap_or_else(|_| panic!("the {run:?} reached its commit"));
        Held { task, gate }
    }

    /// Runs maintenance until it has nothing to do; returns the depth it leaves.
    async fn maintained(&self) -> usize {
        for _ in 0..20 {
            let r = maintain(&self.store, "t", &compact_options())
                .await
                .unwrap();
            if r.version.is_none() {
                return r.depth_after;
            }
        }
        panic!("maintenance did not converge in 20 runs");
    }

    /// `seq` of every row of the newest version, sorted.
    async fn seqs(&self) -> Vec<i64> {
        let mut out = Vec::new();
        for m in ravel_testkit::published(&self.store, "t").await {
            for o in &m.objects {
                out.extend(read_seq(&self.store, &o.key).await.unwrap());
            }
        }
        out.sort_unstable();
        out
    }

    async fn verify(&self) -> ravel_verify::VerifyReport {
        let opts = ravel_verify::VerifyOptions::deep();
        ravel_verify::verify(&self.store, "t", &opts).await.unwrap()
    }
}

async fn read_seq(store: &Store, key: &str) -> Result<Vec<i64>, object_store::Error> {
    let bytes = store
        .object_store()
        .get(&Path::from(key))
        .await?
        .bytes()
        .await?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .unwrap()
        .build()
        .unwrap();
    Ok(reader
        .flat_map(|b| {
            let b = b.unwrap();
            b.column_by_name("seq")
                .unwrap()
                .as_primitive::<Int64Type>()
                .values()
                .to_vec()
        })
        .collect())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_load_committed_during_a_compaction_stays() {
    load_during_compaction(table().await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_load_committed_during_a_compaction_stays_on_s3() {
    load_during_compaction(table_on_s3().await).await;
}

async fn load_during_compaction(t: Table) {
    let Held { task, gate } = t.held(Run::Compaction).await;
    t.load(4500, 6000).await;
    gate.open();
    let report = task.await.unwrap().unwrap();
    assert_eq!(report.read_version, Some(2));
    assert_eq!(report.version, Some(4), "after the load's version 3");
    assert_eq!(t.seqs().await, (0..6000).collect::<Vec<i64>>());
    let v = t.verify().await;
    assert!(v.holds(), "{:#?}", v.violations);
}

#[tokio::test(flavor = "multi_thread")]
async fn of_two_compactions_one_wins_and_the_other_fails_cleanly() {
    two_compactions(table().await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn of_two_compactions_one_wins_and_the_other_fails_cleanly_on_s3() {
    two_compactions(table_on_s3().await).await;
}

async fn two_compactions(t: Table) {
    let Held { task, gate } = t.held(Run::Compaction).await;
    let winner = compact(&t.store, "t", &compact_options()).await.unwrap();
    assert_eq!(winner.version, Some(3));
    gate.open();
    let err = task.await.unwrap().unwrap_err();
    assert!(err.is_conflict(), "{err}");
    assert!(err.to_string().contains("rerun"), "{err}");
    assert_eq!(t.seqs().await, (0..4500).collect::<Vec<i64>>());
    let v = t.verify().await;
    assert!(v.holds(), "{:#?}", v.violations);
    // The merge is deterministic: the loser stored the winner's very objects. Its manifest is
    // named by no version; gc collects it with the replaced inputs.
    assert!(v.orphans.is_empty(), "{:?}", v.orphans);
    let gc = ravel_gc::gc(
        &t.store,
        "t",
        &ravel_gc::GcOptions::new(Duration::ZERO, false),
    )
    .await
    .unwrap();
    assert!(gc.blocked_by.is_empty(), "{gc:?}");
    assert!(
        gc.unreferenced
            .iter()
            .any(|u| u.deleted && u.key.starts_with("t/_ravel/manifests/")),
        "{gc:?}"
    );
    let v = t.verify().await;
    assert!(v.orphans.is_empty() && v.removed_stored == 0, "{v:?}");
    assert_eq!(t.seqs().await, (0..4500).collect::<Vec<i64>>());
}

#[tokio::test(flavor = "multi_thread")]
async fn gc_waits_for_a_compaction_and_a_reader_of_the_old_version_keeps_reading() {
    let t = table().await;
    let log = ravel_log::TableLog::new(
        t.store.object_store().clone(),
        ravel_store::TablePaths::new("t").unwrap(),
    );
    // A reader holding version 2 (its objects) before the compaction starts.
    let old = log.manifests(&log.at(2).await.unwrap()).await.unwrap();
    let old_keys: Vec<String> = old
        .iter()
        .flat_map(|m| m.objects().map(|(_, o)| o.key.clone()).collect::<Vec<_>>())
        .collect();
    let Held { task, gate } = t.held(Run::Compaction).await;
    let now = ravel_gc::GcOptions::new(Duration::ZERO, false);
    let blocked = ravel_gc::gc(&t.store, "t", &now).await.unwrap();
    assert!(
        !blocked.blocked_by.is_empty(),
        "the compaction's lease blocks gc"
    );
    assert_eq!(blocked.deleted, 0);
    gate.open();
    task.await.unwrap().unwrap();
    // Within the retention, the old version's objects stay.
    let day = ravel_gc::GcOptions::new(Duration::from_secs(86_400), false);
    ravel_gc::gc(&t.store, "t", &day).await.unwrap();
    let mut seen = Vec::new();
    for k in &old_keys {
        seen.extend(read_seq(&t.store, k).await.unwrap());
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..4500).collect::<Vec<i64>>());
    // Past it, they go; the newest version reads on.
    let swept = ravel_gc::gc(&t.store, "t", &now).await.unwrap();
    assert!(swept.deleted >= old_keys.len(), "{swept:?}");
    assert_eq!(t.seqs().await, (0..4500).collect::<Vec<i64>>());
    let v = t.verify().await;
    assert!(v.holds(), "{:#?}", v.violations);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_load_committed_during_maintenance_stays_and_a_rerun_converges_on_s3() {
    let t = maintained_table_on_s3().await;
    let Held { task, gate } = t.held(Run::Maintenance).await;
    t.load(4500, 6000).await;
    gate.open();
    let report = task.await.unwrap().unwrap();
    assert_eq!(report.read_version, Some(2));
    assert!(report.version.unwrap() >= 4, "after the load's version 3");
    assert_eq!(t.seqs().await, (0..6000).collect::<Vec<i64>>());
    assert!(t.maintained().await <= 2);
    assert_eq!(t.seqs().await, (0..6000).collect::<Vec<i64>>());
    let v = t.verify().await;
    assert!(v.holds(), "{:#?}", v.violations);
}

#[tokio::test(flavor = "multi_thread")]
async fn maintenance_racing_a_compaction_fails_cleanly_and_gc_collects_what_it_left_on_s3() {
    let t = maintained_table_on_s3().await;
    let Held { task, gate } = t.held(Run::Maintenance).await;
    let winner = compact(&t.store, "t", &compact_options()).await.unwrap();
    assert_eq!(winner.depth_after, 1);
    gate.open();
    let err = task.await.unwrap().unwrap_err();
    assert!(err.is_conflict(), "{err}");
    // The compaction left one sequence: nothing more to do.
    let rerun = maintain(&t.store, "t", &compact_options()).await.unwrap();
    assert_eq!(rerun.version, None, "{rerun:?}");
    let now = ravel_gc::GcOptions::new(Duration::ZERO, false);
    let gc = ravel_gc::gc(&t.store, "t", &now).await.unwrap();
    assert!(gc.blocked_by.is_empty(), "{gc:?}");
    let v = t.verify().await;
    assert!(v.holds(), "{:#?}", v.violations);
    assert!(v.orphans.is_empty() && v.removed_stored == 0, "{v:?}");
    assert_eq!(t.seqs().await, (0..4500).collect::<Vec<i64>>());
}

#[tokio::test(flavor = "multi_thread")]
async fn gc_deletes_nothing_while_maintenance_runs_on_s3() {
    let t = maintained_table_on_s3().await;
    let Held { task, gate } = t.held(Run::Maintenance).await;
    let now = ravel_gc::GcOptions::new(Duration::ZERO, false);
    let blocked = ravel_gc::gc(&t.store, "t", &now).await.unwrap();
    assert!(
        !blocked.blocked_by.is_empty(),
        "the maintenance's lease blocks gc"
    );
    assert_eq!(blocked.deleted, 0);
    gate.open();
    let report = task.await.unwrap().unwrap();
    assert!(report.version.is_some(), "{report:?}");
    assert!(t.maintained().await <= 2);
    ravel_gc::gc(&t.store, "t", &now).await.unwrap();
    assert_eq!(t.seqs().await, (0..4500).collect::<Vec<i64>>());
    let v = t.verify().await;
    assert!(v.holds() && v.orphans.is_empty(), "{v:?}");
}

/// Two compactions of the same inputs in passes of two (intermediate objects of equal content),
/// started together or a few milliseconds apart, 10 times: each run commits, finds nothing left
/// to do, or fails with the conflict; never on an object the other deleted. Each writes its
/// intermediate objects under a prefix of its own, which it alone clears.
#[tokio::test(flavor = "multi_thread")]
async fn concurrent_compactions_in_passes_never_read_each_others_intermediates_on_s3() {
    let opts = CompactOptions {
        fan_in: Some(2),
        ..compact_options()
    };
    for round in 0..10u64 {
        let t = table_on_s3().await;
        let spawn = |delay_ms: u64| {
            let (store, opts) = (t.store.clone(), opts.clone());
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                compact(&store, "t", &opts).await
            })
        };
        let (a, b) = (spawn(0), spawn(round * 4));
        let mut committed = 0;
        for result in [a.await.unwrap(), b.await.unwrap()] {
            match result {
                Ok(r) => committed += usize::from(r.version.is_some()),
                Err(e) => assert!(
                    e.is_conflict() && e.to_string().contains("rerun"),
                    "round {round}: {e}"
                ),
            }
        }
        assert_eq!(committed, 1, "round {round}: one of the two commits");
        assert_eq!(t.seqs().await, (0..4500).collect::<Vec<i64>>());
        if round % 5 == 4 {
            let v = t.verify().await;
            assert!(v.holds(), "round {round}: {:#?}", v.violations);
        }
        let scratch = t
            .store
            .object_store()
            .list(Some(&Path::from("t/_ravel/tmp")))
            .count()
            .await;
        assert_eq!(scratch, 0, "round {round}: each cleared its scratch prefix");
    }
}

/// What a partitioning Delta writer (delta-rs `write_deltalake(mode="append",
/// partition_by=["s"])`) commits as `version`: rows `from..to` in an object without column
/// `s`, whose value `value` is in the add's `partitionValues`, with the table's metadata
/// partitioned by `s` (as that writer's partitioned overwrite leaves it).
async fn partitioned_append(t: &Table, version: u64, (from, to): (i64, i64), value: &str) {
    let batch = rows(from, to);
    let batch = batch.project(&[0, 1, 2]).unwrap();
    let mut bytes = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut bytes, batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let path = format!("s={value}/part-{from:05}.parquet");
    let os = t.store.object_store();
    let size = bytes.len();
    os.put(&Path::from(format!("t/{path}")), bytes.into())
        .await
        .unwrap();
    let log = ravel_log::TableLog::new(os.clone(), ravel_store::TablePaths::new("t").unwrap());
    let mut metadata = serde_json::to_value(log.latest().await.unwrap().metadata).unwrap();
    metadata["partitionColumns"] = serde_json::json!(["s"]);
    let lines = [
        serde_json::json!({"commitInfo": {"operation": "WRITE", "engineInfo": "delta-rs"}}),
        serde_json::json!({"metaData": metadata}),
        serde_json::json!({"add": {
            "path": path, "partitionValues": {"s": value}, "size": size,
            "modificationTime": 1_700_000_000_000i64, "dataChange": true,
            "stats": serde_json::json!({"numRecords": to - from}).to_string(),
        }}),
    ];
    let entry: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let key = Path::from(format!("t/_delta_log/{version:020}.json"));
    let create = object_store::PutOptions::from(object_store::PutMode::Create);
    os.put_opts(&key, entry.into(), create).await.unwrap();
}

/// A partitioned append that lands while maintenance takes the table's partitioned objects in
/// would be left behind by its version (which ends the partitioning): the maintenance fails as
/// a conflict, publishing nothing, and its rerun takes both appends in.
async fn partitioned_append_during_adoption(t: Table) {
    partitioned_append(&t, 3, (4500, 4600), "value-3").await;
    let Held { task, gate } = t.held(Run::Maintenance).await;
    partitioned_append(&t, 4, (4600, 4700), "value-4").await;
    gate.open();
    let err = task.await.unwrap().unwrap_err();
    assert!(err.is_conflict(), "{err}");
    let message = format!("{err:#}");
    assert!(
        message.contains("s=value-4/part-04600.parquet") && message.contains("version 4"),
        "{message}"
    );
    let log = ravel_log::TableLog::new(
        t.store.object_store().clone(),
        ravel_store::TablePaths::new("t").unwrap(),
    );
    assert_eq!(
        log.versions().await.unwrap(),
        [0, 1, 2, 3, 4],
        "nothing published"
    );
    t.maintained().await;
    assert_eq!(t.seqs().await, (0..4700).collect::<Vec<i64>>());
    let newest = log.latest().await.unwrap();
    assert!(newest.foreign(log.table()).is_empty());
    assert!(newest.metadata.unwrap().partition_columns.is_empty());
    let v = t.verify().await;
    assert!(v.holds(), "{:#?}", v.violations);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_partitioned_append_during_an_adoption_is_a_conflict_not_left_behind() {
    partitioned_append_during_adoption(table().await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_partitioned_append_during_an_adoption_is_a_conflict_not_left_behind_on_s3() {
    partitioned_append_during_adoption(table_on_s3().await).await;
}
