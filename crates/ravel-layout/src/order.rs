//! The clustering order, implemented once.
//!
//! Rows sort by `(stream, time.div_euclid(bucket_width), key_1 … key_n, time)`, ascending:
//! nulls first, integers numerically, floats in IEEE total order, strings and bytes bytewise,
//! and ties keep their input order (the sort is stable). The bucket is a floor division, so
//! times before 1970 fall into the bucket that contains them. A null time has a null bucket.
//!
//! Times are read in their own unit: timestamps in theirs, `Date32` as days, `Date64` as
//! milliseconds, and integer time columns as unix seconds.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, Int64Array, PrimitiveArray, RecordBatch, UInt32Array, UInt64Array,
};
use arrow::compute::SortOptions;
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Date32Type, Date64Type, Int8Type, Int16Type, Int32Type,
    Int64Type, Schema, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow_row::{RowConverter, Rows, SortField};
use rayon::prelude::*;

use crate::{Layout, LayoutError};

/// A layout's clustering order resolved against a schema: which columns, in which roles.
#[derive(Debug, Clone)]
pub struct ClusteringOrder {
    stream: Option<usize>,
    time: usize,
    keys: Vec<usize>,
    bucket_seconds: u64,
    /// Fields of the sort key columns in order: stream?, bucket, keys…, time.
    fields: Vec<SortField>,
}

const ASC_NULLS_FIRST: SortOptions = SortOptions {
    descending: false,
    nulls_first: true,
};

impl ClusteringOrder {
    /// Resolves the layout's order against a schema. `Ok(None)` when the layout has no
    /// clustering key (the table keeps arrival order).
    pub fn try_new(
        layout: &Layout,
        schema: &Schema,
    ) -> Result<Option<ClusteringOrder>, LayoutError> {
        let Some(key) = &layout.clustering_key else {
            return Ok(None);
        };
        layout.validate_for(schema)?;
        let index = |name: &str| schema.index_of(name).expect("validated");
        let stream = layout.stream.as_deref().map(index);
        let time = index(&layout.time);
        let keys: Vec<usize> = key.columns.iter().map(|c| index(c)).collect();
        let time_type = schema.field(time).data_type();
        let bucket_type = if *time_type == DataType::UInt64 {
            DataType::UInt64
        } else {
            DataType::Int64
        };
        let mut fields = Vec::new();
        let field = |i: usize| {
            SortField::new_with_options(schema.field(i).data_type().clone(), ASC_NULLS_FIRST)
        };
        if let Some(s) = stream {
            fields.push(field(s));
        }
        fields.push(SortField::new_with_options(bucket_type, ASC_NULLS_FIRST));
        fields.extend(keys.iter().map(|&k| field(k)));
        fields.push(field(time));
        Ok(Some(ClusteringOrder {
            stream,
            time,
            keys,
            bucket_seconds: key.bucket_width.seconds(),
            fields,
        }))
    }

    /// The sort key of a batch as columns, in sort order: stream (if any), bucket, keys…, time.
    pub fn key_columns(&self, batch: &RecordBatch) -> Result<Vec<ArrayRef>, LayoutError> {
        let mut cols = Vec::with_capacity(self.fields.len());
        if let Some(s) = self.stream {
            cols.push(batch.column(s).clone());
        }
        cols.push(time_bucket(
            batch.column(self.time).as_ref(),
            self.bucket_seconds,
        )?);
        cols.extend(self.keys.iter().map(|&k| batch.column(k).clone()));
        cols.push(batch.column(self.time).clone());
        Ok(cols)
    }

    /// The sort key of every row of a batch in arrow's row format: comparing two rows' bytes
    /// compares them in clustering order.
    pub fn key_rows(&self, batch: &RecordBatch) -> Result<Rows, LayoutError> {
        let converter = RowConverter::new(self.fields.clone())?;
        Ok(converter.convert_columns(&self.key_columns(batch)?)?)
    }

    /// The permutation that puts a batch in clustering order: `take(batch, permutation)` is
    /// sorted. Stable, parallel (rayon).
    pub fn permutation(&self, batch: &RecordBatch) -> Result<UInt32Array, LayoutError> {
        let n = batch.num_rows();
        if n > u32::MAX as usize {
            return Err(LayoutError::BatchTooLarge {
                rows: n,
                max: u32::MAX as usize,
            });
        }
        let rows = self.key_rows(batch)?;
        let mut idx: Vec<u32> = (0..n as u32).collect();
        idx.par_sort_by(|&a, &b| rows.row(a as usize).cmp(&rows.row(b as usize)));
        Ok(UInt32Array::from(idx))
    }

    /// The clustering order of several batches taken as one run, as `(batch, row)` pairs:
    /// gathering the rows in this order (arrow's `interleave`) gives the sorted run without
    /// first concatenating the batches. Stable: ties keep batch order, then row order.
    pub fn merge_order(&self, batches: &[RecordBatch]) -> Result<Vec<(usize, usize)>, LayoutError> {
        let total: usize = batches.iter().map(|b| b.num_rows()).sum();
        if total > u32::MAX as usize {
            return Err(LayoutError::BatchTooLarge {
                rows: total,
                max: u32::MAX as usize,
            });
        }
        let converter = RowConverter::new(self.fields.clone())?;
        let mut rows = converter.empty_rows(total, total * 16);
        let mut origin = Vec::with_capacity(total);
        for (bi, b) in batches.iter().enumerate() {
            converter.append(&mut rows, &self.key_columns(b)?)?;
            origin.extend((0..b.num_rows()).map(|r| (bi, r)));
        }
        let mut idx: Vec<u32> = (0..total as u32).collect();
        idx.par_sort_by(|&a, &b| rows.row(a as usize).cmp(&rows.row(b as usize)));
        Ok(idx.into_iter().map(|i| origin[i as usize]).collect())
    }
}

/// The permutation that puts `batch` in the layout's clustering order; the identity when the
/// layout has no clustering key.
pub fn clustering_permutation(
    layout: &Layout,
    batch: &RecordBatch,
) -> Result<UInt32Array, LayoutError> {
    match ClusteringOrder::try_new(layout, batch.schema_ref())? {
        Some(order) => order.permutation(batch),
        None => Ok(UInt32Array::from_iter_values(0..batch.num_rows() as u32)),
    }
}

/// `time.div_euclid(bucket)` for every row, as Int64 (UInt64 for a UInt64 time column), with
/// the time read in its own unit (see the module docs).
pub fn time_bucket(time: &dyn Array, bucket_seconds: u64) -> Result<ArrayRef, LayoutError> {
    let b = bucket_seconds as i128;
    // value → bucket as floor(value * mul / (bucket_seconds * div)).
    fn by<T: ArrowPrimitiveType>(a: &dyn Array, mul: i128, div: i128, b: i128) -> ArrayRef
    where
        T::Native: Into<i128>,
    {
        let a: &PrimitiveArray<T> = a.as_primitive();
        let den = b * div;
        let out: Int64Array = if mul == 1 && den <= i64::MAX as i128 {
            let den = den as i64;
            a.unary(|v| {
                let v: i128 = v.into();
                (v as i64).div_euclid(den)
            })
        } else {
            a.unary(|v| {
                let v: i128 = v.into();
                (v * mul).div_euclid(den) as i64
            })
        };
        Arc::new(out)
    }
    Ok(match time.data_type() {
        DataType::Int8 => by::<Int8Type>(time, 1, 1, b),
        DataType::Int16 => by::<Int16Type>(time, 1, 1, b),
        DataType::Int32 => by::<Int32Type>(time, 1, 1, b),
        DataType::Int64 => by::<Int64Type>(time, 1, 1, b),
        DataType::UInt8 => by::<UInt8Type>(time, 1, 1, b),
        DataType::UInt16 => by::<UInt16Type>(time, 1, 1, b),
        DataType::UInt32 => by::<UInt32Type>(time, 1, 1, b),
        DataType::UInt64 => {
            let a: &UInt64Array = time.as_primitive();
            Arc::new(a.unary::<_, UInt64Type>(|v| v / bucket_seconds))
        }
        DataType::Date32 => by::<Date32Type>(time, 86_400, 1, b),
        DataType::Date64 => by::<Date64Type>(time, 1, 1_000, b),
        DataType::Timestamp(TimeUnit::Second, _) => by::<TimestampSecondType>(time, 1, 1, b),
        DataType::Timestamp(TimeUnit::Millisecond, _) => {
            by::<TimestampMillisecondType>(time, 1, 1_000, b)
        }
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            by::<TimestampMicrosecondType>(time, 1, 1_000_000, b)
        }
        DataType::Timestamp(TimeUnit::Nanosecond, _) => {
            by::<TimestampNanosecondType>(time, 1, 1_000_000_000, b)
        }
        other => {
            return Err(LayoutError::BadTimeColumn {
                column: "(time)".into(),
                data_type: other.clone(),
            });
        }
    })
}
