//! The ordering guarantees end to end, on arbitrary tables (not only hits): each case is
//! loaded through the library into a fresh store in several runs of several objects, then
//!
//! - the rows out are the rows in, each once (every table gets a `seq` column, its input
//!   position, so the multiset check is an exact comparison after sorting by it);
//! - the table verifies deeply (`ravel_verify`): one row group per object, rows in clustering
//!   order, objects of one run not overlapping, manifest key ranges equal to the objects'
//!   contents, Bloom filters exactly on the scope's columns, `sorting_columns` and key-value
//!   metadata as the layout says;
//! - within a run, rows with equal sort keys keep their input order.
//!
//! `PROPTEST_CASES=N` sets the number of cases (default 48, well under a minute); a longer soak
//! is `PROPTEST_CASES=2000 cargo test --release -p ravel-verify --test properties`.

use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Int64Array, RecordBatch, UInt32Array};
use arrow::compute::{concat_batches, sort_to_indices, take_record_batch};
use arrow::datatypes::{DataType, Field, Schema};
use object_store::ObjectStoreExt;
use object_store::path::Path;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use proptest::prelude::*;
use ravel_layout::ClusteringOrder;
use ravel_loader::{LoadOptions, Loader};
use ravel_store::Store;
use ravel_testkit::arbitrary::{Case, build, case, cases, split};
use ravel_verify::{VerifyOptions, verify};

/// The case's table with a `seq` column (input position) appended.
fn table(c: &Case) -> (ravel_layout::Layout, RecordBatch) {
    let (layout, batch) = build(c);
    let mut fields: Vec<Field> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new("seq", DataType::Int64, false));
    let mut cols = batch.columns().to_vec();
    cols.push(Arc::new(Int64Array::from_iter_values(
        0..batch.num_rows() as i64,
    )));
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap();
    (layout, batch)
}

/// Loads the case and checks it; returns the number of runs and the most objects of one run.
async fn check(c: Case) -> Result<(u64, usize), TestCaseError> {
    let (layout, input) = table(&c);
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().to_str().unwrap()).unwrap();
    ravel_testkit::set_layout(&store, "t", &layout).await;
    // Small objects and runs, so that a case of a few hundred rows spans several of each.
    let opts = LoadOptions {
        object_bytes: 1_500,
        target_bytes: Some(200_000),
        pipeline_depth: 2,
        load_budget: 64_000_000,
        max_flush_delay: Duration::from_secs(3600),
        zstd_level: 1,
    };
    let mut loader = Loader::new(&store, "t", opts).await.unwrap();
    for b in split(&c, &input) {
        loader.push(b).await.unwrap();
    }
    if input.num_rows() == 0 {
        // An empty input publishes nothing.
        let err = loader.finish().await.unwrap_err();
        prop_assert!(matches!(err, ravel_loader::LoadError::EmptyInput), "{err}");
        prop_assert!(!dir.path().join("t/_delta_log").exists());
        return Ok((0, 0));
    }
    let report = loader.finish().await.unwrap();
    prop_assert_eq!(report.rows as usize, input.num_rows());

    let verified = verify(&store, "t", &VerifyOptions::deep()).await.unwrap();
    prop_assert!(verified.holds(), "{:#?}", verified.violations);
    prop_assert!(verified.orphans.is_empty());

    prop_assert_eq!(verified.rows as usize, input.num_rows());

    // Read every object back, in the manifest's order.
    let manifests = ravel_testkit::published(&store, "t").await;
    prop_assert_eq!(manifests.len(), 1);
    let listed = &manifests[0].objects;
    prop_assert_eq!(listed, &report.objects);
    prop_assert_eq!(verified.objects, listed.len());
    let mut objects = Vec::new();
    for o in listed {
        let bytes = store
            .object_store()
            .get(&Path::from(o.key.as_str()))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes).unwrap();
        let schema = reader.schema().clone();
        let batches: Vec<RecordBatch> = reader.build().unwrap().map(|b| b.unwrap()).collect();
        objects.push((o.run, concat_batches(&schema, &batches).unwrap()));
    }

    // The rows out are the rows in, each once.
    let all: Vec<RecordBatch> = objects.iter().map(|(_, b)| b.clone()).collect();
    let out = concat_batches(&input.schema(), &all).unwrap();
    let by_seq = sort_to_indices(out.column_by_name("seq").unwrap(), None, None).unwrap();
    let out = take_record_batch(&out, &by_seq).unwrap();
    prop_assert_eq!(&out, &input);

    // Within a run, equal keys keep input order (the run's objects follow each other).
    let mut per_run: std::collections::BTreeMap<u64, usize> = Default::default();
    for (run, _) in &objects {
        *per_run.entry(*run).or_default() += 1;
    }
    let most = per_run.values().copied().max().unwrap_or(0);
    if let Some(order) = ClusteringOrder::try_new(&layout, &input.schema()).unwrap() {
        let mut runs: Vec<(u64, Vec<RecordBatch>)> = Vec::new();
        for (run, b) in objects {
            match runs.last_mut() {
                Some((r, v)) if *r == run => v.push(b),
                _ => runs.push((run, vec![b])),
            }
        }
        for (run, batches) in runs {
            let rows = concat_batches(&input.schema(), &batches).unwrap();
            let keys = order.key_rows(&rows).unwrap();
            let seq = rows.column_by_name("seq").unwrap();
            let seq = seq.as_any().downcast_ref::<Int64Array>().unwrap();
            for i in 1..rows.num_rows() {
                if keys.row(i - 1) == keys.row(i) {
                    prop_assert!(
                        seq.value(i - 1) < seq.value(i),
                        "run {}: tie at rows {} and {} out of input order",
                        run,
                        i - 1,
                        i
                    );
                }
            }
        }
    } else {
        // Arrival order: the objects hold the input as it came.
        let identity = UInt32Array::from_iter_values(0..input.num_rows() as u32);
        prop_assert_eq!(by_seq.values(), identity.values());
    }
    Ok((report.runs, most))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(48)))]

    #[test]
    fn loads_keep_every_row_once_in_clustering_order(c in case(600)) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(check(c))?;
    }
}

/// The property cases are small; this one is sure to span several runs, each of several
/// objects, so that the run and overlap checks above have something to check.
#[test]
fn a_larger_case_spans_several_runs_of_several_objects() {
    let rows = 3_000;
    let cells = |k: u64| (0..rows).map(|i| (i % 17 == 0, i * k)).collect::<Vec<_>>();
    let c = Case {
        types: vec![2, 9, 13, 14],
        time_type: 3,
        stream: Some(0),
        keys: vec![1, 2],
        bucket: 3_600,
        cells: vec![cells(7), cells(13), cells(3), cells(5), cells(11)],
        bloom: 1,
        pieces: vec![1, 0, 500, 7],
        clustered: true,
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (runs, most) = rt.block_on(check(c)).unwrap();
    assert!(
        runs >= 2 && most >= 2,
        "{runs} runs, at most {most} objects in one"
    );
}
