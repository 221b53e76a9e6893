//! What a load by columns needs before it starts: its inputs' footers, read once, and what it
//! would hold of the load's budget.

use std::path::PathBuf;
use std::sync::Arc;

use arrow::datatypes::{DataType, Schema, SchemaRef};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use ravel_layout::ClusteringOrder;

use super::read::open;
use crate::{InputStep, LoadError, LoadOptions};

/// One input file, its metadata read once.
pub(super) struct InputFile {
    pub(super) path: PathBuf,
    pub(super) name: String,
    pub(super) meta: ArrowReaderMetadata,
}

/// A unit of reading: one row group of one file.
#[derive(Debug, Clone, Copy)]
pub(super) struct Unit {
    pub(super) file: usize,
    pub(super) row_group: usize,
    pub(super) rows: usize,
    /// The 0-based number of its first row in its file.
    pub(super) first_row: u64,
}

/// The inputs of a load by columns: their footers, read once.
pub struct ColumnPlan {
    pub(super) files: Vec<InputFile>,
    pub(super) units: Vec<Unit>,
    pub(super) schema: SchemaRef,
    pub(super) rows: u64,
    /// Each column's bytes when decoded whole, as the footers predict them.
    pub(super) decoded: Vec<u64>,
}

/// What a load by columns holds of the budget.
#[derive(Debug, Clone, Copy)]
pub(super) struct Charge {
    /// Held for the whole load: the most of sorting, and of holding the order, its inverse
    /// and the columns' share.
    pub(super) total: u64,
    /// Bytes of one column (or of a slab of its rows) held at once.
    pub(super) column_share: u64,
}

/// Order bytes per row: [`Position`](super::Position), and the inverse order's `u32` (see
/// `ColumnLoad::inverse`).
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
    pub(super) fn slabs(&self, c: usize, share: u64) -> u64 {
        let decoded = self.decoded[c];
        if decoded <= share {
            return 1;
        }
        let at = self.rows * std::mem::size_of::<(usize, usize)>() as u64;
        (decoded + at).div_ceil(share.max(1))
    }

    pub(super) fn charge(
        &self,
        opts: &LoadOptions,
        layout: &ravel_layout::Layout,
    ) -> Option<Charge> {
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
