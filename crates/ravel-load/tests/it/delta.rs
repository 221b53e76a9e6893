//! Delta Lake readers nobody here wrote read every version of a table: delta-rs
//! (`deltalake-core`) opens it and lists its files, and the Delta kernel delta-rs reads with
//! scans its rows, casting each stored column to its Delta type. After a load, a second load,
//! a compaction and gc, and across a checkpoint, they give the answers `ravel-load query`
//! gives; each type the property-test tables use reads back as the value loaded; a table with
//! a column Delta has no type for is refused by them, and its load says so; a load killed
//! before its log entry leaves the view at the version before.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, Date32Array, Int8Array, Int16Array, Int32Array,
    Int64Array, LargeBinaryArray, LargeStringArray, RecordBatch, StringArray,
    TimestampMicrosecondArray, TimestampMillisecondArray, UInt8Array, UInt16Array, UInt32Array,
    UInt64Array,
};
use arrow::datatypes::{DataType, Field, Int32Type, Int64Type, Schema};
use delta_kernel::engine::arrow_data::ArrowEngineData;
use delta_kernel::expressions::{Expression, Predicate};
use delta_kernel_default_engine::DefaultEngineBuilder;
use object_store::ObjectStore;
use ravel_testkit::S3Server;
use url::Url;

use crate::common::{self, line, ok, p};

/// What a Delta reader answers about the newest version.
#[derive(Debug, PartialEq)]
struct Answers {
    version: u64,
    files: usize,
    rows: u64,
    /// `SUM(UserID % 1000)`.
    sum: i64,
    /// `COUNT(*) WHERE CounterID < 100`, from the rows of the objects a scan with that
    /// predicate kept.
    filtered: u64,
    /// Rows of the objects that scan kept (fewer than `rows`: the statistics skip).
    scanned: u64,
}

/// Columns `columns` of the newest version of the table at `url` in `store` (rooted at the
/// URL's root), as the Delta kernel's scan reads them; with `predicate`, from the objects whose
/// Delta statistics do not exclude it (the kernel skips by them, and returns those objects'
/// rows whole).
pub(crate) fn delta_scan(
    store: Arc<dyn ObjectStore>,
    url: &Url,
    columns: &[&str],
    predicate: Option<Predicate>,
) -> Result<Vec<RecordBatch>, String> {
    let engine = Arc::new(DefaultEngineBuilder::new(store).build());
    let snapshot = delta_kernel::Snapshot::builder_for(url.as_str())
        .build(engine.as_ref())
        .map_err(|e| e.to_string())?;
    let schema = snapshot
        .schema()
        .project(columns)
        .map_err(|e| e.to_string())?;
    let scan = snapshot
        .scan_builder()
        .with_schema(schema)
        .with_predicate(predicate.map(Arc::new))
        .build()
        .map_err(|e| e.to_string())?;
    scan.execute(engine)
        .map_err(|e| e.to_string())?
        .map(|data| {
            let data = data.map_err(|e| e.to_string())?;
            let arrow = ArrowEngineData::try_from_engine_data(data).map_err(|e| e.to_string())?;
            Ok(arrow.record_batch().clone())
        })
        .collect()
}

fn delta_read(
    store: Arc<dyn ObjectStore>,
    url: &Url,
    columns: &[&str],
) -> Result<Vec<RecordBatch>, String> {
    delta_scan(store, url, columns, None)
}

/// `CounterID < 100`.
fn small_counters() -> Predicate {
    Predicate::lt(
        Expression::column(["CounterID"]),
        Expression::literal(100i32),
    )
}

/// delta-rs's log store over a store given to it, for `s3://` tables (delta-rs's own S3 support
/// is a crate of its own, deltalake-aws, which these tests do not need).
struct GivenStore;

impl deltalake_core::logstore::LogStoreFactory for GivenStore {
    fn with_options(
        &self,
        prefixed_store: deltalake_core::logstore::ObjectStoreRef,
        root_store: deltalake_core::logstore::ObjectStoreRef,
        location: &Url,
        options: &deltalake_core::logstore::StorageConfig,
    ) -> deltalake_core::DeltaResult<Arc<dyn deltalake_core::logstore::LogStore>> {
        Ok(deltalake_core::logstore::default_logstore(
            prefixed_store,
            root_store,
            location,
            options,
        ))
    }
}

/// Lets delta-rs open tables under `url`'s scheme on a store it is given.
pub(crate) fn register_given_store(url: &Url) {
    let scheme = Url::parse(&format!("{}://", url.scheme())).unwrap();
    let factories = deltalake_core::logstore::logstore_factories();
    if !factories.contains_key(&scheme) {
        factories.insert(scheme, Arc::new(GivenStore));
    }
}

/// delta-rs's view of the table at `url` in `store` (rooted at `root`): version and files.
fn delta_rs(store: Arc<dyn ObjectStore>, root: &Url, url: &Url) -> (u64, usize) {
    register_given_store(url);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let table = deltalake_core::DeltaTableBuilder::from_url(url.clone())
            .unwrap()
            .with_storage_backend(store, root.clone())
            .load()
            .await
            .unwrap();
        let files = table.get_file_uris().unwrap().count();
        (table.version().unwrap() as u64, files)
    })
}

/// The newest version's answers: version and files from delta-rs, rows from the kernel.
fn answers(store: Arc<dyn ObjectStore>, root: &Url, url: &Url) -> Answers {
    let (version, files) = delta_rs(store.clone(), root, url);
    let columns = ["UserID", "CounterID"];
    let (mut rows, mut sum) = (0u64, 0i64);
    for b in &delta_read(store.clone(), url, &columns).unwrap() {
        rows += b.num_rows() as u64;
        let users = b
            .column_by_name("UserID")
            .unwrap()
            .as_primitive::<Int64Type>();
        sum += users.iter().flatten().map(|u| u % 1000).sum::<i64>();
    }
    let (mut scanned, mut filtered) = (0u64, 0u64);
    for b in &delta_scan(store, url, &columns, Some(small_counters())).unwrap() {
        scanned += b.num_rows() as u64;
        let counters = b
            .column_by_name("CounterID")
            .unwrap()
            .as_primitive::<Int32Type>();
        filtered += counters.iter().flatten().filter(|c| *c < 100).count() as u64;
    }
    Answers {
        version,
        files,
        rows,
        sum,
        filtered,
        scanned,
    }
}

/// A local table directory as the reader's store and URLs.
fn local(dir: &Path) -> (Arc<dyn ObjectStore>, Url, Url) {
    let store: Arc<dyn ObjectStore> = Arc::new(object_store::local::LocalFileSystem::new());
    let root = Url::parse("file:///").unwrap();
    let url = Url::from_directory_path(std::fs::canonicalize(dir).unwrap()).unwrap();
    (store, root, url)
}

/// What `ravel-load query` answers, as (rows, sum, filtered).
fn ravel_answers(store: &str) -> (u64, i64, u64) {
    let sql = "SELECT COUNT(*), SUM(\"UserID\" % 1000), SUM(CASE WHEN \"CounterID\" < 100 THEN 1 ELSE 0 END) FROM hits";
    let csv = ok(&line(
        &format!("query --store {store} --table hits --format csv"),
        &[sql],
    ));
    let row: Vec<&str> = csv.lines().nth(1).unwrap().split(',').collect();
    (
        row[0].parse().unwrap(),
        row[1].parse().unwrap(),
        row[2].parse().unwrap(),
    )
}

fn hits_store(dir: &Path) -> String {
    let store = p(&dir.join("store")).to_string();
    let layout = |args: &str| ok(&format!("layout --store {store} --table hits {args}"));
    layout("schema set --hits");
    layout("clustering-key set --column EventDate --column UserID --bucket-width 1d");
    layout("bloom-scope set --scope text");
    store
}

fn generated(dir: &Path, name: &str, rows: u64, seed: u64) -> String {
    let out = dir.join(name);
    ok(&format!(
        "gen --rows {rows} --seed {seed} --out {}",
        p(&out)
    ));
    p(&out).to_string()
}

fn json(args: &str) -> serde_json::Value {
    serde_json::from_str(&ok(args)).unwrap()
}

/// The Delta reader's answers equal ravel's, the version is the log's newest, and verify
/// (which checks the Delta view against the version) passes.
fn agree(store: &str, dir: &Path) -> Answers {
    let (os, root, url) = local(&dir.join("store/hits"));
    let delta = answers(os, &root, &url);
    assert_eq!(
        (delta.rows, delta.sum, delta.filtered),
        ravel_answers(store),
        "{delta:?}"
    );
    assert!(
        delta.scanned < delta.rows,
        "the statistics skip objects: {delta:?}"
    );
    let verified = json(&format!("verify --store {store} --table hits --json"));
    assert_eq!(verified["violations"], serde_json::json!([]), "{verified}");
    assert_eq!(verified["version"], delta.version, "{verified}");
    assert_eq!(verified["objects"], delta.files as u64, "{verified}");
    delta
}

#[test]
fn delta_readers_read_every_version_as_ravel_does() {
    let dir = tempfile::tempdir().unwrap();
    let store = hits_store(dir.path());
    let load = |input: &str| {
        ok(&format!(
            "load --store {store} --table hits --input {input} --object-bytes 60000"
        ))
    };
    load(&generated(dir.path(), "a.parquet", 6_000, 1));
    let first = agree(&store, dir.path());
    assert_eq!(first.rows, 6_000);
    assert!(first.filtered > 0 && first.files > 1, "{first:?}");

    load(&generated(dir.path(), "b.parquet", 5_000, 2));
    let second = agree(&store, dir.path());
    assert_eq!((second.rows, second.version), (11_000, first.version + 1));

    // Key ranges first, one version each (rows past a range's ends are written back), then
    // the rest.
    ok(&format!(
        "compact --store {store} --table hits --object-bytes 60000 --max-input-bytes 250000"
    ));
    let stepped = agree(&store, dir.path());
    assert!(stepped.version > second.version + 1, "{stepped:?}");
    ok(&format!(
        "compact --store {store} --table hits --object-bytes 60000"
    ));
    let compacted = agree(&store, dir.path());
    assert!(compacted.version >= stepped.version);
    assert_eq!((compacted.rows, compacted.sum), (second.rows, second.sum));

    ok(&format!("gc --store {store} --table hits --older-than 0s"));
    let collected = agree(&store, dir.path());
    assert_eq!(collected, compacted, "gc changes no version");

    // Past a checkpoint (every 10 versions): readers start from it.
    let mut rows = collected.rows;
    for seed in 3..12 {
        load(&generated(
            dir.path(),
            &format!("{seed}.parquet"),
            300,
            seed,
        ));
        rows += 300;
    }
    let later = agree(&store, dir.path());
    assert!(later.version >= 10, "{later:?}");
    assert_eq!(later.rows, rows);
    assert!(
        dir.path()
            .join("store/hits/_delta_log/_last_checkpoint")
            .exists()
    );
}

/// One column of every mapped Arrow type the property-test tables use, with its extremes.
fn every_type() -> RecordBatch {
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("i8", Arc::new(Int8Array::from(vec![i8::MIN, 0, i8::MAX]))),
        (
            "i16",
            Arc::new(Int16Array::from(vec![i16::MIN, 0, i16::MAX])),
        ),
        (
            "i32",
            Arc::new(Int32Array::from(vec![i32::MIN, 0, i32::MAX])),
        ),
        (
            "i64",
            Arc::new(Int64Array::from(vec![i64::MIN, 0, i64::MAX])),
        ),
        ("u8", Arc::new(UInt8Array::from(vec![0, 1, u8::MAX]))),
        (
            "u16",
            Arc::new(UInt16Array::from(vec![0, 15_900, u16::MAX])),
        ),
        ("u32", Arc::new(UInt32Array::from(vec![0, 1, u32::MAX]))),
        ("date", Arc::new(Date32Array::from(vec![-1, 0, 19_000]))),
        (
            "ts_ms",
            Arc::new(TimestampMillisecondArray::from(vec![
                -1,
                0,
                1_373_860_727_123,
            ])),
        ),
        (
            "ts_us_tz",
            Arc::new(
                TimestampMicrosecondArray::from(vec![-1, 0, 1_373_860_727_123_456])
                    .with_timezone("+02:00"),
            ),
        ),
        (
            "s",
            Arc::new(StringArray::from(vec![Some("a"), None, Some("é")])),
        ),
        (
            "ls",
            Arc::new(LargeStringArray::from(vec![Some(""), Some("z"), None])),
        ),
        (
            "b",
            Arc::new(BinaryArray::from(vec![
                Some(&b"\x00"[..]),
                None,
                Some(b"\xff"),
            ])),
        ),
        (
            "lb",
            Arc::new(LargeBinaryArray::from(vec![
                Some(&b""[..]),
                Some(b"x"),
                None,
            ])),
        ),
    ];
    RecordBatch::try_from_iter(columns).unwrap()
}

fn write_parquet(path: &Path, batch: &RecordBatch) {
    let file = std::fs::File::create(path).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
}

#[test]
fn every_mapped_type_reads_back_as_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("types.parquet");
    let batch = every_type();
    write_parquet(&input, &batch);
    let store = p(&dir.path().join("store")).to_string();
    let (_, err) = common::succeeds(common::command(&format!(
        "load --store {store} --table t --input {}",
        p(&input)
    )));
    assert!(!err.contains("no Delta Lake view"), "{err}");
    let (os, _, url) = local(&dir.path().join("store/t"));
    for (i, field) in batch.schema().fields().iter().enumerate() {
        let name = field.name().as_str();
        let read = delta_read(os.clone(), &url, &[name]);
        if name.starts_with('u') {
            // The kernel's default engine reads only signed integers: it refuses an unsigned
            // column by name rather than reading a wrong value (Spark, DuckDB, Polars and
            // delta-rs's DataFusion scan read them as the wider signed type).
            let refused = read.unwrap_err();
            assert!(refused.contains("Incorrect datatype"), "{name}: {refused}");
            continue;
        }
        let read = read.unwrap_or_else(|e| panic!("{name}: {e}"));
        let got = read[0].column(0);
        // The value loaded, in the type the Delta reader gives it (the microseconds of a
        // timestamp, a time zone of UTC, a plain string or binary).
        let want = arrow::compute::cast(batch.column(i), got.data_type()).unwrap();
        assert_eq!(got.as_ref(), want.as_ref(), "{name}: {}", got.data_type());
    }
    let verified = json(&format!("verify --store {store} --table t --json"));
    assert_eq!(verified["violations"], serde_json::json!([]), "{verified}");
}

#[test]
fn a_column_with_no_delta_type_gets_no_view_and_the_load_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("u64.parquet");
    let batch = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int32, false),
            Field::new("big", DataType::UInt64, false),
        ])),
        vec![
            Arc::new(Int32Array::from(vec![1, 2])),
            Arc::new(UInt64Array::from(vec![1, u64::MAX])),
        ],
    )
    .unwrap();
    write_parquet(&input, &batch);
    let store = p(&dir.path().join("store")).to_string();
    let (_, err) = common::succeeds(common::command(&format!(
        "load --store {store} --table t --input {}",
        p(&input)
    )));
    assert!(
        err.contains("no Delta Lake view") && err.contains("\"big\" (UInt64)"),
        "{err}"
    );
    let (os, _, url) = local(&dir.path().join("store/t"));
    let refused = delta_read(os, &url, &["id"]).unwrap_err();
    assert!(refused.contains("ravelNoDeltaView"), "{refused}");
    let csv = ok(&line(
        &format!("query --store {store} --table t --format csv"),
        &["SELECT SUM(id) FROM t"],
    ));
    assert!(csv.contains('3'), "ravel-load still reads it: {csv}");
}

/// A load killed after its manifest and before its log entry (the commit): Delta readers read
/// the version before; the rerun commits, and they read it.
#[test]
fn a_load_killed_before_its_log_entry_leaves_the_delta_view_at_the_version_before() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let env = server.env();
    let run = |args: &str| {
        let mut c = common::command(args);
        c.envs(env.clone());
        c
    };
    let url = server.url("dk");
    for args in [
        "schema set --hits",
        "clustering-key set --column EventDate --column UserID --bucket-width 1d",
    ] {
        common::succeeds(run(&format!("layout --store {url} --table hits {args}")));
    }
    let first = generated(dir.path(), "a.parquet", 3_000, 5);
    common::succeeds(run(&format!(
        "load --store {url} --table hits --input {first}"
    )));
    let s3 = server.store("");
    let os = s3.object_store().clone();
    let root = Url::parse(&format!("s3://{}/", server.bucket)).unwrap();
    let table = Url::parse(&format!("{url}/hits/")).unwrap();
    let before = answers(os.clone(), &root, &table);
    assert_eq!(before.rows, 3_000);

    let second = generated(dir.path(), "b.parquet", 2_000, 6);
    let args = format!("load --store {url} --table hits --input {second}");
    let stall = server.stall(http::Method::PUT, "/dk/hits/_delta_log/", 0);
    let child = run(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        stall.wait(std::time::Duration::from_secs(120)),
        "the load reached its log entry"
    );
    let mut child = child;
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    server.clear_stalls();
    assert_eq!(answers(os.clone(), &root, &table), before);

    common::succeeds(run(&args));
    let after = answers(os, &root, &table);
    assert_eq!((after.rows, after.version), (5_000, before.version + 1));
}

/// `verify` of table `hits` exits 1 with a violation of kind `kind`.
fn verify_fails_with(store: &str, kind: &str) {
    let out = common::command(&format!("verify --store {store} --table hits --json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let kinds: Vec<&str> = report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["kind"].as_str())
        .collect();
    assert!(kinds.contains(&kind), "{kinds:?}: {report}");
}

/// verify reads the Delta view as readers do: an `add` whose statistics exclude rows its object
/// holds, and a checkpoint that does not read, are violations.
#[test]
fn verify_finds_a_delta_view_that_misleads_readers() {
    let dir = tempfile::tempdir().unwrap();
    let store = hits_store(dir.path());
    let input = generated(dir.path(), "a.parquet", 3_000, 9);
    ok(&format!(
        "load --store {store} --table hits --input {input} --object-bytes 60000"
    ));
    let log = dir.path().join("store/hits/_delta_log");
    let entry = log.join(format!("{:020}.json", 0));
    let text = std::fs::read_to_string(&entry).unwrap();
    // The first object's CounterID minimum, raised past its rows.
    let tampered: Vec<String> = text
        .lines()
        .map(|line| {
            let mut action: serde_json::Value = serde_json::from_str(line).unwrap();
            if let Some(stats) = action["add"]["stats"].as_str() {
                let mut stats: serde_json::Value = serde_json::from_str(stats).unwrap();
                stats["minValues"]["CounterID"] = serde_json::json!(i32::MAX);
                action["add"]["stats"] = serde_json::json!(stats.to_string());
            }
            action.to_string()
        })
        .collect();
    std::fs::write(&entry, tampered.join("\n") + "\n").unwrap();
    verify_fails_with(&store, "delta_bound");
    std::fs::write(&entry, text).unwrap();

    std::fs::write(log.join("_last_checkpoint"), r#"{"version":0,"size":1}"#).unwrap();
    verify_fails_with(&store, "checkpoint_unreadable");
}

/// The files of the table's `_delta_log`.
fn log_files(dir: &Path) -> usize {
    common::entries(&dir.join("store/hits/_delta_log"))
}

/// `gc` deletes the log files the log window expired: delta-rs and the Delta kernel open the
/// cleaned table with the same version, files and rows, ravel reads it and every version from
/// the checkpoint the log starts at, verify passes, `query --version` of a cleaned version exits
/// 2 naming the oldest readable one, and loads go on.
#[test]
fn a_log_cleaned_by_gc_reads_as_before_in_delta_readers_and_ravel() {
    let dir = tempfile::tempdir().unwrap();
    let store = hits_store(dir.path());
    let load = |input: &str| {
        ok(&format!(
            "load --store {store} --table hits --input {input} --object-bytes 60000"
        ))
    };
    for seed in 1..4 {
        load(&generated(
            dir.path(),
            &format!("{seed}.parquet"),
            2_000,
            seed,
        ));
    }
    ok(&format!(
        "compact --store {store} --table hits --object-bytes 60000"
    ));
    ok(&format!(
        "layout --store {store} --table hits retention set --log 1s"
    ));
    let before = agree(&store, dir.path());
    let files_before = log_files(dir.path());
    std::thread::sleep(std::time::Duration::from_millis(2100));

    let report = json(&format!("gc --store {store} --table hits --json"));
    let log = &report["log"];
    let start = log["starts_at"].as_u64().expect("a checkpoint expired");
    assert!(start > 0 && log["deleted"].as_u64() > Some(0), "{log}");
    assert_eq!(log["deleted"], log["expired"], "{log}");
    assert_eq!(
        log_files(dir.path()),
        files_before - log["deleted"].as_u64().unwrap() as usize
    );
    let after = agree(&store, dir.path());
    assert_eq!(after, before, "cleaning the log changes no version");

    let err = common::fails(
        2,
        &line(
            &format!("query --store {store} --table hits --version 0"),
            &["SELECT COUNT(*) FROM hits"],
        ),
    );
    assert!(
        err.contains(&format!("the oldest version still readable is {start}")),
        "{err}"
    );
    let at_start = ok(&line(
        &format!("query --store {store} --table hits --format csv --version {start}"),
        &["SELECT COUNT(*) FROM hits"],
    ));
    assert_eq!(common::first_row::<u64>(&at_start), [6_000]);
    let text = ok(&format!("gc --store {store} --table hits"));
    assert!(
        text.contains("log: no version before a checkpoint is older"),
        "{text}"
    );

    load(&generated(dir.path(), "4.parquet", 500, 4));
    let later = agree(&store, dir.path());
    assert_eq!(later.rows, before.rows + 500);
}
