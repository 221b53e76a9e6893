//! The gather of a sorted run: every column taken by the run's permutation, column by column
//! in parallel.
//!
//! String and binary columns without nulls go through [`take_bytes`]: arrow's
//! `interleave_bytes` reads every row's offsets twice at random (once to size the output, once
//! to copy), and a profile of a 2M-row load put 88 % of its time on those two loads, waiting
//! for memory. A permutation takes every value exactly once, so the output's size is the
//! sources' size and the first pass can go; the one pass left asks for the offsets and the
//! bytes of the rows a few places ahead before it needs them, so the misses overlap instead of
//! following each other. Fixed-width columns without nulls go through [`take_fixed`], which
//! prefetches the same way. Everything else (nulls, booleans, nested types) goes through
//! `arrow::compute::interleave`.

use arrow::array::{
    Array, ArrayData, ArrayRef, AsArray, GenericByteArray, RecordBatch, RecordBatchOptions,
    make_array,
};
use arrow::buffer::{Buffer, MutableBuffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::ArrowNativeType;
use arrow::datatypes::{
    BinaryType, ByteArrayType, DataType, LargeBinaryType, LargeUtf8Type, SchemaRef, Utf8Type,
};
use arrow::error::ArrowError;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::{ArrowStage, LoadError};

/// The rows of `batches` in `order`, gathered column by column in parallel, largest column
/// first (one column's random reads stay within that column's buffers, which keeps them in
/// cache). Each source column is released to a [`Pool`] as soon as its sorted copy exists, so
/// the run never needs twice its memory: at any moment only the columns being gathered exist
/// twice, besides pooled buffers no chunk has taken yet (freed when the gather ends).
///
/// The sorted run comes in batches of as many rows as the longest source batch, so that a
/// released source column's buffers fit the next columns' sorted chunks: they are written again
/// instead of fresh memory, which the kernel would fault in and zero page by page.
pub(crate) fn gather_consuming(
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
    order: &[(usize, usize)],
) -> Result<Vec<RecordBatch>, LoadError> {
    let chunk_rows = batches
        .iter()
        .map(|b| b.num_rows())
        .max()
        .unwrap_or(0)
        .max(1);
    let mut columns: Vec<Vec<ArrayRef>> =
        vec![Vec::with_capacity(batches.len()); schema.fields().len()];
    for b in batches {
        for (c, a) in b.columns().iter().enumerate() {
            columns[c].push(a.clone());
        }
    }
    let costs: Vec<usize> = columns
        .iter()
        .map(|arrays| arrays.iter().map(|a| a.get_buffer_memory_size()).sum())
        .collect();
    // Each column is taken (and its source released) by the one task that gathers it.
    let sources: Vec<Mutex<Vec<ArrayRef>>> = columns.into_iter().map(Mutex::new).collect();
    let pool = Pool::default();
    let mut sorted = ravel_encode::largest_first(&costs, |c| {
        let arrays = std::mem::take(&mut *sources[c].lock().expect("one task per column"));
        let taken = take(&arrays, order, chunk_rows, &pool);
        pool.give(arrays);
        taken
    })
    .into_iter()
    .map(|chunks| chunks.map(|c| c.into_iter()))
    .collect::<Result<Vec<_>, _>>()
    .map_err(LoadError::arrow(ArrowStage::Gathering))?;
    order
        .chunks(chunk_rows)
        .map(|o| {
            let columns = sorted
                .iter_mut()
                .map(|chunks| chunks.next().expect("a chunk of every column"))
                .collect();
            let options = RecordBatchOptions::new().with_row_count(Some(o.len()));
            RecordBatch::try_new_with_options(schema.clone(), columns, &options)
                .map_err(LoadError::arrow(ArrowStage::Gathering))
        })
        .collect()
}

/// Buffers of released source columns, handed out again for sorted chunks.
///
/// A sorted run is as large as its sources, and gathering it into fresh memory made the kernel
/// fault in and zero about a gigabyte for a 2M-row hits run. A source column is released once
/// its sorted copy exists; its buffers (those nothing else holds) come here, and a chunk of a
/// later column takes the smallest one that fits it, at most twice its size (a larger one
/// would keep memory the run does not need). Fixed-width values and string offsets of chunks
/// as long as the source batches fit such buffers exactly; string values fit them roughly.
#[derive(Default)]
pub(crate) struct Pool {
    /// By capacity in bytes.
    free: Mutex<BTreeMap<usize, Vec<MutableBuffer>>>,
}

impl Pool {
    /// Keeps the buffers of `arrays` that nothing else holds.
    pub(crate) fn give(&self, arrays: Vec<ArrayRef>) {
        let mut kept = Vec::new();
        for a in arrays {
            let data = a.to_data();
            drop(a);
            let buffers = data.buffers().to_vec();
            drop(data);
            for b in buffers {
                // Aligned for any native width a chunk writes (malloc gives at least 16).
                if let Ok(m) = b.into_mutable()
                    && (m.as_ptr() as usize).is_multiple_of(16)
                    && m.capacity() > 0
                {
                    kept.push(m);
                }
            }
        }
        let mut free = self.free.lock().expect("no panic holds it");
        for m in kept {
            free.entry(m.capacity()).or_default().push(m);
        }
    }

    /// An empty buffer with room for `bytes`: a kept one if one fits, else a new one.
    pub(crate) fn take(&self, bytes: usize) -> MutableBuffer {
        let mut free = self.free.lock().expect("no panic holds it");
        let fits = free
            .range(bytes.max(1)..=bytes.max(1).saturating_mul(2))
            .next()
            .map(|(&capacity, _)| capacity);
        if let Some(capacity) = fits {
            let list = free.get_mut(&capacity).expect("found above");
            let mut m = list.pop().expect("no empty list is kept");
            if list.is_empty() {
                free.remove(&capacity);
            }
            m.clear();
            return m;
        }
        drop(free);
        MutableBuffer::with_capacity(bytes)
    }
}

/// The values of `arrays` (pieces of one column) at `order`'s `(array, row)` pairs, in chunks
/// of `chunk_rows` rows (the last may be shorter), their buffers taken from `pool`.
pub(crate) fn take(
    arrays: &[ArrayRef],
    order: &[(usize, usize)],
    chunk_rows: usize,
    pool: &Pool,
) -> Result<Vec<ArrayRef>, ArrowError> {
    let chunk_rows = chunk_rows.max(1);
    let nulls = arrays.iter().any(|a| a.null_count() > 0);
    let Some(data_type) = arrays.first().map(|a| a.data_type()).filter(|_| !nulls) else {
        return interleave(arrays, order, chunk_rows);
    };
    match (data_type, data_type.primitive_width()) {
        (DataType::Utf8, _) => take_bytes::<Utf8Type>(arrays, order, chunk_rows, pool),
        (DataType::LargeUtf8, _) => take_bytes::<LargeUtf8Type>(arrays, order, chunk_rows, pool),
        (DataType::Binary, _) => take_bytes::<BinaryType>(arrays, order, chunk_rows, pool),
        (DataType::LargeBinary, _) => {
            take_bytes::<LargeBinaryType>(arrays, order, chunk_rows, pool)
        }
        (_, Some(8)) => take_fixed::<u64>(arrays, order, chunk_rows, pool),
        (_, Some(4)) => take_fixed::<u32>(arrays, order, chunk_rows, pool),
        (_, Some(2)) => take_fixed::<u16>(arrays, order, chunk_rows, pool),
        (_, Some(1)) => take_fixed::<u8>(arrays, order, chunk_rows, pool),
        _ => interleave(arrays, order, chunk_rows),
    }
}

/// [`take`] by `arrow::compute::interleave` (nulls, booleans, nested types).
fn interleave(
    arrays: &[ArrayRef],
    order: &[(usize, usize)],
    chunk_rows: usize,
) -> Result<Vec<ArrayRef>, ArrowError> {
    let refs: Vec<&dyn Array> = arrays.iter().map(|a| a.as_ref()).collect();
    if refs.is_empty() {
        return Ok(Vec::new());
    }
    order
        .chunks(chunk_rows)
        .map(|o| arrow::compute::interleave(&refs, o))
        .collect()
}

/// How many rows ahead the offsets are requested; the bytes are requested half as far ahead,
/// once their offset has (most likely) arrived.
const AHEAD: usize = 16;

/// [`take`] of string or binary pieces without nulls, in one pass with prefetching. Each
/// chunk's offsets and values go into pool buffers; the values' buffer is chosen for the
/// chunk's share of the sources' bytes and grows if the chunk's values are longer.
fn take_bytes<T: ByteArrayType>(
    arrays: &[ArrayRef],
    order: &[(usize, usize)],
    chunk_rows: usize,
    pool: &Pool,
) -> Result<Vec<ArrayRef>, ArrowError> {
    let arrays: Vec<&GenericByteArray<T>> = arrays.iter().map(|a| a.as_bytes::<T>()).collect();
    let offsets: Vec<&[T::Offset]> = arrays.iter().map(|a| a.value_offsets()).collect();
    let data: Vec<&[u8]> = arrays.iter().map(|a| a.value_data()).collect();
    // The values' bytes of all pieces: exactly the output's when `order` is a permutation of
    // the pieces' rows (as a sorted run's is).
    let bytes: usize = offsets
        .iter()
        .map(|o| o[o.len() - 1].as_usize() - o[0].as_usize())
        .sum();
    let width = std::mem::size_of::<T::Offset>();
    let mut chunks = Vec::with_capacity(order.len().div_ceil(chunk_rows));
    for (k, o) in order.chunks(chunk_rows).enumerate() {
        let share = (bytes as u128 * o.len() as u128 / order.len() as u128) as usize;
        let mut values = pool.take(share);
        let mut ends = pool.take((o.len() + 1) * width);
        ends.push(T::Offset::usize_as(0));
        for (i, &(a, r)) in o.iter().enumerate() {
            let at = k * chunk_rows + i;
            if let Some(&(pa, pr)) = order.get(at + AHEAD) {
                prefetch(offsets[pa].as_ptr().wrapping_add(pr));
            }
            if let Some(&(pa, pr)) = order.get(at + AHEAD / 2) {
                prefetch(data[pa].as_ptr().wrapping_add(offsets[pa][pr].as_usize()));
            }
            let from = offsets[a];
            values.extend_from_slice(&data[a][from[r].as_usize()..from[r + 1].as_usize()]);
            let end = T::Offset::from_usize(values.len())
                .ok_or_else(|| ArrowError::OffsetOverflowError(values.len()))?;
            // SAFETY: `ends` has room for `o.len() + 1` offsets and holds at most that many.
            unsafe { ends.push_unchecked(end) };
        }
        // Offsets ascend from 0 to the values' length and a string type's values are whole
        // values of valid pieces, by construction; `new` and `try_new` check both again (for
        // a string type, one sequential pass over the bytes; hits' strings arrive as Binary,
        // which has none).
        let array = GenericByteArray::<T>::try_new(
            OffsetBuffer::new(ScalarBuffer::from(Buffer::from(ends))),
            values.into(),
            None,
        )?;
        chunks.push(Arc::new(array) as ArrayRef);
    }
    Ok(chunks)
}

/// How many rows ahead a fixed-width value is requested.
const AHEAD_FIXED: usize = 32;

/// [`take`] of fixed-width pieces without nulls (any type of that width: integers, dates,
/// timestamps), moved as plain `T`s with prefetching.
fn take_fixed<T: ArrowNativeType>(
    arrays: &[ArrayRef],
    order: &[(usize, usize)],
    chunk_rows: usize,
    pool: &Pool,
) -> Result<Vec<ArrayRef>, ArrowError> {
    let data: Vec<ArrayData> = arrays.iter().map(|a| a.to_data()).collect();
    let values: Vec<&[T]> = data
        .iter()
        .map(|d| &d.buffers()[0].typed_data::<T>()[d.offset()..d.offset() + d.len()])
        .collect();
    // `take` sends only non-empty pieces here.
    let data_type = arrays[0].data_type();
    let mut chunks = Vec::with_capacity(order.len().div_ceil(chunk_rows));
    for (k, o) in order.chunks(chunk_rows).enumerate() {
        let mut out = pool.take(o.len() * std::mem::size_of::<T>());
        for (i, &(a, r)) in o.iter().enumerate() {
            if let Some(&(pa, pr)) = order.get(k * chunk_rows + i + AHEAD_FIXED) {
                prefetch(values[pa].as_ptr().wrapping_add(pr));
            }
            // SAFETY: `out` has room for `o.len()` values and holds at most that many.
            unsafe { out.push_unchecked(values[a][r]) };
        }
        let taken = ArrayData::builder(data_type.clone())
            .len(o.len())
            .add_buffer(out.into())
            .build()?;
        chunks.push(make_array(taken));
    }
    Ok(chunks)
}

/// Asks the CPU to bring the cache line at `p` in; no effect on correctness (a prefetch of any
/// address is allowed and never faults).
#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing the program sees and cannot fault, whatever `p` is.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{
        BinaryArray, Date32Array, Float64Array, Int8Array, Int32Array, Int64Array,
        LargeBinaryArray, LargeStringArray, StringArray, TimestampSecondArray, UInt16Array,
    };
    use proptest::prelude::*;

    fn permutation(lens: &[usize], seed: u64) -> Vec<(usize, usize)> {
        let mut order: Vec<(usize, usize)> = lens
            .iter()
            .enumerate()
            .flat_map(|(a, &n)| (0..n).map(move |r| (a, r)))
            .collect();
        let mut x = seed | 1;
        for i in (1..order.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            order.swap(i, (x % (i as u64 + 1)) as usize);
        }
        order
    }

    /// A copy of `a` in buffers of its own (arrow's concat of one array shares them).
    fn copy(a: &ArrayRef) -> ArrayRef {
        arrow::compute::concat(&[a.as_ref(), a.slice(0, 0).as_ref()]).unwrap()
    }

    /// `take` gives what arrow's interleave gives, chunk by chunk: for `order`, for it with
    /// some rows repeated, and for its first half, in chunks of 1, 3 and all rows, with
    /// buffers drawn from a pool that holds the pieces' own buffers of an earlier take.
    fn same_as_arrow(arrays: &[ArrayRef], order: &[(usize, usize)]) -> Result<(), TestCaseError> {
        if arrays.is_empty() {
            return Ok(());
        }
        let refs: Vec<&dyn Array> = arrays.iter().map(|a| a.as_ref()).collect();
        let twice: Vec<(usize, usize)> =
            order.iter().chain(order.iter().take(7)).copied().collect();
        for o in [order, &twice, &order[..order.len() / 2]] {
            for chunk_rows in [1, 3, o.len().max(1)] {
                let pool = Pool::default();
                // Copies of the pieces, released into the pool as a gather releases a column.
                pool.give(arrays.iter().map(|a| copy(a)).collect());
                let got = take(arrays, o, chunk_rows, &pool).unwrap();
                prop_assert_eq!(got.len(), o.len().div_ceil(chunk_rows));
                for (g, part) in got.iter().zip(o.chunks(chunk_rows)) {
                    let want = arrow::compute::interleave(&refs, part).unwrap();
                    prop_assert_eq!(g.to_data(), want.to_data());
                }
            }
        }
        Ok(())
    }

    proptest! {
        /// The one-pass take of every string and binary type: pieces sliced at both ends
        /// (offsets not starting at zero), empty strings, non-ASCII text, empty pieces.
        #[test]
        fn take_bytes_is_arrows_interleave(
            pieces in prop::collection::vec(
                (prop::collection::vec("\\PC{0,20}", 0..60), 0usize..5, 0usize..3),
                0..6,
            ),
            seed in any::<u64>(),
            kind in 0usize..4,
        ) {
            let arrays: Vec<ArrayRef> = pieces
                .iter()
                .map(|(values, skip, tail)| {
                    let skip = (*skip).min(values.len());
                    let tail = (*tail).min(values.len() - skip);
                    let bytes = values.iter().map(|v| v.as_bytes());
                    let a: ArrayRef = match kind {
                        0 => Arc::new(StringArray::from_iter_values(values)),
                        1 => Arc::new(LargeStringArray::from_iter_values(values)),
                        2 => Arc::new(BinaryArray::from_iter_values(bytes)),
                        _ => Arc::new(LargeBinaryArray::from_iter_values(bytes)),
                    };
                    a.slice(skip, values.len() - skip - tail)
                })
                .collect();
            let lens: Vec<usize> = arrays.iter().map(|a| a.len()).collect();
            same_as_arrow(&arrays, &permutation(&lens, seed))?;
        }
    }

    proptest! {
        /// Fixed-width pieces of every width (sliced, empty, with a type beyond the native
        /// one: timestamps, dates) give what arrow's interleave gives.
        #[test]
        fn take_fixed_is_arrows_interleave(
            pieces in prop::collection::vec(
                (prop::collection::vec(any::<i64>(), 0..60), 0usize..5),
                0..6,
            ),
            seed in any::<u64>(),
            width in 0usize..5,
        ) {
            let arrays: Vec<ArrayRef> = pieces
                .iter()
                .map(|(values, skip)| {
                    let skip = (*skip).min(values.len());
                    let v = values.iter().copied();
                    let a: ArrayRef = match width {
                        0 => Arc::new(TimestampSecondArray::from_iter_values(v)),
                        1 => Arc::new(Date32Array::from_iter_values(v.map(|x| x as i32))),
                        2 => Arc::new(UInt16Array::from_iter_values(v.map(|x| x as u16))),
                        3 => Arc::new(Int8Array::from_iter_values(v.map(|x| x as i8))),
                        _ => Arc::new(Float64Array::from_iter_values(v.map(|x| x as f64))),
                    };
                    a.slice(skip, values.len() - skip)
                })
                .collect();
            let lens: Vec<usize> = arrays.iter().map(|a| a.len()).collect();
            same_as_arrow(&arrays, &permutation(&lens, seed))?;
        }
    }

    #[test]
    fn binary_with_nulls_and_an_int32_column_are_taken_in_order() {
        let pool = Pool::default();
        let a: ArrayRef = Arc::new(BinaryArray::from(vec![Some(&b"x"[..]), None, Some(b"yz")]));
        let b: ArrayRef = Arc::new(BinaryArray::from(vec![None, Some(&b"w"[..])]));
        let order = [(1, 1), (0, 2), (0, 1), (1, 0), (0, 0)];
        let got = take(&[a.clone(), b.clone()], &order, 5, &pool).unwrap();
        let want = BinaryArray::from(vec![Some(&b"w"[..]), Some(b"yz"), None, None, Some(b"x")]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].to_data(), want.to_data());
        let i: ArrayRef = Arc::new(Int32Array::from(vec![1, 2]));
        let got = take(&[i], &[(0, 1), (0, 0)], 5, &pool).unwrap();
        assert_eq!(got[0].to_data(), Int32Array::from(vec![2, 1]).to_data());
    }

    /// Which path each type takes, seen through the pool: the one-pass paths write their chunks
    /// into pooled buffers, arrow's interleave (nulls, booleans) into its own.
    #[test]
    fn each_type_takes_its_path() {
        use arrow::array::{BooleanArray, Int16Array, Int64Array as I64};
        let n = 500;
        let strings: Vec<String> = (0..n).map(|i| format!("value {i}")).collect();
        let cases: Vec<(ArrayRef, bool)> = vec![
            (Arc::new(StringArray::from_iter_values(&strings)), true),
            (Arc::new(LargeStringArray::from_iter_values(&strings)), true),
            (
                Arc::new(BinaryArray::from_iter_values(
                    strings.iter().map(|s| s.as_bytes()),
                )),
                true,
            ),
            (
                Arc::new(LargeBinaryArray::from_iter_values(
                    strings.iter().map(|s| s.as_bytes()),
                )),
                true,
            ),
            (Arc::new(I64::from_iter_values(0..n as i64)), true),
            (
                Arc::new(TimestampSecondArray::from_iter_values(0..n as i64)),
                true,
            ),
            (Arc::new(Date32Array::from_iter_values(0..n as i32)), true),
            (Arc::new(Int16Array::from_iter_values(0..n as i16)), true),
            (
                Arc::new(Int8Array::from_iter_values((0..n).map(|i| i as i8))),
                true,
            ),
            (
                Arc::new(Float64Array::from_iter_values((0..n).map(|i| i as f64))),
                true,
            ),
            (
                Arc::new(StringArray::from_iter(
                    (0..n).map(|i| (i % 7 > 0).then_some("x")),
                )),
                false,
            ),
            (
                Arc::new(I64::from_iter(
                    (0..n).map(|i| (i % 7 > 0).then_some(i as i64)),
                )),
                false,
            ),
            (
                Arc::new(BooleanArray::from_iter((0..n).map(|i| Some(i % 2 == 0)))),
                false,
            ),
        ];
        for (array, fast) in cases {
            let pieces = vec![array.slice(0, n / 2), array.slice(n / 2, n - n / 2)];
            let order = permutation(&[n / 2, n - n / 2], 3);
            // A copy of the column goes to the pool (its buffers fit the one chunk exactly);
            // their addresses are what a one-pass take writes into.
            let copies = vec![copy(&array)];
            let pooled: Vec<usize> = copies
                .iter()
                .flat_map(|a| a.to_data().buffers().to_vec())
                .map(|b| b.as_ptr() as usize)
                .collect();
            let pool = Pool::default();
            pool.give(copies);
            let got = take(&pieces, &order, n, &pool).unwrap();
            // Every buffer of the chunk (a string chunk's offsets and values alike).
            for b in got[0].to_data().buffers() {
                let at = b.as_ptr() as usize;
                assert_eq!(
                    pooled.contains(&at),
                    fast,
                    "{}: a buffer of the chunk is pooled: {}",
                    array.data_type(),
                    pooled.contains(&at)
                );
            }
            let refs: Vec<&dyn Array> = pieces.iter().map(|a| a.as_ref()).collect();
            let want = arrow::compute::interleave(&refs, &order).unwrap();
            assert_eq!(got[0].to_data(), want.to_data());
        }
    }

    /// The pool hands out the smallest kept buffer that fits, and none more than twice the
    /// size asked for.
    #[test]
    fn the_pool_hands_out_the_smallest_fit_up_to_twice_the_size() {
        let pool = Pool::default();
        let sized =
            |n: usize| -> ArrayRef { Arc::new(Int8Array::from_iter_values((0..n).map(|_| 1))) };
        let (small, large) = (sized(1024), sized(4096));
        let small_at = small.to_data().buffers()[0].as_ptr() as usize;
        let large_at = large.to_data().buffers()[0].as_ptr() as usize;
        pool.give(vec![small, large]);
        // 1,500 bytes: only the 4,096-byte buffer is big enough, and it is more than twice.
        let fresh = pool.take(1500);
        assert!(fresh.capacity() >= 1500);
        assert_ne!(fresh.as_ptr() as usize, large_at);
        assert_ne!(fresh.as_ptr() as usize, small_at);
        // 600 bytes: both fit within twice; the smaller one is handed out, empty.
        let got = pool.take(600);
        assert_eq!(got.as_ptr() as usize, small_at);
        assert_eq!(got.len(), 0);
        // 2,500 bytes: the larger one.
        assert_eq!(pool.take(2500).as_ptr() as usize, large_at);
        // Nothing is left.
        assert_ne!(pool.take(600).as_ptr() as usize, small_at);
    }

    /// The whole gather: batches of different lengths and columns of every path (strings,
    /// fixed widths, nulls, booleans) come back in chunks as long as the longest batch, each
    /// row where the order puts it.
    #[test]
    fn a_run_is_gathered_into_batches_as_long_as_the_longest_source_batch() {
        use arrow::array::BooleanArray;
        use arrow::datatypes::{Field, Schema};
        let schema = Arc::new(Schema::new(vec![
            Field::new("s", DataType::Utf8, false),
            Field::new("i", DataType::Int64, false),
            Field::new("n", DataType::Int32, true),
            Field::new("b", DataType::Boolean, false),
        ]));
        let batch = |rows: std::ops::Range<i64>| {
            let columns: Vec<ArrayRef> = vec![
                Arc::new(StringArray::from_iter_values(
                    rows.clone().map(|r| format!("row {r}")),
                )),
                Arc::new(Int64Array::from_iter_values(rows.clone())),
                Arc::new(Int32Array::from_iter(
                    rows.clone().map(|r| (r % 3 > 0).then_some(r as i32)),
                )),
                Arc::new(BooleanArray::from_iter(rows.map(|r| Some(r % 2 == 0)))),
            ];
            RecordBatch::try_new(schema.clone(), columns).unwrap()
        };
        let batches = vec![batch(0..3), batch(3..8), batch(8..10)];
        let order = permutation(&[3, 5, 2], 11);
        let want = arrow::compute::concat_batches(&schema, &batches).unwrap();
        let starts = [0, 3, 8];
        let rows: Vec<u32> = order.iter().map(|&(b, r)| (starts[b] + r) as u32).collect();
        let want = arrow::compute::take_record_batch(&want, &arrow::array::UInt32Array::from(rows))
            .unwrap();
        let got = gather_consuming(&schema, batches, &order).unwrap();
        let lens: Vec<usize> = got.iter().map(|b| b.num_rows()).collect();
        assert_eq!(lens, vec![5, 5]);
        assert_eq!(arrow::compute::concat_batches(&schema, &got).unwrap(), want);
    }

    /// A released column's buffers are written again by the next column's chunks: the
    /// sorted chunks of `b` live where `a`'s sources were, and hold `b`'s values.
    #[test]
    fn released_buffers_hold_the_next_columns_chunks() {
        let pool = Pool::default();
        let source = |base: i64| -> Vec<ArrayRef> {
            (0..3)
                .map(|p| {
                    Arc::new(Int64Array::from_iter_values(
                        (0..1000).map(|r| base + p * 1000 + r),
                    )) as ArrayRef
                })
                .collect()
        };
        let order = permutation(&[1000, 1000, 1000], 7);
        let a = source(0);
        let places: Vec<usize> = a
            .iter()
            .map(|x| x.to_data().buffers()[0].as_ptr() as usize)
            .collect();
        let a_sorted = take(&a, &order, 1000, &pool).unwrap();
        pool.give(a);
        let b = source(1_000_000);
        let b_sorted = take(&b, &order, 1000, &pool).unwrap();
        for chunk in &b_sorted {
            let at = chunk.to_data().buffers()[0].as_ptr() as usize;
            assert!(
                places.contains(&at),
                "chunk at {at:#x}, sources at {places:x?}"
            );
        }
        let refs: Vec<&dyn Array> = b.iter().map(|x| x.as_ref()).collect();
        for (chunk, part) in b_sorted.iter().zip(order.chunks(1000)) {
            let want = arrow::compute::interleave(&refs, part).unwrap();
            assert_eq!(chunk.to_data(), want.to_data());
        }
        // Buffers still held elsewhere (a's sorted chunks) are not given out.
        let held: Vec<usize> = a_sorted
            .iter()
            .map(|x| x.to_data().buffers()[0].as_ptr() as usize)
            .collect();
        pool.give(a_sorted.clone());
        let c = take(&source(5), &order, 1000, &pool).unwrap();
        for chunk in &c {
            assert!(!held.contains(&(chunk.to_data().buffers()[0].as_ptr() as usize)));
        }
    }
}
