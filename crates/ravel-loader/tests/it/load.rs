//! Loads generated hits through the library into a local store and an S3 store and checks what
//! was stored: the same rows, clustering order, one row group per object, object sizes, Bloom
//! filters exactly on the scope's columns, the manifest.

use std::time::Duration;

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use object_store::path::Path;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use ravel_hits::{Convention, GenOptions, generate};
use ravel_layout::{ClusteringOrder, is_text};
use ravel_loader::{LoadOptions, Loader, Manifest};
use ravel_store::Store;

use crate::common::{by_watch_id, stored};

fn options(object_bytes: u64) -> LoadOptions {
    LoadOptions {
        object_bytes,
        target_bytes: Some(40_000_000),
        pipeline_depth: 4,
        load_budget: 400_000_000,
        max_flush_delay: Duration::from_secs(3600),
        zstd_level: 3,
    }
}

async fn read_object(store: &Store, key: &str) -> (bytes::Bytes, RecordBatch) {
    let bytes = stored(store, &Path::from(key)).await;
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes.clone()).unwrap();
    let schema = reader.schema().clone();
    let batches: Vec<RecordBatch> = reader.build().unwrap().map(|b| b.unwrap()).collect();
    (bytes, concat_batches(&schema, &batches).unwrap())
}

async fn load_and_check(store: Store) {
    let rows = 200_000u64;
    let (schema, batches) = generate(GenOptions {
        rows,
        seed: 11,
        convention: Convention::default(),
        batch_rows: 10_000,
        ..GenOptions::default()
    });
    ravel_testkit::set_layout(&store, "hits", &ravel_hits::layout()).await;

    let object_bytes = 4_000_000;
    let mut loader = Loader::new(&store, "hits", options(object_bytes))
        .await
        .unwrap();
    for b in &batches {
        loader.push(b.clone()).await.unwrap();
    }
    let report = loader.finish().await.unwrap();
    assert_eq!(report.rows, rows);
    assert!(
        report.runs >= 2,
        "the 40 MB trigger cuts ~95 MB into runs: {}",
        report.runs
    );
    assert!(report.peak_budget_bytes > 0 && report.peak_budget_bytes <= 400_000_000);

    // The newest version holds exactly the report's objects, through one manifest.
    let published = ravel_testkit::published(&store, "hits").await;
    assert_eq!(published.len(), 1);
    let manifest: &Manifest = &published[0];
    assert_eq!(manifest.objects, report.objects);
    assert_eq!(manifest.layout_generation, 1);
    assert_eq!(manifest.schema, schema.as_ref().clone());
    assert_eq!(
        manifest.sort_key,
        vec![
            "CounterID",
            "EventTime div 1d",
            "EventDate",
            "UserID",
            "EventTime"
        ]
    );

    let order = ClusteringOrder::try_new(&ravel_hits::layout(), &schema)
        .unwrap()
        .unwrap();
    let mut all = Vec::new();
    let mut per_run_tail = std::collections::HashMap::new();
    for o in &manifest.objects {
        per_run_tail.insert(o.run, o.key.clone());
    }
    for (i, o) in manifest.objects.iter().enumerate() {
        let (bytes, batch) = read_object(&store, &o.key).await;
        assert_eq!(bytes.len() as u64, o.bytes);
        assert_eq!(batch.num_rows() as u64, o.rows);
        let meta = ParquetRecordBatchReaderBuilder::try_new_with_options(
            bytes,
            parquet::arrow::arrow_reader::ArrowReaderOptions::new()
                .with_page_index_policy(parquet::file::metadata::PageIndexPolicy::Required),
        )
        .unwrap()
        .metadata()
        .clone();
        assert_eq!(meta.num_row_groups(), 1, "{}", o.key);
        // Rows in clustering order.
        let rows = order.key_rows(&batch).unwrap();
        assert!(
            (1..rows.num_rows()).all(|r| rows.row(r - 1) <= rows.row(r)),
            "{} is sorted",
            o.key
        );
        // Objects of one run do not overlap and follow each other.
        if i > 0 && manifest.objects[i - 1].run == o.run {
            let (_, prev) = read_object(&store, &manifest.objects[i - 1].key).await;
            let prev_rows = order.key_rows(&prev).unwrap();
            assert!(prev_rows.row(prev_rows.num_rows() - 1) <= rows.row(0));
        }
        // Size near the target, except each run's last object.
        if per_run_tail[&o.run] != o.key {
            let ratio = o.bytes as f64 / object_bytes as f64;
            assert!(
                (0.75..=1.25).contains(&ratio),
                "{}: {} bytes; all: {:?}",
                o.key,
                o.bytes,
                manifest
                    .objects
                    .iter()
                    .map(|o| (o.run, o.bytes))
                    .collect::<Vec<_>>()
            );
        }
        // Bloom filters exactly on the string columns.
        let rg = meta.row_group(0);
        for (c, field) in rg.columns().iter().zip(schema.fields()) {
            assert_eq!(
                c.bloom_filter_offset().is_some(),
                is_text(field.data_type()),
                "{}",
                field.name()
            );
        }
        let kv = meta.file_metadata().key_value_metadata().unwrap();
        let get = |k: &str| kv.iter().find(|e| e.key == k).and_then(|e| e.value.clone());
        assert_eq!(get("ravel.layout_generation").as_deref(), Some("1"));
        assert_eq!(
            get("ravel.first_key").unwrap(),
            serde_json::Value::from(o.first_key.clone().unwrap()).to_string()
        );
        // The recorded key range is the key of the object's real first and last rows.
        let key_of = |r: usize| -> Vec<serde_json::Value> {
            use arrow::array::AsArray;
            use arrow::datatypes::{Int32Type, Int64Type, UInt16Type};
            let t = batch
                .column_by_name("EventTime")
                .unwrap()
                .as_primitive::<Int64Type>()
                .value(r);
            vec![
                batch
                    .column_by_name("CounterID")
                    .unwrap()
                    .as_primitive::<Int32Type>()
                    .value(r)
                    .into(),
                t.div_euclid(86_400).into(),
                batch
                    .column_by_name("EventDate")
                    .unwrap()
                    .as_primitive::<UInt16Type>()
                    .value(r)
                    .into(),
                batch
                    .column_by_name("UserID")
                    .unwrap()
                    .as_primitive::<Int64Type>()
                    .value(r)
                    .into(),
                t.into(),
            ]
        };
        assert_eq!(o.first_key.clone().unwrap(), key_of(0), "{}", o.key);
        assert_eq!(
            o.last_key.clone().unwrap(),
            key_of(batch.num_rows() - 1),
            "{}",
            o.key
        );
        let sorting = rg.sorting_columns().unwrap();
        assert_eq!(sorting.len(), 1);
        assert_eq!(
            sorting[0].column_idx as usize,
            schema.index_of("CounterID").unwrap()
        );
        assert!(matches!(
            rg.column(0).compression(),
            parquet::basic::Compression::ZSTD(_)
        ));
        assert!(
            meta.column_index().is_some() && meta.offset_index().is_some(),
            "page index"
        );
        all.push(batch);
    }
    // The same rows come back, once.
    let out = concat_batches(&schema, &all).unwrap();
    let input = concat_batches(&schema, &batches).unwrap();
    assert_eq!(by_watch_id(&out), by_watch_id(&input));
}

#[tokio::test(flavor = "multi_thread")]
async fn loads_into_a_local_store() {
    let dir = tempfile::tempdir().unwrap();
    load_and_check(Store::create(dir.path().to_str().unwrap()).unwrap()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn loads_into_s3() {
    let server = ravel_testkit::S3Server::start();
    load_and_check(server.store("warehouse")).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_batch_over_the_budget_is_refused_naming_both_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().to_str().unwrap()).unwrap();
    let (_, batches) = generate(GenOptions {
        rows: 5_000,
        ..GenOptions::default()
    });
    // Objects smaller than the budget: a budget must hold one object.
    let mut opts = options(50_000);
    opts.load_budget = 100_000;
    let mut loader = Loader::new(&store, "hits", opts).await.unwrap();
    let err = loader.push(batches[0].clone()).await.unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("100000 bytes") && msg.contains("larger than the whole load budget"),
        "{msg}"
    );
    assert!(err.is_invalid_input());
    // The failed load cannot be published afterwards.
    let err = loader.finish().await.unwrap_err();
    assert!(matches!(err, ravel_loader::LoadError::Poisoned), "{err}");
    assert!(!dir.path().join("hits/_delta_log").exists());
}

/// TSV read as hits.tsv (raw convention, Binary strings) where the table records no schema.
fn hits_tsv() -> ravel_loader::TsvOptions {
    ravel_loader::TsvOptions {
        schema: Some(ravel_hits::schema(Convention::Raw(
            ravel_hits::Strings::Binary,
        ))),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn tsv_and_both_parquet_conventions_load_the_same_rows() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().join("store").to_str().unwrap()).unwrap();
    let opts = || options(1_000_000);
    let write = |conv: Convention, name: &str| {
        let path = dir.path().join(name);
        ravel_hits::write_generated(
            GenOptions {
                rows: 20_000,
                seed: 5,
                convention: conv,
                batch_rows: 4096,
                ..GenOptions::default()
            },
            &path,
            |_| {},
        )
        .unwrap();
        path
    };
    let raw = write(Convention::Raw(ravel_hits::Strings::Binary), "raw.parquet");
    let typed = write(Convention::Typed, "typed.parquet");
    let tsv = write(Convention::Raw(ravel_hits::Strings::Binary), "hits.tsv");
    let mut contents = Vec::new();
    for (table, path, format) in [
        ("raw", &raw, ravel_loader::InputFormat::Parquet),
        ("typed", &typed, ravel_loader::InputFormat::Parquet),
        ("tsv", &tsv, ravel_loader::InputFormat::Tsv),
    ] {
        ravel_testkit::set_layout(&store, table, &ravel_hits::layout()).await;
        let files = ravel_loader::Files {
            tsv: hits_tsv(),
            ..ravel_loader::Files::new(std::slice::from_ref(path), format)
        };
        let report = ravel_loader::load_files_with(&store, table, opts(), &files, |_, _| {})
            .await
            .unwrap();
        assert_eq!(report.rows, 20_000, "{table}");
        let mut batches = Vec::new();
        for o in &report.objects {
            batches.push(read_object(&store, &o.key).await.1);
        }
        let schema = batches[0].schema();
        let all = by_watch_id(&concat_batches(&schema, &batches).unwrap());
        // Compare values whatever the physical convention: cast typed columns to raw types.
        let raw_schema = ravel_hits::schema(Convention::Raw(ravel_hits::Strings::Binary));
        let cols: Vec<arrow::array::ArrayRef> = all
            .columns()
            .iter()
            .zip(raw_schema.fields())
            .map(|(c, f)| match (c.data_type(), f.data_type()) {
                (arrow::datatypes::DataType::Date32, arrow::datatypes::DataType::UInt16) => {
                    let i = arrow::compute::cast(c, &arrow::datatypes::DataType::Int32).unwrap();
                    arrow::compute::cast(&i, f.data_type()).unwrap()
                }
                _ => arrow::compute::cast(c, f.data_type()).unwrap(),
            })
            .collect();
        contents.push(RecordBatch::try_new(raw_schema, cols).unwrap());
    }
    assert_eq!(
        contents[0], contents[1],
        "typed Parquet holds the raw values"
    );
    assert_eq!(contents[0], contents[2], "TSV holds the raw values");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_glob_loads_every_matching_file_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().join("store").to_str().unwrap()).unwrap();
    for (i, rows) in [(1u64, 1000u64), (2, 2000), (3, 3000)] {
        let path = dir.path().join(format!("part-{i}.parquet"));
        ravel_hits::write_generated(
            GenOptions {
                rows,
                seed: i,
                ..GenOptions::default()
            },
            &path,
            |_| {},
        )
        .unwrap();
    }
    std::fs::write(dir.path().join("part-9.txt"), b"not matched").unwrap();
    let glob = dir.path().join("part-*.parquet");
    let report = ravel_loader::load_files(
        &store,
        "hits",
        options(1_000_000),
        &[glob],
        ravel_loader::InputFormat::Parquet,
        |_, _| {},
    )
    .await
    .unwrap();
    assert_eq!(report.rows, 6000);
    let none = dir.path().join("nothing-*.parquet");
    let err = ravel_loader::load_files(
        &store,
        "hits",
        options(1_000_000),
        &[none],
        ravel_loader::InputFormat::Parquet,
        |_, _| {},
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("matches no file"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_tsv_names_file_and_line_and_publishes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().join("store").to_str().unwrap()).unwrap();
    let path = dir.path().join("bad.tsv");
    ravel_hits::write_generated(
        GenOptions {
            rows: 3000,
            ..GenOptions::default()
        },
        &path,
        |_| {},
    )
    .unwrap();
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("1\t2\n");
    std::fs::write(&path, text).unwrap();
    let paths = [path];
    let files = ravel_loader::Files {
        tsv: hits_tsv(),
        ..ravel_loader::Files::new(&paths, ravel_loader::InputFormat::Tsv)
    };
    let err = ravel_loader::load_files_with(&store, "hits", options(1_000_000), &files, |_, _| {})
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("bad.tsv")
            && msg.contains("line 3001: has 2 fields, the table has 105 columns"),
        "{msg}"
    );
    assert!(err.is_invalid_input());
    assert!(!dir.path().join("store/hits/_delta_log").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_permanent_store_error_fails_the_load_names_the_key_and_publishes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let local = object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap();
    let faulty = ravel_testkit::FaultStore::new(local).fail_puts_from(3, "hits/data/");
    let store = Store::new("faulty", faulty.into_arc());
    let (_, batches) = generate(GenOptions {
        rows: 60_000,
        seed: 3,
        ..GenOptions::default()
    });
    let mut opts = options(1_000_000);
    opts.target_bytes = Some(8_000_000);
    let mut loader = Loader::new(&store, "hits", opts).await.unwrap();
    let mut failed = None;
    for b in batches {
        if let Err(e) = loader.push(b).await {
            failed = Some(e);
            break;
        }
    }
    let err = match failed {
        Some(e) => loader.abandon(e).await,
        None => loader.finish().await.unwrap_err(),
    };
    let msg = format!("{err}");
    let chain = {
        let mut s = msg.clone();
        let mut src = std::error::Error::source(&err);
        while let Some(e) = src {
            s.push_str(&format!(": {e}"));
            src = e.source();
        }
        s
    };
    assert!(
        msg.contains("left") || msg.contains("no manifest") || msg.contains("object(s)"),
        "{msg}"
    );
    assert!(chain.contains("storing hits/data/"), "{chain}");
    assert!(chain.contains("injected permanent failure"), "{chain}");
    assert!(
        !dir.path().join("hits/_delta_log").exists(),
        "nothing published"
    );
    assert!(!err.is_invalid_input());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_trigger_above_the_budget_still_loads_within_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().to_str().unwrap()).unwrap();
    let (_, batches) = generate(GenOptions {
        rows: 40_000,
        seed: 9,
        batch_rows: 4096,
        ..GenOptions::default()
    });
    let mut opts = options(1_000_000);
    opts.load_budget = 12_000_000;
    opts.target_bytes = Some(1_000_000_000);
    let mut loader = Loader::new(&store, "hits", opts).await.unwrap();
    for b in batches {
        tokio::time::timeout(Duration::from_secs(60), loader.push(b))
            .await
            .expect("push does not wait forever")
            .unwrap();
    }
    let report = loader.finish().await.unwrap();
    assert_eq!(report.rows, 40_000);
    assert!(
        report.runs > 1,
        "the full budget forced runs: {}",
        report.runs
    );
    assert!(
        report.peak_budget_bytes <= 12_000_000 + 1024,
        "{}",
        report.peak_budget_bytes
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_age_trigger_flushes_a_paused_stream() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().to_str().unwrap()).unwrap();
    let (_, batches) = generate(GenOptions {
        rows: 3000,
        batch_rows: 1000,
        ..GenOptions::default()
    });
    let mut opts = options(1_000_000);
    opts.max_flush_delay = Duration::from_millis(1000);
    let mut loader = Loader::new(&store, "hits", opts).await.unwrap();
    loader.push(batches[0].clone()).await.unwrap();
    assert!(!loader.tick().await.unwrap(), "not aged yet");
    assert_eq!(loader.objects_stored(), 0);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(loader.tick().await.unwrap(), "aged: flushed");
    assert_eq!(loader.objects_stored(), 1);
    assert!(loader.until_aged().is_none());
    loader.push(batches[1].clone()).await.unwrap();
    loader.push(batches[2].clone()).await.unwrap();
    let report = loader.finish().await.unwrap();
    assert_eq!(report.rows, 3000);
    assert_eq!(report.runs, 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_retried_manifest_put_that_finds_its_own_manifest_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let local = object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap();
    // Every manifest put is stored, then sent again as after a lost response: the loader sees
    // AlreadyExists for its own manifest, and for its own objects on the data path too.
    let faulty = ravel_testkit::FaultStore::new(local).lose_put_responses("hits/");
    let store = Store::new("lossy", faulty.into_arc());
    // The layout service's compare-and-swap sees its own stored document, too.
    let layouts = ravel_layout::LayoutStore::new(&store, "hits").unwrap();
    let updated = layouts
        .update(|l| {
            *l = ravel_hits::layout();
            Ok(())
        })
        .await
        .unwrap();
    assert!(updated.changed);
    let (_, batches) = generate(GenOptions {
        rows: 20_000,
        seed: 4,
        ..GenOptions::default()
    });
    let mut loader = Loader::new(&store, "hits", options(1_000_000))
        .await
        .unwrap();
    for b in batches {
        loader.push(b).await.unwrap();
    }
    let report = loader.finish().await.unwrap();
    assert_eq!(report.rows, 20_000);
    assert_eq!(ravel_testkit::published(&store, "hits").await.len(), 1);
}

/// A table whose recorded schema is NOT NULL throughout, a list column among them.
fn strict_schema() -> arrow::datatypes::Schema {
    use arrow::datatypes::{DataType, Field, Schema};
    Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("stops", DataType::new_list(DataType::Int32, false), false),
    ])
}

/// `strict_schema`'s columns, every field nullable (nested too) and carrying metadata.
fn loose_batch(ids: Vec<Option<i64>>) -> RecordBatch {
    use arrow::array::{ArrayRef, Int32Array, Int64Array, ListArray, StringArray};
    use arrow::buffer::OffsetBuffer;
    use arrow::datatypes::{DataType, Field, Schema};
    use std::collections::HashMap;
    use std::sync::Arc;
    let tag = HashMap::from([("a".to_string(), "b".to_string())]);
    let item = Arc::new(Field::new("element", DataType::Int32, true).with_metadata(tag.clone()));
    let schema = Schema::new_with_metadata(
        vec![
            Field::new("id", DataType::Int64, true).with_metadata(tag.clone()),
            Field::new("name", DataType::Utf8, true),
            Field::new("stops", DataType::List(item.clone()), true),
        ],
        tag,
    );
    let n = ids.len();
    let names: Vec<String> = (0..n).map(|i| format!("n{i}")).collect();
    let values: Int32Array = (0..n as i32).flat_map(|i| [i, 1]).collect();
    let stops = ListArray::new(
        item,
        OffsetBuffer::from_lengths(vec![2; n]),
        Arc::new(values),
        None,
    );
    RecordBatch::try_new(
        Arc::new(schema),
        vec![
            Arc::new(Int64Array::from(ids)) as ArrayRef,
            Arc::new(StringArray::from(names)),
            Arc::new(stops),
        ],
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_loose_input_is_written_with_the_tables_schema_and_a_null_is_refused_by_row() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().to_str().unwrap()).unwrap();
    let table = strict_schema();
    ravel_layout::LayoutStore::new(&store, "t")
        .unwrap()
        .record_schema(&table)
        .await
        .unwrap();

    let mut loader = Loader::new(&store, "t", options(1_000_000)).await.unwrap();
    loader
        .push_from(loose_batch((0..100).map(Some).collect()), "loose.parquet")
        .await
        .unwrap();
    let report = loader.finish().await.unwrap();
    assert_eq!(report.rows, 100);
    let manifest: Manifest = {
        let key = Path::from(format!("t/_ravel/manifests/{}.json", report.load_id));
        serde_json::from_slice(&stored(&store, &key).await).unwrap()
    };
    assert_eq!(manifest.schema, table);
    for o in &report.objects {
        let (_, rows) = read_object(&store, &o.key).await;
        assert_eq!(rows.schema().fields(), table.fields());
    }

    // Row 5 of the input (the second batch's third row) has no id: bad input, nothing
    // published.
    let mut loader = Loader::new(&store, "t", options(1_000_000)).await.unwrap();
    loader
        .push_from(loose_batch(vec![Some(1), Some(2)]), "holed.parquet")
        .await
        .unwrap();
    let err = loader
        .push_from(loose_batch(vec![Some(3), Some(4), None]), "holed.parquet")
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(err.is_invalid_input(), "{msg}");
    assert!(
        msg.contains("holed.parquet") && msg.contains("\"id\"") && msg.contains("row 5"),
        "{msg}"
    );
    assert!(loader.finish().await.is_err());
    assert_eq!(ravel_testkit::published(&store, "t").await.len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_null_inside_a_not_null_list_is_refused() {
    use arrow::array::{ArrayRef, Int64Array, ListArray, StringArray};
    use arrow::datatypes::{DataType, Field, Int32Type};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().to_str().unwrap()).unwrap();
    ravel_layout::LayoutStore::new(&store, "t")
        .unwrap()
        .record_schema(&strict_schema())
        .await
        .unwrap();
    let schema = Arc::new(arrow::datatypes::Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("stops", DataType::new_list(DataType::Int32, true), false),
    ]));
    let stops = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
        Some(vec![Some(1)]),
        Some(vec![None]),
    ]);
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef,
            Arc::new(StringArray::from(vec!["a", "b"])),
            Arc::new(stops),
        ],
    )
    .unwrap();
    let mut loader = Loader::new(&store, "t", options(1_000_000)).await.unwrap();
    let err = loader.push_from(batch, "lists.parquet").await.unwrap_err();
    assert!(err.is_invalid_input(), "{err}");
    assert!(err.to_string().contains("\"stops\""), "{err}");
    assert!(loader.finish().await.is_err());
}

/// The library keeps the inputs window's promise as the CLI does: a rerun the table remembers
/// publishes nothing; once a checkpoint forgot the load, the rerun is refused as bad input and
/// publishes nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_rerun_the_inputs_window_forgot_is_refused_and_publishes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().join("store").to_str().unwrap()).unwrap();
    let mut layout = ravel_hits::layout();
    layout.retention.inputs_s = 1;
    ravel_testkit::set_layout(&store, "hits", &layout).await;
    let path = dir.path().join("part.parquet");
    let generated = GenOptions {
        rows: 1_000,
        seed: 7,
        ..GenOptions::default()
    };
    ravel_hits::write_generated(generated, &path, |_| {}).unwrap();
    let load = || {
        let paths = [path.clone()];
        let store = store.clone();
        async move {
            let format = ravel_loader::InputFormat::Parquet;
            ravel_loader::load_files(
                &store,
                "hits",
                options(1_000_000),
                &paths,
                format,
                |_, _| {},
            )
            .await
        }
    };
    assert_eq!(load().await.unwrap().rows, 1_000);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(load().await.unwrap().already_published, "still remembered");
    let paths = ravel_store::TablePaths::new("hits").unwrap();
    let log = ravel_log::TableLog::new(store.object_store().clone(), paths);
    log.write_checkpoint(&log.latest().await.unwrap())
        .await
        .unwrap();
    let e = load().await.unwrap_err();
    assert!(e.is_invalid_input(), "{e}");
    let message = ravel_store::ErrorChain::new(&e).to_string();
    assert!(
        message.contains("part.parquet") && message.contains("interval 1 second"),
        "{message}"
    );
    let newest = log.latest().await.unwrap();
    assert_eq!(newest.version, Some(0), "nothing published");
}
