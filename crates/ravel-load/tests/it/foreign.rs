//! Other Delta writers on a ravel table, on a real S3 server (s3s-fs, in-process) and, for the
//! partitioned overwrite, the table delta-rs created and the extra column, on a local store too:
//! delta-rs
//! appends to it, rewrites it the way its `optimize` commits (every object removed, their rows
//! in one new file) and vacuums it. `ravel-load query` reads their objects, `verify` reports
//! them as not clustered, maintenance and `compact` take them in, and the Delta kernel and
//! ravel give the same answers at every step. With the fence set, delta-rs refuses to write.
//! A partitioned overwrite is read and taken in with its partition values, a table only
//! delta-rs wrote is queried, laid out and maintained, and an object with a column the table
//! lacks is named, with nothing published.

use std::path::Path;
use std::sync::Arc;

use crate::place::Place;
use arrow::array::{
    ArrayRef, AsArray, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray, UInt16Array,
};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, TimeUnit};
use deltalake_core::kernel::Action;
use deltalake_core::kernel::transaction::CommitBuilder;
use deltalake_core::protocol::DeltaOperation;
use deltalake_core::writer::{DeltaWriter, RecordBatchWriter};
use futures::StreamExt;
use object_store::{ObjectStore, ObjectStoreExt};
use url::Url;

use crate::common::{self, Args, line, p};
use crate::delta::{delta_scan, register_given_store};

/// Rows `from..to`: `k` spread over 0..1000, `time` over four days, `u` as UInt16.
pub(crate) fn rows(from: i64, to: i64) -> RecordBatch {
    let seq: Vec<i64> = (from..to).collect();
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new(
            "time",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            false,
        ),
        Field::new("s", DataType::Utf8, true),
        Field::new("u", DataType::UInt16, false),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(
            seq.iter().map(|i| (i * 7919) % 1000),
        )),
        Arc::new(TimestampMillisecondArray::from_iter_values(
            seq.iter().map(|i| 1_700_000_000_000 + (i % 96) * 3_600_000),
        )),
        Arc::new(StringArray::from_iter_values(
            seq.iter().map(|i| format!("v{}", i % 13)),
        )),
        Arc::new(UInt16Array::from_iter_values(
            seq.iter().map(|i| (i % 60_000) as u16),
        )),
    ];
    RecordBatch::try_new(schema, columns).unwrap()
}

/// Writes rows `from..to` to a Parquet file at `path`.
pub(crate) fn write_rows(path: &Path, from: i64, to: i64) {
    let batch = rows(from, to);
    let file = std::fs::File::create(path).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

/// (rows, SUM(k), SUM(u)) of rows `0..n`.
pub(crate) fn expected(n: i64) -> (u64, i64, i64) {
    let b = rows(0, n);
    let sum = |c: &str| -> i64 {
        let a = arrow::compute::cast(b.column_by_name(c).unwrap(), &DataType::Int64).unwrap();
        a.as_primitive::<Int64Type>().iter().flatten().sum()
    };
    (n as u64, sum("k"), sum("u"))
}

pub(crate) struct Table<'a> {
    place: &'a Place,
    pub(crate) url: String,
    dir: &'a Path,
}

impl<'a> Table<'a> {
    /// Table `t` under prefix `fw` of `place`, its inputs written to `dir`.
    pub(crate) fn new(place: &'a Place, dir: &'a Path) -> Table<'a> {
        Table {
            place,
            url: place.url("fw"),
            dir,
        }
    }

    fn cmd(&self, args: &(impl Args + ?Sized)) -> std::process::Command {
        self.place.command(args)
    }

    pub(crate) fn ok(&self, args: &str) -> String {
        let (command, rest) = args.split_once(' ').unwrap_or((args, ""));
        let args = format!("{command} --store {} --table t {rest}", self.url);
        common::succeeds(self.cmd(&args)).0
    }

    fn json(&self, args: &str) -> serde_json::Value {
        serde_json::from_str(&self.ok(&format!("{args} --json"))).unwrap()
    }

    /// Loads rows `from..to` through ravel-load.
    fn load(&self, from: i64, to: i64, extra: &str) -> serde_json::Value {
        let input = self.dir.join(format!("{from}.parquet"));
        write_rows(&input, from, to);
        self.json(&format!(
            "load --input {} --object-bytes 20000 {extra}",
            p(&input)
        ))
    }

    /// (rows, SUM(k), SUM(u)) as `ravel-load query` answers.
    pub(crate) fn ravel(&self) -> (u64, i64, i64) {
        let q = line(
            &format!("query --store {} --table t --format csv", self.url),
            &["SELECT COUNT(*), SUM(k), SUM(u) FROM t"],
        );
        let out = common::succeeds(self.cmd(&q)).0;
        let row: Vec<i64> = crate::common::first_row(&out);
        (row[0] as u64, row[1], row[2])
    }

    fn verify(&self) -> serde_json::Value {
        let v = self.json("verify --deep");
        assert_eq!(v["violations"], serde_json::json!([]), "{v}");
        v
    }

    /// The store's root, as delta-rs and the kernel are given it, and the table's URL.
    fn delta(&self) -> (Arc<dyn ObjectStore>, Url, Url) {
        let d = self.place.delta("fw/t");
        (d.store, d.root, d.table)
    }

    /// (rows, SUM(k)) as the Delta kernel reads the newest version (its default engine does
    /// not read UInt16 objects as Delta's integer).
    fn kernel(&self) -> (u64, i64) {
        let (store, _, url) = self.delta();
        let (mut n, mut k) = (0, 0);
        for b in delta_scan(store, &url, &["k"], None).unwrap() {
            n += b.num_rows() as u64;
            let col = b.column_by_name("k").unwrap().as_primitive::<Int64Type>();
            k += col.iter().flatten().sum::<i64>();
        }
        (n, k)
    }

    /// The newest version as delta-rs opens it.
    async fn delta_rs(&self) -> deltalake_core::DeltaTable {
        let mut table = self.delta_rs_unloaded();
        table.load().await.unwrap();
        table
    }

    /// The table as delta-rs finds it before reading its log (it may have none yet).
    fn delta_rs_unloaded(&self) -> deltalake_core::DeltaTable {
        let (store, root, url) = self.delta();
        register_given_store(&url);
        deltalake_core::DeltaTableBuilder::from_url(url)
            .unwrap()
            .with_storage_backend(store, root)
            .build()
            .unwrap()
    }

    /// The first row `sql` gives as `ravel-load query --format csv` answers, its fields.
    fn query(&self, sql: &str) -> Vec<String> {
        let q = line(
            &format!("query --store {} --table t --format csv", self.url),
            &[sql],
        );
        let out = common::succeeds(self.cmd(&q)).0;
        let row = out.lines().nth(1).unwrap_or_default();
        row.split(',').map(String::from).collect()
    }

    /// Runs `args` on table `t`, which must fail with `code`; returns its stderr.
    fn fails(&self, code: i32, args: &str) -> String {
        let (command, rest) = args.split_once(' ').unwrap_or((args, ""));
        let args = format!("{command} --store {} --table t {rest}", self.url);
        let out = self.cmd(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(code), "{args}: {err}");
        err
    }

    /// The versions in the table's log.
    fn versions(&self) -> usize {
        common::versions(&self.place.dir("fw/t/_delta_log"))
    }

    /// (rows whose `s` is not null, rows whose `s` is "v3") as the Delta kernel reads them.
    fn kernel_s(&self) -> (usize, usize) {
        let (store, _, url) = self.delta();
        let (mut set, mut v3) = (0, 0);
        // With `k` beside it: the kernel fails a scan of partition columns alone.
        for b in delta_scan(store, &url, &["k", "s"], None).unwrap() {
            let s = b.column_by_name("s").unwrap();
            let s = arrow::compute::cast(s, &DataType::Utf8).unwrap();
            let s = s.as_string::<i32>();
            set += s.iter().flatten().count();
            v3 += s.iter().flatten().filter(|v| *v == "v3").count();
        }
        (set, v3)
    }

    /// What delta-rs's `write_deltalake(mode="overwrite", partition_by=[column])` commits: the
    /// table replaced, partitioned by `column`, then rows `0..n` written in its partitions.
    async fn delta_overwrite_partitioned(&self, column: &str, n: i64) {
        let table = self.delta_rs().await;
        let columns: Vec<_> = table
            .snapshot()
            .unwrap()
            .schema()
            .fields()
            .cloned()
            .collect();
        let mut table = table
            .create()
            .with_columns(columns)
            .with_partition_columns([column])
            .with_save_mode(deltalake_core::protocol::SaveMode::Overwrite)
            .await
            .unwrap();
        table.load().await.unwrap();
        let mut writer = RecordBatchWriter::for_table(&table).unwrap();
        writer.write(as_delta(&writer, &rows(0, n))).await.unwrap();
        writer.flush_and_commit(&mut table).await.unwrap();
    }

    /// A table delta-rs creates (Delta types: long, timestamp, string, integer), with rows
    /// `0..n` in two appends.
    async fn delta_create(&self, n: i64) {
        use deltalake_core::kernel::DataType as D;
        let mut table = self
            .delta_rs_unloaded()
            .create()
            .with_column("k", D::LONG, false, None)
            .with_column("time", D::TIMESTAMP, false, None)
            .with_column("s", D::STRING, true, None)
            .with_column("u", D::INTEGER, false, None)
            .await
            .unwrap();
        for (from, to) in [(0, n / 2), (n / 2, n)] {
            let mut writer = RecordBatchWriter::for_table(&table).unwrap();
            writer
                .write(as_delta(&writer, &rows(from, to)))
                .await
                .unwrap();
            writer.flush_and_commit(&mut table).await.unwrap();
        }
    }

    /// An append of rows `from..to` with a column `x` the table lacks, its schema merged in
    /// (delta-rs's `schema_mode="merge"`).
    async fn delta_append_merging(&self, from: i64, to: i64) {
        let mut table = self.delta_rs().await;
        let mut writer = RecordBatchWriter::for_table(&table).unwrap();
        let batch = as_delta(&writer, &rows(from, to));
        let x: ArrayRef = Arc::new(Int64Array::from_iter_values(from..to));
        let mut fields = batch.schema().fields().to_vec();
        fields.push(Arc::new(Field::new("x", DataType::Int64, true)));
        let mut columns = batch.columns().to_vec();
        columns.push(x);
        let wider = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
        writer
            .write_with_mode(wider, deltalake_core::writer::WriteMode::MergeSchema)
            .await
            .unwrap();
        writer.flush_and_commit(&mut table).await.unwrap();
    }

    /// Appends rows `from..to` with delta-rs's writer.
    pub(crate) async fn delta_append(&self, from: i64, to: i64) -> Result<u64, String> {
        let mut table = self.delta_rs().await;
        let mut writer = RecordBatchWriter::for_table(&table).map_err(|e| e.to_string())?;
        writer
            .write(as_delta(&writer, &rows(from, to)))
            .await
            .map_err(|e| e.to_string())?;
        writer
            .flush_and_commit(&mut table)
            .await
            .map_err(|e| e.to_string())
    }

    /// What delta-rs's `optimize` commits: every file of the version removed, their rows
    /// (`0..n`) in one new file written by delta-rs's writer.
    async fn delta_rewrite(&self, n: i64) {
        let table = self.delta_rs().await;
        let snapshot = table.snapshot().unwrap();
        let removes: Vec<Action> = snapshot
            .snapshot()
            .file_views(table.log_store().as_ref(), None)
            .map(|f| Action::Remove(f.unwrap().remove_action(false)))
            .collect()
            .await;
        let mut writer = RecordBatchWriter::for_table(&table).unwrap();
        writer.write(as_delta(&writer, &rows(0, n))).await.unwrap();
        let mut actions: Vec<Action> = writer
            .flush()
            .await
            .unwrap()
            .into_iter()
            .map(Action::Add)
            .collect();
        for a in &mut actions {
            if let Action::Add(add) = a {
                add.data_change = false;
            }
        }
        actions.extend(removes);
        let operation = DeltaOperation::Optimize {
            predicate: None,
            target_size: 104_857_600,
        };
        CommitBuilder::default()
            .with_actions(actions)
            .build(Some(snapshot), table.log_store(), operation)
            .await
            .unwrap();
    }

    /// delta-rs's `vacuum` with no retention.
    async fn delta_vacuum(&self) -> usize {
        let table = self.delta_rs().await;
        let (_, metrics) = table
            .vacuum()
            .with_retention_period(chrono::Duration::zero())
            .with_enforce_retention_duration(false)
            .await
            .unwrap();
        metrics.files_deleted.len()
    }
}

/// (rows, SUM(k)) of rows `0..n`.
fn kernel_expected(n: i64) -> (u64, i64) {
    let (rows, k, _) = expected(n);
    (rows, k)
}

/// `batch` with the types delta-rs's writer takes (the Delta types of the table's columns).
fn as_delta(writer: &RecordBatchWriter, batch: &RecordBatch) -> RecordBatch {
    let schema = writer.arrow_schema();
    let columns = schema
        .fields()
        .iter()
        .map(|f| {
            arrow::compute::cast(batch.column_by_name(f.name()).unwrap(), f.data_type()).unwrap()
        })
        .collect();
    RecordBatch::try_new(schema, columns).unwrap()
}

#[test]
fn delta_rs_appends_and_rewrites_and_ravel_reads_verifies_and_takes_them_in() {
    let place = Place::s3();
    let dir = tempfile::tempdir().unwrap();
    let t = Table::new(&place, dir.path());
    let schema = dir.path().join("schema.parquet");
    write_rows(&schema, 0, 1);
    t.ok(&format!("layout schema set --from {}", p(&schema)));
    t.ok("layout time set --column time");
    t.ok("layout clustering-key set --column k --bucket-width 1d");
    t.ok("layout bloom-scope set --scope text");
    t.load(0, 3000, "--no-maintain");
    let rt = tokio::runtime::Runtime::new().unwrap();

    // An append: ravel reads it whole, verify calls it not clustered.
    rt.block_on(t.delta_append(3000, 4000)).unwrap();
    assert_eq!(t.ravel(), expected(4000));
    assert_eq!(t.kernel(), kernel_expected(4000));
    let v = t.verify();
    assert_eq!(v["foreign"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["rows"], 4000);
    assert!(v["notes"].to_string().contains("not clustered"), "{v}");

    // The next load's maintenance takes it in; a compaction leaves one sequence.
    let loaded = t.load(4000, 5000, "");
    assert_eq!(loaded["maintenance"]["adopted"]["rows"], 1000, "{loaded}");
    assert_eq!(t.verify()["foreign"], serde_json::json!([]));
    let compacted = t.json("compact --object-bytes 20000");
    assert_eq!(compacted["depth_after"], 1, "{compacted}");
    assert_eq!(t.ravel(), expected(5000));
    assert_eq!(t.kernel(), kernel_expected(5000));

    // delta-rs's optimize and vacuum: every ravel object removed, then deleted.
    rt.block_on(t.delta_rewrite(5000));
    assert!(rt.block_on(t.delta_vacuum()) > 0);
    assert_eq!(t.ravel(), expected(5000));
    let v = t.verify();
    assert_eq!(v["foreign"].as_array().unwrap().len(), 1, "{v}");
    // A ravel load on top, then the compaction takes delta-rs's file in and merges both.
    t.load(5000, 5500, "--no-maintain");
    assert_eq!(t.ravel(), expected(5500));
    assert_eq!(t.kernel(), kernel_expected(5500));
    let adopted = t.json("compact --object-bytes 20000");
    assert_eq!(adopted["adopted"]["rows"], 5000, "{adopted}");
    assert_eq!(adopted["depth_after"], 1, "{adopted}");
    let v = t.verify();
    assert_eq!(
        (v["foreign"].clone(), v["rows"].clone()),
        (serde_json::json!([]), 5500.into())
    );
    assert_eq!(t.ravel(), expected(5500));
    assert_eq!(t.kernel(), kernel_expected(5500));
    // gc collects the file delta-rs wrote, once taken in and past the retention.
    let gc = t.json("gc --older-than 0s");
    assert!(gc["unreferenced"].to_string().contains("part-"), "{gc}");
    assert_eq!(t.ravel(), expected(5500));

    // The fence: delta-rs refuses to write; ravel loads on; cleared, delta-rs writes again.
    t.ok("layout fence set");
    let refused = rt.block_on(t.delta_append(5500, 5600)).unwrap_err();
    assert!(refused.contains("ravelSoleWriter"), "{refused}");
    t.load(5500, 5600, "");
    assert_eq!(t.ravel(), expected(5600));
    assert_eq!(t.kernel(), kernel_expected(5600));
    t.ok("layout fence clear");
    rt.block_on(t.delta_append(5600, 5700)).unwrap();
    assert_eq!(t.ravel(), expected(5700));
    assert_eq!(t.kernel(), kernel_expected(5700));

    // The retention windows are Delta's properties: delta-rs reads them as set.
    t.ok("layout retention set --files 1h --inputs 2d --log 90s");
    let table = rt.block_on(t.delta_rs());
    let props = table.snapshot().unwrap().table_config().clone();
    let secs = |d: Option<std::time::Duration>| d.map(|d| d.as_secs());
    assert_eq!(
        (
            secs(props.deleted_file_retention_duration),
            secs(props.set_transaction_retention_duration),
            secs(props.log_retention_duration)
        ),
        (Some(3_600), Some(172_800), Some(90))
    );
}

/// `maintain --dry-run` on a table delta-rs appended to plans what `maintain` then does: the
/// appended object taken in (its rows sorted under the layout) and merged with ravel's runs,
/// while the dry run itself leaves the object as delta-rs wrote it.
#[test]
fn a_dry_run_of_maintenance_plans_the_adoption_the_real_run_makes() {
    let place = Place::s3();
    let dir = tempfile::tempdir().unwrap();
    let t = Table::new(&place, dir.path());
    let schema = dir.path().join("schema.parquet");
    write_rows(&schema, 0, 1);
    t.ok(&format!("layout schema set --from {}", p(&schema)));
    t.ok("layout time set --column time");
    t.ok("layout clustering-key set --column k --bucket-width 1d");
    t.ok("layout maintenance set --policy full");
    t.load(0, 1500, "--no-maintain");
    t.load(1500, 3000, "--no-maintain");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(t.delta_append(3000, 4000)).unwrap();

    let dry = t.json("maintain --dry-run --object-bytes 20000");
    assert_eq!(dry["version"], serde_json::Value::Null, "{dry}");
    assert_eq!(dry["adopted"]["rows"], 1000, "{dry}");
    assert_eq!(t.verify()["foreign"].as_array().unwrap().len(), 1);
    let done = t.json("maintain --object-bytes 20000");
    assert_eq!(done["adopted"]["rows"], 1000, "{done}");
    for field in [
        "read_version",
        "foreign_objects",
        "input_objects",
        "input_bytes",
        "input_rows",
        "chains",
        "untouched_objects",
        "depth_before",
        "reason",
    ] {
        assert_eq!(dry[field], done[field], "{field}: {dry} against {done}");
    }
    assert_eq!(dry["input_rows"], 4000, "{dry}");
    assert_eq!(done["depth_after"], 1, "{done}");
    assert_eq!(t.ravel(), expected(4000));
}

#[test]
fn a_table_with_a_feature_ravel_does_not_support_is_neither_read_nor_written() {
    let place = Place::s3();
    let Place::S3(server) = &place else {
        unreachable!("an S3 place")
    };
    let dir = tempfile::tempdir().unwrap();
    let t = Table::new(&place, dir.path());
    t.load(0, 1000, "--no-maintain");
    // Another engine turns deletion vectors on (version 1).
    let entry = serde_json::json!({"commitInfo": {"operation": "SET TBLPROPERTIES"}}).to_string()
        + "\n"
        + &serde_json::json!({"protocol": {
            "minReaderVersion": 3, "minWriterVersion": 7,
            "readerFeatures": ["deletionVectors"], "writerFeatures": ["deletionVectors"],
        }})
        .to_string();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let path = object_store::path::Path::from(format!("fw/t/_delta_log/{:020}.json", 1));
        let store = server.store("");
        store.object_store().put(&path, entry.into()).await.unwrap();
    });
    // New rows (not a rerun of the published load, which commits nothing).
    let input = dir.path().join("more.parquet");
    write_rows(&input, 1000, 2000);
    for args in [
        format!("load --store {} --table t --input {}", t.url, p(&input)),
        format!("verify --store {} --table t", t.url),
        format!("gc --store {} --table t --dry-run", t.url),
    ] {
        let out = t.cmd(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args}: {err}");
        assert!(err.contains("deletionVectors"), "{args}: {err}");
    }
    let q = line(
        &format!("query --store {} --table t", t.url),
        &["SELECT COUNT(*) FROM t"],
    );
    let out = t.cmd(&q).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("not support for reading: deletionVectors"),
        "{err}"
    );
    // Nothing was committed over it.
    let listed = server.root().join(&server.bucket).join("fw/t/_delta_log");
    assert!(!listed.join(format!("{:020}.json", 2)).exists());
}

/// Rows `0..n` whose `s` is "v3".
fn v3_rows(n: i64) -> usize {
    (0..n).filter(|i| i % 13 == 3).count()
}

#[test]
fn a_partitioned_overwrite_is_read_and_taken_in_with_its_partition_values() {
    partitioned_overwrite_taken_in(&Place::s3());
}

#[test]
fn a_partitioned_overwrite_is_read_and_taken_in_with_its_partition_values_locally() {
    partitioned_overwrite_taken_in(&Place::local());
}

fn partitioned_overwrite_taken_in(place: &Place) {
    let dir = tempfile::tempdir().unwrap();
    let t = Table::new(place, dir.path());
    let schema = dir.path().join("schema.parquet");
    write_rows(&schema, 0, 1);
    t.ok(&format!("layout schema set --from {}", p(&schema)));
    t.ok("layout time set --column time");
    t.ok("layout clustering-key set --column k --bucket-width 1d");
    t.load(0, 3000, "--no-maintain");
    let rt = tokio::runtime::Runtime::new().unwrap();

    // delta-rs replaces the table, partitioned by `s`: the column is in no object, only in
    // each add's partitionValues. ravel reads it from there, as the kernel does.
    rt.block_on(t.delta_overwrite_partitioned("s", 3000));
    let partitions = t.verify()["foreign"].as_array().unwrap().len();
    assert_eq!(partitions, 13);
    assert_eq!(t.ravel(), expected(3000));
    let counted =
        |t: &Table| t.query("SELECT COUNT(s), SUM(CASE WHEN s = 'v3' THEN 1 ELSE 0 END) FROM t");
    let by_s = vec![3000.to_string(), v3_rows(3000).to_string()];
    assert_eq!(counted(&t), by_s);
    assert_eq!(t.query("SELECT COUNT(*) FROM t WHERE s = 'v3'")[0], by_s[1]);
    assert_eq!(t.kernel_s(), (3000, v3_rows(3000)));

    // The next load takes them in first (its version could not stand beside them), then
    // publishes: every row keeps its `s`, and the table is no longer partitioned.
    let input = dir.path().join("more.parquet");
    write_rows(&input, 3000, 4000);
    let load = format!(
        "load --store {} --table t --input {} --object-bytes 20000",
        t.url,
        p(&input)
    );
    let (_, err) = common::succeeds(t.cmd(&load));
    assert!(err.contains("took in 13 object(s), 3000 rows"), "{err}");
    let v = t.verify();
    assert_eq!(
        (v["foreign"].clone(), v["rows"].clone()),
        (serde_json::json!([]), 4000.into())
    );
    assert_eq!(t.ravel(), expected(4000));
    let by_s = vec![4000.to_string(), v3_rows(4000).to_string()];
    assert_eq!(counted(&t), by_s);
    assert_eq!(t.kernel(), kernel_expected(4000));
    assert_eq!(t.kernel_s(), (4000, v3_rows(4000)));
    let delta = rt.block_on(t.delta_rs());
    let metadata = delta.snapshot().unwrap().metadata().clone();
    assert!(metadata.partition_columns().is_empty());
}

#[test]
fn a_table_only_delta_rs_wrote_is_queried_laid_out_and_maintained() {
    delta_rs_table_maintained(&Place::s3());
}

#[test]
fn a_table_only_delta_rs_wrote_is_queried_laid_out_and_maintained_locally() {
    delta_rs_table_maintained(&Place::local());
}

fn delta_rs_table_maintained(place: &Place) {
    let dir = tempfile::tempdir().unwrap();
    let t = Table::new(place, dir.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(t.delta_create(3000));

    // The schema is the one the Delta metadata declares.
    assert_eq!(t.ravel(), expected(3000));
    let columns = t.ok("layout schema show");
    assert!(
        columns.starts_with("k\tInt64\ntime\tTimestamp(µs"),
        "{columns}"
    );
    t.ok("layout time set --column time");
    t.ok("layout clustering-key set --column k --bucket-width 1d");
    let refused = t.fails(
        2,
        "layout clustering-key set --column nope --bucket-width 1d",
    );
    assert!(refused.contains("columns are: k, time, s, u"), "{refused}");

    // Maintenance takes delta-rs's objects in under the layout; the table stays whole.
    let maintained = t.json("maintain --object-bytes 20000");
    assert_eq!(maintained["adopted"]["rows"], 3000, "{maintained}");
    let v = t.verify();
    assert_eq!(
        (v["foreign"].clone(), v["rows"].clone()),
        (serde_json::json!([]), 3000.into())
    );
    assert_eq!(t.ravel(), expected(3000));
    assert_eq!(t.kernel(), kernel_expected(3000));
    let compacted = t.json("compact --object-bytes 20000");
    assert_eq!(compacted["depth_after"], 1, "{compacted}");
    assert_eq!(t.ravel(), expected(3000));
}

/// `maintain` and `compact` that take other writers' objects in say so: the version the
/// adoption committed, the objects taken in and written in their place, the bytes written; in
/// text and in JSON.
#[test]
fn maintenance_and_compaction_report_the_objects_they_took_in() {
    let place = Place::local();
    let dir = tempfile::tempdir().unwrap();
    let t = Table::new(&place, dir.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(t.delta_create(1000));
    t.ok("layout time set --column time");
    t.ok("layout clustering-key set --column k --bucket-width 1d");
    let newest = t.versions() - 1;
    let text = t.ok("maintain --object-bytes 20000");
    let took = format!(
        "table t: version {newest} -> {}: took in 2 object(s) other Delta writers added (1000 rows), rewritten as ",
        newest + 1
    );
    assert!(text.starts_with(&took), "{text}");
    assert!(text.contains(" bytes written\n"), "{text}");
    assert!(
        text.contains(&format!(
            "then nothing to maintain at version {}",
            newest + 1
        )) && !text.contains("nothing written"),
        "{text}"
    );
    assert_eq!(t.versions(), newest + 2);

    // Another append, taken in by compact (which then merges it with the rest).
    rt.block_on(t.delta_append(1000, 1500)).unwrap();
    let newest = t.versions() - 1;
    let report = t.json("compact --object-bytes 20000");
    let adopted = &report["adopted"];
    assert_eq!(adopted["version"], newest + 1, "{report}");
    assert_eq!(
        (adopted["objects"].clone(), adopted["rows"].clone()),
        (1.into(), 500.into())
    );
    assert!(adopted["output_objects"].as_u64().unwrap() > 0, "{report}");
    let adopted_bytes = adopted["written_bytes"].as_u64().unwrap();
    assert!(adopted_bytes > 0, "{report}");
    assert_eq!(report["read_version"], newest, "{report}");
    assert!(
        report["written_bytes"].as_u64().unwrap() > adopted_bytes,
        "{report}"
    );
    assert_eq!(t.ravel(), expected(1500));
}

#[test]
fn an_object_with_a_column_the_table_lacks_is_named_and_nothing_is_published() {
    extra_column_named(&Place::s3());
}

#[test]
fn an_object_with_a_column_the_table_lacks_is_named_and_nothing_is_published_locally() {
    extra_column_named(&Place::local());
}

/// Every write refuses, naming the object and the column; `verify` reports it as a violation.
fn extra_column_named(place: &Place) {
    let dir = tempfile::tempdir().unwrap();
    let t = Table::new(place, dir.path());
    let schema = dir.path().join("schema.parquet");
    write_rows(&schema, 0, 1);
    t.ok(&format!("layout schema set --from {}", p(&schema)));
    t.ok("layout time set --column time");
    t.ok("layout clustering-key set --column k --bucket-width 1d");
    t.load(0, 1000, "--no-maintain");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(t.delta_append_merging(1000, 2000));
    let versions = t.versions();

    let input = dir.path().join("more.parquet");
    write_rows(&input, 2000, 3000);
    let named = |err: &str| {
        err.contains("part-")
            && err.contains("has column \"x\", which table \"t\" lacks")
            && err.contains("fence set")
    };
    for args in [
        format!("load --input {} --object-bytes 20000", p(&input)),
        format!("load --input {} --object-bytes 20000 --compact", p(&input)),
        "compact".to_string(),
        "maintain".to_string(),
    ] {
        let err = t.fails(2, &args);
        assert!(named(&err), "{args}: {err}");
    }
    assert_eq!(t.versions(), versions);
    assert_eq!(t.ravel(), expected(2000));
    let out = t
        .cmd(&format!("verify --store {} --table t --json", t.url))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let violations = report["violations"].as_array().unwrap();
    assert_eq!(violations.len(), 1, "{report}");
    let v = &violations[0];
    assert_eq!(v["kind"], "foreign_extra_column", "{report}");
    assert!(v["object"].as_str().unwrap().contains("part-"), "{report}");
    assert!(
        v["problem"].as_str().unwrap().contains("has column \"x\""),
        "{report}"
    );
    let out = t
        .cmd(&format!("verify --store {} --table t", t.url))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("VIOLATION") && text.contains("has column \"x\", which the table lacks"),
        "{text}"
    );
}
