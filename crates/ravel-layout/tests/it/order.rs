//! The clustering permutation against a naive row-by-row comparator, on unit cases and on
//! arbitrary tables (proptest).

use std::cmp::Ordering;
use std::sync::Arc;

use arrow::array::*;
use arrow::datatypes::*;
use proptest::prelude::*;
use ravel_layout::{BloomScope, BucketWidth, ClusteringKey, Layout, clustering_permutation};
use ravel_testkit::arbitrary::{build, case, cases};

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
        DataType::Date64 => int!(Date64Type),
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
    let t = col(layout.time.as_deref().unwrap());
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
        time: Some(time.into()),
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
    let hits = layout(Some("CounterID"), "EventTime", &["UserID"], "1d");
    let err = clustering_permutation(&hits, &batch).unwrap_err();
    assert!(err.to_string().contains("\"CounterID\""), "{err}");
}

// ---- property test: arbitrary tables and layouts -------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(256)))]

    #[test]
    fn permutation_matches_the_naive_comparator(c in case(300)) {
        let c = ravel_testkit::arbitrary::Case { clustered: true, ..c };
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
            if k % 4 == 0 {
                // An empty piece: its rows map to no batch.
                pieces.push(batch.slice(at, 0));
                offsets.push(at);
            }
            k = k * 3 % 17 + 1;
        }
        let pairs = order.merge_order(&pieces).unwrap();
        // Every pair names a row its piece holds (an empty piece holds none).
        prop_assert!(pairs.iter().all(|&(b, r)| r < pieces[b].num_rows()));
        let merged: Vec<u32> = pairs
            .into_iter()
            .map(|(b, r)| (offsets[b] + r) as u32)
            .collect();
        prop_assert_eq!(&merged, &p.values().to_vec());
        // Read part by part (twice), rows packed as words where the key allows: the same
        // order, counted across the parts.
        if order.packs(batch.schema_ref()) {
            let parts: Vec<Vec<RecordBatch>> = pieces.chunks(3).map(|c| c.to_vec()).collect();
            let streamed = order
                .streamed_order(parts.len(), |i| {
                    Ok::<_, ravel_layout::LayoutError>(parts[i].clone())
                })
                .unwrap()
                .expect("a key that packs is ordered");
            prop_assert_eq!(&streamed, &p.values().to_vec());
        }
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
    // Nulls first, signed order; a full-range 64-bit value with nulls takes 65 bits.
    assert_eq!(normalized_order(&[ints], 3), Some(vec![1, 2, 0]));
    let strings: Vec<ArrayRef> = vec![Arc::new(StringArray::from(vec!["b", "a"]))];
    assert_eq!(normalized_order(&[strings], 2), None);
}

// ---- property test: packed integer keys ----------------------------------------------------

/// A full-range UInt64 column (0 and u64::MAX both present): with a null it needs 65 bits.
fn full_range_u64(seeds: &[(bool, u64)]) -> ArrayRef {
    let pool = [0, 1, u64::MAX - 1, u64::MAX, 1 << 63];
    Arc::new(UInt64Array::from(
        seeds
            .iter()
            .map(|&(null, s)| (!null).then_some(pool[(s % 5) as usize]))
            .collect::<Vec<_>>(),
    ))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(256)))]

    /// Keys packed into words by the span of their values (codes straddling words, 65-bit
    /// codes, constant and all-null components, batches of every size) sort as the naive
    /// comparator does, ties in row order.
    #[test]
    fn packed_integer_keys_sort_as_the_naive_comparator(
        types in prop::collection::vec(0usize..15, 1..9),
        seeds in prop::collection::vec((any::<bool>(), any::<u64>()), 0..150),
        cuts in prop::collection::vec(0usize..150, 0..6),
    ) {
        use ravel_layout::normalized_order;
        let n = seeds.len();
        let columns: Vec<ArrayRef> = types
            .iter()
            .enumerate()
            .map(|(k, &t)| {
                // Each component its own values and nulls, from the same seeds.
                let s: Vec<(bool, u64)> = seeds
                    .iter()
                    .map(|&(null, v)| (null && v % 3 == k as u64 % 3, v.rotate_left(7 * k as u32)))
                    .collect();
                if t == 13 {
                    full_range_u64(&s)
                } else if t == 14 {
                    // Date64 (not among the test kit's types): days in milliseconds, signed.
                    Arc::new(Date64Array::from(
                        s.iter()
                            .map(|&(null, v)| (!null).then_some((v % 7) as i64 * 86_400_000 - 1))
                            .collect::<Vec<_>>(),
                    )) as ArrayRef
                } else {
                    ravel_testkit::arbitrary::array(&ravel_testkit::arbitrary::TYPES[t](), &s)
                }
            })
            .collect();
        let mut bounds: Vec<usize> = cuts.into_iter().map(|c| c.min(n)).collect();
        bounds.push(0);
        bounds.push(n);
        bounds.sort_unstable();
        let keys: Vec<Vec<ArrayRef>> = bounds
            .windows(2)
            .map(|w| columns.iter().map(|c| c.slice(w[0], w[1] - w[0])).collect())
            .collect();
        let got = normalized_order(&keys, n).expect("integer keys normalize");
        let mut want: Vec<u32> = (0..n as u32).collect();
        want.sort_by(|&a, &b| {
            columns
                .iter()
                .map(|c| cell(c.as_ref(), a as usize).cmp(&cell(c.as_ref(), b as usize)))
                .find(|o| o.is_ne())
                .unwrap_or(Ordering::Equal)
        });
        prop_assert_eq!(got, want);
    }
}
