//! Reading the inputs of a load by columns: a unit's fields, one column whole or the slab of
//! it that a range of output rows takes, each batch conformed to the table's schema.

use crate::{ColumnProblem, InputProblem};
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{Schema, SchemaRef};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use rayon::prelude::*;

use super::plan::Unit;
use super::{Clock, ColumnLoad, KEY_BATCH_ROWS, Position, gather_err};
use crate::loader::conform_column;
use crate::{ArrowStage, InputStep, LoadError};

/// Rows of the sorted sample whose encoding predicts an object's rows.
const SAMPLE_ROWS: usize = 262_144;

/// Most decoded bytes per batch of one column.
const COLUMN_BATCH_BYTES: u64 = 16 << 20;

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
pub(super) struct Slab {
    pub(super) arrays: Vec<ArrayRef>,
    located: Located,
    /// The output row the slab starts at.
    start: usize,
}

impl Slab {
    /// The `(array, row)` of each of the output rows `rows`.
    pub(super) fn at(&self, order: &[Position], rows: Range<usize>) -> Vec<(usize, usize)> {
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

impl ColumnLoad {
    /// The first [`SAMPLE_ROWS`] rows of the first file that has rows, every column.
    pub(super) fn sample(&self) -> Result<Vec<RecordBatch>, LoadError> {
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
    pub(super) fn read_unit(
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
            return Err(input_err(&f.path, InputProblem::ShortRowGroup));
        }
        Ok(out)
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
    pub(super) fn read_whole(&self, c: usize) -> Result<Slab, LoadError> {
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
    pub(super) fn read_slab(&self, c: usize, rows: Range<usize>) -> Result<Slab, LoadError> {
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
    pub(super) fn inverse_order(&self) -> Vec<u32> {
        let mut inverse = vec![0u32; self.order.len()];
        for (out, p) in self.order.iter().enumerate() {
            inverse[(self.unit_starts[p.unit as usize] + p.row as u64) as usize] = out as u32;
        }
        inverse
    }
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
                    problem: ColumnProblem::Missing,
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

pub(super) fn open(path: &Path) -> Result<std::fs::File, LoadError> {
    std::fs::File::open(path).map_err(LoadError::input(path, InputStep::Open))
}

fn input_err(path: &Path, problem: InputProblem) -> LoadError {
    LoadError::Input {
        input: path.display().to_string(),
        problem,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, BinaryArray};
    use arrow::buffer::{Buffer, OffsetBuffer, ScalarBuffer};
    use arrow::datatypes::{DataType, Field};

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
