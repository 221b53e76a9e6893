//! The estimate of one candidate: the sample sorted in the candidate's order and cut into as
//! many objects as the table has, each object's value ranges, Bloom filters and column sizes,
//! and, per statement, the objects and bytes that `query`'s pruner (the same code) would read.
//!
//! An object is *kept* when the manifest's ranges of the candidate's layout columns and its
//! Bloom filters allow a match (opening it fetches its footer and page index), and *read* when
//! the statistics of every column the statement filters on allow it too (as DataFusion's
//! row-group pruning does): a read object costs its chunks of the columns the statement reads.
//! Column sizes are the sample's encoded sizes, scaled by the ratio of the table's stored size
//! of each column to the sample's encoded size of it in the table's own order, dictionary page
//! and data pages apart, and resized where a sample of whole groups tells better ([`Sizing`]).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use arrow::array::{Array, ArrayRef, RecordBatch, UInt32Array};
use arrow::compute::take_record_batch;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use ravel_bloom::Filter;
use ravel_layout::Layout;
use ravel_manifest::{ObjectEntry, ValueRange};
use ravel_query::prune::Pruner;
use rayon::prelude::*;
use serde::Serialize;

use crate::AdviseError;
use crate::candidates::{Candidate, CandidateKind};
use crate::statements::Scan;

/// One object of a candidate, simulated on the sample.
struct SimObject {
    /// Ranges of the candidate's layout columns: what its manifest would record.
    manifest: ObjectEntry,
    /// Ranges of every sampled column: what its footer's statistics would say (the order's,
    /// widened where the candidate leads by the column).
    stats: ObjectEntry,
    /// Filters of the candidate's Bloom-scope columns.
    blooms: Vec<(String, Filter)>,
    /// The object's rows and sizes, shared by every candidate of the same order.
    part: Arc<Part>,
}

/// The sample put in one order, cut into the table's objects and encoded: what every
/// candidate that puts the sample in that order shares.
pub struct Encoded {
    sorted: RecordBatch,
    parts: Vec<Arc<Part>>,
    /// Time to gather and encode the sample in this order.
    seconds: f64,
}

/// One object of an [`Encoded`] order.
struct Part {
    /// Ranges of every sampled column.
    stats: ObjectEntry,
    /// Encoded bytes of each sampled column's chunk of this object (the sample's rows only),
    /// with a dictionary where the loader's trial would choose one for the run, and of its
    /// dictionary page.
    sizes: Vec<ChunkSize>,
    /// The object's sampled rows, in the order (for its pages).
    rows: RecordBatch,
    /// The same rows as statements see them (binary columns as strings).
    seen: RecordBatch,
    /// Per sampled column, the value range of each of its pages (`None`: no range), found
    /// once the pages' rows are known and shared by every statement and candidate.
    page_ranges: Vec<OnceLock<Vec<Option<ValueRange>>>>,
}

/// A candidate's objects, simulated.
pub struct Simulated {
    objects: Vec<SimObject>,
    /// Time to sort, gather and encode the sample in this order and build its filters.
    pub seconds: f64,
}

impl Simulated {
    /// The sample's encoded bytes of each sampled column, summed over the objects: the whole
    /// chunks and their dictionary pages.
    pub fn column_totals(&self) -> Vec<ChunkSize> {
        summed(self.objects.iter().map(|o| o.part.sizes.as_slice()))
    }
}

/// The permutation that puts the sample in the candidate's order. Arrival order is
/// approximated by the time column's order (events arrive about in time order); a current
/// layout with no key keeps the sample's own order, which is the table's.
fn order(sample: &RecordBatch, c: &Candidate) -> Result<UInt32Array, AdviseError> {
    let identity = || UInt32Array::from_iter_values(0..sample.num_rows() as u32);
    match (c.kind, &c.layout.clustering_key) {
        (CandidateKind::Arrival, _) => {
            let time = c
                .layout
                .time
                .as_deref()
                .and_then(|t| sample.column_by_name(t));
            match time {
                Some(t) => Ok(arrow::compute::sort_to_indices(t, None, None)?),
                None => Ok(identity()),
            }
        }
        (_, None) => Ok(identity()),
        (_, Some(_)) => Ok(ravel_layout::clustering_permutation(&c.layout, sample)?),
    }
}

/// The strings the statements look up, by column: each is in some object of the table.
pub type Lookups = BTreeMap<String, std::collections::BTreeSet<String>>;

/// What makes two candidates' simulations the same: the order they put the sample in, the
/// columns their manifests record and their Bloom scope (bucket widths that a key column
/// already splits on give the same order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    order: u64,
    layout_columns: Vec<String>,
    bloom_columns: Vec<String>,
    arrival: bool,
}

impl Signature {
    /// Whether the two put the sample in the same order (their encodings are the same).
    pub fn same_order(&self, other: &Signature) -> bool {
        self.order == other.order
    }
}

/// The order candidate `c` puts the sample in.
pub struct Ordered {
    pub signature: Signature,
    pub order: UInt32Array,
}

/// The order and [`Signature`] of candidate `c` on `sample`.
pub fn ordered(sample: &RecordBatch, c: &Candidate) -> Result<Ordered, AdviseError> {
    let order = order(sample, c)?;
    let bytes: Vec<u8> = order
        .values()
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let signature = Signature {
        order: fnv1a(&bytes),
        layout_columns: layout_columns(&c.layout),
        bloom_columns: bloom_columns(&c.layout, sample),
        arrival: c.kind == CandidateKind::Arrival,
    };
    Ok(Ordered { signature, order })
}

/// What the table tells every simulation.
pub struct Table<'a> {
    /// The objects the table has: a simulation cuts the sample into as many.
    pub objects: usize,
    /// The columns the table's objects store with a dictionary page.
    pub dictionaries: &'a std::collections::BTreeSet<String>,
    /// The strings the statements look up, by column.
    pub lookups: &'a Lookups,
}

/// Encodes `sample` (and `seen`, the same rows as statements see them) put in `order`, cut
/// into as many objects as `table` has.
pub fn encode(
    sample: &RecordBatch,
    seen: &RecordBatch,
    order: &UInt32Array,
    table: &Table<'_>,
) -> Result<Encoded, AdviseError> {
    let started = Instant::now();
    let sorted = take_record_batch(sample, order)?;
    let seen = take_record_batch(seen, order)?;
    let sizes = object_sizes(&sorted, table)?;
    let k = sizes.len();
    let parts = sizes
        .into_par_iter()
        .enumerate()
        .map(|(j, sizes)| {
            let rows = object_rows(j, sorted.num_rows(), k);
            part(
                sorted.slice(rows.start, rows.len()),
                seen.slice(rows.start, rows.len()),
                sizes,
            )
        })
        .collect::<Result<Vec<Arc<Part>>, AdviseError>>()?;
    Ok(Encoded {
        sorted,
        parts,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The bytes of each column of `sample` put in `order` and cut into as many objects as `table`
/// has, encoded as [`encode`] does, summed over the objects: the sizes alone, for a sample
/// whose rows only tell how an order compresses.
pub fn column_totals(
    sample: &RecordBatch,
    order: &UInt32Array,
    table: &Table<'_>,
) -> Result<Vec<ChunkSize>, AdviseError> {
    let sorted = take_record_batch(sample, order)?;
    let sizes = object_sizes(&sorted, table)?;
    Ok(summed(sizes.iter().map(Vec::as_slice)))
}

/// Rows `j` of `k` objects cut from `n`.
fn object_rows(j: usize, n: usize, k: usize) -> std::ops::Range<usize> {
    j * n / k..(j + 1) * n / k
}

/// The encoded chunk sizes of each object `sorted` is cut into (as many as `table` has), each
/// column with a dictionary where the loader's trial would choose one for the run.
fn object_sizes(
    sorted: &RecordBatch,
    table: &Table<'_>,
) -> Result<Vec<Vec<ChunkSize>>, AdviseError> {
    let n = sorted.num_rows();
    let k = table.objects.clamp(1, n.max(1));
    let trial = with_trial(sorted, k, &properties()?, table.dictionaries)?;
    (0..k)
        .into_par_iter()
        .map(|j| match j == k / 2 {
            // The trial encoded the middle object both ways: its sizes are the winners'.
            true => Ok(trial.middle.clone()),
            false => {
                let rows = object_rows(j, n, k);
                chunk_sizes(&sorted.slice(rows.start, rows.len()), &trial.props)
            }
        })
        .collect()
}

/// Per column, the sum of the objects' chunk sizes.
fn summed<'a>(objects: impl Iterator<Item = &'a [ChunkSize]> + Clone) -> Vec<ChunkSize> {
    let n = objects.clone().next().map_or(0, <[ChunkSize]>::len);
    (0..n)
        .map(|c| ChunkSize {
            bytes: objects.clone().map(|o| o[c].bytes).sum(),
            dictionary: objects.clone().map(|o| o[c].dictionary).sum(),
        })
        .collect()
}

fn part(
    rows: RecordBatch,
    seen: RecordBatch,
    sizes: Vec<ChunkSize>,
) -> Result<Arc<Part>, AdviseError> {
    let mut stats = entry(rows.num_rows());
    for (f, a) in rows.schema_ref().fields().iter().zip(rows.columns()) {
        if let Some(r) = ravel_manifest::value_range(std::slice::from_ref(a))? {
            stats.ranges.insert(f.name().clone(), r);
        }
    }
    Ok(Arc::new(Part {
        stats,
        sizes,
        page_ranges: (0..rows.num_columns()).map(|_| OnceLock::new()).collect(),
        rows,
        seen,
    }))
}

/// Simulates candidate `c` on the sample `encoded` in its order.
pub fn simulate(
    encoded: &Encoded,
    c: &Candidate,
    table: &Table<'_>,
) -> Result<Simulated, AdviseError> {
    let started = Instant::now();
    let k = encoded.parts.len();
    let layout_columns = layout_columns(&c.layout);
    let bloom_columns = bloom_columns(&c.layout, &encoded.sorted);
    let leading = c.layout.stream.clone().or_else(|| c.layout.time.clone());
    let unseen = place_unseen(
        &encoded.sorted,
        k,
        &bloom_columns,
        leading.as_deref(),
        table.lookups,
    );
    let blooms = Blooms {
        columns: &bloom_columns,
        fpp: c.layout.bloom.fpp,
    };
    let mut sims: Vec<SimObject> = encoded
        .parts
        .par_iter()
        .enumerate()
        .map(|(j, p)| {
            let placed = Placed {
                object: j,
                unseen: &unseen,
            };
            sim_object(p, &layout_columns, blooms, placed)
        })
        .collect();
    if let Some(lead) =
        leading.filter(|_| c.kind == CandidateKind::Arrival || c.layout.clustering_key.is_some())
    {
        tile(&mut sims, &lead);
    }
    Ok(Simulated {
        objects: sims,
        seconds: encoded.seconds + started.elapsed().as_secs_f64(),
    })
}

/// The columns of `sample` that `layout`'s Bloom scope covers.
fn bloom_columns(layout: &Layout, sample: &RecordBatch) -> Vec<String> {
    layout
        .bloom
        .scope
        .columns(sample.schema_ref())
        .into_iter()
        .map(String::from)
        .collect()
}

/// The columns a manifest records ranges of under `layout`.
fn layout_columns(layout: &Layout) -> Vec<String> {
    if layout.clustering_key.is_none() {
        return Vec::new();
    }
    layout
        .sort_columns()
        .into_iter()
        .map(|(_, c)| c.to_string())
        .collect()
}

/// The simulation's writer: zstd at its fastest level, without statistics. Its sizes are scaled
/// to the table's own per column, so only their ratios between orders count, and the fastest
/// level gives those as well (the trial's choice of a dictionary is made at that level too); a
/// simulated object's value ranges are taken from its rows.
fn properties() -> Result<WriterProperties, AdviseError> {
    Ok(WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1)?))
        .set_statistics_enabled(EnabledStatistics::None)
        .set_max_row_group_row_count(None)
        .build())
}

/// A looked-up string no sampled row holds, with the object it is placed in.
struct Unseen {
    column: String,
    value: Vec<u8>,
    object: usize,
}

/// One simulated object's share of the unseen lookups.
struct Placed<'a> {
    object: usize,
    unseen: &'a [Unseen],
}

/// Places each looked-up string of a Bloom-scope column that no sampled row holds in one
/// object: where it sorts when the column leads the order, else one picked by its hash. The
/// table holds the string (a statement looks it up) and a sample of a few percent misses most
/// strings that occur a few times: without this, the simulated filters would drop every
/// object the table's keep.
fn place_unseen(
    sorted: &RecordBatch,
    objects: usize,
    bloom_columns: &[String],
    leading: Option<&str>,
    lookups: &Lookups,
) -> Vec<Unseen> {
    let mut out = Vec::new();
    let n = sorted.num_rows();
    for column in bloom_columns {
        let (Some(wanted), Some(a)) = (lookups.get(column), sorted.column_by_name(column)) else {
            continue;
        };
        let seen: std::collections::HashSet<&[u8]> = (0..n)
            .filter_map(|i| ravel_bloom::value_bytes(a.as_ref(), i))
            .collect();
        for v in wanted.iter().filter(|v| !seen.contains(v.as_bytes())) {
            let object = if Some(column.as_str()) == leading {
                let below = |i: usize| {
                    ravel_bloom::value_bytes(a.as_ref(), i).is_none_or(|x| x < v.as_bytes())
                };
                let at = first_not(n, below);
                (at * objects / n.max(1)).min(objects - 1)
            } else {
                (fnv1a(v.as_bytes()) % objects as u64) as usize
            };
            out.push(Unseen {
                column: column.clone(),
                value: v.as_bytes().to_vec(),
                object,
            });
        }
    }
    out
}

/// The first of `0..n` for which `below` is false (it is true for a prefix only).
fn first_not(n: usize, below: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if below(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// A stable hash of bytes (FNV-1a).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The Bloom filters a candidate writes: its scope's columns, at its false-positive rate.
#[derive(Clone, Copy)]
struct Blooms<'a> {
    columns: &'a [String],
    fpp: f64,
}

fn sim_object(
    part: &Arc<Part>,
    layout_columns: &[String],
    bloom: Blooms<'_>,
    placed: Placed<'_>,
) -> SimObject {
    let mut manifest = entry(part.rows.num_rows());
    for c in layout_columns {
        if let Some(r) = part.stats.ranges.get(c) {
            manifest.ranges.insert(c.clone(), r.clone());
        }
    }
    let blooms = bloom
        .columns
        .iter()
        .filter_map(|c| {
            let extra = placed
                .unseen
                .iter()
                .filter(|u| &u.column == c && u.object == placed.object)
                .map(|u| u.value.as_slice());
            Some((
                c.clone(),
                bloom_of(part.rows.column_by_name(c)?, extra, bloom.fpp),
            ))
        })
        .collect();
    SimObject {
        manifest,
        stats: part.stats.clone(),
        blooms,
        part: part.clone(),
    }
}

/// The schema statements see: binary columns as strings, as the query path registers them.
pub fn seen_schema(schema: &arrow::datatypes::Schema) -> arrow::datatypes::Schema {
    use datafusion::datasource::physical_plan::parquet::{
        transform_binary_to_string, transform_schema_to_view,
    };
    transform_schema_to_view(&transform_binary_to_string(schema))
}

/// `batch` as statements see it: binary columns as strings.
pub fn as_seen(batch: &RecordBatch) -> Result<RecordBatch, AdviseError> {
    let schema = Arc::new(seen_schema(batch.schema_ref()));
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(a, f)| arrow::compute::cast(a, f.data_type()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(RecordBatch::try_new(schema, columns)?)
}

fn entry(rows: usize) -> ObjectEntry {
    ObjectEntry {
        key: String::new(),
        rows: rows as u64,
        bytes: 0,
        run: 0,
        first_key: None,
        last_key: None,
        ranges: BTreeMap::new(),
        delta_stats: None,
    }
}

fn bloom_of<'a>(a: &'a ArrayRef, extra: impl Iterator<Item = &'a [u8]>, fpp: f64) -> Filter {
    let values = (0..a.len())
        .filter_map(|i| ravel_bloom::value_bytes(a.as_ref(), i))
        .chain(extra);
    let bytes = ravel_bloom::of_values(values, fpp);
    Filter::from_bytes(&bytes).expect("a filter just written reads back")
}

/// Bytes of a column chunk, and of its dictionary page among them (0: none).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ChunkSize {
    pub bytes: u64,
    pub dictionary: u64,
}

/// The writer properties of a run in one order, and its middle object's chunk sizes under them.
struct Trial {
    props: WriterProperties,
    middle: Vec<ChunkSize>,
}

/// `props` with each column's dictionary as the loader's trial decides it for a run: encoded
/// with and without one (the middle object's rows, as the loader tries the run's middle rows),
/// the smaller wins. A column of `dictionaries` (the table's objects hold it with one) keeps
/// one: a sample of a few percent repeats few of an object's values, so its trial is biased
/// against a dictionary that the whole object's rows choose.
fn with_trial(
    sorted: &RecordBatch,
    objects: usize,
    props: &WriterProperties,
    dictionaries: &std::collections::BTreeSet<String>,
) -> Result<Trial, AdviseError> {
    let n = sorted.num_rows();
    let k = objects.clamp(1, n.max(1));
    let rows = object_rows(k / 2, n, k);
    let middle = sorted.slice(rows.start, rows.len());
    let plain = props
        .clone()
        .into_builder()
        .set_dictionary_enabled(false)
        .build();
    // Only the columns whose choice is open are tried without one.
    let open: Vec<usize> = (0..middle.num_columns())
        .filter(|&i| !dictionaries.contains(middle.schema_ref().field(i).name()))
        .collect();
    let (with, without) = rayon::join(
        || chunk_sizes(&middle, props),
        || match open.is_empty() {
            true => Ok(Vec::new()),
            false => chunk_sizes(&middle.project(&open)?, &plain),
        },
    );
    let (with, without) = (with?, without?);
    let mut b = props.clone().into_builder();
    let mut sizes = Vec::new();
    for (i, (f, w)) in sorted.schema_ref().fields().iter().zip(with).enumerate() {
        let p = open.iter().position(|&o| o == i).map(|at| without[at]);
        let dictionary = p.is_none_or(|p| w.bytes < p.bytes);
        b = b.set_column_dictionary_enabled(f.name().as_str().into(), dictionary);
        sizes.push(match p {
            Some(p) if !dictionary => p,
            _ => w,
        });
    }
    Ok(Trial {
        props: b.build(),
        middle: sizes,
    })
}

/// Encoded bytes of each column of `slice` written with `props`.
fn chunk_sizes(
    slice: &RecordBatch,
    props: &WriterProperties,
) -> Result<Vec<ChunkSize>, AdviseError> {
    let mut w = ArrowWriter::try_new(Vec::new(), slice.schema(), Some(props.clone()))?;
    w.write(slice)?;
    let meta = w.close()?;
    let names: Vec<&String> = slice
        .schema_ref()
        .fields()
        .iter()
        .map(|f| f.name())
        .collect();
    let mut out = vec![ChunkSize::default(); names.len()];
    for rg in meta.row_groups() {
        for c in rg.columns() {
            let top = &c.column_path().parts()[0];
            if let Some(i) = names.iter().position(|n| *n == top) {
                out[i].bytes += c.compressed_size() as u64;
                if let Some(d) = c.dictionary_page_offset() {
                    out[i].dictionary += (c.data_page_offset() - d).max(0) as u64;
                }
            }
        }
    }
    Ok(out)
}

/// Widens each object's range of the leading sort column up to the next object's start: the
/// table's objects cover every value between the sample's, and a value between two sampled
/// objects lies in one of them.
fn tile(sims: &mut [SimObject], column: &str) {
    for j in 0..sims.len().saturating_sub(1) {
        let Some(next) = sims[j + 1].stats.ranges.get(column).map(|r| r.min.clone()) else {
            continue;
        };
        for e in [&mut sims[j].manifest, &mut sims[j].stats] {
            if let Some(r) = e.ranges.get_mut(column) {
                *r = ValueRange {
                    min: r.min.clone(),
                    max: next.clone(),
                };
            }
        }
    }
}

/// What one statement would cost under a candidate.
#[derive(Debug, Clone, Serialize)]
pub struct StatementEstimate {
    pub line: usize,
    pub weight: u64,
    /// Objects the manifest keeps (opened).
    pub kept: usize,
    /// Objects whose chunks are read.
    pub read: usize,
    pub objects: usize,
    /// Bytes fetched, opening the table included.
    pub bytes: u64,
}

/// The scale from the sample's encoded bytes of a column to the table's, of its dictionary
/// page and of the rest apart: for a column of many distinct values, a sample of a few percent
/// holds about as many distinct values as rows, so its dictionary is a far larger share of the
/// chunk than the table's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PartScale {
    pub dictionary: f64,
    pub data: f64,
}

impl PartScale {
    /// The scale that makes `simulated` (the sample in the table's own order) the table's
    /// `stored` bytes: of each part apart where both have a dictionary, else of the whole.
    pub fn new(simulated: ChunkSize, stored: ChunkSize) -> PartScale {
        let ratio = |real: u64, sim: u64| {
            if sim == 0 {
                0.0
            } else {
                real as f64 / sim as f64
            }
        };
        let whole = ratio(stored.bytes, simulated.bytes);
        let parts = simulated.dictionary > 0
            && stored.dictionary > 0
            && simulated.bytes > simulated.dictionary
            && stored.bytes > stored.dictionary;
        if !parts {
            return PartScale {
                dictionary: whole,
                data: whole,
            };
        }
        PartScale {
            dictionary: ratio(stored.dictionary, simulated.dictionary),
            data: ratio(
                stored.bytes - stored.dictionary,
                simulated.bytes - simulated.dictionary,
            ),
        }
    }

    /// The table's bytes of a simulated chunk (and of its dictionary page).
    pub fn scaled(&self, chunk: ChunkSize) -> ScaledChunk {
        let dictionary = chunk.dictionary as f64 * self.dictionary;
        ScaledChunk {
            bytes: dictionary + chunk.bytes.saturating_sub(chunk.dictionary) as f64 * self.data,
            dictionary,
        }
    }
}

/// A chunk's bytes scaled to the table's, and its dictionary page's among them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScaledChunk {
    pub bytes: f64,
    pub dictionary: f64,
}

/// The scale from the sample's encoded bytes of each column to the table's.
pub struct Scale {
    /// Per sampled column.
    pub per_column: Vec<PartScale>,
    /// Per sampled column, the sample's rows in one of the table's pages of it.
    pub page_rows: Vec<f64>,
    /// Bytes a kept object costs to open (footer and page index, as the query path reads
    /// them).
    pub open_object: f64,
    /// Bytes opening the table costs (its log and manifests).
    pub open_table: u64,
    /// The table's columns in file order: where each sampled column's chunk lies in an
    /// object.
    pub file_columns: Vec<FileColumn>,
    /// Bytes of one object's filter of a column in a Bloom sidecar.
    pub bloom_bytes: BTreeMap<String, f64>,
}

/// How a candidate's chunks are sized: the scale shared by every candidate, and the
/// candidate's own factor per file column (none: 1), from a sample of whole groups where its
/// order puts the rows of a group together (see [`crate::groups`]).
#[derive(Clone, Copy)]
pub struct Sizing<'a> {
    pub scale: &'a Scale,
    pub resize: &'a [Resize],
}

impl Sizing<'_> {
    /// File column `f`'s factor (none: 1).
    pub fn of(&self, f: usize) -> Resize {
        self.resize.get(f).copied().unwrap_or(Resize::NONE)
    }
}

/// The factors on a chunk's dictionary page and on the rest of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Resize {
    pub dictionary: f64,
    pub data: f64,
}

impl Resize {
    pub const NONE: Resize = Resize {
        dictionary: 1.0,
        data: 1.0,
    };

    /// `chunk` resized, its dictionary page and the rest apart.
    pub fn apply(&self, chunk: ScaledChunk) -> ScaledChunk {
        let dictionary = chunk.dictionary * self.dictionary;
        ScaledChunk {
            bytes: dictionary + (chunk.bytes - chunk.dictionary) * self.data,
            dictionary,
        }
    }
}

/// One column of the table's files.
#[derive(Debug, Clone)]
pub struct FileColumn {
    pub name: String,
    /// Its index in the sample, if sampled (its size then follows the candidate's order);
    /// otherwise its stored size stands.
    pub sampled: Option<usize>,
    /// Mean stored bytes in an object (for a column not sampled).
    pub bytes: f64,
    /// The sample's rows in one of the table's pages of it.
    pub page_rows: f64,
    /// The share of its chunk that its dictionary page takes (read with any data page), for a
    /// column not sampled.
    pub dictionary_share: f64,
}

/// The cost of `scan` under the simulated candidate: objects kept by the manifest are opened;
/// of those the footer's statistics keep, the pages that the page index keeps (by the
/// filters' columns) are read, of each column the statement reads, at the sizes `sizing`
/// gives.
pub fn cost(
    sim: &Simulated,
    scan: &Scan,
    pruner: &Pruner,
    sizing: Sizing<'_>,
    columns: &[String],
) -> Cost {
    let scale = sizing.scale;
    let equality = pruner.equality_columns(&scan.filters);
    let read_columns: Vec<usize> = scale
        .file_columns
        .iter()
        .enumerate()
        .filter(|(_, f)| scan.columns.contains(&f.name))
        .map(|(i, _)| i)
        .collect();
    let filter_columns: Vec<usize> = columns
        .iter()
        .enumerate()
        .filter(|(_, c)| scan.filtered.contains(*c))
        .map(|(i, _)| i)
        .collect();
    let predicate = predicate(&scan.filters, sim);
    let mut kept = 0;
    let mut read = 0;
    let mut bytes = scale.open_table as f64 + sidecar_bytes(sim, scan, pruner, scale, &equality);
    for o in &sim.objects {
        let blooms: Vec<(&str, &Filter)> = o
            .blooms
            .iter()
            .filter(|(c, _)| equality.contains(c))
            .map(|(c, f)| (c.as_str(), f))
            .collect();
        if !pruner.may_match_with(&o.manifest, &blooms, &scan.filters) {
            continue;
        }
        kept += 1;
        bytes += scale.open_object;
        if !pruner.may_match_with(&o.stats, &blooms, &scan.filters) {
            continue;
        }
        read += 1;
        let selected = selected_rows(o, &filter_columns, pruner, scale, &scan.filters);
        let matching = matching_rows(o, predicate.as_ref(), &selected);
        // Filter columns are read first, where the page index keeps rows, each in a request
        // of its own; the others then only where rows pass the filters (the query path pushes
        // filters into the scan), in one request.
        let (first, then): (Vec<usize>, Vec<usize>) = read_columns.iter().partition(|&&f| {
            scale.file_columns[f]
                .sampled
                .is_some_and(|c| filter_columns.contains(&c))
        });
        // Each filter column is its own predicate, fetched on its own.
        bytes += first
            .iter()
            .map(|&f| fetched(o, sizing, &[f], &selected))
            .sum::<f64>();
        bytes += match &scan.top_k {
            None => fetched(o, sizing, &then, &matching),
            // A top-k reads its sort columns where rows pass; its bound then skips the rows
            // of the rest but a few (left out).
            Some(keys) => {
                let sort: Vec<usize> = then
                    .iter()
                    .copied()
                    .filter(|&f| keys.contains(&scale.file_columns[f].name))
                    .collect();
                fetched(o, sizing, &sort, &matching)
            }
        };
    }
    Cost {
        kept,
        read,
        bytes: bytes.round() as u64,
    }
}

/// Bytes of the sidecar sections a statement reads: of each column it looks up that has
/// filters, every object's filter, when any object is in play by its ranges.
fn sidecar_bytes(
    sim: &Simulated,
    scan: &Scan,
    pruner: &Pruner,
    scale: &Scale,
    equality: &std::collections::BTreeSet<String>,
) -> f64 {
    let Some(first) = sim.objects.first() else {
        return 0.0;
    };
    let columns: Vec<&String> = first
        .blooms
        .iter()
        .map(|(c, _)| c)
        .filter(|c| equality.contains(*c))
        .collect();
    let in_play = sim
        .objects
        .iter()
        .any(|o| pruner.may_match(&o.manifest, &scan.filters));
    if columns.is_empty() || !in_play {
        return 0.0;
    }
    let objects = sim.objects.len() as f64;
    columns
        .iter()
        .map(|c| scale.bloom_bytes.get(*c).copied().unwrap_or(0.0) * objects)
        .sum()
}

/// The object's rows that the page index keeps: for each filter column, the rows of its pages
/// whose range may match; a row is kept when every filter column keeps it.
fn selected_rows(
    o: &SimObject,
    filter_columns: &[usize],
    pruner: &Pruner,
    scale: &Scale,
    filters: &[datafusion::prelude::Expr],
) -> Vec<bool> {
    let n = o.part.rows.num_rows();
    let mut keep = vec![true; n];
    let schema = o.part.rows.schema();
    for &c in filter_columns {
        let name = schema.field(c).name();
        let ranges = o.part.page_ranges[c].get_or_init(|| {
            let column = o.part.rows.column(c);
            pages(n, scale.page_rows[c])
                .map(|p| {
                    ravel_manifest::value_range(&[column.slice(p.start, p.len())])
                        .ok()
                        .flatten()
                })
                .collect()
        });
        for (page, range) in pages(n, scale.page_rows[c]).zip(ranges) {
            let mut e = entry(page.len());
            if let Some(r) = range {
                e.ranges.insert(name.clone(), r.clone());
            }
            if !pruner.may_match(&e, filters) {
                keep[page].iter_mut().for_each(|k| *k = false);
            }
        }
    }
    keep
}

/// The statement's filters as one predicate over the rows as statements see them; `None`
/// when there are none or they do not plan here (then every kept row counts as passing).
fn predicate(
    filters: &[datafusion::prelude::Expr],
    sim: &Simulated,
) -> Option<Arc<dyn datafusion::physical_expr::PhysicalExpr>> {
    use datafusion::common::tree_node::{Transformed, TreeNode};
    use datafusion::prelude::Expr;
    let schema = sim.objects.first()?.part.seen.schema();
    let expr = datafusion::logical_expr::utils::conjunction(filters.iter().cloned())?;
    // The filters name the table's scan; the rows here are unqualified.
    let expr = expr
        .transform(|e| match e {
            Expr::Column(c) => Ok(Transformed::yes(Expr::Column(
                datafusion::common::Column::new_unqualified(c.name),
            ))),
            other => Ok(Transformed::no(other)),
        })
        .ok()?
        .data;
    let df_schema = datafusion::common::DFSchema::try_from(schema.as_ref().clone()).ok()?;
    let props = datafusion::execution::context::ExecutionProps::new();
    let ctx =
        datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext::default();
    match datafusion::physical_expr::create_physical_expr(&expr, &df_schema, &props, &ctx) {
        Ok(p) => Some(p),
        Err(e) => {
            tracing::debug!(error = %e, "a statement's filters do not evaluate on the sample");
            None
        }
    }
}

/// The selected rows that pass the predicate.
fn matching_rows(
    o: &SimObject,
    predicate: Option<&Arc<dyn datafusion::physical_expr::PhysicalExpr>>,
    selected: &[bool],
) -> Vec<bool> {
    let Some(p) = predicate else {
        return selected.to_vec();
    };
    let passing = p
        .evaluate(&o.part.seen)
        .and_then(|v| v.into_array(o.part.seen.num_rows()))
        .ok()
        .and_then(|a| {
            a.as_any()
                .downcast_ref::<arrow::array::BooleanArray>()
                .cloned()
        });
    match passing {
        Some(b) => selected
            .iter()
            .enumerate()
            .map(|(i, &s)| s && b.is_valid(i) && b.value(i))
            .collect(),
        None => selected.to_vec(),
    }
}

/// Row ranges of pages of `page_rows` rows (at least one) over `n` rows.
fn pages(n: usize, page_rows: f64) -> impl Iterator<Item = std::ops::Range<usize>> {
    let count = ((n as f64 / page_rows.max(1.0)).ceil() as usize).clamp(1, n.max(1));
    (0..count).map(move |k| k * n / count..(k + 1) * n / count)
}

/// Bytes fetched for the pages of `columns` that hold a row of `rows`, in one request as the
/// query path makes it: each column's pages at their place in the object, ranges closer than
/// object_store's coalescing gap fetched as one.
fn fetched(o: &SimObject, sizing: Sizing<'_>, columns: &[usize], rows: &[bool]) -> f64 {
    let scale = sizing.scale;
    let n = rows.len();
    if columns.is_empty() || n == 0 {
        return 0.0;
    }
    let mut ranges: Vec<(f64, f64)> = Vec::new();
    let mut at = 0.0;
    for (f, fc) in scale.file_columns.iter().enumerate() {
        let chunk = match fc.sampled {
            Some(c) => scale.per_column[c].scaled(o.part.sizes[c]),
            None => ScaledChunk {
                bytes: fc.bytes,
                dictionary: fc.bytes * fc.dictionary_share,
            },
        };
        let ScaledChunk {
            bytes: size,
            dictionary,
        } = sizing.of(f).apply(chunk);
        if columns.contains(&f) {
            let all: Vec<std::ops::Range<usize>> = pages(n, fc.page_rows).collect();
            let mut hit: Vec<&std::ops::Range<usize>> = all
                .iter()
                .filter(|p| rows[(*p).clone()].iter().any(|&s| s))
                .collect();
            // Statistics kept the object, so a matching row may lie between sampled rows: at
            // least one page is read.
            if hit.is_empty() {
                hit.push(&all[all.len() / 2]);
            }
            if dictionary > 0.0 {
                ranges.push((at, at + dictionary));
            }
            let data = at + dictionary;
            let per_row = (size - dictionary) / n as f64;
            ranges.extend(hit.iter().map(|p| {
                (
                    data + p.start as f64 * per_row,
                    data + p.end as f64 * per_row,
                )
            }));
        }
        at += size;
    }
    coalesced(ranges)
}

/// Total bytes of `ranges` once those closer than object_store's gap are fetched as one.
fn coalesced(mut ranges: Vec<(f64, f64)>) -> f64 {
    let gap = object_store::OBJECT_STORE_COALESCE_DEFAULT as f64;
    ranges.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut total = 0.0;
    let mut current: Option<(f64, f64)> = None;
    for (start, end) in ranges {
        current = match current {
            Some((s, e)) if start - e <= gap => Some((s, e.max(end))),
            Some((s, e)) => {
                total += e - s;
                Some((start, end))
            }
            None => Some((start, end)),
        };
    }
    total + current.map_or(0.0, |(s, e)| e - s)
}

/// Objects kept and read, and bytes fetched, by one statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cost {
    pub kept: usize,
    pub read: usize,
    pub bytes: u64,
}

/// The objects of a simulated candidate.
pub fn object_count(sim: &Simulated) -> usize {
    sim.objects.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(bytes: u64, dictionary: u64) -> ChunkSize {
        ChunkSize { bytes, dictionary }
    }

    #[test]
    fn a_dictionary_scales_apart_from_the_rest_of_its_chunk() {
        // The sample's chunk is mostly dictionary; the table's is mostly data pages.
        let s = PartScale::new(chunk(1_000, 600), chunk(40_000, 8_000));
        let own = s.scaled(chunk(1_000, 600));
        assert!((own.bytes - 40_000.0).abs() < 1e-6, "{own:?}");
        assert!((own.dictionary - 8_000.0).abs() < 1e-6, "{own:?}");
        // Another order: twice the sample's dictionary, the same data pages.
        let other = s.scaled(chunk(1_600, 1_200));
        assert!((other.dictionary - 16_000.0).abs() < 1e-6, "{other:?}");
        assert!((other.bytes - 48_000.0).abs() < 1e-6, "{other:?}");
    }

    #[test]
    fn without_a_dictionary_on_either_side_the_whole_chunk_scales() {
        let s = PartScale::new(chunk(1_000, 0), chunk(30_000, 0));
        assert_eq!(s.dictionary, 30.0);
        assert_eq!(s.data, 30.0);
        // Where the table's order gives the sample no dictionary, the whole chunk's ratio
        // scales one that another order brings.
        let s = PartScale::new(chunk(1_000, 0), chunk(30_000, 5_000));
        let other = s.scaled(chunk(800, 300));
        assert!((other.bytes - 24_000.0).abs() < 1e-6, "{other:?}");
        assert!((other.dictionary - 9_000.0).abs() < 1e-6, "{other:?}");
        assert_eq!(PartScale::new(chunk(0, 0), chunk(10, 0)).data, 0.0);
        // A sample's chunk that is all dictionary has no data pages to scale apart.
        let s = PartScale::new(chunk(500, 500), chunk(40_000, 8_000));
        assert_eq!((s.dictionary, s.data), (80.0, 80.0));
    }

    #[test]
    fn candidates_of_one_order_share_its_encoding_and_keep_their_own_filters() {
        use arrow::array::{ArrayRef, Int64Array, StringArray};
        use ravel_layout::{Bloom, BloomScope, BucketWidth, ClusteringKey};
        let n = 4_000;
        let batch = RecordBatch::try_from_iter([
            (
                "k",
                Arc::new(Int64Array::from_iter_values((0..n).map(|i| i * 7_919 % n))) as ArrayRef,
            ),
            (
                "s",
                Arc::new(StringArray::from_iter_values(
                    (0..n).map(|i| format!("v{}", i % 13)),
                )) as ArrayRef,
            ),
        ])
        .unwrap();
        let order = arrow::compute::sort_to_indices(batch.column(0), None, None).unwrap();
        let seen = as_seen(&batch).unwrap();
        let (none, lookups) = (std::collections::BTreeSet::new(), Lookups::new());
        let table = Table {
            objects: 4,
            dictionaries: &none,
            lookups: &lookups,
        };
        let encoded = encode(&batch, &seen, &order, &table).unwrap();
        let candidate = |scope: BloomScope, time: Option<&str>| Candidate {
            name: scope.to_string(),
            kind: CandidateKind::Generated,
            layout: Layout {
                time: time.map(String::from),
                clustering_key: Some(ClusteringKey {
                    columns: vec!["k".into()],
                    bucket_width: BucketWidth::from_seconds(86_400).unwrap(),
                }),
                bloom: Bloom { scope, fpp: 0.01 },
                ..Layout::default()
            },
        };
        // A candidate led by `k` widens its objects' ranges of it to the next object's start.
        let led = simulate(&encoded, &candidate(BloomScope::None, Some("k")), &table).unwrap();
        let scope = BloomScope::Columns(vec!["s".into()]);
        let filtered = simulate(&encoded, &candidate(scope, None), &table).unwrap();
        let bare = simulate(&encoded, &candidate(BloomScope::None, None), &table).unwrap();
        assert_eq!(filtered.objects.len(), 4);
        for (f, b) in filtered.objects.iter().zip(&bare.objects) {
            assert!(Arc::ptr_eq(&f.part, &b.part), "one encoding");
            assert_eq!(f.part.sizes, b.part.sizes);
            assert_eq!(f.manifest.ranges.keys().collect::<Vec<_>>(), ["k"]);
            assert_eq!((f.blooms.len(), b.blooms.len()), (1, 0));
        }
        // The objects hold the order's runs of `k`; the widening stays the leading candidate's.
        let max = |s: &Simulated, j: usize| s.objects[j].stats.ranges["k"].max.as_i64();
        assert_eq!((max(&led, 0), max(&bare, 0)), (Some(1_000), Some(999)));
        assert_eq!(
            filtered.objects[1].stats.ranges["k"].min.as_i64(),
            Some(1_000)
        );
    }

    #[test]
    fn a_resize_takes_the_dictionary_page_and_the_data_pages_apart() {
        let k = Resize {
            dictionary: 0.5,
            data: 2.0,
        };
        let chunk = ScaledChunk {
            bytes: 100.0,
            dictionary: 40.0,
        };
        let resized = k.apply(chunk);
        assert_eq!(resized.dictionary, 20.0);
        assert_eq!(resized.bytes, 20.0 + 120.0);
        assert_eq!(Resize::NONE.apply(chunk), chunk);
    }

    #[test]
    fn a_candidates_resize_scales_the_bytes_its_statements_fetch() {
        use arrow::array::{ArrayRef, Int64Array};
        let n = 4_000;
        let column = |f: fn(i64) -> i64| Arc::new(Int64Array::from_iter_values((0..n).map(f)));
        let batch = RecordBatch::try_from_iter([
            ("k", column(|i| i * 7_919 % 4_000) as ArrayRef),
            ("v", column(|i| i % 13) as ArrayRef),
        ])
        .unwrap();
        let order = arrow::compute::sort_to_indices(batch.column(0), None, None).unwrap();
        let (none, lookups) = (std::collections::BTreeSet::new(), Lookups::new());
        let table = Table {
            objects: 2,
            dictionaries: &none,
            lookups: &lookups,
        };
        let encoded = encode(&batch, &as_seen(&batch).unwrap(), &order, &table).unwrap();
        let candidate = Candidate {
            name: "arrival".into(),
            kind: CandidateKind::Arrival,
            layout: Layout::default(),
        };
        let sim = simulate(&encoded, &candidate, &table).unwrap();
        let file_column = |name: &str, c: usize| FileColumn {
            name: name.into(),
            sampled: Some(c),
            bytes: 0.0,
            page_rows: 100.0,
            dictionary_share: 0.0,
        };
        let scale = Scale {
            per_column: vec![PartScale::new(chunk(1, 0), chunk(1, 0)); 2],
            page_rows: vec![100.0; 2],
            open_object: 0.0,
            open_table: 0,
            file_columns: vec![file_column("k", 0), file_column("v", 1)],
            bloom_bytes: BTreeMap::new(),
        };
        // A scan of both columns, every row.
        let scan = Scan {
            filters: Vec::new(),
            columns: ["k".to_string(), "v".to_string()].into(),
            group_by: Default::default(),
            filtered: Default::default(),
            top_k: None,
            predicates: Vec::new(),
        };
        let pruner = Pruner::new(batch.schema_ref());
        let names = ["k".to_string(), "v".to_string()];
        let bytes = |factors: &[f64]| {
            let resize: Vec<Resize> = factors
                .iter()
                .map(|&k| Resize {
                    dictionary: k,
                    data: k,
                })
                .collect();
            let resize = resize.as_slice();
            let sizing = Sizing {
                scale: &scale,
                resize,
            };
            cost(&sim, &scan, &pruner, sizing, &names).bytes as f64
        };
        let totals = sim.column_totals();
        let (k, v) = (totals[0].bytes as f64, totals[1].bytes as f64);
        assert!(
            (bytes(&[]) - (k + v)).abs() <= 1.0,
            "{} of {k} + {v}",
            bytes(&[])
        );
        assert!((bytes(&[2.0, 2.0]) - 2.0 * (k + v)).abs() <= 1.0);
        assert!((bytes(&[3.0]) - (3.0 * k + v)).abs() <= 1.0, "no factor: 1");
    }

    #[test]
    fn a_column_the_table_stores_with_a_dictionary_keeps_one() {
        use arrow::array::{ArrayRef, StringArray};
        // Every value distinct: on these rows alone a dictionary does not pay.
        let words = StringArray::from_iter_values((0..4_000).map(|i| format!("{i:08}")));
        let batch = RecordBatch::try_from_iter([("w", Arc::new(words) as ArrayRef)]).unwrap();
        let props = properties().unwrap();
        let none = std::collections::BTreeSet::new();
        let plain = with_trial(&batch, 1, &props, &none).unwrap();
        assert_eq!(plain.middle[0].dictionary, 0, "the trial alone picks none");
        let stored = std::collections::BTreeSet::from(["w".to_string()]);
        let kept = with_trial(&batch, 1, &props, &stored).unwrap();
        assert!(kept.middle[0].dictionary > 0, "{:?}", kept.middle);
    }
}
