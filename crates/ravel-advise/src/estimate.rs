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

mod chunks;
mod cost;
mod scale;

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use arrow::array::{Array, ArrayRef, RecordBatch, UInt32Array};
use arrow::compute::take_record_batch;
use ravel_bloom::Filter;
use ravel_layout::Layout;
use ravel_manifest::{ObjectEntry, ValueRange};
use rayon::prelude::*;

use crate::AdviseError;
use crate::candidates::{Candidate, CandidateKind};

pub use chunks::{ChunkSize, column_totals};
pub use cost::{Cost, StatementEstimate, cost};
pub use scale::{FileColumn, PartScale, Resize, Scale, ScaledChunk, Sizing};

use chunks::{object_rows, object_sizes, summed};

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

/// The objects of a simulated candidate.
pub fn object_count(sim: &Simulated) -> usize {
    sim.objects.len()
}

#[cfg(test)]
mod tests {
    use super::chunks::{properties, with_trial};
    use super::*;
    use crate::statements::Scan;
    use ravel_query::prune::Pruner;

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
