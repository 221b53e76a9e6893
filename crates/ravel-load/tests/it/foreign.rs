//! Other Delta writers on a ravel table, on a real S3 server (s3s-fs, in-process): delta-rs
//! appends to it, rewrites it the way its `optimize` commits (every object removed, their rows
//! in one new file) and vacuums it. `ravel-load query` reads their objects, `verify` reports
//! them as not clustered, maintenance and `compact` take them in, and the Delta kernel and
//! ravel give the same answers at every step. With the fence set, delta-rs refuses to write.

use std::path::Path;
use std::sync::Arc;

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
use ravel_testkit::S3Server;
use url::Url;

use crate::common::{self, Args, line, p};
use crate::delta::{delta_scan, register_given_store};

/// Rows `from..to`: `k` spread over 0..1000, `time` over four days, `u` as UInt16.
fn rows(from: i64, to: i64) -> RecordBatch {
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
fn write_rows(path: &Path, from: i64, to: i64) {
    let batch = rows(from, to);
    let file = std::fs::File::create(path).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

/// (rows, SUM(k), SUM(u)) of rows `0..n`.
fn expected(n: i64) -> (u64, i64, i64) {
    let b = rows(0, n);
    let sum = |c: &str| -> i64 {
        let a = arrow::compute::cast(b.column_by_name(c).unwrap(), &DataType::Int64).unwrap();
        a.as_primitive::<Int64Type>().iter().flatten().sum()
    };
    (n as u64, sum("k"), sum("u"))
}

struct Table<'a> {
    server: &'a S3Server,
    url: String,
    dir: &'a Path,
}

impl<'a> Table<'a> {
    /// Table `t` under prefix `fw` of `server`, its inputs written to `dir`.
    fn new(server: &'a S3Server, dir: &'a Path) -> Table<'a> {
        Table {
            server,
            url: server.url("fw"),
            dir,
        }
    }

    fn cmd(&self, args: &(impl Args + ?Sized)) -> std::process::Command {
        let mut c = common::command(args);
        c.envs(self.server.env());
        c
    }

    fn ok(&self, args: &str) -> String {
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
    fn ravel(&self) -> (u64, i64, i64) {
        let q = line(
            &format!("query --store {} --table t --format csv", self.url),
            &["SELECT COUNT(*), SUM(k), SUM(u) FROM t"],
        );
        let out = common::succeeds(self.cmd(&q)).0;
        let row: Vec<i64> = out
            .lines()
            .nth(1)
            .unwrap()
            .split(',')
            .map(|v| v.parse().unwrap())
            .collect();
        (row[0] as u64, row[1], row[2])
    }

    fn verify(&self) -> serde_json::Value {
        let v = self.json("verify --deep");
        assert_eq!(v["violations"], serde_json::json!([]), "{v}");
        v
    }

    /// The bucket root, as delta-rs and the kernel are given it, and the table's URL.
    fn delta(&self) -> (Arc<dyn ObjectStore>, Url, Url) {
        let root = Url::parse(&format!("s3://{}/", self.server.bucket)).unwrap();
        let url = root.join("fw/t/").unwrap();
        (self.server.store("").object_store().clone(), root, url)
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
        let (store, root, url) = self.delta();
        register_given_store(&url);
        deltalake_core::DeltaTableBuilder::from_url(url)
            .unwrap()
            .with_storage_backend(store, root)
            .load()
            .await
            .unwrap()
    }

    /// Appends rows `from..to` with delta-rs's writer.
    async fn delta_append(&self, from: i64, to: i64) -> Result<u64, String> {
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
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let t = Table::new(&server, dir.path());
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
}

/// `maintain --dry-run` on a table delta-rs appended to plans what `maintain` then does: the
/// appended object taken in (its rows sorted under the layout) and merged with ravel's runs,
/// while the dry run itself leaves the object as delta-rs wrote it.
#[test]
fn a_dry_run_of_maintenance_plans_the_adoption_the_real_run_makes() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let t = Table::new(&server, dir.path());
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
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let t = Table::new(&server, dir.path());
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
