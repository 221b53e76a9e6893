//! Create-if-absent that holds on servers whose own does not: [`ExclusiveCreates`], a wrapper
//! store in the style of object_store's own (`limit.rs`, `throttle.rs`).
//!
//! Some S3-compatible servers check `If-None-Match: *` and then write, as two steps (s3s-fs
//! among them): two concurrent creates of one key can both succeed, the later overwriting the
//! earlier. Others ignore the header. On either, two commits could both "create" one version
//! of a table's log, and one of them would be lost. The store's capabilities say which kind a
//! server is (see the `capability` module); on a server whose create is atomic the wrapper
//! passes every request through.
//!
//! On the others a create of key `K` takes a claim first:
//! 1. PUT `_ravel/claims/<K>/<claim id>`, a key no other writer writes;
//! 2. LIST `_ravel/claims/<K>/`: another live claim means another writer is creating `K` too:
//!    take ours back, wait a random moment, and start again;
//! 3. alone: HEAD `K`; there already, the create fails as `AlreadyExists`; absent, PUT `K`;
//! 4. DELETE the claim.
//!
//! Of two writers that claim `K`, the one that lists second sees the other's claim (each
//! lists only after its own claim is stored), so at most one is ever alone; and a claim is
//! taken back only after its PUT, so a writer that finds no claim finds `K` written. This needs
//! only that a listing shows every put that finished before it (S3 and s3s-fs do). A claim
//! whose writer died is ignored once it is [`CLAIM_EXPIRY`] older than the newest claim
//! listed beside it (the server's clock on both sides); a writer that held its claim for half
//! that time starts again instead of writing. The cost: three requests more per create (claim,
//! list, head) and a delete, only on such servers.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::stream::{BoxStream, TryStreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};
use tokio::sync::OnceCell;

use crate::Capabilities;

/// A claim this much older than the newest claim beside it is a dead writer's: ignored.
pub const CLAIM_EXPIRY: Duration = Duration::from_secs(30);

/// Attempts at a claim before a create gives up (each lost one means another writer was
/// creating the same key at that moment).
const CLAIM_ATTEMPTS: u32 = 64;

/// Where the claims of `key` go.
fn claims_dir(key: &Path) -> Path {
    Path::from(format!("_ravel/claims/{key}"))
}

/// An object store whose create-if-absent holds whatever the server does (see the module).
pub struct ExclusiveCreates {
    inner: Arc<dyn ObjectStore>,
    /// What the server supports, probed on the first create (shared with [`crate::Store`]).
    capabilities: Arc<OnceCell<Capabilities>>,
    /// The store's URL, for the probe's messages.
    location: String,
}

impl ExclusiveCreates {
    pub fn new(
        inner: Arc<dyn ObjectStore>,
        capabilities: Arc<OnceCell<Capabilities>>,
        location: String,
    ) -> ExclusiveCreates {
        ExclusiveCreates {
            inner,
            capabilities,
            location,
        }
    }

    /// Whether creates need a claim on this store.
    async fn needs_claims(&self) -> Result<bool> {
        let caps = self
            .capabilities
            .get_or_try_init(|| crate::capability::detect(self.inner.as_ref(), &self.location))
            .await
            .map_err(|e| object_store::Error::Generic {
                store: "ravel",
                source: Box::new(e),
            })?;
        Ok(!caps.atomic_create())
    }

    /// Creates `location` under a claim (see the module).
    async fn create_claimed(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let dir = claims_dir(location);
        for attempt in 0..CLAIM_ATTEMPTS {
            let claim = dir.clone().join(crate::unique_id());
            let claimed = Instant::now();
            self.inner.put(&claim, PutPayload::from_static(b"")).await?;
            let alone = self.alone(&dir, &claim).await;
            let written: Option<Result<PutResult>> = match alone {
                Ok(true) if claimed.elapsed() < CLAIM_EXPIRY / 2 => {
                    let write = self.write_alone(location, payload.clone(), opts.clone(), claimed);
                    write.await
                }
                Ok(_) => None,
                Err(e) => Some(Err(e)),
            };
            let _ = self.inner.delete(&claim).await;
            if let Some(result) = written {
                return result;
            }
            tracing::debug!(key = %location, attempt, "another writer is creating the key; waiting");
            tokio::time::sleep(backoff(attempt)).await;
        }
        Err(object_store::Error::Generic {
            store: "ravel",
            source: format!(
                "creating {location}: other writers claimed it {CLAIM_ATTEMPTS} times in a row"
            )
            .into(),
        })
    }

    /// Whether `ours` is the only live claim under `dir`.
    async fn alone(&self, dir: &Path, ours: &Path) -> Result<bool> {
        let claims: Vec<ObjectMeta> = self.inner.list(Some(dir)).try_collect().await?;
        let Some(newest) = claims.iter().map(|c| c.last_modified).max() else {
            // Our own claim must be listed: a listing that misses it shows nothing.
            return Ok(false);
        };
        let expiry = chrono::Duration::from_std(CLAIM_EXPIRY).expect("fits");
        let mut ours_listed = false;
        for c in &claims {
            if &c.location == ours {
                ours_listed = true;
            } else if c.last_modified + expiry >= newest {
                return Ok(false);
            } else {
                tracing::warn!(claim = %c.location, "ignoring a claim older than {CLAIM_EXPIRY:?} (a writer that stopped)");
                let _ = self.inner.delete(&c.location).await;
            }
        }
        Ok(ours_listed)
    }

    /// Writes `location` unless it is there, with no other writer claiming it; `None` when
    /// the claim, taken at `claimed`, grew too old to write under (the caller starts again).
    async fn write_alone(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
        claimed: Instant,
    ) -> Option<Result<PutResult>> {
        match self.inner.head(location).await {
            Ok(_) => Some(Err(object_store::Error::AlreadyExists {
                path: location.to_string(),
                source: "created by another writer".into(),
            })),
            Err(object_store::Error::NotFound { .. }) if claimed.elapsed() < CLAIM_EXPIRY / 2 => {
                Some(self.inner.put_opts(location, payload, opts).await)
            }
            Err(object_store::Error::NotFound { .. }) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

/// A random wait before claim attempt `attempt + 1`: up to 5 ms doubled per attempt, at most
/// 500 ms (random, so that writers that collided do not collide again).
fn backoff(attempt: u32) -> Duration {
    let ceiling_ms = (5u64 << attempt.min(7)).min(500);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64);
    let mixed = (nanos ^ u64::from(std::process::id()))
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .rotate_left(17);
    Duration::from_micros(mixed % (ceiling_ms * 1000).max(1))
}

impl fmt::Debug for ExclusiveCreates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ExclusiveCreates({})", self.inner)
    }
}

impl fmt::Display for ExclusiveCreates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ExclusiveCreates({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for ExclusiveCreates {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        if opts.mode == PutMode::Create && self.needs_claims().await? {
            return self.create_claimed(location, payload, opts).await;
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

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}
