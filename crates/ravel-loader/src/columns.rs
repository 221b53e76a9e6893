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

mod assemble;
mod plan;
mod read;

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use arrow::array::RecordBatch;
use arrow::datatypes::{Schema, SchemaRef};
use parquet::file::properties::WriterProperties;
use ravel_encode::{ColumnEncoder, EncodedColumn, FilePages};
use ravel_layout::ClusteringOrder;
use rayon::prelude::*;

pub use plan::ColumnPlan;

use self::assemble::{KeyColumn, ObjectKeys, key_column};
use self::plan::Charge;
use self::read::Slab;
use crate::encode::{EncodedRun, RunEncoder};
use crate::gather::{Pool, take};
use crate::loader::check_same;
use crate::object::{DICTIONARY_TRIAL_ROWS, trial, with_dictionary, writer_properties};
use crate::{ArrowStage, LoadError, Loader};

/// Rows per batch of the sort columns.
const KEY_BATCH_ROWS: usize = 65_536;

/// Where an output row comes from: a unit and a row in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Position {
    unit: u32,
    row: u32,
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
