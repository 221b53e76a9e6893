//! Parquet encoding with the columns of a row group encoded in parallel.
//!
//! parquet-rs's `ArrowWriter` encodes one column after another on the calling thread. This
//! writer keeps one `ArrowColumnWriter` per leaf column and hands each batch's columns to rayon,
//! so a wide table (hits has 105 columns) uses every core; chunks are appended to the file in
//! column order, so the output is what `ArrowWriter` would write with the same properties.
//!
//! Bloom filters of string and binary columns switched on column by column (with Bloom filters
//! off by default, as the loader sets them) are filled here rather than by parquet-rs's
//! encoder, which hashes and inserts every value: a run of equal values is inserted once
//! (inserting a value again sets no bit, so the filter, folded at close as parquet-rs folds
//! it, is the same bit for bit). Sorted tables repeat values in runs; on the hits layout 85 %
//! of the text values equal the one before. With Bloom filters on by default, parquet-rs
//! fills them all. The filters this writer filled are handed to the caller as the file stores
//! them ([`ParallelWriter::take_bloom_filters`]), so that a caller keeping them elsewhere (the
//! loader's Bloom sidecar) need not read them back out of the encoded bytes.

mod column;

pub use column::{ColumnEncoder, EncodedColumn, FilePages, assemble};

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use arrow::array::{Array, ArrayAccessor, AsArray, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};
use parquet::arrow::ArrowSchemaConverter;
use parquet::arrow::arrow_writer::{ArrowColumnWriter, ArrowRowGroupWriterFactory, compute_leaves};
use parquet::bloom_filter::Sbbf;
use parquet::errors::Result;
use parquet::file::metadata::ParquetMetaData;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::ColumnPath;
use rayon::prelude::*;

/// `f(i)` for every `i` of `costs`, on all of rayon's threads, each taking the costliest item
/// not yet taken (longest processing time first: the last items to finish are small ones, so no
/// core idles while another finishes a big one). Results are in index order.
pub fn largest_first<T, F>(costs: &[usize], f: F) -> Vec<T>
where
    T: Send,
    F: Fn(usize) -> T + Sync,
{
    let mut order: Vec<usize> = (0..costs.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(costs[i]));
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<(usize, T)>> = Mutex::new(Vec::with_capacity(costs.len()));
    let workers = rayon::current_num_threads().clamp(1, costs.len().max(1));
    rayon::scope(|s| {
        for _ in 0..workers {
            s.spawn(|_| {
                let mut mine = Vec::new();
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&i) = order.get(k) else { break };
                    mine.push((i, f(i)));
                }
                done.lock().expect("no panic holds it").extend(mine);
            });
        }
    });
    let mut done = done.into_inner().expect("no panic holds it");
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, t)| t).collect()
}

/// A Parquet writer that encodes columns in parallel and cuts row groups at a row count.
pub struct ParallelWriter<W: Write + Send> {
    writer: SerializedFileWriter<W>,
    factory: ArrowRowGroupWriterFactory,
    schema: SchemaRef,
    /// Leaf columns of each field (one for a flat field), in schema order.
    leaves: Vec<usize>,
    columns: Option<Vec<ArrowColumnWriter>>,
    /// Per field: the Bloom filter settings (ndv, fpp) of a filter this writer fills itself,
    /// and whether the field is nullable.
    bloom_specs: Vec<Option<(u64, f64, bool)>>,
    /// Per field: the open row group's filter of each field in `bloom_specs`.
    blooms: Vec<Option<Sbbf>>,
    /// Per closed row group not yet taken, per field: the filter this writer filled, as the
    /// file stores it (see [`ParallelWriter::take_bloom_filters`]).
    filled: Vec<Vec<Option<Vec<u8>>>>,
    rows_in_group: usize,
    max_group_rows: usize,
    groups: usize,
}

impl<W: Write + Send> ParallelWriter<W> {
    /// A writer of `schema` to `out`; row groups hold at most `max_group_rows` rows.
    pub fn try_new(
        out: W,
        schema: SchemaRef,
        props: WriterProperties,
        max_group_rows: usize,
    ) -> Result<Self> {
        // String and binary columns' Bloom filters are filled here (see the module docs). A
        // column's filter can be switched off only while the default is off (a column without
        // its own setting falls back to the default), so with the default on parquet-rs fills
        // them all, as before.
        let mut bloom_specs = vec![None; schema.fields().len()];
        let mut props = props;
        let default_on = props
            .bloom_filter_properties(&ColumnPath::new(Vec::new()))
            .is_some();
        if !default_on {
            let mut builder = props.clone().into_builder();
            for (i, field) in schema.fields().iter().enumerate() {
                let path = ColumnPath::from(field.name().as_str());
                if let (true, Some(bp)) = (
                    runs_of(field.data_type()),
                    props.bloom_filter_properties(&path),
                ) {
                    bloom_specs[i] = Some((bp.ndv(), bp.fpp(), field.is_nullable()));
                    builder = builder.set_column_bloom_filter_enabled(path, false);
                }
            }
            props = builder.build();
        }
        // Readers rebuild the Arrow schema (e.g. timestamp time zones) from this entry, as they
        // do for ArrowWriter's files.
        parquet::arrow::add_encoded_arrow_schema_to_metadata(&schema, &mut props);
        let props = Arc::new(props);
        let parquet_schema = ArrowSchemaConverter::new()
            .with_coerce_types(props.coerce_types())
            .convert(&schema)?;
        let mut leaves = vec![0; schema.fields().len()];
        for i in 0..parquet_schema.num_columns() {
            leaves[parquet_schema.get_column_root_idx(i)] += 1;
        }
        let writer = SerializedFileWriter::new(out, parquet_schema.root_schema_ptr(), props)?;
        let factory = ArrowRowGroupWriterFactory::new(&writer, schema.clone());
        Ok(ParallelWriter {
            writer,
            factory,
            schema,
            leaves,
            columns: None,
            blooms: Vec::new(),
            filled: Vec::new(),
            bloom_specs,
            rows_in_group: 0,
            max_group_rows: max_group_rows.max(1),
            groups: 0,
        })
    }

    /// Encodes a batch; a row group closes whenever it reaches the row limit.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let mut offset = 0;
        while offset < batch.num_rows() {
            let room = self.max_group_rows - self.rows_in_group;
            let n = room.min(batch.num_rows() - offset);
            self.encode(&batch.slice(offset, n))?;
            offset += n;
            if self.rows_in_group == self.max_group_rows {
                self.flush()?;
            }
        }
        Ok(())
    }

    fn encode(&mut self, batch: &RecordBatch) -> Result<()> {
        if self.columns.is_none() {
            self.blooms = self
                .bloom_specs
                .iter()
                .map(|spec| {
                    spec.map(|(ndv, fpp, _)| Sbbf::new_with_ndv_fpp(ndv, fpp))
                        .transpose()
                })
                .collect::<Result<_>>()?;
            self.columns = Some(self.factory.create_column_writers(self.groups)?);
        }
        // One task per field: its leaves are computed and encoded on the same thread, largest
        // field first, so that no core waits for a big column started last.
        let writers = self.columns.as_mut().expect("created above");
        type Field<'a> = (&'a mut [ArrowColumnWriter], Option<(&'a mut Sbbf, bool)>);
        let mut per_field: Vec<Mutex<Field<'_>>> = Vec::with_capacity(self.leaves.len());
        let mut rest = writers.as_mut_slice();
        for ((&n, bloom), spec) in self
            .leaves
            .iter()
            .zip(self.blooms.iter_mut())
            .zip(&self.bloom_specs)
        {
            let (head, tail) = rest.split_at_mut(n);
            let bloom = bloom.as_mut().zip(spec.map(|(_, _, nullable)| nullable));
            per_field.push(Mutex::new((head, bloom)));
            rest = tail;
        }
        let fields = self.schema.fields();
        let costs: Vec<usize> = batch
            .columns()
            .iter()
            .map(|a| a.get_buffer_memory_size())
            .collect();
        largest_first(&costs, |i| -> Result<()> {
            let mut field = per_field[i].lock().expect("one task per field");
            let (writers, bloom) = &mut *field;
            for (w, leaf) in writers
                .iter_mut()
                .zip(compute_leaves(&fields[i], batch.column(i))?)
            {
                w.write(&leaf)?;
            }
            if let Some((bloom, nullable)) = bloom {
                insert_runs(bloom, batch.column(i).as_ref(), *nullable)?;
            }
            Ok(())
        })
        .into_iter()
        .collect::<Result<Vec<()>>>()?;
        self.rows_in_group += batch.num_rows();
        Ok(())
    }

    /// The encoded size of the open row group so far, as the column writers estimate it.
    pub fn estimated_group_bytes(&self) -> usize {
        self.columns
            .as_ref()
            .map(|c| c.iter().map(|w| w.get_estimated_total_bytes()).sum())
            .unwrap_or(0)
    }

    /// Rows in the open row group.
    pub fn rows_in_group(&self) -> usize {
        self.rows_in_group
    }

    /// Closes the open row group (if it has rows) and appends it to the output.
    pub fn flush(&mut self) -> Result<()> {
        let Some(columns) = self.columns.take() else {
            return Ok(());
        };
        let mut chunks = columns
            .into_par_iter()
            .map(|w| w.close())
            .collect::<Result<Vec<_>>>()?;
        // A filled filter belongs to its field's one leaf, folded as parquet-rs folds its own.
        let mut leaf = 0;
        let mut filled = vec![None; self.leaves.len()];
        for (field, ((&n, bloom), spec)) in self
            .leaves
            .iter()
            .zip(std::mem::take(&mut self.blooms))
            .zip(&self.bloom_specs)
            .enumerate()
        {
            if let (Some(mut bloom), Some((_, fpp, _))) = (bloom, spec) {
                bloom.fold_to_target_fpp(*fpp);
                // The bytes the file writer writes for it: Thrift header and bitset.
                let mut stored = Vec::new();
                bloom.write(&mut stored)?;
                filled[field] = Some(stored);
                chunks[leaf].close_mut().bloom_filter = Some(bloom);
            }
            leaf += n;
        }
        self.filled.push(filled);
        let mut group = self.writer.next_row_group()?;
        for chunk in chunks {
            chunk.append_to_row_group(&mut group)?;
        }
        group.close()?;
        self.rows_in_group = 0;
        self.groups += 1;
        Ok(())
    }

    /// The Bloom filters this writer filled (string and binary columns with their own Bloom
    /// setting while the default is off; see the module docs), of each row group closed since
    /// the last call: per row group, per field (`None` for a field whose filter parquet-rs
    /// fills, or that has none). Each is the bytes the file holds for it (Thrift header and
    /// bitset, as `Sbbf::write` writes them). Call [`ParallelWriter::flush`] first to include
    /// the open row group.
    pub fn take_bloom_filters(&mut self) -> Vec<Vec<Option<Vec<u8>>>> {
        std::mem::take(&mut self.filled)
    }

    /// Adds a key-value entry to the file's footer metadata.
    pub fn append_key_value_metadata(&mut self, kv: parquet::file::metadata::KeyValue) {
        self.writer.append_key_value_metadata(kv);
    }

    /// Flushes and writes the footer.
    pub fn close(mut self) -> Result<ParquetMetaData> {
        self.flush()?;
        self.writer.close()
    }

    /// Flushes, writes the footer and returns the output with the file's metadata (which
    /// locates what the footer indexes, e.g. each column chunk's Bloom filter).
    pub fn finish(mut self) -> Result<(W, ParquetMetaData)>
    where
        W: Default,
    {
        self.flush()?;
        let meta = self.writer.finish()?;
        Ok((std::mem::take(self.writer.inner_mut()), meta))
    }

    /// Flushes, writes the footer and returns the output.
    pub fn into_inner(mut self) -> Result<W> {
        self.flush()?;
        self.writer.into_inner()
    }
}

/// Whether this writer fills the Bloom filter of a column of this type: a flat string or
/// binary column, which parquet-rs's byte-array encoder hashes value by value. (Unlike
/// `ravel_bloom::supported`, no FixedSizeBinary: parquet-rs writes it through another encoder,
/// which keeps its filter.)
fn runs_of(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
            | DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
    )
}

/// Inserts the values of `array` into `bloom`, each run of equal values once: the non-null
/// ones of a nullable field, every slot of a non-nullable one (as parquet-rs does).
fn insert_runs(bloom: &mut Sbbf, array: &dyn Array, nullable: bool) -> Result<()> {
    fn each<A>(bloom: &mut Sbbf, array: A, nullable: bool)
    where
        A: ArrayAccessor,
        A::Item: AsRef<[u8]> + Copy,
    {
        let mut last: Option<A::Item> = None;
        for i in 0..array.len() {
            if nullable && array.is_null(i) {
                continue;
            }
            let v = array.value(i);
            if last.is_none_or(|l| l.as_ref() != v.as_ref()) {
                bloom.insert(v.as_ref());
                last = Some(v);
            }
        }
    }
    match array.data_type() {
        DataType::Utf8 => each(bloom, array.as_string::<i32>(), nullable),
        DataType::LargeUtf8 => each(bloom, array.as_string::<i64>(), nullable),
        DataType::Utf8View => each(bloom, array.as_string_view(), nullable),
        DataType::Binary => each(bloom, array.as_binary::<i32>(), nullable),
        DataType::LargeBinary => each(bloom, array.as_binary::<i64>(), nullable),
        DataType::BinaryView => each(bloom, array.as_binary_view(), nullable),
        // Another array parquet-rs accepts for a string field (e.g. a dictionary): its values.
        _ => each(
            bloom,
            arrow::compute::cast(array, &DataType::LargeBinary)?.as_binary::<i64>(),
            nullable,
        ),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Int64Array, StringArray, TimestampSecondArray};
    use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    #[test]
    fn largest_first_returns_every_result_in_index_order() {
        let costs = [3, 50, 0, 7, 7, 1000, 2];
        let out = largest_first(&costs, |i| (i, costs[i] * 2));
        assert_eq!(
            out,
            costs
                .iter()
                .enumerate()
                .map(|(i, c)| (i, c * 2))
                .collect::<Vec<_>>()
        );
        assert!(largest_first(&[], |i| i).is_empty());
    }

    #[test]
    fn writes_what_it_reads_back_with_row_groups_cut_by_rows() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("i", DataType::Int64, false),
            Field::new("s", DataType::Utf8, true),
            Field::new(
                "t",
                DataType::Timestamp(TimeUnit::Second, Some("UTC".into())),
                false,
            ),
        ]));
        let batch = |lo: i64, n: i64| {
            RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(Int64Array::from_iter_values(lo..lo + n)) as ArrayRef,
                    Arc::new(StringArray::from_iter(
                        (lo..lo + n).map(|i| (i % 3 != 0).then(|| i.to_string())),
                    )),
                    Arc::new(
                        TimestampSecondArray::from_iter_values(lo..lo + n).with_timezone("UTC"),
                    ),
                ],
            )
            .unwrap()
        };
        let mut out = Vec::new();
        let mut w =
            ParallelWriter::try_new(&mut out, schema.clone(), WriterProperties::default(), 1000)
                .unwrap();
        w.write(&batch(0, 700)).unwrap();
        w.write(&batch(700, 700)).unwrap();
        assert_eq!(w.rows_in_group(), 400);
        assert!(w.estimated_group_bytes() > 0);
        w.write(&batch(1400, 1)).unwrap();
        let meta = w.close().unwrap();
        assert_eq!(meta.num_row_groups(), 2);
        assert_eq!(meta.row_group(0).num_rows(), 1000);
        assert_eq!(meta.row_group(1).num_rows(), 401);

        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(out)).unwrap();
        assert_eq!(reader.schema().as_ref(), schema.as_ref());
        let back: Vec<RecordBatch> = reader
            .build()
            .unwrap()
            .collect::<std::result::Result<_, _>>()
            .unwrap();
        let back = arrow::compute::concat_batches(&schema, &back).unwrap();
        assert_eq!(back, batch(0, 1401));
    }

    /// Each column chunk's Bloom filter, as the file stores it (header and bitset), row group
    /// after row group.
    fn blooms_of(file: Vec<u8>) -> Vec<Option<Vec<u8>>> {
        use parquet::file::properties::ReaderProperties;
        use parquet::file::reader::FileReader;
        use parquet::file::serialized_reader::{ReadOptionsBuilder, SerializedFileReader};
        let options = ReadOptionsBuilder::new()
            .with_reader_properties(
                ReaderProperties::builder()
                    .set_read_bloom_filter(true)
                    .build(),
            )
            .build();
        let reader =
            SerializedFileReader::new_with_options(bytes::Bytes::from(file), options).unwrap();
        let mut out = Vec::new();
        for g in 0..reader.num_row_groups() {
            let group = reader.get_row_group(g).unwrap();
            for c in 0..group.num_columns() {
                out.push(group.get_column_bloom_filter(c).map(|f| {
                    let mut bytes = Vec::new();
                    f.write(&mut bytes).unwrap();
                    bytes
                }));
            }
        }
        out
    }

    #[test]
    fn bloom_filters_filled_by_runs_are_the_ones_parquet_rs_writes() {
        use arrow::array::{BinaryViewArray, StringViewArray};
        let schema = Arc::new(Schema::new(vec![
            Field::new("s", DataType::Utf8, true),
            Field::new("b", DataType::Binary, false),
            Field::new("v", DataType::Utf8View, true),
            Field::new("w", DataType::BinaryView, false),
            Field::new("i", DataType::Int64, false),
        ]));
        // Runs of equal values, nulls inside runs, and values that come back after others.
        let text = |i: i64| format!("value-{}", (i / 7) % 40);
        let batch = |lo: i64, n: i64| {
            let strings: Vec<Option<String>> = (lo..lo + n)
                .map(|i| (i % 11 != 0).then(|| text(i)))
                .collect();
            RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(StringArray::from(strings.clone())) as ArrayRef,
                    Arc::new(arrow::array::BinaryArray::from_iter_values(
                        (lo..lo + n).map(|i| text(i * 3).into_bytes()),
                    )),
                    Arc::new(StringViewArray::from(strings)),
                    Arc::new(BinaryViewArray::from_iter_values(
                        (lo..lo + n).map(|i| format!("a long value, not inline: {i}")),
                    )),
                    Arc::new(Int64Array::from_iter_values((lo..lo + n).map(|i| i / 3))),
                ],
            )
            .unwrap()
        };
        // As the loader sets them: off by default, on for chosen columns with their settings.
        let mut per_column = WriterProperties::builder()
            .set_bloom_filter_enabled(false)
            .set_max_row_group_row_count(Some(1500));
        for c in ["s", "b", "v", "w", "i"] {
            per_column = per_column
                .set_column_bloom_filter_fpp(c.into(), 0.01)
                .set_column_bloom_filter_max_ndv(c.into(), 3_000);
        }
        // On by default, one column with its own fpp: parquet-rs fills them all.
        let by_default = WriterProperties::builder()
            .set_bloom_filter_enabled(true)
            .set_column_bloom_filter_fpp("s".into(), 0.001)
            .set_max_row_group_row_count(Some(1500));
        for (props, ours_fill) in [
            (per_column.build(), [true, true, true, true, false]),
            (by_default.build(), [false; 5]),
        ] {
            let mut ours = Vec::new();
            let mut w =
                ParallelWriter::try_new(&mut ours, schema.clone(), props.clone(), 1500).unwrap();
            assert_eq!(
                w.bloom_specs
                    .iter()
                    .map(Option::is_some)
                    .collect::<Vec<_>>(),
                ours_fill
            );
            let mut theirs = Vec::new();
            let mut a =
                parquet::arrow::ArrowWriter::try_new(&mut theirs, schema.clone(), Some(props))
                    .unwrap();
            for (lo, n) in [(0, 1000), (1000, 3), (1003, 2500)] {
                w.write(&batch(lo, n)).unwrap();
                a.write(&batch(lo, n)).unwrap();
            }
            w.flush().unwrap();
            let taken = w.take_bloom_filters();
            assert!(w.take_bloom_filters().is_empty(), "taken once");
            w.close().unwrap();
            a.close().unwrap();
            let (ours, theirs) = (blooms_of(ours), blooms_of(theirs));
            assert_eq!(ours.len(), 3 * 5, "three row groups of five columns");
            assert!(
                ours.iter().all(Option::is_some),
                "every chunk has its filter"
            );
            assert_eq!(ours, theirs);
            // The filters handed over are the file's bytes of each filter this writer filled.
            assert_eq!(taken.len(), 3, "one entry per row group");
            for (g, group) in taken.iter().enumerate() {
                for (f, filter) in group.iter().enumerate() {
                    let expected = ours_fill[f].then(|| ours[g * 5 + f].clone().unwrap());
                    assert_eq!(filter, &expected, "row group {g}, column {f}");
                }
            }
        }
    }

    #[test]
    fn a_dictionary_array_for_a_string_field_fills_its_filter_with_its_values() {
        use arrow::array::DictionaryArray;
        use arrow::datatypes::Int32Type;
        let schema = Arc::new(Schema::new(vec![Field::new("s", DataType::Utf8, true)]));
        let dict: DictionaryArray<Int32Type> =
            vec![Some("x"), Some("x"), None, Some("y"), Some("x")]
                .into_iter()
                .collect();
        let batch_schema = Arc::new(Schema::new(vec![Field::new(
            "s",
            dict.data_type().clone(),
            true,
        )]));
        let batch = RecordBatch::try_new(batch_schema, vec![Arc::new(dict) as ArrayRef]).unwrap();
        let props = WriterProperties::builder()
            .set_column_bloom_filter_enabled("s".into(), true)
            .build();
        let mut out = Vec::new();
        let mut w = ParallelWriter::try_new(&mut out, schema, props, usize::MAX).unwrap();
        assert!(w.bloom_specs[0].is_some(), "this writer fills the filter");
        w.write(&batch).unwrap();
        w.close().unwrap();
        let filter = blooms_of(out).remove(0).expect("a filter");
        let filter = parquet::bloom_filter::Sbbf::from_bytes(&filter).unwrap();
        assert!(filter.check(&"x") && filter.check(&"y"));
        assert!(!filter.check(&"z"));
    }
}
