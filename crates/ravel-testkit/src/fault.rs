//! A fault-injecting object store wrapper, in the style of object_store's `ThrottledStore`:
//! one trait, behaviour by composition. What it can do to requests whose path starts with a
//! prefix (all requests by default):
//!
//! - fail every put from the Nth on, permanently ([`FaultStore::fail_puts_from`]);
//! - send every put twice and answer the second, as a client retrying after a lost response
//!   does ([`FaultStore::lose_put_responses`]);
//! - fail a fraction of requests with a transient error, half of them before the request
//!   reaches the store and half after it was carried out (a lost response)
//!   ([`FaultStore::transient`]);
//! - fail a fraction of requests with a permanent error ([`FaultStore::permanent`]);
//! - delay every request ([`FaultStore::latency`]);
//! - ignore put conditions, overwriting ([`FaultStore::ignore_put_conditions`]);
//! - cut a fraction of get bodies short, as a connection closed mid-body does
//!   ([`FaultStore::truncate_gets`]);
//! - hold every put under a prefix until the test opens a gate, so that another writer can
//!   act at that exact point ([`FaultStore::gate_puts`]).
//!
//! Choices are drawn from a seeded sequence, so a failing test repeats. Counters of what was
//! injected let a test assert that its faults really happened.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::{BoxStream, StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

/// What was injected so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Injected {
    pub transient_before: usize,
    pub transient_after: usize,
    pub permanent: usize,
    pub truncated: usize,
}

#[derive(Debug, Default)]
struct Counters {
    transient_before: AtomicUsize,
    transient_after: AtomicUsize,
    permanent: AtomicUsize,
    truncated: AtomicUsize,
}

/// Wraps a store and injects faults as configured.
#[derive(Debug)]
pub struct FaultStore<T: ObjectStore> {
    inner: Arc<T>,
    prefix: String,
    put_prefix: String,
    fail_from_put: Option<usize>,
    lose_responses: bool,
    transient: f64,
    permanent: f64,
    truncate: f64,
    latency: Duration,
    ignore_conditions: bool,
    gate: Option<Gate>,
    puts: AtomicUsize,
    draws: AtomicU64,
    seed: u64,
    counters: Arc<Counters>,
}

/// Where a fault goes relative to the request.
enum Fault {
    None,
    TransientBefore,
    TransientAfter,
    Permanent,
}

impl<T: ObjectStore> FaultStore<T> {
    pub fn new(inner: T) -> Self {
        FaultStore {
            inner: Arc::new(inner),
            prefix: String::new(),
            put_prefix: String::new(),
            fail_from_put: None,
            lose_responses: false,
            transient: 0.0,
            permanent: 0.0,
            truncate: 0.0,
            latency: Duration::ZERO,
            ignore_conditions: false,
            gate: None,
            puts: AtomicUsize::new(0),
            draws: AtomicU64::new(0),
            seed: 0x5EED,
            counters: Arc::default(),
        }
    }

    /// Holds every put whose path starts with `prefix` until [`Gate::open`]; [`Gate::reached`]
    /// waits for the first such put.
    pub fn gate_puts(mut self, prefix: &str) -> (Self, Gate) {
        let gate = Gate {
            prefix: prefix.to_string(),
            open: Arc::new(tokio::sync::Semaphore::new(0)),
            reached: Arc::new(tokio::sync::Notify::new()),
        };
        self.gate = Some(gate.clone());
        (self, gate)
    }

    /// Faults only for paths starting with `prefix`.
    pub fn on_prefix(mut self, prefix: &str) -> Self {
        self.prefix = prefix.to_string();
        self
    }

    /// The seed of the fault sequence.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
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

    /// A `fraction` of requests fail with a transient (`Generic`) error.
    pub fn transient(mut self, fraction: f64) -> Self {
        self.transient = fraction;
        self
    }

    /// A `fraction` of requests fail with a permanent (`PermissionDenied`) error.
    pub fn permanent(mut self, fraction: f64) -> Self {
        self.permanent = fraction;
        self
    }

    /// A `fraction` of get bodies end after half their bytes, without an error.
    pub fn truncate_gets(mut self, fraction: f64) -> Self {
        self.truncate = fraction;
        self
    }

    /// Puts ignore their condition (create-if-absent, ETag match) and overwrite, as an
    /// S3-compatible server without conditional requests does.
    pub fn ignore_put_conditions(mut self) -> Self {
        self.ignore_conditions = true;
        self
    }

    /// Every request waits `latency` first.
    pub fn latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// Puts seen under the put prefix (of `fail_puts_from` / `lose_put_responses`).
    pub fn puts(&self) -> usize {
        self.puts.load(Ordering::SeqCst)
    }

    /// A handle on the counters of injected faults, readable after the store is wrapped.
    pub fn injected(&self) -> InjectedHandle {
        InjectedHandle(self.counters.clone())
    }

    pub fn into_arc(self) -> Arc<dyn ObjectStore> {
        Arc::new(self)
    }

    /// A uniform draw in [0, 1) from the seeded sequence (splitmix64).
    fn draw(&self) -> f64 {
        let n = self.draws.fetch_add(1, Ordering::SeqCst);
        let mut z = self
            .seed
            .wrapping_add(n.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Waits the latency and decides the fault of one request on `location`.
    async fn enter(&self, location: &str) -> Fault {
        if !self.latency.is_zero() {
            tokio::time::sleep(self.latency).await;
        }
        self.decide(location)
    }

    /// The fault of one request on `location`.
    fn decide(&self, location: &str) -> Fault {
        if !location.starts_with(&self.prefix) {
            return Fault::None;
        }
        let d = self.draw();
        if d < self.permanent {
            Fault::Permanent
        } else if d < self.permanent + self.transient / 2.0 {
            Fault::TransientBefore
        } else if d < self.permanent + self.transient {
            Fault::TransientAfter
        } else {
            Fault::None
        }
    }

    fn transient_error(&self, location: &str, after: bool) -> object_store::Error {
        let (counter, what) = if after {
            (&self.counters.transient_after, "response lost")
        } else {
            (&self.counters.transient_before, "connection reset")
        };
        counter.fetch_add(1, Ordering::SeqCst);
        object_store::Error::Generic {
            store: "FaultStore",
            source: format!("injected transient fault on {location}: {what}").into(),
        }
    }

    fn permanent_error(&self, location: &str) -> object_store::Error {
        self.counters.permanent.fetch_add(1, Ordering::SeqCst);
        object_store::Error::PermissionDenied {
            path: location.to_string(),
            source: "injected permanent fault: access denied".into(),
        }
    }

    /// Runs `op` under the fault decided for `location`.
    async fn faulty<R>(
        &self,
        location: &str,
        op: impl std::future::Future<Output = Result<R>>,
    ) -> Result<R> {
        match self.enter(location).await {
            Fault::None => op.await,
            Fault::Permanent => Err(self.permanent_error(location)),
            Fault::TransientBefore => Err(self.transient_error(location, false)),
            Fault::TransientAfter => {
                op.await?;
                Err(self.transient_error(location, true))
            }
        }
    }
}

/// Holds puts under a prefix until opened (see [`FaultStore::gate_puts`]).
#[derive(Debug, Clone)]
pub struct Gate {
    prefix: String,
    open: Arc<tokio::sync::Semaphore>,
    reached: Arc<tokio::sync::Notify>,
}

impl Gate {
    /// Waits until a put reached the gate.
    pub async fn reached(&self) {
        self.reached.notified().await;
    }

    /// Lets every held and later put through.
    pub fn open(&self) {
        self.open
            .add_permits(tokio::sync::Semaphore::MAX_PERMITS / 2);
    }
}

/// Reads the counters of a [`FaultStore`] that has been moved into a wrapper.
#[derive(Debug, Clone)]
pub struct InjectedHandle(Arc<Counters>);

impl InjectedHandle {
    pub fn get(&self) -> Injected {
        Injected {
            transient_before: self.0.transient_before.load(Ordering::SeqCst),
            transient_after: self.0.transient_after.load(Ordering::SeqCst),
            permanent: self.0.permanent.load(Ordering::SeqCst),
            truncated: self.0.truncated.load(Ordering::SeqCst),
        }
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
        mut opts: PutOptions,
    ) -> Result<PutResult> {
        if self.ignore_conditions {
            opts.mode = object_store::PutMode::Overwrite;
        }
        if let Some(gate) = self
            .gate
            .as_ref()
            .filter(|g| location.as_ref().starts_with(&g.prefix))
        {
            gate.reached.notify_one();
            let _pass = gate.open.acquire().await.expect("the gate is never closed");
        }
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
        self.faulty(
            location.as_ref(),
            self.inner.put_opts(location, payload, opts),
        )
        .await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let head = options.head;
        let result = self
            .faulty(location.as_ref(), self.inner.get_opts(location, options))
            .await?;
        let cut = !head
            && location.as_ref().starts_with(&self.prefix)
            && result.range.end > result.range.start + 1
            && self.draw() < self.truncate;
        if !cut {
            return Ok(result);
        }
        self.counters.truncated.fetch_add(1, Ordering::SeqCst);
        let keep = ((result.range.end - result.range.start) / 2) as usize;
        let GetResult {
            payload,
            meta,
            range,
            attributes,
        } = result;
        let body = match payload {
            GetResultPayload::Stream(s) => s.try_collect::<Vec<bytes::Bytes>>().await?.concat(),
            #[allow(unreachable_patterns)]
            GetResultPayload::File(..) => {
                return Err(object_store::Error::NotImplemented {
                    operation: "truncate a local file's body".into(),
                    implementer: "FaultStore".into(),
                });
            }
        };
        let short = bytes::Bytes::from(body).slice(..keep);
        Ok(GetResult {
            payload: GetResultPayload::Stream(
                futures::stream::once(async move { Ok(short) }).boxed(),
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
        let shown = prefix.map_or(String::new(), |p| p.to_string());
        let listed = self.inner.list(prefix);
        // Lists are faulted as a whole (and not delayed): a transient fault ends the listing
        // after its first entry, as a connection dropped mid-listing does.
        match self.decide(&shown) {
            Fault::None => listed,
            Fault::Permanent => {
                let e = self.permanent_error(&shown);
                futures::stream::once(async move { Err(e) }).boxed()
            }
            Fault::TransientBefore | Fault::TransientAfter => {
                let e = self.transient_error(&shown, false);
                listed
                    .take(1)
                    .chain(futures::stream::once(async move { Err(e) }))
                    .boxed()
            }
        }
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        let shown = prefix.map_or(String::new(), |p| p.to_string());
        self.faulty(&shown, self.inner.list_with_delimiter(prefix))
            .await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.faulty(from.as_ref(), self.inner.copy_opts(from, to, options))
            .await
    }
}
