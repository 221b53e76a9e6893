//! Row groups encoded one column at a time: every object's chunk of one column, then of the
//! next, and the files assembled from the chunks at the end (as ClickHouse's vertical merge
//! writes a wide part). A column's values need to be in memory only while its chunks are
//! encoded; the encoded pages wait in a [`PageStoreFactory`]'s store (a local file with
//! [`FilePages`]) until their file is assembled.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arrow::array::ArrayRef;
use arrow::datatypes::{FieldRef, Schema, SchemaRef};
use bytes::Bytes;
use parquet::arrow::ArrowSchemaConverter;
use parquet::arrow::arrow_writer::{ArrowColumnChunk, ArrowRowGroupWriterFactory, compute_leaves};
use parquet::bloom_filter::Sbbf;
use parquet::column::page_store::{PageKey, PageStore, PageStoreArgs, PageStoreFactory};
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::{KeyValue, ParquetMetaData};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::ColumnPath;

use crate::{insert_runs, runs_of};

/// One object's chunk of one field: its leaves' encoded chunks and, for a string or binary
/// field whose filter this crate fills, the Bloom filter as the file stores it.
pub struct EncodedColumn {
    chunks: Vec<ArrowColumnChunk>,
    /// The filter filled here (see the crate docs), as `Sbbf::write` writes it.
    pub filled_bloom: Option<Vec<u8>>,
}

impl EncodedColumn {
    /// Encoded bytes of the chunk (its pages), as the file will hold them.
    pub fn bytes(&self) -> u64 {
        self.chunks
            .iter()
            .map(|c| c.close().metadata.compressed_size() as u64)
            .sum()
    }
}

/// Encodes one field's chunks, one row group (object) at a time, with the properties that
/// field's chunks get in the whole file. Any number of row groups may be encoded at once.
pub struct ColumnEncoder {
    field: FieldRef,
    factory: ArrowRowGroupWriterFactory,
    /// `(ndv, fpp, nullable)` of the filter filled here rather than by parquet-rs.
    bloom: Option<(u64, f64, bool)>,
}

impl ColumnEncoder {
    /// An encoder of `field` under `props` (those of the whole file: only this field's
    /// settings matter), its pages kept by `pages`.
    pub fn try_new(
        field: FieldRef,
        props: WriterProperties,
        pages: Arc<dyn PageStoreFactory>,
    ) -> Result<ColumnEncoder> {
        let path = ColumnPath::from(field.name().as_str());
        let mut props = props;
        let mut bloom = None;
        let default_on = props
            .bloom_filter_properties(&ColumnPath::new(Vec::new()))
            .is_some();
        if let (false, true, Some(bp)) = (
            default_on,
            runs_of(field.data_type()),
            props.bloom_filter_properties(&path),
        ) {
            bloom = Some((bp.ndv(), bp.fpp(), field.is_nullable()));
            props = props
                .into_builder()
                .set_column_bloom_filter_enabled(path, false)
                .build();
        }
        let schema = Arc::new(Schema::new(vec![field.clone()]));
        let parquet_schema = ArrowSchemaConverter::new()
            .with_coerce_types(props.coerce_types())
            .convert(&schema)?;
        // The writer only lends its schema and properties to the factory; nothing is written.
        let sink = SerializedFileWriter::new(std::io::sink(), parquet_schema.root_schema_ptr(), {
            Arc::new(props)
        })?;
        let factory = ArrowRowGroupWriterFactory::new(&sink, schema).with_page_store_factory(pages);
        Ok(ColumnEncoder {
            field,
            factory,
            bloom,
        })
    }

    /// Encodes `arrays` (the field's values of row group `row_group`, in order) as that row
    /// group's chunk of this field.
    pub fn encode(&self, row_group: usize, arrays: &[ArrayRef]) -> Result<EncodedColumn> {
        let mut writers = self.factory.create_column_writers(row_group)?;
        let mut bloom = self
            .bloom
            .map(|(ndv, fpp, _)| Sbbf::new_with_ndv_fpp(ndv, fpp))
            .transpose()?;
        for a in arrays {
            for (w, leaf) in writers.iter_mut().zip(compute_leaves(&self.field, a)?) {
                w.write(&leaf)?;
            }
            if let (Some(b), Some((_, _, nullable))) = (bloom.as_mut(), self.bloom) {
                insert_runs(b, a.as_ref(), nullable)?;
            }
        }
        let mut chunks = writers
            .into_iter()
            .map(|w| w.close())
            .collect::<Result<Vec<_>>>()?;
        let mut filled_bloom = None;
        if let (Some(mut b), Some((_, fpp, _))) = (bloom, self.bloom) {
            b.fold_to_target_fpp(fpp);
            let mut stored = Vec::new();
            b.write(&mut stored)?;
            filled_bloom = Some(stored);
            // Folding keeps the unfolded filter's allocation; a chunk waits for its file's
            // other columns, so it keeps a copy of the folded size only.
            chunks[0].close_mut().bloom_filter = Some(b.clone());
        }
        Ok(EncodedColumn {
            chunks,
            filled_bloom,
        })
    }
}

/// A file of one row group assembled from its columns' encoded chunks (in schema order), with
/// `props`' file-level settings (sorting columns, key-value metadata) and `kv` besides, written
/// into `out`. Returns the file and its metadata.
pub fn assemble(
    schema: &SchemaRef,
    props: WriterProperties,
    columns: Vec<EncodedColumn>,
    kv: Vec<KeyValue>,
    out: Vec<u8>,
) -> Result<(Vec<u8>, ParquetMetaData)> {
    let mut props = props;
    parquet::arrow::add_encoded_arrow_schema_to_metadata(schema, &mut props);
    let parquet_schema = ArrowSchemaConverter::new()
        .with_coerce_types(props.coerce_types())
        .convert(schema)?;
    let mut w = SerializedFileWriter::new(out, parquet_schema.root_schema_ptr(), Arc::new(props))?;
    let mut group = w.next_row_group()?;
    for column in columns {
        for chunk in column.chunks {
            chunk.append_to_row_group(&mut group)?;
        }
    }
    group.close()?;
    for entry in kv {
        w.append_key_value_metadata(entry);
    }
    let meta = w.finish()?;
    Ok((std::mem::take(w.inner_mut()), meta))
}

/// Encoded pages kept in one unlinked local file per factory (one per column): written once,
/// read back once when their file is assembled, gone with the last store that holds the file.
#[derive(Debug)]
pub struct FilePages {
    file: Arc<SharedFile>,
}

#[derive(Debug)]
struct SharedFile {
    file: File,
    end: AtomicU64,
}

impl FilePages {
    /// Pages kept in a new unlinked file in `dir`.
    pub fn new_in(dir: &Path) -> std::io::Result<FilePages> {
        Ok(FilePages {
            file: Arc::new(SharedFile {
                file: tempfile::tempfile_in(dir)?,
                end: AtomicU64::new(0),
            }),
        })
    }

    /// Bytes written to the file so far.
    pub fn bytes(&self) -> u64 {
        self.file.end.load(Ordering::Relaxed)
    }
}

impl PageStoreFactory for FilePages {
    fn create(&self, _args: &PageStoreArgs<'_>) -> Result<Box<dyn PageStore>> {
        Ok(Box::new(FileStore {
            file: self.file.clone(),
            pages: Vec::new(),
        }))
    }
}

/// One column chunk's pages in a [`FilePages`] file: where each starts and its length.
struct FileStore {
    file: Arc<SharedFile>,
    pages: Vec<(u64, usize)>,
}

impl PageStore for FileStore {
    fn put(&mut self, value: Bytes) -> Result<PageKey> {
        let at = self
            .file
            .end
            .fetch_add(value.len() as u64, Ordering::Relaxed);
        self.file
            .file
            .write_all_at(&value, at)
            .map_err(|e| ParquetError::External(Box::new(e)))?;
        self.pages.push((at, value.len()));
        Ok(PageKey::new(self.pages.len() as u64 - 1))
    }

    fn take(&mut self, key: PageKey) -> Result<Bytes> {
        let &(at, len) = self
            .pages
            .get(key.get() as usize)
            .ok_or_else(|| ParquetError::General(format!("no page {}", key.get())))?;
        let mut buf = vec![0; len];
        self.file
            .file
            .read_exact_at(&mut buf, at)
            .map_err(|e| ParquetError::External(Box::new(e)))?;
        Ok(Bytes::from(buf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ParallelWriter;
    use arrow::array::{Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::{DataType, Field};
    use parquet::file::properties::EnabledStatistics;

    /// The same rows give the same file, byte for byte, whether the row group's columns are
    /// encoded together or one at a time with their pages kept in a file.
    #[test]
    fn a_file_assembled_from_columns_is_the_one_the_parallel_writer_writes() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("i", DataType::Int64, false),
            Field::new("s", DataType::Utf8, true),
        ]));
        let batch = |lo: i64, n: i64| {
            RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(Int64Array::from_iter_values((lo..lo + n).map(|i| i / 7))) as ArrayRef,
                    Arc::new(StringArray::from_iter(
                        (lo..lo + n).map(|i| (i % 5 != 0).then(|| format!("v{}", i / 3))),
                    )),
                ],
            )
            .unwrap()
        };
        let props = WriterProperties::builder()
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_bloom_filter_enabled(false)
            .set_column_bloom_filter_enabled(ColumnPath::from("s"), true)
            .set_column_bloom_filter_max_ndv(ColumnPath::from("s"), 1000)
            .set_data_page_row_count_limit(100)
            .build();
        let kv = vec![KeyValue::new("k".to_string(), "v".to_string())];
        let pieces = [batch(0, 700), batch(700, 500)];

        let mut w =
            ParallelWriter::try_new(Vec::new(), schema.clone(), props.clone(), usize::MAX).unwrap();
        for p in &pieces {
            w.write(p).unwrap();
        }
        w.append_key_value_metadata(kv[0].clone());
        w.flush().unwrap();
        let filled = w.take_bloom_filters();
        let (expected, _) = w.finish().unwrap();

        let dir = tempfile::tempdir().unwrap();
        let columns: Vec<EncodedColumn> = schema
            .fields()
            .iter()
            .enumerate()
            .map(|(c, field)| {
                let pages = Arc::new(FilePages::new_in(dir.path()).unwrap());
                let enc = ColumnEncoder::try_new(field.clone(), props.clone(), pages).unwrap();
                let arrays: Vec<ArrayRef> = pieces.iter().map(|p| p.column(c).clone()).collect();
                enc.encode(0, &arrays).unwrap()
            })
            .collect();
        assert_eq!(columns[0].filled_bloom, None);
        assert_eq!(columns[1].filled_bloom, filled[0][1]);
        let bytes: u64 = columns.iter().map(EncodedColumn::bytes).sum();
        let (assembled, meta) = assemble(&schema, props, columns, kv, Vec::new()).unwrap();
        assert_eq!(meta.row_group(0).compressed_size() as u64, bytes);
        assert_eq!(assembled, expected);
    }
}
