//! The clustering figures of a stored table: objects that follow each other in one sequence,
//! neighbours sharing a boundary key (the cut fell between equal keys), report depth 1.

use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Int64Array, RecordBatch, TimestampMillisecondArray};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use ravel_layout::{BucketWidth, ClusteringKey, Layout};
use ravel_loader::{LoadOptions, Loader};
use ravel_manifest::{ObjectEntry, compare_keys};
use ravel_store::Store;
use ravel_verify::{VerifyOptions, verify};

/// Rows sharing one key value, so that object cuts fall between equal keys.
const ROWS_PER_KEY: i64 = 60;

/// `rows` rows: a key column `k` of runs of [`ROWS_PER_KEY`] equal values, one time for
/// every row (the key alone orders them), and a column of scattered values for bytes.
fn rows(rows: i64) -> RecordBatch {
    let schema = Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new(
            "time",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            false,
        ),
        Field::new("payload", DataType::Int64, false),
    ]);
    let k = Int64Array::from_iter_values((0..rows).map(|i| i / ROWS_PER_KEY));
    let time = TimestampMillisecondArray::from_iter_values((0..rows).map(|_| 1_372_636_800_000));
    let payload = Int64Array::from_iter_values(
        (0..rows).map(|i| (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) as i64),
    );
    RecordBatch::try_new(
        Arc::new(schema),
        vec![Arc::new(k), Arc::new(time), Arc::new(payload)],
    )
    .unwrap()
}

fn layout() -> Layout {
    Layout {
        time: Some("time".into()),
        clustering_key: Some(ClusteringKey {
            columns: vec!["k".into()],
            bucket_width: BucketWidth::from_seconds(86_400).unwrap(),
        }),
        ..Layout::default()
    }
}

/// Loads the rows in one run of several small objects; returns the objects in key order.
async fn load_one_run(store: &Store) -> Vec<ObjectEntry> {
    ravel_testkit::set_layout(store, "t", &layout()).await;
    let opts = LoadOptions {
        object_bytes: 4_000,
        target_bytes: Some(200_000_000),
        pipeline_depth: 2,
        load_budget: 400_000_000,
        max_flush_delay: Duration::from_secs(3600),
        zstd_level: 1,
    };
    let mut loader = Loader::new(store, "t", opts).await.unwrap();
    loader.push(rows(6_000)).await.unwrap();
    let report = loader.finish().await.unwrap();
    assert_eq!(report.runs, 1);
    let mut objects = report.objects;
    objects
        .sort_by(|a, b| compare_keys(a.first_key.as_ref().unwrap(), b.first_key.as_ref().unwrap()));
    objects
}

#[tokio::test(flavor = "multi_thread")]
async fn one_sequence_whose_neighbours_share_a_boundary_key_has_depth_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().to_str().unwrap()).unwrap();
    let objects = load_one_run(&store).await;
    let shared = objects
        .windows(2)
        .filter(|w| w[0].last_key == w[1].first_key)
        .count();
    // The case needs cuts between equal keys and objects of more than one key.
    assert!(
        objects.len() >= 3 && shared >= 1,
        "{} objects, {shared} shared",
        objects.len()
    );
    assert!(objects.iter().all(|o| o.first_key != o.last_key));

    let report = verify(&store, "t", &VerifyOptions::deep()).await.unwrap();
    assert!(report.holds(), "{:#?}", report.violations);
    let clustering = report.overlap.as_ref().unwrap();
    assert_eq!(clustering.total_objects, objects.len());
    assert_eq!(clustering.max_depth, 1, "{clustering:?}");
    assert_eq!(clustering.average_depth, 1.0);
    assert_eq!(clustering.average_overlaps, 0.0);
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["overlap"]["max_depth"], 1, "{json}");
}
