//! The clustering permutation against a naive row-by-row comparator, on unit cases and on
//! arbitrary tables (proptest).

use std::cmp::Ordering;
use std::sync::Arc;

use arrow::array::*;
use arrow::datatypes::*;
use proptest::prelude::*;
use ravel_layout::{BloomScope, BucketWidth, ClusteringKey, Layout, clustering_permutation};

/// One cell of a sort column, compared the obvious way: nulls first, integers numerically,
/// bytes lexicographically.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Cell {
    Null,
    Int(i128),
    Bytes(Vec<u8>),
}

fn cell(a: &dyn Array, i: usize) -> Cell {
    if a.is_null(i) {
        return Cell::Null;
    }
    macro_rules! int {
        ($t:ty) => {
            Cell::Int(a.as_primitive::<$t>().value(i) as i128)
        };
    }
    match a.data_type() {
        DataType::Int8 => int!(Int8Type),
        DataType::Int16 => int!(Int16Type),
        DataType::Int32 => int!(Int32Type),
        DataType::Int64 => int!(Int64Type),
        DataType::UInt8 => int!(UInt8Type),
        DataType::UInt16 => int!(UInt16Type),
        DataType::UInt32 => int!(UInt32Type),
        DataType::UInt64 => int!(UInt64Type),
        DataType::Date32 => int!(Date32Type),
        DataType::Timestamp(TimeUnit::Second, _) => int!(TimestampSecondType),
        DataType::Timestamp(TimeUnit::Millisecond, _) => int!(TimestampMillisecondType),
        DataType::Timestamp(TimeUnit::Microsecond, _) => int!(TimestampMicrosecondType),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => int!(TimestampNanosecondType),
        DataType::Utf8 => Cell::Bytes(a.as_string::<i32>().value(i).as_bytes().to_vec()),
        DataType::LargeUtf8 => Cell::Bytes(a.as_string::<i64>().value(i).as_bytes().to_vec()),
        DataType::Binary => Cell::Bytes(a.as_binary::<i32>().value(i).to_vec()),
        DataType::LargeBinary => Cell::Bytes(a.as_binary::<i64>().value(i).to_vec()),
        other => panic!("no naive cell for {other}"),
    }
}

/// The bucket of a time cell, computed independently: seconds since 1970 as an exact rational,
/// floored division by the width.
fn naive_bucket(dt: &DataType, time: &Cell, width: u64) -> Cell {
    let Cell::Int(v) = time else {
        return Cell::Null;
    };
    // time in nanoseconds
    let ns: i128 = match dt {
        DataType::Date32 => v * 86_400 * 1_000_000_000,
        DataType::Timestamp(TimeUnit::Millisecond, _) => v * 1_000_000,
        DataType::Timestamp(TimeUnit::Microsecond, _) => v * 1_000,
        DataType::Timestamp(TimeUnit::Nanosecond, _) => *v,
        _ => v * 1_000_000_000,
    };
    let w = width as i128 * 1_000_000_000;
    let q = if ns >= 0 {
        ns / w
    } else {
        -((-ns + w - 1) / w)
    };
    Cell::Int(q)
}

fn naive_key(layout: &Layout, batch: &RecordBatch, row: usize) -> Vec<Cell> {
    let col = |name: &str| batch.column_by_name(name).unwrap();
    let mut key = Vec::new();
    if let Some(s) = &layout.stream {
        key.push(cell(col(s), row));
    }
    let ck = layout.clustering_key.as_ref().unwrap();
    let t = col(&layout.time);
    let tc = cell(t, row);
    key.push(naive_bucket(t.data_type(), &tc, ck.bucket_width.seconds()));
    for k in &ck.columns {
        key.push(cell(col(k), row));
    }
    key.push(tc);
    key
}

fn naive_permutation(layout: &Layout, batch: &RecordBatch) -> Vec<u32> {
    let keys: Vec<Vec<Cell>> = (0..batch.num_rows())
        .map(|r| naive_key(layout, batch, r))
        .collect();
    let mut idx: Vec<u32> = (0..batch.num_rows() as u32).collect();
    // Vec::sort_by is stable: ties keep input order.
    idx.sort_by(|&a, &b| keys[a as usize].cmp(&keys[b as usize]));
    idx
}

fn layout(stream: Option<&str>, time: &str, keys: &[&str], width: &str) -> Layout {
    Layout {
        stream: stream.map(String::from),
        time: time.into(),
        clustering_key: Some(ClusteringKey {
            columns: keys.iter().map(|s| s.to_string()).collect(),
            bucket_width: width.parse::<BucketWidth>().unwrap(),
        }),
        bloom: ravel_layout::Bloom {
            scope: BloomScope::None,
            fpp: 0.01,
        },
        ..Layout::default()
    }
}

#[test]
fn sorts_hits_like_rows_and_keeps_ties_in_input_order() {
    let day = 86_400i64;
    let t0 = 1_372_636_800i64; // 2013-07-01
    let schema = Arc::new(Schema::new(vec![
        Field::new("CounterID", DataType::Int32, false),
        Field::new("EventTime", DataType::Int64, false),
        Field::new("EventDate", DataType::UInt16, false),
        Field::new("UserID", DataType::Int64, false),
        Field::new("tag", DataType::Utf8, false),
    ]));
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int32Array::from(vec![62, 1, 62, 62, 1, 62])),
            Arc::new(Int64Array::from(vec![
                t0 + day + 5,
                t0,
                t0 + 10,
                t0 + 10,
                t0,
                t0 + 3,
            ])),
            Arc::new(UInt16Array::from(vec![
                15888, 15887, 15887, 15887, 15887, 15887,
            ])),
            Arc::new(Int64Array::from(vec![7, 9, 5, 5, 9, 8])),
            Arc::new(StringArray::from(vec!["a", "b", "c", "d", "e", "f"])),
        ],
    )
    .unwrap();
    let l = layout(
        Some("CounterID"),
        "EventTime",
        &["EventDate", "UserID"],
        "1d",
    );
    let p = clustering_permutation(&l, &batch).unwrap();
    // counter 1 first (b, e: a tie on the whole key, input order kept), then counter 62 on day 0
    // by user (5: c, d tie; 8: f), then day 1 (a).
    assert_eq!(p.values().to_vec(), vec![1, 4, 2, 3, 5, 0]);
    assert_eq!(p.values().to_vec(), naive_permutation(&l, &batch));
}

#[test]
fn buckets_floor_before_1970_and_nulls_sort_first() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("s", DataType::Utf8, true),
        Field::new("t", DataType::Timestamp(TimeUnit::Millisecond, None), true),
        Field::new("k", DataType::Int8, true),
    ]));
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from(vec![
                Some("x"),
                Some("x"),
                Some("x"),
                None,
                Some("x"),
            ])),
            Arc::new(TimestampMillisecondArray::from(vec![
                Some(-1), // 1969-12-31 23:59:59.999: bucket -1
                Some(0),  // bucket 0
                None,     // null bucket: first within stream "x"
                Some(5),
                Some(-86_400_001), // bucket -2
            ])),
            Arc::new(Int8Array::from(vec![
                Some(3),
                Some(-3),
                Some(1),
                Some(0),
                None,
            ])),
        ],
    )
    .unwrap();
    let l = layout(Some("s"), "t", &["k"], "1d");
    let p = clustering_permutation(&l, &batch).unwrap();
    assert_eq!(p.values().to_vec(), vec![3, 2, 4, 0, 1]);
    assert_eq!(p.values().to_vec(), naive_permutation(&l, &batch));
}

#[test]
fn no_clustering_key_keeps_arrival_order() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("CounterID", DataType::Int32, false),
        Field::new("EventTime", DataType::Int64, false),
    ]));
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int32Array::from(vec![3, 2, 1])),
            Arc::new(Int64Array::from(vec![3, 2, 1])),
        ],
    )
    .unwrap();
    let p = clustering_permutation(&Layout::default(), &batch).unwrap();
    assert_eq!(p.values().to_vec(), vec![0, 1, 2]);
}

#[test]
fn unknown_columns_are_refused_by_name() {
    let schema = Arc::new(Schema::new(vec![Field::new(
        "EventTime",
        DataType::Int64,
        false,
    )]));
    let batch = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![1]))]).unwrap();
    let err = clustering_permutation(&Layout::hits(), &batch).unwrap_err();
    assert!(err.to_string().contains("\"CounterID\""), "{err}");
}

// ---- property test: arbitrary tables and layouts -------------------------------------------

const TYPES: [fn() -> DataType; 15] = [
    || DataType::Int8,
    || DataType::Int16,
    || DataType::Int32,
    || DataType::Int64,
    || DataType::UInt8,
    || DataType::UInt16,
    || DataType::UInt32,
    || DataType::UInt64,
    || DataType::Date32,
    || DataType::Timestamp(TimeUnit::Second, None),
    || DataType::Timestamp(TimeUnit::Millisecond, None),
    || DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
    || DataType::Utf8,
    || DataType::LargeBinary,
    || DataType::Binary,
];
const TIME_TYPES: [usize; 9] = [0, 3, 4, 7, 8, 9, 10, 11, 2];

/// Values drawn from a small pool, so that duplicates and whole-key ties are common, plus
/// extremes.
fn array(dt: &DataType, seeds: &[(bool, u64)]) -> ArrayRef {
    let pick = |s: u64, pool: &[i128]| pool[(s % pool.len() as u64) as usize];
    let signed: &[i128] = &[
        i64::MIN as i128,
        -86_401,
        -1,
        0,
        1,
        2,
        86_399,
        86_400,
        1_372_636_800,
        i64::MAX as i128,
    ];
    let ints = |lo: i128, hi: i128| -> Vec<Option<i128>> {
        seeds
            .iter()
            .map(|&(null, s)| (!null).then(|| pick(s, signed).clamp(lo, hi)))
            .collect()
    };
    macro_rules! prim {
        ($arr:ty, $native:ty) => {{
            let v = ints(<$native>::MIN as i128, <$native>::MAX as i128);
            Arc::new(<$arr>::from(
                v.into_iter()
                    .map(|o| o.map(|x| x as $native))
                    .collect::<Vec<_>>(),
            )) as ArrayRef
        }};
    }
    let strs: Vec<Option<Vec<u8>>> = seeds
        .iter()
        .map(|&(null, s)| {
            (!null).then(|| match s % 6 {
                0 => vec![],
                1 => b"a".to_vec(),
                2 => b"ab".to_vec(),
                3 => vec![0xff, 0],
                4 => b"b".to_vec(),
                _ => vec![0],
            })
        })
        .collect();
    match dt {
        DataType::Int8 => prim!(Int8Array, i8),
        DataType::Int16 => prim!(Int16Array, i16),
        DataType::Int32 => prim!(Int32Array, i32),
        DataType::Int64 => prim!(Int64Array, i64),
        DataType::UInt8 => prim!(UInt8Array, u8),
        DataType::UInt16 => prim!(UInt16Array, u16),
        DataType::UInt32 => prim!(UInt32Array, u32),
        DataType::UInt64 => {
            let v: Vec<Option<u64>> = seeds
                .iter()
                .map(|&(null, s)| {
                    (!null).then(|| [0, 1, 86_400, u64::MAX, i64::MAX as u64 + 7][(s % 5) as usize])
                })
                .collect();
            Arc::new(UInt64Array::from(v))
        }
        DataType::Date32 => prim!(Date32Array, i32),
        DataType::Timestamp(TimeUnit::Second, _) => prim!(TimestampSecondArray, i64),
        DataType::Timestamp(TimeUnit::Millisecond, _) => prim!(TimestampMillisecondArray, i64),
        DataType::Timestamp(TimeUnit::Nanosecond, tz) => {
            let v = ints(i64::MIN as i128, i64::MAX as i128);
            Arc::new(
                TimestampNanosecondArray::from(
                    v.into_iter()
                        .map(|o| o.map(|x| x as i64))
                        .collect::<Vec<_>>(),
                )
                .with_timezone_opt(tz.clone()),
            )
        }
        DataType::Utf8 => Arc::new(StringArray::from(
            strs.iter()
                .map(|o| o.as_ref().map(|b| String::from_utf8_lossy(b).into_owned()))
                .collect::<Vec<_>>(),
        )),
        DataType::Binary => Arc::new(BinaryArray::from(
            strs.iter().map(|o| o.as_deref()).collect::<Vec<_>>(),
        )),
        DataType::LargeBinary => Arc::new(LargeBinaryArray::from(
            strs.iter().map(|o| o.as_deref()).collect::<Vec<_>>(),
        )),
        other => panic!("{other}"),
    }
}

#[derive(Debug, Clone)]
struct Case {
    /// Column types of the table (column i is named c{i}).
    types: Vec<usize>,
    time_type: usize,
    stream: Option<usize>,
    keys: Vec<usize>,
    bucket: u64,
    cells: Vec<Vec<(bool, u64)>>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        1usize..=6,
        0usize..TIME_TYPES.len(),
        0usize..300,
        proptest::sample::select(vec![1u64, 59, 3_600, 86_400, 604_800, 7 * 86_400 + 1]),
    )
        .prop_flat_map(|(ncols, time_type, rows, bucket)| {
            let types = proptest::collection::vec(0usize..TYPES.len(), ncols);
            let cells = proptest::collection::vec(
                proptest::collection::vec((proptest::bool::weighted(0.15), any::<u64>()), rows),
                ncols + 1,
            );
            let stream = proptest::option::of(0usize..ncols);
            let keys =
                proptest::sample::subsequence((0..ncols).collect::<Vec<_>>(), 1..=ncols.min(4))
                    .prop_shuffle();
            (types, Just(time_type), stream, keys, Just(bucket), cells)
        })
        .prop_map(|(types, time_type, stream, keys, bucket, cells)| {
            let keys: Vec<usize> = keys.into_iter().filter(|k| Some(*k) != stream).collect();
            Case {
                types,
                time_type,
                stream,
                keys,
                bucket,
                cells,
            }
        })
        .prop_filter("at least one key column", |c| !c.keys.is_empty())
}

fn build(c: &Case) -> (Layout, RecordBatch) {
    let mut fields = Vec::new();
    let mut cols = Vec::new();
    for (i, &t) in c.types.iter().enumerate() {
        let dt = TYPES[t]();
        cols.push(array(&dt, &c.cells[i]));
        fields.push(Field::new(format!("c{i}"), dt, true));
    }
    let tdt = TYPES[TIME_TYPES[c.time_type]]();
    cols.push(array(&tdt, &c.cells[c.types.len()]));
    fields.push(Field::new("time", tdt, true));
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap();
    let names: Vec<String> = c.keys.iter().map(|k| format!("c{k}")).collect();
    let l = Layout {
        stream: c.stream.map(|s| format!("c{s}")),
        time: "time".into(),
        clustering_key: Some(ClusteringKey {
            columns: names,
            bucket_width: BucketWidth::from_seconds(c.bucket).unwrap(),
        }),
        ..Layout::default()
    };
    (l, batch)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn permutation_matches_the_naive_comparator(c in case()) {
        let (l, batch) = build(&c);
        let p = clustering_permutation(&l, &batch).unwrap();
        prop_assert_eq!(p.values().to_vec(), naive_permutation(&l, &batch));
        // Split into pieces, the run order of the pieces is the same order.
        let order = ravel_layout::ClusteringOrder::try_new(&l, batch.schema_ref()).unwrap().unwrap();
        let mut pieces = Vec::new();
        let mut offsets = Vec::new();
        let mut at = 0;
        let mut k = 1;
        while at < batch.num_rows() {
            let len = k.min(batch.num_rows() - at);
            pieces.push(batch.slice(at, len));
            offsets.push(at);
            at += len;
            k = k * 3 % 17 + 1;
        }
        let merged: Vec<u32> = order
            .merge_order(&pieces)
            .unwrap()
            .into_iter()
            .map(|(b, r)| (offsets[b] + r) as u32)
            .collect();
        prop_assert_eq!(&merged, &p.values().to_vec());
        // And it is a permutation.
        let mut seen = p.values().to_vec();
        seen.sort_unstable();
        prop_assert_eq!(seen, (0..batch.num_rows() as u32).collect::<Vec<_>>());
    }
}

#[test]
fn naive_cells_order_as_documented() {
    assert_eq!(Cell::Null.cmp(&Cell::Int(i128::MIN)), Ordering::Less);
    assert_eq!(
        Cell::Bytes(vec![]).cmp(&Cell::Bytes(vec![0])),
        Ordering::Less
    );
}

#[test]
fn integer_keys_sort_as_words_and_string_keys_do_not() {
    use ravel_layout::normalized_order;
    let ints: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from(vec![Some(2), None, Some(-1)])),
        Arc::new(UInt64Array::from(vec![Some(u64::MAX), Some(0), None])),
    ];
    // Nulls first, signed order, the validity word before a 64-bit value.
    assert_eq!(normalized_order(&[ints], 3), Some(vec![1, 2, 0]));
    let strings: Vec<ArrayRef> = vec![Arc::new(StringArray::from(vec!["b", "a"]))];
    assert_eq!(normalized_order(&[strings], 2), None);
}
