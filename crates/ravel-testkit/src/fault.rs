//! A fault-injecting object store wrapper, in the style of object_store's `ThrottledStore`:
//! one trait, behaviour by composition. Puts whose path starts with a prefix can be made to
//! fail permanently from the Nth one on, or be stored and then answered as a retry after a lost
//! response would be (the store saw the first attempt; the retry finds the object there).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

/// Wraps a store and fails puts as configured.
#[derive(Debug)]
pub struct FaultStore<T: ObjectStore> {
    inner: T,
    put_prefix: String,
    fail_from_put: Option<usize>,
    lose_responses: bool,
    puts: AtomicUsize,
}

impl<T: ObjectStore> FaultStore<T> {
    pub fn new(inner: T) -> Self {
        FaultStore {
            inner,
            put_prefix: String::new(),
            fail_from_put: None,
            lose_responses: false,
            puts: AtomicUsize::new(0),
        }
    }

    /// Puts under `prefix` fail permanently from the `n`th (1-based) on.
    pub fn fail_puts_from(mut self, n: usize, prefix: &str) -> Self {
        self.fail_from_put = Some(n);
        self.put_prefix = prefix.to_string();
        self
    }

    /// Every put under `prefix` is sent twice, as a client retrying after a lost response
    /// does, and the caller sees the second answer (`AlreadyExists` for a create).
    pub fn lose_put_responses(mut self, prefix: &str) -> Self {
        self.lose_responses = true;
        self.put_prefix = prefix.to_string();
        self
    }

    /// Puts seen under the prefix.
    pub fn puts(&self) -> usize {
        self.puts.load(Ordering::SeqCst)
    }

    pub fn into_arc(self) -> Arc<dyn ObjectStore> {
        Arc::new(self)
    }
}

impl<T: ObjectStore> fmt::Display for FaultStore<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultStore({})", self.inner)
    }
}

#[async_trait]
impl<T: ObjectStore> ObjectStore for FaultStore<T> {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        if location.as_ref().starts_with(&self.put_prefix) {
            let n = self.puts.fetch_add(1, Ordering::SeqCst) + 1;
            if self.fail_from_put.is_some_and(|from| n >= from) {
                return Err(object_store::Error::PermissionDenied {
                    path: location.to_string(),
                    source: format!("injected permanent failure of put #{n}").into(),
                });
            }
            if self.lose_responses {
                self.inner
                    .put_opts(location, payload.clone(), opts.clone())
                    .await?;
            }
        }
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}
