//! Arbitrary tables and layouts for property tests: every integer width, timestamps of every
//! unit, dates, strings and bytes; nulls in every column; values from small pools (so that
//! duplicate keys and whole-key ties are common) plus extremes (i64::MIN/MAX times, pre-1970);
//! empty strings; batches cut into empty, one-row, tiny and large pieces.

use std::sync::Arc;

use arrow::array::*;
use arrow::datatypes::*;
use proptest::prelude::*;
use ravel_layout::{Bloom, BloomScope, BucketWidth, ClusteringKey, Layout};

/// Cases to run: `PROPTEST_CASES` when set (for soaks), else `default`. (An explicit
/// `ProptestConfig::with_cases` would ignore the variable.)
pub fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The column types an arbitrary table draws from.
pub const TYPES: [fn() -> DataType; 17] = [
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
    || DataType::Timestamp(TimeUnit::Microsecond, Some("+02:00".into())),
    || DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
    || DataType::Utf8,
    || DataType::LargeUtf8,
    || DataType::LargeBinary,
    || DataType::Binary,
];
/// Indices into [`TYPES`] of the types a time column may have.
pub const TIME_TYPES: [usize; 10] = [0, 3, 4, 7, 8, 9, 10, 11, 12, 2];

/// Values drawn from a small pool, so that duplicates and whole-key ties are common, plus
/// extremes.
pub fn array(dt: &DataType, seeds: &[(bool, u64)]) -> ArrayRef {
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
        DataType::Timestamp(TimeUnit::Microsecond, tz) => {
            let v = ints(i64::MIN as i128, i64::MAX as i128);
            Arc::new(
                TimestampMicrosecondArray::from(
                    v.into_iter()
                        .map(|o| o.map(|x| x as i64))
                        .collect::<Vec<_>>(),
                )
                .with_timezone_opt(tz.clone()),
            )
        }
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
        DataType::LargeUtf8 => Arc::new(LargeStringArray::from(
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

/// An arbitrary table and layout: columns `c0…` of [`TYPES`], a time column `time`, an
/// optional stream column, 1–4 key columns, a bucket width, a Bloom scope, and how the rows
/// are cut into batches.
#[derive(Debug, Clone)]
pub struct Case {
    /// Column types of the table (column i is named c{i}), indices into [`TYPES`].
    pub types: Vec<usize>,
    pub time_type: usize,
    pub stream: Option<usize>,
    pub keys: Vec<usize>,
    pub bucket: u64,
    /// (null?, value seed) per row, per column (the time column last).
    pub cells: Vec<Vec<(bool, u64)>>,
    /// 0: no Bloom filters, 1: text columns, 2: every column.
    pub bloom: u8,
    /// Batch sizes, used in turn until the rows run out (0: an empty batch).
    pub pieces: Vec<usize>,
    /// Whether the layout has the clustering key (else the table keeps arrival order).
    pub clustered: bool,
}

/// Arbitrary cases of up to `max_rows` rows.
pub fn case(max_rows: usize) -> impl Strategy<Value = Case> {
    (
        1usize..=6,
        0usize..TIME_TYPES.len(),
        0usize..max_rows,
        proptest::sample::select(vec![1u64, 59, 3_600, 86_400, 604_800]),
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
            let pieces = proptest::collection::vec(
                prop_oneof![Just(0usize), Just(1usize), 2usize..10, 50usize..400],
                1..8,
            );
            (
                (types, Just(time_type), stream, keys, Just(bucket), cells),
                (0u8..3, pieces, proptest::bool::weighted(0.85)),
            )
        })
        .prop_map(
            |((types, time_type, stream, keys, bucket, cells), (bloom, pieces, clustered))| {
                let keys: Vec<usize> = keys.into_iter().filter(|k| Some(*k) != stream).collect();
                Case {
                    types,
                    time_type,
                    stream,
                    keys,
                    bucket,
                    cells,
                    bloom,
                    pieces,
                    clustered,
                }
            },
        )
        .prop_filter("at least one key column", |c| !c.keys.is_empty())
}

/// The case's layout and its rows as one batch.
pub fn build(c: &Case) -> (Layout, RecordBatch) {
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
        time: Some("time".into()),
        clustering_key: c.clustered.then(|| ClusteringKey {
            columns: names,
            bucket_width: BucketWidth::from_seconds(c.bucket).unwrap(),
        }),
        bloom: Bloom {
            scope: match c.bloom {
                0 => BloomScope::None,
                1 => BloomScope::Text,
                _ => BloomScope::All,
            },
            ..Layout::default().bloom
        },
        ..Layout::default()
    };
    (l, batch)
}

/// The batch cut into the case's pieces, in order, the pieces used in turn (at least once
/// each, so empty pieces give empty batches even for an empty table).
pub fn split(c: &Case, batch: &RecordBatch) -> Vec<RecordBatch> {
    let n = batch.num_rows();
    let mut out = Vec::new();
    let mut at = 0;
    for (i, &piece) in c.pieces.iter().cycle().enumerate() {
        if i >= c.pieces.len() {
            if at == n {
                break;
            }
            if c.pieces.iter().all(|&p| p == 0) {
                out.push(batch.slice(at, n - at));
                break;
            }
        }
        let len = piece.min(n - at);
        out.push(batch.slice(at, len));
        at += len;
    }
    out
}
