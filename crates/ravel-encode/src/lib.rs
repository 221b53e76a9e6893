//! Parquet encoding with the columns of a row group encoded in parallel.
//!
//! parquet-rs's `ArrowWriter` encodes one column after another on the calling thread. This
//! writer keeps one `ArrowColumnWriter` per leaf column and hands each batch's columns to rayon,
//! so a wide table (hits has 105 columns) uses every core; chunks are appended to the file in
//! column order, so the output is what `ArrowWriter` would write with the same properties.

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use parquet::arrow::ArrowSchemaConverter;
use parquet::arrow::arrow_writer::{ArrowColumnWriter, ArrowRowGroupWriterFactory, compute_leaves};
use parquet::errors::Result;
use parquet::file::metadata::ParquetMetaData;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
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
        let mut props = props;
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
            self.columns = Some(self.factory.create_column_writers(self.groups)?);
        }
        // One task per field: its leaves are computed and encoded on the same thread, largest
        // field first, so that no core waits for a big column started last.
        let writers = self.columns.as_mut().expect("created above");
        let mut per_field: Vec<Mutex<&mut [ArrowColumnWriter]>> =
            Vec::with_capacity(self.leaves.len());
        let mut rest = writers.as_mut_slice();
        for &n in &self.leaves {
            let (head, tail) = rest.split_at_mut(n);
            per_field.push(Mutex::new(head));
            rest = tail;
        }
        let fields = self.schema.fields();
        let costs: Vec<usize> = batch
            .columns()
            .iter()
            .map(|a| a.get_buffer_memory_size())
            .collect();
        largest_first(&costs, |i| -> Result<()> {
            let mut writers = per_field[i].lock().expect("one task per field");
            for (w, leaf) in writers
                .iter_mut()
                .zip(compute_leaves(&fields[i], batch.column(i))?)
            {
                w.write(&leaf)?;
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
        let chunks = columns
            .into_par_iter()
            .map(|w| w.close())
            .collect::<Result<Vec<_>>>()?;
        let mut group = self.writer.next_row_group()?;
        for chunk in chunks {
            chunk.append_to_row_group(&mut group)?;
        }
        group.close()?;
        self.rows_in_group = 0;
        self.groups += 1;
        Ok(())
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
}
