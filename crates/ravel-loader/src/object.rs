//! Objects: a sorted run cut into Parquet files of exactly one row group each, closed when the
//! writer's encoded-size estimate reaches the target.

use arrow::array::{Array, ArrayRef, RecordBatch};
use arrow::datatypes::SchemaRef;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::{KeyValue, ParquetMetaData, SortingColumn};
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterPropertiesBuilder};
use parquet::schema::types::ColumnPath;
use ravel_encode::ParallelWriter;
use ravel_layout::{ClusteringOrder, Layout};
use serde_json::Value;

use crate::{ArrowStage, LoadError};

/// Rows handed to the writer between two size checks. Each hand-over encodes the 105 hits
/// columns as parallel tasks and waits for the slowest; at 8,192 rows that overhead made a
/// 2M-row load take 8.0–8.9 s, at 16k–64k rows 6.3–7.6 s (runs of each setting interleaved on
/// one machine).
/// 32,768 rows of hits are about 1.8 MB stored; for small objects the hand-over shrinks to an
/// eighth of the object's predicted rows (at least 64), so sizes stay close to the target.
const CHUNK_ROWS: usize = 32_768;

/// One encoded object, not yet stored: a Parquet file of one row group and what the manifest
/// and the Bloom sidecar record of it.
#[derive(Debug)]
pub struct EncodedObject {
    pub bytes: bytes::Bytes,
    pub rows: usize,
    /// The clustering key of its first and last row (`None` in arrival order).
    pub first_key: Option<Vec<Value>>,
    pub last_key: Option<Vec<Value>>,
    /// The value range of each of the layout's sort columns.
    pub ranges: std::collections::BTreeMap<String, ravel_manifest::ValueRange>,
    /// The object's Bloom filter of each of the run's Bloom columns, in their order, as the
    /// object stores it (empty: no filter).
    pub blooms: Vec<Vec<u8>>,
    /// Its statistics as a Delta `add` carries them (see [`ravel_log::delta_stats`]); `None`
    /// for spill.
    pub delta_stats: Option<String>,
}

/// Rows of the run encoded both ways to decide whether a column's dictionary pays.
pub(crate) const DICTIONARY_TRIAL_ROWS: usize = 32_768;

/// Whether a dictionary makes this column smaller: the window (contiguous rows of the run, as
/// an object holds them) is encoded with and without one, zstd included, and the smaller
/// wins. Measured rather than guessed from a distinct count: on hits, URL-like strings repeat
/// enough for a dictionary to save 40 %, while sorted ids (UserID, ClientIP) that repeat just
/// as often compress better without one. A tie goes to no dictionary, which is cheaper to
/// write.
///
/// Returns whether the dictionary won and the winner's size in bytes (which also predicts an
/// object's stored size per row).
pub(crate) fn trial(window: &[ArrayRef], compression: Compression) -> Result<Trial, LoadError> {
    let size = |dictionary| encoded_size(window, compression, dictionary);
    let (with, without) = (size(true)?, size(false)?);
    Ok(Trial {
        dictionary: with < without,
        bytes: with.min(without),
    })
}

/// Stored bytes of a column window (pieces of one column) encoded on its own.
fn encoded_size(
    window: &[ArrayRef],
    compression: Compression,
    dictionary: bool,
) -> Result<usize, LoadError> {
    let Some(first) = window.first() else {
        return Ok(0);
    };
    let field = arrow::datatypes::Field::new("c", first.data_type().clone(), true);
    let schema = std::sync::Arc::new(arrow::datatypes::Schema::new(vec![field]));
    let props = WriterProperties::builder()
        .set_compression(compression)
        .set_statistics_enabled(EnabledStatistics::None)
        .set_dictionary_enabled(dictionary)
        .set_dictionary_page_size_limit(usize::MAX)
        .build();
    let mut w = parquet::arrow::ArrowWriter::try_new(Vec::new(), schema.clone(), Some(props))?;
    for a in window {
        let batch = RecordBatch::try_new(schema.clone(), vec![a.clone()])
            .map_err(LoadError::arrow(ArrowStage::Encoding))?;
        w.write(&batch)?;
    }
    Ok(w.into_inner()?.len())
}

/// A column's dictionary trial: whether the dictionary won, and the winner's bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Trial {
    pub dictionary: bool,
    pub bytes: usize,
}

/// A run: its rows in the order they are written (a sorted run is its gathered batches; an
/// arrival-order run is the buffered batches as they came).
pub struct Run {
    pub(crate) schema: SchemaRef,
    pub(crate) batches: Vec<RecordBatch>,
    /// First run position of each batch.
    starts: Vec<usize>,
    rows: usize,
}

impl Run {
    /// A run of `batches` (of `schema`), their rows in the order they are to be written.
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

    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The `(batch, row)` at position `i` of the run.
    fn origin(&self, i: usize) -> (usize, usize) {
        let b = self.starts.partition_point(|&s| s <= i) - 1;
        (b, i - self.starts[b])
    }

    /// Positions `start..start + len` of the run as pieces of its batches.
    fn pieces(&self, start: usize, len: usize) -> impl Iterator<Item = RecordBatch> + '_ {
        let end = start + len;
        let mut at = start;
        std::iter::from_fn(move || {
            (at < end).then(|| {
                let (b, r) = self.origin(at);
                let n = (self.batches[b].num_rows() - r).min(end - at);
                at += n;
                self.batches[b].slice(r, n)
            })
        })
    }

    /// Column `c` at positions `start..start + len` of the run, as slices of its batches.
    fn window(&self, c: usize, start: usize, len: usize) -> Vec<ArrayRef> {
        self.pieces(start, len)
            .map(|p| p.column(c).clone())
            .collect()
    }

    /// Encodes positions `start..start + len` of the run.
    fn write(
        &self,
        w: &mut ParallelWriter<Vec<u8>>,
        start: usize,
        len: usize,
    ) -> Result<(), LoadError> {
        for piece in self.pieces(start, len) {
            w.write(&piece)?;
        }
        Ok(())
    }
}

/// The writer settings of the objects cut from one sorted run.
#[derive(Debug, Clone)]
pub(crate) struct RunProperties {
    pub props: WriterProperties,
    /// The stored bytes a row costs, as the run's dictionary trials measured them.
    pub bytes_per_row: f64,
}

/// Writer properties of the objects cut from one sorted run: zstd, page statistics, each
/// column's dictionary by trial, Bloom filters on the layout's scope, the sorting column and
/// the layout's metadata.
pub(crate) fn writer_properties(
    layout: &Layout,
    run: &Run,
    zstd_level: i32,
    object_bytes: u64,
) -> Result<RunProperties, LoadError> {
    use rayon::prelude::*;
    let schema = run.schema.as_ref();
    let compression = Compression::ZSTD(ZstdLevel::try_new(zstd_level)?);
    let mut b = WriterProperties::builder()
        .set_compression(compression)
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_max_row_group_row_count(None)
        .set_bloom_filter_enabled(false);
    let len = DICTIONARY_TRIAL_ROWS.min(run.num_rows());
    let start = (run.num_rows() - len) / 2;
    let trials = (0..schema.fields().len())
        .into_par_iter()
        .map(|c| trial(&run.window(c, start, len), compression))
        .collect::<Result<Vec<Trial>, _>>()?;
    let bytes_per_row = trials.iter().map(|t| t.bytes).sum::<usize>() as f64 / len.max(1) as f64;
    for (field, trial) in schema.fields().iter().zip(trials) {
        b = with_dictionary(b, field.name(), trial, object_bytes);
    }
    b = with_blooms(b, layout, run, object_bytes as f64 / bytes_per_row);
    b = with_layout_metadata(b, layout, schema);
    Ok(RunProperties {
        props: b.build(),
        bytes_per_row,
    })
}

/// `b` with column `name`'s dictionary as its trial chose: on, for the whole column chunk (no
/// fallback to plain half-way through an object of `object_bytes`), or off.
pub(crate) fn with_dictionary(
    b: WriterPropertiesBuilder,
    name: &str,
    trial: Trial,
    object_bytes: u64,
) -> WriterPropertiesBuilder {
    let path = ColumnPath::from(name);
    if trial.dictionary {
        b.set_column_dictionary_page_size_limit(path, (object_bytes as usize / 2).max(1 << 20))
    } else {
        b.set_column_dictionary_enabled(path, false)
    }
}

/// Properties of objects that only a merge reads back (see [`crate::ObjectKind::Spill`]):
/// LZ4, plain encoding, no statistics or Bloom filters; the offset index stays, so that a
/// merge can fetch a slice of rows by their pages. A trial of the middle rows measures the
/// stored bytes per row.
pub(crate) fn spill_properties(run: &Run) -> Result<RunProperties, LoadError> {
    use rayon::prelude::*;
    let schema = run.schema.as_ref();
    let len = DICTIONARY_TRIAL_ROWS.min(run.num_rows());
    let start = (run.num_rows() - len) / 2;
    let bytes = (0..schema.fields().len())
        .into_par_iter()
        .map(|c| encoded_size(&run.window(c, start, len), Compression::LZ4_RAW, false))
        .collect::<Result<Vec<usize>, _>>()?;
    let props = WriterProperties::builder()
        .set_compression(Compression::LZ4_RAW)
        .set_statistics_enabled(EnabledStatistics::None)
        .set_max_row_group_row_count(None)
        .set_dictionary_enabled(false)
        .set_bloom_filter_enabled(false)
        .build();
    Ok(RunProperties {
        props,
        bytes_per_row: bytes.iter().sum::<usize>() as f64 / len.max(1) as f64,
    })
}

/// Bloom filters on the layout's scope columns. A filter is allocated for `max_ndv` distinct
/// values and folded down to the object's actual distinct count at the layout's fpp when the
/// column closes. An object holds about `rows_per_object` rows; twice that bounds its distinct
/// values without allocating (and folding) filters sized for the whole run.
fn with_blooms(
    b: WriterPropertiesBuilder,
    layout: &Layout,
    run: &Run,
    rows_per_object: f64,
) -> WriterPropertiesBuilder {
    let object_rows = if rows_per_object.is_finite() {
        2.0 * rows_per_object
    } else {
        f64::INFINITY
    };
    let bloom_ndv = (run.num_rows() as f64).min(object_rows) as u64;
    let mut b = b;
    for name in layout.bloom.scope.columns(run.schema.as_ref()) {
        let path = ColumnPath::from(name);
        b = b
            .set_column_bloom_filter_enabled(path.clone(), true)
            .set_column_bloom_filter_fpp(path.clone(), layout.bloom.fpp)
            .set_column_bloom_filter_max_ndv(path, bloom_ndv.max(1));
    }
    b
}

/// The sorting column and the layout's generation and sort key as key-value metadata.
fn with_layout_metadata(
    b: WriterPropertiesBuilder,
    layout: &Layout,
    schema: &arrow::datatypes::Schema,
) -> WriterPropertiesBuilder {
    let mut b = b;
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
    b.set_key_value_metadata(Some(kv))
}

/// Output buffers of the objects, each made while the object before it encodes.
///
/// An object is copied into its buffer column chunk by column chunk on one thread while the
/// other cores wait. Into fresh memory that copy also takes a page fault per 4 KiB page: 5-125
/// ms for a 25 MB object (varying with the kernel's state) instead of the copy's 3-13. So when
/// rows are expected to remain after an object, a rayon task allocates the next buffer and
/// writes over it (faulting its pages in) beside that object's column encoders. Every buffer
/// has room for half again the target, so an object over the target does not outgrow it (a
/// grown buffer is copied and faulted anew).
///
/// Nothing waits for the task: a buffer not ready when its object starts (or never sent) is
/// replaced by a fresh allocation, so this cannot block a rayon worker or hang the load.
struct Buffers {
    capacity: usize,
    /// Bytes of a prepared buffer faulted in ahead: the target and a tenth, at most.
    touch: usize,
    /// Whether a prepared buffer is on its way (at most one at a time).
    pending: bool,
    ready: std::sync::mpsc::Receiver<Vec<u8>>,
    tx: std::sync::mpsc::Sender<Vec<u8>>,
}

impl Buffers {
    fn new(object_bytes: u64) -> Buffers {
        let (tx, ready) = std::sync::mpsc::channel();
        Buffers {
            capacity: object_bytes as usize * 3 / 2 + (1 << 20),
            touch: object_bytes as usize * 11 / 10,
            pending: false,
            ready,
            tx,
        }
    }

    /// A buffer for the next object (the prepared one if it is ready); when `after` (the
    /// stored bytes the rows after this object are expected to take) is not zero, a buffer
    /// for the object after it is prepared, faulted in up to that size.
    fn next(&mut self, after: usize) -> Vec<u8> {
        let buf = match self.ready.try_recv() {
            Ok(buf) => {
                self.pending = false;
                buf
            }
            Err(_) => Vec::with_capacity(self.capacity),
        };
        if after > 0 && !self.pending {
            let (tx, capacity, touch) = (self.tx.clone(), self.capacity, self.touch.min(after));
            self.pending = true;
            rayon::spawn(move || {
                let mut buf = Vec::with_capacity(capacity);
                buf.resize(touch, 0);
                buf.clear();
                let _ = tx.send(buf); // the run may have ended without it
            });
        }
        buf
    }
}

/// The object's filter of each field in `bloom_columns`, as the object stores it: the sidecar's
/// entries. A filter the writer filled (string and binary columns) is the one it handed over
/// (`filled`, per row group, per field); one parquet-rs filled itself (e.g. FixedSizeBinary)
/// is read back out of the encoded object.
pub(crate) fn object_blooms(
    bloom_columns: &[usize],
    filled: Vec<Vec<Option<Vec<u8>>>>,
    bytes: &[u8],
    meta: &ParquetMetaData,
) -> Vec<Vec<u8>> {
    // With more row groups, no one group's filter holds the object's values: none.
    let mut filled = match <[_; 1]>::try_from(filled) {
        Ok([group]) => group,
        Err(_) => Vec::new(),
    };
    let descr = meta.file_metadata().schema_descr();
    bloom_columns
        .iter()
        .map(|&c| {
            if let Some(filter) = filled.get_mut(c).and_then(Option::take) {
                return filter;
            }
            (0..descr.num_columns())
                .find(|&leaf| descr.get_column_root_idx(leaf) == c)
                .map(|leaf| ravel_bloom::from_object(bytes, meta, leaf))
                .unwrap_or_default()
        })
        .collect()
}

/// What [`cut_run`] needs besides the run: the run's clustering order (for the objects' first
/// and last keys), the columns whose ranges and Bloom filters the manifest and sidecar carry,
/// the writer settings and the target size.
pub(crate) struct CutSettings<'a> {
    pub order: Option<&'a ClusteringOrder>,
    /// Columns (indices in the run's schema) whose value range each object records.
    pub range_columns: &'a [usize],
    /// Columns (indices in the run's schema) whose filter each object hands to the sidecar.
    pub bloom_columns: &'a [usize],
    /// Columns (indices in the run's schema) whose statistics each object's Delta `add`
    /// carries; empty: no Delta statistics (spill).
    pub stats_columns: &'a [usize],
    pub props: &'a WriterProperties,
    pub object_bytes: u64,
    /// The stored cost of a row, as the dictionary trials measured it.
    pub bytes_per_row: f64,
    /// Sort keys no object reaches across (see [`crate::EncodeSettings::cuts`]).
    pub cuts: &'a [Value],
}

/// What cutting a run learned and spent.
pub(crate) struct CutStats {
    /// Stored / estimated object size after this run (see [`cut_run`]).
    pub calibration: Option<f64>,
    /// Seconds spent collecting the objects' Bloom filters.
    pub blooms_s: f64,
    /// Objects emitted.
    pub objects: usize,
}

/// An object's rows written and closed, before its ranges and filters are taken.
struct Written {
    bytes: Vec<u8>,
    meta: ParquetMetaData,
    /// The filters the writer filled (see [`ParallelWriter::take_bloom_filters`]).
    filled: Vec<Vec<Option<Vec<u8>>>>,
    /// Run position after the object's last row.
    end: usize,
    /// The writer's estimate of the object's size when it closed.
    estimate: usize,
    first_key: Option<Vec<Value>>,
    last_key: Option<Vec<Value>>,
}

fn key_at(run: &Run, key_cols: &[Vec<ArrayRef>], i: usize) -> Vec<Value> {
    let (b, r) = run.origin(i);
    key_cols[b]
        .iter()
        .map(|c| ravel_manifest::key_value(c.as_ref(), r))
        .collect()
}

/// Cuts a sorted run into objects of about `object_bytes`, calling `emit` with each as soon as
/// it is encoded. Every object has exactly one row group; only the last may be smaller.
///
/// The writer's running estimate counts the open pages uncompressed, so it overshoots the
/// stored size. `calibration` (stored / estimated, of the objects closed so far; `None` before
/// the first) scales the threshold; the updated value is returned for the next run. Before
/// that, the load's first object is cut at `object_bytes / bytes_per_row` rows, the stored
/// cost of a row that the dictionary trials measured; only when that misses the target by more
/// than 20 % is the object encoded again.
pub(crate) fn cut_run(
    run: &Run,
    s: &CutSettings<'_>,
    calibration: Option<f64>,
    mut emit: impl FnMut(EncodedObject) -> Result<(), LoadError>,
) -> Result<CutStats, LoadError> {
    let key_cols = match s.order {
        Some(o) => Some(
            run.batches
                .iter()
                .map(|b| o.key_columns(b))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        None => None,
    };
    let mut stats = CutStats {
        calibration,
        blooms_s: 0.0,
        objects: 0,
    };
    let mut buffers = Buffers::new(s.object_bytes);
    let ends = cut_positions(run, &key_cols, s.cuts);
    let mut start = 0;
    while start < run.num_rows() {
        let next = ends.partition_point(|&e| e <= start);
        let limit = ends.get(next).copied().unwrap_or(run.num_rows());
        let at = Position { start, limit };
        let written = write_object(run, s, at, stats.calibration, &mut buffers, &key_cols)?;
        if calibrate(
            &mut stats.calibration,
            &written,
            start,
            limit,
            s.object_bytes,
        ) {
            continue; // encode this object again with the calibrated threshold
        }
        let end = written.end;
        emit(finish_object(run, s, start, written, &mut stats.blooms_s)?)?;
        stats.objects += 1;
        start = end;
    }
    Ok(stats)
}

/// Run positions an object must end at: per cut key, the first row at or above it.
fn cut_positions(run: &Run, key_cols: &Option<Vec<Vec<ArrayRef>>>, cuts: &[Value]) -> Vec<usize> {
    let Some(cols) = key_cols else {
        return Vec::new();
    };
    let n = run.num_rows();
    let mut ends: Vec<usize> = cuts
        .iter()
        .filter_map(Value::as_array)
        .map(|cut| {
            let (mut lo, mut hi) = (0, n);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if ravel_manifest::compare_keys(&key_at(run, cols, mid), cut).is_lt() {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            lo
        })
        .filter(|&e| e > 0 && e < n)
        .collect();
    ends.sort_unstable();
    ends.dedup();
    ends
}

/// Where an object starts in its run, and the position it may not reach.
#[derive(Debug, Clone, Copy)]
struct Position {
    start: usize,
    limit: usize,
}

/// Rows handed to the writer at a time: an eighth of an object's predicted rows, 64 to
/// [`CHUNK_ROWS`].
fn chunk_rows(s: &CutSettings<'_>) -> usize {
    if s.bytes_per_row > 0.0 {
        (s.object_bytes as f64 / s.bytes_per_row / 8.0).clamp(64.0, CHUNK_ROWS as f64) as usize
    } else {
        CHUNK_ROWS
    }
}

/// Writes the object that starts at run position `start`: rows until the writer's estimate
/// reaches the (calibrated) target, its first and last keys in the footer, closed.
fn write_object(
    run: &Run,
    s: &CutSettings<'_>,
    at: Position,
    calibration: Option<f64>,
    buffers: &mut Buffers,
    key_cols: &Option<Vec<Vec<ArrayRef>>>,
) -> Result<Written, LoadError> {
    let start = at.start;
    let n = run.num_rows();
    // The stored bytes of the rows after this object, as the trial encodings predict them.
    let after = ((n - start) as f64 * s.bytes_per_row * 1.1) as usize;
    let after = after.saturating_sub(s.object_bytes as usize);
    let mut w = ParallelWriter::try_new(
        buffers.next(after),
        run.schema.clone(),
        s.props.clone(),
        usize::MAX,
    )?;
    let Filled { end, estimate } = fill(&mut w, run, s, at, calibration)?;
    let (first_key, last_key) = match key_cols {
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
    w.flush()?;
    let filled = w.take_bloom_filters();
    let (mut bytes, meta) = w.finish()?;
    bytes.shrink_to_fit(); // the spare room goes back before the object waits for upload
    Ok(Written {
        bytes,
        meta,
        filled,
        end,
        estimate,
        first_key,
        last_key,
    })
}

/// Where an object's rows end and the writer's estimate of its size then.
struct Filled {
    end: usize,
    estimate: usize,
}

/// Writes rows from `at.start` until the object is full or reaches `at.limit`.
fn fill(
    w: &mut ParallelWriter<Vec<u8>>,
    run: &Run,
    s: &CutSettings<'_>,
    at: Position,
    calibration: Option<f64>,
) -> Result<Filled, LoadError> {
    let (start, n) = (at.start, at.limit);
    let chunk_rows = chunk_rows(s);
    let threshold = s.object_bytes as f64 / calibration.unwrap_or(1.0);
    // Before any object calibrates the estimate, the first one is cut at the row count the
    // trial encodings predict.
    let first_rows = match calibration {
        None if s.bytes_per_row > 0.0 => Some((s.object_bytes as f64 / s.bytes_per_row) as usize),
        _ => None,
    };
    let mut end = start;
    let mut estimate = 0usize;
    while end < n {
        let len = chunk_rows.min(n - end);
        run.write(w, end, len)?;
        end += len;
        estimate = w.estimated_group_bytes();
        let full = match first_rows {
            Some(rows) => end - start >= rows,
            None => estimate as f64 >= threshold,
        };
        if full {
            break;
        }
    }
    Ok(Filled { end, estimate })
}

/// Learns from a full-size object how the writer's estimate relates to the stored size.
/// Returns true when the object is to be encoded again: the load's first object, cut by the
/// trials' prediction, missed its target by more than 20 %.
fn calibrate(
    calibration: &mut Option<f64>,
    written: &Written,
    start: usize,
    n: usize,
    object_bytes: u64,
) -> bool {
    if written.end >= n || written.estimate == 0 {
        return false; // the run's last object says nothing about full ones
    }
    let stored = written.bytes.len();
    let seen = stored as f64 / written.estimate as f64;
    let first = calibration.is_none();
    *calibration = Some(match *calibration {
        None => seen.clamp(0.2, 5.0),
        Some(c) => (0.5 * c + 0.5 * seen).clamp(0.2, 5.0),
    });
    let miss = stored as f64 / object_bytes as f64;
    let again = first && !(0.8..=1.2).contains(&miss);
    if again {
        tracing::debug!(
            stored,
            estimate = written.estimate,
            rows = written.end - start,
            "first object missed its target; encoding it again"
        );
    }
    again
}

/// The object written at `start..written.end` with the manifest's value ranges and the
/// sidecar's filters (the seconds taken collecting these are added to `blooms_s`).
fn finish_object(
    run: &Run,
    s: &CutSettings<'_>,
    start: usize,
    written: Written,
    blooms_s: &mut f64,
) -> Result<EncodedObject, LoadError> {
    let end = written.end;
    let mut ranges = std::collections::BTreeMap::new();
    for &c in s.range_columns {
        let range = ravel_manifest::value_range(&run.window(c, start, end - start))
            .map_err(LoadError::arrow(ArrowStage::ComputingRanges))?;
        if let Some(r) = range {
            ranges.insert(run.schema.field(c).name().clone(), r);
        }
    }
    let t = std::time::Instant::now();
    let blooms = object_blooms(
        s.bloom_columns,
        written.filled,
        &written.bytes,
        &written.meta,
    );
    *blooms_s += t.elapsed().as_secs_f64();
    let delta_stats = (!s.stats_columns.is_empty())
        .then(|| ravel_log::delta_stats(&written.meta, &run.schema, s.stats_columns));
    Ok(EncodedObject {
        bytes: bytes::Bytes::from(written.bytes),
        rows: end - start,
        first_key: written.first_key,
        last_key: written.last_key,
        ranges,
        blooms,
        delta_stats,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{BinaryArray, Int64Array};
    use std::sync::Arc;

    /// The sidecar's filters handed over by the writer are the bytes each encoded object
    /// stores, for every Bloom column type (FixedSizeBinary's are read back).
    #[test]
    fn handed_over_bloom_filters_are_the_ones_the_object_stores() {
        use arrow::array::{FixedSizeBinaryArray, LargeStringArray, StringArray, StringViewArray};
        use arrow::datatypes::{DataType, Field, Schema};
        let schema = Arc::new(Schema::new(vec![
            Field::new("s", DataType::Utf8, true),
            Field::new("b", DataType::Binary, false),
            Field::new("l", DataType::LargeUtf8, false),
            Field::new("v", DataType::Utf8View, true),
            Field::new("f", DataType::FixedSizeBinary(4), false),
            Field::new("i", DataType::Int64, false),
        ]));
        let n = 20_000i64;
        let text = |i: i64| format!("value-{}", (i / 5) % 700);
        let strings: Vec<Option<String>> = (0..n).map(|i| (i % 13 != 0).then(|| text(i))).collect();
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(strings.clone())) as ArrayRef,
                Arc::new(BinaryArray::from_iter_values(
                    (0..n).map(|i| text(i * 7).into_bytes()),
                )),
                Arc::new(LargeStringArray::from_iter_values(
                    (0..n).map(|i| text(i / 3)),
                )),
                Arc::new(StringViewArray::from(strings)),
                Arc::new(
                    FixedSizeBinaryArray::try_from_iter(
                        (0..n).map(|i| ((i / 9) as u32).to_le_bytes()),
                    )
                    .unwrap(),
                ),
                Arc::new(Int64Array::from_iter_values(0..n)),
            ],
        )
        .unwrap();
        let layout = Layout {
            bloom: ravel_layout::Bloom {
                scope: ravel_layout::BloomScope::All,
                fpp: 0.01,
            },
            ..Layout::default()
        };
        let run = Run::new(schema.clone(), vec![batch]);
        let object_bytes = 5_000;
        let RunProperties {
            props,
            bytes_per_row,
        } = writer_properties(&layout, &run, 3, object_bytes).unwrap();
        let bloom_columns = [0, 1, 2, 3, 4];
        let mut objects = Vec::new();
        let settings = CutSettings {
            order: None,
            range_columns: &[],
            stats_columns: &[],
            bloom_columns: &bloom_columns,
            props: &props,
            object_bytes,
            bytes_per_row,
            cuts: &[],
        };
        let stats = cut_run(&run, &settings, None, |o| {
            objects.push(o);
            Ok(())
        })
        .unwrap();
        assert_eq!(stats.objects, objects.len());
        assert!(objects.len() > 2, "several objects: {}", objects.len());
        for o in &objects {
            let reader =
                parquet::file::serialized_reader::SerializedFileReader::new(o.bytes.clone())
                    .unwrap();
            let meta = parquet::file::reader::FileReader::metadata(&reader);
            let read_back: Vec<Vec<u8>> = bloom_columns
                .iter()
                .map(|&leaf| ravel_bloom::from_object(&o.bytes, meta, leaf))
                .collect();
            assert!(
                read_back.iter().all(|f| !f.is_empty()),
                "every column has a filter"
            );
            assert_eq!(o.blooms, read_back);
        }
    }

    #[test]
    fn dictionaries_only_where_they_make_the_column_smaller() {
        let zstd = Compression::ZSTD(ZstdLevel::try_new(3).unwrap());
        let pays = |a: ArrayRef| trial(&[a], zstd).unwrap().dictionary;
        // Unique ids: a dictionary only adds its indices.
        assert!(!pays(Arc::new(Int64Array::from_iter_values(
            (0..32_768).map(|i| i * 7919)
        ))));
        // Long strings drawn at random from a few hundred: the dictionary stores each once.
        let mut x = 1u64;
        let urls: Vec<String> = (0..32_768)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let k = (x >> 33) % 300;
                format!("http://example.org/{}/page?id={}", k * 7, k * 13)
            })
            .collect();
        assert!(pays(Arc::new(BinaryArray::from_iter_values(
            urls.iter().map(|s| s.as_bytes())
        ))));
        // Several slices are one window.
        let ids: Vec<String> = (0..32_768).map(|i| format!("id-{i}")).collect();
        let ids: ArrayRef = Arc::new(BinaryArray::from_iter_values(
            ids.iter().map(|s| s.as_bytes()),
        ));
        assert!(
            !trial(&[ids.slice(0, 100), ids.slice(100, 30_000)], zstd)
                .unwrap()
                .dictionary
        );
    }
}
