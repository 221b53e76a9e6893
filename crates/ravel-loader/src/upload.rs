//! The uploader: stores a run's encoded objects under content-addressed names, a bounded
//! number at once, each charged to the load budget until it is stored.

use std::sync::Arc;
use std::time::Instant;

use object_store::path::Path;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload};
use ravel_manifest::ObjectEntry;
use tokio::sync::OwnedSemaphorePermit;
use tokio::sync::mpsc::Receiver;
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::LoadError;
use crate::budget::{Budget, units};
use crate::object::EncodedObject;

/// Stores encoded objects into one directory of a store.
#[derive(Debug, Clone)]
pub struct Uploader {
    store: Arc<dyn ObjectStore>,
    dir: Path,
    /// Where sidecars go (see [`Uploader::put_sidecar`]).
    sidecar_dir: Path,
    /// Uploads at once, at most.
    depth: usize,
    budget: Budget,
    /// What names the objects besides their bytes (see [`Uploader::set_salt`]).
    salt: Option<String>,
}

/// An object stored.
#[derive(Debug)]
pub struct StoredObject {
    /// Its place among the objects of its run (0 for the first).
    pub position: usize,
    /// What the manifest lists of it.
    pub entry: ObjectEntry,
    /// Seconds its upload took.
    pub upload_s: f64,
    /// It was stored already (left by an earlier attempt of the same load).
    pub reused: bool,
    /// Its Bloom filters, passed through for the sidecar ([`EncodedObject::blooms`]).
    pub blooms: Vec<Vec<u8>>,
}

/// The outcome of uploading one run's objects.
#[derive(Debug, Default)]
pub struct UploadedRun {
    /// The objects stored, in run order (also when an upload failed: these are left behind).
    pub stored: Vec<StoredObject>,
    /// The first upload failure; the run stopped there.
    pub failure: Option<LoadError>,
}

impl UploadedRun {
    /// Seconds the stored objects' uploads took, summed.
    pub fn upload_s(&self) -> f64 {
        self.stored.iter().map(|s| s.upload_s).sum()
    }
}

/// A content-addressed object written.
#[derive(Debug)]
pub struct Put {
    pub path: Path,
    /// The object was there already.
    pub reused: bool,
}

impl Uploader {
    /// An uploader into `dir` of `store`: at most `depth` (at least 1) uploads at once, each
    /// object charged to `budget` until stored.
    pub fn new(store: Arc<dyn ObjectStore>, dir: Path, depth: usize, budget: Budget) -> Uploader {
        Uploader {
            store,
            sidecar_dir: dir.clone(),
            dir,
            depth: depth.max(1),
            budget,
            salt: None,
        }
    }

    /// Names objects and sidecars from now on by `salt` and their bytes (`None`: by their
    /// bytes alone): a load's identity, so that the same rows loaded from other inputs are
    /// other objects (see `ravel_log::Consumed::object_salt`).
    pub fn set_salt(&mut self, salt: Option<String>) {
        self.salt = salt;
    }

    /// What names the objects besides their bytes.
    pub fn salt(&self) -> Option<&str> {
        self.salt.as_deref()
    }

    /// Stores sidecars ([`Uploader::put_sidecar`]) into `dir` rather than with the objects.
    pub fn with_sidecar_dir(mut self, dir: Path) -> Uploader {
        self.sidecar_dir = dir;
        self
    }

    /// Stores from now on objects into `objects` and sidecars into `sidecars`.
    pub fn set_dirs(&mut self, objects: Path, sidecars: Path) {
        self.dir = objects;
        self.sidecar_dir = sidecars;
    }

    /// Stores the objects `objects` delivers, in the order they come, as run `run`. Each is
    /// charged to the budget (at most `object_cap` units: what the run's own charge leaves)
    /// before its upload starts; waiting for the budget or for an upload slot holds the
    /// sender back. The first failure stops the run at once: no later object is uploaded.
    pub async fn upload_run(
        &self,
        mut objects: Receiver<EncodedObject>,
        run: u64,
        object_cap: usize,
    ) -> UploadedRun {
        let mut pipeline = Pipeline::default();
        let mut position = 0;
        while let Some(obj) = objects.recv().await {
            // Encoded bytes stay charged until their upload completes; waiting here for the
            // budget holds the encoder back (the channel is full) until uploads finish.
            let want = (units(obj.bytes.len() as u64) as usize).min(object_cap) as u32;
            let permit = match want {
                0 => None,
                _ => Some(self.budget.acquire_units(want).await),
            };
            // Uploads that already ended are collected now, so a failure stops the run at once.
            pipeline.collect_finished();
            pipeline.wait_below(self.depth).await;
            if pipeline.done.failure.is_some() {
                break; // stop cutting this run: no more objects to leave behind
            }
            pipeline.uploads.spawn(
                self.clone()
                    .upload(obj, run, position, permit)
                    .in_current_span(),
            );
            position += 1;
        }
        drop(objects);
        pipeline.finish().await
    }

    /// Stores one object and releases its charge.
    #[tracing::instrument(
        name = "object",
        level = "debug",
        skip_all,
        fields(run = run, object = position, rows = obj.rows, key = tracing::field::Empty)
    )]
    async fn upload(
        self,
        mut obj: EncodedObject,
        run: u64,
        position: usize,
        permit: Option<OwnedSemaphorePermit>,
    ) -> Result<StoredObject, LoadError> {
        let t = Instant::now();
        let blooms = std::mem::take(&mut obj.blooms);
        let bytes = obj.bytes.len() as u64;
        tracing::debug!(bytes, rows = obj.rows, "storing object");
        let put = self.put_content_addressed("parquet", obj.bytes).await;
        drop(permit);
        let Put { path, reused } = put?;
        tracing::Span::current().record("key", tracing::field::display(&path));
        let entry = ObjectEntry {
            key: path.to_string(),
            rows: obj.rows as u64,
            bytes,
            run,
            first_key: obj.first_key,
            last_key: obj.last_key,
            ranges: obj.ranges,
            delta_stats: obj.delta_stats,
        };
        Ok(StoredObject {
            position,
            entry,
            upload_s: t.elapsed().as_secs_f64(),
            reused,
            blooms,
        })
    }

    /// Stores `bytes` as `<dir>/<blake3 hash>.<extension>` (the hash of the salt, if any, and
    /// the bytes), create-if-absent: a repeated upload is harmless.
    pub async fn put_content_addressed(
        &self,
        extension: &str,
        bytes: bytes::Bytes,
    ) -> Result<Put, LoadError> {
        self.put_in(&self.dir, extension, bytes).await
    }

    /// Stores a sidecar as [`Uploader::put_content_addressed`] stores an object, in the
    /// sidecars' directory.
    pub async fn put_sidecar(
        &self,
        extension: &str,
        bytes: bytes::Bytes,
    ) -> Result<Put, LoadError> {
        self.put_in(&self.sidecar_dir, extension, bytes).await
    }

    async fn put_in(
        &self,
        dir: &Path,
        extension: &str,
        bytes: bytes::Bytes,
    ) -> Result<Put, LoadError> {
        let path = dir
            .clone()
            .join(format!("{}.{extension}", self.name_of(&bytes).to_hex()));
        let payload = PutPayload::from(bytes);
        let mut reused = false;
        let stored = match self
            .store
            .put_opts(&path, payload.clone(), PutOptions::from(PutMode::Create))
            .await
        {
            // The object is there already (left by a load that failed or was killed, or stored
            // by this put's first attempt): the same bytes under the same name. Writing it
            // again restarts its age, so that `gc`, which deletes only old unreferenced objects,
            // leaves it to the manifest this load is about to write.
            Err(object_store::Error::AlreadyExists { .. }) => {
                tracing::debug!(key = %path, "object exists; rewriting it to restart its age");
                reused = true;
                self.store
                    .put_opts(&path, payload, PutOptions::from(PutMode::Overwrite))
                    .await
            }
            other => other,
        };
        match stored {
            Ok(_) => Ok(Put { path, reused }),
            Err(source) => Err(LoadError::Store {
                key: path.to_string(),
                source,
            }),
        }
    }

    /// The content address of `bytes`: BLAKE3 of the salt (its length first) and the bytes.
    fn name_of(&self, bytes: &[u8]) -> blake3::Hash {
        let Some(salt) = &self.salt else {
            return blake3::hash(bytes);
        };
        let mut h = blake3::Hasher::new();
        h.update(&(salt.len() as u64).to_le_bytes());
        h.update(salt.as_bytes());
        h.update(bytes);
        h.finalize()
    }
}

/// A run's uploads in flight and what the finished ones gave.
#[derive(Default)]
struct Pipeline {
    uploads: JoinSet<Result<StoredObject, LoadError>>,
    done: UploadedRun,
}

impl Pipeline {
    /// Collects the uploads that have ended.
    fn collect_finished(&mut self) {
        while let Some(joined) = self.uploads.try_join_next() {
            self.collect(joined);
        }
    }

    /// Waits until fewer than `depth` uploads run, or one has failed.
    async fn wait_below(&mut self, depth: usize) {
        while self.uploads.len() >= depth && self.done.failure.is_none() {
            match self.uploads.join_next().await {
                Some(joined) => self.collect(joined),
                None => break,
            }
        }
    }

    /// Waits for every upload; the stored objects in run order.
    async fn finish(mut self) -> UploadedRun {
        while let Some(joined) = self.uploads.join_next().await {
            self.collect(joined);
        }
        // In run order: the objects of a run follow each other in key order.
        self.done.stored.sort_by_key(|s| s.position);
        self.done
    }

    fn collect(&mut self, joined: Result<Result<StoredObject, LoadError>, tokio::task::JoinError>) {
        match joined {
            Ok(Ok(stored)) => self.done.stored.push(stored),
            Ok(Err(e)) => {
                self.done.failure.get_or_insert(e);
            }
            Err(join) => panic!("an upload task panicked: {join}"),
        }
    }
}
