//! Float columns read as DuckDB reads them: NaN equal to NaN and greater than every other value
//! (+inf included), -0.0 equal to 0.0, whatever the objects' statistics (which leave NaN out)
//! and the manifest's ranges say. The table holds NaN (both signs), ±inf, ±0, 1.5, nulls and
//! ordinary values in several objects, clustered by `f` (Float64: objects hold ranges of it,
//! one only -0.0), with `h` (Float16) in the same order and `g` (Float32) in another (most
//! objects hold some of every value).

use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::array::{
    AsArray, Float32Array, Float64Array, RecordBatch, TimestampMillisecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema, TimeUnit};
use ravel_layout::{BucketWidth, ClusteringKey, Layout};
use ravel_loader::{LoadOptions, Loader};
use ravel_query::{QueryOptions, QueryTable};
use ravel_store::Store;

/// A NaN with its sign bit set, as x86 computes 0.0 / 0.0.
const NEGATIVE_NAN: f64 = f64::from_bits(0xfff8_0000_0000_0000);

/// The special values and how many rows hold each (`None`: null); 2000 ordinary values
/// (`k - 999.75`) follow. `benches/nan/duckdb_answers.py` builds the same table.
const SPECIAL: [(Option<f64>, usize); 8] = [
    (Some(f64::NAN), 900),
    (Some(NEGATIVE_NAN), 100),
    (Some(f64::INFINITY), 300),
    (Some(f64::NEG_INFINITY), 200),
    (Some(0.0), 400),
    (Some(-0.0), 500),
    (Some(1.5), 600),
    (None, 700),
];
const ORDINARY: usize = 2000;

const LITERALS: [&str; 7] = ["'NaN'", "'inf'", "'-inf'", "0.0", "-0.0", "1.5", "NULL"];
const OPERATORS: [&str; 10] = [
    "=", "!=", "<", "<=", ">", ">=", "IN", "NOT IN", "NOT =", "NOT <",
];

/// DuckDB's counts (2.0.1, over the values in memory; `benches/nan/duckdb_answers.py`), by
/// literal (rows) and operator (columns), in the order of `LITERALS` and `OPERATORS`.
const DUCKDB: [[i64; 10]; 7] = [
    [1000, 4000, 4000, 5000, 0, 1000, 1000, 4000, 4000, 1000],
    [300, 4700, 3700, 4000, 1000, 1300, 300, 4700, 4700, 1300],
    [200, 4800, 0, 200, 4800, 5000, 200, 4800, 4800, 5000],
    [900, 4100, 1200, 2100, 2900, 3800, 900, 4100, 4100, 3800],
    [900, 4100, 1200, 2100, 2900, 3800, 900, 4100, 4100, 3800],
    [600, 4400, 2102, 2702, 2298, 2898, 600, 4400, 4400, 2898],
    [0; 10],
];

fn values() -> Vec<Option<f64>> {
    let mut v: Vec<Option<f64>> = SPECIAL
        .iter()
        .flat_map(|&(x, n)| std::iter::repeat_n(x, n))
        .collect();
    v.extend((0..ORDINARY).map(|k| Some(k as f64 - 999.75)));
    v
}

/// The rows: `f` and `g` hold the values in two orders (steps coprime to their number), `h`
/// those of `f` in half precision (which keeps their order and every special value).
fn rows() -> RecordBatch {
    let v = values();
    let n = v.len();
    let v = &v;
    let order = |step: usize| (0..n).map(move |i| v[(i * step) % n]);
    let f = Float64Array::from_iter(order(4999));
    let g = Float32Array::from_iter(order(7919).map(|x| x.map(|x| x as f32)));
    let h = datafusion::arrow::compute::cast(&f, &DataType::Float16).unwrap();
    let t = TimestampMillisecondArray::from_iter_values((0..n).map(|_| 1_372_636_800_000));
    let schema = Schema::new(vec![
        Field::new("t", DataType::Timestamp(TimeUnit::Millisecond, None), false),
        Field::new("f", DataType::Float64, true),
        Field::new("g", DataType::Float32, true),
        Field::new("h", DataType::Float16, true),
    ]);
    RecordBatch::try_new(
        Arc::new(schema),
        vec![Arc::new(t), Arc::new(f), Arc::new(g), h],
    )
    .unwrap()
}

/// Loads the rows clustered by `f`, in objects of a few hundred rows.
async fn load(store: &Store) -> Vec<ravel_manifest::ObjectEntry> {
    let layout = Layout {
        time: Some("t".into()),
        clustering_key: Some(ClusteringKey {
            columns: vec!["f".into()],
            bucket_width: BucketWidth::from_seconds(86_400).unwrap(),
        }),
        ..Layout::default()
    };
    ravel_testkit::set_layout(store, "t", &layout).await;
    let opts = LoadOptions {
        object_bytes: 1_500,
        target_bytes: Some(200_000_000),
        pipeline_depth: 2,
        load_budget: 400_000_000,
        max_flush_delay: Duration::from_secs(3600),
        zstd_level: 1,
    };
    let mut loader = Loader::new(store, "t", opts).await.unwrap();
    loader.push(rows()).await.unwrap();
    loader.finish().await.unwrap().objects
}

fn condition(column: &str, op: &str, lit: &str) -> String {
    match op {
        "IN" | "NOT IN" => format!("{column} {op} ({lit}, 99)"),
        _ => match op.strip_prefix("NOT ") {
            Some(op) => format!("NOT ({column} {op} {lit})"),
            None => format!("{column} {op} {lit}"),
        },
    }
}

async fn count(table: &QueryTable, sql: &str) -> i64 {
    let a = table.sql(sql).await.unwrap();
    a.batches[0].column(0).as_primitive::<Int64Type>().value(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn float_comparisons_answer_as_duckdb_does() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().to_str().unwrap()).unwrap();
    let objects = load(&store).await;
    // The case needs an object of -0.0 alone: its range [-0.0, -0.0] must not exclude 0.0.
    let negative_zero = |v: &serde_json::Value| {
        v.as_f64()
            .is_some_and(|x| x.to_bits() == (-0.0f64).to_bits())
    };
    let only_negative_zero = objects.iter().any(|o| {
        o.ranges
            .get("f")
            .is_some_and(|r| negative_zero(&r.min) && negative_zero(&r.max))
    });
    assert!(objects.len() >= 6 && only_negative_zero, "{objects:#?}");
    let open = |manifest_pruning| {
        let store = store.clone();
        async move {
            let opts = QueryOptions {
                manifest_pruning,
                ..QueryOptions::default()
            };
            QueryTable::open(&store, "t", &opts).await.unwrap()
        }
    };
    let tables = [
        (open(true).await, "pruned"),
        (open(false).await, "unpruned"),
    ];
    let mut wrong = Vec::new();
    for (table, how) in &tables {
        for column in ["f", "g", "h"] {
            for (lit, want) in LITERALS.iter().zip(DUCKDB) {
                for (op, want) in OPERATORS.iter().zip(want) {
                    let c = condition(column, op, lit);
                    let got = count(table, &format!("SELECT count(*) FROM t WHERE {c}")).await;
                    if got != want {
                        wrong.push(format!("{how}: {c}: {got}, DuckDB {want}"));
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The manifest still prunes by `f`: objects of finite ranges without the value go.
    let (table, _) = &tables[0];
    for sql in ["f = 1.5", "f = 'NaN'"] {
        let a = table
            .sql(&format!("SELECT count(*) FROM t WHERE {sql}"))
            .await
            .unwrap();
        assert!(a.scan.kept < objects.len(), "{sql}: {:?}", a.scan);
    }
}
