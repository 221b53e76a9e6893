//! Garbage collection of a table's objects: an object under `<table>/data/` that no manifest
//! lists is unreferenced, left by a load that failed or was killed before its manifest. `gc`
//! reports every such object and deletes those whose last write is older than a retention.
//!
//! Why a retention and not "unreferenced" alone: a load in progress has stored objects its
//! manifest does not list yet. And since names are content hashes, a load may find an old
//! orphan already under the name of an object it just encoded (a rerun after a crash does);
//! the loader then writes the object again, which restarts its age. So an object is safe from
//! `gc` while any load that references it runs, provided the retention is longer than the
//! longest load (the default, 24 h, is).
//!
//! Order of work: read the manifests, list the objects, pick the unreferenced ones older than
//! the retention; then read the manifests again (a load may have committed meanwhile) and ask
//! each candidate's age again just before deleting it. A referenced object is never deleted.

use std::collections::HashSet;
use std::time::Duration;

use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use ravel_manifest::{ManifestError, read_manifests};
use ravel_store::{Store, StoreError, TablePaths};
use serde::Serialize;

/// What `gc` does.
#[derive(Debug, Clone)]
pub struct GcOptions {
    /// Unreferenced objects written longer ago than this are deleted.
    pub older_than: Duration,
    /// Report only; delete nothing.
    pub dry_run: bool,
}

/// One unreferenced object.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Unreferenced {
    pub key: String,
    pub bytes: u64,
    /// Seconds since its last write.
    pub age_s: u64,
    /// Deleted by this run.
    pub deleted: bool,
}

/// What `gc` found and did.
#[derive(Debug, Clone, Serialize)]
pub struct GcReport {
    pub table: String,
    pub manifests: usize,
    /// Objects under the table's data prefix.
    pub objects: usize,
    /// Of those, listed by a manifest.
    pub referenced: usize,
    pub unreferenced: Vec<Unreferenced>,
    pub deleted: usize,
    pub deleted_bytes: u64,
    pub older_than_s: u64,
    pub dry_run: bool,
}

/// Why `gc` could not run.
#[derive(Debug, thiserror::Error)]
pub enum GcError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error("table {0:?} has no manifests and no objects in this store")]
    NoSuchTable(String),
    #[error("{what} {key}")]
    Request {
        what: &'static str,
        key: String,
        #[source]
        source: object_store::Error,
    },
}

impl GcError {
    /// Whether the user named something that is not there.
    pub fn is_invalid_input(&self) -> bool {
        matches!(
            self,
            GcError::NoSuchTable(_)
                | GcError::Store(StoreError::BadTableName(_) | StoreError::BadUrl { .. })
        )
    }
}

async fn referenced(
    store: &dyn ObjectStore,
    table: &TablePaths,
) -> Result<(usize, HashSet<String>), GcError> {
    let manifests = read_manifests(store, table).await?;
    let keys = manifests
        .iter()
        .flat_map(|(_, m)| {
            m.objects
                .iter()
                .map(|o| o.key.clone())
                .chain(m.blooms.iter().map(|b| b.key.clone()))
        })
        .collect();
    Ok((manifests.len(), keys))
}

fn age_s(now: chrono::DateTime<chrono::Utc>, written: chrono::DateTime<chrono::Utc>) -> u64 {
    (now - written).num_seconds().max(0) as u64
}

/// Reports the unreferenced objects of `table` and deletes those older than the retention.
pub async fn gc(store: &Store, table: &str, opts: &GcOptions) -> Result<GcReport, GcError> {
    let table = TablePaths::new(table)?;
    let os = store.object_store().as_ref();
    let (manifests, refs) = referenced(os, &table).await?;
    let dir = table.data_dir();
    let listed: Vec<object_store::ObjectMeta> =
        os.list(Some(&dir))
            .try_collect()
            .await
            .map_err(|source| GcError::Request {
                what: "listing",
                key: dir.to_string(),
                source,
            })?;
    if manifests == 0 && listed.is_empty() {
        return Err(GcError::NoSuchTable(table.name().to_string()));
    }
    let now = chrono::Utc::now();
    let retention = opts.older_than.as_secs();
    let mut unreferenced: Vec<Unreferenced> = listed
        .iter()
        .filter(|m| !refs.contains(m.location.as_ref()))
        .map(|m| Unreferenced {
            key: m.location.to_string(),
            bytes: m.size,
            age_s: age_s(now, m.last_modified),
            deleted: false,
        })
        .collect();
    unreferenced.sort_by(|a, b| a.key.cmp(&b.key));
    let mut deleted_bytes = 0;
    if !opts.dry_run && unreferenced.iter().any(|u| u.age_s >= retention) {
        // A load may have committed since the first read: its objects are referenced now.
        let (_, refs_now) = referenced(os, &table).await?;
        for u in unreferenced.iter_mut() {
            if u.age_s < retention || refs_now.contains(&u.key) {
                continue;
            }
            // A load may have written the object again (reusing it) since the listing.
            let path = Path::from(u.key.as_str());
            let meta = match os.head(&path).await {
                Ok(meta) => meta,
                Err(object_store::Error::NotFound { .. }) => continue,
                Err(source) => {
                    return Err(GcError::Request {
                        what: "reading the age of",
                        key: u.key.clone(),
                        source,
                    });
                }
            };
            u.age_s = age_s(chrono::Utc::now(), meta.last_modified);
            if u.age_s < retention {
                continue;
            }
            match os.delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(source) => {
                    return Err(GcError::Request {
                        what: "deleting",
                        key: u.key.clone(),
                        source,
                    });
                }
            }
            tracing::info!(key = %u.key, bytes = u.bytes, age_s = u.age_s, "deleted");
            u.deleted = true;
            deleted_bytes += u.bytes;
        }
    }
    Ok(GcReport {
        table: table.name().to_string(),
        manifests,
        objects: listed.len(),
        referenced: listed.len() - unreferenced.len(),
        deleted: unreferenced.iter().filter(|u| u.deleted).count(),
        unreferenced,
        deleted_bytes,
        older_than_s: retention,
        dry_run: opts.dry_run,
    })
}
