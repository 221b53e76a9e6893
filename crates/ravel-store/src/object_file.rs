//! A stored Parquet object as parquet-rs's async reader sees it: ranged GETs through the store,
//! the size known beforehand (from a manifest), so that no HEAD is needed.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::errors::ParquetError;
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader};

/// Ranged GETs of one request in flight at once.
const FETCH_CONCURRENCY: usize = 16;

/// One stored object, read by ranged GETs.
#[derive(Clone)]
pub struct ObjectFile {
    store: Arc<dyn ObjectStore>,
    path: Path,
    size: u64,
    page_index: PageIndexPolicy,
}

impl ObjectFile {
    /// The object at `key` of `size` bytes; its page index is required.
    pub fn new(store: Arc<dyn ObjectStore>, key: &str, size: u64) -> ObjectFile {
        ObjectFile {
            store,
            path: Path::from(key),
            size,
            page_index: PageIndexPolicy::Required,
        }
    }

    /// The same, reading the page index under `policy` (other writers' objects may have none).
    pub fn with_page_index(self, policy: PageIndexPolicy) -> ObjectFile {
        ObjectFile {
            page_index: policy,
            ..self
        }
    }
}

fn external(e: object_store::Error) -> ParquetError {
    ParquetError::External(Box::new(e))
}

impl AsyncFileReader for ObjectFile {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        let (store, path) = (self.store.clone(), self.path.clone());
        async move { store.get_range(&path, range).await.map_err(external) }.boxed()
    }

    /// One GET per range, concurrently: the ranges asked at once are pages, one run per
    /// column, far apart (a store's own coalescing would fetch everything between them).
    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        let (store, path) = (self.store.clone(), self.path.clone());
        async move {
            let gets = ranges.into_iter().map(|r| {
                let (store, path) = (store.clone(), path.clone());
                async move { store.get_range(&path, r).await }
            });
            futures::stream::iter(gets)
                .buffered(FETCH_CONCURRENCY)
                .try_collect()
                .await
                .map_err(external)
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        _options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        let (size, policy) = (self.size, self.page_index);
        async move {
            let meta = ParquetMetaDataReader::new()
                .with_page_index_policy(policy)
                .load_and_finish(self, size)
                .await?;
            Ok(Arc::new(meta))
        }
        .boxed()
    }
}
