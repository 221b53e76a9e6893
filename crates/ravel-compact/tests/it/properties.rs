//! The ordering guarantees of compaction on arbitrary tables: each case is loaded in three
//! loads of several runs each, then compacted under a budget that merges two chains at once (several
//! passes whenever there are more than two runs), or in steps of a few objects' input (key
//! ranges, with the rows of objects reaching past a range written back). Then
//!
//! - every row comes back exactly once (the `seq` column, each row's input position);
//! - the objects form one sequence in clustering order (depth 1), and rows with equal sort
//!   keys keep their order: earlier loads first, then input order, which here is `seq` order;
//! - the table verifies deeply, Bloom filters included (no false negatives);
//! - a second compaction writes nothing.
//!
//! And on any interleaving of loads of three inputs, their reruns, loads killed before their
//! commit, compactions and cleanups of the log the log window expired (whole, or killed after
//! any delete), every row of every input a finished load took is in the table exactly once (the
//! inputs are recorded in the log: a rerun publishes nothing), and the table verifies.
//!
//! `PROPTEST_CASES=N` sets the number of cases.

use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Array, AsArray, Int64Array, RecordBatch, RecordBatchReader};
use arrow::compute::concat_batches;
use arrow::datatypes::{DataType, Field, Int64Type, Schema};
use object_store::ObjectStoreExt;
use object_store::path::Path;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use proptest::prelude::*;
use ravel_compact::{CompactError, CompactOptions, compact};
use ravel_layout::ClusteringOrder;
use ravel_loader::{LoadOptions, Loader};
use ravel_manifest::compare_keys;
use ravel_store::Store;
use ravel_testkit::arbitrary::{Case, build, case, cases, split};
use ravel_verify::{VerifyOptions, verify};

pub(crate) fn table(c: &Case) -> (ravel_layout::Layout, RecordBatch) {
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
    (
        layout,
        RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap(),
    )
}

/// Small objects and runs, so that a few hundred rows span several of each.
pub(crate) fn load_options() -> LoadOptions {
    LoadOptions {
        object_bytes: 1_500,
        target_bytes: Some(60_000),
        pipeline_depth: 2,
        load_budget: 64_000_000,
        max_flush_delay: Duration::from_secs(3600),
        zstd_level: 1,
    }
}

pub(crate) async fn load(store: &Store, batches: &[RecordBatch]) {
    load_with(store, batches, load_options()).await
}

pub(crate) async fn load_with(store: &Store, batches: &[RecordBatch], opts: LoadOptions) {
    let mut loader = Loader::new(store, "t", opts).await.unwrap();
    for b in batches {
        loader.push(b.clone()).await.unwrap();
    }
    loader.finish().await.unwrap();
}

/// Every row of the newest version, objects in key order (when they have keys).
pub(crate) async fn rows_in_key_order(store: &Store) -> RecordBatch {
    let mut objects: Vec<ravel_manifest::ObjectEntry> = ravel_testkit::published(store, "t")
        .await
        .into_iter()
        .flat_map(|m| m.objects)
        .collect();
    // Objects of a table in arrival order have no key range: they keep the version's order.
    objects.sort_by(|a, b| match (&a.first_key, &b.first_key) {
        (Some(a), Some(b)) => compare_keys(a, b),
        _ => std::cmp::Ordering::Equal,
    });
    let mut batches = Vec::new();
    let mut schema = None;
    for o in &objects {
        let bytes = store
            .object_store()
            .get(&Path::from(o.key.as_str()))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .unwrap()
            .build()
            .unwrap();
        schema = Some(reader.schema());
        batches.extend(reader.map(Result::unwrap));
    }
    concat_batches(&schema.unwrap(), &batches).unwrap()
}

/// A budget that holds the slices of two chains at once: several passes whenever there are
/// more.
fn in_passes() -> CompactOptions {
    CompactOptions {
        load: LoadOptions {
            load_budget: 10_000_000,
            ..load_options()
        },
        fan_in: None,
        max_input_bytes: None,
        dry_run: false,
        max_steps: None,
    }
}

/// Steps of at most a few objects' input: key ranges merged one at a time, the rows of
/// objects reaching past a range's ends written back.
fn in_steps() -> CompactOptions {
    CompactOptions {
        load: load_options(),
        fan_in: None,
        max_input_bytes: Some(8_000),
        dry_run: false,
        max_steps: None,
    }
}

async fn check(c: Case, opts: CompactOptions) -> Result<(), TestCaseError> {
    let (layout, input) = table(&c);
    if input.num_rows() == 0 {
        return Ok(());
    }
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().to_str().unwrap()).unwrap();
    ravel_testkit::set_layout(&store, "t", &layout).await;
    let pieces = split(&c, &input);
    let third = pieces.len().div_ceil(3);
    for load_pieces in pieces.chunks(third.max(1)) {
        if load_pieces.iter().any(|b| b.num_rows() > 0) {
            load(&store, load_pieces).await;
        }
    }
    let report = match compact(&store, "t", &opts).await {
        Err(CompactError::NotClustered(_)) => {
            prop_assert!(layout.clustering_key.is_none());
            return Ok(());
        }
        other => other.unwrap(),
    };
    prop_assert_eq!(report.output_rows, report.input_rows);
    if opts.max_input_bytes.is_none() {
        prop_assert_eq!(report.fan_in, 2, "the budget forces passes");
    }
    prop_assert!(report.depth_after <= 1, "{:?}", report);
    in_order_and_verified(&store, &layout, &input).await?;
    let again = compact(&store, "t", &opts).await.unwrap();
    prop_assert_eq!(again.version, None, "{:?}", again);
    prop_assert_eq!(again.input_objects, 0);
    Ok(())
}

/// The table, one sequence, holds every row of `input` once, in clustering order, ties in
/// `seq` order, and verifies deeply.
pub(crate) async fn in_order_and_verified(
    store: &Store,
    layout: &ravel_layout::Layout,
    input: &RecordBatch,
) -> Result<(), TestCaseError> {
    let rows = rows_in_key_order(store).await;
    prop_assert_eq!(rows.num_rows(), input.num_rows());
    let seq = rows
        .column_by_name("seq")
        .unwrap()
        .as_primitive::<Int64Type>();
    let mut seen: Vec<i64> = seq.values().to_vec();
    seen.sort_unstable();
    prop_assert!(
        seen.iter().copied().eq(0..input.num_rows() as i64),
        "every row once"
    );
    // Sorted by key, and by seq among equal keys.
    let order = ClusteringOrder::try_new(layout, &rows.schema())
        .unwrap()
        .unwrap();
    let keys = order.key_rows(&rows).unwrap();
    for i in 1..rows.num_rows() {
        let (a, b) = (keys.row(i - 1), keys.row(i));
        prop_assert!(a <= b, "row {i} out of clustering order");
        if a == b {
            prop_assert!(
                seq.value(i - 1) < seq.value(i),
                "tie at row {i} out of input order"
            );
        }
    }
    prop_assert!(seq.null_count() == 0);

    let verified = verify(store, "t", &VerifyOptions::deep()).await.unwrap();
    prop_assert!(verified.holds(), "{:#?}", verified.violations);
    prop_assert_eq!(verified.rows as usize, input.num_rows());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(24), ..ProptestConfig::default() })]

    #[test]
    fn compaction_keeps_every_row_in_order(c in case(600)) {
        let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        rt.block_on(check(c, in_passes()))?;
    }

    #[test]
    fn compaction_in_bounded_steps_keeps_every_row_in_order(c in case(600)) {
        let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        rt.block_on(check(c, in_steps()))?;
    }
}

/// One step of an interleaving: a load of input `i` (a rerun when it was loaded), a load of
/// it killed after its objects were stored and before its commit, a compaction, or a cleanup
/// of the log as if the log window had passed, killed after `deletes` deletes (`None`: whole).
#[derive(Debug, Clone)]
enum Step {
    Load(usize),
    Killed(usize),
    Compact,
    CleanLog { deletes: Option<usize> },
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        3 => (0..3usize).prop_map(Step::Load),
        2 => (0..3usize).prop_map(Step::Killed),
        2 => Just(Step::Compact),
        2 => proptest::option::of(0..12usize).prop_map(|deletes| Step::CleanLog { deletes }),
    ];
    prop::collection::vec(step, 1..12)
}

/// Writes a checkpoint of the newest version (as a commit at the checkpoint interval does),
/// then deletes the log files a log window of a day expired a day from now: all of them, or
/// the first `deletes` in the cleanup's order (what a cleanup killed part-way leaves).
async fn clean_log(store: &Store, deletes: Option<usize>) {
    let log = ravel_log::TableLog::new(
        store.object_store().clone(),
        ravel_store::TablePaths::new("t").unwrap(),
    );
    let newest = log.latest().await.unwrap();
    log.write_checkpoint(&newest).await.unwrap();
    let day = 86_400_000;
    let mut expired = log
        .expired_log(ravel_log::now_ms() + day, day / 2)
        .await
        .unwrap();
    if let Some(n) = deletes {
        expired.files.truncate(n);
    }
    log.delete_expired(&expired).await.unwrap();
}

/// What input `i` is to the log: a file of its own.
fn input_file(i: usize) -> ravel_loader::Consumed {
    ravel_loader::Consumed::once(vec![ravel_loader::InputFile {
        name: format!("/landing/part-{i}.parquet"),
        size: 1_000 + i as u64,
        version: "1".into(),
        modified_ms: None,
    }])
}

/// Runs `steps` over three inputs cut from `c`; then every row of every input that a
/// finished load took is in the table exactly once, and no other row is.
async fn interleaved(c: Case, steps: Vec<Step>) -> Result<(), TestCaseError> {
    let (layout, input) = table(&c);
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().to_str().unwrap()).unwrap();
    ravel_testkit::set_layout(&store, "t", &layout).await;
    let third = input.num_rows().div_ceil(3).max(1);
    let inputs: Vec<RecordBatch> = (0..3)
        .map(|i| {
            let start = (i * third).min(input.num_rows());
            input.slice(start, third.min(input.num_rows() - start))
        })
        .collect();
    let mut loaded = [false; 3];
    for step in steps {
        let (i, finish) = match step {
            Step::Compact => {
                match compact(&store, "t", &in_steps()).await {
                    Ok(_) | Err(CompactError::NotClustered(_) | CompactError::NoSuchTable(_)) => {}
                    Err(e) => panic!("compact: {e}"),
                }
                continue;
            }
            Step::CleanLog { deletes } => {
                clean_log(&store, deletes).await;
                continue;
            }
            Step::Load(i) => (i, true),
            Step::Killed(i) => (i, false),
        };
        if inputs[i].num_rows() == 0 {
            continue;
        }
        let mut loader = Loader::new(&store, "t", load_options()).await.unwrap();
        if loader.consume(input_file(i)).await.unwrap().is_some() {
            prop_assert!(
                loaded[i],
                "input {i} reported published before any load finished"
            );
            continue;
        }
        prop_assert!(!loaded[i], "input {i} would load twice");
        loader.push(inputs[i].clone()).await.unwrap();
        match finish {
            true => {
                loader.finish().await.unwrap();
                loaded[i] = true;
            }
            // Stored and prepared, never committed: what a kill leaves.
            false => loader.prepare().await.unwrap().release().await,
        }
    }
    let mut expected: Vec<i64> = Vec::new();
    for (i, batch) in inputs.iter().enumerate().filter(|(i, _)| loaded[*i]) {
        let seq = batch
            .column_by_name("seq")
            .unwrap()
            .as_primitive::<Int64Type>();
        expected.extend(seq.values().iter().copied());
        prop_assert!(batch.num_rows() > 0, "input {i} loaded with no rows");
    }
    expected.sort_unstable();
    let mut seen: Vec<i64> = match expected.is_empty() {
        true => Vec::new(),
        false => {
            let rows = rows_in_key_order(&store).await;
            let seq = rows
                .column_by_name("seq")
                .unwrap()
                .as_primitive::<Int64Type>();
            seq.values().to_vec()
        }
    };
    seen.sort_unstable();
    let rows = expected.len();
    prop_assert_eq!(seen, expected, "every loaded row exactly once");
    if loaded.iter().any(|l| *l) {
        let verified = verify(&store, "t", &VerifyOptions::default())
            .await
            .unwrap();
        prop_assert!(verified.holds(), "{:#?}", verified.violations);
        prop_assert_eq!(verified.rows as usize, rows);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(32), ..ProptestConfig::default() })]

    #[test]
    fn loads_reruns_kills_merges_and_log_cleanups_leave_every_input_row_once(c in case(300), s in steps()) {
        let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        rt.block_on(interleaved(c, s))?;
    }
}
