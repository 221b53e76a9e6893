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
        let idx: Vec<u32> = self
            .merge_order(std::slice::from_ref(batch))?
            .into_iter()
            .map(|(_, r)| r as u32)
            .collect();
        Ok(UInt32Array::from(idx))
    }

    /// The clustering order of several batches taken as one run, as `(batch, row)` pairs:
    /// gathering the rows in this order (arrow's `interleave`) gives the sorted run without
    /// first concatenating the batches. Stable: ties keep batch order, then row order.
    ///
    /// When every key component is an integer, date or timestamp (hits' keys are), the keys
    /// are normalized into fixed-width words (see [`normalized_order`]) and sorted as plain
    /// integers; otherwise (string keys) arrow's row format orders them.
    pub fn merge_order(&self, batches: &[RecordBatch]) -> Result<Vec<(usize, usize)>, LayoutError> {
        let total: usize = batches.iter().map(|b| b.num_rows()).sum();
        if total > u32::MAX as usize {
            return Err(LayoutError::BatchTooLarge {
                rows: total,
                max: u32::MAX as usize,
            });
        }
        let keys = batches
            .iter()
            .map(|b| self.key_columns(b))
            .collect::<Result<Vec<_>, _>>()?;
        let idx = match normalized_order(&keys, total) {
            Some(idx) => idx,
            None => {
                let converter = RowConverter::new(self.fields.clone())?;
                let mut rows = converter.empty_rows(total, total * 16);
                for k in &keys {
                    converter.append(&mut rows, k)?;
                }
                let mut idx: Vec<u32> = (0..total as u32).collect();
                idx.par_sort_by(|&a, &b| rows.row(a as usize).cmp(&rows.row(b as usize)));
                idx
            }
        };
        let mut origin = Vec::with_capacity(total);
        for (bi, b) in batches.iter().enumerate() {
            origin.extend((0..b.num_rows()).map(|r| (bi, r)));
        }
        Ok(idx.into_iter().map(|i| origin[i as usize]).collect())
    }
}

/// Most words a normalized key may have; wider keys use arrow's row format.
const MAX_WORDS: usize = 12;

/// One key component as order-preserving `u64` words: nulls first, then values in order.
/// Integers, dates and timestamps up to 32 bits take one word (validity bit above the value);
/// 64-bit ones take one word when the run has no null in them, else two (validity, value).
/// `None` for any other type.
fn component_words(arrays: &[&dyn Array]) -> Option<Vec<Vec<u64>>> {
    let dt = arrays.first()?.data_type().clone();
    let nulls = arrays.iter().any(|a| a.null_count() > 0);
    let total: usize = arrays.iter().map(|a| a.len()).sum();
    // Up to 32 bits: `map` gives the value's order-preserving u32; bit 32 marks a valid value.
    fn narrow<T: ArrowPrimitiveType>(
        arrays: &[&dyn Array],
        total: usize,
        map: impl Fn(T::Native) -> u32,
    ) -> Vec<Vec<u64>> {
        let mut out = Vec::with_capacity(total);
        for a in arrays {
            let a: &PrimitiveArray<T> = a.as_primitive();
            if a.null_count() == 0 {
                out.extend(a.values().iter().map(|&v| (1 << 32) | map(v) as u64));
            } else {
                out.extend(a.iter().map(|v| v.map_or(0, |v| (1 << 32) | map(v) as u64)));
            }
        }
        vec![out]
    }
    // 64 bits: `map` gives the order-preserving u64; with nulls a validity word goes first.
    fn wide<T: ArrowPrimitiveType>(
        arrays: &[&dyn Array],
        total: usize,
        nulls: bool,
        map: impl Fn(T::Native) -> u64,
    ) -> Vec<Vec<u64>> {
        let mut value = Vec::with_capacity(total);
        let mut valid = Vec::with_capacity(if nulls { total } else { 0 });
        for a in arrays {
            let a: &PrimitiveArray<T> = a.as_primitive();
            if nulls {
                for v in a.iter() {
                    valid.push(v.is_some() as u64);
                    value.push(v.map_or(0, &map));
                }
            } else {
                value.extend(a.values().iter().map(|&v| map(v)));
            }
        }
        if nulls {
            vec![valid, value]
        } else {
            vec![value]
        }
    }
    let s32 = |v: i32| (v as u32) ^ 0x8000_0000;
    let s64 = |v: i64| (v as u64) ^ (1 << 63);
    Some(match dt {
        DataType::Int8 => narrow::<Int8Type>(arrays, total, |v| s32(v as i32)),
        DataType::Int16 => narrow::<Int16Type>(arrays, total, |v| s32(v as i32)),
        DataType::Int32 => narrow::<Int32Type>(arrays, total, s32),
        DataType::Date32 => narrow::<Date32Type>(arrays, total, s32),
        DataType::UInt8 => narrow::<UInt8Type>(arrays, total, |v| v as u32),
        DataType::UInt16 => narrow::<UInt16Type>(arrays, total, |v| v as u32),
        DataType::UInt32 => narrow::<UInt32Type>(arrays, total, |v| v),
        DataType::Int64 => wide::<Int64Type>(arrays, total, nulls, s64),
        DataType::Date64 => wide::<Date64Type>(arrays, total, nulls, s64),
        DataType::UInt64 => wide::<UInt64Type>(arrays, total, nulls, |v| v),
        DataType::Timestamp(TimeUnit::Second, _) => {
            wide::<TimestampSecondType>(arrays, total, nulls, s64)
        }
        DataType::Timestamp(TimeUnit::Millisecond, _) => {
            wide::<TimestampMillisecondType>(arrays, total, nulls, s64)
        }
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            wide::<TimestampMicrosecondType>(arrays, total, nulls, s64)
        }
        DataType::Timestamp(TimeUnit::Nanosecond, _) => {
            wide::<TimestampNanosecondType>(arrays, total, nulls, s64)
        }
        _ => return None,
    })
}

/// The stable sort order of the rows of several batches' key columns (`keys[batch][component]`)
/// when every component normalizes to words: each row becomes `([u64; K], row)` and the pairs
/// are sorted as integers in parallel, the row number breaking ties (so the order is stable).
/// `None` when a component does not normalize or the key needs more than [`MAX_WORDS`] words.
pub fn normalized_order(keys: &[Vec<ArrayRef>], total: usize) -> Option<Vec<u32>> {
    let components = keys.first().map_or(0, |k| k.len());
    let mut words: Vec<Vec<u64>> = Vec::new();
    for c in 0..components {
        let arrays: Vec<&dyn Array> = keys.iter().map(|k| k[c].as_ref()).collect();
        words.extend(component_words(&arrays)?);
        if words.len() > MAX_WORDS {
            return None;
        }
    }
    fn sort<const K: usize>(words: &[Vec<u64>], total: usize) -> Vec<u32> {
        let mut entries: Vec<([u64; K], u32)> = (0..total)
            .into_par_iter()
            .map(|i| (std::array::from_fn(|w| words[w][i]), i as u32))
            .collect();
        entries.par_sort_unstable();
        entries.into_par_iter().map(|(_, i)| i).collect()
    }
    macro_rules! by_width {
        ($($k:literal)*) => {
            match words.len() {
                $($k => sort::<$k>(&words, total),)*
                _ => return None,
            }
        };
    }
    Some(by_width!(0 1 2 3 4 5 6 7 8 9 10 11 12))
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
