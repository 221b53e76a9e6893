//! A load published globally sorted, read and encoded one column at a time: the price of one
//! pass, where sorting in runs and merging them costs two.
//!
//! Parquet inputs can be read column by column. The layout's sort columns are read first and
//! sorted: that order (every output row's row group and row) is all that is held of the rows.
//! The objects are cut from it by rows, at the stored size per row a sorted sample predicts.
//! Then each column in turn is read whole, taken in that order object by object and encoded as
//! each object's chunk of it; its dictionary is chosen by the same trial a run's objects get,
//! on rows in the final order. Encoded pages wait in a local file (never in the object store)
//! until every column is encoded; then each object's file is assembled from its chunks and
//! uploaded. The objects are the table's: one run, one sequence in clustering order.
//!
//! What the whole order and the widest column need must fit the load's budget
//! ([`ColumnPlan::fits`]); a load that does not fit sorts in runs and merges them instead.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{DataType, Schema, SchemaRef};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use ravel_encode::{ColumnEncoder, EncodedColumn, FilePages};
use ravel_layout::ClusteringOrder;
use rayon::prelude::*;
use serde_json::Value;

use crate::encode::{EncodedRun, RunEncoder};
use crate::gather::{Pool, take};
use crate::loader::{check_same, conform_column};
use crate::object::{
    DICTIONARY_TRIAL_ROWS, EncodedObject, object_blooms, trial, with_dictionary, writer_properties,
};
use crate::{ArrowStage, InputStep, LoadError, LoadOptions, Loader};

/// Rows of the sorted sample whose encoding predicts an object's rows.
const SAMPLE_ROWS: usize = 262_144;

/// Rows per batch of the sort columns.
const KEY_BATCH_ROWS: usize = 65_536;

/// Most decoded bytes per batch of one column.
const COLUMN_BATCH_BYTES: u64 = 16 << 20;

/// One input file, its metadata read once.
struct InputFile {
    path: PathBuf,
    name: String,
    meta: ArrowReaderMetadata,
}

/// A unit of reading: one row group of one file.
#[derive(Debug, Clone, Copy)]
struct Unit {
    file: usize,
    row_group: usize,
    rows: usize,
    /// The 0-based number of its first row in its file.
    first_row: u64,
}

/// Where an output row comes from: a unit and a row in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Position {
    unit: u32,
    row: u32,
}

/// The inputs of a load by columns: their footers, read once.
pub struct ColumnPlan {
    files: Vec<InputFile>,
    units: Vec<Unit>,
    schema: SchemaRef,
    rows: u64,
    /// Each column's bytes when decoded whole, as the footers predict them.
    decoded: Vec<u64>,
}

/// What a load by columns holds of the budget.
#[derive(Debug, Clone, Copy)]
struct Charge {
    /// Held for the whole load: the most of sorting, and of holding the order, its inverse
    /// and the columns' share.
    total: u64,
    /// Bytes of one column (or of a slab of its rows) held at once.
    column_share: u64,
}

/// Order bytes per row: [`Position`], and the inverse order's `u32` (see `ColumnLoad::inverse`).
const ORDER_PER_ROW: u64 = 12;

/// Sort bytes per row when the key does not pack into words (the key columns, their scratch
/// and the `(batch, row)` order); a packed key takes its entry and the 4-byte result (see
/// `ClusteringOrder::streamed_order`).
const ROW_SORT_PER_ROW: u64 = crate::SORT_SCRATCH_PER_ROW + 64;

/// A column held in at most this many slabs (each read of it once more).
const MAX_SLABS: u64 = 8;

impl ColumnPlan {
    /// Opens the Parquet files `paths` (their footers only).
    pub fn open(paths: &[PathBuf]) -> Result<ColumnPlan, LoadError> {
        let mut files = Vec::with_capacity(paths.len());
        let mut units = Vec::new();
        for (f, path) in paths.iter().enumerate() {
            let file = open(path)?;
            let meta = ArrowReaderMetadata::load(&file, ArrowReaderOptions::new())
                .map_err(LoadError::input(path, InputStep::Footer))?;
            let mut first_row = 0;
            for (g, rg) in meta.metadata().row_groups().iter().enumerate() {
                let rows = rg.num_rows().max(0) as usize;
                units.push(Unit {
                    file: f,
                    row_group: g,
                    rows,
                    first_row,
                });
                first_row += rows as u64;
            }
            files.push(InputFile {
                path: path.clone(),
                name: path.display().to_string(),
                meta,
            });
        }
        let schema = match files.first() {
            Some(f) => f.meta.schema().clone(),
            None => Arc::new(Schema::empty()),
        };
        let rows = units.iter().map(|u| u.rows as u64).sum();
        let decoded = decoded_bytes(&files, &schema, rows);
        Ok(ColumnPlan {
            files,
            units,
            schema,
            rows,
            decoded,
        })
    }

    /// Whether a load of these files under `layout` fits `opts`' budget beside its objects
    /// in flight: the sort, then the order with each column in at most [`MAX_SLABS`] slabs.
    pub fn fits(&self, opts: &LoadOptions, layout: &ravel_layout::Layout) -> bool {
        self.rows > 0
            && self.rows < u32::MAX as u64
            && self.units.len() < u32::MAX as usize
            && self.charge(opts, layout).is_some()
    }

    /// Whether every row fits one run of a load under `opts` (their decoded bytes and sort
    /// scratch within the run trigger): then sorting them in memory, as one run, costs less
    /// than reading them a column at a time.
    pub fn fits_one_run(&self, opts: &LoadOptions) -> bool {
        // With a fifth to spare: the estimate is not what the run trigger counts.
        let decoded: u64 = self.decoded.iter().sum();
        (decoded + self.rows * crate::SORT_SCRATCH_PER_ROW) * 5 / 4 <= opts.flush_trigger()
    }

    /// The most slabs a column is read in under `opts` (`None`: the load does not fit).
    pub fn most_slabs(&self, opts: &LoadOptions, layout: &ravel_layout::Layout) -> Option<u64> {
        let charge = self.charge(opts, layout)?;
        (0..self.decoded.len())
            .map(|c| self.slabs(c, charge.column_share))
            .max()
    }

    /// The slabs column `c` is read in when `share` bytes of it may be held: one when it fits
    /// whole; otherwise each slab also holds where each of its rows is (an `(array, row)`
    /// pair).
    fn slabs(&self, c: usize, share: u64) -> u64 {
        let decoded = self.decoded[c];
        if decoded <= share {
            return 1;
        }
        let at = self.rows * std::mem::size_of::<(usize, usize)>() as u64;
        (decoded + at).div_ceil(share.max(1))
    }

    fn charge(&self, opts: &LoadOptions, layout: &ravel_layout::Layout) -> Option<Charge> {
        let share = opts.load_budget.saturating_sub(opts.in_flight_bytes());
        // Without a clustering key there is no order to load in.
        let clustering = ClusteringOrder::try_new(layout, &self.schema)
            .ok()
            .flatten()?;
        let sort = self.rows
            * match clustering.packed_words_at_most(&self.schema) {
                // An entry: the words and the row number, aligned to 8 bytes.
                Some(words) => 8 * words as u64 + 8 + 4,
                None => ROW_SORT_PER_ROW,
            };
        let order = self.rows * ORDER_PER_ROW;
        let widest = self.decoded.iter().copied().max().unwrap_or(0);
        let column_share = share.saturating_sub(order).min(widest);
        let most_slabs = (0..self.decoded.len())
            .map(|c| self.slabs(c, column_share))
            .max()
            .unwrap_or(1);
        let fits = sort <= share && most_slabs <= MAX_SLABS;
        fits.then_some(Charge {
            total: sort.max(order + column_share),
            column_share: column_share.max(1),
        })
    }
}

/// Each column's decoded bytes, as the footers predict them: fixed-width values, or string
/// bytes (their unencoded size where the footer records it, else twice the uncompressed
/// pages) and their offsets; with their validity.
fn decoded_bytes(files: &[InputFile], schema: &Schema, rows: u64) -> Vec<u64> {
    let mut bytes = vec![0u64; schema.fields().len()];
    for f in files {
        let descr = f.meta.metadata().file_metadata().schema_descr();
        for rg in f.meta.metadata().row_groups() {
            for (leaf, c) in rg.columns().iter().enumerate() {
                let root = descr.get_column_root_idx(leaf);
                let Some(b) = bytes.get_mut(root) else {
                    continue;
                };
                let pages = c.uncompressed_size().max(0) as u64;
                *b += match c.unencoded_byte_array_data_bytes() {
                    Some(v) => v.max(0) as u64,
                    None if c.column_type() == parquet::basic::Type::BYTE_ARRAY => 2 * pages,
                    None => pages,
                };
            }
        }
    }
    for (b, field) in bytes.iter_mut().zip(schema.fields()) {
        let values = match field.data_type() {
            DataType::Binary | DataType::Utf8 => *b + rows * 4,
            DataType::LargeBinary | DataType::LargeUtf8 => *b + rows * 8,
            t => (*b).max(rows * t.primitive_width().unwrap_or(8) as u64),
        };
        *b = values + rows / 8 + 64;
    }
    bytes
}

/// Loads the files of `plan` into `loader` as one globally sorted run (see the module docs);
/// the caller then finishes the loader.
pub async fn load_by_columns(loader: &mut Loader, plan: ColumnPlan) -> Result<(), LoadError> {
    let result = by_columns(loader, plan).await;
    if result.is_err() {
        loader.poison();
    }
    result
}

async fn by_columns(loader: &mut Loader, plan: ColumnPlan) -> Result<(), LoadError> {
    let first = plan.files.first().map_or(String::new(), |f| f.name.clone());
    let encoder = loader.accept_columns(&plan.schema, &first)?;
    for f in plan.files.iter().skip(1) {
        check_same(encoder.schema(), f.meta.schema(), &f.name)?;
    }
    let charge =
        plan.charge(loader.options(), loader.layout())
            .ok_or(LoadError::InternalState {
                task: "a load by columns",
                problem: "it does not fit the load budget",
            })?;
    let rows = plan.rows;
    loader
        .store_run(
            rows,
            charge.total,
            Box::new(move |emit| ColumnLoad::new(plan, encoder, charge)?.run(emit)),
        )
        .await
}

/// Seconds spent per step, summed over threads.
#[derive(Default)]
struct Clock {
    read_ns: AtomicU64,
    gather_ns: AtomicU64,
    encode_ns: AtomicU64,
}

impl Clock {
    fn time<T>(counter: &AtomicU64, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let out = f();
        counter.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        out
    }

    fn secs(counter: &AtomicU64) -> f64 {
        counter.load(Ordering::Relaxed) as f64 / 1e9
    }
}

/// What an object's manifest entry and footer record of its sort columns, gathered as each
/// of them is encoded.
#[derive(Default)]
struct ObjectKeys {
    /// Per sort column (in the key schema's order): its first and last value, two rows.
    edges: Vec<Option<ArrayRef>>,
    ranges: BTreeMap<String, ravel_manifest::ValueRange>,
}

/// One sort column's share of [`ObjectKeys`] for one object.
struct KeyColumn {
    edges: ArrayRef,
    range: Option<ravel_manifest::ValueRange>,
}

/// Where the rows of a slab are among the arrays read for it.
enum Located {
    /// Every row of the column was read, each unit in batches of a power of two rows: a
    /// position's unit and row give its batch and row.
    Whole {
        first: Vec<usize>,
        batch_rows: Vec<usize>,
    },
    /// Only the slab's rows were kept: each one's array and row, from the slab's first row.
    Kept(Vec<(usize, usize)>),
}

/// One column's values of a range of output rows (those of a run of objects).
struct Slab {
    arrays: Vec<ArrayRef>,
    located: Located,
    /// The output row the slab starts at.
    start: usize,
}

impl Slab {
    /// The `(array, row)` of each of the output rows `rows`.
    fn at(&self, order: &[Position], rows: Range<usize>) -> Vec<(usize, usize)> {
        match &self.located {
            Located::Whole { first, batch_rows } => order[rows]
                .iter()
                .map(|p| {
                    let (u, row) = (p.unit as usize, p.row as usize);
                    let shift = batch_rows[u].trailing_zeros();
                    (first[u] + (row >> shift), row & (batch_rows[u] - 1))
                })
                .collect(),
            Located::Kept(at) => at[rows.start - self.start..rows.end - self.start].to_vec(),
        }
    }
}

/// A load by columns under way.
struct ColumnLoad {
    plan: ColumnPlan,
    encoder: Arc<RunEncoder>,
    /// What it holds of the budget.
    charge: Charge,
    /// Every object's first output row, and the end.
    bounds: Vec<usize>,
    /// Where each output row comes from.
    order: Vec<Position>,
    /// Each input row's output row (counted across units), made when a column is read in
    /// slabs.
    inverse: Option<Vec<u32>>,
    /// Each unit's first row, counted across units.
    unit_starts: Vec<u64>,
    /// The sort columns (indices in the table's schema), and their schema.
    key_fields: Vec<usize>,
    key_schema: SchemaRef,
    /// The clustering order of rows of `key_schema`.
    clustering: ClusteringOrder,
    keys: Vec<ObjectKeys>,
    props: WriterProperties,
    clock: Clock,
    sort_s: f64,
}

impl ColumnLoad {
    fn new(
        plan: ColumnPlan,
        encoder: Arc<RunEncoder>,
        charge: Charge,
    ) -> Result<ColumnLoad, LoadError> {
        let layout = &encoder.settings().layout;
        let schema = encoder.schema().clone();
        // The sort columns: the columns whose ranges the manifest records.
        let key_fields = encoder.range_columns().to_vec();
        let key_schema = Arc::new(schema.project(&key_fields).map_err(arrow_err)?);
        let clustering =
            ClusteringOrder::try_new(layout, &key_schema)?.ok_or(LoadError::InternalState {
                task: "a load by columns",
                problem: "the table has no clustering key",
            })?;
        let mut unit_starts = Vec::with_capacity(plan.units.len());
        let mut n = 0u64;
        for u in &plan.units {
            unit_starts.push(n);
            n += u.rows as u64;
        }
        Ok(ColumnLoad {
            plan,
            encoder,
            charge,
            bounds: Vec::new(),
            order: Vec::new(),
            inverse: None,
            unit_starts,
            key_fields,
            key_schema,
            clustering,
            keys: Vec::new(),
            props: WriterProperties::default(),
            clock: Clock::default(),
            sort_s: 0.0,
        })
    }

    fn run(mut self, emit: &mut crate::loader::Emit<'_>) -> Result<EncodedRun, LoadError> {
        self.sort_keys()?;
        let bytes_per_row = self.cut()?;
        let objects = self.bounds.len() - 1;
        self.keys = (0..objects)
            .map(|_| ObjectKeys {
                edges: vec![None; self.key_fields.len()],
                ranges: BTreeMap::new(),
            })
            .collect();
        let dir = std::env::temp_dir();
        let columns = self.encoder.schema().fields().len();
        let mut chunks: Vec<Vec<EncodedColumn>> =
            (0..objects).map(|_| Vec::with_capacity(columns)).collect();
        let mut local_bytes = 0;
        for c in 0..columns {
            local_bytes += self.encode_column(c, &dir, &mut chunks)?;
        }
        tracing::info!(objects, bytes_per_row, local_bytes, "every column encoded");
        let t = Instant::now();
        for (o, columns) in chunks.into_iter().enumerate() {
            emit(self.assemble(o, columns)?)?;
        }
        Ok(EncodedRun {
            objects,
            read_s: Clock::secs(&self.clock.read_ns),
            sort_s: self.sort_s,
            gather_s: Clock::secs(&self.clock.gather_ns),
            encode_s: Clock::secs(&self.clock.encode_ns) + t.elapsed().as_secs_f64(),
            blooms_s: 0.0,
            calibration: None,
            local_spill_bytes: local_bytes,
        })
    }

    /// Orders the rows by their sort columns, read unit by unit (twice when the key packs
    /// into words; see [`ClusteringOrder::streamed_order`]).
    fn sort_keys(&mut self) -> Result<(), LoadError> {
        let t = Instant::now();
        let read_before = Clock::secs(&self.clock.read_ns);
        let read = |u: usize| {
            Clock::time(&self.clock.read_ns, || {
                self.read_unit(
                    &self.plan.units[u],
                    &self.key_fields,
                    KEY_BATCH_ROWS,
                    &self.key_schema,
                )
            })
        };
        let units = self.plan.units.len();
        let rows = match self.clustering.streamed_order(units, read)? {
            Some(rows) => rows,
            None => self.held_order(&read)?,
        };
        let starts = &self.unit_starts;
        self.order = rows
            .into_par_iter()
            .map(|g| {
                let u = starts.partition_point(|&s| s <= g as u64) - 1;
                Position {
                    unit: u as u32,
                    row: (g as u64 - starts[u]) as u32,
                }
            })
            .collect();
        let read_s = Clock::secs(&self.clock.read_ns) - read_before;
        self.sort_s = (t.elapsed().as_secs_f64() - read_s).max(0.0);
        Ok(())
    }

    /// The order of keys that do not pack into words (strings): every unit's sort columns
    /// held and ordered by arrow's row format.
    fn held_order(
        &self,
        read: &(dyn Fn(usize) -> Result<Vec<RecordBatch>, LoadError> + Sync),
    ) -> Result<Vec<u32>, LoadError> {
        let batches: Vec<RecordBatch> = (0..self.plan.units.len())
            .into_par_iter()
            .map(read)
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .flatten()
            .collect();
        let mut starts = Vec::with_capacity(batches.len());
        let mut n = 0;
        for b in &batches {
            starts.push(n);
            n += b.num_rows();
        }
        let pairs = self.clustering.merge_order(&batches)?;
        Ok(pairs
            .into_par_iter()
            .map(|(b, r)| (starts[b] + r) as u32)
            .collect())
    }

    /// Cuts the order into objects of the rows that `object_bytes` hold at the stored bytes
    /// per row of a sorted sample (the first rows, all columns), all of about one size; sets
    /// the writer properties the sample's trials choose. Returns the bytes per row.
    fn cut(&mut self) -> Result<f64, LoadError> {
        let settings = self.encoder.settings().clone();
        let sample = self.sample()?;
        let sorted = self.encoder.sort(sample)?;
        let p = writer_properties(
            &settings.layout,
            &sorted.run,
            settings.zstd_level,
            settings.object_bytes,
        )?;
        let rows = self.order.len();
        let per_object = match p.bytes_per_row > 0.0 {
            true => (settings.object_bytes as f64 / p.bytes_per_row).max(1.0),
            false => rows as f64,
        };
        let objects = ((rows as f64 / per_object).round() as usize).clamp(1, rows);
        self.bounds = (0..=objects).map(|i| i * rows / objects).collect();
        // Bloom filters sized for twice an object's rows, as a load's are.
        let object_rows = rows.div_ceil(objects) as u64;
        self.props = with_bloom_rows(
            p.props,
            &settings.layout,
            self.encoder.schema(),
            object_rows,
        );
        Ok(p.bytes_per_row)
    }

    /// The first [`SAMPLE_ROWS`] rows of the first file that has rows, every column.
    fn sample(&self) -> Result<Vec<RecordBatch>, LoadError> {
        let first = self
            .plan
            .units
            .iter()
            .find(|u| u.rows > 0)
            .map_or(0, |u| u.file);
        let f = &self.plan.files[first];
        let reader =
            ParquetRecordBatchReaderBuilder::new_with_metadata(open(&f.path)?, f.meta.clone())
                .with_batch_size(KEY_BATCH_ROWS)
                .with_limit(SAMPLE_ROWS)
                .build()
                .map_err(LoadError::input(&f.path, InputStep::Decode))?;
        let schema = self.encoder.schema();
        let mut first_row = 0;
        let mut batches = Vec::new();
        for b in reader {
            let b = b.map_err(LoadError::input(&f.path, InputStep::Decode))?;
            let rows = b.num_rows() as u64;
            batches.push(conform_batch(schema, b, &f.name, first_row)?);
            first_row += rows;
        }
        Ok(batches)
    }

    /// Fields `fields` of unit `u` in batches of `batch_rows` rows, with `schema` (theirs in
    /// the table).
    fn read_unit(
        &self,
        u: &Unit,
        fields: &[usize],
        batch_rows: usize,
        schema: &SchemaRef,
    ) -> Result<Vec<RecordBatch>, LoadError> {
        let f = &self.plan.files[u.file];
        let mask = ProjectionMask::roots(f.meta.parquet_schema(), fields.iter().copied());
        let reader =
            ParquetRecordBatchReaderBuilder::new_with_metadata(open(&f.path)?, f.meta.clone())
                .with_row_groups(vec![u.row_group])
                .with_projection(mask)
                .with_batch_size(batch_rows)
                .build()
                .map_err(LoadError::input(&f.path, InputStep::Decode))?;
        let mut first_row = u.first_row;
        let mut out = Vec::with_capacity(batches_of(u.rows, batch_rows));
        for b in reader {
            let b = b.map_err(LoadError::input(&f.path, InputStep::Decode))?;
            let rows = b.num_rows() as u64;
            out.push(conform_batch(schema, b, &f.name, first_row)?);
            first_row += rows;
        }
        if out.len() != batches_of(u.rows, batch_rows) {
            return Err(input_err(
                &f.path,
                "a row group held fewer rows than its footer says",
            ));
        }
        Ok(out)
    }

    /// The objects of each slab column `c` is read in: one slab when the column fits its
    /// share of the budget, else as many as keep each slab's rows within it.
    fn slabs_of(&self, c: usize) -> Vec<Range<usize>> {
        let objects = self.bounds.len() - 1;
        let n = self
            .plan
            .slabs(c, self.charge.column_share)
            .clamp(1, objects as u64) as usize;
        (0..n)
            .map(|i| i * objects / n..(i + 1) * objects / n)
            .collect()
    }

    /// Reads column `c`, a slab at a time, and encodes each object's chunk of it (pages to a
    /// file in `dir`); records the objects' keys when it is a sort column. Returns the pages'
    /// bytes.
    #[tracing::instrument(
        level = "debug",
        skip_all,
        fields(
            column = %self.encoder.schema().field(c).name(),
            index = c + 1,
            of = self.encoder.schema().fields().len()
        )
    )]
    fn encode_column(
        &mut self,
        c: usize,
        dir: &Path,
        chunks: &mut [Vec<EncodedColumn>],
    ) -> Result<u64, LoadError> {
        let slabs = self.slabs_of(c);
        if slabs.len() > 1 {
            tracing::debug!(column = c, slabs = slabs.len(), "column read in slabs");
        }
        if slabs.len() > 1 && self.inverse.is_none() {
            self.inverse = Some(self.inverse_order());
        }
        let pages = Arc::new(FilePages::new_in(dir).map_err(LoadError::internal(format!(
            "keeping encoded pages in a local file: {}",
            dir.display()
        )))?);
        let key = self.key_fields.iter().position(|&k| k == c);
        let mut encoder = None;
        for objects in &slabs {
            let rows = self.bounds[objects.start]..self.bounds[objects.end];
            let slab = match slabs.len() {
                1 => self.read_whole(c)?,
                _ => self.read_slab(c, rows.clone())?,
            };
            let pool = Pool::default();
            if encoder.is_none() {
                encoder = Some(self.column_encoder(c, &slab, rows, &pool, pages.clone())?);
            }
            let enc = encoder.as_ref().expect("made above");
            let encoded = objects
                .clone()
                .into_par_iter()
                .map(|o| self.encode_chunk(o, &slab, &pool, enc, key.is_some()))
                .collect::<Result<Vec<_>, _>>()?;
            for (o, (chunk, keys)) in objects.clone().zip(encoded) {
                chunks[o].push(chunk);
                if let (Some(k), Some(keys)) = (key, keys) {
                    let name = self.key_schema.field(k).name().clone();
                    self.keys[o].edges[k] = Some(keys.edges);
                    if let Some(r) = keys.range {
                        self.keys[o].ranges.insert(name, r);
                    }
                }
            }
        }
        Ok(pages.bytes())
    }

    /// Object `o`'s chunk of the slab's column, and its keys when `key` (a sort column).
    fn encode_chunk(
        &self,
        o: usize,
        slab: &Slab,
        pool: &Pool,
        enc: &ColumnEncoder,
        key: bool,
    ) -> Result<(EncodedColumn, Option<KeyColumn>), LoadError> {
        let rows = self.bounds[o]..self.bounds[o + 1];
        let n = rows.len();
        let values = Clock::time(&self.clock.gather_ns, || {
            take(&slab.arrays, &slab.at(&self.order, rows), n, pool)
        })
        .map_err(gather_err)?;
        let keys = match key {
            true => Some(key_column(&values)?),
            false => None,
        };
        let chunk = Clock::time(&self.clock.encode_ns, || enc.encode(o, &values))?;
        Ok((chunk, keys))
    }

    /// The encoder of column `c`: the table's writer properties with the dictionary its trial
    /// chooses on the middle rows of `slab` (output rows `rows`), in their final order.
    fn column_encoder(
        &self,
        c: usize,
        slab: &Slab,
        rows: Range<usize>,
        pool: &Pool,
        pages: Arc<FilePages>,
    ) -> Result<ColumnEncoder, LoadError> {
        let field = self.encoder.schema().field(c);
        let len = DICTIONARY_TRIAL_ROWS.min(rows.len());
        let at = rows.start + (rows.len() - len) / 2;
        let window = take(
            &slab.arrays,
            &slab.at(&self.order, at..at + len),
            len.max(1),
            pool,
        )
        .map_err(gather_err)?;
        let compression = self.props.compression(&field.name().as_str().into());
        let t = trial(&window, compression)?;
        let object_bytes = self.encoder.settings().object_bytes;
        let props = with_dictionary(
            self.props.clone().into_builder(),
            field.name(),
            t,
            object_bytes,
        )
        .build();
        Ok(ColumnEncoder::try_new(
            Arc::new(field.clone()),
            props,
            pages,
        )?)
    }

    /// Rows per batch of column `c` in unit `u`: its decoded bytes kept near
    /// [`COLUMN_BATCH_BYTES`].
    fn column_batch_rows(&self, u: &Unit, c: usize) -> usize {
        let per_row = self.plan.decoded[c].div_ceil(self.plan.rows.max(1)).max(1);
        let rows = (COLUMN_BATCH_BYTES / per_row).clamp(1024, crate::READ_BATCH_ROWS as u64);
        // A power of two: a row's batch and place in it are a shift and a mask away.
        let rows = 1usize << rows.ilog2();
        rows.min(u.rows.max(1).next_power_of_two())
    }

    /// Column `c` of every unit, as it is read.
    fn read_whole(&self, c: usize) -> Result<Slab, LoadError> {
        let one = self.one_column(c);
        let batch_rows: Vec<usize> = self
            .plan
            .units
            .iter()
            .map(|u| self.column_batch_rows(u, c))
            .collect();
        let arrays = Clock::time(&self.clock.read_ns, || {
            self.plan
                .units
                .par_iter()
                .zip(&batch_rows)
                .map(|(u, &rows)| self.read_unit(u, &[c], rows, &one))
                .collect::<Result<Vec<_>, _>>()
        })?
        .into_iter()
        .flatten()
        .map(|b| b.column(0).clone())
        .collect();
        let first = first_batches(&self.plan.units, &batch_rows);
        Ok(Slab {
            arrays,
            located: Located::Whole { first, batch_rows },
            start: 0,
        })
    }

    /// Column `c`'s values of the output rows `rows` only: every unit is read and only
    /// those rows kept.
    fn read_slab(&self, c: usize, rows: Range<usize>) -> Result<Slab, LoadError> {
        let one = self.one_column(c);
        let inverse = self.inverse.as_ref().expect("made before a slab is read");
        let (lo, hi) = (rows.start as u32, rows.end as u32);
        let kept = Clock::time(&self.clock.read_ns, || {
            self.plan
                .units
                .par_iter()
                .enumerate()
                .map(|(u, unit)| {
                    let batch_rows = self.column_batch_rows(unit, c);
                    let mut at = self.unit_starts[u] as usize;
                    let mut kept = Vec::new();
                    for b in self.read_unit(unit, &[c], batch_rows, &one)? {
                        let outs = &inverse[at..at + b.num_rows()];
                        at += b.num_rows();
                        let mask: Vec<bool> = outs.iter().map(|&p| lo <= p && p < hi).collect();
                        let values = arrow::compute::filter(
                            b.column(0),
                            &arrow::array::BooleanArray::from(mask),
                        )
                        .map_err(gather_err)?;
                        let places: Vec<u32> = outs
                            .iter()
                            .copied()
                            .filter(|&p| lo <= p && p < hi)
                            .collect();
                        kept.push((values, places));
                    }
                    Ok(kept)
                })
                .collect::<Result<Vec<_>, LoadError>>()
        })?;
        let mut at = vec![(0, 0); rows.len()];
        let mut arrays = Vec::new();
        for (j, (values, places)) in kept.into_iter().flatten().enumerate() {
            for (k, &p) in places.iter().enumerate() {
                at[p as usize - rows.start] = (j, k);
            }
            arrays.push(values);
        }
        Ok(Slab {
            arrays,
            located: Located::Kept(at),
            start: rows.start,
        })
    }

    /// The table's schema of column `c` alone.
    fn one_column(&self, c: usize) -> SchemaRef {
        Arc::new(Schema::new(vec![self.encoder.schema().field(c).clone()]))
    }

    /// Each input row's output row.
    fn inverse_order(&self) -> Vec<u32> {
        let mut inverse = vec![0u32; self.order.len()];
        for (out, p) in self.order.iter().enumerate() {
            inverse[(self.unit_starts[p.unit as usize] + p.row as u64) as usize] = out as u32;
        }
        inverse
    }

    /// Object `o`'s file from its columns' chunks, with its keys, ranges and filters.
    fn assemble(&self, o: usize, columns: Vec<EncodedColumn>) -> Result<EncodedObject, LoadError> {
        let (first_key, last_key) = self.first_and_last_key(o)?;
        let kv = vec![
            KeyValue::new(
                "ravel.first_key".into(),
                Value::from(first_key.clone()).to_string(),
            ),
            KeyValue::new(
                "ravel.last_key".into(),
                Value::from(last_key.clone()).to_string(),
            ),
        ];
        let filled: Vec<Option<Vec<u8>>> = columns.iter().map(|c| c.filled_bloom.clone()).collect();
        let size: u64 = columns.iter().map(EncodedColumn::bytes).sum();
        let schema = self.encoder.schema();
        let out = Vec::with_capacity(size as usize + (1 << 20));
        let (bytes, meta) = ravel_encode::assemble(schema, self.props.clone(), columns, kv, out)?;
        let blooms = object_blooms(self.encoder.bloom_columns(), vec![filled], &bytes, &meta);
        let stats = self.encoder.stats_columns();
        let delta_stats = (!stats.is_empty()).then(|| ravel_log::delta_stats(&meta, schema, stats));
        Ok(EncodedObject {
            bytes: bytes::Bytes::from(bytes),
            rows: self.bounds[o + 1] - self.bounds[o],
            first_key: Some(first_key),
            last_key: Some(last_key),
            ranges: self.keys[o].ranges.clone(),
            blooms,
            delta_stats,
        })
    }

    /// The clustering key of object `o`'s first and last row.
    fn first_and_last_key(&self, o: usize) -> Result<(Vec<Value>, Vec<Value>), LoadError> {
        let edges = self.keys[o]
            .edges
            .iter()
            .map(|e| {
                e.clone()
                    .expect("every sort column is encoded before assembly")
            })
            .collect();
        let batch = RecordBatch::try_new(self.key_schema.clone(), edges)
            .map_err(LoadError::arrow(ArrowStage::ComputingRanges))?;
        let key_cols = self.clustering.key_columns(&batch)?;
        let key = |i: usize| -> Vec<Value> {
            key_cols
                .iter()
                .map(|c| ravel_manifest::key_value(c.as_ref(), i))
                .collect()
        };
        Ok((key(0), key(1)))
    }
}

/// An object's first and last value of a sort column and its value range, from the object's
/// values of it.
fn key_column(values: &[ArrayRef]) -> Result<KeyColumn, LoadError> {
    let ranges = || LoadError::arrow(ArrowStage::ComputingRanges);
    let first = values.first().filter(|a| !a.is_empty());
    let last = values.last().filter(|a| !a.is_empty());
    let (Some(first), Some(last)) = (first, last) else {
        return Err(LoadError::InternalState {
            task: "a load by columns",
            problem: "an object with no rows",
        });
    };
    let edges = arrow::compute::concat(&[&first.slice(0, 1), &last.slice(last.len() - 1, 1)])
        .map_err(ranges())?;
    let range = ravel_manifest::value_range(values).map_err(ranges())?;
    Ok(KeyColumn { edges, range })
}

/// `props` with the Bloom filters of the layout's scope sized for `2 × object_rows` values.
fn with_bloom_rows(
    props: WriterProperties,
    layout: &ravel_layout::Layout,
    schema: &Schema,
    object_rows: u64,
) -> WriterProperties {
    let mut b = props.into_builder();
    for name in layout.bloom.scope.columns(schema) {
        let path = parquet::schema::types::ColumnPath::from(name);
        b = b.set_column_bloom_filter_max_ndv(path, (2 * object_rows).max(1));
    }
    b.build()
}

/// The first batch of each unit when each unit `u` is read in batches of `batch_rows[u]`
/// rows, and the total count last.
fn first_batches(units: &[Unit], batch_rows: &[usize]) -> Vec<usize> {
    let mut first = Vec::with_capacity(units.len() + 1);
    let mut n = 0;
    for (u, &rows) in units.iter().zip(batch_rows) {
        first.push(n);
        n += batches_of(u.rows, rows);
    }
    first.push(n);
    first
}

fn batches_of(rows: usize, batch_rows: usize) -> usize {
    rows.div_ceil(batch_rows.max(1))
}

/// `batch` (columns of the file, by name) with `schema`'s fields: the table's types and
/// nullability (see [`conform_column`]), its buffers no larger than their contents. (The
/// Parquet reader grows a string column's buffers by doubling, so a column held whole would
/// take up to twice its bytes; shrinking a heap block gives its tail back without a copy.)
fn conform_batch(
    schema: &SchemaRef,
    batch: RecordBatch,
    input: &str,
    first_row: u64,
) -> Result<RecordBatch, LoadError> {
    let rows = batch.num_rows();
    let mut columns = schema
        .fields()
        .iter()
        .map(|f| {
            let column = batch
                .column_by_name(f.name())
                .ok_or_else(|| LoadError::Schema {
                    input: input.into(),
                    column: f.name().clone(),
                    problem: "is missing".into(),
                })?;
            conform_column(f, column, input, first_row)
        })
        .collect::<Result<Vec<_>, _>>()?;
    drop(batch);
    for c in &mut columns {
        <ArrayRef as arrow::array::Array>::shrink_to_fit(c);
    }
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    RecordBatch::try_new_with_options(schema.clone(), columns, &options)
        .map_err(LoadError::arrow(ArrowStage::ReadingInput))
}

fn open(path: &Path) -> Result<std::fs::File, LoadError> {
    std::fs::File::open(path).map_err(LoadError::input(path, InputStep::Open))
}

fn input_err(path: &Path, message: &str) -> LoadError {
    LoadError::Input {
        input: path.display().to_string(),
        message: message.to_string(),
    }
}

fn gather_err(e: arrow::error::ArrowError) -> LoadError {
    LoadError::Arrow {
        stage: ArrowStage::Gathering,
        source: e,
    }
}

fn arrow_err(e: arrow::error::ArrowError) -> LoadError {
    LoadError::Arrow {
        stage: ArrowStage::ReadingInput,
        source: e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, BinaryArray};
    use arrow::buffer::{Buffer, OffsetBuffer, ScalarBuffer};
    use arrow::datatypes::Field;

    #[test]
    fn a_read_batch_keeps_no_more_memory_than_its_values() {
        let mut values = Vec::with_capacity(1 << 16);
        values.extend_from_slice(b"abcdef");
        let mut offsets: Vec<i32> = Vec::with_capacity(1 << 12);
        offsets.extend([0, 2, 6]);
        let column = BinaryArray::new(
            OffsetBuffer::new(ScalarBuffer::from(Buffer::from_vec(offsets))),
            Buffer::from_vec(values),
            None,
        );
        assert!(column.values().capacity() >= 1 << 16);
        let schema = Arc::new(Schema::new(vec![Field::new("s", DataType::Binary, false)]));
        let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(column)]).unwrap();
        let out = conform_batch(&schema, batch, "input", 0).unwrap();
        let s = out
            .column(0)
            .as_any()
            .downcast_ref::<BinaryArray>()
            .unwrap();
        assert_eq!(s.value(1), b"cdef");
        assert_eq!(s.values().capacity(), 6);
        assert_eq!(s.offsets().inner().inner().capacity(), 3 * 4);
    }
}
