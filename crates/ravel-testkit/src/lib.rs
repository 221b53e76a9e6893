//! A real S3 server for tests: `s3s-fs` (an S3 implementation over a directory) served
//! in-process on 127.0.0.1 on a free port, with generated credentials. Nothing to install.
//!
//! s3s-fs checks `If-None-Match` / `If-Match` and then writes, as two steps: two concurrent
//! conditional puts of one key can both succeed (seen here: two layout updates from the same
//! generation both "won"). Real S3 evaluates the condition atomically with the write, so
//! [`S3Server::start`] serializes conditional requests ([`AtomicConditions`]) to behave like
//! it; [`S3Server::start_as_served`] leaves them as s3s-fs serves them, as a deployment on
//! s3s-fs runs.

pub mod arbitrary;
mod fault;
mod requests;

pub use fault::{FaultStore, Gate, Injected, InjectedHandle};
pub use requests::{Listed, RequestCounts};

use std::net::SocketAddr;
use std::sync::Arc;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use object_store::aws::{AmazonS3Builder, S3ConditionalPut};
use ravel_store::Store;
use s3s::auth::SimpleAuth;
use s3s::service::S3ServiceBuilder;
use tokio::net::TcpListener;

/// Sets `table`'s layout settings to `layout`'s (the next generation), as `ravel-load layout`
/// would; panics on failure (a test fixture).
pub async fn set_layout(store: &Store, table: &str, layout: &ravel_layout::Layout) {
    ravel_layout::LayoutStore::new(store, table)
        .expect("table name")
        .update(|l| {
            *l = ravel_layout::Layout {
                generation: l.generation,
                ..layout.clone()
            };
            Ok(())
        })
        .await
        .expect("layout update");
}

/// Commits `n` loads into `table` of `store`, each consuming one input (`synthetic/<i>`, `i`
/// from `first`, changed now) and adding no object, as another writer's small loads leave the
/// log: a table of many versions in seconds. The manifests take the schema of the newest
/// version's first; panics on failure (a test fixture). Returns the newest version.
pub async fn commit_empty_loads(store: &Store, table: &str, first: u64, n: u64) -> u64 {
    use object_store::ObjectStoreExt;
    let os = store.object_store().clone();
    let log = ravel_log::TableLog::new(
        os.clone(),
        ravel_store::TablePaths::new(table).expect("table name"),
    );
    let newest = log.latest().await.expect("the table's log reads");
    let configuration = newest
        .metadata
        .as_ref()
        .expect("a version")
        .configuration
        .clone();
    let mut manifest = published(store, table).await.remove(0);
    manifest.objects.clear();
    let mut version = newest.version.unwrap_or(0);
    for i in first..first + n {
        manifest.load_id = format!("synthetic-{i}");
        let key = format!("{table}/_ravel/manifests/{}.json", manifest.load_id);
        let bytes = serde_json::to_vec(&manifest).expect("serializes");
        os.put(&key.as_str().into(), bytes.into())
            .await
            .expect("manifest stored");
        let input = ravel_log::InputFile {
            name: format!("synthetic/{i}"),
            size: 0,
            version: "0".into(),
            modified_ms: Some(ravel_log::now_ms()),
        };
        let commit = ravel_log::Commit {
            operation: ravel_log::Operation::Load,
            manifest_key: key,
            manifest: &manifest,
            orders: Vec::new(),
            chains: Vec::new(),
            removes: Vec::new(),
            configuration: configuration.clone(),
            written_bytes: 0,
            full: false,
            consumed: ravel_log::Consumed::once(vec![input]),
        };
        if let ravel_log::Committed::Version(v) = log.commit(&commit).await.expect("committed") {
            version = v;
        }
    }
    version
}

/// The manifests of `table`'s newest version, each reduced to the objects the version holds
/// (oldest rank first); panics on failure (a test fixture).
pub async fn published(store: &Store, table: &str) -> Vec<ravel_manifest::Manifest> {
    let log = ravel_log::TableLog::new(
        store.object_store().clone(),
        ravel_store::TablePaths::new(table).expect("table name"),
    );
    let newest = log.latest().await.expect("the table's log reads");
    log.manifests(&newest)
        .await
        .expect("the version's manifests read")
        .into_iter()
        .map(|m| {
            let mut manifest = m.manifest.as_ref().clone();
            manifest.objects = m.objects().map(|(_, o)| o.clone()).collect();
            manifest
        })
        .collect()
}

/// A random number from the standard library's per-process hash keys.
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
    );
    h.finish()
}

/// Serializes requests that carry a precondition (`If-None-Match`, `If-Match`), so that the
/// check and the write of one request are not interleaved with another's, as on real S3.
/// It also holds the server's stalls (see [`S3Server::stall`]).
#[derive(Clone)]
pub struct AtomicConditions {
    inner: s3s::service::S3Service,
    /// `None`: conditional requests as s3s-fs serves them (not atomic).
    lock: Option<Arc<tokio::sync::Mutex<()>>>,
    stalls: Arc<std::sync::Mutex<Vec<Stall>>>,
    requests: Arc<std::sync::Mutex<RequestCounts>>,
}

/// A request pattern the server stops answering (see [`S3Server::stall`]).
struct Stall {
    method: http::Method,
    path_contains: String,
    /// Matching requests let through before the stall begins.
    pass: usize,
    hit: Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
}

/// Tells when a stall began holding a request.
#[derive(Clone)]
pub struct StallHandle(Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>);

impl StallHandle {
    /// Waits until a request is held; false when `timeout` passed first.
    pub fn wait(&self, timeout: std::time::Duration) -> bool {
        let (lock, cv) = &*self.0;
        let guard = lock.lock().expect("stall lock");
        let (guard, _) = cv
            .wait_timeout_while(guard, timeout, |hit| !*hit)
            .expect("stall lock");
        *guard
    }
}

impl AtomicConditions {
    /// Whether `req` is to be held forever (and says so to whoever waits).
    fn stalls(&self, req: &http::Request<hyper::body::Incoming>) -> bool {
        let mut stalls = self.stalls.lock().expect("stalls lock");
        for s in stalls.iter_mut() {
            if req.method() == s.method && req.uri().path().contains(&s.path_contains) {
                if s.pass > 0 {
                    s.pass -= 1;
                    continue;
                }
                let (lock, cv) = &*s.hit;
                *lock.lock().expect("stall lock") = true;
                cv.notify_all();
                return true;
            }
        }
        false
    }
}

impl hyper::service::Service<http::Request<hyper::body::Incoming>> for AtomicConditions {
    type Response = s3s::HttpResponse;
    type Error = s3s::HttpError;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>,
    >;

    fn call(&self, req: http::Request<hyper::body::Incoming>) -> Self::Future {
        if self.stalls(&req) {
            return Box::pin(std::future::pending());
        }
        let conditional = req.headers().contains_key(http::header::IF_NONE_MATCH)
            || req.headers().contains_key(http::header::IF_MATCH);
        let kind = requests::Kind::of(req.method(), req.uri());
        let call = hyper::service::Service::call(&self.inner, req);
        let lock = self.lock.clone().filter(|_| conditional);
        let counts = self.requests.clone();
        Box::pin(async move {
            let _guard = match &lock {
                Some(lock) => Some(lock.lock().await),
                None => None,
            };
            let res = call.await;
            let body = res.as_ref().ok().and_then(|r| r.body().bytes());
            counts
                .lock()
                .expect("request counts lock")
                .count(&kind, body.as_deref());
            res
        })
    }
}

/// A running S3 server; it stops when dropped.
pub struct S3Server {
    pub endpoint: String,
    pub bucket: String,
    pub region: String,
    pub access_key: String,
    pub secret_key: String,
    root: tempfile::TempDir,
    stalls: Arc<std::sync::Mutex<Vec<Stall>>>,
    requests: Arc<std::sync::Mutex<RequestCounts>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl S3Server {
    /// Starts a server with one bucket, `ravel-test`, on its own thread and runtime, whose
    /// conditional requests are atomic (as on real S3).
    pub fn start() -> S3Server {
        S3Server::start_with(true)
    }

    /// [`S3Server::start`] with conditional requests as s3s-fs serves them: two concurrent
    /// creates of one key can both succeed.
    pub fn start_as_served() -> S3Server {
        S3Server::start_with(false)
    }

    fn start_with(atomic: bool) -> S3Server {
        let root = tempfile::tempdir().expect("temp dir");
        let bucket = "ravel-test".to_string();
        std::fs::create_dir_all(root.path().join(&bucket)).expect("bucket dir");
        let access_key = format!("AK{:016X}", random_u64());
        let secret_key = format!("SK{:016X}{:016X}", random_u64(), random_u64());
        let fs = s3s_fs::FileSystem::new(root.path()).expect("s3s-fs root");
        let mut b = S3ServiceBuilder::new(fs);
        b.set_auth(SimpleAuth::from_single(
            access_key.clone(),
            secret_key.clone(),
        ));
        let stalls = Arc::new(std::sync::Mutex::new(Vec::new()));
        let requests = Arc::new(std::sync::Mutex::new(RequestCounts::default()));
        let service = AtomicConditions {
            inner: b.build(),
            lock: atomic.then(|| Arc::new(tokio::sync::Mutex::new(()))),
            stalls: stalls.clone(),
            requests: requests.clone(),
        };
        let (addr_tx, addr_rx) = std::sync::mpsc::channel::<SocketAddr>();
        let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
                addr_tx.send(listener.local_addr().expect("addr")).expect("send addr");
                let http = ConnBuilder::new(TokioExecutor::new());
                loop {
                    tokio::select! {
                        accepted = listener.accept() => {
                            let Ok((socket, _)) = accepted else { continue };
                            // A response's body goes out in writes after its head: with Nagle's
                            // algorithm each would wait for the client's delayed ACK (~40 ms).
                            let _ = socket.set_nodelay(true);
                            let conn = http.serve_connection(TokioIo::new(socket), service.clone()).into_owned();
                            tokio::spawn(async move {
                                let _ = conn.await;
                            });
                        }
                        _ = &mut stop_rx => break,
                    }
                }
            });
        });
        let addr = addr_rx.recv().expect("server started");
        S3Server {
            endpoint: format!("http://{addr}"),
            bucket,
            region: "us-east-1".into(),
            access_key,
            secret_key,
            root,
            stalls,
            requests,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// `s3://ravel-test/<prefix>`.
    pub fn url(&self, prefix: &str) -> String {
        format!("s3://{}/{}", self.bucket, prefix)
    }

    /// The standard AWS environment variables that reach this server, for a child process.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ACCESS_KEY_ID", self.access_key.clone()),
            ("AWS_SECRET_ACCESS_KEY", self.secret_key.clone()),
            ("AWS_REGION", self.region.clone()),
            ("AWS_ALLOW_HTTP", "true".into()),
        ]
    }

    /// From now on the server lets `pass` requests of `method` whose path contains
    /// `path_contains` through and then holds every further one unanswered, as a server that
    /// hangs does (a client in a test can then be killed at a known point).
    pub fn stall(&self, method: http::Method, path_contains: &str, pass: usize) -> StallHandle {
        let hit = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
        self.stalls.lock().expect("stalls lock").push(Stall {
            method,
            path_contains: path_contains.to_string(),
            pass,
            hit: hit.clone(),
        });
        StallHandle(hit)
    }

    /// Ends every stall (requests held already stay held).
    pub fn clear_stalls(&self) {
        self.stalls.lock().expect("stalls lock").clear();
    }

    /// The requests the server answered since it started or since the last
    /// [`S3Server::take_requests`].
    pub fn requests(&self) -> RequestCounts {
        self.requests.lock().expect("request counts lock").clone()
    }

    /// The requests the server answered since it started or since the last call, and counts
    /// from zero again.
    pub fn take_requests(&self) -> RequestCounts {
        std::mem::take(&mut *self.requests.lock().expect("request counts lock"))
    }

    /// A store on this server under `prefix`, built without touching the process environment,
    /// composed as `Store::open` composes one (retries over the S3 client).
    pub fn store(&self, prefix: &str) -> Store {
        self.store_with(prefix, |s3| Arc::new(s3))
    }

    /// A store on this server under `prefix` with `wrap` between the S3 client and the
    /// retries (`RetryStore(wrap(S3))`): a [`FaultStore`] there sees every attempt.
    pub fn store_with(
        &self,
        prefix: &str,
        wrap: impl FnOnce(object_store::aws::AmazonS3) -> Arc<dyn object_store::ObjectStore>,
    ) -> Store {
        let s3 = AmazonS3Builder::new()
            .with_endpoint(&self.endpoint)
            .with_bucket_name(&self.bucket)
            .with_region(&self.region)
            .with_access_key_id(&self.access_key)
            .with_secret_access_key(&self.secret_key)
            .with_allow_http(true)
            .with_conditional_put(S3ConditionalPut::ETagMatch)
            .build()
            .expect("S3 client");
        // More attempts than production's 4, at shorter waits: the fault tests inject faults
        // at rates far above any real network's, and must not fail by chance.
        let policy = ravel_store::RetryPolicy {
            attempts: 12,
            first_backoff: std::time::Duration::from_millis(2),
            max_backoff: std::time::Duration::from_millis(20),
        };
        let s3 = ravel_store::RetryStore::new(wrap(s3), policy);
        let inner: Arc<dyn object_store::ObjectStore> = if prefix.is_empty() {
            Arc::new(s3)
        } else {
            Arc::new(object_store::prefix::PrefixStore::new(s3, prefix))
        };
        Store::new(self.url(prefix), inner)
    }

    /// The directory behind the server (objects are files under `<root>/<bucket>/`).
    pub fn root(&self) -> &std::path::Path {
        self.root.path()
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
