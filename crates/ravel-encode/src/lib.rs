//! Parquet encoding with the columns of a row group encoded in parallel.
//!
//! parquet-rs's `ArrowWriter` encodes one column after another on the calling thread. This
//! writer keeps one `ArrowColumnWriter` per leaf column and hands each batch's columns to rayon,
//! so a wide table (hits has 105 columns) uses every core; chunks are appended to the file in
//! column order, so the output is what `ArrowWriter` would write with the same properties.

use std::io::Write;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use parquet::arrow::ArrowSchemaConverter;
use parquet::arrow::arrow_writer::{
    ArrowColumnWriter, ArrowLeafColumn, ArrowRowGroupWriterFactory, compute_leaves,
};
use parquet::errors::Result;
use parquet::file::metadata::ParquetMetaData;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use rayon::prelude::*;

/// A Parquet writer that encodes columns in parallel and cuts row groups at a row count.
pub struct ParallelWriter<W: Write + Send> {
    writer: SerializedFileWriter<W>,
    factory: ArrowRowGroupWriterFactory,
    schema: SchemaRef,
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
        let writer = SerializedFileWriter::new(out, parquet_schema.root_schema_ptr(), props)?;
        let factory = ArrowRowGroupWriterFactory::new(&writer, schema.clone());
        Ok(ParallelWriter {
            writer,
            factory,
            schema,
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
        let mut leaves: Vec<ArrowLeafColumn> = Vec::with_capacity(batch.num_columns());
        for (field, array) in self.schema.fields().iter().zip(batch.columns()) {
            leaves.extend(compute_leaves(field, array)?);
        }
        let columns = self.columns.as_mut().expect("created above");
        columns
            .par_iter_mut()
            .zip(leaves.par_iter())
            .try_for_each(|(w, leaf)| w.write(leaf))?;
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
