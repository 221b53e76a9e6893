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
        let time = index(
            layout
                .time
                .as_deref()
                .expect("validated: a key has a time column"),
        );
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
            .par_iter()
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
        let mut starts = Vec::with_capacity(batches.len());
        let mut first = 0;
        for b in batches {
            starts.push(first);
            first += b.num_rows();
        }
        Ok(idx
            .into_par_iter()
            .map(|i| {
                let i = i as usize;
                let b = starts.partition_point(|&s| s <= i) - 1;
                (b, i - starts[b])
            })
            .collect())
    }
}

/// Most words a normalized key may have; wider keys use arrow's row format.
const MAX_WORDS: usize = 12;

/// One key component of one batch as order-preserving `u64`s (the slots of nulls hold
/// anything), with its nulls and the least and greatest valid value.
struct Ordered {
    values: Vec<u64>,
    nulls: Option<arrow::buffer::NullBuffer>,
    /// `(min, max)` of the valid values; `None` when there are none.
    bounds: Option<(u64, u64)>,
}

impl Ordered {
    /// `None` for a type that is not an integer, date or timestamp.
    fn new(a: &dyn Array) -> Option<Ordered> {
        fn map<T: ArrowPrimitiveType>(a: &dyn Array, f: impl Fn(T::Native) -> u64) -> Vec<u64> {
            a.as_primitive::<T>()
                .values()
                .iter()
                .map(|&v| f(v))
                .collect()
        }
        let s32 = |v: i32| ((v as u32) ^ 0x8000_0000) as u64;
        let s64 = |v: i64| (v as u64) ^ (1 << 63);
        let values = match a.data_type() {
            DataType::Int8 => map::<Int8Type>(a, |v| s32(v as i32)),
            DataType::Int16 => map::<Int16Type>(a, |v| s32(v as i32)),
            DataType::Int32 => map::<Int32Type>(a, s32),
            DataType::Date32 => map::<Date32Type>(a, s32),
            DataType::UInt8 => map::<UInt8Type>(a, |v| v as u64),
            DataType::UInt16 => map::<UInt16Type>(a, |v| v as u64),
            DataType::UInt32 => map::<UInt32Type>(a, |v| v as u64),
            DataType::Int64 => map::<Int64Type>(a, s64),
            DataType::Date64 => map::<Date64Type>(a, s64),
            DataType::UInt64 => map::<UInt64Type>(a, |v| v),
            DataType::Timestamp(TimeUnit::Second, _) => map::<TimestampSecondType>(a, s64),
            DataType::Timestamp(TimeUnit::Millisecond, _) => {
                map::<TimestampMillisecondType>(a, s64)
            }
            DataType::Timestamp(TimeUnit::Microsecond, _) => {
                map::<TimestampMicrosecondType>(a, s64)
            }
            DataType::Timestamp(TimeUnit::Nanosecond, _) => map::<TimestampNanosecondType>(a, s64),
            _ => return None,
        };
        let nulls = a.nulls().filter(|n| n.null_count() > 0).cloned();
        let bounds = match &nulls {
            None => values.iter().fold(None, |b, &v| widen(b, v)),
            Some(n) => n.valid_indices().fold(None, |b, i| widen(b, values[i])),
        };
        Some(Ordered {
            values,
            nulls,
            bounds,
        })
    }
}

fn widen(b: Option<(u64, u64)>, v: u64) -> Option<(u64, u64)> {
    Some(b.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))))
}

/// Where one key component goes in the packed key: its code (0 for a null; `value - min`, plus
/// 1 when the component has nulls) takes `width` bits from bit `at`, counted from the most
/// significant bit of the first word.
#[derive(Clone, Copy)]
struct Slot {
    at: usize,
    width: u32,
    min: u64,
    nulls: bool,
}

/// Writes the low `width` bits of `code` at bit `at` of `words`, most significant bit first;
/// a code may straddle two words.
fn put(words: &mut [u64], mut at: usize, mut width: u32, code: u64) {
    while width > 0 {
        let (w, bit) = (at / 64, (at % 64) as u32);
        let room = 64 - bit;
        let take = room.min(width);
        let part = if take == 64 {
            code
        } else {
            (code >> (width - take)) & ((1u64 << take) - 1)
        };
        words[w] |= part << (room - take);
        width -= take;
        at += take as usize;
    }
}

/// The stable sort order of the rows of several batches' key columns (`keys[batch][component]`)
/// when every component is an integer, date or timestamp. Each component takes only the bits
/// its values span in this run (`value - min`, a code below the valid ones for nulls), packed
/// one after another into as few `u64` words as they fit (hits' five components take two); each
/// row becomes `([u64; K], row)` and the pairs are sorted as integers in parallel, the row
/// number breaking ties (so the order is stable). `None` when a component is of another type.
pub fn normalized_order(keys: &[Vec<ArrayRef>], total: usize) -> Option<Vec<u32>> {
    let components = keys.first().map_or(0, |k| k.len());
    if components == 0 {
        return Some((0..total as u32).collect());
    }
    debug_assert!(
        keys.iter().all(|k| k.len() == components)
            && keys.iter().map(|k| k[0].len()).sum::<usize>() == total,
        "every batch has every component and the batches hold `total` rows"
    );
    let ordered: Vec<Vec<Ordered>> = keys
        .par_iter()
        .map(|k| k.iter().map(|a| Ordered::new(a.as_ref())).collect())
        .collect::<Option<_>>()?;
    let spans = (0..components)
        .map(|c| {
            ordered
                .iter()
                .map(|b| Span::of(&b[c]))
                .fold(Span::default(), Span::join)
        })
        .collect::<Vec<_>>();
    let packing = Packing::new(&spans)?;
    fn sort<const K: usize>(ordered: &[Vec<Ordered>], packing: &Packing, total: usize) -> Vec<u32> {
        let mut entries: Vec<([u64; K], u32)> = vec![([0; K], 0); total];
        // Each batch fills its own rows, in parallel.
        let mut parts = Vec::with_capacity(ordered.len());
        let mut rest = entries.as_mut_slice();
        let mut first = 0u32;
        for b in ordered {
            let rows = b.first().map_or(0, |c| c.values.len());
            let (part, tail) = rest.split_at_mut(rows);
            parts.push((b, part, first));
            rest = tail;
            first += rows as u32;
        }
        parts
            .into_par_iter()
            .for_each(|(b, part, first)| packing.pack(b, part, first));
        entries.par_sort_unstable();
        entries.into_par_iter().map(|(_, i)| i).collect()
    }
    macro_rules! by_width {
        ($($k:literal)*) => {
            match packing.words {
                $($k => sort::<$k>(&ordered, &packing, total),)*
                _ => return None,
            }
        };
    }
    Some(by_width!(0 1 2 3 4 5 6 7 8 9 10 11 12))
}

/// What one key component's values span: whether any is null, and the least and greatest
/// valid value (`None`: no valid value).
#[derive(Debug, Clone, Copy, Default)]
struct Span {
    nulls: bool,
    bounds: Option<(u64, u64)>,
}

impl Span {
    fn of(o: &Ordered) -> Span {
        Span {
            nulls: o.nulls.is_some(),
            bounds: o.bounds,
        }
    }

    fn join(self, other: Span) -> Span {
        let bounds = match (self.bounds, other.bounds) {
            (Some(a), Some(b)) => Some((a.0.min(b.0), a.1.max(b.1))),
            (a, b) => a.or(b),
        };
        Span {
            nulls: self.nulls || other.nulls,
            bounds,
        }
    }
}

/// Where each key component goes in the packed key, and how many words that takes.
struct Packing {
    slots: Vec<Slot>,
    words: usize,
}

impl Packing {
    /// Each component takes only the bits its values span (`value - min`, a code below the
    /// valid ones for nulls), one after another; `None` beyond [`MAX_WORDS`].
    fn new(spans: &[Span]) -> Option<Packing> {
        let mut slots = Vec::with_capacity(spans.len());
        let mut at = 0;
        for span in spans {
            let (min, width) = match span.bounds {
                Some((lo, hi)) => (lo, hi - lo),
                None => (0, 0),
            };
            // Codes run from 0 to span (+ 1 with nulls); a full 64-bit span with nulls takes 65.
            let width = match width.checked_add(span.nulls as u64) {
                Some(top) => 64 - top.leading_zeros(),
                None => 65,
            };
            slots.push(Slot {
                at,
                width,
                min,
                nulls: span.nulls,
            });
            at += width as usize;
        }
        let words = at.div_ceil(64);
        (words <= MAX_WORDS).then_some(Packing { slots, words })
    }

    /// Packs the keys of one batch (`b`, its components) into `part`, numbering its rows from
    /// `first`.
    fn pack<const K: usize>(&self, b: &[Ordered], part: &mut [([u64; K], u32)], first: u32) {
        for (i, e) in part.iter_mut().enumerate() {
            e.1 = first + i as u32;
        }
        for (col, slot) in b.iter().zip(&self.slots) {
            if slot.width == 0 {
                continue;
            }
            // A 65-bit code is a validity bit, then the value in the next 64 bits; any
            // other code with nulls is the value shifted above the null's 0.
            let split = slot.width == 65;
            let (at, width) = if split {
                (slot.at + 1, 64)
            } else {
                (slot.at, slot.width)
            };
            let shift = (slot.nulls && !split) as u64;
            for (i, e) in part.iter_mut().enumerate() {
                if col.nulls.as_ref().is_some_and(|n| n.is_null(i)) {
                    continue; // code 0, already there
                }
                if split {
                    put(&mut e.0, slot.at, 1, 1);
                }
                put(&mut e.0, at, width, col.values[i] - slot.min + shift);
            }
        }
    }
}

impl ClusteringOrder {
    /// Whether every component of the sort key of rows of `schema` is an integer, date or
    /// timestamp: then [`ClusteringOrder::streamed_order`] can order them.
    pub fn packs(&self, schema: &Schema) -> bool {
        let mut columns: Vec<usize> = self.stream.into_iter().collect();
        columns.extend(&self.keys);
        columns.push(self.time);
        columns.iter().all(|&c| {
            let t = schema.field(c).data_type();
            t.is_integer()
                || matches!(
                    t,
                    DataType::Date32 | DataType::Date64 | DataType::Timestamp(..)
                )
        })
    }

    /// The most words a packed key of rows of `schema` takes, from its components' types
    /// alone (a component takes at most its type's bits, and one more for nulls); `None` when
    /// the key does not pack (see [`ClusteringOrder::packs`]).
    pub fn packed_words_at_most(&self, schema: &Schema) -> Option<usize> {
        if !self.packs(schema) {
            return None;
        }
        let bits = |t: &DataType| match t.primitive_width() {
            Some(w) => 8 * w + 1,
            None => 65,
        };
        let mut total = 65; // the time bucket: an Int64 or UInt64
        for c in self.stream.iter().chain(&self.keys).chain([&self.time]) {
            total += bits(schema.field(*c).data_type());
        }
        let words = total.div_ceil(64);
        (words <= MAX_WORDS).then_some(words)
    }

    /// The stable clustering order of rows that come in `parts` parts, each read by
    /// `read(part)` as batches (holding at least the sort columns), as row numbers counted
    /// across the parts in order. Each part is read twice: for the span of each key
    /// component, then to pack each row's key into words (see [`normalized_order`]). Only the
    /// packed keys are held (hits': 24 bytes a row), never the rows' columns. `Ok(None)` when
    /// a component is not an integer, date or timestamp (see [`ClusteringOrder::packs`]).
    pub fn streamed_order<E>(
        &self,
        parts: usize,
        read: impl Fn(usize) -> Result<Vec<RecordBatch>, E> + Sync,
    ) -> Result<Option<Vec<u32>>, E>
    where
        E: From<LayoutError> + Send,
    {
        let Some(spans) = self.part_spans(parts, &read)? else {
            return Ok(None);
        };
        let rows: Vec<usize> = spans.iter().map(|(r, _)| *r).collect();
        let total: usize = rows.iter().sum();
        if total > u32::MAX as usize {
            return Err(E::from(LayoutError::BatchTooLarge {
                rows: total,
                max: u32::MAX as usize,
            }));
        }
        let joined: Vec<Span> = (0..self.fields.len())
            .map(|c| {
                spans
                    .iter()
                    .map(|(_, s)| s[c])
                    .fold(Span::default(), Span::join)
            })
            .collect();
        let Some(packing) = Packing::new(&joined) else {
            return Ok(None);
        };
        let sorted = Streamed {
            order: self,
            packing: &packing,
            rows: &rows,
            read: &read,
        };
        macro_rules! by_width {
            ($($k:literal)*) => {
                match packing.words {
                    $($k => sorted.sort::<$k>(),)*
                    _ => return Ok(None),
                }
            };
        }
        by_width!(0 1 2 3 4 5 6 7 8 9 10 11 12).map(Some)
    }

    /// Each part's rows and the span of each key component in it; `None` when a component
    /// does not pack.
    fn part_spans<E>(
        &self,
        parts: usize,
        read: &ReadPart<'_, E>,
    ) -> Result<Option<Vec<PartSpans>>, E>
    where
        E: From<LayoutError> + Send,
    {
        (0..parts)
            .into_par_iter()
            .map(|p| {
                let mut rows = 0usize;
                let mut spans = vec![Span::default(); self.fields.len()];
                for b in read(p)? {
                    let Some(ordered) = self.ordered(&b)? else {
                        return Ok(None);
                    };
                    rows += b.num_rows();
                    for (s, o) in spans.iter_mut().zip(&ordered) {
                        *s = s.join(Span::of(o));
                    }
                }
                Ok(Some((rows, spans)))
            })
            .collect()
    }

    /// The key components of a batch as order-preserving words; `None` when one does not
    /// pack.
    fn ordered(&self, b: &RecordBatch) -> Result<Option<Vec<Ordered>>, LayoutError> {
        Ok(self
            .key_columns(b)?
            .iter()
            .map(|a| Ordered::new(a.as_ref()))
            .collect())
    }
}

/// Reads one part of a streamed order's rows.
type ReadPart<'a, E> = dyn Fn(usize) -> Result<Vec<RecordBatch>, E> + Sync + 'a;

/// A part's rows and the span of each key component in it.
type PartSpans = (usize, Vec<Span>);

/// A streamed order's second read: every part's keys packed into their rows' entries.
struct Streamed<'a, E> {
    order: &'a ClusteringOrder,
    packing: &'a Packing,
    /// Rows of each part, from the first read.
    rows: &'a [usize],
    read: &'a ReadPart<'a, E>,
}

impl<E: From<LayoutError> + Send> Streamed<'_, E> {
    fn sort<const K: usize>(&self) -> Result<Vec<u32>, E> {
        let total = self.rows.iter().sum();
        let mut entries: Vec<([u64; K], u32)> = vec![([0; K], 0); total];
        let mut parts = Vec::with_capacity(self.rows.len());
        let mut rest = entries.as_mut_slice();
        let mut first = 0u32;
        for (p, &n) in self.rows.iter().enumerate() {
            let (part, tail) = rest.split_at_mut(n);
            parts.push((p, part, first));
            rest = tail;
            first += n as u32;
        }
        parts
            .into_par_iter()
            .try_for_each(|(p, part, first)| self.pack_part(p, part, first))?;
        entries.par_sort_unstable();
        Ok(entries.into_par_iter().map(|(_, i)| i).collect())
    }

    /// Reads part `p` again and packs its rows into `part`, numbered from `first`. The part
    /// must hold the rows the first read counted.
    fn pack_part<const K: usize>(
        &self,
        p: usize,
        part: &mut [([u64; K], u32)],
        first: u32,
    ) -> Result<(), E> {
        let mut at = 0;
        for b in (self.read)(p)? {
            let n = b.num_rows();
            let ordered = self.order.ordered(&b)?.ok_or(LayoutError::Changed)?;
            let slice = part.get_mut(at..at + n).ok_or(LayoutError::Changed)?;
            self.packing.pack(&ordered, slice, first + at as u32);
            at += n;
        }
        if at != part.len() {
            return Err(E::from(LayoutError::Changed));
        }
        Ok(())
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
