//! Reading a chain's rows slice by slice: each slice is a range of an object's rows, fetched by
//! ranged GETs of the pages that hold it (the page index tells where they are), so that a merge
//! holds a slice per chain, never whole objects.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;

use arrow::array::RecordBatch;
use futures::TryStreamExt;
use object_store::ObjectStore;
use parquet::arrow::ParquetRecordBatchStreamBuilder;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions, RowSelection};
use parquet::errors::ParquetError;
use parquet::file::metadata::PageIndexPolicy;
use ravel_store::ObjectFile;

use crate::plan::InputObject;

/// An object being read: its reader, footer and the next row to read.
struct Open {
    file: ObjectFile,
    meta: ArrowReaderMetadata,
    rows: usize,
    next: usize,
}

/// How large a chain's slices are: rows of the first, then as many rows as `bytes` holds at the
/// Arrow size per row the slices read so far measured, [`SLICE_COPIES`] times over, within
/// `rows`.
#[derive(Debug, Clone)]
pub struct Slicing {
    pub first: usize,
    pub bytes: u64,
    pub rows: std::ops::RangeInclusive<usize>,
}

/// Slices a chain holds at once, counted in slices: the one the merge takes rows from (with its
/// keys and the batches gathered from it, one more), the one queued behind it and the one being
/// decoded, plus one for the decoder's own buffers.
pub const SLICE_COPIES: u64 = 5;

/// A chain's slices as a task reads them (see [`ChainReader::spawn`]).
pub struct Slices {
    rx: tokio::sync::mpsc::Receiver<Result<Option<RecordBatch>, ParquetError>>,
    /// Rows handed back by a consumer that stopped part-way through a slice.
    returned: Option<RecordBatch>,
}

impl Slices {
    /// The next slice, `None` after the last.
    pub async fn next(&mut self) -> Result<Option<RecordBatch>, ParquetError> {
        if let Some(b) = self.returned.take() {
            return Ok(Some(b));
        }
        self.rx.recv().await.unwrap_or(Ok(None))
    }

    /// Hands back the rest of a slice: [`Slices::next`] returns it first.
    pub fn put_back(&mut self, rest: RecordBatch) {
        debug_assert!(self.returned.is_none());
        if rest.num_rows() > 0 {
            self.returned = Some(rest);
        }
    }
}

/// Reads one chain's objects in order, a slice of rows at a time.
pub struct ChainReader {
    store: Arc<dyn ObjectStore>,
    objects: VecDeque<InputObject>,
    open: Option<Open>,
    slicing: Slicing,
    slice_rows: usize,
}

impl ChainReader {
    pub fn new(store: Arc<dyn ObjectStore>, objects: Vec<InputObject>, slicing: Slicing) -> Self {
        ChainReader {
            store,
            objects: objects.into(),
            open: None,
            slice_rows: slicing.first.max(1),
            slicing,
        }
    }

    /// Reads the chain in a task of its own, one slice ahead of its consumer: the next slice is
    /// fetched and decoded while the merge consumes the current one. The task ends after the
    /// last slice, an error, or when the receiver is dropped.
    pub fn spawn(mut self) -> Slices {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        tokio::spawn(async move {
            loop {
                match self.next_slice().await {
                    Ok(None) => return,
                    next => {
                        let failed = next.is_err();
                        if tx.send(next).await.is_err() || failed {
                            return;
                        }
                    }
                }
            }
        });
        Slices { rx, returned: None }
    }

    /// Sizes the next slices by what `batch` of this chain holds per row.
    fn calibrate(&mut self, batch: &RecordBatch) {
        if batch.num_rows() == 0 {
            return;
        }
        let per_row = (batch.get_array_memory_size() / batch.num_rows()).max(1) as u64;
        let rows = (self.slicing.bytes / (SLICE_COPIES * per_row)) as usize;
        self.slice_rows = rows.clamp(*self.slicing.rows.start(), *self.slicing.rows.end());
    }

    /// The next slice of the chain's rows, `None` after the last.
    pub async fn next_slice(&mut self) -> Result<Option<RecordBatch>, ParquetError> {
        loop {
            if let Some(open) = &mut self.open
                && open.next < open.rows
            {
                let end = (open.next + self.slice_rows).min(open.rows);
                let batch = read_rows(open, open.next..end).await?;
                open.next = end;
                self.calibrate(&batch);
                return Ok(Some(batch));
            }
            let Some(next) = self.objects.pop_front() else {
                return Ok(None);
            };
            self.open = Some(self.open_object(&next).await?);
        }
    }

    async fn open_object(&self, o: &InputObject) -> Result<Open, ParquetError> {
        let mut file = ObjectFile::new(self.store.clone(), &o.entry.key, o.entry.bytes);
        let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Required);
        let meta = ArrowReaderMetadata::load_async(&mut file, options).await?;
        let rows = meta.metadata().file_metadata().num_rows() as usize;
        if rows as u64 != o.entry.rows {
            return Err(ParquetError::General(format!(
                "object {} has {rows} rows, its manifest says {}",
                o.entry.key, o.entry.rows
            )));
        }
        Ok(Open {
            file,
            meta,
            rows,
            next: 0,
        })
    }
}

/// Rows `range` of an open object as one batch.
async fn read_rows(open: &Open, range: Range<usize>) -> Result<RecordBatch, ParquetError> {
    let n = range.len();
    let selection = RowSelection::from_consecutive_ranges(std::iter::once(range), open.rows);
    let stream =
        ParquetRecordBatchStreamBuilder::new_with_metadata(open.file.clone(), open.meta.clone())
            .with_row_selection(selection)
            .with_batch_size(n)
            .build()?;
    let batches: Vec<RecordBatch> = stream.try_collect().await?;
    let schema = open.meta.schema().clone();
    Ok(arrow::compute::concat_batches(&schema, &batches)?)
}
