//! The load by columns: Parquet files of several row groups published as one sequence in
//! clustering order, with the rows, the objects' keys and ranges a load records, whether each
//! column is read whole or in slabs; bad input names the file, the column and the row.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Array, ArrayRef, RecordBatch};
use arrow::compute::concat_batches;
use arrow::datatypes::SchemaRef;
use object_store::path::Path as StorePath;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::properties::WriterProperties;
use ravel_hits::{GenOptions, generate};
use ravel_layout::ClusteringOrder;
use ravel_loader::{ColumnPlan, LoadError, LoadOptions, Loader, load_by_columns};
use ravel_store::Store;

use crate::common::stored;

fn options(load_budget: u64) -> LoadOptions {
    LoadOptions {
        object_bytes: 300_000,
        target_bytes: None,
        pipeline_depth: 4,
        load_budget,
        max_flush_delay: Duration::from_secs(3600),
        zstd_level: 3,
    }
}

/// Writes `batch` to `path` in row groups of `group_rows` rows.
fn write(path: &Path, batch: &RecordBatch, group_rows: usize) {
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(group_rows))
        .build();
    let file = std::fs::File::create(path).unwrap();
    let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
}

/// Generated hits rows written as two files of several row groups each (of other sizes),
/// after an empty one.
fn inputs(dir: &Path) -> (SchemaRef, Vec<PathBuf>, RecordBatch) {
    let (schema, batches) = generate(GenOptions {
        rows: 30_000,
        seed: 5,
        batch_rows: 10_000,
        ..GenOptions::default()
    });
    let all = concat_batches(&schema, &batches).unwrap();
    // An empty file first: nothing to sample there.
    let paths = vec![
        dir.join("0.parquet"),
        dir.join("a.parquet"),
        dir.join("b.parquet"),
    ];
    write(&paths[0], &all.slice(0, 0), 5_000);
    write(&paths[1], &all.slice(0, 12_000), 5_000);
    write(&paths[2], &all.slice(12_000, 18_000), 7_000);
    (schema, paths, all)
}

/// Loads `paths` by columns into `table` and returns the published objects' rows, in the
/// manifest's order.
async fn load(store: &Store, table: &str, paths: &[PathBuf], budget: u64) -> Vec<RecordBatch> {
    ravel_testkit::set_layout(store, table, &ravel_hits::layout()).await;
    let plan = ColumnPlan::open(paths).unwrap();
    let mut loader = Loader::new(store, table, options(budget)).await.unwrap();
    assert!(plan.fits(loader.options(), loader.layout()));
    load_by_columns(&mut loader, plan).await.unwrap();
    let report = loader.finish().await.unwrap();
    assert_eq!((report.rows, report.runs), (30_000, 1));
    assert!(report.objects.len() >= 3, "{}", report.objects.len());
    assert!(report.stages.local_spill_bytes >= report.stored_bytes / 2);
    let published = ravel_testkit::published(store, table).await;
    assert_eq!(published.len(), 1);
    assert_eq!(published[0].objects, report.objects);
    assert!(published[0].blooms.is_some(), "the Bloom sidecar is stored");
    let order = ClusteringOrder::try_new(&ravel_hits::layout(), &published[0].schema)
        .unwrap()
        .unwrap();
    let mut objects = Vec::new();
    for o in &report.objects {
        let bytes = stored(store, &StorePath::from(o.key.as_str())).await;
        assert_eq!(bytes.len() as u64, o.bytes);
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes).unwrap();
        assert_eq!(reader.metadata().num_row_groups(), 1, "{}", o.key);
        let schema = reader.schema().clone();
        let rows: Vec<RecordBatch> = reader.build().unwrap().map(|b| b.unwrap()).collect();
        let rows = concat_batches(&schema, &rows).unwrap();
        assert_eq!(rows.num_rows() as u64, o.rows);
        // The manifest's keys and ranges are the object's own.
        let key = order.key_columns(&rows).unwrap();
        let at = |i: usize| -> Vec<serde_json::Value> {
            key.iter()
                .map(|c| ravel_manifest::key_value(c.as_ref(), i))
                .collect()
        };
        assert_eq!(o.first_key, Some(at(0)), "{}", o.key);
        assert_eq!(o.last_key, Some(at(rows.num_rows() - 1)), "{}", o.key);
        for (name, range) in &o.ranges {
            let column: ArrayRef = rows.column_by_name(name).unwrap().clone();
            let own = ravel_manifest::value_range(&[column]).unwrap().unwrap();
            assert_eq!(range, &own, "{} {name}", o.key);
        }
        assert_eq!(o.ranges.len(), 4, "{:?}", o.ranges.keys());
        objects.push(rows);
    }
    objects
}

/// The rows in clustering order, ties in input order: what every load by columns publishes.
fn sorted(all: &RecordBatch) -> RecordBatch {
    let order = ClusteringOrder::try_new(&ravel_hits::layout(), all.schema_ref())
        .unwrap()
        .unwrap();
    let permutation = order.permutation(all).unwrap();
    arrow::compute::take_record_batch(all, &permutation).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn files_of_many_row_groups_are_published_as_one_sequence_in_clustering_order() {
    let dir = tempfile::tempdir().unwrap();
    let (schema, paths, all) = inputs(dir.path());
    let store = Store::create(dir.path().join("store").to_str().unwrap()).unwrap();
    let objects = load(&store, "hits", &paths, 400_000_000).await;
    let got = concat_batches(&schema, &objects).unwrap();
    assert_eq!(got, sorted(&all));

    // Under a budget where the widest columns are held in slabs (each read again for each),
    // the same rows in the same order.
    let plan = ColumnPlan::open(&paths).unwrap();
    let layout = ravel_hits::layout();
    let budget = (1..100)
        .map(|k| 3_000_000 - k * 25_000)
        .find(|&b| {
            plan.most_slabs(&options(b), &layout)
                .is_some_and(|n| n >= 2)
        })
        .expect("a budget that holds the widest column in slabs");
    let objects = load(&store, "slabs", &paths, budget).await;
    assert_eq!(concat_batches(&schema, &objects).unwrap(), sorted(&all));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_null_in_a_not_null_column_names_the_file_column_and_row_and_publishes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (_, paths, all) = inputs(dir.path());
    let store = Store::create(dir.path().join("store").to_str().unwrap()).unwrap();
    ravel_testkit::set_layout(&store, "hits", &ravel_hits::layout()).await;
    ravel_layout::LayoutStore::new(&store, "hits")
        .unwrap()
        .record_schema(all.schema_ref())
        .await
        .unwrap();
    // The second file's row 9,001 has no Title.
    let b = all.slice(12_000, 18_000);
    let c = b.schema().index_of("Title").unwrap();
    let title = b.column(c);
    let holed = arrow::compute::kernels::zip::zip(
        &arrow::array::BooleanArray::from_iter((0..b.num_rows()).map(|i| Some(i != 9_000))),
        title,
        &arrow::array::new_null_array(title.data_type(), b.num_rows()),
    )
    .unwrap();
    assert_eq!(holed.null_count(), 1);
    let mut columns = b.columns().to_vec();
    columns[c] = holed;
    let fields: Vec<_> = b
        .schema()
        .fields()
        .iter()
        .map(|f| match f.name() == "Title" {
            true => Arc::new(f.as_ref().clone().with_nullable(true)),
            false => f.clone(),
        })
        .collect();
    let b = RecordBatch::try_new(Arc::new(arrow::datatypes::Schema::new(fields)), columns).unwrap();
    write(&paths[2], &b, 7_000);

    let plan = ColumnPlan::open(&paths).unwrap();
    let mut loader = Loader::new(&store, "hits", options(400_000_000))
        .await
        .unwrap();
    let err = load_by_columns(&mut loader, plan).await.unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, LoadError::Schema { .. }), "{msg}");
    assert!(
        msg.contains("b.parquet") && msg.contains("\"Title\"") && msg.contains("row 9001"),
        "{msg}"
    );
    assert!(loader.finish().await.is_err());
    assert!(ravel_testkit::published(&store, "hits").await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_of_other_columns_is_refused_by_name_before_anything_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let (_, paths, all) = inputs(dir.path());
    write(
        &paths[2],
        &all.slice(0, 100).project(&[0, 1, 2]).unwrap(),
        50,
    );
    let store = Store::create(dir.path().join("store").to_str().unwrap()).unwrap();
    ravel_testkit::set_layout(&store, "hits", &ravel_hits::layout()).await;
    let plan = ColumnPlan::open(&paths).unwrap();
    let mut loader = Loader::new(&store, "hits", options(400_000_000))
        .await
        .unwrap();
    let err = load_by_columns(&mut loader, plan).await.unwrap_err();
    assert!(err.to_string().contains("b.parquet"), "{err}");
    assert_eq!(loader.objects_stored(), 0);
    assert!(loader.finish().await.is_err());
}
