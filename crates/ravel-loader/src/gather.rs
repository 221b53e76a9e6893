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
    Array, ArrayData, ArrayRef, AsArray, GenericByteArray, RecordBatch, make_array,
};
use arrow::buffer::{Buffer, OffsetBuffer};
use arrow::datatypes::ArrowNativeType;
use arrow::datatypes::{
    BinaryType, ByteArrayType, DataType, LargeBinaryType, LargeUtf8Type, SchemaRef, Utf8Type,
};
use arrow::error::ArrowError;
use std::sync::Arc;

use crate::LoadError;

/// The rows of `batches` in `order`, gathered column by column in parallel, largest column
/// first (one column's random reads stay within that column's buffers, which keeps them in
/// cache). Each source column is released as soon as its sorted copy exists, so the run never
/// needs twice its memory: at any moment only the columns being gathered exist twice.
pub(crate) fn gather_consuming(
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
    order: &[(usize, usize)],
) -> Result<RecordBatch, LoadError> {
    use std::sync::Mutex;
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
    let sorted = ravel_encode::largest_first(&costs, |c| {
        let arrays = std::mem::take(&mut *sources[c].lock().expect("one task per column"));
        take(&arrays, order)
    })
    .into_iter()
    .collect::<Result<Vec<_>, _>>()?;
    Ok(RecordBatch::try_new(schema.clone(), sorted)?)
}

/// The values of `arrays` (pieces of one column) at `order`'s `(array, row)` pairs.
pub(crate) fn take(arrays: &[ArrayRef], order: &[(usize, usize)]) -> Result<ArrayRef, ArrowError> {
    let nulls = arrays.iter().any(|a| a.null_count() > 0);
    match arrays.first().map(|a| a.data_type()) {
        Some(DataType::Utf8) if !nulls => take_bytes::<Utf8Type>(arrays, order),
        Some(DataType::LargeUtf8) if !nulls => take_bytes::<LargeUtf8Type>(arrays, order),
        Some(DataType::Binary) if !nulls => take_bytes::<BinaryType>(arrays, order),
        Some(DataType::LargeBinary) if !nulls => take_bytes::<LargeBinaryType>(arrays, order),
        Some(t) if !nulls && t.primitive_width() == Some(8) => take_fixed::<u64>(arrays, order),
        Some(t) if !nulls && t.primitive_width() == Some(4) => take_fixed::<u32>(arrays, order),
        Some(t) if !nulls && t.primitive_width() == Some(2) => take_fixed::<u16>(arrays, order),
        Some(t) if !nulls && t.primitive_width() == Some(1) => take_fixed::<u8>(arrays, order),
        _ => {
            let refs: Vec<&dyn Array> = arrays.iter().map(|a| a.as_ref()).collect();
            arrow::compute::interleave(&refs, order)
        }
    }
}

/// How many rows ahead the offsets are requested; the bytes are requested half as far ahead,
/// once their offset has (most likely) arrived.
const AHEAD: usize = 16;

/// [`take`] of string or binary pieces without nulls, in one pass with prefetching.
fn take_bytes<T: ByteArrayType>(
    arrays: &[ArrayRef],
    order: &[(usize, usize)],
) -> Result<ArrayRef, ArrowError> {
    let arrays: Vec<&GenericByteArray<T>> = arrays.iter().map(|a| a.as_bytes::<T>()).collect();
    let offsets: Vec<&[T::Offset]> = arrays.iter().map(|a| a.value_offsets()).collect();
    let data: Vec<&[u8]> = arrays.iter().map(|a| a.value_data()).collect();
    // Exact when `order` is a permutation of the pieces' rows (as a sorted run's is); only a
    // first guess otherwise.
    let capacity: usize = offsets
        .iter()
        .map(|o| o[o.len() - 1].as_usize() - o[0].as_usize())
        .sum();
    let mut values: Vec<u8> = Vec::with_capacity(capacity);
    let mut ends: Vec<T::Offset> = Vec::with_capacity(order.len() + 1);
    ends.push(T::Offset::usize_as(0));
    for (i, &(a, r)) in order.iter().enumerate() {
        if let Some(&(pa, pr)) = order.get(i + AHEAD) {
            prefetch(offsets[pa].as_ptr().wrapping_add(pr));
        }
        if let Some(&(pa, pr)) = order.get(i + AHEAD / 2) {
            prefetch(data[pa].as_ptr().wrapping_add(offsets[pa][pr].as_usize()));
        }
        let o = offsets[a];
        values.extend_from_slice(&data[a][o[r].as_usize()..o[r + 1].as_usize()]);
        ends.push(
            T::Offset::from_usize(values.len())
                .ok_or(ArrowError::OffsetOverflowError(values.len()))?,
        );
    }
    // Offsets ascend from 0 to the values' length and a string type's values are whole values
    // of valid pieces, by construction; `try_new` checks both again (for a string type, one
    // sequential pass over the bytes; hits' strings arrive as Binary, which has none).
    let array =
        GenericByteArray::<T>::try_new(OffsetBuffer::new(ends.into()), values.into(), None)?;
    Ok(Arc::new(array))
}

/// How many rows ahead a fixed-width value is requested.
const AHEAD_FIXED: usize = 32;

/// [`take`] of fixed-width pieces without nulls (any type of that width: integers, dates,
/// timestamps), moved as plain `T`s with prefetching.
fn take_fixed<T: ArrowNativeType>(
    arrays: &[ArrayRef],
    order: &[(usize, usize)],
) -> Result<ArrayRef, ArrowError> {
    let data: Vec<ArrayData> = arrays.iter().map(|a| a.to_data()).collect();
    let values: Vec<&[T]> = data
        .iter()
        .map(|d| &d.buffers()[0].typed_data::<T>()[d.offset()..d.offset() + d.len()])
        .collect();
    let mut out: Vec<T> = Vec::with_capacity(order.len());
    for (i, &(a, r)) in order.iter().enumerate() {
        if let Some(&(pa, pr)) = order.get(i + AHEAD_FIXED) {
            prefetch(values[pa].as_ptr().wrapping_add(pr));
        }
        out.push(values[a][r]);
    }
    let taken = ArrayData::builder(arrays[0].data_type().clone())
        .len(order.len())
        .add_buffer(Buffer::from_vec(out))
        .build()?;
    Ok(make_array(taken))
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
        BinaryArray, Date32Array, Float64Array, Int8Array, Int32Array, LargeBinaryArray,
        LargeStringArray, StringArray, TimestampSecondArray, UInt16Array,
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

    /// `take` gives what arrow's interleave gives: for `order`, for it with some rows repeated,
    /// and for its first half.
    fn same_as_arrow(arrays: &[ArrayRef], order: &[(usize, usize)]) -> Result<(), TestCaseError> {
        if arrays.is_empty() {
            return Ok(());
        }
        let refs: Vec<&dyn Array> = arrays.iter().map(|a| a.as_ref()).collect();
        let twice: Vec<(usize, usize)> =
            order.iter().chain(order.iter().take(7)).copied().collect();
        for o in [order, &twice, &order[..order.len() / 2]] {
            let got = take(arrays, o).unwrap();
            let want = arrow::compute::interleave(&refs, o).unwrap();
            prop_assert_eq!(got.to_data(), want.to_data());
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
        let a: ArrayRef = Arc::new(BinaryArray::from(vec![Some(&b"x"[..]), None, Some(b"yz")]));
        let b: ArrayRef = Arc::new(BinaryArray::from(vec![None, Some(&b"w"[..])]));
        let order = [(1, 1), (0, 2), (0, 1), (1, 0), (0, 0)];
        let got = take(&[a.clone(), b.clone()], &order).unwrap();
        let want = BinaryArray::from(vec![Some(&b"w"[..]), Some(b"yz"), None, None, Some(b"x")]);
        assert_eq!(got.to_data(), want.to_data());
        let i: ArrayRef = Arc::new(Int32Array::from(vec![1, 2]));
        let got = take(&[i], &[(0, 1), (0, 0)]).unwrap();
        assert_eq!(got.to_data(), Int32Array::from(vec![2, 1]).to_data());
    }
}
