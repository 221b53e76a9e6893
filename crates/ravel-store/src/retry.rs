//! Retries at the object-store level, in the style of object_store's wrapper stores (one
//! trait, behaviour by composition).
//!
//! object_store's HTTP clients already retry a request that fails in transport (refused or
//! timed-out connections) or with a 5xx, with backoff, within a time budget. Over such a client
//! ([`RetryStore::with_client_retries`]) a request's own error is final: repeating it would
//! only multiply the client's time to fail on a dead endpoint. [`RetryStore`] retries what no
//! HTTP retry sees, once an answer has begun: a body that ends short of its announced range or
//! breaks after the headers, a listing that breaks after its first entries. It also repeats a
//! conditional put whose connection broke or timed out while it was under way: the client
//! gives those up at once, as it cannot know that a repeat is safe. Over any other
//! store (a local directory, a test's fault injector) it retries every transient
//! (`Error::Generic`) failure. The requests this project makes are all safe to repeat:
//!
//! - puts are create-if-absent under content-addressed names, or compare-and-swap by ETag: a
//!   repeat whose first attempt landed answers `AlreadyExists` / `Precondition`, which the
//!   callers already read as "maybe mine" and check by reading back;
//! - gets are read whole and their length checked against the range the server announced, so
//!   a body that ends early is retried instead of handed on short;
//! - listings are collected whole before they are returned, so a failure midway is retried
//!   from the start instead of leaving a caller with half a listing.
//!
//! Everything else (`NotFound`, `AlreadyExists`, `Precondition`, `PermissionDenied`, ...) is
//! an answer, not a fault, and passes through at once.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::{BoxStream, StreamExt, TryStreamExt};
use object_store::client::{HttpError, HttpErrorKind};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

/// How often and how patiently to retry.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub attempts: u32,
    /// Wait before the second attempt; doubled for each further one.
    pub first_backoff: Duration,
    /// Longest wait between attempts.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    /// Four attempts, 100 ms, 200 ms, 400 ms apart: on top of the HTTP client's own retries
    /// this covers a short outage without stretching a failing load by minutes.
    fn default() -> Self {
        RetryPolicy {
            attempts: 4,
            first_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
        }
    }
}

/// The store name of the errors [`RetryStore`] makes of a body or listing broken after its
/// answer began.
const BROKEN_ANSWER: &str = "RetryStore";

/// An answer that broke after it began: the source of the [`object_store::Error::Generic`]
/// (store `RetryStore`) that [`RetryStore`] makes of it and retries. It sits inside
/// object_store's errors, so it prints its source in its message as they do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BrokenAnswer {
    #[error("body of {location} broke after its headers: {source}")]
    Body {
        location: Path,
        #[source]
        source: object_store::Error,
    },
    #[error("body of {location} ended after {got} of {expected} bytes")]
    ShortBody {
        location: Path,
        got: u64,
        expected: u64,
    },
    #[error("listing broke after {entries} entries: {source}")]
    Listing {
        entries: usize,
        #[source]
        source: object_store::Error,
    },
}

impl From<BrokenAnswer> for object_store::Error {
    fn from(e: BrokenAnswer) -> Self {
        object_store::Error::Generic {
            store: BROKEN_ANSWER,
            source: Box::new(e),
        }
    }
}

/// Which transport failures of a request the HTTP client repeats by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientRepeats {
    /// All of them: the client takes the request as safe to repeat (gets, lists, plain puts).
    All,
    /// Only those before the request was sent: one broken or timed out while under way (a
    /// conditional put) is given up at once.
    UnsentOnly,
}

/// Whether an error is a fault worth repeating the request for.
pub fn is_transient(e: &object_store::Error) -> bool {
    matches!(
        e,
        object_store::Error::Generic { .. } | object_store::Error::JoinError { .. }
    )
}

/// Wraps a store and retries transient failures (see the module documentation).
#[derive(Debug)]
pub struct RetryStore<T: ObjectStore> {
    inner: Arc<T>,
    limits: Limits,
}

/// How long one request may be retried, and what a final failure names.
#[derive(Debug, Clone)]
struct Limits {
    policy: RetryPolicy,
    /// No further attempt starts once this much time has passed since the first began.
    budget: Option<Duration>,
    /// The server, named in the error of a request that is given up.
    endpoint: Option<Arc<str>>,
    /// The store name (`Error::Generic`'s `store`) of an HTTP client that retries its own
    /// requests: its errors are final.
    client: Option<&'static str>,
}

/// A request given up after its retries: which server, how many attempts, how long.
#[derive(Debug, thiserror::Error)]
#[error(
    "{what} of {location:?}: S3 endpoint {endpoint} gave no good answer in {attempts} attempt(s) over {seconds:.1} s"
)]
pub struct GaveUp {
    pub what: String,
    pub location: String,
    pub endpoint: String,
    pub attempts: u32,
    pub seconds: f64,
    #[source]
    pub source: object_store::Error,
}

impl<T: ObjectStore> RetryStore<T> {
    pub fn new(inner: T, policy: RetryPolicy) -> Self {
        RetryStore {
            inner: Arc::new(inner),
            limits: Limits {
                policy,
                budget: None,
                endpoint: None,
                client: None,
            },
        }
    }

    /// Bounds the time one request spends in retries: after `budget` from its first attempt
    /// no further attempt starts, so a silent server fails a command instead of holding it.
    pub fn with_budget(mut self, budget: Duration) -> Self {
        self.limits.budget = Some(budget);
        self
    }

    /// Names the server in the error of a request that is given up ([`GaveUp`]).
    pub fn with_endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.limits.endpoint = Some(endpoint.into().into());
        self
    }

    /// Declares that `inner` is an HTTP client that retries its own requests, whose errors
    /// name the store `store_name` (object_store's S3 client: `"S3"`): those errors pass through
    /// at once, and only bodies and listings broken after their answer began are retried.
    pub fn with_client_retries(mut self, store_name: &'static str) -> Self {
        self.limits.client = Some(store_name);
        self
    }

    async fn retry<R, F, Fut>(&self, what: &str, location: &str, op: F) -> Result<R>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<R>>,
    {
        retry(&self.limits, Request::new(what, location), op).await
    }
}

/// A request as [`retry`] names it and what its client repeats of it.
#[derive(Debug, Clone, Copy)]
struct Request<'a> {
    what: &'a str,
    location: &'a str,
    client_repeats: ClientRepeats,
}

impl<'a> Request<'a> {
    fn new(what: &'a str, location: &'a str) -> Self {
        Request {
            what,
            location,
            client_repeats: ClientRepeats::All,
        }
    }
}

async fn retry<R, F, Fut>(limits: &Limits, request: Request<'_>, mut op: F) -> Result<R>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<R>>,
{
    let Request { what, location, .. } = request;
    let policy = limits.policy;
    let started = std::time::Instant::now();
    let mut wait = policy.first_backoff;
    let mut attempt = 1;
    loop {
        match op().await {
            Err(e) if is_transient(&e) => {
                let in_budget = limits.budget.is_none_or(|b| started.elapsed() < b);
                let final_answer = limits.retried_by_client(&e, request.client_repeats);
                if attempt >= policy.attempts || !in_budget || final_answer {
                    return Err(limits.gave_up(what, location, attempt, started, e));
                }
                tracing::warn!(%location, attempt, error = %crate::ErrorChain::new(&e), "{what} failed; retrying");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(policy.max_backoff);
                attempt += 1;
            }
            other => return other,
        }
    }
}

impl Limits {
    /// True for an error of the HTTP client's own request that its retries have had: any,
    /// except a transport interrupted under way when the client repeats only unsent requests.
    fn retried_by_client(&self, e: &object_store::Error, repeats: ClientRepeats) -> bool {
        let of_client =
            matches!(e, object_store::Error::Generic { store, .. } if Some(*store) == self.client);
        of_client && !(repeats == ClientRepeats::UnsentOnly && interrupted_under_way(e))
    }

    /// The error of a request given up: `e` itself, or (with an endpoint to name) `e` under a
    /// [`GaveUp`] that says which server failed, how often and for how long.
    fn gave_up(
        &self,
        what: &str,
        location: &str,
        attempts: u32,
        started: std::time::Instant,
        e: object_store::Error,
    ) -> object_store::Error {
        let Some(endpoint) = &self.endpoint else {
            return e;
        };
        if !matches!(e, object_store::Error::Generic { .. }) {
            return e;
        }
        object_store::Error::Generic {
            store: "S3",
            source: Box::new(GaveUp {
                what: what.to_string(),
                location: location.to_string(),
                endpoint: endpoint.to_string(),
                attempts,
                seconds: started.elapsed().as_secs_f64(),
                source: e,
            }),
        }
    }
}

/// Whether `e` comes from an HTTP transport broken or timed out after the request began.
fn interrupted_under_way(e: &object_store::Error) -> bool {
    std::iter::successors(std::error::Error::source(e), |s| s.source())
        .find_map(|s| s.downcast_ref::<HttpError>())
        .is_some_and(|http| {
            matches!(
                http.kind(),
                HttpErrorKind::Interrupted | HttpErrorKind::Timeout
            )
        })
}

impl<T: ObjectStore> fmt::Display for RetryStore<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RetryStore({})", self.inner)
    }
}

/// Reads a get's body whole; a body shorter or longer than its announced range is a fault.
async fn read_whole(location: &Path, result: GetResult) -> Result<GetResult> {
    let GetResult {
        payload,
        meta,
        range,
        attributes,
    } = result;
    let bytes = match payload {
        // A local file is read by whoever takes it, with the file's own checks.
        #[allow(unreachable_patterns)]
        GetResultPayload::Stream(stream) => {
            let chunks: Vec<bytes::Bytes> =
                stream
                    .try_collect()
                    .await
                    .map_err(|source| BrokenAnswer::Body {
                        location: location.clone(),
                        source,
                    })?;
            let mut body = bytes::BytesMut::with_capacity(chunks.iter().map(|c| c.len()).sum());
            for c in chunks {
                body.extend_from_slice(&c);
            }
            body.freeze()
        }
        #[allow(unreachable_patterns)]
        other => {
            return Ok(GetResult {
                payload: other,
                meta,
                range,
                attributes,
            });
        }
    };
    let expected = range.end - range.start;
    if bytes.len() as u64 != expected {
        return Err(BrokenAnswer::ShortBody {
            location: location.clone(),
            got: bytes.len() as u64,
            expected,
        }
        .into());
    }
    Ok(GetResult {
        payload: GetResultPayload::Stream(futures::stream::once(async move { Ok(bytes) }).boxed()),
        meta,
        range,
        attributes,
    })
}

/// A whole listing. A failure before the first entry is the request's own; a failure after
/// it is a listing broken midway ([`BrokenAnswer::Listing`]).
async fn list_whole<T: ObjectStore>(inner: &T, prefix: Option<&Path>) -> Result<Vec<ObjectMeta>> {
    collect_listing(inner.list(prefix)).await
}

/// [`list_whole`] from after `offset` (S3's `StartAfter`): the store lists only what follows.
async fn list_whole_after<T: ObjectStore>(
    inner: &T,
    prefix: Option<&Path>,
    offset: &Path,
) -> Result<Vec<ObjectMeta>> {
    collect_listing(inner.list_with_offset(prefix, offset)).await
}

/// Every entry of `stream`, or why it broke.
async fn collect_listing(
    mut stream: BoxStream<'static, Result<ObjectMeta>>,
) -> Result<Vec<ObjectMeta>> {
    let mut entries = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(meta) => entries.push(meta),
            Err(e) if entries.is_empty() => return Err(e),
            Err(e) => {
                let entries = entries.len();
                return Err(BrokenAnswer::Listing { entries, source: e }.into());
            }
        }
    }
    Ok(entries)
}

/// A listing collected whole (so the stream borrows nothing past the call), as a stream of its
/// entries or its error.
fn entries_of(
    listing: impl std::future::Future<Output = Result<Vec<ObjectMeta>>> + Send + 'static,
) -> BoxStream<'static, Result<ObjectMeta>> {
    futures::stream::once(listing)
        .map(|r| match r {
            Ok(v) => futures::stream::iter(v.into_iter().map(Ok)).boxed(),
            Err(e) => futures::stream::once(async move { Err(e) }).boxed(),
        })
        .flatten()
        .boxed()
}

#[async_trait]
impl<T: ObjectStore> ObjectStore for RetryStore<T> {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let client_repeats = match opts.mode {
            PutMode::Overwrite => ClientRepeats::All,
            PutMode::Create | PutMode::Update(_) => ClientRepeats::UnsentOnly,
        };
        let request = Request {
            client_repeats,
            ..Request::new("put", location.as_ref())
        };
        retry(&self.limits, request, || {
            self.inner.put_opts(location, payload.clone(), opts.clone())
        })
        .await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        // Each part is retried by the client; a failed upload is started again by its caller.
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.retry("get", location.as_ref(), || async {
            let result = self.inner.get_opts(location, options.clone()).await?;
            if options.head {
                return Ok(result);
            }
            read_whole(location, result).await
        })
        .await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        let prefix = prefix.cloned();
        let shown = prefix.as_ref().map_or(String::new(), |p| p.to_string());
        let (inner, limits) = (self.inner.clone(), self.limits.clone());
        let listing = async move {
            retry(&limits, Request::new("list", &shown), || {
                list_whole(&*inner, prefix.as_ref())
            })
            .await
        };
        entries_of(listing)
    }

    /// Passed on to the store, as [`ObjectStore::list`] is: the default would list everything
    /// before `offset` too (a log or a landing prefix in full) and drop it here.
    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let (prefix, offset) = (prefix.cloned(), offset.clone());
        let shown = prefix.as_ref().map_or(String::new(), |p| p.to_string());
        let (inner, limits) = (self.inner.clone(), self.limits.clone());
        let listing = async move {
            retry(&limits, Request::new("list", &shown), || {
                list_whole_after(&*inner, prefix.as_ref(), &offset)
            })
            .await
        };
        entries_of(listing)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        let shown = prefix.map_or(String::new(), |p| p.to_string());
        self.retry("list", &shown, || self.inner.list_with_delimiter(prefix))
            .await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.retry("copy", from.as_ref(), || {
            self.inner.copy_opts(from, to, options.clone())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use object_store::memory::InMemory;
    use object_store::{ObjectStoreExt, PutPayload};

    use super::*;

    /// Counts the puts, gets and listings that reach `inner`; the first `short` gets answer
    /// half of their body, the first `broken` listings fail after their first entry, the first
    /// `cut` puts fail as the S3 client fails them with a transport error of kind `cut_kind`.
    #[derive(Debug)]
    struct Counted<T> {
        inner: T,
        puts: AtomicU32,
        gets: AtomicU32,
        lists: AtomicU32,
        /// Listings after an offset passed on as such.
        offsets: AtomicU32,
        short: u32,
        broken: u32,
        cut: u32,
        cut_kind: HttpErrorKind,
    }

    impl<T> Counted<T> {
        fn new(inner: T) -> Counted<T> {
            Counted {
                inner,
                puts: AtomicU32::new(0),
                gets: AtomicU32::new(0),
                lists: AtomicU32::new(0),
                offsets: AtomicU32::new(0),
                short: 0,
                broken: 0,
                cut: 0,
                cut_kind: HttpErrorKind::Interrupted,
            }
        }
    }

    impl<T: ObjectStore> fmt::Display for Counted<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "Counted({})", self.inner)
        }
    }

    /// A fault of the S3 client's kind, after its answer began.
    fn reset() -> object_store::Error {
        object_store::Error::Generic {
            store: crate::s3::S3_CLIENT,
            source: "connection reset".into(),
        }
    }

    #[async_trait]
    impl<T: ObjectStore> ObjectStore for Counted<T> {
        async fn put_opts(&self, l: &Path, p: PutPayload, o: PutOptions) -> Result<PutResult> {
            let n = self.puts.fetch_add(1, Ordering::SeqCst) + 1;
            if n <= self.cut {
                let broken = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
                return Err(object_store::Error::Generic {
                    store: crate::s3::S3_CLIENT,
                    source: Box::new(HttpError::new(self.cut_kind, broken)),
                });
            }
            self.inner.put_opts(l, p, o).await
        }

        async fn put_multipart_opts(
            &self,
            l: &Path,
            o: PutMultipartOptions,
        ) -> Result<Box<dyn MultipartUpload>> {
            self.inner.put_multipart_opts(l, o).await
        }

        async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
            let n = self.gets.fetch_add(1, Ordering::SeqCst) + 1;
            let result = self.inner.get_opts(location, options).await?;
            if n > self.short {
                return Ok(result);
            }
            let (meta, range, attributes) = (
                result.meta.clone(),
                result.range.clone(),
                result.attributes.clone(),
            );
            let body = result.bytes().await?;
            let half = body.slice(..body.len() / 2);
            Ok(GetResult {
                payload: GetResultPayload::Stream(
                    futures::stream::once(async move { Ok(half) }).boxed(),
                ),
                meta,
                range,
                attributes,
            })
        }

        fn delete_stream(
            &self,
            locations: BoxStream<'static, Result<Path>>,
        ) -> BoxStream<'static, Result<Path>> {
            self.inner.delete_stream(locations)
        }

        fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
            let n = self.lists.fetch_add(1, Ordering::SeqCst) + 1;
            let listing = self.inner.list(prefix);
            if n <= self.broken {
                return listing
                    .take(1)
                    .chain(futures::stream::once(async { Err(reset()) }))
                    .boxed();
            }
            listing
        }

        fn list_with_offset(
            &self,
            prefix: Option<&Path>,
            offset: &Path,
        ) -> BoxStream<'static, Result<ObjectMeta>> {
            self.offsets.fetch_add(1, Ordering::SeqCst);
            self.inner.list_with_offset(prefix, offset)
        }

        async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
            self.inner.list_with_delimiter(prefix).await
        }

        async fn copy_opts(&self, from: &Path, to: &Path, o: CopyOptions) -> Result<()> {
            self.inner.copy_opts(from, to, o).await
        }
    }

    fn policy() -> RetryPolicy {
        RetryPolicy {
            attempts: 4,
            first_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(2),
        }
    }

    /// An S3 client whose endpoint refuses connections, with no retries of its own (they are
    /// its business; this test counts what reaches it from above).
    fn refused_s3() -> object_store::aws::AmazonS3 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        object_store::aws::AmazonS3Builder::new()
            .with_endpoint(format!("http://127.0.0.1:{port}"))
            .with_bucket_name("b")
            .with_region("us-east-1")
            .with_access_key_id("x")
            .with_secret_access_key("x")
            .with_allow_http(true)
            .with_retry(object_store::RetryConfig {
                max_retries: 0,
                ..Default::default()
            })
            .build()
            .unwrap()
    }

    #[tokio::test]
    async fn a_refused_connection_is_left_to_the_client() {
        let store = RetryStore::new(Counted::new(refused_s3()), policy())
            .with_client_retries(crate::s3::S3_CLIENT);
        let err = store.get(&Path::from("k")).await.unwrap_err();
        assert!(
            matches!(&err, object_store::Error::Generic { store, .. } if *store == crate::s3::S3_CLIENT),
            "{err}"
        );
        assert_eq!(store.inner.gets.load(Ordering::SeqCst), 1, "{err}");
        let listed: Result<Vec<_>> = store.list(None).try_collect().await;
        assert!(listed.is_err());
        assert_eq!(store.inner.lists.load(Ordering::SeqCst), 1);
        // Over a store that does not retry for itself, the same error is retried.
        let store = RetryStore::new(Counted::new(refused_s3()), policy());
        store.get(&Path::from("k")).await.unwrap_err();
        assert_eq!(store.inner.gets.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn short_bodies_and_broken_listings_are_retried_over_the_client() {
        let memory = InMemory::new();
        for k in ["t/a", "t/b", "t/c"] {
            memory
                .put(&Path::from(k), PutPayload::from("0123456789"))
                .await
                .unwrap();
        }
        let counted = Counted {
            short: 2,
            broken: 2,
            ..Counted::new(memory)
        };
        let store = RetryStore::new(counted, policy()).with_client_retries(crate::s3::S3_CLIENT);
        let body = store
            .get(&Path::from("t/b"))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        assert_eq!(&body[..], b"0123456789");
        assert_eq!(store.inner.gets.load(Ordering::SeqCst), 3);
        let listed: Vec<ObjectMeta> = store
            .list(Some(&Path::from("t")))
            .try_collect()
            .await
            .unwrap();
        assert_eq!(listed.len(), 3);
        assert_eq!(store.inner.lists.load(Ordering::SeqCst), 3);
    }

    /// A listing after an offset reaches the store as one (S3's `StartAfter`), not as a whole
    /// listing filtered here: a log or a landing prefix is listed from where the reader is.
    #[tokio::test]
    async fn a_listing_after_an_offset_is_the_stores_own() {
        let memory = InMemory::new();
        for k in ["t/a", "t/b", "t/c"] {
            memory
                .put(&Path::from(k), PutPayload::from("0"))
                .await
                .unwrap();
        }
        let store = RetryStore::new(Counted::new(memory), policy());
        let listed: Vec<ObjectMeta> = store
            .list_with_offset(Some(&Path::from("t")), &Path::from("t/a"))
            .try_collect()
            .await
            .unwrap();
        let keys: Vec<String> = listed.iter().map(|m| m.location.to_string()).collect();
        assert_eq!(keys, ["t/b", "t/c"]);
        let inner = &store.inner;
        let calls = (
            inner.offsets.load(Ordering::SeqCst),
            inner.lists.load(Ordering::SeqCst),
        );
        assert_eq!(calls, (1, 0), "(offset listings, whole listings)");
    }

    /// A put cut off under way: what the client gives up at once for a conditional put is
    /// repeated, what it repeats itself (a plain put, or a connection never made) is not.
    #[tokio::test]
    async fn a_conditional_put_cut_under_way_is_repeated() {
        let cut = |kind| Counted {
            cut: 1,
            cut_kind: kind,
            ..Counted::new(InMemory::new())
        };
        let over = |c| RetryStore::new(c, policy()).with_client_retries(crate::s3::S3_CLIENT);
        let (k, bytes) = (Path::from("t/a"), PutPayload::from("0123456789"));
        let create = PutOptions::from(PutMode::Create);

        let store = over(cut(HttpErrorKind::Interrupted));
        store
            .put_opts(&k, bytes.clone(), create.clone())
            .await
            .unwrap();
        assert_eq!(store.inner.puts.load(Ordering::SeqCst), 2);
        let stored = store.get(&k).await.unwrap().bytes().await.unwrap();
        assert_eq!(&stored[..], b"0123456789");

        let store = over(cut(HttpErrorKind::Timeout));
        store
            .put_opts(&k, bytes.clone(), create.clone())
            .await
            .unwrap();
        assert_eq!(store.inner.puts.load(Ordering::SeqCst), 2);

        let store = over(cut(HttpErrorKind::Interrupted));
        let plain = store.put(&k, bytes.clone()).await.unwrap_err();
        assert!(interrupted_under_way(&plain), "{plain}");
        assert_eq!(store.inner.puts.load(Ordering::SeqCst), 1);

        let store = over(cut(HttpErrorKind::Connect));
        store.put_opts(&k, bytes, create).await.unwrap_err();
        assert_eq!(store.inner.puts.load(Ordering::SeqCst), 1);
    }
}
