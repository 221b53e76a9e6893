//! Objects: a sorted run cut into Parquet files of exactly one row group each, closed when the
//! writer's encoded-size estimate reaches the target.

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::{KeyValue, SortingColumn};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;
use ravel_encode::ParallelWriter;
use ravel_layout::{ClusteringOrder, Layout};
use serde_json::Value;

use crate::LoadError;

/// Rows handed to the writer between two size checks.
const CHUNK_ROWS: usize = 8192;

/// One encoded object, not yet stored.
#[derive(Debug)]
pub(crate) struct Encoded {
    pub bytes: bytes::Bytes,
    pub rows: usize,
    pub first_key: Option<Vec<Value>>,
    pub last_key: Option<Vec<Value>>,
}

/// Rows sampled per column to decide whether its dictionary pays.
const DICTIONARY_SAMPLE: usize = 8192;
/// Distinct share of the sample above which a column is written without a dictionary.
const DICTIONARY_MAX_DISTINCT: f64 = 0.5;

/// Whether a dictionary pays for a column of this run: fewer than half of the sampled values
/// are distinct. High-cardinality columns (ids, hashes, times) otherwise build a dictionary,
/// overflow it and fall back to PLAIN, paying for both.
fn dictionary_pays(arrays: &[&dyn Array]) -> bool {
    use std::collections::HashSet;
    use std::hash::{BuildHasher, Hash, Hasher};
    let n: usize = arrays.iter().map(|a| a.len()).sum();
    if n == 0 {
        return true;
    }
    let step = n.div_ceil(DICTIONARY_SAMPLE).max(1);
    let state = std::collections::hash_map::RandomState::new();
    let mut seen = HashSet::with_capacity(DICTIONARY_SAMPLE);
    let mut sampled = 0usize;
    let (mut next, mut base) = (0usize, 0usize);
    for a in arrays {
        let data = a.to_data();
        let width = data.data_type().primitive_width();
        while next < base + a.len() {
            let i = next - base;
            next += step;
            let mut h = state.build_hasher();
            if a.is_null(i) {
                0u8.hash(&mut h);
            } else if let Some(w) = width {
                let at = (data.offset() + i) * w;
                data.buffers()[0].as_slice()[at..at + w].hash(&mut h);
            } else {
                match a.data_type() {
                    DataType::Binary => a.as_binary::<i32>().value(i).hash(&mut h),
                    DataType::LargeBinary => a.as_binary::<i64>().value(i).hash(&mut h),
                    DataType::Utf8 => a.as_string::<i32>().value(i).hash(&mut h),
                    DataType::LargeUtf8 => a.as_string::<i64>().value(i).hash(&mut h),
                    _ => return true,
                }
            }
            seen.insert(h.finish());
            sampled += 1;
        }
        base += a.len();
    }
    (seen.len() as f64) < DICTIONARY_MAX_DISTINCT * sampled as f64
}

/// A run: its rows in the order they are written (a sorted run is one gathered batch; an
/// arrival-order run is the buffered batches as they came).
pub(crate) struct Run {
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
    /// First run position of each batch.
    starts: Vec<usize>,
    rows: usize,
}

impl Run {
    pub fn new(schema: SchemaRef, batches: Vec<RecordBatch>) -> Run {
        let mut starts = Vec::with_capacity(batches.len());
        let mut rows = 0;
        for b in &batches {
            starts.push(rows);
            rows += b.num_rows();
        }
        Run {
            schema,
            batches,
            starts,
            rows,
        }
    }

    pub fn num_rows(&self) -> usize {
        self.rows
    }

    /// The `(batch, row)` at position `i` of the run.
    fn origin(&self, i: usize) -> (usize, usize) {
        let b = self.starts.partition_point(|&s| s <= i) - 1;
        (b, i - self.starts[b])
    }

    /// Encodes positions `start..start + len` of the run.
    fn write(
        &self,
        w: &mut ParallelWriter<Vec<u8>>,
        start: usize,
        len: usize,
    ) -> Result<(), LoadError> {
        let (mut at, end) = (start, start + len);
        while at < end {
            let (b, r) = self.origin(at);
            let n = (self.batches[b].num_rows() - r).min(end - at);
            w.write(&self.batches[b].slice(r, n))?;
            at += n;
        }
        Ok(())
    }
}

/// Writer properties of the objects cut from one sorted run.
pub(crate) fn writer_properties(
    layout: &Layout,
    run: &Run,
    zstd_level: i32,
) -> Result<WriterProperties, LoadError> {
    let schema = run.schema.as_ref();
    let bloom_ndv = run.num_rows() as u64;
    let mut b = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(zstd_level)?))
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_max_row_group_row_count(None)
        .set_bloom_filter_enabled(false);
    for (c, field) in schema.fields().iter().enumerate() {
        let arrays: Vec<&dyn Array> = run.batches.iter().map(|b| b.column(c).as_ref()).collect();
        if !dictionary_pays(&arrays) {
            b = b.set_column_dictionary_enabled(ColumnPath::from(field.name().as_str()), false);
        }
    }
    for name in layout.bloom.scope.columns(schema) {
        let path = ColumnPath::from(name);
        b = b
            .set_column_bloom_filter_enabled(path.clone(), true)
            .set_column_bloom_filter_fpp(path.clone(), layout.bloom.fpp)
            .set_column_bloom_filter_max_ndv(path, bloom_ndv.max(1));
    }
    // Only the stream column is declared: the rows are sorted by (stream, time bucket, key…,
    // time), and the bucket is no column, so no longer prefix of real columns is sorted.
    if layout.clustering_key.is_some()
        && let Some(stream) = &layout.stream
        && let Ok(idx) = schema.index_of(stream)
    {
        b = b.set_sorting_columns(Some(vec![SortingColumn {
            column_idx: idx as i32,
            descending: false,
            nulls_first: true,
        }]));
    }
    let mut kv = vec![KeyValue::new(
        "ravel.layout_generation".into(),
        layout.generation.to_string(),
    )];
    if layout.clustering_key.is_some() {
        kv.push(KeyValue::new(
            "ravel.sort_key".into(),
            layout.sort_key_names().join(", "),
        ));
    }
    b = b.set_key_value_metadata(Some(kv));
    Ok(b.build())
}

/// A sort key value as JSON: integers and temporal values as numbers (in the column's own
/// unit), strings as strings, bytes as lowercase hex, null as null.
pub(crate) fn key_value(a: &dyn Array, i: usize) -> Value {
    use arrow::datatypes::*;
    if a.is_null(i) {
        return Value::Null;
    }
    macro_rules! num {
        ($t:ty) => {
            Value::from(a.as_primitive::<$t>().value(i))
        };
    }
    match a.data_type() {
        DataType::Int8 => num!(Int8Type),
        DataType::Int16 => num!(Int16Type),
        DataType::Int32 => num!(Int32Type),
        DataType::Int64 => num!(Int64Type),
        DataType::UInt8 => num!(UInt8Type),
        DataType::UInt16 => num!(UInt16Type),
        DataType::UInt32 => num!(UInt32Type),
        DataType::UInt64 => num!(UInt64Type),
        DataType::Float32 => num!(Float32Type),
        DataType::Float64 => num!(Float64Type),
        DataType::Date32 => num!(Date32Type),
        DataType::Date64 => num!(Date64Type),
        DataType::Timestamp(TimeUnit::Second, _) => num!(TimestampSecondType),
        DataType::Timestamp(TimeUnit::Millisecond, _) => num!(TimestampMillisecondType),
        DataType::Timestamp(TimeUnit::Microsecond, _) => num!(TimestampMicrosecondType),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => num!(TimestampNanosecondType),
        DataType::Boolean => Value::from(a.as_boolean().value(i)),
        DataType::Utf8 => Value::from(a.as_string::<i32>().value(i)),
        DataType::LargeUtf8 => Value::from(a.as_string::<i64>().value(i)),
        DataType::Utf8View => Value::from(a.as_string_view().value(i)),
        DataType::Binary => hex(a.as_binary::<i32>().value(i)),
        DataType::LargeBinary => hex(a.as_binary::<i64>().value(i)),
        DataType::BinaryView => hex(a.as_binary_view().value(i)),
        DataType::FixedSizeBinary(_) => hex(a.as_fixed_size_binary().value(i)),
        other => Value::from(format!("<{other}>")),
    }
}

fn hex(b: &[u8]) -> Value {
    Value::from(b.iter().map(|x| format!("{x:02x}")).collect::<String>())
}

fn key_at(run: &Run, key_cols: &[Vec<ArrayRef>], i: usize) -> Vec<Value> {
    let (b, r) = run.origin(i);
    key_cols[b]
        .iter()
        .map(|c| key_value(c.as_ref(), r))
        .collect()
}

/// Cuts a sorted run into objects of about `object_bytes`, calling `emit` with each as soon as
/// it is encoded. Every object has exactly one row group; only the last may be smaller.
///
/// The writer's running estimate counts the open pages uncompressed, so it overshoots the
/// stored size. `calibration` (stored / estimated, of the objects closed so far; `None` before
/// the first) scales the threshold; the updated value is returned for the next run. The
/// load's first full object is encoded again when the uncalibrated estimate missed the target
/// by more than 15 %, so that no object pays for the estimator's first guess.
pub(crate) fn cut_run(
    run: &Run,
    order: Option<&ClusteringOrder>,
    props: &WriterProperties,
    object_bytes: u64,
    calibration: Option<f64>,
    mut emit: impl FnMut(Encoded) -> Result<(), LoadError>,
) -> Result<Option<f64>, LoadError> {
    let mut calibration = calibration;
    let key_cols = match order {
        Some(o) => Some(
            run.batches
                .iter()
                .map(|b| o.key_columns(b))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        None => None,
    };
    let schema = run.schema.clone();
    let n = run.num_rows();
    let mut start = 0;
    while start < n {
        let mut w = ParallelWriter::try_new(
            Vec::with_capacity(object_bytes as usize + (1 << 20)),
            schema.clone(),
            props.clone(),
            usize::MAX,
        )?;
        let threshold = object_bytes as f64 / calibration.unwrap_or(1.0);
        let mut end = start;
        let mut estimate = 0usize;
        while end < n {
            let len = CHUNK_ROWS.min(n - end);
            run.write(&mut w, end, len)?;
            end += len;
            estimate = w.estimated_group_bytes();
            if estimate as f64 >= threshold {
                break;
            }
        }
        let (first_key, last_key) = match &key_cols {
            Some(cols) => (
                Some(key_at(run, cols, start)),
                Some(key_at(run, cols, end - 1)),
            ),
            None => (None, None),
        };
        if let (Some(f), Some(l)) = (&first_key, &last_key) {
            w.append_key_value_metadata(KeyValue::new(
                "ravel.first_key".into(),
                Value::from(f.clone()).to_string(),
            ));
            w.append_key_value_metadata(KeyValue::new(
                "ravel.last_key".into(),
                Value::from(l.clone()).to_string(),
            ));
        }
        let bytes = w.into_inner()?;
        if end < n && estimate > 0 {
            // A full-size object: learn how the estimate relates to the stored size.
            let seen = bytes.len() as f64 / estimate as f64;
            let first = calibration.is_none();
            calibration = Some(match calibration {
                None => seen.clamp(0.2, 5.0),
                Some(c) => (0.5 * c + 0.5 * seen).clamp(0.2, 5.0),
            });
            let miss = bytes.len() as f64 / object_bytes as f64;
            if first && !(0.85..=1.15).contains(&miss) {
                continue; // encode this object again with the calibrated threshold
            }
        }
        emit(Encoded {
            bytes: bytes::Bytes::from(bytes),
            rows: end - start,
            first_key,
            last_key,
        })?;
        start = end;
    }
    Ok(calibration)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{BinaryArray, Int64Array};

    #[test]
    fn dictionaries_only_where_values_repeat() {
        let unique = Int64Array::from_iter_values(0..100_000);
        let repeated = Int64Array::from_iter_values((0..100_000).map(|i| i % 1000));
        assert!(!dictionary_pays(&[&unique]));
        assert!(dictionary_pays(&[&repeated]));
        let urls: Vec<String> = (0..50_000)
            .map(|i| format!("http://x/{}", i % 300))
            .collect();
        let urls = BinaryArray::from_iter_values(urls.iter().map(|s| s.as_bytes()));
        assert!(dictionary_pays(&[&urls]));
        let ids: Vec<String> = (0..50_000).map(|i| format!("id-{i}")).collect();
        let ids = BinaryArray::from_iter_values(ids.iter().map(|s| s.as_bytes()));
        assert!(!dictionary_pays(&[&ids]));
        // Sliced arrays read their own window.
        let sliced = repeated.slice(500, 10_000);
        assert!(dictionary_pays(&[&sliced]));
        assert!(!dictionary_pays(&[&unique.slice(5_000, 50_000)]));
        // Several arrays are sampled as one.
        let halves = [unique.slice(0, 50_000), unique.slice(50_000, 50_000)];
        assert!(!dictionary_pays(&[&halves[0], &halves[1]]));
        assert!(dictionary_pays(&[&repeated.slice(0, 7), &repeated]));
    }
}
