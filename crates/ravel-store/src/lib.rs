//! Stores and table paths.
//!
//! A store is named by a URL: a local directory (the embedded default, e.g. `./ravel-store`,
//! or `file:///abs/path`) or `s3://bucket/prefix` for any S3-compatible server. S3 settings
//! (endpoint, region, credentials, `AWS_ALLOW_HTTP`) come only from the standard AWS environment
//! variables, never from arguments, so no secret passes through argv or this crate's messages.
//!
//! Inside a store every table lives under its own prefix:
//!
//! ```text
//! <table>/_layout/<generation>.json   layout documents, one per generation (create-if-absent)
//! <table>/_schema.json                the table's recorded Arrow schema (once)
//! <table>/data/<hash>.parquet         objects
//! <table>/_delta_log/<version>.json   the table's versions (Delta Lake log entries)
//! <table>/_ravel/manifests/<id>.json  one manifest per load or compaction
//! <table>/_ravel/blooms/<hash>.blooms a load's or compaction's Bloom sidecar
//! <table>/_ravel/tmp/<operation>/     a running merge's scratch objects (spill, passes)
//! <table>/manifests/<load-id>.json    manifests of tables written before the log existed
//! <table>/_leases/<lease-id>.json    one lease per running load (see [`lease`])
//! _ravel/capabilities.json            what the server supports (see `Store::capabilities`)
//! _ravel/clock                        written to read the store's clock (see [`StoreClock`])
//! ```
//!
//! S3 stores retry transient faults ([`RetryStore`]) on top of the HTTP client's own retries,
//! within bounded timeouts (see the `s3` module), so an unreachable server fails a command in
//! about half a minute, naming its endpoint.

mod capability;
mod chain;
mod clock;
mod create;
mod exclusive;
pub mod lease;
mod object_file;
mod overlay;
mod retry;
mod s3;
mod staging;

pub use capability::Capabilities;
pub use chain::{ErrorChain, prints_its_source};
pub use clock::{SKEW_BOUND, StoreClock};
pub use create::{CreateError, create_or_confirm};
pub use exclusive::{CLAIM_EXPIRY, ExclusiveCreates};
pub use lease::{FoundLease, HeldLease, Lease, LeaseError, STALE_AFTER, read_leases, unique_id};
pub use object_file::ObjectFile;
pub use retry::{BrokenAnswer, GaveUp, RetryPolicy, RetryStore, is_transient};
pub use s3::{CLIENT_RETRIES, CONNECT_TIMEOUT, REQUEST_TIMEOUT, RETRY_BUDGET};
pub use staging::StagingFile;

use std::fmt;
use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;

use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::prefix::PrefixStore;

/// Errors opening a store or naming a table.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("store URL {url:?}: {message}")]
    BadUrl { url: String, message: String },
    #[error("cannot create local store directory {path}")]
    CreateDir {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("store directory {path} does not exist (commands that write create it)")]
    NoSuchStore { path: String },
    #[error("store path {path} is a file, not a directory")]
    NotADirectory { path: String },
    #[error("store {url} needs S3 settings from the environment: {missing}")]
    MissingS3Settings { url: String, missing: String },
    #[error("cannot open store {url}")]
    Open {
        url: String,
        #[source]
        source: object_store::Error,
    },
    #[error("probing what the server of store {url} supports")]
    Probe {
        url: String,
        #[source]
        source: object_store::Error,
    },
    #[error(
        "table name {0:?} is not allowed: use 1-128 characters of A-Z a-z 0-9 _ - and do not start with _ or -"
    )]
    BadTableName(String),
}

impl StoreError {
    /// Whether the error is about what the user gave (a URL, a path, a name, the environment)
    /// rather than a failure of the store.
    pub fn is_invalid_input(&self) -> bool {
        matches!(
            self,
            StoreError::BadUrl { .. }
                | StoreError::BadTableName(_)
                | StoreError::NoSuchStore { .. }
                | StoreError::NotADirectory { .. }
                | StoreError::MissingS3Settings { .. }
        )
    }
}

/// The nearest existing ancestor of `path` (itself included), when that is not a directory:
/// a store path that is, or lies under, a regular file.
fn file_in_the_way(path: &FsPath) -> Option<&FsPath> {
    let existing = path
        .ancestors()
        .filter(|a| !a.as_os_str().is_empty())
        .find(|a| a.exists())?;
    (!existing.is_dir()).then_some(existing)
}

/// `url` with anything between the scheme and an `@` (credentials someone typed into it)
/// replaced by `***`, so an error never repeats a secret.
fn redacted(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) => (Some(s), r),
        None => (None, url),
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let shown = match rest[..authority_end].rfind('@') {
        Some(at) => format!("***{}", &rest[at..]),
        None => rest.to_string(),
    };
    match scheme {
        Some(s) => format!("{s}://{shown}"),
        None => shown,
    }
}

/// Where a store is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// A local directory (created when missing).
    Local(PathBuf),
    /// An S3 bucket and a key prefix inside it (possibly empty).
    S3 { bucket: String, prefix: String },
}

impl StoreLocation {
    /// Parses a store URL: `s3://bucket[/prefix]`, `file:///path`, or a plain path.
    pub fn parse(url: &str) -> Result<StoreLocation, StoreError> {
        let bad = |message: &str| StoreError::BadUrl {
            url: redacted(url),
            message: message.to_string(),
        };
        if url.is_empty() {
            return Err(bad("empty"));
        }
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(bad("no bucket name after s3://"));
            }
            if bucket.contains(['@', ':', '?', '#']) {
                return Err(bad(
                    "a bucket name has no credentials, port or query; settings come from AWS_* environment variables",
                ));
            }
            let prefix = prefix.trim_matches('/').to_string();
            Path::parse(&prefix).map_err(|e| bad(&format!("bad prefix: {e}")))?;
            return Ok(StoreLocation::S3 {
                bucket: bucket.to_string(),
                prefix,
            });
        }
        if let Some(path) = url.strip_prefix("file://") {
            return Ok(StoreLocation::Local(PathBuf::from(path)));
        }
        if let Some((scheme, _)) = url.split_once("://") {
            return Err(bad(&format!(
                "scheme {scheme}:// is not supported; use a local path or s3://bucket/prefix"
            )));
        }
        Ok(StoreLocation::Local(PathBuf::from(url)))
    }
}

impl fmt::Display for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreLocation::Local(p) => write!(f, "{}", p.display()),
            StoreLocation::S3 { bucket, prefix } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            StoreLocation::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
        }
    }
}

/// An opened store: an object store rooted at the store's prefix.
#[derive(Clone)]
pub struct Store {
    location: String,
    /// The store as callers use it: creates are exclusive whatever the server does.
    inner: Arc<dyn ObjectStore>,
    /// The store as the server answers (the capability probe's).
    raw: Arc<dyn ObjectStore>,
    /// The directory of a local store (see [`Store::staging_files`]).
    local_root: Option<PathBuf>,
    capabilities: Arc<tokio::sync::OnceCell<Capabilities>>,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("location", &self.location)
            .finish()
    }
}

impl Store {
    /// Opens an existing store: a local directory must exist (a mistyped path is an error,
    /// not an empty store; a regular file is [`StoreError::NotADirectory`]). S3 settings come
    /// from the environment (`AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_ALLOW_HTTP`, ...), with ETag-matching conditional puts;
    /// without credentials, without an endpoint or region, or with an `http://` endpoint but
    /// no `AWS_ALLOW_HTTP=true`, it is [`StoreError::MissingS3Settings`], naming the variables.
    pub fn open(url: &str) -> Result<Store, StoreError> {
        Store::open_with(url, false)
    }

    /// Opens a store to write to, creating a local directory when missing.
    pub fn create(url: &str) -> Result<Store, StoreError> {
        Store::open_with(url, true)
    }

    fn open_with(url: &str, create: bool) -> Result<Store, StoreError> {
        let location = StoreLocation::parse(url)?;
        let shown = location.to_string();
        match location {
            StoreLocation::Local(path) => {
                if let Some(file) = file_in_the_way(&path) {
                    return Err(StoreError::NotADirectory {
                        path: file.display().to_string(),
                    });
                }
                if create {
                    std::fs::create_dir_all(&path).map_err(|source| StoreError::CreateDir {
                        path: path.display().to_string(),
                        source,
                    })?;
                } else if !path.is_dir() {
                    return Err(StoreError::NoSuchStore {
                        path: path.display().to_string(),
                    });
                }
                let fs = LocalFileSystem::new_with_prefix(&path)
                    .map_err(|source| StoreError::Open {
                        url: shown.clone(),
                        source,
                    })?
                    .with_automatic_cleanup(true);
                let root = std::fs::canonicalize(&path).unwrap_or(path);
                Ok(Store {
                    local_root: Some(root),
                    ..Store::new(shown, Arc::new(fs))
                })
            }
            StoreLocation::S3 { bucket, prefix } => {
                let s3 = s3::open(&shown, &bucket)?;
                let inner: Arc<dyn ObjectStore> = if prefix.is_empty() {
                    Arc::new(s3)
                } else {
                    Arc::new(PrefixStore::new(s3, prefix.as_str()))
                };
                Ok(Store::new(shown, inner))
            }
        }
    }

    /// Wraps an object store the caller built (tests, wrappers such as fault injection), with
    /// creates made exclusive where its server's are not ([`ExclusiveCreates`]).
    pub fn new(location: impl Into<String>, inner: Arc<dyn ObjectStore>) -> Store {
        let location = location.into();
        let capabilities: Arc<tokio::sync::OnceCell<Capabilities>> = Arc::default();
        let exclusive =
            ExclusiveCreates::new(inner.clone(), capabilities.clone(), location.clone());
        Store {
            location,
            inner: Arc::new(exclusive),
            raw: inner,
            local_root: None,
            capabilities,
        }
    }

    /// What the store's server supports: read from the store's record, or probed once and
    /// recorded (see the `capability` module). Cached for this handle's life.
    pub async fn capabilities(&self) -> Result<Capabilities, StoreError> {
        self.capabilities
            .get_or_try_init(|| capability::detect(self.raw.as_ref(), &self.location))
            .await
            .copied()
    }

    /// The store's location as shown to users (no secrets: those never enter the URL).
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The object store, rooted at the store's prefix.
    pub fn object_store(&self) -> &Arc<dyn ObjectStore> {
        &self.inner
    }
}

/// The paths of one table inside a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TablePaths {
    name: String,
}

impl TablePaths {
    /// Checks the table name and names its paths.
    pub fn new(name: &str) -> Result<TablePaths, StoreError> {
        let ok = !name.is_empty()
            && name.len() <= 128
            && !name.starts_with(['_', '-'])
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !ok {
            return Err(StoreError::BadTableName(name.to_string()));
        }
        Ok(TablePaths {
            name: name.to_string(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `<table>/_layout/`: one layout document per generation.
    pub fn layout_dir(&self) -> Path {
        Path::from_iter([self.name.as_str(), "_layout"])
    }

    /// `<table>/_layout/<generation, 20 digits>.json`.
    pub fn layout_doc(&self, generation: u64) -> Path {
        self.layout_dir().join(format!("{generation:020}.json"))
    }

    /// `<table>/_schema.json`: the table's recorded Arrow schema.
    pub fn schema_doc(&self) -> Path {
        Path::from_iter([self.name.as_str(), "_schema.json"])
    }

    /// `<table>/data/`.
    pub fn data_dir(&self) -> Path {
        Path::from_iter([self.name.as_str(), "data"])
    }

    /// `<table>/manifests/`: where builds without a version log published their loads. A
    /// table with no log reads as the union of these manifests (its first version).
    pub fn manifests_dir(&self) -> Path {
        Path::from_iter([self.name.as_str(), "manifests"])
    }

    /// `<table>/_ravel/manifests/`: one manifest per load or compaction, written before the
    /// version that adds its objects (an unreferenced one is a commit that never happened).
    pub fn commit_manifests_dir(&self) -> Path {
        Path::from_iter([self.name.as_str(), "_ravel", "manifests"])
    }

    /// `<table>/_ravel/blooms/`: the loads' Bloom sidecars. Under a directory Delta tools
    /// treat as the table's own (a leading `_`), so that a `vacuum` by another engine, which
    /// deletes every file no `add` names, leaves them alone.
    pub fn blooms_dir(&self) -> Path {
        Path::from_iter([self.name.as_str(), "_ravel", "blooms"])
    }

    /// `<table>/_ravel/tmp/`: scratch objects of running operations (see
    /// [`TablePaths::scratch_dir`]).
    pub fn scratch_root(&self) -> Path {
        Path::from_iter([self.name.as_str(), "_ravel", "tmp"])
    }

    /// `<table>/_ravel/tmp/<operation>/`: the objects one operation writes and reads back but
    /// never publishes (a merge's spill and intermediate passes). Only that operation writes or
    /// deletes under it; `gc` collects what a dead one left, as it collects orphaned objects.
    pub fn scratch_dir(&self, operation: &str) -> Path {
        self.scratch_root().join(operation)
    }

    /// `<table>/_delta_log/`: the table's versions, one entry each, in Delta Lake's format.
    pub fn log_dir(&self) -> Path {
        Path::from_iter([self.name.as_str(), "_delta_log"])
    }

    /// `<table>/_delta_log/<version, 20 digits>.json`.
    pub fn log_entry(&self, version: u64) -> Path {
        self.log_dir().join(format!("{version:020}.json"))
    }

    /// A path inside the store as the table's log names it: relative to the table's root.
    /// `None` when `key` is not under the root.
    pub fn relative<'a>(&self, key: &'a str) -> Option<&'a str> {
        key.strip_prefix(self.name.as_str())?.strip_prefix('/')
    }

    /// The store path of `relative`, a path the table's log names.
    pub fn absolute(&self, relative: &str) -> String {
        format!("{}/{relative}", self.name)
    }

    /// `<table>/`: everything stored for the table lies under it.
    pub fn root(&self) -> Path {
        Path::from(self.name.as_str())
    }

    /// `<table>/_leases/`: one lease per running load, which `gc` respects.
    pub fn leases_dir(&self) -> Path {
        Path::from_iter([self.name.as_str(), "_leases"])
    }

    /// `<table>/_leases/<lease id>.json`.
    pub fn lease(&self, id: &str) -> Path {
        self.leases_dir().join(format!("{id}.json"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::ObjectStoreExt;

    #[test]
    fn parses_store_urls() {
        assert_eq!(
            StoreLocation::parse("./ravel-store").unwrap(),
            StoreLocation::Local("./ravel-store".into())
        );
        assert_eq!(
            StoreLocation::parse("file:///tmp/x").unwrap(),
            StoreLocation::Local("/tmp/x".into())
        );
        assert_eq!(
            StoreLocation::parse("s3://bucket/a/b/").unwrap(),
            StoreLocation::S3 {
                bucket: "bucket".into(),
                prefix: "a/b".into()
            }
        );
        assert_eq!(
            StoreLocation::parse("s3://bucket").unwrap().to_string(),
            "s3://bucket"
        );
        for bad in [
            "",
            "s3://",
            "s3:///x",
            "gs://b/p",
            "s3://key:secret@bucket/p",
        ] {
            let err = StoreLocation::parse(bad).unwrap_err();
            assert!(matches!(err, StoreError::BadUrl { .. }), "{bad}");
        }
        // A URL carrying a secret is refused without repeating it.
        let err = StoreLocation::parse("s3://AKIAXX:SuperSecret123@bucket/p").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("environment"), "{msg}");
        assert!(
            !msg.contains("SuperSecret123") && !msg.contains("AKIAXX"),
            "{msg}"
        );
        assert!(msg.contains("s3://***@bucket/p"), "{msg}");
        let err = StoreLocation::parse("gs://user:pw@b/p").unwrap_err();
        assert!(!err.to_string().contains("pw"), "{err}");
    }

    #[test]
    fn table_names_and_paths() {
        let t = TablePaths::new("hits").unwrap();
        assert_eq!(
            t.layout_doc(7).as_ref(),
            "hits/_layout/00000000000000000007.json"
        );
        assert_eq!(t.data_dir().as_ref(), "hits/data");
        assert_eq!(t.manifests_dir().as_ref(), "hits/manifests");
        assert_eq!(
            t.log_entry(12).as_ref(),
            "hits/_delta_log/00000000000000000012.json"
        );
        assert_eq!(t.relative("hits/data/a.parquet"), Some("data/a.parquet"));
        assert_eq!(t.relative("hitsx/data/a.parquet"), None);
        assert_eq!(t.absolute("data/a.parquet"), "hits/data/a.parquet");
        assert_eq!(t.schema_doc().as_ref(), "hits/_schema.json");
        assert_eq!(t.root().as_ref(), "hits");
        assert_eq!(t.lease("x").as_ref(), "hits/_leases/x.json");
        for bad in ["", "_x", "-x", "a/b", "a b", "..", &"x".repeat(129)] {
            assert!(TablePaths::new(bad).is_err(), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn opens_a_local_directory_and_creates_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("nested/store");
        assert!(matches!(
            Store::open(root.to_str().unwrap()),
            Err(StoreError::NoSuchStore { .. })
        ));
        assert!(!root.exists());
        let store = Store::create(root.to_str().unwrap()).unwrap();
        assert!(root.is_dir());
        Store::open(root.to_str().unwrap()).unwrap();
        store
            .object_store()
            .put(&Path::from("t/x"), b"1".to_vec().into())
            .await
            .unwrap();
        assert!(root.join("t/x").is_file());
    }

    #[test]
    fn a_regular_file_is_not_a_store() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"keep").unwrap();
        for url in [file.clone(), file.join("under")] {
            let url = url.to_str().unwrap();
            for err in [
                Store::open(url).unwrap_err(),
                Store::create(url).unwrap_err(),
            ] {
                assert!(matches!(err, StoreError::NotADirectory { .. }), "{err}");
                assert!(err.is_invalid_input());
                assert_eq!(
                    err.to_string(),
                    format!("store path {} is a file, not a directory", file.display())
                );
            }
        }
        assert_eq!(std::fs::read(&file).unwrap(), b"keep");
    }

    #[tokio::test]
    async fn capabilities_are_probed_once_and_read_from_the_record_afterwards() {
        let dir = tempfile::tempdir().unwrap();
        let url = dir.path().to_str().unwrap();
        let store = Store::create(url).unwrap();
        let caps = store.capabilities().await.unwrap();
        assert!(caps.conditional_create, "a local directory has it");
        let record = dir.path().join("_ravel/capabilities.json");
        assert!(record.is_file());
        // No probe key is left behind.
        let left: Vec<_> = std::fs::read_dir(dir.path().join("_ravel"))
            .unwrap()
            .collect();
        assert_eq!(left.len(), 1);
        // A later handle reads the record instead of probing: a record saying "no" is believed.
        let no = Capabilities {
            conditional_create: false,
            ..caps
        };
        std::fs::write(&record, serde_json::to_vec(&no).unwrap()).unwrap();
        let later = Store::open(url).unwrap();
        assert_eq!(later.capabilities().await.unwrap(), no);
        assert!(!no.atomic_create());
        // A record without the race's answer (an older build's) is probed anew.
        std::fs::write(&record, br#"{"conditional_create":true,"probed_at_ms":1}"#).unwrap();
        let again = Store::open(url).unwrap().capabilities().await.unwrap();
        assert_eq!(
            again.atomic_create,
            Some(true),
            "a local directory creates atomically"
        );
        // The first handle keeps what it learned.
        assert!(store.capabilities().await.unwrap().conditional_create);
    }
}
