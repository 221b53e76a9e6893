//! Store traffic, counted by a wrapper store (one trait, behaviour by composition, like
//! object_store's `ThrottledStore`): every request that reaches the real store passes through
//! it, so the counts are what a cold read from S3 costs. The query path only reads, so the
//! wrapper passes reads only: a write, copy or delete through it is refused.

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};
use serde::Serialize;

/// Requests and bytes seen so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Traffic {
    /// GET requests (ranged or whole).
    pub gets: u64,
    /// HEAD requests.
    pub heads: u64,
    /// LIST requests.
    pub lists: u64,
    /// Bytes the GETs returned.
    pub bytes: u64,
    /// Distinct table objects (`.parquet`) read. Manifests and Bloom sidecars count in
    /// `gets` and `bytes` only, so that this compares with the table's object count.
    pub objects: usize,
}

#[derive(Debug, Default)]
struct Counts {
    gets: u64,
    heads: u64,
    lists: u64,
    bytes: u64,
    touched: HashSet<String>,
}

/// Reads and resets the counts of a [`TrafficStore`].
#[derive(Debug, Clone, Default)]
pub struct TrafficCounter(Arc<Mutex<Counts>>);

impl TrafficCounter {
    /// The counts so far.
    pub fn get(&self) -> Traffic {
        let c = self.0.lock().expect("traffic lock");
        Traffic {
            gets: c.gets,
            heads: c.heads,
            lists: c.lists,
            bytes: c.bytes,
            objects: c.touched.len(),
        }
    }

    /// The objects read so far.
    pub fn touched(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .0
            .lock()
            .expect("traffic lock")
            .touched
            .iter()
            .cloned()
            .collect();
        v.sort();
        v
    }

    /// Starts counting from zero.
    pub fn reset(&self) {
        *self.0.lock().expect("traffic lock") = Counts::default();
    }
}

/// Wraps a store, counts the reads that pass and refuses writes.
#[derive(Debug)]
pub struct TrafficStore<T: ObjectStore> {
    inner: T,
    counter: TrafficCounter,
}

impl<T: ObjectStore> TrafficStore<T> {
    pub fn new(inner: T) -> Self {
        TrafficStore {
            inner,
            counter: TrafficCounter::default(),
        }
    }

    /// A handle on the counts, usable after the store is moved.
    pub fn counter(&self) -> TrafficCounter {
        self.counter.clone()
    }
}

impl<T: ObjectStore> fmt::Display for TrafficStore<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TrafficStore({})", self.inner)
    }
}

#[async_trait]
impl<T: ObjectStore> ObjectStore for TrafficStore<T> {
    async fn put_opts(
        &self,
        location: &Path,
        _payload: PutPayload,
        _opts: PutOptions,
    ) -> Result<PutResult> {
        Err(read_only("put", location))
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        _opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        Err(read_only("put", location))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let head = options.head;
        let result = self.inner.get_opts(location, options).await;
        let mut c = self.counter.0.lock().expect("traffic lock");
        if head {
            c.heads += 1;
        } else {
            c.gets += 1;
            if location.as_ref().ends_with(".parquet") {
                c.touched.insert(location.to_string());
            }
            if let Ok(r) = &result {
                c.bytes += r.range.end - r.range.start;
                tracing::trace!(key = %location, start = r.range.start, end = r.range.end, "get");
            }
        }
        result
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        locations.map(|l| Err(read_only("delete", &l?))).boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.counter.0.lock().expect("traffic lock").lists += 1;
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.counter.0.lock().expect("traffic lock").lists += 1;
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.counter.0.lock().expect("traffic lock").lists += 1;
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, _from: &Path, to: &Path, _options: CopyOptions) -> Result<()> {
        Err(read_only("copy onto", to))
    }
}

/// The error of a write through the read-only query path.
fn read_only(what: &str, location: &Path) -> object_store::Error {
    object_store::Error::NotSupported {
        source: format!("the query path only reads: {what} {location} refused").into(),
    }
}
